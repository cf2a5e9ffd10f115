"""The collectives tuner's real harness on CPUs: spawned processes, gloo, both timing
modes (graph through its CPU control flow), correctness of the sums.  Integration tier:
it needs torch and takes ~40 s on a 2-core machine (process spawns)."""

import json

import pytest
from sglang_arch.cli import main
from sglang_arch.tune import collectives as tc


def test_harness_on_cpus_with_gloo(tmp_path, capsys):
    pytest.importorskip("torch")
    results = tmp_path / "run.json"
    assert main(["tune", "collectives", "--backend", "gloo", "--world-sizes", "2,3", "--sizes", "4K,64K",
                 "--iters", "2", "--trials", "3", "--results", str(results)]) == 0
    run = json.loads(results.read_text())["run"]
    assert run["trials"] == 3 and run["modes"] == ["eager", "graph"] and run["graph_calls"] == tc.GRAPH_CALLS
    cells = {(m["world_size"], m["size"]): m for m in run["measurements"]}
    assert set(cells) == {(2, 4096), (2, 65536), (3, 4096), (3, 65536)}
    for m in cells.values():
        assert m["errors"] == {}  # the gloo sum equals the exact sum on every rank's data
        assert m["times_us"]["nccl"] > 0 and m["graph_times_us"]["nccl"] > 0  # graph: the fake-timer path on CPUs
        for mode in ("eager", "graph"):
            st = m["stats"][mode]["nccl"]
            assert len(st["trials"]) == 3 and st["min"] <= st["q1"] <= st["median"] <= st["q3"] <= st["max"]
    out = capsys.readouterr().out
    assert "-- eager" in out and "-- graph" in out


def test_the_harness_leaves_the_callers_environment_alone(tmp_path, capsys, monkeypatch):
    """The multicast-off variables hold for the measurement only (they leaked into every later
    test of a full run before)."""
    import os

    pytest.importorskip("torch")
    for name in tc.MULTICAST_OFF:
        monkeypatch.delenv(name, raising=False)
    assert main(["tune", "collectives", "--backend", "gloo", "--world-sizes", "2", "--sizes", "4K",
                 "--iters", "1", "--trials", "1", "--modes", "eager"]) == 0
    assert {name: os.environ.get(name) for name in tc.MULTICAST_OFF} == {name: None for name in tc.MULTICAST_OFF}


def test_sglangs_own_chain_on_cpus(tmp_path, capsys):
    """--sglang on CPUs (gloo, two spawned processes, the plugin loaded): SGLang 0.5.23's
    GroupCoordinator needs a CUDA device for its pynccl communicator, so the chain is SGLang's
    communicators built one by one with its dispatch order emulated, and the run says so; no
    custom all-reduce or PCIe-IPC is built, so the cells get the dispatch as run
    (torch.distributed) and the method it took."""
    pytest.importorskip("torch")
    pytest.importorskip("sglang")
    results = tmp_path / "run.json"
    assert main(["tune", "collectives", "--backend", "gloo", "--sglang", "--world-sizes", "2", "--sizes", "4K,64K",
                 "--iters", "2", "--trials", "2", "--results", str(results)]) == 0, capsys.readouterr().err
    run = json.loads(results.read_text())["run"]
    cells = {m["size"]: m for m in run["measurements"]}
    assert set(cells) == {4096, 65536}
    for m in cells.values():
        assert m["errors"] == {}, m["errors"]  # SGLang's sum equals torch.distributed's, both modes timed
        assert m["times_us"]["sglang"] > 0 and m["graph_times_us"]["sglang"] > 0
        assert m["sglang_methods"] == {"eager": "nccl", "graph": "nccl"}  # torch.distributed: NCCL's place
        assert set(m["times_us"]) == {"nccl", "sglang"}  # no custom all-reduce or PCIe-IPC on CPUs
    assert "dispatch order emulated" in run["sglang_chain"]["2"] and "cuda device" in run["sglang_chain"]["2"]
    assert "SGLang's chain at world size 2: communicators built one by one" in capsys.readouterr().out


def _dies(rank, world, port, args, queue):
    import os

    if rank == 1:
        os._exit(args.get("code", 3))  # ends without a result, as a crashed rank does (or one whose result failed)
    import time

    time.sleep(60)  # rank 0 waits for rank 1 in a collective that never comes


def test_a_rank_that_ends_without_a_result_stops_the_run_at_once_and_the_others_are_stopped(code=0):
    """Exit code 0, as a rank whose result could not be pickled ends (it was waited for until
    the timeout); a crashed rank's code takes the same path (any exit code without a result)."""
    import time

    import os

    pytest.importorskip("torch")
    t0 = time.perf_counter()
    from sglang_arch.tune import sglang_chain

    before = dict(os.environ)
    out = sglang_chain.run_ranks(_dies, {"world": 2, "code": code}, timeout=120)
    assert dict(os.environ) == before  # the ranks' multicast-off variables stayed theirs (they leaked before)
    assert time.perf_counter() - t0 < 45  # not the 120 s timeout, nor rank 0's 60 s
    assert f"rank 1 ended without a result (exit code {code})" in out["fatal_ranks"][1]
    assert "no result within 120 s" in out["fatal_ranks"][0]
    import multiprocessing

    assert not multiprocessing.active_children()  # rank 0, still sleeping, was stopped
