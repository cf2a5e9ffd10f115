"""Per-call cost of the fused all-reduce + RMSNorm path's Python, SGLang 0.5.23 against the
series, in one run.

``flashinfer_allreduce_residual_rmsnorm`` calls ``ensure_workspace_initialized`` on every
fused call; 0.5.23 resolves the fusion backend there each time (``_resolve_backend``).
This times that call with an initialized workspace (FlashInfer, the process groups and
the workspace manager stood in for, the same way on both trees) on a simulated SM100 and
SM90, and ``_resolve_backend("auto")`` itself, in alternating rounds; prints the medians
and the ratio series / 0.5.23.

    python scripts/bench_fusion_hot_path.py [--calls 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "integration"))

PROBE = r"""
import json, sys, timeit, types
from unittest import mock
from sglang.srt.layers import flashinfer_comm_fusion as f
from sglang.srt.runtime_context import override_platform

calls = int(sys.argv[1])
manager = f.FlashInferWorkspaceManager()
manager.initialized, manager.world_size, manager.rank = True, 4, 0
manager.group = ("d", "c")
manager.is_buffer_size_sufficient = lambda **kwargs: True
group = types.SimpleNamespace(device_group="d", cpu_group="c")
comm = types.SimpleNamespace(flashinfer_allreduce_fusion_backend="auto")
out = {}
with mock.patch.object(f, "_flashinfer_allreduce_unavailable", False), \
        mock.patch.object(f, "_flashinfer_comm", object()), \
        mock.patch.object(f, "is_flashinfer_available", lambda: True), \
        mock.patch.object(f, "get_exec", lambda: types.SimpleNamespace(comm=comm)), \
        mock.patch.object(f, "get_parallel", lambda: types.SimpleNamespace(nnodes=1)), \
        mock.patch.object(f, "resolve_fusion_group", lambda use_attn_tp_group: (4, 0, group)), \
        mock.patch.object(f, "_get_workspace_manager", lambda use_attn_tp_group: manager):
    for name, facts in (("sm100", dict(is_sm90=False, is_sm100=True, is_sm120=False,
                                       device_capability=(10, 0))),
                        ("sm90", dict(is_sm90=True, is_sm100=False, is_sm120=False,
                                      device_capability=(9, 0)))):
        with override_platform(**facts):
            assert f.ensure_workspace_initialized()
            out[f"ensure_workspace_initialized {name}"] = min(
                timeit.repeat(f.ensure_workspace_initialized, number=calls, repeat=3)) / calls * 1e6
            resolve = lambda: f._resolve_backend("auto", False)  # noqa: E731
            out[f"_resolve_backend {name}"] = min(timeit.repeat(resolve, number=calls, repeat=3)) / calls * 1e6
print(json.dumps(out))
"""


def tree(work: Path, patched: bool) -> Path:
    from releases import package_tree

    root = work / ("series" if patched else "0.5.23")
    package = package_tree("0.5.23", root)
    if patched:
        cli = Path(sys.executable).with_name("sglang-arch")
        subprocess.run([str(cli), "upstream", str(package)], check=True, capture_output=True)
    return root


def measure(root: Path, calls: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root), "SGLANG_PLUGINS": "none", "SGLANG_ARCH_DISABLE": "1"}
    out = subprocess.run([sys.executable, "-c", PROBE, str(calls)], env=env, capture_output=True, text=True,
                         timeout=900, cwd=root)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="fusion-hot-path-"))
    try:
        trees = {"0.5.23": tree(work, False), "series": tree(work, True)}
        samples = {name: [] for name in trees}
        for _ in range(options.rounds):
            for name, root in trees.items():
                samples[name].append(measure(root, options.calls))
        keys = samples["0.5.23"][0].keys()
        print(f"us per call, median of {options.rounds} rounds (each the best of 3 x {options.calls} calls)")
        worst = 0.0
        for key in keys:
            stock = statistics.median(s[key] for s in samples["0.5.23"])
            ours = statistics.median(s[key] for s in samples["series"])
            print(f"{key:40} 0.5.23 {stock:7.3f}  series {ours:7.3f}  ratio {ours / stock:5.2f}")
            if key.startswith("ensure_workspace_initialized"):
                worst = max(worst, ours / stock)
        print(f"hot path (ensure_workspace_initialized) worst ratio: {worst:.2f} (bound 1.10)")
        return 0 if worst <= 1.10 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
