"""``sglang-arch plan``: what a real SGLang server would pick on a machine you may not have.

Two fresh interpreters resolve SGLang's real ``ServerArgs`` for the same simulated
machine: one with the plugin routing through the registry (the GPU simulated by the
registry's own override, ``SGLANG_ARCH_CAPABILITY``), one with SGLang alone (the GPU
given to SGLang through its own ``override_platform``, with the facts SGLang's probes
would compute for it).  Separate processes, because hooks patch modules for good.

Run as a module, this file is that worker: ``--mode routed|upstream``, JSON on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ...arch import Capability, parse_capability, parse_topology
from ...arch.profile import format_version
from ...arch.validate import MIB

MAX_MODEL_CONFIG_BYTES = 16 * MIB  # plan --model-path DIR/config.json (real ones are < 100 KiB)
# Seconds each SGLang worker may take (plan --timeout); importing SGLang and resolving its
# arguments takes 5-30 s, and a worker still running after this is killed.
WORKER_TIMEOUT_S = 600
MAX_WORKER_TIMEOUT_S = 3600

# A simulated node: 132 SMs, like an H100 SXM / H200 (only the v2 custom all-reduce
# block counts read it).
SIMULATED_NUM_SM = 132


def failing_line(exc: BaseException) -> str:
    """Where an exception without a message (a bare ``assert``) was raised: its source
    line and place, so the one-line error still says what failed."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "(no message)"
    last = frames[-1]
    return f"{(last.line or '').strip() or '(no source)'} ({os.path.basename(last.filename)}:{last.lineno})"


def about_the_model(exc: BaseException) -> bool:
    """True when ``exc`` was raised while loading the model's own files (Transformers'
    config loading, SGLang's ``hf_transformers`` helpers), in its chain of causes: an
    error about ``--model-path``, the same with or without the registry."""
    seen = set()
    link: Optional[BaseException] = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        for frame, _ in traceback.walk_tb(link.__traceback__):
            filename = frame.f_code.co_filename.replace(os.sep, "/")
            if "/transformers/" in filename or "/hf_transformers/" in filename:
                return True
        link = link.__cause__ or link.__context__
    return False


def _probe_keywords(probe: Any) -> Dict[str, Any]:
    """The keywords of the ``partial`` under a probe, through every wrapper (``lru_cache``,
    and the plugin's own hook where it is applied: two links, not one); {} if none."""
    seen = 0
    while probe is not None and seen < 8:
        keywords = getattr(probe, "keywords", None)
        if isinstance(keywords, dict):
            return keywords
        probe, seen = getattr(probe, "__wrapped__", None), seen + 1
    return {}


def upstream_platform_facts(cap: Capability, cuda: Tuple[int, int]) -> Dict[str, Any]:
    """What SGLang's own probes would answer for ``cap``: evaluated from the (majors,
    minimum CUDA) each of its ``lru_cache(partial(...))`` probes carries."""
    from sglang.srt.runtime_context import _PLATFORM_PROBES
    from sglang.srt.utils import common

    facts: Dict[str, Any] = {}
    for fact, helper in _PLATFORM_PROBES.items():
        keywords = _probe_keywords(getattr(common, helper, None))
        if "device_capability_majors" in keywords:
            facts[fact] = cap.major in keywords["device_capability_majors"] and cuda >= tuple(keywords["cuda_version"])
    facts.update(device_capability=cap.as_tuple(), device_sm=cap.sm)
    return facts


def stand_in_if_missing(package: str) -> bool:
    """Make ``import package`` (and its submodules) succeed with stand-ins, where the package
    is not installed; True if it did.

    For kernel packages a host cannot carry (sgl_kernel's wheel is 373 MB): SGLang's
    modules import them and read constants from them at import (``scalar_types.uint4b8``),
    so every attribute of a stand-in is a stand-in too; calling one raises.  Used by the
    runtime truth probe and the GPU benchmarks, whose measured paths call none of it.
    """
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import types

    try:
        if importlib.util.find_spec(package) is not None:
            return False
    except (ImportError, ValueError):
        pass

    class _StandIn(types.ModuleType):
        __path__: list = []

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return _StandIn(f"{self.__name__}.{name}")

        def __call__(self, *args, **kwargs):
            raise RuntimeError(f"{self.__name__} is a stand-in ({package} is not installed here)")

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name == package or name.startswith(package + "."):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            return _StandIn(spec.name)

        def exec_module(self, module):
            module.__path__ = []

    sys.meta_path.append(_Finder())
    return True


