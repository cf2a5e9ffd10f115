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
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402
from sglang_arch.tune.collectives import (  # noqa: E402
    MULTICAST_OFF,
    eager_us,
    replay_samples,
    scoped_env,
)
from sglang_arch.tune.collectives import spread as _spread  # noqa: E402  (median, quartiles, trials)

HIDDEN = (4096, 8192)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
GRAPH_CALLS = 20
# The decode-step model assumption: 2 all-reduces per layer (attention output and MLP
# output, tensor parallel), layers of a dense model with that hidden size.
MODELS = {4096: ("Llama-3.1-8B", 32), 8192: ("Llama-3.1-70B", 80)}
FORCED = ("ca", "pcie_ipc", "torch_symm_mem", "pynccl")


def stub_sgl_kernel_if_missing() -> bool:
    """Stand-ins for ``sgl_kernel`` where the real package is not installed (its wheel is
    373 MB; the GPU host has no network); True if so.  SGLang's ServerArgs resolution
    imports it (model_config -> quantization -> ``from sgl_kernel import int8_scaled_mm``);
    no all-reduce path calls it."""
    from sglang_arch.integrations.sglang.plan import stand_in_if_missing

    return stand_in_if_missing("sgl_kernel")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chain:
    """The all-reduce entry points: SGLang's GroupCoordinator, or the communicators
    built one by one with SGLang's dispatch order emulated."""

    def __init__(self, rank: int, world: int, port: int, cpu: bool, info: Dict[str, Any],
                 server_args: Optional[Dict[str, Any]] = None):
        import torch
        import torch.distributed as dist

        self.cpu = cpu
        self.device = torch.device("cpu" if cpu else f"cuda:{rank}")
        if not cpu:
            torch.cuda.set_device(rank)
        self.tp = None
        try:
            from sglang.srt.distributed import parallel_state as ps
            from sglang.srt.runtime_context import (
                SpawnRanks,
                get_parallel,
                publish,
                reset_context,
            )
            from sglang.srt.server_args import ServerArgs

            ps.init_distributed_environment(world_size=world, rank=rank, local_rank=rank,
                                            distributed_init_method=f"tcp://127.0.0.1:{port}",
                                            backend="gloo" if cpu else "nccl")
            # sglang.test.test_utils.publish_build_topology, inlined (that module imports test tools)
            reset_context()
            publish(ServerArgs(model_path="dummy", tp_size=world, ep_size=1, pp_size=1, **(server_args or {})),
                    role="test",
                    ranks=SpawnRanks(world_rank=rank))
            if ps._WORLD is not None:
                get_parallel().override_permanently(world_group=ps._WORLD)
            ps.set_custom_all_reduce(True)
            ps.set_torch_symm_mem_all_reduce(True)  # --enable-torch-symm-mem
            ps.initialize_model_parallel()
            self.tp = ps.get_tp_group()
            info["coordinator"] = "sglang GroupCoordinator (initialize_model_parallel)"
            self.ca, self.tsm, self.pynccl = self.tp.ca_comm, self.tp.torch_symm_mem_comm, self.tp.pynccl_comm
            # SGLang's PCIe-IPC all-reduce, where this release has it and the group built it
            # (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1, or the plugin on a tier measured for it; FlashInfer)
            self.pcie = getattr(self.tp, "pcie_ipc_comm", None)
        except Exception as exc:
            info["coordinator_error"] = f"{type(exc).__name__}: {exc}"[:600]
            info["coordinator_traceback"] = traceback.format_exc()[-3000:]
            info["coordinator"] = "communicators built one by one, SGLang's dispatch order emulated"
            if not dist.is_initialized():
                dist.init_process_group("gloo" if cpu else "nccl", rank=rank, world_size=world,
                                        init_method=f"tcp://127.0.0.1:{port}")
            try:  # what the custom all-reduce's P2P check reads, where publishing stopped early
                from sglang.srt.distributed import parallel_state as ps
                from sglang.srt.runtime_context import get_parallel

                if ps._WORLD is not None:
                    get_parallel().override_permanently(world_group=ps._WORLD)
            except Exception as exc2:
                info["world_group_override_error"] = f"{type(exc2).__name__}: {exc2}"[:300]
            self._build_one_by_one(info)
        self.group = dist.group.WORLD
        info["communicators"] = {
            "ca": None if self.ca is None else {"class": type(self.ca).__name__, "disabled": self.ca.disabled,
                                                "max_size": getattr(self.ca, "max_size", None)},
            "torch_symm_mem": None if self.tsm is None else {"disabled": self.tsm.disabled,
                                                             "max_size": self.tsm.max_size},
            "pynccl": self.pynccl is not None,
            "pcie_ipc": None if self.pcie is None else {"disabled": self.pcie.disabled},
        }
        for key in ("ca_error", "torch_symm_mem_error", "pynccl_error"):
            info.setdefault(key, None)

    def _build_one_by_one(self, info):
        import torch.distributed as dist

        self.ca = self.tsm = self.pynccl = self.pcie = None
        if self.cpu:
            return
        cpu_group = dist.new_group(backend="gloo")
        try:
            from sglang.srt.distributed.device_communicators.pynccl import (
                PyNcclCommunicator,
            )

            self.pynccl = PyNcclCommunicator(group=cpu_group, device=self.device)
        except Exception as exc:
            info["pynccl_error"] = f"{type(exc).__name__}: {exc}"[:600]
        try:
            from sglang.srt.distributed.device_communicators.custom_all_reduce import (
                dispatch_custom_allreduce,
            )

            cls = dispatch_custom_allreduce(group=cpu_group, device=self.device)
            self.ca = cls(group=cpu_group, device=self.device)
        except Exception as exc:
            info["ca_error"] = f"{type(exc).__name__}: {exc}"[:600]
            info["ca_traceback"] = traceback.format_exc()[-3000:]
        try:
            from sglang.srt.distributed.device_communicators.torch_symm_mem import (
                TorchSymmMemCommunicator,
            )

            self.tsm = TorchSymmMemCommunicator(group=cpu_group, device=self.device)
        except Exception as exc:
            info["torch_symm_mem_error"] = f"{type(exc).__name__}: {exc}"[:600]

    # -- dispatch ---------------------------------------------------------------------
    def method(self, x) -> str:
        """What SGLang's dispatch takes for ``x`` right now (eager, or inside a capture)."""
        if self.tp is not None:
            if self.cpu:
                return "torch.distributed (cpu)"
            m = self.tp._resolve_outplace_all_reduce_method(x)
            if m is None:
                return "pynccl" if self.tp.pynccl_comm is not None else "torch.distributed"
            return m
        if self.ca is not None and not self.ca.disabled and self.ca.should_custom_ar(x):
            return "ca"
        if self.tsm is not None and not self.tsm.disabled and self.tsm.should_torch_symm_mem_allreduce(x):
            return "torch_symm_mem"
        return "pynccl" if self.pynccl is not None else "torch.distributed"

    def accepts(self, method: str, x) -> bool:
        if self.cpu:
            return False
        if method == "ca":
            return self.ca is not None and not self.ca.disabled and self.ca.should_custom_ar(x)
        if method == "torch_symm_mem":
            return self.tsm is not None and not self.tsm.disabled and self.tsm.should_torch_symm_mem_allreduce(x)
        if method == "pcie_ipc":
            return self.pcie is not None and not self.pcie.disabled and self.pcie.should_pcie_ipc_ar(x)
        return self.pynccl is not None

    def sglang_all_reduce(self, x):
        if self.tp is not None:
            return self.tp.all_reduce(x)
        return self.forced(self.method(x), x)

    def forced(self, method: str, x):
        import torch.distributed as dist

        if self.tp is not None and method in FORCED:
            return self.tp._all_reduce_out_place(x, method)
        if method == "ca":
            return self.ca.custom_all_reduce(x)
        if method == "torch_symm_mem":
            return self.tsm.all_reduce(x)
        if method == "pynccl":
            with self.pynccl.change_state(enable=True):
                return self.pynccl.outplace_all_reduce(x)
        out = x.clone()
        dist.all_reduce(out)
        return out

    def capture_context(self):
        if self.tp is not None:
            return self.tp.graph_capture()
        return self._emulated_capture()

    def _emulated_capture(self):
        from contextlib import ExitStack, contextmanager

        import torch

        @contextmanager
        def ctx():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with ExitStack() as stack:
                stack.enter_context(torch.cuda.stream(stream))
                if self.ca is not None and not self.ca.disabled:
                    stack.enter_context(self.ca.capture())
                if self.pynccl is not None:
                    stack.enter_context(self.pynccl.change_state(enable=True))
                yield type("Ctx", (), {"stream": stream})()
        return ctx()


