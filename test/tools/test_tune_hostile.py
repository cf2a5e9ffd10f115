"""Hostile input to ``sglang-arch tune collectives``: a results file (``--from-results``)
with any field wrong, and outputs (``--out``, ``--results``) that are not regular files
or fail while written.  Every result is exit 0, or exit 2 with one line on stderr and
nothing written; the override file it writes always loads back."""

import copy
import errno
import json
import os
import signal
import tempfile
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_arch import files as validate_module
from sglang_arch.arch import reset_default_registry
from sglang_arch.arch.registry import build_registry, load_override_file
from sglang_arch.arch.validate import printable
from sglang_arch.cli import main
from sglang_arch.tune import collectives as tc

MIB = 1 << 20


def valid_results():
    """A small results file as --results writes it (nccl, two world sizes, both modes)."""
    cells = []
    for ws in (2, 4):
        for size, (nccl, two_shot) in {4096: (10.0, 5.0), MIB: (30.0, 10.0), 64 * MIB: (400.0, 600.0)}.items():
            stats = {p: tc.spread([v, v * 1.01, v * 0.99]) for p, v in (("nccl", nccl), ("two_shot", two_shot))}
            medians = {p: s["median"] for p, s in stats.items()}
            cells.append({"world_size": ws, "size": size, "times_us": medians, "errors": {"one_shot": "skipped"},
                          "graph_times_us": dict(medians), "stats": {"eager": stats, "graph": copy.deepcopy(stats)}})
    run = {"device": "NVIDIA H200", "capability": "9.0", "backend": "nccl", "world_sizes": [2, 4], "iters": 20,
           "started": "2025-01-01T00:00:00Z", "measurements": cells, "trials": 3, "graph_calls": 20,
           "modes": ["eager", "graph"]}
    return {"run": run, "topology": "nvlink"}


@pytest.fixture(autouse=True)
def _no_config(monkeypatch):
    monkeypatch.delenv("SGLANG_ARCH_CONFIG", raising=False)
    reset_default_registry()
    yield
    reset_default_registry()


