"""SGLang's own all-reduce chain on this node, with and without the plugin.

    python benchmark/sglang_allreduce.py [--world-size 2] [--trials 7] [--out FILE]

For each mode ("without": ``SGLANG_ARCH_DISABLE=1``; "with": the plugin as installed) it
starts one process per GPU, loads SGLang's plugins as SGLang does (``load_plugins()``),
and builds SGLang 0.5.23's real tensor-parallel ``GroupCoordinator`` the way the model
runner does (``init_distributed_environment``, ``initialize_model_parallel``) with
custom all-reduce on (the default) and ``--enable-torch-symm-mem`` (so that torch
symmetric memory is in the chain).  Then, for the all-reduce of every decode step
(``[batch, hidden]`` bf16, hidden 4096 and 8192, batch 1..256) it times:

- ``sglang``: ``GroupCoordinator.all_reduce``, SGLang's own dispatch (custom all-reduce,
  then torch symmetric memory, then NCCL), and which method it took;
- each communicator forced through SGLang's ``_all_reduce_out_place``: ``ca`` (the JIT
  custom all-reduce v2), ``pcie_ipc`` (FlashInfer's PCIe-IPC all-reduce, where the group
  built it: FlashInfer installed and ``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1``, or the plugin on
  a tier measured for it), ``torch_symm_mem``, ``pynccl``, where it accepts the size;

in eager mode (calls back to back) and under CUDA-graph replay (20 calls captured inside
SGLang's ``graph_capture()``, as its CUDA-graph runner does, replayed after the context
has registered the graph inputs), ``--trials`` trials each, the slowest rank's time.
If the ``GroupCoordinator`` cannot be built, the communicators are built one by one
(``PyNcclCommunicator``, ``dispatch_custom_allreduce``, ``TorchSymmMemCommunicator``)
and SGLang's dispatch order is emulated; the result says which (``coordinator``).

Multicast stays off (``NCCL_NVLS_ENABLE=0`` ...).  ``--cpu`` runs the same code on CPUs
with gloo (no communicators, wall-clock timing): a check of the harness only.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402
from sglang_arch.tune.collectives import MULTICAST_OFF, scoped_env  # noqa: E402
from sglang_arch.tune.sglang_chain import (  # noqa: E402  (SGLang's chain, shared with tune collectives --sglang)
    FORCED,
    GRAPH_CALLS,
    Chain,
    measure_tensor,
    run_ranks,
    stub_sgl_kernel_if_missing,
    with_fatal,
)

HIDDEN = (4096, 8192)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# The decode-step model assumption: 2 all-reduces per layer (attention output and MLP
# output, tensor parallel), layers of a dense model with that hidden size.
MODELS = {4096: ("Llama-3.1-8B", 32), 8192: ("Llama-3.1-70B", 80)}


def _rank(rank: int, world: int, port: int, args: Dict[str, Any], queue) -> None:
    os.environ.update(MULTICAST_OFF)
    info: Dict[str, Any] = {"rank": rank}
    try:
        import torch

        info["sgl_kernel_stubbed"] = stub_sgl_kernel_if_missing()
        t0 = time.perf_counter()
        from sglang.srt.plugins import load_plugins

        load_plugins()
        info["load_plugins_s"] = time.perf_counter() - t0
        try:
            from sglang.srt.distributed.device_communicators.torch_symm_mem import (
                TorchSymmMemCommunicator,
            )

            init = TorchSymmMemCommunicator.__init__
            info["torch_symm_mem_init"] = f"{init.__module__}.{init.__qualname__}"
        except Exception as exc:
            info["torch_symm_mem_init"] = f"{type(exc).__name__}: {exc}"
        t0 = time.perf_counter()
        chain = Chain(rank, world, port, args["cpu"], info)
        info["init_s"] = time.perf_counter() - t0
        rows = []
        for hidden in args["hidden"]:
            for batch in args["batches"]:
                x = (torch.randint(-4, 4, (batch, hidden), generator=torch.Generator().manual_seed(rank * 7 + batch))
                     .to(torch.bfloat16).to(chain.device))
                row = {"hidden": hidden, "batch": batch,
                       **measure_tensor(chain, x, args["iters"], args["trials"])}
                rows.append(row)
        info["rows"] = rows
        queue.put(info)
    except Exception as exc:
        queue.put(with_fatal(info, exc))


def run_mode(mode: str, args: Dict[str, Any]) -> Dict[str, Any]:
    with scoped_env({"SGLANG_ARCH_DISABLE": "1" if mode == "without" else None}):
        return run_ranks(_rank, args, args["mode_timeout"])


def summarize(result: Dict[str, Any]) -> List[str]:
    lines = []
    for mode, r in result["modes"].items():
        lines.append(f"== {mode} plugin: {r.get('coordinator')}; communicators {r.get('communicators')}")
        for key in ("coordinator_error", "ca_error", "torch_symm_mem_error", "pynccl_error", "fatal", "fatal_ranks"):
            if r.get(key):
                lines.append(f"   {key}: {r[key]}")
        for row in r.get("rows", []):
            g, e = row["graph"], row["eager"]
            cells = []
            for name in ("sglang",) + FORCED:
                if name in g or name in e:
                    gm = f"{g[name]['median']:.1f}" if name in g else "-"
                    em = f"{e[name]['median']:.1f}" if name in e else "-"
                    cells.append(f"{name} {gm}/{em}")
            lines.append(f"   h{row['hidden']} b{row['batch']:>3} {row['bytes'] >> 10:>5} KiB "
                         f"graph:{row.get('method_graph', '-'):<14} eager:{row['method_eager']:<14} "
                         + "  ".join(cells) + (f"  errors {row['errors']}" if row["errors"] else ""))
    return lines


def common_parser(description: str) -> argparse.ArgumentParser:
    """The options both GPU benchmarks take (this one and fused_allreduce_rmsnorm.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--trials", type=int, default=7)
    parser.add_argument("--iters", type=int, default=20, help="eager calls per trial")
    parser.add_argument("--hidden", default=",".join(map(str, HIDDEN)))
    parser.add_argument("--cpu", action="store_true", help="gloo on CPUs: checks the harness only")
    parser.add_argument("--out")
    return parser


def common_args(a: argparse.Namespace) -> Dict[str, Any]:
    return {"world": a.world_size, "trials": a.trials, "iters": a.iters, "cpu": a.cpu,
            "hidden": [int(h) for h in a.hidden.split(",")]}


def result_header(script: str, a: argparse.Namespace) -> Dict[str, Any]:
    """What every result of the GPU benchmarks starts with: command, machine, timing setup."""
    return {
        "command": f"python benchmark/{script} " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "world_size": a.world_size, "trials": a.trials, "eager_calls_per_trial": a.iters,
        "graph_calls_per_replay": GRAPH_CALLS,
        "multicast": "off (" + " ".join(f"{k}={v}" for k, v in MULTICAST_OFF.items()) + ")",
    }


def main() -> int:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--batches", default=",".join(map(str, BATCHES)))
    parser.add_argument("--modes", default="without,with")
    parser.add_argument("--mode-timeout", type=float, default=600, help="seconds for each mode's processes")
    a = parser.parse_args()
    args = dict(common_args(a), mode_timeout=a.mode_timeout, batches=[int(b) for b in a.batches.split(",")])
    result: Dict[str, Any] = dict(
        result_header("sglang_allreduce.py", a),
        models={str(h): {"model": m, "layers": n, "all_reduces_per_decode_step": 2 * n}
                for h, (m, n) in MODELS.items()},
        modes={})
    try:
        import torch

        if not a.cpu:
            result["device"] = torch.cuda.get_device_name(0)
        result["torch"] = torch.__version__
        import importlib.metadata as md

        result["sglang"] = md.version("sglang")
    except Exception as exc:
        result["versions_error"] = str(exc)
    for mode in a.modes.split(","):
        result["modes"][mode] = run_mode(mode, args)
        print("\n".join(summarize({"modes": {mode: result["modes"][mode]}})), file=sys.stderr, flush=True)
        if a.out:  # keep what is there even if a later mode hangs
            emit(result, a.out)
    result["decode_step_us"] = decode_steps(result)
    emit(result, a.out) if a.out else None
    return 0


def decode_steps(result: Dict[str, Any]) -> Dict[str, Any]:
    """Per mode, hidden and batch: the graph-replayed SGLang chain's time per all-reduce
    times the all-reduces of one decode step (2 per layer)."""
    out: Dict[str, Any] = {}
    for mode, r in result["modes"].items():
        for row in r.get("rows", []):
            g = row["graph"].get("sglang")
            if g is None:
                continue
            model, layers = MODELS.get(row["hidden"], (f"hidden {row['hidden']}", 32))
            key = f"{row['hidden']}"
            out.setdefault(mode, {}).setdefault(key, {"model": model, "all_reduces": 2 * layers, "batches": {}})
            out[mode][key]["batches"][str(row["batch"])] = {
                "method": row.get("method_graph"), "per_all_reduce_us": g["median"],
                "per_step_us": g["median"] * 2 * layers, "per_step_min_us": g["min"] * 2 * layers,
                "per_step_max_us": g["max"] * 2 * layers}
    return out


if __name__ == "__main__":
    sys.exit(main())