def _time_eager(chain: Chain, fn, iters: int, trials: int) -> List[float]:
    import torch.distributed as dist

    for _ in range(3):
        fn()
    samples = []
    for _ in range(trials):
        dist.barrier()
        samples.append(eager_us(fn, iters, cuda=not chain.cpu))
    return _slowest(chain, samples)


def _time_graph(chain: Chain, fn, x, trials: int) -> Tuple[List[float], str]:
    """Capture GRAPH_CALLS calls inside SGLang's graph_capture(), replay after it."""
    import torch
    import torch.distributed as dist

    if chain.cpu:  # the same control flow, wall-clock timed
        samples = []
        for _ in range(trials):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(GRAPH_CALLS):
                fn()
            samples.append((time.perf_counter() - t0) * 1e6 / GRAPH_CALLS)
        return _slowest(chain, samples), chain.method(x)
    torch.cuda.synchronize()
    dist.barrier()
    graph = torch.cuda.CUDAGraph()
    with chain.capture_context() as ctx:
        for _ in range(3):  # warm-up on the capture stream, as SGLang's runner does
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        with torch.cuda.graph(graph, stream=ctx.stream):
            method = chain.method(x)
            for _ in range(GRAPH_CALLS):
                fn()
    torch.cuda.synchronize()
    samples = replay_samples(graph, GRAPH_CALLS, trials, dist.barrier)
    del graph
    torch.cuda.synchronize()
    return _slowest(chain, samples), method


