"""SGLang's own all-reduce chain, built and timed as its model runner uses it.

``Chain`` builds SGLang's tensor-parallel ``GroupCoordinator`` the way the model runner does
(``init_distributed_environment``, ``initialize_model_parallel``) with custom all-reduce on
and ``--enable-torch-symm-mem``, after ``load_plugins()`` (so the plugin, where installed
and on, decides what the group builds).  ``measure_tensor`` checks and times, for one
tensor, SGLang's dispatch (``GroupCoordinator.all_reduce``, and which method it took) and
each communicator forced through SGLang's ``_all_reduce_out_place`` where it accepts the
size: eagerly and under CUDA-graph replay (captured inside SGLang's ``graph_capture()``),
the slowest rank's time per trial.

Used by ``sglang-arch tune collectives --sglang`` (``measure``: SGLang's custom all-reduce
and PCIe-IPC beside the torch-level paths, per world size and message size) and by
``benchmark/sglang_allreduce.py`` / ``benchmark/fused_allreduce_rmsnorm.py`` (decode shapes,
with and without the plugin).  Multicast stays off in every process
(``collectives.MULTICAST_OFF``).
"""

from __future__ import annotations

import os
import time
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .collectives import MULTICAST_OFF, _free_port, _slowest_rank, _time, _time_graph, _wall, replay_samples, scoped_env
from .collectives import spread as _spread

GRAPH_CALLS = 20
FORCED = ("ca", "pcie_ipc", "torch_symm_mem", "pynccl")


def stub_sgl_kernel_if_missing() -> bool:
    """Stand-ins for ``sgl_kernel`` where the real package is not installed (its wheel is
    373 MB; the GPU host has no network); True if so.  SGLang's ServerArgs resolution
    imports it (model_config -> quantization -> ``from sgl_kernel import int8_scaled_mm``);
    no all-reduce path calls it."""
    from ..integrations.sglang.plan import stand_in_if_missing

    return stand_in_if_missing("sgl_kernel")


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


def time_eager(chain: Chain, fn, iters: int, trials: int) -> List[float]:
    """Eager per-call times, the slowest rank's per trial (``collectives._time`` on the chain's
    default group)."""
    return _time(fn, iters, not chain.cpu, None, reps=trials)


def time_graph(chain: Chain, fn, x, trials: int) -> Tuple[List[float], str]:
    """Capture GRAPH_CALLS calls inside SGLang's graph_capture(), replay after it."""
    import torch
    import torch.distributed as dist

    if chain.cpu:  # the same control flow, wall-clock timed
        return _time_graph(fn, trials, None, GRAPH_CALLS, timer=_wall), chain.method(x)
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
    return _slowest_rank(samples, True, None), method


def _gone_without_a_result(procs: List[Any], results: List[Dict[str, Any]], queue: Any) -> bool:
    """Whether a rank has ended (any exit code: one whose result could not be pickled exits
    0) without its result, after what is still in the queue is read (a result put just
    before its rank ended); such ranks are added to ``results`` as fatal."""
    import queue as queues

    ended = [r for r, p in enumerate(procs) if p.exitcode is not None]
    if not ended or all(r in {x["rank"] for x in results} for r in ended):
        return False
    try:
        while True:
            results.append(queue.get(timeout=2.0))
    except queues.Empty:
        pass
    delivered = {x["rank"] for x in results}
    gone = [r for r in ended if r not in delivered]
    results += [{"rank": r, "fatal": f"rank {r} ended without a result (exit code {procs[r].exitcode})"}
                for r in gone]
    return bool(gone)


def with_fatal(info: Dict[str, Any], exc: BaseException) -> Dict[str, Any]:
    """A rank's result after ``exc`` stopped it: the error and where it came from."""
    info["fatal"] = f"{type(exc).__name__}: {exc}"[:600]
    info["traceback"] = traceback.format_exc()[-4000:]
    return info


def run_ranks(rank_fn, args: Dict[str, Any], timeout: float) -> Dict[str, Any]:
    """Start ``rank_fn(rank, world, port, args, queue)`` in one spawned process per rank;
    rank 0's result, with the wall time and every rank's fatal error.  Waits at most
    ``timeout`` seconds, and no longer once a rank has died without its result (the others
    would wait for it in a collective); the ranks still running then are stopped, and so
    they are when the caller is interrupted."""
    import queue as queues

    import torch.multiprocessing as mp

    from .collectives import _stop_workers

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=rank_fn, args=(r, args["world"], port, args, queue)) for r in range(args["world"])]
    t0 = time.perf_counter()
    results: List[Dict[str, Any]] = []
    try:
        with scoped_env(dict(MULTICAST_OFF)):  # the ranks start with multicast off; the caller's environment stays
            for p in procs:
                p.start()
        while len(results) < len(procs) and time.perf_counter() - t0 < timeout:
            try:
                results.append(queue.get(timeout=1.0))
            except queues.Empty:
                if _gone_without_a_result(procs, results, queue):
                    break
        for p in procs:
            p.join(10)
    finally:
        _stop_workers(procs)
    got = {r["rank"] for r in results}
    results += [{"rank": r, "fatal": f"no result within {timeout:g} s"} for r in range(args["world"]) if r not in got]
    results.sort(key=lambda r: r["rank"])
    out = dict(results[0])
    out["wall_s"] = time.perf_counter() - t0
    if any("fatal" in r for r in results):
        out["fatal_ranks"] = {r["rank"]: r.get("fatal") for r in results if "fatal" in r}
        out["traceback"] = next((r.get("traceback") for r in results if "fatal" in r), None)
    return out