SIMULATED_MACHINE = {"is_cuda": True, "is_hip": False, "is_npu": False, "is_xpu": False, "is_musa": False,
                     "is_mps": False, "has_flashinfer": True}


@contextlib.contextmanager
def simulated_torch_device(cap: Capability, num_sm: int = SIMULATED_NUM_SM) -> Iterator[None]:
    """torch's device queries answer for the simulated GPU, and selecting it is a no-op.

    Only torch is stood in for (a CPU machine has no device to ask); SGLang's own code
    runs unchanged on top.
    """
    import torch

    saved = torch.cuda.get_device_capability, torch.cuda.get_device_properties, torch.cuda.set_device
    torch.cuda.get_device_capability = lambda *a, **k: cap.as_tuple()
    torch.cuda.get_device_properties = lambda *a, **k: SimpleNamespace(multi_processor_count=num_sm)
    torch.cuda.set_device = lambda *a, **k: None
    try:
        yield
    finally:
        torch.cuda.get_device_capability, torch.cuda.get_device_properties, torch.cuda.set_device = saved


def custom_ar_table(cap: Capability, original: bool = False) -> str:
    """Which v2 custom all-reduce table SGLang picks for ``cap``: a tuned table's name, or
    ``default:<world sizes>:<one-shot bytes>:<two-shot bytes>``.  ``original``: bypass the
    plugin's hook and ask upstream's own function."""
    from sglang.srt.distributed.device_communicators.configs import (
        custom_all_reduce_v2 as car,
    )

    fn = car._get_all_reduce_configs
    link = fn
    while link is not None:  # upstream caches the first device's answer; each call here is a new device
        if hasattr(link, "cache_clear"):
            link.cache_clear()
        link = getattr(link, "__wrapped__", None)
    with simulated_torch_device(cap):
        configs = (getattr(fn, "__wrapped__", fn) if original else fn)()
        for name in ("sm90", "sm100", "sm107"):
            if configs is getattr(car, f"_{name}_configs")(SIMULATED_NUM_SM):
                return name
    sizes = sorted(configs)
    first = configs[sizes[0]]
    return f"default:{sizes[0]}-{sizes[-1]}:{first.graph.one_shot_push_threshold}:{first.graph.two_shot_pull_threshold}"


@contextlib.contextmanager
def _symm_mem_runtime(world_size: int, multicast: bool) -> Iterator[None]:
    """torch's symmetric-memory runtime for one rank of a simulated group, on the CPU:
    buffers, a process group of ``world_size`` and a rendezvous handle that has a
    multicast pointer only when the topology has multicast."""
    import importlib

    import torch

    module = importlib.import_module("sglang.srt.distributed.device_communicators.torch_symm_mem")

    class SimulatedSymmMem:
        @staticmethod
        def empty(numel, device=None, dtype=None):
            return torch.empty(0, dtype=dtype)  # the size is read back from max_size

        @staticmethod
        def rendezvous(buffer, group_name):
            return SimpleNamespace(multicast_ptr=1 if multicast else 0)

    saved = {name: getattr(module, name) for name in ("torch_symm_mem", "dist", "torch_symm_mem_available")
             if hasattr(module, name)}
    module.torch_symm_mem = SimulatedSymmMem
    module.dist = SimpleNamespace(get_world_size=lambda group=None: world_size)
    module.torch_symm_mem_available = True
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def symm_mem_outcome(cap: Capability, world_size: int, multicast: bool) -> Dict[str, Any]:
    """What SGLang's own ``TorchSymmMemCommunicator`` ends up with on the simulated machine
    (with the plugin's hook when it is applied)."""
    from sglang.srt.distributed.device_communicators import torch_symm_mem as tsm

    with simulated_torch_device(cap), _symm_mem_runtime(world_size, multicast):
        comm = tsm.TorchSymmMemCommunicator(SimpleNamespace(group_name="plan"), 0)
    if comm.disabled:
        return {"enabled": False}
    multimem = world_size in comm._WORLD_SIZES_MULTIMEM.get(comm.device_capability, ())
    return {"enabled": True, "max_bytes": comm.max_size, "algorithm": "multimem" if multimem else "two_shot"}