@pytest.fixture
def no_hang():
    """A FIFO target used to block forever: fail the test instead of hanging the suite."""
    def alarm(*_):
        raise TimeoutError("the command blocked")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def tune(capsys, *argv):
    code = main(["tune", "collectives", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_2(capsys, *argv, expect=()):
    code, out, err = tune(capsys, *argv)
    assert code == 2, (argv, code, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for text in expect:
        assert text in err, err
    return err


def write(path, doc):
    path.write_text(json.dumps(doc))  # ensure_ascii: a lone surrogate is written as the escape \ud800
    return str(path)


def test_a_valid_results_file_writes_both_outputs(tmp_path, capsys):
    src = write(tmp_path / "ok.json", valid_results())
    out, results = tmp_path / "o.toml", tmp_path / "r.json"
    code, stdout, err = tune(capsys, "--from-results", src, "--out", str(out), "--results", str(results))
    assert code == 0 and err == ""
    assert load_override_file(str(out))["9.0"]["symm_mem_two_shot"] == {"2": 64, "4": 64}  # the measured world sizes
    assert json.loads(results.read_text())["override_file"] == str(out)
    assert sorted(os.listdir(tmp_path)) == ["o.toml", "ok.json", "r.json"]  # no temporary file left


# --- 1. every field the analysis reads is checked ---------------------------------------

def _set(path, value):
    def mutate(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return mutate


M3 = ("run", "measurements", 3)


@pytest.mark.parametrize("mutate,field", [
    # the reproducers of the report: each was an internal error (exit 1)
    (_set(M3 + ("stats",), {"eager": {"two_shot": {"median": 30}, "nccl": {"median": 20}}}),
     "run.measurements[3].stats.eager.two_shot.min"),
    (_set(M3 + ("graph_times_us",), [1, 2]), "run.measurements[3].graph_times_us"),
    (_set(M3 + ("graph_times_us", "nccl"), "x"), "run.measurements[3].graph_times_us.nccl"),
    (_set(M3 + ("graph_times_us", "nccl"), 0), "run.measurements[3].graph_times_us.nccl"),
    (_set(M3 + ("times_us", "nccl"), "x"), "run.measurements[3].times_us.nccl"),
    (_set(M3 + ("times_us", "nccl"), 0), "run.measurements[3].times_us.nccl"),
    (_set(M3 + ("stats",), [1]), "run.measurements[3].stats"),
    # and their neighbours
    (_set(M3 + ("stats", "eager", "nccl", "median"), "x"), "run.measurements[3].stats.eager.nccl.median"),
    (_set(M3 + ("stats", "eager", "nccl", "max"), 1.0), "run.measurements[3].stats.eager.nccl"),
    (_set(M3 + ("stats", "graph", "nccl", "trials"), "many"), "run.measurements[3].stats.graph.nccl.trials"),
    (_set(M3 + ("stats", "graph"), {"multimem": tc.spread([1.0])}), "run.measurements[3].stats.graph"),
    (_set(M3 + ("stats", "prefill"), {}), "run.measurements[3].stats"),
    (_set(M3 + ("times_us", "nccl"), 10 ** 400), "run.measurements[3].times_us.nccl"),  # float() overflowed
    (_set(M3 + ("times_us", "nccl"), 1e-300), "run.measurements[3].times_us.nccl"),  # a ratio to infinity
    (_set(M3 + ("times_us",), {f"p{i}": 1.0 for i in range(17)}), "run.measurements[3].times_us"),
    (_set(M3 + ("errors", "nccl"), "x" * 1001), "run.measurements[3].errors.nccl"),
    (_set(M3 + ("world_size",), 8), "run.measurements[3].world_size"),
    (_set(("run", "device"), "x" * 201), "run.device"),
    (_set(("run", "started"), ""), "run.started"),
    (_set(("run", "iters"), 100_001), "run.iters"),
    (_set(("run", "trials"), "7"), "run.trials"),
    (_set(("run", "graph_calls"), -1), "run.graph_calls"),
    (_set(("run", "modes"), ["eager", "eager"]), "run.modes"),
    (_set(("topology",), "x" * 5000), "field 'topology'"),
    (_set(("topology",), None), "field 'topology': no topology saved"),  # was an AttributeError
    (_set(("run", "device"), "GPU \ud800"), "run.device"),  # a lone surrogate: refused when read
    (_set(M3 + ("errors", "nccl\udfff"), "x"), "run.measurements[3].errors (a key)"),
])
def test_a_wrong_field_is_named(tmp_path, capsys, mutate, field):
    doc = valid_results()
    mutate(doc)
    src = write(tmp_path / "bad.json", doc)
    out, results = tmp_path / "o.toml", tmp_path / "r.json"
    err = one_line_2(capsys, "--from-results", src, "--out", str(out), "--results", str(results),
                     expect=(f"--from-results {src}", field))
    assert "expected" in err or "accepted" in err
    assert not out.exists() and not results.exists()


def test_a_saved_run_without_graph_timing_or_stats_still_loads(tmp_path, capsys):
    doc = valid_results()
    for m in doc["run"]["measurements"]:
        del m["graph_times_us"], m["stats"]
    for key in ("trials", "graph_calls", "modes"):
        del doc["run"][key]
    code, out, err = tune(capsys, "--from-results", write(tmp_path / "old.json", doc))
    assert code == 0 and "-- eager" in out and "-- graph" not in out


# --- 2. outputs: never a FIFO or a device, never half a file -------------------------------

@pytest.mark.parametrize("flag", ["--out", "--results"])
def test_a_fifo_output_is_refused_without_blocking(tmp_path, capsys, no_hang, flag):
    fifo = tmp_path / "f.toml"
    os.mkfifo(fifo)
    one_line_2(capsys, "--from-results", write(tmp_path / "ok.json", valid_results()), flag, str(fifo),
               expect=(f"{flag} {fifo}", "FIFO", "accepted"))


@pytest.mark.parametrize("flag", ["--out", "--results"])
def test_dev_full_is_named(tmp_path, capsys, flag):
    one_line_2(capsys, "--from-results", write(tmp_path / "ok.json", valid_results()), flag, "/dev/full",
               expect=(f"{flag} /dev/full", "device"))


def test_a_folder_output_is_refused(tmp_path, capsys):
    (tmp_path / "dir.toml").mkdir()
    one_line_2(capsys, "--from-results", write(tmp_path / "ok.json", valid_results()), "--out",
               str(tmp_path / "dir.toml"), expect=("--out", "dir.toml", "a folder"))


def test_both_outputs_naming_one_file_are_refused(tmp_path, capsys):
    same = str(tmp_path / "same.json")
    one_line_2(capsys, "--from-results", write(tmp_path / "ok.json", valid_results()), "--out", same,
               "--results", same, expect=("name the same file",))
    assert not os.path.exists(same)


@pytest.mark.parametrize("flag", ["--out", "--results"])
@pytest.mark.parametrize("where", ["no folder", "a file on the way", "/proc"])
def test_an_output_that_cannot_be_written_is_refused_before_anything_is_measured(tmp_path, capsys, monkeypatch,
                                                                                  flag, where):
    """On main an output in a folder that does not exist passed the check,
    a real measurement ran to the end, and then nothing was written (--results neither)."""
    def measure(*args, **kwargs):
        raise AssertionError("measured before the outputs were checked")

    monkeypatch.setattr(tc, "measure", measure)
    if where == "no folder":
        target = tmp_path / "no" / "such" / "o.json"
    elif where == "a file on the way":
        (tmp_path / "f").write_text("x")
        target = tmp_path / "f" / "o.json"
    else:  # root may write anywhere by permission bits: only trying shows that /proc takes no file
        target = "/proc/sglang-arch-test-o.json"
    one_line_2(capsys, "--backend", "gloo", "--world-sizes", "2", flag, str(target),
               expect=(f"{flag} {target}: cannot write",))


def test_a_failed_write_names_the_path_and_leaves_the_old_file(tmp_path, capsys, monkeypatch):
    out = tmp_path / "o.toml"
    out.write_text("# old\n")

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(validate_module.os, "fsync", full)
    one_line_2(capsys, "--from-results", write(tmp_path / "ok.json", valid_results()), "--out", str(out),
               expect=(f"--out {out}", "No space left on device"))
    assert out.read_text() == "# old\n"
    assert sorted(os.listdir(tmp_path)) == ["o.toml", "ok.json"]  # the temporary file is gone


def test_when_the_second_output_fails_neither_is_written(tmp_path, capsys, monkeypatch):
    out, results = tmp_path / "o.toml", tmp_path / "r.json"
    out.write_text("# old\n")
    new_file = validate_module._new_file

    def fail_results(path, kind, *args, **kwargs):
        if path == str(results) and kind == "tmp":
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        return new_file(path, kind, *args, **kwargs)

    monkeypatch.setattr(validate_module, "_new_file", fail_results)
    one_line_2(capsys, "--from-results", write(tmp_path / "ok.json", valid_results()), "--out", str(out),
               "--results", str(results), expect=(f"--results {results}",))
    assert out.read_text() == "# old\n" and not results.exists()
    assert sorted(os.listdir(tmp_path)) == ["o.toml", "ok.json"]


def test_a_symlink_target_is_replaced_not_written_through(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link = tmp_path / "o.toml"
    link.symlink_to(victim)
    code, _, _ = tune(capsys, "--from-results", write(tmp_path / "ok.json", valid_results()), "--out", str(link))
    assert code == 0 and victim.read_text() == "precious\n" and not link.is_symlink()
    assert "symm_mem_two_shot" in link.read_text()


def test_an_existing_files_permissions_are_kept(tmp_path, capsys):
    out = tmp_path / "o.json"
    out.write_text("{}")
    out.chmod(0o640)
    assert tune(capsys, "--from-results", write(tmp_path / "ok.json", valid_results()), "--out", str(out))[0] == 0
    assert out.stat().st_mode & 0o777 == 0o640


# --- 3. the TOML it writes loads back ---------------------------------------------------------

@pytest.mark.parametrize("device", ["GPU 😀", 'a "quoted" \\ back\\slash', "tab\tnew\nline\x00\x1f\x7f", "é中"])
def test_the_written_toml_loads_back_with_any_device_name(tmp_path, capsys, device):
    doc = valid_results()
    doc["run"]["device"] = device
    out = tmp_path / "o.toml"
    assert tune(capsys, "--from-results", write(tmp_path / "ok.json", doc), "--out", str(out))[0] == 0
    (source,) = load_override_file(str(out))["9.0"]["sources"]
    assert f"4x {printable(device)}, topology nvlink" in source and source.isprintable()  # escaped, not raw
    reg = build_registry(load_override_file(str(out)), override_source=str(out))
    assert reg.resolve("9.0").profile.sources == (source,)


def test_a_lone_surrogate_is_refused_before_anything_is_written(tmp_path, capsys):
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(valid_results()).replace('"NVIDIA H200"', '"\\ud800"'))
    out = tmp_path / "o.toml"
    one_line_2(capsys, "--from-results", str(src), "--out", str(out), expect=("field 'run.device'", "UTF-8"))
    assert not out.exists()


@settings(max_examples=60, deadline=None, database=None)
@given(st.text(max_size=40))
def test_toml_string_round_trips(text):
    assert tomllib.loads(f"k = {tc.toml_string(text)}")["k"] == text


def test_toml_string_refuses_a_lone_surrogate():
    with pytest.raises(ValueError, match="UTF-8"):
        tc.toml_string("\ud800")


# --- a property: any corruption of a valid file is exit 0 or one line and exit 2 ----------------

def _paths(doc, prefix=()):
    """Every (container path, key) in the document."""
    out = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out.append(prefix + (key,))
        out.extend(_paths(value, prefix + (key,)))
    return out


VALID = valid_results()
PATHS = _paths(VALID)
HOSTILE = st.one_of(
    st.none(), st.booleans(), st.sampled_from([0, -1, 1, 2, 3, 4, 8, 72, 73, 10 ** 6, 10 ** 400, 2 ** 63]),
    st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e-300, 1e300, 5e-324]),
    st.sampled_from(["", "x", "nccl", "two_shot", "eager", "graph", "9.0", "banana", "nvlink", "\ud800", "GPU 😀",
                     "a\nb", "x" * 2000]),
    st.text(max_size=8), st.lists(st.integers(-2, 100), max_size=3), st.just({}),
    st.dictionaries(st.sampled_from(["nccl", "two_shot", "median", "min", "max", "eager", "graph"]),
                    st.one_of(st.none(), st.integers(-1, 1000), st.floats(0, 1e4), st.just({})), max_size=3),
)


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_any_corruption_is_exit_0_or_one_line_and_exit_2(capsys, data):
    doc = copy.deepcopy(VALID)
    for _ in range(data.draw(st.integers(1, 3), label="corruptions")):
        path = data.draw(st.sampled_from(PATHS), label="field")
        parent = doc
        try:
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]]
        except (KeyError, IndexError, TypeError):
            continue  # an earlier corruption removed or replaced it
        if data.draw(st.booleans(), label="delete") and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(HOSTILE, label="value")
    text = json.dumps(doc)
    if data.draw(st.integers(0, 9), label="truncate") == 0:
        text = text[: data.draw(st.integers(0, len(text)), label="at")]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.json")
        with open(src, "w") as fh:
            fh.write(text)
        out, results = os.path.join(tmp, "o.toml"), os.path.join(tmp, "r.json")
        code, _, err = tune(capsys, "--from-results", src, "--out", out, "--results", results)
        assert code in (0, 2), err
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
            assert sorted(os.listdir(tmp)) == ["in.json"]  # nothing written
        else:
            with open(results) as fh:
                written = "override_file" in json.load(fh)  # a gloo run writes no override
            assert sorted(os.listdir(tmp)) == ["in.json"] + (["o.toml"] if written else []) + ["r.json"]
            if written:
                build_registry(load_override_file(out), override_source=out)  # it loads back