def measure_tensor(chain: Chain, x: Any, iters: int, trials: int, modes: Sequence[str] = ("eager", "graph"),
                   paths: Sequence[str] = FORCED) -> Dict[str, Any]:
    """One tensor's row: ``sglang`` (SGLang's dispatch) and each of ``paths`` forced where its
    communicator accepts ``x``, each first checked against ``torch.distributed``'s result
    (exact: integer-valued data), then timed in ``modes``.  The method SGLang's dispatch takes
    eagerly (``method_eager``) and under capture (``method_graph``); errors by path (``ca``
    is graph-timed only at sizes SGLang's own dispatch gives it under capture: its graph
    bounds differ from its eager ones, and another size would fail inside the capture)."""
    import torch
    import torch.distributed as dist

    ref = x.clone()
    dist.all_reduce(ref)
    row: Dict[str, Any] = {"bytes": x.numel() * x.element_size(), "eager": {}, "graph": {}, "errors": {},
                           "method_eager": chain.method(x)}
    entries = {"sglang": lambda: chain.sglang_all_reduce(x)}
    for m in paths:
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
        if "eager" in modes:
            try:
                row["eager"][name] = _spread(time_eager(chain, fn, iters, trials))
            except Exception as exc:
                row["errors"][f"{name}@eager"] = f"{type(exc).__name__}: {exc}"[:300]
        if "graph" not in modes:
            continue
        if name == "ca" and row.get("method_graph") != "ca":
            row["errors"]["ca@graph"] = "not taken by the custom all-reduce under capture"
            continue
        try:
            samples, method = time_graph(chain, fn, x, trials)
            row["graph"][name] = _spread(samples)
            if name == "sglang":
                row["method_graph"] = method
        except Exception as exc:
            row["errors"][f"{name}@graph"] = f"{type(exc).__name__}: {exc}"[:300]
            if not chain.cpu:
                torch.cuda.synchronize()
    return row


# --- ``tune collectives --sglang``: SGLang's own paths per world size and message size ---------

# SGLang's method names -> the path names of tune's cells
PATH_OF_METHOD = {"ca": "custom_ar", "pcie_ipc": "pcie_ipc", "torch_symm_mem": "torch_symm_mem",
                  "pynccl": "nccl", "torch.distributed": "nccl", "torch.distributed (cpu)": "nccl"}
# what tune measures through SGLang (torch symm mem and NCCL it measures itself)
TUNE_PATHS = ("ca", "pcie_ipc")


def measure(world: int, sizes: Sequence[int], iters: int, trials: int, modes: Sequence[str], cpu: bool,
            timeout: float) -> Dict[str, Any]:
    """SGLang's dispatch, custom all-reduce and PCIe-IPC at each of ``sizes`` (bytes, bf16)
    on ``world`` GPUs: rank 0's result (``rows``, ``communicators``) or its ``fatal`` error.
    PCIe-IPC is asked for (``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1``): it is measured wherever
    the group builds it."""
    args = {"world": world, "sizes": list(sizes), "iters": iters, "trials": trials, "modes": list(modes),
            "cpu": cpu}
    return run_ranks(_tune_rank, args, timeout)


def _tune_rank(rank: int, world: int, port: int, args: Dict[str, Any], queue) -> None:
    os.environ.update(MULTICAST_OFF)
    os.environ["SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"] = "1"
    info: Dict[str, Any] = {"rank": rank}
    try:
        import torch

        info["sgl_kernel_stubbed"] = stub_sgl_kernel_if_missing()
        from sglang.srt.plugins import load_plugins

        load_plugins()
        chain = Chain(rank, world, port, args["cpu"], info)
        rows = []
        for size in args["sizes"]:
            numel = size // 2
            gen = torch.Generator().manual_seed(1000 * rank + size % 997)
            x = torch.randint(-8, 8, (numel,), generator=gen).to(torch.bfloat16).to(chain.device)
            rows.append(measure_tensor(chain, x, args["iters"], args["trials"], args["modes"], TUNE_PATHS))
        info["rows"] = rows
        queue.put(info)
    except Exception as exc:
        queue.put(with_fatal(info, exc))


def into_cells(result: Dict[str, Any], cells: List[Any]) -> None:
    """SGLang's paths from ``measure``'s result into tune's cells of that world size (matched
    by size): ``custom_ar`` and ``pcie_ipc`` timed where built, ``sglang`` (its dispatch, as
    run) with the method it took per mode (``sglang_methods``), and each error."""
    by_size = {c.size: c for c in cells}
    for row in result.get("rows", []):
        cell = by_size.get(row["bytes"])
        if cell is None:
            continue
        for mode, times in (("eager", cell.times_us), ("graph", cell.graph_times_us)):
            for name, st in row[mode].items():
                path = "sglang" if name == "sglang" else PATH_OF_METHOD.get(name, name)
                times[path] = st["median"]
                cell.stats.setdefault(mode, {})[path] = st
            method = row.get(f"method_{mode}")
            if method is not None and "sglang" in row[mode]:
                cell.sglang_methods[mode] = PATH_OF_METHOD.get(method, method)
        for name, why in row["errors"].items():
            base, _, mode = name.partition("@")
            path = "sglang" if base == "sglang" else PATH_OF_METHOD.get(base, base)
            cell.errors[path + (f"@{mode}" if mode else "")] = why