def moe_gemm_outcome(mode: str, cap: Capability, view: Any) -> Dict[str, Any]:
    """The MoE runner, FP8 block / FP4 GEMM backends and DeepGEMM the server ends up with.

    The resolved arguments are SGLang's own (with or without the registry); where they
    leave ``auto``, the choice made at load time is the registry's decision (routed) or
    SGLang 0.5.23's rule on the device (upstream: ``policies/moe.py`` ``upstream_*``, the
    rule the registry's tests compare with SGLang's code).  ``runs``: whether the kernel
    catalog has a build of the choice for this GPU.
    """
    from ...arch import catalog
    from ...arch.policies import moe
    from .glue.moe import kind_of

    # The model's own config.json: SGLang's ModelConfig can refuse it on a host without a
    # GPU (0.5.23 registers the mxfp4 method only where is_cuda() holds at import).
    with open(os.path.join(view.model_path, "config.json"), encoding="utf-8") as f:
        hf = json.load(f)
    kind, explicit_q = kind_of(view.quantization, hf.get("quantization_config") or {})
    arch = (hf.get("architectures") or [""])[0]
    from . import switches

    runner, fp8, fp4 = view.moe_runner_backend, view.fp8_gemm_runner_backend, view.fp4_gemm_runner_backend
    # the routed server takes these from the registry unless SGLANG_ARCH_DISABLE leaves them to SGLang
    off = switches.off() if mode == "routed" else switches.ALL
    ctx = None
    if not {"moe", "gemm"} <= off:
        from ...arch.runtime import current

        ctx = current()
    gemm_routed, moe_routed = ctx is not None and "gemm" not in off, ctx is not None and "moe" not in off
    deep_gemm = ctx.deep_gemm().choice if gemm_routed else ("on" if moe.upstream_deep_gemm(cap) else "off")
    if runner == "auto" and kind is not None:
        runner = ((ctx.moe_runner(kind, arch, explicit_q).choice or "none runs") if moe_routed
                  else moe.upstream_moe_runner(cap, kind, arch, explicit_q))
    if fp8 == "auto":
        fp8 = (ctx.fp8_gemm().choice or "none runs") if gemm_routed else moe.upstream_fp8_gemm(cap, deep_gemm == "on")
    if fp4 == "auto":
        fp4 = (ctx.fp4_gemm().choice or "none runs") if gemm_routed else moe.upstream_fp4_gemm(cap)

    def runs(decision: str, choice: Optional[str], use_kind: Optional[str] = None) -> Optional[bool]:
        verdict = catalog.choice_runs(decision, choice, cap, None, use_kind) if choice else None
        return None if verdict is None else verdict.runs

    return {"quantization": kind,
            "moe_runner": {"backend": runner, "runs": runs("moe_runner", runner, kind)},
            "fp8_gemm": {"backend": fp8, "runs": runs("fp8_gemm", fp8)},
            "fp4_gemm": {"backend": fp4, "runs": runs("fp4_gemm", fp4)},
            "deep_gemm": {"backend": deep_gemm, "runs": runs("deep_gemm", "jit") if deep_gemm == "on" else None}}


