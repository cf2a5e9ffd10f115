"""Quantization decisions at load time: the plugin's hooks against SGLang 0.5.23's own
functions, on every exact tier and on 10.5 / 11.5 / 12.3 / 13.0.

- ``should_deepgemm_weight_requant_ue8m0`` (``srt/model_loader/utils.py``): whether block-FP8
  scales become DeepGEMM's UE8M0 at load.  Its dense SM12x check reads ``get_device_sm() ==
  120``; routed, that read follows the registry's dense block-FP8 GEMM
  (``policies/quant.dense_ue8m0_requant``): equal to SGLang on every exact tier but 12.1,
  where the dense weights keep FP32 scales for the CUTLASS GEMM that reads them (D26).
  SGLang's side reads the simulated GPU's SM through a stand-in ``get_device_sm`` (the probe
  reads the device, not SGLang's platform context), with DeepGEMM and UE8M0 scales on (the
  check's first condition; off, both sides answer False before the SM is read).
- ``uses_minimax_m3_nvfp4_native_stack`` (``srt/configs/model_config.py``): M3.1 NVFP4's
  Blackwell stack, read by the attention backend and the KV pool; routed, the same decision
  as the model override's arm (``policies/minimax_m3.nvfp4_arm``), under SGLang's own
  ``override_platform`` with the facts its probes compute for the GPU.
"""

import importlib.util
import itertools
import sys

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

REQUANT = "sglang.srt.model_loader.utils.should_deepgemm_weight_requant_ue8m0"
NATIVE_STACK = "sglang.srt.configs.model_config.uses_minimax_m3_nvfp4_native_stack"
UNKNOWN = ("10.5", "11.5", "12.3", "13.0")
CUDAS = ((12, 4), (12, 8), (13, 0))


def _cap(text):
    major, minor = text.split(".")
    return Capability(int(major), int(minor))


_machines = {}


def _ctx(cap, cuda):
    key = (cap, cuda)
    if key not in _machines:
        _machines[key] = runtime.machine(capability=cap, cuda=cuda)
    return _machines[key]


# --- UE8M0 requantization of block-FP8 weights ---


@pytest.fixture(scope="module")
def requant_sides():
    return upstream_and_hook(REQUANT)


@pytest.fixture
def loader_utils(monkeypatch):
    from sglang.srt.model_loader import utils as module

    monkeypatch.setattr(module.deep_gemm_wrapper, "ENABLE_JIT_DEEPGEMM", True)
    monkeypatch.setattr(module.deep_gemm_wrapper, "DEEPGEMM_SCALE_UE8M0", True)
    return module


def _requant_cases():
    import torch

    for output_dtype, shape, grouped in itertools.product((None, torch.bfloat16, torch.float16),
                                                          (None, (256, 512), (100, 512)), (False, True)):
        yield ([128, 128], output_dtype, shape), {"grouped_moe": grouped}


def _requant_both(sides, module, cap, cuda=(13, 0)):
    """{(case, grouped): (SGLang's answer, the routed answer)} on the simulated GPU."""
    own, hook = sides
    sm = _cap(cap).sm
    mp = pytest.MonkeyPatch()
    out = {}
    try:
        mp.setattr(module, "get_device_sm", lambda: sm)
        mp.setattr(glue, "current", lambda: _ctx(cap, cuda))
        for args, kwargs in _requant_cases():
            key = (str(args), kwargs["grouped_moe"])
            out[key] = (own(*args, **kwargs), hook(own, *args, **kwargs))
            assert module.get_device_sm() == sm  # the hook put the stand-in back
    finally:
        mp.undo()
    return out


@pytest.mark.parametrize("tier", TIERS)
def test_requant_on_every_exact_tier_the_hook_is_upstreams_function_but_121(requant_sides, loader_utils, tier):
    assert resolve(tier).match == "exact"
    for cuda in CUDAS:
        for (case, grouped), (upstream, routed) in _requant_both(requant_sides, loader_utils, tier, cuda).items():
            if tier == "12.1" and not grouped and upstream:
                assert routed is False, (case, cuda)  # D26: CUTLASS reads the dense weights' FP32 scales
            else:
                assert routed == upstream, (tier, cuda, case, grouped)