def test_an_empty_output_path_is_refused(tmp_path, capsys):
    """--out "" and --results "" exited 0, wrote nothing, said nothing."""
    src = write(tmp_path / "r.json", valid_results())
    for flag in ("--out", "--results"):
        one_line_2(capsys, "--from-results", src, flag, "", expect=(f"{flag}: an empty path",))


def test_an_output_may_not_overwrite_the_from_results_input(tmp_path, capsys):
    """--out naming the --from-results file replaced the measurements."""
    src = write(tmp_path / "r.json", valid_results())
    before = (tmp_path / "r.json").read_bytes()
    for flag in ("--out", "--results"):
        one_line_2(capsys, "--from-results", src, flag, src, expect=("is the --from-results input",))
    assert (tmp_path / "r.json").read_bytes() == before


# --- capability, empty runs, sizes and duplicates of a results file ----------

@pytest.mark.parametrize("cap", ["banana", "12.x", "sm_", "１２.０", "12.10", ""])
def test_a_bad_capability_is_named_with_the_file_and_field(tmp_path, capsys, cap):
    # It used to be parse_capability's bare message, without the file or the field.
    doc = valid_results()
    doc["run"]["capability"] = cap
    src = write(tmp_path / "bad.json", doc)
    out = tmp_path / "o.json"
    err = one_line_2(capsys, "--from-results", src, "--out", str(out),
                     expect=(f"--from-results {src}: field 'run.capability': expected ", "got "))
    assert "'12.0'" in err  # the accepted spellings
    assert not out.exists()


