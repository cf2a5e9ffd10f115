"""The collectives tuner: analysis on synthetic measurements and the override it writes.
The real harness on CPUs (gloo, spawned processes) is in test/integration/test_tune_harness.py."""

import json
import os

import pytest
from sglang_arch.arch import TOPOLOGIES, build_registry, reset_default_registry, resolve
from sglang_arch.arch.registry import load_override_file
from sglang_arch.cli import main
from sglang_arch.tune import collectives as tc

MIB = 1 << 20


def synthetic(ws, table):
    """table: size -> {path: microseconds}"""
    return {"measurements": [{"world_size": ws, "size": s, "times_us": t, "errors": {}} for s, t in table.items()]}


RUN = synthetic(2, {
    1 * MIB: {"nccl": 30.0, "two_shot": 10.0},
    4 * MIB: {"nccl": 60.0, "two_shot": 50.0},
    16 * MIB: {"nccl": 120.0, "two_shot": 150.0},
    64 * MIB: {"nccl": 400.0, "two_shot": 600.0},
})


def test_tuned_size_is_the_first_size_where_symm_mem_loses():
    assert tc.tuned_sizes(RUN) == {2: 16 * MIB}


def test_one_slow_small_size_is_not_a_crossover():
    noisy = synthetic(2, {
        64 * 1024: {"nccl": 10.0, "two_shot": 12.0},  # 1.2x: launch noise at a small size
        1 * MIB: {"nccl": 30.0, "two_shot": 10.0},
        64 * MIB: {"nccl": 400.0, "two_shot": 600.0},
    })
    assert tc.tuned_sizes(noisy) == {2: 64 * MIB}


def test_one_shot_is_information_not_a_sglang_path():
    run = synthetic(2, {MIB: {"nccl": 30.0, "two_shot": 25.0, "one_shot": 10.0}})
    assert tc.tuned_sizes(run) == {2: 2 * MIB}
    (row,) = tc.check(run, resolve("9.0"), TOPOLOGIES["nvlink"])
    assert row["fastest"] == "two_shot" and row["ok"] and row["fastest_measured"] == "one_shot"


def test_tuned_size_when_symm_mem_always_or_never_wins():
    always = synthetic(4, {MIB: {"nccl": 9.0, "two_shot": 1.0}, 4 * MIB: {"nccl": 9.0, "two_shot": 1.0}})
    assert tc.tuned_sizes(always) == {4: 8 * MIB}
    never = synthetic(4, {4096: {"nccl": 1.0, "two_shot": 9.0}})
    assert tc.tuned_sizes(never) == {4: None}
    unmeasured = synthetic(2, {4096: {"nccl": 1.0}})
    assert tc.tuned_sizes(unmeasured) == {}  # a path that never ran changes nothing


def test_check_compares_the_registry_pick_with_the_fastest_path():
    res = resolve("9.0")
    rows = tc.check(RUN, res, TOPOLOGIES["nvlink"])  # 9.0 ws 2 on NVLink without multicast: two-shot < 16 MiB
    picks = {r["size"]: (r["pick"], r["fastest"], r["ok"]) for r in rows}
    assert picks[1 * MIB] == ("two_shot", "two_shot", True)
    assert picks[16 * MIB] == ("nccl", "nccl", True)  # 16 MiB is not below the 16 MiB bound
    assert picks[64 * MIB] == ("nccl", "nccl", True)
    rows = tc.check(RUN, res, TOPOLOGIES["nvswitch"])  # with multicast: SGLang's 64 MiB at world size 2
    picks = {r["size"]: (r["pick"], r["fastest"], r["ok"]) for r in rows}
    assert picks[16 * MIB] == ("two_shot", "nccl", False)  # 150/120 = 1.25 > 1.10


def torch_symm_mem_decision(res, topology, ws):
    from sglang_arch.arch.policies.collectives import torch_symm_mem

    return torch_symm_mem(res, TOPOLOGIES[topology], ws)


def test_override_file_round_trips_into_the_registry(tmp_path):
    base = {2: 16 * MIB, 4: 8 * MIB, 8: 4 * MIB}
    entry = tc.override_entry("9.0", dict(base), {2: 32 * MIB, 4: None}, "measured on test data")
    for suffix in (".toml", ".json"):
        path = tmp_path / f"arch{suffix}"
        tc.write_override(str(path), entry)
        reg = build_registry(load_override_file(str(path)), override_source=str(path))
        res = reg.resolve("9.0")
        assert res.match == "override"
        assert res.profile.symm_mem_two_shot == {2: 32 * MIB, 8: 4 * MIB}  # the bounds without multicast
        assert res.profile.torch_symm_mem == resolve("9.0").profile.torch_symm_mem  # SGLang's, with multicast
        assert res.profile.sources == ("measured on test data",)
        d = torch_symm_mem_decision(res, "pcie-p2p", 2)  # a node's own measurement: PCIe too
        assert (d.enabled, d.max_bytes, d.evidence) == (True, 32 * MIB, ())
        assert "measured on this node (override)" in d.reason


