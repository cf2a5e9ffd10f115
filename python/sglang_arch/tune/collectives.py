"""Measure all-reduce paths on this node, check the registry's choice, write an override.

One process per GPU (``torch.multiprocessing`` spawn).  For each world size and message
size (bf16) it first checks every path against NCCL's result (integer-valued data, so
the sums are exact), then times it.  Paths:

- ``nccl``: ``dist.all_reduce`` (gloo on a CPU run, which checks the harness only);
- ``two_shot`` / ``one_shot``: torch symmetric memory, timed as SGLang uses it (copy into
  the symmetric buffer, the kernel, copy out).

Each path is timed two ways, ``trials`` times each (default 7), the slowest rank's time
per trial:

- ``eager`` (prefill): ``iters`` calls back to back between two CUDA events;
- ``graph`` (decode): ``GRAPH_CALLS`` calls captured in one ``torch.cuda.CUDAGraph``,
  one replay between two CUDA events (how SGLang's decode runs the all-reduce).

Every cell keeps its trials and their spread (median, min, max, quartiles).  A path
counts as slower only where the medians differ by more than 10% *and* the trials do not
overlap (the faster path's slowest trial is quicker than the slower path's quickest):
a difference inside the spread decides nothing.

With ``--sglang`` (``sglang_chain``): SGLang's own paths as well, through its
``GroupCoordinator`` built as the model runner builds it (the plugin loaded): ``custom_ar``
(its JIT custom all-reduce v2: SGLang and nvcc on the node), ``pcie_ipc`` (FlashInfer's
PCIe-IPC all-reduce, asked for, where the group builds it) and ``sglang``, its dispatch as
run, with the path it took.  ``check_dispatch`` judges that path against the fastest;
``tuned_pcie_ipc`` decides ``pcie_ipc_world_sizes`` (``--out`` writes them).

Multicast stays off in every process (``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``, ``NVSHMEM_DISABLE_NVLS=1``): on shared machines
it can take the GPUs out of service, and it is exactly the no-multicast case (a PCIe
box) that the two-shot bounds are about.  ``--out`` writes those
(``symm_mem_two_shot``); with multicast SGLang's own sizes and kernels stay in force, and
this harness does not measure multimem (it keeps multicast off, as above).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from .. import interrupts
from ..arch.detect import MULTICAST_OFF
from ..arch.profile import symm_size_text
from ..arch.validate import SYMM_MEM_MAX_MIB, shown
from ..files import write_files

KIB = 1024
MIB = 1024 * KIB
DEFAULT_SIZES = tuple(4 * KIB * 2 ** i for i in range(17))  # 4 KiB .. 256 MiB, x2 steps
DEFAULT_TRIALS = 7
GRAPH_CALLS = 20  # all-reduce calls captured in one CUDA graph
MODES = ("eager", "graph")
TOLERANCE = 0.10  # the registry's pick may be this much slower than the fastest path
SGLANG_TIMEOUT_S = 1800.0  # --sglang: one world size's SGLang processes (JIT builds of its kernels included)
# The paths SGLang's TorchSymmMemCommunicator can take (or fall back to).  one_shot is
# measured too, as information: the communicator has no one-shot kernel call.
SGLANG_PATHS = ("nccl", "two_shot", "multimem")
# With --sglang, SGLang's own paths before those in its dispatch order (custom all-reduce,
# PCIe-IPC where the group builds it), and ``sglang``: its dispatch as run, whose method
# each cell records (``Measurement.sglang_methods``).
SGLANG_OWN_PATHS = ("custom_ar", "pcie_ipc")
DISPATCH = "sglang"


@contextlib.contextmanager
def scoped_env(values: Dict[str, Optional[str]]) -> Iterator[None]:
    """``values`` in ``os.environ`` for what runs inside (None: the variable unset), each
    variable restored afterwards: a caller's environment is left as it was."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def multicast_off():
    """The multicast-off variables for what runs inside (the measurement's processes and the
    registry's check of the same node), restored afterwards."""
    return scoped_env(dict(MULTICAST_OFF))