def test_requant_upstream_misses_121_while_its_dense_fp8_gemm_is_cutlass(requant_sides, loader_utils):
    """D26's premise, from the installed release: the dense auto GEMM on 12.0 and 12.1 is the
    same ``is_sm120`` arm (CUTLASS), while the requant check names 120 alone."""
    from sglang.srt.layers.quantization import fp8_utils

    answers = {tier: _requant_both(requant_sides, loader_utils, tier) for tier in ("12.0", "12.1")}
    dense = "([128, 128], torch.bfloat16, (256, 512))"
    assert answers["12.0"][(dense, False)] == (False, False)
    assert answers["12.1"][(dense, False)] == (True, False)
    assert answers["12.1"][(dense, True)] == (True, True)  # grouped MoE weights: DeepGEMM's layout
    source = importlib.util.find_spec(fp8_utils.__name__).origin
    text = open(source).read()
    assert 'if backend == "auto" and get_platform().is_sm120:\n        backend = "cutlass"' in text
    for tier in ("12.0", "12.1"):
        assert upstream_platform_facts(_cap(tier), (13, 0))["is_sm120"]


@pytest.mark.parametrize("cap", UNKNOWN)
def test_requant_on_unknown_capabilities_follows_the_registrys_dense_gemm(requant_sides, loader_utils, cap):
    assert resolve(cap).match != "exact"
    ctx = _ctx(cap, (13, 0))
    decision = ctx.dense_ue8m0_requant()
    if ctx.deep_gemm().choice != "on":  # the check is not reached in a routed process: SGLang's SM stands
        assert decision.dense is None and decision.check_sm == _cap(cap).sm
    else:
        assert decision.dense is (ctx.fp8_gemm(deep_gemm_on=True).choice == "deep_gemm")
    for (case, grouped), (upstream, routed) in _requant_both(requant_sides, loader_utils, cap).items():
        if decision.dense is False and not grouped:
            assert routed is False, (cap, case)
        else:
            assert routed == upstream, (cap, case, grouped)


def test_requant_without_a_gpu_stays_sglangs(requant_sides, loader_utils, monkeypatch):
    own, hook = requant_sides
    monkeypatch.setattr(loader_utils, "get_device_sm", lambda: 121)
    monkeypatch.setattr(glue, "current", lambda: runtime.described(_ctx("12.1", (13, 0)), None))
    assert hook(own, [128, 128], None, None, grouped_moe=False) is True


# --- M3.1 NVFP4's native stack ---


@pytest.fixture(scope="module")
def stack_sides():
    return upstream_and_hook(NATIVE_STACK)


def _stack_both(sides, cap, cuda, quantization):
    from sglang.srt.runtime_context import override_platform

    own, hook = sides
    with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), cuda)):
        upstream = own(quantization)
        mp = pytest.MonkeyPatch()
        try:
            mp.setattr(glue, "current", lambda: _ctx(cap, cuda))
            routed = hook(own, quantization)
            arm = glue.attention.minimax_m3_blackwell_arm()
        finally:
            mp.undo()
    return upstream, routed, arm


@pytest.mark.parametrize("cap", TIERS + UNKNOWN)
def test_native_stack_is_the_override_arms_decision(stack_sides, cap):
    for cuda in CUDAS:
        for quantization in ("minimax_m3_nvfp4", "modelopt_fp4", None):
            upstream, routed, arm = _stack_both(stack_sides, cap, cuda, quantization)
            assert routed == upstream, (cap, cuda, quantization)
            assert routed == (quantization == "minimax_m3_nvfp4" and arm), (cap, cuda, quantization)


