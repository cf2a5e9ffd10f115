"""Per-call cost of the plugin's routed functions that SGLang calls per forward, per layer or
per collective: stock SGLang's function against the routed one, in one run, interleaved.

    python benchmark/hot_paths.py [--trials 31] [--out FILE]

Each row is one SGLang function with realistic arguments (light stand-ins where SGLang would
need a GPU: a group, a communicator, a forward batch), on a simulated machine (the glue's
``current()``).  Stock is the function SGLang defines (the routed one's ``__wrapped__``), routed
is the function the plugin leaves in SGLang's module; both read the same platform probes,
stood in by ``lru_cache``d constants as SGLang's own cached probes answer on the GPU (the
``platform fact`` row times the routed probe against such a constant).  Every trial times a
loop of each arm (the order alternates per trial); a row reports the median ns per call of
each arm, the per-trial ratio routed / stock (median and quartiles) and the added ns.

Where the function's real cost includes a collective (Inkling's all-reduce), a second row
runs the same calls with a gloo all-reduce of a decode-sized tensor ([8, 6144] bf16, one
process) where SGLang would run its collective, and says so; that row judges the function
(``over_1.1x``), the row with the collective a no-op is the upper bound beside it.  Rows of
a process with communicators with and without multicast at once (no node makes one:
multicast is its fabric's fact) are reported apart.

Forms whose bodies launch GPU kernels (``scoped_fact``, ``scoped_capability``: DeepSeek-V4's
kernel paths, DSA's CUDA-graph replay, ...) are timed through the plugin's real hook over a
stand-in body that reads the same probe; their ratio is against that near-empty body, an
upper bound of what the hook adds to a call that launches a kernel.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Dict, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

# Why each timed target is called per forward, per layer or per collective (read from SGLang
# 0.5.23's callers), and the per-call targets of the plugin timed through their hook form.
PER_CALL = {
    "platform fact (is_sm90_supported)": "every get_platform().<fact> read runs the probe "
                                         "(runtime_context.PlatformContext.__getattr__)",
    "_resolve_backend": "flashinfer_allreduce_residual_rmsnorm -> ensure_workspace_initialized -> "
                        "resolve_flashinfer_allreduce_fusion_backend, per fused layer call",
    "flashinfer_ar_fusion_applies": "layer_boundary's fused add-norm gate, every layer of every forward",
    "BeamModel._all_reduce_limits": "Beam's layer-boundary all-reduce, every layer",
    "symm_mem_all_reduce": "every Inkling attention / MoE / dense all-reduce",
    "get_ar_buffer": "every Inkling producer asks for the symm buffer before its all-reduce",
    "_symm_mem_comm": "reduce_scatter_hidden / all_gather_hidden, every scattered-sconv collective",
    "ar_sconv_norm_fusable": "Inkling's _inkling_fusable, every layer of every decode / verify forward",
    "scattered_ar_sconv_fusable": "Inkling's _inkling_fusable, every layer of every forward",
    "fullwidth_ar_sconv_fusable": "Inkling's _inkling_fusable, every layer of every extend forward",
    "use_cutedsl_bf16_gemm": "the CuTe DSL BF16 GEMM dispatch, every linear layer that can take it",
    "use_hopper_bf16_gemv": "the BF16 GEMV dispatch, every decode linear layer that can take it",
    "scoped_fact form (DSA replay stand-in)": "DSA _apply_cuda_graph_metadata / _build_paged_mqa_schedule_2d_ctx_lens "
                                              "per decode step, DeepSeek-V4 kernel paths and the NVFP4 KV dequantize per "
                                              "layer, DSpark's project_commit_kv per draft step: all this form",
    "scoped_capability form (stand-in)": "Qwen's prepare_qwen4_decode_comm, the Marlin LoRA decode factorization and "
                                         "Muse Spark's _forward_experts per layer: all this form",
}
# Routed targets judged not per call (read once at start-up, load or init): the rest of
# targets.py, e.g. ensure_inkling_ar_resources (model init), the trtllm workspace sizes (the
# preflight, once per workspace), _flashinfer_ar_band (BeamModel.__init__),
# tiny_router_gemm_max_tokens (router layer init), the attention / MoE / GEMM backend
# resolutions, the platform probes' import-time reads.
NOT_PER_CALL_EXAMPLES = ("ensure_inkling_ar_resources (model init)",
                         "_flashinfer_trtllm_workspace_allocation_sizes (once per workspace)",
                         "BeamModel._flashinfer_ar_band (BeamModel.__init__)",
                         "tiny_router_gemm_max_tokens (each router layer's __init__)",
                         "attention / MoE / GEMM backend resolutions (server-argument resolution, load)")

HIDDEN = 6144
DECODE_TOKENS = 8


def per_call_ns(loop: Callable[[int], Any], n: int) -> float:
    t0 = time.perf_counter_ns()
    loop(n)
    return (time.perf_counter_ns() - t0) / n


def calls(fn: Callable, args: tuple, kwargs: Optional[dict] = None) -> Callable[[int], None]:
    kwargs = kwargs or {}

    def loop(n: int) -> None:
        for _ in range(n):
            fn(*args, **kwargs)

    return loop


def sized(loop: Callable[[int], None], seconds: float) -> int:
    n = 1
    while True:
        t0 = time.perf_counter()
        loop(n)
        if time.perf_counter() - t0 > seconds:
            return n
        n *= 2


def measure(stock: Callable[[int], None], routed: Callable[[int], None], trials: int,
            seconds: float) -> Dict[str, Any]:
    n = max(sized(stock, seconds), 1)
    s_ns, r_ns, ratios = [], [], []
    for trial in range(trials):
        if trial % 2:
            r, s = per_call_ns(routed, n), per_call_ns(stock, n)
        else:
            s, r = per_call_ns(stock, n), per_call_ns(routed, n)
        s_ns.append(s)
        r_ns.append(r)
        ratios.append(r / s)
    q = statistics.quantiles(ratios, n=4)
    s_med, r_med = statistics.median(s_ns), statistics.median(r_ns)
    return {"stock_ns": round(s_med, 1), "routed_ns": round(r_med, 1),
            "ratio_median": round(statistics.median(ratios), 3), "ratio_q1": round(q[0], 3),
            "ratio_q3": round(q[2], 3), "added_ns": round(r_med - s_med, 1), "calls_per_trial": n}


# --- the machine and SGLang's probes -------------------------------------------------------

def machine(capability: str, topology: str, gpus: int = 8):
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue

    ctx = runtime.machine(capability=capability, topology=topology, gpu_count=gpus, cuda=(13, 0))
    glue.current = lambda: ctx
    from sglang.srt.utils import common
    from sglang_arch.integrations.sglang.targets import FACT_HELPERS

    for fact_name, helper in FACT_HELPERS.items():  # SGLang's cached probes, answering this GPU
        setattr(common, helper, _cached(ctx.facts.get(fact_name)))
    common.is_blackwell = common.is_blackwell_supported
    return ctx


def _cached(value: Any) -> Callable:
    @functools.lru_cache(maxsize=None)
    def probe(*args: Any, **kwargs: Any) -> Any:
        return value

    return probe


def routed_pair(path: str) -> Tuple[Callable, Callable]:
    """(SGLang's function, the routed one) for a target, routed here if early routing did not."""
    import importlib

    from sglang_arch.integrations.sglang import routing

    target = next(t for t in routing.all_routed_targets() if t.path == path)
    importlib.import_module(target.module)
    routing.route(target)
    routed = routing.current_function(target)
    return routed.__wrapped__, routed


def settled(path: str) -> Tuple[Callable, str]:
    """The function SGLang's name holds once the target decided (its first call), and what it
    is: SGLang's function (a copy of it), SGLang's body with the registry's constant, or the hook."""
    from sglang_arch.integrations.sglang import routing

    target = next(t for t in routing.all_routed_targets() if t.path == path)
    bound = routing.settle(path) if path in routing._settling else routing.current_function(target)
    original = bound.__wrapped__
    code, own = getattr(bound, "__code__", None), getattr(original, "__code__", None)
    kind = ("hook" if bound is routing._settling.get(path, (None, None, None))[2] else
            "SGLang's function" if code is own else
            "SGLang's body, registry constant" if code is not None and own is not None and code.co_code == own.co_code
            else "SGLang's answer on a disabled communicator")
    return bound, kind


# --- the rows ------------------------------------------------------------------------------

def fact_row(trials: int, seconds: float) -> Dict[str, Any]:
    from sglang_arch.integrations.sglang import hooks

    machine("9.0", "nvswitch")
    stock = _cached(True)
    hook = hooks.fact("is_sm90")
    routed = hook.specialize(stock)  # what the probe's name holds once decided
    assert routed() is stock() is True
    return dict(measure(calls(stock, ()), calls(routed, ()), trials, seconds), bound="cached constant probe")


def resolve_row(trials: int, seconds: float) -> Dict[str, Any]:
    machine("9.0", "nvswitch")
    stock, routed = routed_pair("sglang.srt.layers.flashinfer_comm_fusion._resolve_backend")
    assert stock("trtllm", False) == routed("trtllm", False) == "trtllm"
    return measure(calls(stock, ("trtllm", False)), calls(routed, ("trtllm", False)), trials, seconds)


def applies_row(trials: int, seconds: float) -> Dict[str, Any]:
    from sglang.srt.layers.layer_boundary.residual import add_norm

    machine("9.0", "nvswitch")
    from sglang.srt.layers import flashinfer_comm_fusion

    add_norm.get_exec = flashinfer_comm_fusion.get_exec = lambda: EXEC  # SGLang's published exec config
    add_norm.get_parallel = lambda: SimpleNamespace(nnodes=1)
    add_norm.is_dp_attention_enabled = lambda: False
    add_norm._is_sm90_supported, add_norm._is_flashinfer_available, add_norm._is_cuda = True, True, True
    path = "sglang.srt.layers.layer_boundary.residual.add_norm.flashinfer_ar_fusion_applies"
    stock, routed = routed_pair(path)
    assert stock(16) == routed(16) is True
    rows = {}
    routed, kind = settled(path)
    rows["flashinfer_ar_fusion_applies"] = dict(measure(calls(stock, (16,)), calls(routed, (16,)), trials, seconds),
                                                bound=kind)
    # a GPU SGLang's import-time gate (SM90 / SM100) does not admit, where the registry runs fusion
    machine("12.0", "nvswitch")
    add_norm._is_sm90_supported = add_norm._is_sm100_supported = False
    routing_call = routed_pair(path)[1]
    assert routing_call(16) is True
    routed, kind = settled(path)
    add_norm._is_sm90_supported = True  # the stock arm: SGLang's gate answering what the registry does
    assert stock(16) == routed(16) is True
    rows["flashinfer_ar_fusion_applies (12.0 nvswitch: registry differs)"] = dict(
        measure(calls(stock, (16,)), calls(routed, (16,)), trials, seconds), bound=kind)
    return rows


EXEC = SimpleNamespace(comm=SimpleNamespace(flashinfer_allreduce_fusion_backend="trtllm",
                                            enforce_disable_flashinfer_allreduce_fusion=False,
                                            enable_scattered_sconv=False),
                       deterministic=SimpleNamespace(enable_deterministic_inference=False))


def beam_row(trials: int, seconds: float) -> Dict[str, Any]:
    import torch
    from sglang.srt.models import beam

    machine("9.0", "nvswitch")
    parallel = SimpleNamespace(tp_size=4, moe_ep_size=1, moe_tp_size=4)
    beam.get_parallel = lambda: parallel
    beam.get_forward = lambda: SimpleNamespace(sp_active=False)
    beam._beam_owns_tp_boundaries = lambda: True
    beam.should_skip_post_experts_all_reduce = lambda **kw: False
    torch.cuda.get_device_capability = lambda *a: (9, 0)

    class Hidden:  # a [16, 5120] BF16 CUDA tensor
        is_cuda, dtype, shape, device = True, torch.bfloat16, (16, 5120), "cuda:0"

        def is_contiguous(self):
            return True

        def data_ptr(self):
            return 0

    model, hidden = SimpleNamespace(fuse_moe_all_reduce=True), Hidden()
    path = "sglang.srt.models.beam.BeamModel._all_reduce_limits"
    stock, routed = routed_pair(path)
    assert stock(model, hidden) == routed(model, hidden)
    routed, kind = settled(path)
    return dict(measure(calls(stock, (model, hidden)), calls(routed, (model, hidden)), trials, seconds), bound=kind)


# --- Inkling's symm-mem consumers ----------------------------------------------------------

_COMM = "sglang.srt.models.inkling_common.kernels.comm"


class Group:
    """SGLang's GroupCoordinator, its collectives a no-op or a gloo collective."""

    def __init__(self, comm: Any, collective: Optional[Callable]) -> None:
        self.world_size, self.torch_symm_mem_comm, self._collective = 8, comm, collective

    def all_reduce(self, x: Any) -> Any:
        if self._collective is not None:
            self._collective(x)
        return x


class CudaLooking:
    """Built on first use: a CPU tensor subclass that says it is on CUDA."""

    cls = None

    @classmethod
    def of(cls, tensor: Any) -> Any:
        if cls.cls is None:
            import torch

            class _T(torch.Tensor):
                @property
                def is_cuda(self) -> bool:
                    return True

            cls.cls = _T
        return tensor.as_subclass(cls.cls)


def _inkling(multicast: Optional[bool], collective: Optional[Callable]):
    """A group whose communicator has (True) or lacks (False) multicast, or is disabled (None:
    stock SGLang's view of a communicator without multicast)."""
    import torch
    from sglang.srt.models.inkling_common.kernels import comm as module

    comm = SimpleNamespace(disabled=multicast is None, multicast=bool(multicast), dtype=torch.bfloat16,
                           world_size=8, max_size=1 << 28, buffer=torch.zeros(1 << 20, dtype=torch.bfloat16),
                           group=SimpleNamespace(group_name="tp"), should_torch_symm_mem_allreduce=lambda inp: True)
    flag = SimpleNamespace(get=lambda: True)
    off = SimpleNamespace(get=lambda: False)
    module.envs = SimpleNamespace(SGLANG_OPT_USE_INKLING_CUSTOM_AR=off, SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV_NORM=flag,
                                  SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV=flag)
    module.get_exec = lambda: EXEC
    module.is_cuda = lambda: True
    module.is_in_prefill_graph_scope = lambda: False
    jit = SimpleNamespace(MAX_BARRIER_BLOCKS=160, select_ar_config=lambda tokens, world: ("mm", 32, 512))
    module._ar_jit = lambda: jit
    resources = SimpleNamespace(world=8, rank=0, multicast_ptr=0x1000, v4_in=(0, 0), v4_cur=0, ssconv_out=1 << 40)
    module._get_inkling_ar_resources = lambda c: resources
    op = (lambda buf, how, name: collective(buf)) if collective is not None else (lambda *a: None)
    torch.ops.symm_mem.multimem_all_reduce_ = op
    return module, Group(comm, collective)


def _batch(decode: bool = False, extend: bool = False) -> Any:
    true, false = (lambda: True), (lambda: False)
    mode = SimpleNamespace(is_decode=true if decode else false, is_target_verify=false,
                           is_extend=true if extend else false, is_draft_extend_v2=false,
                           is_extend_without_speculative=true if extend else false)
    return SimpleNamespace(forward_mode=mode)


def inkling_rows(trials: int, seconds: float, collective: Callable) -> Dict[str, Dict[str, Any]]:
    import torch

    machine("9.0", "nvlink")
    names = ("symm_mem_all_reduce", "get_ar_buffer", "_symm_mem_comm", "ar_sconv_norm_fusable",
             "scattered_ar_sconv_fusable", "fullwidth_ar_sconv_fusable")
    pairs = {name: routed_pair(f"{_COMM}.{name}") for name in names}
    plain = torch.ones(DECODE_TOKENS, HIDDEN, dtype=torch.bfloat16)  # (the all-reduce reads no is_cuda)
    x = CudaLooking.of(plain)
    bf16 = torch.bfloat16
    argsets = {
        "symm_mem_all_reduce": lambda g: (plain, g),
        "get_ar_buffer": lambda g: (g, DECODE_TOKENS, HIDDEN, bf16),
        "_symm_mem_comm": lambda g: (g, x, x.numel()),
        "ar_sconv_norm_fusable": lambda g: (g, _batch(decode=True), DECODE_TOKENS, HIDDEN, bf16),
        "scattered_ar_sconv_fusable": lambda g: (g, _batch(extend=True), 64, HIDDEN, bf16),
        "fullwidth_ar_sconv_fusable": lambda g: (g, _batch(extend=True), 4096, HIDDEN, bf16),
    }
    rows: Dict[str, Dict[str, Any]] = {}
    from sglang_arch.integrations.sglang.glue import collectives

    # A process whose communicators have multicast (no two-shot communicator made): each
    # consumer's name holds SGLang's function once decided.
    for name in names:
        stock, first = pairs[name]
        make = argsets[name]
        _, group = _inkling(True, None)
        EXEC.comm.enable_scattered_sconv = name == "scattered_ar_sconv_fusable"
        first(*make(group))
        routed, kind = settled(f"{_COMM}.{name}")
        rows[f"{name} (multicast)"] = dict(
            measure(calls(stock, make(group)), calls(routed, make(group)), trials, seconds), bound=kind)
    EXEC.comm.enable_scattered_sconv = False
    stock, _ = pairs["symm_mem_all_reduce"]
    routed, kind = settled(f"{_COMM}.symm_mem_all_reduce")
    _, group = _inkling(True, collective)
    rows["symm_mem_all_reduce (multicast)" + COLLECTIVE] = dict(measure(
        calls(stock, (plain, group)), calls(routed, (plain, group)), trials, seconds), bound=kind)
    # A process where init_torch_symm_mem kept communicators without multicast only (a node
    # without NVLS multicast): each consumer settles to SGLang's body taking its disabled
    # path.  The routed function on the plugin's two-shot communicator, against stock
    # SGLang's on the communicator it disables for lack of multicast.
    _, plugin_group = _inkling(False, None)
    collectives.note_two_shot_communicator(plugin_group.torch_symm_mem_comm)
    rows.update(_no_multicast_rows(names, pairs, argsets, trials, seconds, ""))
    EXEC.comm.enable_scattered_sconv = False
    stock, _ = pairs["symm_mem_all_reduce"]
    routed, kind = settled(f"{_COMM}.symm_mem_all_reduce")
    _, plugin_group = _inkling(False, collective)
    _, stock_group = _inkling(None, collective)
    rows["symm_mem_all_reduce (no multicast; stock: disabled)" + COLLECTIVE] = dict(measure(
        calls(stock, (plain, stock_group)), calls(routed, (plain, plugin_group)), trials, seconds), bound=kind)
    # Communicators with and without multicast in one process (not one node's fabric: tests
    # make it): the consumers keep the hook, which views each group.
    _, multicast_group = _inkling(True, None)
    collectives.note_two_shot_communicator(multicast_group.torch_symm_mem_comm)
    rows.update(_no_multicast_rows(names, pairs, argsets, trials, seconds, MIXED))
    EXEC.comm.enable_scattered_sconv = False
    return rows


MIXED = "; both kinds in one process"
COLLECTIVE = " + gloo all-reduce"


def _no_multicast_rows(names, pairs, argsets, trials: int, seconds: float, label: str) -> Dict[str, Dict[str, Any]]:
    rows = {}
    for name in names:
        stock, first = pairs[name]
        make = argsets[name]
        EXEC.comm.enable_scattered_sconv = name == "scattered_ar_sconv_fusable"
        _, plugin_group = _inkling(False, None)
        _, stock_group = _inkling(None, None)
        first(*make(plugin_group))
        routed, kind = settled(f"{_COMM}.{name}")
        rows[f"{name} (no multicast{label}; stock: disabled)"] = dict(measure(
            calls(stock, make(stock_group)), calls(routed, make(plugin_group)), trials, seconds), bound=kind)
    return rows


# --- other per-call targets ----------------------------------------------------------------

def gemm_rows(trials: int, seconds: float) -> Dict[str, Dict[str, Any]]:
    rows = {}
    machine("10.3", "nvswitch")
    path = "sglang.kernels.ops.gemm.cutedsl_bf16_gemm.use_cutedsl_bf16_gemm"
    stock, routed = routed_pair(path)
    assert stock(8, 4096, 7168) == routed(8, 4096, 7168)
    routed, kind = settled(path)
    rows["use_cutedsl_bf16_gemm"] = dict(measure(calls(stock, (8, 4096, 7168)), calls(routed, (8, 4096, 7168)),
                                                 trials, seconds), bound=kind)
    from sglang.kernels.ops.gemm import hopper_bf16_gemv

    path = "sglang.kernels.ops.gemm.hopper_bf16_gemv.use_hopper_bf16_gemv"
    for capability, own, label in (("9.0", False, "use_hopper_bf16_gemv"),
                                   ("12.0", True, "use_hopper_bf16_gemv (12.0)")):
        machine(capability, "nvswitch")
        hopper_bf16_gemv._is_sm12x = _cached(own)
        stock, routed = routed_pair(path)
        assert stock(1, 4096, 5120) == routed(1, 4096, 5120) or own
        routed, kind = settled(path)
        answer = routed(1, 4096, 5120)
        rows[label] = dict(measure(calls(stock, (1, 4096, 5120)), calls(routed, (1, 4096, 5120)), trials, seconds),
                           bound=kind, same_answer=stock(1, 4096, 5120) == answer)
    return rows


def _stand_in(name: str, source: str, **globals_: Any) -> Callable:
    import types

    module = types.ModuleType(name)
    module.__dict__.update(globals_)
    exec(source, module.__dict__)
    sys.modules[name] = module
    return getattr(module, source.split("(")[0].split()[-1])


def form_rows(trials: int, seconds: float) -> Dict[str, Dict[str, Any]]:
    """The two forms whose bodies launch kernels: the real targets' hooks deciding over a
    stand-in body that reads the same probe (its own module's get_platform / torch); where the
    registry agrees with the probe (SGLang's function), and where it does not (SGLang's body
    reading the registry's constant, against the body whose probe answers that value)."""
    import torch
    from sglang.srt.runtime_context import get_platform

    from sglang_arch.integrations.sglang import routing

    rows = {}
    machine("10.0", "nvswitch")
    dsa = next(t for t in routing.all_routed_targets() if t.path.endswith("._apply_cuda_graph_metadata"))
    replay = "def replay(self, bs):\n    return get_platform().is_sm100 and bs > 0\n"
    answer = dsa.hook.glue()
    body = _stand_in("hot_paths_dsa_stand_in", replay, get_platform=get_platform)
    bound = dsa.hook.specialize(body)
    rows["scoped_fact form (DSA replay stand-in)"] = dict(
        measure(calls(body, (None, 8)), calls(bound, (None, 8)), trials, seconds),
        bound="SGLang's function" if bound is body else "SGLang's body, registry constant")
    told = SimpleNamespace(is_sm100=not answer)
    other = _stand_in("hot_paths_dsa_stand_in_differs", replay, get_platform=_cached(told))
    bound = dsa.hook.specialize(other)
    stock = _stand_in("hot_paths_dsa_stand_in_stock", replay, get_platform=_cached(SimpleNamespace(is_sm100=answer)))
    assert bound(None, 8) == stock(None, 8)
    rows["scoped_fact form (DSA replay stand-in; registry differs)"] = dict(
        measure(calls(stock, (None, 8)), calls(bound, (None, 8)), trials, seconds),
        bound="SGLang's body, registry constant" if bound is not other else "SGLang's function")
    qwen = next(t for t in routing.all_routed_targets() if t.path.endswith("prepare_qwen4_decode_comm"))
    torch.cuda.get_device_capability = _cached((10, 0))
    prepare = "def prepare(mlp):\n    return torch.cuda.get_device_capability()[0] == 10 and torch.bfloat16 is not None\n"
    body = _stand_in("hot_paths_qwen_stand_in", prepare, torch=torch)
    bound = qwen.hook.specialize(body)
    assert bound(None) == body(None)
    rows["scoped_capability form (stand-in)"] = dict(
        measure(calls(body, (None,)), calls(bound, (None,)), trials, seconds),
        bound="SGLang's function" if bound is body else "SGLang's body, registry constant")
    torch.cuda.get_device_capability = _cached((12, 0))  # a device the registry answers otherwise
    other = _stand_in("hot_paths_qwen_stand_in_differs", prepare, torch=torch)
    bound = qwen.hook.specialize(other)
    torch.cuda.get_device_capability = _cached(tuple(qwen.hook.glue()))
    stock = _stand_in("hot_paths_qwen_stand_in_stock", prepare, torch=torch)
    assert bound(None) == stock(None)
    rows["scoped_capability form (stand-in; registry differs)"] = dict(
        measure(calls(stock, (None,)), calls(bound, (None,)), trials, seconds),
        bound="SGLang's body, registry constant" if bound is not other else "SGLang's function")
    return rows


def gloo_all_reduce() -> Callable:
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    decode = torch.zeros(DECODE_TOKENS, HIDDEN, dtype=torch.bfloat16)

    def collective(_tensor: Any) -> None:  # a decode-sized all-reduce, whatever SGLang passed
        dist.all_reduce(decode)

    return collective


def loop_speed() -> float:
    t0 = time.perf_counter()
    total = 0
    for i in range(10_000_000):
        total += i
    return round(time.perf_counter() - t0, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=31)
    parser.add_argument("--seconds", type=float, default=0.01, help="time per arm per trial (about)")
    parser.add_argument("--out", help="write the JSON result here")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    from sglang_arch.tune.sglang_chain import stub_sgl_kernel_if_missing

    stub_sgl_kernel_if_missing()  # a GPU host without sgl_kernel's wheel: SGLang's imports only need its names
    import torch

    torch.set_num_threads(1)  # the CPU tensor copies stand in for kernel launches: no thread pool spinning
    speed_before = loop_speed()
    collective = gloo_all_reduce()
    rows: Dict[str, Dict[str, Any]] = {}
    rows["platform fact (is_sm90_supported)"] = fact_row(args.trials, args.seconds)
    rows["_resolve_backend"] = resolve_row(args.trials, args.seconds)
    rows.update(applies_row(args.trials, args.seconds))
    rows["BeamModel._all_reduce_limits"] = beam_row(args.trials, args.seconds)
    rows.update(inkling_rows(args.trials, args.seconds, collective))
    rows.update(gemm_rows(args.trials, args.seconds))
    rows.update(form_rows(args.trials, args.seconds))
    # A function whose call is a collective (Inkling's all-reduce) is judged with it: its row
    # with the collective a no-op is the upper bound of what the plugin adds, reported beside.
    with_collective = {name[:-len(COLLECTIVE)] for name in rows if name.endswith(COLLECTIVE)}
    over_all = sorted(name for name, row in rows.items() if row["ratio_median"] > 1.1)
    over = [name for name in over_all if MIXED not in name and name not in with_collective]
    over_unreached = [name for name in over_all if MIXED in name]
    over_bare = [name for name in over_all if name in with_collective]
    result = {
        "command": "python benchmark/hot_paths.py " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "loop_of_1e7_additions_s": {"before": speed_before, "after": loop_speed()},
        "trials": args.trials,
        "per_call_why": PER_CALL,
        "not_per_call_examples": list(NOT_PER_CALL_EXAMPLES),
        "rows": rows,
        "over_1.1x": over,
        # Rows of a process no node makes (communicators with and without multicast at once):
        # multicast is the fabric's fact, the same for every group of a node.
        "over_1.1x_not_reached_on_a_node": over_unreached,
        "over_1.1x_collective_a_no_op": over_bare,
    }
    return emit(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