def _slowest(chain: Chain, samples: List[float]) -> List[float]:
    import torch
    import torch.distributed as dist

    t = torch.tensor(samples, dtype=torch.float64, device=chain.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return [float(v) for v in t.tolist()]


def _rank(rank: int, world: int, port: int, args: Dict[str, Any], queue) -> None:
    os.environ.update(MULTICAST_OFF)
    info: Dict[str, Any] = {"rank": rank}
    try:
        import torch
        import torch.distributed as dist

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
                ref = x.clone()
                dist.all_reduce(ref)
                row = {"hidden": hidden, "batch": batch, "bytes": x.numel() * x.element_size(),
                       "eager": {}, "graph": {}, "errors": {}}
                row["method_eager"] = chain.method(x)
                entries = {"sglang": lambda: chain.sglang_all_reduce(x)}
                for m in FORCED:
                    if chain.accepts(m, x):
                        entries[m] = (lambda m=m: chain.forced(m, x))
                for name, fn in entries.items():
                    try:
                        out = fn()
                        if not torch.equal(out.float(), ref.float()):
                            row["errors"][name] = "result differs from torch.distributed's"
                            continue
                    except Exception as exc:
                        row["errors"][name] = f"{type(exc).__name__}: {exc}"[:300]
                        continue
                    try:
                        row["eager"][name] = _spread(_time_eager(chain, fn, args["iters"], args["trials"]))
                    except Exception as exc:
                        row["errors"][f"{name}@eager"] = f"{type(exc).__name__}: {exc}"[:300]
                    if name == "ca" and row.get("method_graph") != "ca":
                        # ca's graph thresholds differ from its eager ones; a size SGLang's own
                        # dispatch does not give it under capture would fail inside the capture
                        row["errors"]["ca@graph"] = "not taken by the custom all-reduce under capture"
                        continue
                    try:
                        samples, method = _time_graph(chain, fn, x, args["trials"])
                        row["graph"][name] = _spread(samples)
                        if name == "sglang":
                            row["method_graph"] = method
                    except Exception as exc:
                        row["errors"][f"{name}@graph"] = f"{type(exc).__name__}: {exc}"[:300]
                        if not chain.cpu:
                            torch.cuda.synchronize()
                rows.append(row)
        info["rows"] = rows
        queue.put(info)
    except Exception as exc:
        queue.put(with_fatal(info, exc))


def with_fatal(info: Dict[str, Any], exc: BaseException) -> Dict[str, Any]:
    """A rank's result after ``exc`` stopped it: the error and where it came from."""
    info["fatal"] = f"{type(exc).__name__}: {exc}"[:600]
    info["traceback"] = traceback.format_exc()[-4000:]
    return info


def run_ranks(rank_fn, args: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    """Start ``rank_fn(rank, world, port, args, queue)`` in one spawned process per rank;
    rank 0's result, with the wall time and every rank's fatal error."""
    import torch.multiprocessing as mp

    os.environ.update(MULTICAST_OFF)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=rank_fn, args=(r, args["world"], port, args, queue)) for r in range(args["world"])]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    results = []
    for _ in procs:
        try:
            results.append(queue.get(timeout=max(1.0, timeout - (time.perf_counter() - t0))))
        except Exception:
            break
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    got = {r["rank"] for r in results}
    results += [{"rank": r, "fatal": f"no result within {timeout} s"} for r in range(args["world"]) if r not in got]
    results.sort(key=lambda r: r["rank"])
    out = dict(results[0])
    out["wall_s"] = time.perf_counter() - t0
    if any("fatal" in r for r in results):
        out["fatal_ranks"] = {r["rank"]: r.get("fatal") for r in results if "fatal" in r}
        out["traceback"] = next((r.get("traceback") for r in results if "fatal" in r), None)
    return out


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