def _all_errored(doc):
    for m in doc["run"]["measurements"]:
        m.update(times_us={}, graph_times_us={}, stats={}, errors={"nccl": "failed", "two_shot": "failed"})


@pytest.mark.parametrize("mutate,counts", [
    (_set(("run", "measurements"), []), "(0 measurement(s), 0 with errors only)"),
    (_all_errored, "(6 measurement(s), 6 with errors only)"),
])
def test_an_override_from_nothing_measured_is_refused(tmp_path, capsys, mutate, counts):
    # It used to write the tier's own table sizes as if they had been measured.
    doc = valid_results()
    mutate(doc)
    src = write(tmp_path / "r.json", doc)
    out = tmp_path / "o.json"
    one_line_2(capsys, "--from-results", src, "--out", str(out),
               expect=(f"--from-results {src}: --out: nothing measured to write", counts))
    assert not out.exists()
    code, stdout, err = tune(capsys, "--from-results", src)  # the report alone is still given
    assert code == 0 and err == ""


def test_an_override_from_graph_timing_that_was_not_run_is_refused(tmp_path, capsys):
    doc = valid_results()
    for m in doc["run"]["measurements"]:
        m["times_us"], m["stats"] = {}, {"graph": m["stats"]["graph"]}
    src = write(tmp_path / "r.json", doc)
    one_line_2(capsys, "--from-results", src, "--tune-mode", "eager", "--out", str(tmp_path / "o.json"),
               expect=("nothing measured to write", "in eager timing"))


