"""Measure all-reduce paths on this node, check the registry's choice, write an override.

One process per GPU (``torch.multiprocessing`` spawn).  For each world size and message
size (bf16) it first checks every path against NCCL's result (integer-valued data, so
the sums are exact), then times it.  Paths:

- ``nccl``: ``dist.all_reduce`` (gloo on a CPU run, which checks the harness only);
- ``two_shot`` / ``one_shot``: torch symmetric memory, timed as SGLang uses it (copy into
  the symmetric buffer, the kernel, copy out).

SGLang's own JIT custom all-reduce is not among them: it needs SGLang's kernel JIT
toolchain on the node, which this harness does not assume.

Multicast stays off in every process (``NCCL_NVLS_ENABLE=0``,
``TORCH_SYMM_MEM_DISABLE_MULTICAST=1``, ``NVSHMEM_DISABLE_NVLS=1``): on shared machines
it can take the GPUs out of service, and it is exactly the no-multicast case (a PCIe
box) in which the registry must choose two-shot.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..arch.validate import SYMM_MEM_MAX_MIB

MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
KIB = 1024
MIB = 1024 * KIB
DEFAULT_SIZES = tuple(4 * KIB * 4 ** i for i in range(9))  # 4 KiB .. 256 MiB
TOLERANCE = 0.10  # the registry's pick may be this much slower than the fastest path
# The paths SGLang's TorchSymmMemCommunicator can take (or fall back to).  one_shot is
# measured too, as information: the communicator has no one-shot kernel call.
SGLANG_PATHS = ("nccl", "two_shot", "multimem")


@dataclass
class Measurement:
    world_size: int
    size: int  # bytes
    times_us: Dict[str, float] = field(default_factory=dict)  # path -> median time (slowest rank)
    errors: Dict[str, str] = field(default_factory=dict)  # path -> why it did not run or was wrong


@dataclass
class RunInfo:
    device: str
    capability: Optional[str]
    backend: str
    world_sizes: List[int]
    iters: int
    started: str
    measurements: List[Measurement]

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(world_sizes: Sequence[int], sizes: Sequence[int] = DEFAULT_SIZES, iters: int = 20,
            backend: str = "nccl") -> RunInfo:
    """Run the measurement for each world size; returns every (world size, size) cell."""
    import torch
    import torch.multiprocessing as mp

    os.environ.update(MULTICAST_OFF)
    if backend not in ("nccl", "gloo"):
        raise ValueError(f"invalid backend {backend!r}; accepted: nccl, gloo")
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
    for world in world_sizes:
        queue = ctx.SimpleQueue()
        port = _free_port()
        procs = [ctx.Process(target=_worker, args=(rank, world, port, list(sizes), iters, backend, queue))
                 for rank in range(world)]
        for p in procs:
            p.start()
        results = [queue.get() for _ in procs]
        for p in procs:
            p.join(60)
        failed = [r for r in results if "fatal" in r]
        if failed:
            raise RuntimeError(f"world size {world}: {failed[0]['fatal']}")
        rank0 = next(r for r in results if r["rank"] == 0)
        measurements.extend(Measurement(**m) for m in rank0["measurements"])
    return RunInfo(device, capability, backend, list(world_sizes), iters,
                   time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), measurements)


def _worker(rank: int, world: int, port: int, sizes: List[int], iters: int, backend: str, queue) -> None:
    os.environ.update(MULTICAST_OFF)
    try:
        queue.put({"rank": rank, "measurements": _run_rank(rank, world, port, sizes, iters, backend)})
    except Exception as exc:  # reported to the parent, which raises with it
        queue.put({"rank": rank, "fatal": f"rank {rank}: {type(exc).__name__}: {exc}"})


def _run_rank(rank: int, world: int, port: int, sizes: List[int], iters: int, backend: str) -> List[Dict]:
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
            if "nccl" not in cell.errors:
                cell.times_us["nccl"] = _time(lambda: dist.all_reduce(scratch), iters, cuda, group)
            for name, run in paths.items():
                if name not in cell.errors:
                    cell.times_us[name] = _time(lambda: run(x), iters, cuda, group)
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


def _time(fn, iters: int, cuda: bool, group, reps: int = 5) -> float:
    """Per-call time in microseconds: ``iters`` calls back to back between two events (so
    launch gaps overlap as in a real forward pass), median of ``reps`` repetitions, the
    slowest rank's."""
    import torch
    import torch.distributed as dist

    for _ in range(3):
        fn()
    samples = []
    for _ in range(reps):
        dist.barrier(group=group)
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1000.0 / iters)
        else:
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            samples.append((time.perf_counter() - t0) * 1e6 / iters)
    samples.sort()
    median = torch.tensor([samples[len(samples) // 2]], dtype=torch.float64,
                          device="cuda" if cuda else "cpu")
    dist.all_reduce(median, op=dist.ReduceOp.MAX, group=group)
    return float(median.item())


# --- analysis ---------------------------------------------------------------------------

def registry_pick(decision, size: int) -> str:
    """The path SGLang takes for a message of ``size`` bytes under a symm-mem decision."""
    if decision.enabled and size < decision.max_bytes:
        return decision.algorithm
    return "nccl"


def check(run: Dict[str, Any], res, topology) -> List[Dict[str, Any]]:
    """Per cell: the registry's pick, the fastest path SGLang can take, and whether the pick
    is within 10% of it; also how much faster any measured path (one-shot) would be."""
    from ..arch.policies.collectives import torch_symm_mem

    rows = []
    for m in run["measurements"]:
        times = m["times_us"]
        usable = {p: t for p, t in times.items() if p in SGLANG_PATHS}
        if not usable:
            continue
        decision = torch_symm_mem(res, topology, m["world_size"])
        pick = registry_pick(decision, m["size"])
        fastest = min(usable, key=usable.get)
        fastest_any = min(times, key=times.get)
        ratio = times[pick] / usable[fastest] if pick in times else None
        rows.append({"world_size": m["world_size"], "size": m["size"], "pick": pick, "fastest": fastest,
                     "pick_over_fastest": ratio, "ok": ratio is not None and ratio <= 1 + TOLERANCE,
                     "fastest_measured": fastest_any,
                     "pick_over_fastest_measured": times[pick] / times[fastest_any] if pick in times else None,
                     "times_us": times})
    return rows


def tuned_sizes(run: Dict[str, Any], algorithm: str = "two_shot") -> Dict[int, Optional[int]]:
    """Per world size, the symm-mem max size (MiB) the measurements support.

    The maximum (exclusive) is the smallest measured size from which ``algorithm`` stays
    more than 10% slower than the fastest path SGLang can take (``SGLANG_PATHS``) at every
    larger size: one slow small size among fast ones is launch noise, not a crossover.
    ``None``: it loses from the smallest size on (turn the size off).  A world size where
    ``algorithm`` never ran is left out: nothing was measured.
    """
    by_ws: Dict[int, List[Dict]] = {}
    for m in run["measurements"]:
        by_ws.setdefault(m["world_size"], []).append(m)
    out: Dict[int, Optional[int]] = {}
    for ws, cells in by_ws.items():
        cells = sorted(cells, key=lambda c: c["size"])
        if algorithm not in cells[0]["times_us"]:
            continue

        def loses(m: Dict) -> bool:
            times = m["times_us"]
            if algorithm not in times:
                return True
            return times[algorithm] > (1 + TOLERANCE) * min(t for p, t in times.items() if p in SGLANG_PATHS)

        limit = 2 * cells[-1]["size"]
        for i in range(len(cells) - 1, -1, -1):
            if not loses(cells[i]):
                break
            limit = cells[i]["size"]
        mib = min(limit // MIB, SYMM_MEM_MAX_MIB)  # what an override file may hold
        out[ws] = mib if mib >= 1 else None
    return out


def override_entry(capability: str, base_sizes: Dict[int, int], tuned: Dict[int, Optional[int]],
                   source: str) -> Dict[str, Any]:
    """An override entry in the table's schema: the tier's sizes with the measured ones in."""
    sizes = {ws: b // MIB for ws, b in base_sizes.items()}
    for ws, mib in tuned.items():
        if mib is None:
            sizes.pop(ws, None)
        else:
            sizes[ws] = mib
    return {capability: {"torch_symm_mem": {str(k): v for k, v in sorted(sizes.items())}, "sources": [source]}}


def write_override(path: str, entry: Dict[str, Any]) -> None:
    if path.lower().endswith(".toml"):
        lines = ["# Written by `sglang-arch tune collectives`; read through SGLANG_ARCH_CONFIG."]
        for cap, fields in entry.items():
            lines.append(f'[architectures."{cap}"]')
            sizes = ", ".join(f'"{k}" = {v}' for k, v in fields["torch_symm_mem"].items())
            lines.append(f"torch_symm_mem = {{ {sizes} }}")
            lines.append("sources = [" + ", ".join(json.dumps(s) for s in fields["sources"]) + "]")
        text = "\n".join(lines) + "\n"
    else:
        text = json.dumps(entry, indent=2) + "\n"
    with open(path, "w") as fh:
        fh.write(text)
