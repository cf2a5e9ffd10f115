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