def worker(mode: str, cap: Capability, tp: int, topology: str, nnodes: int, cuda: Tuple[int, int],
           model_path: str, extra: Sequence[str]) -> Dict[str, Any]:
    logging.disable(logging.WARNING)
    topo = parse_topology(topology)
    from sglang.srt.runtime_context import override_platform

    facts = dict(SIMULATED_MACHINE)
    if mode == "routed":
        from sglang.srt.plugins.hook_registry import HookRegistry

        from ...arch.runtime import current
        from . import register, routed_concerns

        register()
        HookRegistry.apply_hooks()
        ctx = current()
        reason = ctx.symm_mem(tp).reason
        table = {str(k): v for k, v in ctx.symm_mem_table().items()}
        routed = routed_concerns()
        tier = {"resolved": str(ctx.resolution.resolved), "match": ctx.resolution.match}
    else:
        facts.update(upstream_platform_facts(cap, cuda))
        from sglang.srt.distributed.device_communicators.all_reduce_utils import (
            TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES,
        )

        reason = "SGLang's own communicator" + ("" if topo.multicast else " (needs multicast in 0.5.23)")
        table = {str(k): v for k, v in TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES.items()}
        routed = []
        tier = None
    # SGLang's "inkling" floor raises every max size to >= 256 MiB; the tables are what differ.
    os.environ.setdefault("SGLANG_OPT_USE_INKLING_CUSTOM_AR", "0")
    symm_out = dict(symm_mem_outcome(cap, tp, topo.multicast) if tp > 1 else {"enabled": False},
                    reason=reason, table=table)
    car_table = custom_ar_table(cap)
    from sglang.srt.distributed.device_communicators import pcie_ipc_ar

    # SGLang's own eligible_group (the plugin's hook over it in the routed worker), as the
    # tensor-parallel group asks it; the user's SGLANG_ENABLE_PCIE_IPC_ALLREDUCE as set
    pcie_ipc = tp > 1 and nnodes == 1 and bool(pcie_ipc_ar.eligible_group(group_name="tp", world_size=tp,
                                                                          deterministic=False))

    from sglang.srt.arg_groups.overrides import resolving_view
    from sglang.srt.layers import flashinfer_comm_fusion
    from sglang.srt.server_args import prepare_server_args

    from sglang.srt.layers import quantization

    # SGLang registers its mxfp4 method at import only where is_cuda() holds: the simulated GPU's
    # process would have it (this one imported SGLang on a CPU).
    quantization.QUANTIZATION_METHODS.setdefault("mxfp4", quantization.Mxfp4Config)
    argv = ["--model-path", model_path, "--tp-size", str(tp), "--nnodes", str(nnodes)]
    if "--device" not in extra:
        argv += ["--device", "cuda"]
    error = error_about = None
    # SGLang's model hooks ask torch for the device (DeepSeek's DSA adjustments read
    # torch.cuda.get_device_capability()): the simulated GPU answers, as in every other step.
    with override_platform(**facts), simulated_torch_device(cap):
        server_args = prepare_server_args(argv + list(extra))
        try:
            server_args.resolve_once()
        except Exception as exc:  # what the server would say at start-up
            error = f"{type(exc).__name__}: {str(exc) or failing_line(exc)}"
            error_about = "model" if about_the_model(exc) else "arguments"
        view = resolving_view(server_args)
        fusion = view.flashinfer_allreduce_fusion_backend
        fusion_resolved = None
        if fusion is not None:
            try:
                fusion_resolved = flashinfer_comm_fusion._resolve_backend(fusion, nnodes > 1)
            except ValueError as exc:
                fusion_resolved = f"error: {exc}"
        moe_gemm = moe_gemm_outcome(mode, cap, view)
        prefill = view.prefill_attention_backend or view.attention_backend
        decode = view.decode_attention_backend or view.attention_backend
        speculative = None
        if getattr(view, "speculative_algorithm", None):
            # SGLang's draft worker builds the target's backend unless a draft backend is set
            speculative = {"algorithm": view.speculative_algorithm,
                           "draft_attention": getattr(view, "speculative_draft_attention_backend", None) or decode}
        kv_cache = {"dtype": getattr(view, "kv_cache_dtype", None),
                    "dsa_prefill": getattr(view, "dsa_prefill_backend", None),
                    "dsa_decode": getattr(view, "dsa_decode_backend", None)}
        return {
            "mode": mode,
            "tier": tier,
            "routed": routed,
            "error": error,
            "error_about": error_about,
            "attention": {"prefill": prefill, "decode": decode},
            "allreduce_fusion": {"requested": fusion, "backend": fusion_resolved},
            "torch_symm_mem": dict(symm_out, flag=bool(view.enable_torch_symm_mem)),
            "custom_allreduce": {"disabled_by_flag": bool(view.disable_custom_all_reduce), "v2_table": car_table},
            "pcie_ipc": {"enabled": pcie_ipc and not view.enable_deterministic_inference},
            "moe_gemm": moe_gemm,
            "speculative": speculative,
            "kv_cache": kv_cache,
        }