@dataclass
class Measurement:
    world_size: int
    size: int  # bytes
    times_us: Dict[str, float] = field(default_factory=dict)  # path -> eager median (slowest rank)
    errors: Dict[str, str] = field(default_factory=dict)  # path -> why it did not run or was wrong
    graph_times_us: Dict[str, float] = field(default_factory=dict)  # path -> graph-replay median
    # mode ("eager" / "graph") -> path -> {"median", "min", "max", "q1", "q3", "trials"}
    stats: Dict[str, Dict[str, Dict[str, Any]]] = field(default_factory=dict)
    # --sglang: mode -> the path SGLang's own dispatch took for this message (path "sglang")
    sglang_methods: Dict[str, str] = field(default_factory=dict)


@dataclass
class RunInfo:
    device: str
    capability: Optional[str]
    backend: str
    world_sizes: List[int]
    iters: int
    started: str
    measurements: List[Measurement]
    trials: int = 0
    graph_calls: int = 0
    modes: List[str] = field(default_factory=list)
    # --sglang: per world size, how SGLang's chain was built (its GroupCoordinator, or the
    # communicators one by one with its dispatch order emulated where that could not be)
    sglang_chain: Dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(world_sizes: Sequence[int], sizes: Sequence[int] = DEFAULT_SIZES, iters: int = 20,
            backend: str = "nccl", trials: int = DEFAULT_TRIALS, modes: Sequence[str] = MODES,
            sglang: bool = False, sglang_timeout: float = SGLANG_TIMEOUT_S) -> RunInfo:
    """Run the measurement for each world size; returns every (world size, size) cell.
    ``sglang``: SGLang's own paths too (``sglang_chain.measure``), in processes of their own
    after the torch-level ones, at most ``sglang_timeout`` seconds per world size."""
    import torch
    import torch.multiprocessing as mp

    if backend not in ("nccl", "gloo"):
        raise ValueError(f"invalid backend {backend!r}; accepted: nccl, gloo")
    if trials < 1:
        raise ValueError(f"invalid trials {trials}; accepted: an integer >= 1")
    if backend == "nccl":
        available = torch.cuda.device_count()
        too_big = [w for w in world_sizes if w > available]
        if too_big:
            raise ValueError(f"world size(s) {too_big} need more GPUs than the {available} visible")
        device = torch.cuda.get_device_name(0)
        capability = "{}.{}".format(*torch.cuda.get_device_capability(0))
    else:
        device, capability = "cpu (gloo: correctness of the harness only)", None
    ctx = mp.get_context("spawn")
    measurements: List[Measurement] = []
    chains: Dict[str, str] = {}
    for world in world_sizes:
        queue = ctx.SimpleQueue()
        port = _free_port()
        procs = [ctx.Process(target=_worker, args=(rank, world, port, list(sizes), iters, backend, queue, trials, modes),
                             daemon=True)  # daemon: never outlive this process
                 for rank in range(world)]
        try:
            for p in procs:
                p.start()
            interrupts.checkpoint("tune:measuring")
            results = [queue.get() for _ in procs]
            for p in procs:
                p.join(60)
        except BaseException:  # an interrupt (or a failure): the workers stop with the run
            with interrupts.deferred():
                _stop_workers(procs)
            raise
        failed = [r for r in results if "fatal" in r]
        if failed:
            raise RuntimeError(f"world size {world}: {failed[0]['fatal']}")
        rank0 = next(r for r in results if r["rank"] == 0)
        cells = [Measurement(**m) for m in rank0["measurements"]]
        if sglang:
            chains[str(world)] = _with_sglang_paths(cells, world, sizes, iters, trials, modes, backend, sglang_timeout)
        measurements.extend(cells)
    return RunInfo(device, capability, backend, list(world_sizes), iters,
                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), measurements,
                   trials=trials, graph_calls=GRAPH_CALLS if "graph" in modes else 0, modes=list(modes),
                   sglang_chain=chains)


