"""``tune ... --out`` updates the override file in use; it never replaces it.

The file may hold other tiers, other fields of the measured tier (the fusion world sizes
``tune fusion`` wrote, a hand-written field) and the user's comments: all of it stays.
Two runs at once, or another program editing the file while a run writes, lose no update:
the file is read under its folder's lock and checked again just before it is replaced.
"""

import json
import os
import subprocess
import sys
import tomllib

import pytest

from sglang_arch import files
from sglang_arch.arch import reset_default_registry
from sglang_arch.arch.registry import load_override_file
from sglang_arch.cli import main
from sglang_arch.tune import fusion as tf

from .test_tune_hostile import valid_results

TOML = """# the override file this node uses (SGLANG_ARCH_CONFIG)
[architectures."12.0"]
# measured with tune fusion, 2026-11-02
allreduce_fusion_auto_world_sizes = [2]  # PCIe box only

[architectures."9.0"]
name = "my tier"   # hand-written
"""


def results_12():
    doc = valid_results()
    doc["run"]["capability"] = "12.0"
    return doc


@pytest.fixture(autouse=True)
def _node(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "12.0")
    monkeypatch.setenv("SGLANG_ARCH_GPU_COUNT", "8")
    reset_default_registry()


def collectives(capsys, tmp_path, out):
    results = tmp_path / "r.json"
    results.write_text(json.dumps(results_12()))
    code = main(["tune", "collectives", "--from-results", str(results), "--out", str(out)])
    return code, capsys.readouterr()


def fusion(capsys, out, world_size="2", won=True, extra=()):
    without, with_ = ("1,2,3", "4,5,6") if won else ("4,5,6", "1,2,3")
    code = main(["tune", "fusion", "--world-size", world_size, "--without", without, "--with", with_, "--out", str(out),
                 *extra])
    return code, capsys.readouterr()


def test_collectives_keeps_the_other_tiers_fields_and_comments(tmp_path, capsys, monkeypatch):
    out = tmp_path / "arch.toml"
    out.write_text(TOML)
    code, (_, err) = collectives(capsys, tmp_path, out)
    assert code == 0, err
    text = out.read_text()
    for line in TOML.splitlines():  # every line of the user's, byte for byte
        assert line in text.splitlines(), line
    entries = load_override_file(str(out))
    assert entries["12.0"]["allreduce_fusion_auto_world_sizes"] == [2]
    assert entries["9.0"] == {"name": "my tier"}
    assert {"2", "4"} <= set(entries["12.0"]["symm_mem_two_shot"])  # the bounds without multicast it measured
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(out))
    reset_default_registry()
    code = main(["explain", "12.0", "--world-size", "2", "--json"])  # the merged file is read by the registry
    assert code == 0