def run_plan(cap: Capability, tp: int, topology: Optional[str], nnodes: int, cuda: Tuple[int, int],
             model_path: str, extra: Sequence[str], timeout: float = WORKER_TIMEOUT_S) -> Dict[str, Any]:
    """Both workers, in parallel; returns {"routed": ..., "upstream": ...}.  RuntimeError
    when a worker fails or runs past ``timeout`` seconds (it is killed)."""
    from ...arch import resolve
    from ...arch.topology import default_topology

    topo = topology or default_topology(resolve(cap).profile.topology, tp).name
    # The plugin's simulated node is one node: its GPU count is the GPUs per node, the
    # tensor-parallel size spread over --nnodes (a 144-GPU TP on 2 nodes is 72 a node).
    per_node = max(1, tp // max(nnodes, 1))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    env.update(SGLANG_ARCH_CAPABILITY=str(cap), SGLANG_ARCH_GPU_COUNT=str(per_node), SGLANG_ARCH_TOPOLOGY=topo,
               SGLANG_ARCH_CUDA=format_version(cuda), SGLANG_PLUGINS=env.get("SGLANG_PLUGINS", ""))
    for key in ("SGLANG_ARCH_CONFIG", "SGLANG_ARCH_RESOLVE_AS", "SGLANG_ARCH_STRICT", "SGLANG_ARCH_DISABLE"):
        if key in os.environ:
            env[key] = os.environ[key]

    import time

    took: Dict[str, float] = {}
    started = time.perf_counter()

    def one(mode: str) -> Dict[str, Any]:
        begun = time.perf_counter()
        try:
            return _one(mode)
        finally:
            took[mode] = time.perf_counter() - begun

    def _one(mode: str) -> Dict[str, Any]:
        cmd = [sys.executable, "-m", __name__, "--mode", mode, "--capability", str(cap), "--tp", str(tp),
               "--topology", topo, "--nnodes", str(nnodes), "--cuda", format_version(cuda),
               "--model-path", model_path, "--", *extra]
        # The upstream worker must not see the plugin even if SGLang loads plugins itself.
        mode_env = dict(env, SGLANG_ARCH_DISABLE="1") if mode == "upstream" else env
        try:
            # A session of its own: an interrupted plan stops the worker and what it started.
            out = subprocess.run(cmd, capture_output=True, text=True, env=mode_env, timeout=timeout,
                                 start_new_session=True)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"the {mode} worker did not finish in {timeout:g} s (killed); accepted: "
                               f"--timeout up to {MAX_WORKER_TIMEOUT_S} s") from None
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        if out.returncode != 0 or not lines:
            text = (out.stderr or out.stdout).strip().splitlines()
            # an argument parser's own "error:" line says what was wrong; else the last line
            errors = [line for line in text if "error:" in line]
            tail = errors[-1:] or text[-1:] or ["no output"]
            raise RuntimeError(f"the {mode} worker failed: {tail[0]}")
        try:
            return json.loads(lines[-1])
        except ValueError:
            raise RuntimeError(f"the {mode} worker printed no result: {lines[-1][:200]}") from None

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(one, mode) for mode in ("routed", "upstream")]
        try:
            routed, upstream = [future.result() for future in futures]
        except BaseException:  # a failed worker, Ctrl-C or a signal: the other worker stops too
            _stop_workers()
            raise
    from ...arch.topology import stand_in_note

    note = stand_in_note(resolve(cap).profile.topology, tp, parse_topology(topology) if topology else None)
    return {"machine": {"capability": str(cap), "gpus": tp, "topology": topo, "nnodes": nnodes,
                        "cuda": format_version(cuda), "topology_note": note},
            "routed": routed, "upstream": upstream,
            # seconds: each worker (a fresh interpreter importing SGLang and resolving its
            # arguments) and the whole plan, the workers side by side
            "timing": {"routed_s": round(took.get("routed", 0.0), 2), "upstream_s": round(took.get("upstream", 0.0), 2),
                       "wall_s": round(time.perf_counter() - started, 2)}}


def _stop_workers() -> None:
    """Kill this process's plan workers with everything they started (each leads a session
    of its own), so that the threads waiting on them return at once.  Read from /proc: a
    system without it waits for the workers' timeout instead."""
    me = str(os.getpid())
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                parent = f.read().rsplit(b")", 1)[1].split()[1].decode()
            if parent != me:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if __name__.encode() not in f.read():
                    continue
            os.killpg(int(pid), signal.SIGKILL)
        except (OSError, IndexError, ValueError):
            continue  # gone already, or not ours to stop


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="sglang_arch.integrations.sglang.plan")
    parser.add_argument("--mode", choices=("routed", "upstream"), required=True)
    parser.add_argument("--capability", required=True)
    parser.add_argument("--tp", type=int, required=True)
    parser.add_argument("--topology", required=True)
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--cuda", required=True)
    parser.add_argument("--model-path", required=True)
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args(argv)
    from ...arch.profile import parse_version

    result = worker(args.mode, parse_capability(args.capability), args.tp, args.topology, args.nnodes,
                    parse_version(args.cuda), args.model_path, args.extra)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
