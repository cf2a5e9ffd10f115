"""The committed measurements still support the table values they are cited for."""

import json
from pathlib import Path

from sglang_arch.arch import TOPOLOGIES, resolve
from sglang_arch.tune import collectives as tc

RESULTS = Path(__file__).resolve().parents[2] / "benchmark" / "results"


def test_h200x2_crossover_supports_the_9_0_two_gpu_symm_mem_size():
    saved = json.loads((RESULTS / "h200x2-collectives.json").read_text())
    run = saved["run"]
    assert run["capability"] == "9.0" and run["backend"] == "nccl"
    tuned = tc.tuned_sizes(run)
    profile = resolve("9.0").profile
    assert tuned[2] == profile.torch_symm_mem[2]
    assert any("h200x2-collectives.json" in source for source in profile.sources)
    for mode in ("eager", "graph"):  # prefill and decode timing agree on the crossover
        assert tc.tuned_sizes(run, mode=mode) == tuned
        rows = tc.check(run, resolve("9.0"), TOPOLOGIES[saved["topology"]], mode=mode)
        # From the crossover on, the registry hands the message to NCCL, the fastest path there.
        assert all(r["pick"] == "nccl" and r["ok"] for r in rows if r["size"] >= profile.torch_symm_mem[2])


def test_h200x2_crossover_is_the_same_in_a_second_run():
    first = json.loads((RESULTS / "h200x2-collectives.json").read_text())["run"]
    second = json.loads((RESULTS / "h200x2-collectives-run2.json").read_text())["run"]
    assert first["started"] != second["started"]
    for mode in ("eager", "graph"):
        assert tc.tuned_sizes(first, mode=mode) == tc.tuned_sizes(second, mode=mode) == {2: 64 * (1 << 20)}
    # under graph replay, two-shot is faster than NCCL beyond the spread from 512 KiB to 8 MiB in both runs
    for run in (first, second):
        faster = [m["size"] for m in run["measurements"] if tc.slower(m, "graph", "nccl", "two_shot")]
        assert set(range(19, 24)) <= {s.bit_length() - 1 for s in faster}