def test_collectives_keeps_a_hand_written_world_size_it_did_not_measure(tmp_path, capsys):
    out = tmp_path / "arch.json"
    out.write_text(json.dumps({"architectures": {"12.0": {"symm_mem_two_shot": {"16": "2MiB", "2": "1MiB"}},
                                                 "10.0": {"sources": ["mine"]}}}))
    code, (_, err) = collectives(capsys, tmp_path, out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["architectures"]["10.0"] == {"sources": ["mine"]}
    sizes = doc["architectures"]["12.0"]["symm_mem_two_shot"]
    assert sizes["16"] == "2MiB" and sizes["2"] != "1MiB"  # measured: replaced; not measured: kept


def test_fusion_keeps_the_files_comments_and_other_entries(tmp_path, capsys):
    out = tmp_path / "arch.toml"
    out.write_text(TOML)
    code, (_, err) = fusion(capsys, out, "4")
    assert code == 0, err
    text = out.read_text()
    assert "# the override file this node uses" in text and "# measured with tune fusion, 2026-11-02" in text
    assert 'name = "my tier"   # hand-written' in text
    assert tomllib.loads(text)["architectures"]["12.0"]["allreduce_fusion_auto_world_sizes"] == [2, 4]


def test_a_layout_the_update_cannot_keep_is_refused_with_comments_and_rewritten_without(tmp_path, capsys):
    """Dotted keys for the entry: with comments, refused in one line naming the layout
    accepted (nothing written); without comments, the data is written whole."""
    dotted = '[architectures]\n"12.0".allreduce_fusion_auto_world_sizes = [2]\n"12.0".sources = ["x"]\n'
    out = tmp_path / "arch.toml"
    out.write_text("# keep me\n" + dotted)
    code, (_, err) = fusion(capsys, out, "4")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "keep the file's comments" in err, err
    assert "accepted:" in err and out.read_text() == "# keep me\n" + dotted
    out.write_text(dotted)
    code, (_, err) = fusion(capsys, out, "4")
    assert code == 0, err
    assert tomllib.loads(out.read_text())["architectures"]["12.0"]["allreduce_fusion_auto_world_sizes"] == [2, 4]


def test_an_existing_file_that_is_no_override_is_not_replaced(tmp_path, capsys):
    out = tmp_path / "notes.toml"
    out.write_text("these are my notes, not TOML\n")
    code, (_, err) = collectives(capsys, tmp_path, out)
    assert code == 2 and "--out" in err and "accepted:" in err, err
    assert out.read_text() == "these are my notes, not TOML\n"


def test_a_second_run_at_once_waits_and_adds_its_update(tmp_path, capsys, monkeypatch):
    """While this run has read the file, a second run (another process) measures another
    world size.  It waits for the folder's lock, then reads what this run wrote: the file
    ends with both world sizes, never one update lost."""
    out = tmp_path / "arch.toml"
    out.write_text(TOML)
    env = dict(os.environ, SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="8")
    second = []
    real = tf.existing_override

    def read_then_race(path):
        found = real(path)
        if not second:
            second.append(subprocess.Popen([sys.executable, "-m", "sglang_arch", "tune", "fusion", "--world-size", "8",
                                            "--without", "1,2,3", "--with", "4,5,6", "--out", str(out)], env=env,
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            try:  # the second run finishes here unless the lock holds it back
                second[0].wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
        return found

    monkeypatch.setattr(tf, "existing_override", read_then_race)
    code, (_, err) = fusion(capsys, out, "4")
    assert code == 0, err
    _, other_err = second[0].communicate(timeout=60)
    assert second[0].returncode == 0, other_err
    sizes = tomllib.loads(out.read_text())["architectures"]["12.0"]["allreduce_fusion_auto_world_sizes"]
    assert sizes == [2, 4, 8]


def test_concurrent_fusion_runs_lose_no_update(tmp_path):
    """Generated: 10 rounds of two runs started together, each adding its own world size."""
    env = dict(os.environ, SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="8")
    for round_ in range(10):
        out = tmp_path / f"arch{round_}.toml"
        out.write_text(TOML)
        procs = [subprocess.Popen([sys.executable, "-m", "sglang_arch", "tune", "fusion", "--world-size", ws,
                                   "--without", "1,2,3", "--with", "4,5,6", "--out", str(out)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for ws in ("4", "8")]
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
        sizes = tomllib.loads(out.read_text())["architectures"]["12.0"]["allreduce_fusion_auto_world_sizes"]
        assert sizes == [2, 4, 8], (round_, sizes)


def test_an_edit_by_another_program_while_the_run_writes_is_kept(tmp_path, capsys, monkeypatch):
    """An editor saves the override file after the run read it: the run stops in one line
    and the editor's text stays."""
    out = tmp_path / "arch.toml"
    out.write_text(TOML)
    from sglang_arch.tune import merge

    real = merge.updated_text

    def edit_meanwhile(*args, **kwargs):
        text = real(*args, **kwargs)
        out.write_text(TOML + "# saved by the editor\n")
        return text

    monkeypatch.setattr(merge, "updated_text", edit_meanwhile)
    code, (_, err) = fusion(capsys, out, "4")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "changed by another program" in err, err
    assert out.read_text() == TOML + "# saved by the editor\n"
    assert sorted(os.listdir(tmp_path)) == ["arch.toml"]


def test_a_journal_of_a_whole_run_leaves_only_its_leftovers_to_remove(tmp_path):
    """Killed after the point of no return (the journal says "done"): the files stay as the
    run wrote them; its kept originals go."""
    target = tmp_path / "a.txt"
    target.write_text("new\n")
    kept = tmp_path / ".a.txt.1.00000000.bak"
    kept.write_text("old\n")
    files._write_journal(str(tmp_path), {"version": files.JOURNAL_VERSION, "state": "done", "pid": 1, "made": [],
                                         "entries": [{"path": str(target), "tmp": None, "bak": str(kept),
                                                      "existed": True, "new": files.digest(b"new\n")}]})
    assert files.recover(str(tmp_path)) is None
    assert sorted(os.listdir(tmp_path)) == ["a.txt"] and target.read_text() == "new\n"


def test_a_journal_undoes_only_what_no_one_changed_since(tmp_path):
    """Killed while writing: each file the run replaced comes back, unless another program
    wrote it since the kill (that file is named and left as it is)."""
    ours, theirs, made = tmp_path / "ours.txt", tmp_path / "theirs.txt", tmp_path / "made.txt"
    for path in (ours, theirs):
        path.write_text("run's\n")
    made.write_text("run's\n")
    entries = []
    for path in (ours, theirs):
        bak = tmp_path / f".{path.name}.1.00000000.bak"
        bak.write_text("original\n")
        entries.append({"path": str(path), "tmp": None, "bak": str(bak), "existed": True,
                        "new": files.digest(b"run's\n")})
    entries.append({"path": str(made), "tmp": str(tmp_path / ".made.txt.1.00000000.tmp"), "bak": None, "existed": False,
                    "new": files.digest(b"run's\n")})
    theirs.write_text("edited after the kill\n")
    files._write_journal(str(tmp_path), {"version": files.JOURNAL_VERSION, "state": "writing", "pid": 1, "made": [],
                                         "entries": entries})
    note = files.recover(str(tmp_path))
    assert "2 file(s) put back" in note and "theirs.txt" in note
    assert ours.read_text() == "original\n" and theirs.read_text() == "edited after the kill\n"
    assert sorted(os.listdir(tmp_path)) == ["ours.txt", "theirs.txt"]


def test_an_unreadable_journal_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / files.JOURNAL).write_text("{not json")
    out = tmp_path / "arch.toml"
    out.write_text(TOML)
    code, (_, err) = fusion(capsys, out, "4")
    assert code == 2 and len(err.strip().splitlines()) == 1 and files.JOURNAL in err and "accepted:" in err, err
    assert out.read_text() == TOML


@pytest.mark.parametrize("entry", [
    {"path": "{victim}", "tmp": None, "bak": "{victim_dir}/.victim.txt.1.00000000.bak", "existed": True,
     "new": "{victim_digest}"},  # a file outside the output's folder
    {"path": "{inside}", "tmp": None, "bak": "{victim}", "existed": True, "new": None},  # a "kept" name not the run's
])
def test_a_planted_journal_moves_or_removes_nothing_else(tmp_path, capsys, entry):
    """A journal is a file in the user's folder: one that names files elsewhere, or names
    other files as the run's own, is refused whole; nothing is moved or removed."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("precious\n")
    (outside / ".victim.txt.1.00000000.bak").write_text("attacker's\n")
    folder = tmp_path / "out"
    folder.mkdir()
    fields = {"victim": str(victim), "victim_dir": str(outside), "inside": str(folder / "arch.toml"),
              "victim_digest": files.digest(b"precious\n")}
    planted = {k: (v.format(**fields) if isinstance(v, str) else v) for k, v in entry.items()}
    files._write_journal(str(folder), {"version": files.JOURNAL_VERSION, "state": "writing", "pid": 1, "made": [],
                                       "entries": [planted]})
    code, (_, err) = fusion(capsys, folder / "arch.toml", "4")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "nothing was changed" in err, err
    assert victim.read_text() == "precious\n" and (outside / ".victim.txt.1.00000000.bak").exists()
    assert not (folder / "arch.toml").exists()


@pytest.mark.parametrize("name, text, named", [
    ("arch.json", '{"architectures": {"12.0": 5}}', "entry '12.0': expected a table of fields, got int"),
    ("arch.toml", '# c\n[architectures]\n"12.0" = 5\n', "entry '12.0': expected a table of fields, got int"),
    ("arch.json", '{"architectures": 5}', "field 'architectures': expected a table"),
    ("arch.toml", "# c\n[[architectures]]\nname = 'x'\n", "field 'architectures': expected a table"),
])
@pytest.mark.parametrize("command", ["collectives", "fusion"])
def test_an_override_file_of_a_wrong_shape_is_one_line_and_kept(tmp_path, capsys, name, text, named, command):
    out = tmp_path / name
    out.write_text(text)
    code, (_, err) = collectives(capsys, tmp_path, out) if command == "collectives" else fusion(capsys, out, "4")
    assert code == 2 and len(err.strip().splitlines()) == 1 and named in err and "Traceback" not in err, err
    assert out.read_text() == text


def test_crlf_line_endings_and_a_fields_own_comment_are_kept(tmp_path, capsys):
    out = tmp_path / "arch.toml"
    out.write_bytes(b'# mine\r\n[architectures."12.0"] # the tier\r\nallreduce_fusion_auto_world_sizes = [\r\n  2,\r\n]'
                    b'  # PCIe box only\r\nname = "x"\r\n')
    code, (_, err) = fusion(capsys, out, "4")
    assert code == 0, err
    data = out.read_bytes()
    assert b"\n" not in data.replace(b"\r\n", b"")  # every line ends as the file's did
    assert b"allreduce_fusion_auto_world_sizes = [2, 4]  # PCIe box only\r\n" in data
    assert data.startswith(b'# mine\r\n[architectures."12.0"] # the tier\r\n') and b'name = "x"\r\n' in data


@pytest.mark.parametrize("flag", ["--out", "--results"])
def test_an_output_named_as_the_journal_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch, flag):
    results = tmp_path / "r.json"
    results.write_text(json.dumps(results_12()))
    other = "--results" if flag == "--out" else "--out"
    target = {flag: files.JOURNAL, other: "other.json" if other == "--results" else "arch.toml"}
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "collectives", "--from-results", str(results), *[x for kv in target.items() for x in kv]])
    err = capsys.readouterr().err
    assert code == 2 and "the name of the journal" in err and flag in err, err
    assert sorted(os.listdir(tmp_path)) == ["r.json"]