# --- load-time rules read from one platform fact (policies/quant.FACT_RULES) ---
#
# Each target's function reads the device through that one fact (or probe) alone: the
# premise test reads the installed source.  So the function is SGLang's wherever the fact
# answers as SGLang's probe does: a stand-in of the function's module reads the fact the
# way the function does, once with SGLang alone (SGLang's override_platform with the facts
# its probes compute for the GPU) and once inside the plugin's hook (the registry routed
# to the same GPU).

FACT_TARGETS = {
    # rule: (target path, fact or probe, the other capability reads the function may hold)
    "hopper_bf16_weight_cache": (
        "sglang.srt.layers.quantization.fp8.Fp8LinearMethod.process_weights_after_loading_block_quant",
        "is_sm90", ()),
    "deep_gemm_sm100_block32": ("sglang.srt.layers.quantization.fp8_utils.dispatch_w8a8_block_fp8_linear",
                                "is_sm100", ("is_sm90",)),
    "deep_gemm_sm100_fused_activation": (
        "sglang.srt.layers.quantization.fp8_activation.DenseSiluAndMulQuant.__init__", "is_sm100", ()),
    "triton_mxfp4_persistent": ("sglang.srt.layers.quantization.mxfp4._swizzle_mxfp4", "is_sm100",
                                ("is_sm90", "is_cuda", "device_capability")),
    "marlin_mxfp4_hopper_widths": (
        "sglang.srt.layers.quantization.mxfp4_marlin_moe.Mxfp4MarlinMoEMethod.create_weights", "is_sm90", ()),
    # the second read of is_sm100 is the gate that native NVFP4 needs SM100 (kv_cache_hook.py:59)
    "nvfp4_native_prefill": ("sglang.srt.arg_groups.kv_cache_hook.handle_nvfp4_prefill_kv_dequant_dtype",
                             "is_sm100", ("is_sm100",)),
    "minimax_fp8_index_hopper": ("sglang.srt.mem_cache.memory_pool.get_minimax_sparse_index_dtype", "is_sm90", ()),
    "mxfp8_moe_quantizer_sm107": (
        "sglang.srt.layers.quantization.mxfp4._prepare_flashinfer_mxfp8_activations", "_is_sm107_supported", ()),
}


def test_every_rule_has_a_target_and_the_function_reads_the_device_through_it_alone():
    import inspect
    import re

    from sglang_arch.arch.policies import quant

    assert set(FACT_TARGETS) | set(VALUE_TARGETS) == set(quant.FACT_RULES)
    for rule, (path, fact, others) in FACT_TARGETS.items():
        own, _ = upstream_and_hook(path)
        source = inspect.getsource(own)
        if fact.startswith("_"):
            assert source.count(f"{fact}()") == 1, rule
            assert "get_platform()" not in source and "capability" not in source, rule
            continue
        reads = re.findall(r"get_platform\(\)\.(\w+)", source)
        assert reads.count(fact) == 1 + others.count(fact), (rule, reads)
        assert set(reads) <= {fact, *others}, (rule, reads)
        assert "get_device_sm" not in source and "get_device_capability" not in source, rule


def _fact_reader(path, fact):
    """A function of the target's module that reads ``fact`` as the target does."""
    import importlib

    from sglang_arch.integrations.sglang import targets

    (target,) = [t for t in targets.all_targets() if t.path == path]
    name = importlib.import_module(target.module).__name__

    def read():
        held = sys.modules[name]
        if fact.startswith("_"):  # SGLang's probe is cached per process: asked uncached, as each GPU here
            probe = getattr(held, fact)
            return getattr(probe, "__wrapped__", probe)()
        return getattr(held.get_platform(), fact)

    read.__module__ = name
    return read