@pytest.mark.parametrize("cap,match,tier", [("11.5", "family", "11.0"), ("13.0", "generation", "12.1"),
                                            ("9.9", "family", "9.0"), ("5.0", "portable", "5.0")])
def test_an_override_for_an_unknown_capability_is_refused(tmp_path, capsys, cap, match, tier):
    # It used to write the fallback tier's key (11.5 measured, "11.0" written: every 11.0 GPU changed).
    doc = valid_results()
    doc["run"]["capability"] = cap
    src = write(tmp_path / "r.json", doc)
    out = tmp_path / "o.json"
    one_line_2(capsys, "--from-results", src, "--out", str(out),
               expect=(f"--from-results {src}: --out: capability {cap} is not a known tier "
                       f"(it resolves as {match} of {tier})", "accepted: a run on a known capability"))
    assert not out.exists()
    assert tune(capsys, "--from-results", src)[0] == 0  # the report alone is still given


@pytest.mark.parametrize("cap", ["8.0", "9.0", "10.0", "12.0", "sm_90"])
def test_an_override_for_a_known_capability_is_written_under_its_key(tmp_path, capsys, cap):
    doc = valid_results()
    doc["run"]["capability"] = cap
    src = write(tmp_path / "r.json", doc)
    out = tmp_path / "o.json"
    assert tune(capsys, "--from-results", src, "--out", str(out))[0] == 0
    from sglang_arch.arch import parse_capability
    assert list(load_override_file(str(out))) == [str(parse_capability(cap))]


@given(size=st.integers(4, (1 << 30) - 4).filter(lambda n: n % 4))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_size_that_is_not_a_multiple_of_4_is_refused(tmp_path_factory, capsys, size):
    # A bf16 all-reduce moves whole elements; --sizes refuses such a size, the file did not.
    tmp = tmp_path_factory.mktemp("s")
    doc = valid_results()
    doc["run"]["measurements"][3]["size"] = size
    src = write(tmp / "r.json", doc)
    one_line_2(capsys, "--from-results", src, "--out", str(tmp / "o.json"),
               expect=(f"--from-results {src}: field 'run.measurements[3].size': expected a multiple of 4 bytes",
                       f"got {size}"))
    assert not (tmp / "o.json").exists()


@given(i=st.integers(0, 5), j=st.integers(0, 5))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_two_measurements_of_one_cell_are_refused(tmp_path_factory, capsys, i, j):
    tmp = tmp_path_factory.mktemp("d")
    doc = valid_results()
    ms = doc["run"]["measurements"]
    twin = copy.deepcopy(ms[j])
    twin.update(world_size=ms[i]["world_size"], size=ms[i]["size"])
    ms.append(twin)
    src = write(tmp / "r.json", doc)
    one_line_2(capsys, "--from-results", src, "--out", str(tmp / "o.json"),
               expect=(f"field 'run.measurements[6]': expected one measurement per world size and size "
                       f"(run.measurements[{i}] has the same)",))


