"""``tune collectives --sglang``: SGLang's own paths (custom all-reduce, PCIe-IPC) and its
dispatch as run, on synthetic measurements: the dispatch check, the PCIe-IPC verdict per
world size, and the override's ``pcie_ipc_world_sizes``.  The real chain on CPUs is in
test/integration/test_tune_harness.py."""

import copy
import json

import pytest
from sglang_arch.arch import TOPOLOGIES, build_registry, resolve
from sglang_arch.arch.policies.collectives import pcie_ipc
from sglang_arch.arch.registry import load_override_file
from sglang_arch.cli import main
from sglang_arch.tune import collectives as tc
from sglang_arch.tune import sglang_chain

KIB = 1024


def cell(ws, size, took=None, **paths):
    """paths: name -> trial times (both modes alike); ``took``: the path SGLang's dispatch took."""
    stats = {p: tc.spread(v) for p, v in paths.items()}
    medians = {p: s["median"] for p, s in stats.items()}
    m = {"world_size": ws, "size": size, "times_us": medians, "graph_times_us": dict(medians), "errors": {},
         "stats": {"eager": stats, "graph": copy.deepcopy(stats)}}
    if took is not None:
        m["sglang_methods"] = {"eager": took, "graph": took}
    return m


FAST, SLOW, NOISY = [5, 5.1, 4.9], [20, 20.5, 19.5], [5, 30, 6]


def test_the_dispatch_is_judged_against_the_fastest_path_it_could_take():
    run = {"measurements": [
        cell(8, 64 * KIB, took="pcie_ipc", sglang=FAST, pcie_ipc=FAST, nccl=SLOW),
        cell(8, 768 * KIB, took="nccl", sglang=SLOW, pcie_ipc=FAST, nccl=SLOW),
        cell(8, 96 * 1024 * KIB, took="nccl", sglang=SLOW, nccl=SLOW),
        cell(8, 4 * KIB, nccl=SLOW),  # no dispatch timed: no row
    ]}
    rows = {r["size"]: r for r in tc.check_dispatch(run, "graph")}
    assert set(rows) == {64 * KIB, 768 * KIB, 96 * 1024 * KIB}
    assert rows[64 * KIB]["ok"] and rows[64 * KIB]["took"] == "pcie_ipc"
    assert not rows[768 * KIB]["ok"] and rows[768 * KIB]["fastest"] == "pcie_ipc"  # took NCCL, 4x slower
    assert rows[96 * 1024 * KIB]["ok"] and rows[96 * 1024 * KIB]["over_fastest"] == pytest.approx(1.0)


@pytest.mark.parametrize("cells,verdict", [
    ([cell(8, 64 * KIB, pcie_ipc=FAST, nccl=SLOW), cell(8, 384 * KIB, pcie_ipc=FAST, nccl=SLOW)], True),
    ([cell(8, 64 * KIB, pcie_ipc=FAST, nccl=SLOW), cell(8, 384 * KIB, pcie_ipc=SLOW, nccl=FAST)], False),
    ([cell(8, 64 * KIB, pcie_ipc=NOISY, nccl=FAST)], None),  # inside the spread: no win, no loss: decides nothing
    # where custom all-reduce took the size, PCIe-IPC is not reached: that cell does not count
    ([cell(8, 64 * KIB, took="custom_ar", pcie_ipc=SLOW, nccl=FAST), cell(8, 384 * KIB, pcie_ipc=FAST, nccl=SLOW)],
     True),
])
def test_pcie_ipc_is_on_where_it_wins_somewhere_and_loses_nowhere(cells, verdict):
    assert tc.tuned_pcie_ipc({"measurements": cells}, "graph") == {8: verdict}


def test_no_pcie_ipc_timing_decides_nothing():
    assert tc.tuned_pcie_ipc({"measurements": [cell(2, 64 * KIB, nccl=SLOW, two_shot=FAST)]}) == {}


def test_the_world_sizes_merge_the_measured_ones_into_the_tiers():
    assert tc.pcie_ipc_world_sizes([8], {4: True}) == [4, 8]
    assert tc.pcie_ipc_world_sizes([8], {8: False, 2: True}) == [2]
    assert tc.pcie_ipc_world_sizes([8], {8: None, 4: None}) == [8]  # inside the noise: the base stands
    assert tc.pcie_ipc_world_sizes([], {}) == []