def _fact_both(rule, cap, cuda, monkeypatch):
    from sglang.srt.runtime_context import override_platform

    path, fact, _ = FACT_TARGETS[rule]
    _, hook = upstream_and_hook(path)
    read = _fact_reader(path, fact)
    if fact.startswith("_"):  # the probe reads the device's capability, not the platform context
        monkeypatch.setattr(sys.modules[read.__module__], "get_device_capability", lambda *a: _cap(cap).as_tuple())
    with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), cuda)):
        upstream = read()
        mp = pytest.MonkeyPatch()
        try:
            mp.setattr(glue, "current", lambda: _ctx(cap, cuda))
            routed = hook(read)
        finally:
            mp.undo()
        assert read() == upstream  # the hook put SGLang's own back
    return upstream, routed


@pytest.mark.parametrize("rule", sorted(FACT_TARGETS))
def test_rules_on_every_exact_tier_are_upstreams(rule, monkeypatch):
    for tier in TIERS:
        assert resolve(tier).match == "exact"
        for cuda in CUDAS:
            upstream, routed = _fact_both(rule, tier, cuda, monkeypatch)
            assert routed == upstream, (rule, tier, cuda, _ctx(tier, cuda).quant_fact(rule).reason)


@pytest.mark.parametrize("rule", sorted(FACT_TARGETS))
@pytest.mark.parametrize("cap", UNKNOWN)
def test_rules_on_unknown_capabilities_are_the_nearest_tiers(rule, cap, monkeypatch):
    decision = _ctx(cap, (13, 0)).quant_fact(rule)
    upstream, routed = _fact_both(rule, cap, (13, 0), monkeypatch)
    assert routed == (upstream if decision.value is None else decision.value), (rule, cap, decision.reason)


def test_block32_dispatch_routed_is_upstreams_function(monkeypatch):
    """``dispatch_w8a8_block_fp8_linear`` itself, for block-32 weights with UE8M0 scales and
    an explicit ``deep_gemm``, with DeepGEMM on: DeepGEMM where the SM100 arm (or the SM90 one)
    holds, Triton elsewhere; equal on every exact tier."""
    from sglang.srt.layers.quantization import fp8_utils
    from sglang.srt.runtime_context import override_platform

    own, hook = upstream_and_hook("sglang.srt.layers.quantization.fp8_utils.dispatch_w8a8_block_fp8_linear")
    monkeypatch.setattr(fp8_utils.deep_gemm_wrapper, "ENABLE_JIT_DEEPGEMM", True)
    monkeypatch.setattr(fp8_utils, "get_fp8_gemm_runner_backend",
                        lambda: fp8_utils.Fp8GemmRunnerBackend("deep_gemm"))
    monkeypatch.setattr(fp8_utils, "print_warning_once", lambda *a, **k: None)

    def picked(call):
        linear = call([32, 32], True)
        return getattr(linear, "func", linear).__name__

    seen = set()
    for tier in TIERS:
        with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(tier), (13, 0))):
            upstream = picked(own)
            mp = pytest.MonkeyPatch()
            try:
                mp.setattr(glue, "current", lambda: _ctx(tier, (13, 0)))
                routed = picked(lambda *a: hook(own, *a))
            finally:
                mp.undo()
        assert routed == upstream, tier
        seen.add(upstream)
    assert len(seen) == 2, seen  # both arms observed


# --- a rule SGLang binds into a module value at import (the plugin's value target) ---
#
# ``_WHOLE_ROW_FAST_DIV`` (``kernels/ops/lora/moe/fp8_quant.py``) is a Triton constexpr bound
# at import from torch's capability and read only inside ``@triton.jit`` code.  SGLang's side
# is its own expression from the installed source, evaluated with torch answering the GPU's
# capability; the plugin's side is the module value once the target is routed.

LORA_FP8 = "sglang.kernels.ops.lora.moe.fp8_quant"
VALUE_TARGETS = {"lora_fp8_whole_row_fast_div": f"{LORA_FP8}._WHOLE_ROW_FAST_DIV"}


def _lora_fp8_assignment():
    import ast
    import inspect

    module = importlib.import_module(LORA_FP8)
    tree = ast.parse(inspect.getsource(module))
    (assign,) = [node for node in tree.body if isinstance(node, ast.Assign)
                 and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["_WHOLE_ROW_FAST_DIV"]]
    return module, tree, assign