def test_explain_reports_the_tuned_override(tmp_path, monkeypatch, capsys):
    path = tmp_path / "tuned.toml"
    tc.write_override(str(path), tc.override_entry("9.0", dict(resolve("9.0").profile.torch_symm_mem), {2: 16 * MIB}, "t"))
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    reset_default_registry()
    assert main(["explain", "9.0", "--world-size", "2", "--topology", "nvlink", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["match"] == "override"
    assert d["collectives"]["torch_symm_mem"]["max_bytes"] == 16 * MIB


@pytest.mark.parametrize("argv,message", [
    (["tune", "collectives", "--backend", "gloo", "--world-sizes", "1"], "invalid world sizes '1'"),
    (["tune", "collectives", "--backend", "gloo", "--sizes", "3"], "a positive multiple of 4 bytes"),
    (["tune", "collectives", "--backend", "gloo", "--sizes", "4Q"], "invalid size '4Q'"),
    (["tune", "collectives", "--backend", "gloo", "--iters", "0"], "invalid --iters 0"),
    (["tune", "collectives", "--backend", "gloo", "--trials", "0"], "invalid --trials 0"),
    (["tune", "collectives", "--backend", "gloo", "--modes", "fast"], "invalid modes 'fast'"),
    (["tune"], "the following arguments are required: WHAT"),
])
def test_tune_bad_input(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def spread_cell(size, **paths):
    """paths: name -> list of trial times; both modes get the same trials."""
    stats = {p: tc.spread(v) for p, v in paths.items()}
    medians = {p: st["median"] for p, st in stats.items()}
    return {"world_size": 2, "size": size, "times_us": medians, "graph_times_us": dict(medians), "errors": {},
            "stats": {"eager": stats, "graph": stats}}


def test_a_difference_inside_the_spread_decides_nothing():
    # two-shot's median is 30% above NCCL's, but the trials overlap: no crossover there
    overlap = spread_cell(16 * MIB, nccl=[10, 10, 11, 30, 10], two_shot=[13, 13, 14, 12, 13])
    apart = spread_cell(64 * MIB, nccl=[10, 10, 11, 11, 10], two_shot=[14, 14, 15, 14, 14])
    run = {"measurements": [overlap, apart]}
    for mode in ("eager", "graph"):
        assert not tc.slower(overlap, mode, "two_shot", "nccl")
        assert tc.slower(apart, mode, "two_shot", "nccl")
        assert tc.tuned_sizes(run, mode=mode) == {2: 64 * MIB}
    rows = {r["size"]: r for r in tc.check(run, resolve("9.0"), TOPOLOGIES["nvswitch"], mode="graph")}
    assert rows[16 * MIB]["pick"] == "two_shot" and rows[16 * MIB]["ok"]  # 1.3x, but inside the spread


def test_graph_timing_control_flow_with_a_fake_timer(monkeypatch):
    calls = []
    monkeypatch.setattr(tc, "_slowest_rank", lambda samples, cuda, group: samples)
    import torch.distributed as dist

    monkeypatch.setattr(dist, "barrier", lambda group=None: None)
    samples = tc._time_graph(lambda: calls.append(1), trials=5, group=None, calls=20, timer=lambda replay: (replay(), 2e-4)[1])
    assert samples == [pytest.approx(10.0)] * 5  # 200 us per replay of 20 calls
    assert len(calls) == 5 * 20


def test_scoped_env_sets_unsets_and_restores(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_TEST_KEPT", "before")
    monkeypatch.setenv("SGLANG_ARCH_TEST_DROPPED", "before")
    monkeypatch.delenv("SGLANG_ARCH_TEST_ABSENT", raising=False)
    values = {"SGLANG_ARCH_TEST_KEPT": "inside", "SGLANG_ARCH_TEST_DROPPED": None, "SGLANG_ARCH_TEST_ABSENT": "new"}
    with pytest.raises(RuntimeError):
        with tc.scoped_env(values):
            assert os.environ["SGLANG_ARCH_TEST_KEPT"] == "inside"
            assert "SGLANG_ARCH_TEST_DROPPED" not in os.environ
            assert os.environ["SGLANG_ARCH_TEST_ABSENT"] == "new"
            raise RuntimeError("restored even so")
    assert os.environ["SGLANG_ARCH_TEST_KEPT"] == "before" and os.environ["SGLANG_ARCH_TEST_DROPPED"] == "before"
    assert "SGLANG_ARCH_TEST_ABSENT" not in os.environ


def test_multicast_off_is_every_setting_detection_reads(monkeypatch):
    import importlib

    detect = importlib.import_module("sglang_arch.arch.detect")
    for name in detect.MULTICAST_OFF:
        monkeypatch.delenv(name, raising=False)
    with tc.multicast_off():
        assert {k: os.environ[k] for k in detect.MULTICAST_OFF} == {
            "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1"}
    assert not any(k in os.environ for k in detect.MULTICAST_OFF)