def results(cells, capability="12.0"):
    run = {"device": "NVIDIA RTX PRO 6000", "capability": capability, "backend": "nccl",
           "world_sizes": sorted({c["world_size"] for c in cells}), "iters": 20, "started": "2026-12-06T00:00:00Z",
           "measurements": cells, "trials": 3, "graph_calls": 20, "modes": ["eager", "graph"]}
    return {"run": run, "topology": "pcie-p2p"}


def test_out_writes_the_measured_pcie_ipc_world_sizes_and_the_registry_turns_it_on(tmp_path, capsys):
    """12.0's table has PCIe-IPC at TP 8 only; a node that measured it winning at TP 4 and
    losing at TP 8 gets [4]: the policy then turns it on at 4 (the node's own measurement)
    and leaves 8 to the opt-in."""
    src, out = tmp_path / "r.json", tmp_path / "o.toml"
    cells = [cell(4, 64 * KIB, took="pcie_ipc", sglang=FAST, pcie_ipc=FAST, nccl=SLOW),
             cell(8, 64 * KIB, took="pcie_ipc", sglang=SLOW, pcie_ipc=SLOW, nccl=FAST)]
    src.write_text(json.dumps(results(cells)))
    assert main(["tune", "collectives", "--from-results", str(src), "--out", str(out)]) == 0, capsys.readouterr().err
    report = capsys.readouterr().out
    assert "PCIe-IPC by world size" in report and "{4: 'on', 8: 'off'}" in report
    assert "SGLang's dispatch (graph) ws 8 64 KiB: took pcie_ipc" in report and "slower!" in report
    reg = build_registry(load_override_file(str(out)), override_source=str(out))
    res = reg.resolve("12.0")
    assert res.match == "override" and res.profile.pcie_ipc_world_sizes == (4,)
    assert res.profile.symm_mem_two_shot == resolve("12.0").profile.symm_mem_two_shot  # no two-shot timed: kept
    assert pcie_ipc(res, TOPOLOGIES["pcie-p2p"], 4).enabled
    assert not pcie_ipc(res, TOPOLOGIES["pcie-p2p"], 8).enabled


def test_out_keeps_a_files_own_pcie_ipc_world_sizes_it_did_not_measure(tmp_path, capsys):
    src, out = tmp_path / "r.json", tmp_path / "o.toml"
    out.write_text('[architectures."12.0"]\npcie_ipc_world_sizes = [2, 8]\nsources = ["mine"]\n')
    src.write_text(json.dumps(results([cell(4, 64 * KIB, pcie_ipc=FAST, nccl=SLOW)])))
    assert main(["tune", "collectives", "--from-results", str(src), "--out", str(out)]) == 0, capsys.readouterr().err
    reg = build_registry(load_override_file(str(out)), override_source=str(out))
    assert reg.resolve("12.0").profile.pcie_ipc_world_sizes == (2, 4, 8)


@pytest.mark.parametrize("methods", [{"prefill": "nccl"}, {"graph": ""}, {"graph": 7}, ["nccl"],
                                     {"graph": "x" * 65}])
def test_a_results_file_with_bad_dispatch_methods_is_refused(tmp_path, capsys, methods):
    src = tmp_path / "r.json"
    bad = cell(8, 64 * KIB, pcie_ipc=FAST, nccl=SLOW)
    bad["sglang_methods"] = methods
    src.write_text(json.dumps(results([bad])))
    assert main(["tune", "collectives", "--from-results", str(src)]) == 2
    err = capsys.readouterr().err
    assert "field 'run.measurements[0].sglang_methods'" in err and len(err.strip().splitlines()) == 1


def test_sglangs_rows_go_into_the_cells_under_tunes_path_names():
    cells = [tc.Measurement(8, 64 * KIB), tc.Measurement(8, 768 * KIB)]
    st = tc.spread([4.0, 5.0, 6.0])
    result = {"rows": [
        {"bytes": 64 * KIB, "eager": {"sglang": st, "pcie_ipc": st, "ca": st}, "graph": {"sglang": st, "pcie_ipc": st},
         "errors": {"ca@graph": "not taken by the custom all-reduce under capture"},
         "method_eager": "ca", "method_graph": "pcie_ipc"},
        {"bytes": 768 * KIB, "eager": {"sglang": st}, "graph": {}, "errors": {"sglang@graph": "boom"},
         "method_eager": None},
        {"bytes": 12345, "eager": {"sglang": st}, "graph": {}, "errors": {}},  # no such cell: ignored
    ]}
    sglang_chain.into_cells(result, cells)
    small, large = cells
    assert small.times_us == {"sglang": 5.0, "pcie_ipc": 5.0, "custom_ar": 5.0}
    assert small.graph_times_us == {"sglang": 5.0, "pcie_ipc": 5.0}
    assert small.sglang_methods == {"eager": "custom_ar", "graph": "pcie_ipc"}
    assert small.errors == {"custom_ar@graph": "not taken by the custom all-reduce under capture"}
    assert small.stats["graph"]["pcie_ipc"]["trials"] == [4.0, 5.0, 6.0]
    assert large.sglang_methods == {} and large.errors == {"sglang@graph": "boom"}