def test_the_value_is_a_constexpr_of_the_capability_read_only_inside_triton_code():
    """The premise of the value target: bound once, as ``tl.constexpr(<capability check>)``,
    read only in ``@triton.jit`` functions of its own module (nothing imports it)."""
    import ast
    import pathlib

    module, tree, assign = _lora_fp8_assignment()
    assert ast.unparse(assign.value.func) == "tl.constexpr" and len(assign.value.args) == 1
    assert "get_device_capability" in ast.unparse(assign.value.args[0])
    readers = [fn for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef)
               and any(isinstance(n, ast.Name) and n.id == "_WHOLE_ROW_FAST_DIV" for n in ast.walk(fn))]
    assert readers and all(any(ast.unparse(d) == "triton.jit" for d in fn.decorator_list) for fn in readers)
    lora = pathlib.Path(module.__file__).parent
    assert [p.name for p in lora.rglob("*.py") if "_WHOLE_ROW_FAST_DIV" in p.read_text()] == ["fp8_quant.py"]


def _sglangs_value(cap):
    from types import SimpleNamespace

    _, _, assign = _lora_fp8_assignment()
    torch = SimpleNamespace(cuda=SimpleNamespace(is_available=lambda: True,
                                                 get_device_capability=lambda *a: _cap(cap).as_tuple()))
    import ast

    return eval(compile(ast.Expression(assign.value.args[0]), LORA_FP8, "eval"), {"torch": torch})


def _routed_value(cap, monkeypatch):
    """The module's value with the target routed for ``cap``; SGLang's own object put back after."""
    from sglang_arch.integrations.sglang import routing, targets

    (target,) = [t for t in targets.all_targets() if t.path == VALUE_TARGETS["lora_fp8_whole_row_fast_div"]]
    module = importlib.import_module(LORA_FP8)
    assert targets.check_target(target) is None
    was_routed = routing.is_routed(target)
    routing.unroute(target)
    own = module._WHOLE_ROW_FAST_DIV
    with monkeypatch.context() as mp:
        mp.setattr(glue, "current", lambda: _ctx(cap, (13, 0)))
        assert routing.route(target) and routing.is_routed(target)
        bound = module._WHOLE_ROW_FAST_DIV
        routing.unroute(target)
    assert module._WHOLE_ROW_FAST_DIV is own and not routing.is_routed(target)
    if was_routed:
        routing.route(target)
    assert type(bound) is type(own)  # a constexpr, as Triton reads it
    return bound.value


@pytest.mark.parametrize("cap", TIERS + ("9.5",) + UNKNOWN)
def test_the_lora_fp8_division_is_sglangs_on_exact_tiers_and_the_tiers_elsewhere(cap, monkeypatch):
    from sglang_arch.arch.policies import quant

    decision = _ctx(cap, (13, 0)).quant_fact("lora_fp8_whole_row_fast_div")
    routed = _routed_value(cap, monkeypatch)
    assert routed is decision.value, decision.reason
    if resolve(cap).match == "exact":
        assert routed == _sglangs_value(cap), (cap, decision.reason)
    else:  # the tier's rule: an unknown 9.x divides as 9.0 does, where SGLang rounds
        assert routed == (resolve(cap).resolved.as_tuple() == quant.SM90), decision.reason


def test_a_value_target_whose_value_changed_shape_is_left_to_sglang(monkeypatch):
    from sglang_arch.integrations.sglang import targets

    (target,) = [t for t in targets.all_targets() if t.path == VALUE_TARGETS["lora_fp8_whole_row_fast_div"]]
    module = importlib.import_module(LORA_FP8)
    monkeypatch.setattr(module, "_WHOLE_ROW_FAST_DIV", True)  # a plain bool: not the constexpr written against
    assert "expected a module value of type constexpr" in targets.check_target(target)
    monkeypatch.delattr(module, "_WHOLE_ROW_FAST_DIV")
    assert "missing" in targets.check_target(target)