@pytest.mark.parametrize("where", ["top", "run", "cell", "times"])
def test_a_key_given_twice_in_a_results_file_is_refused(tmp_path, capsys, where):
    # json.loads kept the last of two equal keys: the analysis read one of two values silently.
    text = json.dumps(valid_results())
    twice = {"top": ('{"run": ', '{"topology": "pcie", "run": '),
             "run": ('"iters": 20', '"iters": 1, "iters": 20'),
             "cell": ('"size": 4096', '"size": 8, "size": 4096'),
             "times": ('"two_shot": 5.0', '"two_shot": 500.0, "two_shot": 5.0')}[where]
    assert twice[0] in text
    src = tmp_path / "r.json"
    src.write_text(text.replace(twice[0], twice[1], 1))
    one_line_2(capsys, "--from-results", str(src), "--out", str(tmp_path / "o.json"),
               expect=(f"--from-results {src}: not a results file (key ", "is given twice in one object",
                       "accepted: each key once"))
    assert not (tmp_path / "o.json").exists()


def test_an_unknown_capability_is_refused_before_anything_is_measured(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "11.5")
    monkeypatch.setenv("SGLANG_ARCH_GPU_COUNT", "2")

    def measure(*_a, **_k):
        raise AssertionError("measured although the override could not be written")

    monkeypatch.setattr(tc, "measure", measure)
    out = tmp_path / "o.json"
    one_line_2(capsys, "--out", str(out), "--world-sizes", "2",
               expect=("tune collectives: --out: capability 11.5 is not a known tier (it resolves as family of 11.0)",))
    assert not out.exists()


def test_out_with_a_gloo_run_is_refused_not_ignored(tmp_path, capsys, monkeypatch):
    """`--out` with a gloo run (live or saved)
    printed empty tables, wrote nothing and exited 0."""
    monkeypatch.setattr(tc, "measure", lambda *a, **k: pytest.fail("measured before --out was refused"))
    out = tmp_path / "o.toml"
    one_line_2(capsys, "--backend", "gloo", "--world-sizes", "2", "--out", str(out),
               expect=("a gloo run checks the harness on CPUs and tunes nothing", "accepted: --out with an nccl run"))
    doc = valid_results()
    doc["run"]["backend"] = "gloo"
    src = write(tmp_path / "gloo.json", doc)
    one_line_2(capsys, "--from-results", src, "--out", str(out), expect=(f"--from-results {src}: --out: a gloo run",))
    assert not out.exists()
    assert tune(capsys, "--from-results", src)[0] == 0  # without --out the saved gloo run still reports


def test_strings_from_a_results_file_cannot_drive_the_terminal(tmp_path, capsys):
    """A device name or a measurement error with
    ESC sequences and newlines was printed raw (it cleared the screen and forged a row)."""
    doc = valid_results()
    doc["run"]["device"] = "NVIDIA \x1b[31mH200\n"
    doc["run"]["measurements"][0]["errors"] = {"one_shot": "\x1b[2J\x1b[31mBOOM\n  2    4 KiB  fake row"}
    code, out, _ = tune(capsys, "--from-results", write(tmp_path / "esc.json", doc))
    assert code == 0 and "\x1b" not in out and all(line.isprintable() for line in out.splitlines())
    assert "NVIDIA \\x1b[31mH200\\n" in out and "\\x1b[2J\\x1b[31mBOOM\\n  2    4 KiB  fake row" in out



@pytest.mark.parametrize("name", ["two\x1b[2Jshot", "a\u202eb", "x\ny"])
def test_path_names_of_a_results_file_are_printed_escaped(tmp_path, capsys, name):
    """A path name from a results file is printed as ``printable`` escapes it: it can
    neither drive the terminal nor forge a line of the report."""
    doc = valid_results()
    for cell in doc["run"]["measurements"]:
        for key in ("times_us", "graph_times_us"):
            cell[key][name] = cell[key]["nccl"] * 2
    code, out, err = tune(capsys, "--from-results", write(tmp_path / "r.json", doc))
    assert code == 0, err
    assert name not in out and printable(name) in out


def test_the_override_path_is_printed_escaped(tmp_path, capsys):
    out = tmp_path / "o\x1b[2J.json"
    code, text, err = tune(capsys, "--from-results", write(tmp_path / "r.json", valid_results()), "--out", str(out))
    assert code == 0, err
    assert out.exists() and "\x1b" not in text and "\\x1b[2J" in text