def _with_sglang_paths(cells: List[Measurement], world: int, sizes: Sequence[int], iters: int, trials: int,
                       modes: Sequence[str], backend: str, timeout: float) -> str:
    """SGLang's dispatch, custom all-reduce and PCIe-IPC into ``cells`` (``sglang_chain``);
    where SGLang's processes failed, the reason on every cell (``sglang``).  Returns how the
    chain was built (with the reason where SGLang's GroupCoordinator could not be)."""
    from . import sglang_chain

    interrupts.checkpoint("tune:measuring SGLang's paths")
    result = sglang_chain.measure(world, sizes, iters, trials, modes, backend == "gloo", timeout)
    failed = result.get("fatal") or next(iter((result.get("fatal_ranks") or {}).values()), None)
    if failed:
        for cell in cells:
            cell.errors["sglang"] = f"SGLang's paths not measured: {failed}"[:300]
        return "not built"
    sglang_chain.into_cells(result, cells)
    built = str(result.get("coordinator", "?"))
    why = result.get("coordinator_error")
    return (built + (f" ({why})" if why else ""))[:300]


def _stop_workers(procs, wait: float = 3.0) -> None:
    """SIGTERM to every worker still running, SIGKILL to those alive after ``wait`` seconds."""
    for p in procs:
        if p.pid is not None and p.is_alive():
            p.terminate()
    deadline = time.monotonic() + wait
    for p in procs:
        if p.pid is not None:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()


def _worker(rank: int, world: int, port: int, sizes: List[int], iters: int, backend: str, queue,
            trials: int = DEFAULT_TRIALS, modes: Sequence[str] = ("eager",)) -> None:
    os.environ.update(MULTICAST_OFF)
    try:
        queue.put({"rank": rank, "measurements": _run_rank(rank, world, port, sizes, iters, backend, trials, modes)})
    except Exception as exc:  # reported to the parent, which raises with it
        queue.put({"rank": rank, "fatal": f"rank {rank}: {type(exc).__name__}: {exc}"})