def test_sglang_with_from_results_is_refused_not_ignored(tmp_path, capsys):
    src = tmp_path / "r.json"
    src.write_text(json.dumps(results([cell(8, 64 * KIB, pcie_ipc=FAST, nccl=SLOW)])))
    assert main(["tune", "collectives", "--from-results", str(src), "--sglang"]) == 2
    err = capsys.readouterr().err
    assert "--sglang measures SGLang's paths, --from-results analyses" in err and len(err.strip().splitlines()) == 1



@pytest.mark.parametrize("file_text,want", [
    ('[architectures."12.0"]\npcie_ipc_world_sizes = ["2", 8]\n', (2, 4, 8)),  # a digit string, as the registry reads it
    ('[architectures."12.0"]\ninherits = "9.0"\n', (4,)),  # what it inherits (none), not the table's 12.0
    ('["12.0"]\npcie_ipc_world_sizes = [8, 2]\n', (2, 4, 8)),  # capability keys at the top
])
def test_out_starts_from_the_files_own_answer_as_the_registry_reads_it(tmp_path, capsys, file_text, want):
    src, out = tmp_path / "r.json", tmp_path / "o.toml"
    out.write_text(file_text)
    src.write_text(json.dumps(results([cell(4, 64 * KIB, pcie_ipc=FAST, nccl=SLOW)])))
    assert main(["tune", "collectives", "--from-results", str(src), "--out", str(out)]) == 0, capsys.readouterr().err
    reg = build_registry(load_override_file(str(out)), override_source=str(out))
    assert reg.resolve("12.0").profile.pcie_ipc_world_sizes == want


def test_out_refuses_a_file_the_registry_refuses_naming_it(tmp_path, capsys):
    src, out = tmp_path / "r.json", tmp_path / "o.toml"
    out.write_text('[architectures."12.0"]\npcie_ipc_world_sizes = [true, 8]\n')
    src.write_text(json.dumps(results([cell(4, 64 * KIB, pcie_ipc=FAST, nccl=SLOW)])))
    before = out.read_text()
    assert main(["tune", "collectives", "--from-results", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the override file there is refused by the registry" in err and "pcie_ipc_world_sizes" in err
    assert len(err.strip().splitlines()) == 1 and out.read_text() == before


def test_inside_the_noise_the_table_stands_and_nothing_is_written_for_it(tmp_path, capsys):
    src, out = tmp_path / "r.json", tmp_path / "o.toml"
    src.write_text(json.dumps(results([cell(8, 64 * KIB, pcie_ipc=NOISY, nccl=FAST)])))
    assert main(["tune", "collectives", "--from-results", str(src)]) == 0
    assert "inside the noise: the table's kept" in capsys.readouterr().out
    assert main(["tune", "collectives", "--from-results", str(src), "--out", str(out)]) == 2
    assert "nothing measured to write" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("chain", [["x"], {"2": 7}, {"2": "x" * 2000}, "built"])
def test_a_results_file_with_a_bad_chain_record_is_refused(tmp_path, capsys, chain):
    src = tmp_path / "r.json"
    doc = results([cell(8, 64 * KIB, pcie_ipc=FAST, nccl=SLOW)])
    doc["run"]["sglang_chain"] = chain
    src.write_text(json.dumps(doc))
    assert main(["tune", "collectives", "--from-results", str(src)]) == 2
    err = capsys.readouterr().err
    assert "field 'run.sglang_chain'" in err and len(err.strip().splitlines()) == 1


def test_the_chain_record_is_reported(tmp_path, capsys):
    src = tmp_path / "r.json"
    doc = results([cell(8, 64 * KIB, pcie_ipc=FAST, nccl=SLOW)])
    doc["run"]["sglang_chain"] = {"8": "sglang GroupCoordinator (initialize_model_parallel)"}
    src.write_text(json.dumps(doc))
    assert main(["tune", "collectives", "--from-results", str(src)]) == 0
    assert "SGLang's chain at world size 8: sglang GroupCoordinator" in capsys.readouterr().out