def _run_rank(rank: int, world: int, port: int, sizes: List[int], iters: int, backend: str,
              trials: int = DEFAULT_TRIALS, modes: Sequence[str] = ("eager",)) -> List[Dict]:
    import torch
    import torch.distributed as dist

    cuda = backend == "nccl"
    if cuda:
        torch.cuda.set_device(rank)
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    dist.init_process_group(backend, rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
    try:
        group = dist.group.WORLD
        symm = _symm_buffer(max(sizes), device, group) if cuda else None
        out = []
        for size in sizes:
            cell = Measurement(world, size)
            numel = size // 2
            gen = torch.Generator().manual_seed(1000 * rank + size % 997)
            x = torch.randint(-8, 8, (numel,), generator=gen).to(torch.bfloat16).to(device)
            ref = x.clone()
            dist.all_reduce(ref)
            expected = sum(torch.randint(-8, 8, (numel,), generator=torch.Generator().manual_seed(1000 * r + size % 997))
                           .to(torch.float32) for r in range(world))
            if not torch.equal(ref.float().cpu(), expected):
                cell.errors["nccl"] = "result differs from the exact sum"
            paths = _symm_paths(symm, group, numel) if symm is not None else {}
            for name, run in paths.items():  # correctness first, on the untouched input
                try:
                    if not torch.equal(run(x).float(), ref.float()):
                        cell.errors[name] = "result differs from NCCL's"
                except Exception as exc:
                    cell.errors[name] = f"{type(exc).__name__}: {exc}"[:200]
            scratch = x.clone()  # NCCL reduces in place; time it on a copy
            timed = {"nccl": lambda: dist.all_reduce(scratch), **{n: (lambda r=r: r(x)) for n, r in paths.items()}}
            for mode in modes:
                for name, fn in timed.items():
                    if name in cell.errors:
                        continue
                    try:
                        if mode == "graph":  # on CPUs (gloo): the same control flow, wall-clock timed
                            samples = _time_graph(fn, trials, group, timer=None if cuda else _wall)
                        else:
                            samples = _time(fn, iters, cuda, group, reps=trials)
                    except Exception as exc:  # e.g. a path that cannot be captured in a graph
                        cell.errors[name if mode == "eager" else f"{name}@graph"] = f"{type(exc).__name__}: {exc}"[:200]
                        if mode == "graph" and cuda:
                            torch.cuda.synchronize()
                        continue
                    st = spread(samples)
                    cell.stats.setdefault(mode, {})[name] = st
                    (cell.times_us if mode == "eager" else cell.graph_times_us)[name] = st["median"]
            if symm is None and cuda:
                cell.errors["two_shot"] = "torch symmetric memory unavailable"
            out.append(asdict(cell))
        return out
    finally:
        dist.destroy_process_group()


def _symm_buffer(max_bytes: int, device, group):
    try:
        import torch
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError:
        return None
    buf = symm_mem.empty(max_bytes // 2, device=device, dtype=torch.bfloat16)
    symm_mem.rendezvous(buf, group.group_name)
    return buf


def _symm_paths(buf, group, numel: int):
    import torch

    name = group.group_name

    def two_shot(inp):
        buf[:numel].copy_(inp)
        torch.ops.symm_mem.two_shot_all_reduce_(buf[:numel], "sum", name)
        return buf[:numel].clone()

    def one_shot(inp):
        buf[:numel].copy_(inp)
        return torch.ops.symm_mem.one_shot_all_reduce(buf[:numel], "sum", name)

    return {"two_shot": two_shot, "one_shot": one_shot}


def _time(fn, iters: int, cuda: bool, group, reps: int = DEFAULT_TRIALS) -> List[float]:
    """Eager per-call times in microseconds, one per trial: ``iters`` calls back to back
    between two events (so launch gaps overlap as in a real forward pass); each trial the
    slowest rank's."""
    import torch.distributed as dist

    for _ in range(3):
        fn()
    samples = []
    for _ in range(reps):
        dist.barrier(group=group)
        samples.append(eager_us(fn, iters, cuda))
    return _slowest_rank(samples, cuda, group)


def _slowest_rank(samples: List[float], cuda: bool, group) -> List[float]:
    import torch
    import torch.distributed as dist

    t = torch.tensor(samples, dtype=torch.float64, device="cuda" if cuda else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return [float(v) for v in t.tolist()]


def _time_graph(fn, trials: int, group, calls: int = GRAPH_CALLS, timer=None) -> List[float]:
    """Graph-replay per-call times in microseconds, one per trial: ``calls`` calls of ``fn``
    captured in one CUDA graph (after a warm-up on a side stream, as PyTorch asks), then per
    trial one replay between two CUDA events; each trial the slowest rank's.  ``timer``
    (tests only) replaces the CUDA parts: ``timer(graph_replay) -> seconds``."""
    import torch
    import torch.distributed as dist

    if timer is not None:  # the CPU test path: same control flow, no CUDA
        samples = []
        for _ in range(trials):
            dist.barrier(group=group)
            samples.append(timer(lambda: [fn() for _ in range(calls)]) * 1e6 / calls)
        return _slowest_rank(samples, False, group)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    dist.barrier(group=group)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    torch.cuda.synchronize()
    samples = replay_samples(graph, calls, trials, lambda: dist.barrier(group=group))
    del graph
    torch.cuda.synchronize()
    return _slowest_rank(samples, True, group)


def eager_us(fn: Callable[[], Any], iters: int, cuda: bool) -> float:
    """Microseconds per call of ``iters`` back-to-back calls: between CUDA events on a GPU,
    by the wall clock on CPUs."""
    if not cuda:
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t0) * 1e6 / iters
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def replay_samples(graph: Any, calls: int, trials: int, barrier: Callable[[], None]) -> List[float]:
    """Microseconds per call of a captured CUDA graph of ``calls`` calls: one warm-up
    replay, then ``trials`` replays timed between CUDA events, all ranks starting together."""
    import torch

    barrier()
    graph.replay()  # warm-up replay
    torch.cuda.synchronize()
    samples = []
    for _ in range(trials):
        barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / calls)
    return samples


def _wall(run) -> float:
    t0 = time.perf_counter()
    run()
    return time.perf_counter() - t0


def spread(samples: Sequence[float]) -> Dict[str, Any]:
    """median, min, max and quartiles (statistics' inclusive method) of the trials."""
    import statistics

    values = sorted(samples)
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else (values[0],) * 3
    return {"median": statistics.median(values), "min": values[0], "max": values[-1], "q1": q1, "q3": q3,
            "trials": list(samples)}


# --- analysis ---------------------------------------------------------------------------

def registry_pick(decision, size: int) -> str:
    """The path SGLang takes for a message of ``size`` bytes under a symm-mem decision."""
    if decision.enabled and size < decision.max_bytes:
        return decision.algorithm
    return "nccl"


def _cell_times(m: Dict[str, Any], mode: str) -> Dict[str, float]:
    return m["times_us"] if mode == "eager" else m.get("graph_times_us", {})


def _cell_stats(m: Dict[str, Any], mode: str, path: str) -> Dict[str, Any]:
    """The spread of one path in one cell; a single value where only a median was saved."""
    st = m.get("stats", {}).get(mode, {}).get(path)
    if st is None:
        t = _cell_times(m, mode)[path]
        st = {"median": t, "min": t, "max": t}
    return st


def slower(m: Dict[str, Any], mode: str, path: str, than: str, tolerance: float = TOLERANCE) -> bool:
    """``path`` is slower than ``than`` in this cell beyond noise: its median more than
    ``tolerance`` above, and the trials apart (``than``'s slowest trial quicker than
    ``path``'s quickest)."""
    a, b = _cell_stats(m, mode, path), _cell_stats(m, mode, than)
    return a["median"] > (1 + tolerance) * b["median"] and a["min"] > b["max"]


def _fastest(m: Dict[str, Any], mode: str, paths) -> Optional[str]:
    times = {p: t for p, t in _cell_times(m, mode).items() if p in paths}
    return min(times, key=times.get) if times else None


def check(run: Dict[str, Any], res, topology, mode: str = "eager") -> List[Dict[str, Any]]:
    """Per cell: the registry's pick, the fastest path SGLang can take, and whether the pick
    is within 10% of it (or inside the spread of the trials); also how much faster any
    measured path (one-shot) would be."""
    from ..arch.policies.collectives import torch_symm_mem

    rows = []
    for m in run["measurements"]:
        times = _cell_times(m, mode)
        usable = {p: t for p, t in times.items() if p in SGLANG_PATHS}
        if not usable:
            continue
        decision = torch_symm_mem(res, topology, m["world_size"])
        pick = registry_pick(decision, m["size"])
        fastest = min(usable, key=usable.get)
        fastest_any = min(times, key=times.get)
        ratio = times[pick] / usable[fastest] if pick in times else None
        ok = ratio is not None and (pick == fastest or not slower(m, mode, pick, fastest))
        rows.append({"world_size": m["world_size"], "size": m["size"], "mode": mode, "pick": pick,
                     "fastest": fastest, "pick_over_fastest": ratio, "ok": ok,
                     "fastest_measured": fastest_any,
                     "pick_over_fastest_measured": times[pick] / times[fastest_any] if pick in times else None,
                     "times_us": times})
    return rows


def tuned_sizes(run: Dict[str, Any], algorithm: str = "two_shot", mode: str = "eager") -> Dict[int, Optional[int]]:
    """Per world size, the symm-mem max size (bytes, exclusive) the measurements support.

    The maximum is the smallest measured size from which ``algorithm`` stays slower than
    the fastest path SGLang can take (``SGLANG_PATHS``) at every larger size, where slower
    means beyond noise (``slower``: over 10% and outside the trials' spread): one slow small
    size among fast ones is launch noise, not a crossover.  Where it never loses from some
    size on, twice the largest measured size (at most the 1024 MiB an override may hold;
    ``tune`` measures below that).  Kept in bytes: a crossover below 1 MiB is a size, not
    "off".  ``None`` only where it loses at every measured size (turn the size off).  So a
    size at which ``algorithm`` was the fastest is always below the maximum.  A world size
    where ``algorithm`` never ran in ``mode`` is left out: nothing was measured.
    """
    by_ws: Dict[int, List[Dict]] = {}
    for m in run["measurements"]:
        by_ws.setdefault(m["world_size"], []).append(m)
    out: Dict[int, Optional[int]] = {}
    for ws, cells in by_ws.items():
        cells = sorted(cells, key=lambda c: c["size"])
        if algorithm not in _cell_times(cells[0], mode):
            continue

        def loses(m: Dict) -> bool:
            if algorithm not in _cell_times(m, mode):
                return True
            best = _fastest(m, mode, SGLANG_PATHS)
            return best != algorithm and slower(m, mode, algorithm, best)

        limit: Optional[int] = 2 * cells[-1]["size"]
        for i in range(len(cells) - 1, -1, -1):
            if not loses(cells[i]):
                break
            limit = cells[i]["size"] if i > 0 else None
        out[ws] = None if limit is None else min(limit, SYMM_MEM_MAX_MIB * MIB)  # what an override may hold
    return out


def check_dispatch(run: Dict[str, Any], mode: str) -> List[Dict[str, Any]]:
    """--sglang: per cell, SGLang's dispatch as run with the plugin (path ``sglang``: what
    SGLang finally builds and takes) against the fastest path it could take there; ``ok``
    where it is that path or not slower beyond noise (``slower``)."""
    rows = []
    for m in run["measurements"]:
        times = _cell_times(m, mode)
        fastest = _fastest(m, mode, SGLANG_PATHS + SGLANG_OWN_PATHS)
        if DISPATCH not in times or fastest is None:
            continue
        rows.append({"world_size": m["world_size"], "size": m["size"], "mode": mode,
                     "took": m.get("sglang_methods", {}).get(mode, "?"), "fastest": fastest,
                     "over_fastest": times[DISPATCH] / times[fastest],
                     "ok": not slower(m, mode, DISPATCH, fastest)})
    return rows


def tuned_pcie_ipc(run: Dict[str, Any], mode: str = "graph") -> Dict[int, Optional[bool]]:
    """--sglang: per world size where PCIe-IPC was timed in ``mode``: True (on) where it is
    faster than NCCL beyond noise at one size at least and slower at none, False (off) where
    it is slower at one size at least, None where it is neither (inside the noise: the
    table's value stands), counting the sizes it would take (where SGLang's dispatch took
    custom all-reduce, PCIe-IPC is not reached).  NCCL is what it replaces: the path SGLang
    takes there without it (torch symm mem only with its flag).  Slower and faster as
    ``slower`` says (over 10% and outside the trials' spread)."""
    by_ws: Dict[int, List[Dict]] = {}
    for m in run["measurements"]:
        times = _cell_times(m, mode)
        if "pcie_ipc" in times and "nccl" in times and m.get("sglang_methods", {}).get(mode) != "custom_ar":
            by_ws.setdefault(m["world_size"], []).append(m)
    verdicts: Dict[int, Optional[bool]] = {}
    for ws, cells in sorted(by_ws.items()):
        if any(slower(m, mode, "pcie_ipc", "nccl") for m in cells):
            verdicts[ws] = False
        else:
            verdicts[ws] = True if any(slower(m, mode, "nccl", "pcie_ipc") for m in cells) else None
    return verdicts


def pcie_ipc_world_sizes(base: Sequence[int], measured: Dict[int, Optional[bool]]) -> List[int]:
    """The PCIe-IPC world sizes ``base`` (the file's or the table's) with the measured ones set
    on or off (a world size measured inside the noise keeps ``base``'s answer)."""
    return sorted((set(base) - {ws for ws, on in measured.items() if on is False})
                  | {ws for ws, on in measured.items() if on is True})


# The table fields an override from this harness sets: the two-shot bounds without multicast,
# and (--sglang, where PCIe-IPC was timed) the world sizes PCIe-IPC is on at.
TUNED_FIELD = "symm_mem_two_shot"
PCIE_IPC_FIELD = "pcie_ipc_world_sizes"


def override_entry(capability: str, base_sizes: Dict[int, int], tuned: Dict[int, Optional[int]],
                   source: str) -> Dict[str, Any]:
    """An override entry in the table's schema: the tier's two-shot bounds without multicast
    (``symm_mem_two_shot``: the harness keeps multicast off, so what it measures is two-shot
    where multicast is absent; SGLang's own sizes with multicast stay as they are), with the
    measured ones in, each spelled as the table reads it back to the byte (``symm_size_text``)."""
    sizes = dict(base_sizes)
    for ws, size in tuned.items():
        if size is None:
            sizes.pop(ws, None)
        else:
            sizes[ws] = size
    return {capability: {TUNED_FIELD: {str(k): symm_size_text(v) for k, v in sorted(sizes.items())},
                         "sources": [source]}}


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string: backslash, quote and the control characters
    (U+0000-U+001F, U+007F) escaped, every other character kept as it is (UTF-8 in the
    file).  Text that UTF-8 cannot hold (a lone surrogate) is a ValueError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"text {shown(text)} cannot be written as UTF-8 ({exc.reason})") from None
    out = []
    for ch in text:
        if ch == "\\" or ch == '"':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_value(value: Any) -> str:
    """One value of the table's schema (text, integer, list, table of those) as TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_string(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }" \
            if value else "{}"
    raise ValueError(f"cannot write {shown(value)} in an override file; accepted: text, integers, lists and tables")


def override_text(path: str, entry: Dict[str, Any], command: str = "tune collectives") -> str:
    """The override file for ``entry``: TOML where ``path`` ends in ``.toml`` (any case),
    JSON otherwise."""
    if path.lower().endswith(".toml"):
        lines = [f"# Written by `sglang-arch {command}`; read through SGLANG_ARCH_CONFIG."]
        for cap, fields in entry.items():
            lines.append(f"[architectures.{toml_string(cap)}]")
            lines.extend(f"{name} = {_toml_value(value)}" for name, value in fields.items())
        return "\n".join(lines) + "\n"
    return json.dumps(entry, indent=2) + "\n"


def read_back(path: str, text: str, where: str):
    """The registry built from ``text`` as it would read the file at ``path`` (in memory):
    an override the registry would refuse is never written (ValueError naming why)."""
    from ..arch import registry

    try:
        parsed = (registry._parse_toml if path.lower().endswith(".toml") else registry._parse_json)(where, text)
        entries = parsed["architectures"] if "architectures" in parsed else parsed
        return registry.build_registry({str(k): v for k, v in entries.items()}, override_source=where)
    except ValueError as exc:
        raise ValueError(f"{where}: the override made from these measurements would be refused ({exc}); "
                         f"nothing was written") from None


def write_override(path: str, entry: Dict[str, Any]) -> None:
    """Write the override file (through a temporary file: never half a file)."""
    write_files([("--out", path, override_text(path, entry))])
