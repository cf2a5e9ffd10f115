"""Linear attention (policies/linear_attention.py): SGLang 0.5.23's five rules on exact
tiers, and on every capability a default the device has a kernel for.

Upstream's rules are written here from SGLang 0.5.23's source (not imported from the
registry): ``arg_groups/attention_hook.py`` ``handle_linear_attn_backend``,
``kimi_k3_hook.py``, ``glm5_next_hook.py`` (``is_sm100``: major 10, CUDA >= 12.8);
``linear/gdn_backend.py`` (capability major 9, or 10 with CUDA >= 13);
``linear/kda_backend.py`` (capability 10.0 or 10.3).  Where each kernel has a build is
written from FlashInfer 0.7.2 and CuTe DSL's targets (module docstring of each helper),
not imported from the catalog.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_arch.arch import resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import linear_attention as la

from .strategies import KNOWN_TIERS, capabilities, cuda_versions

EXACT = [Capability(*t) for t in KNOWN_TIERS]
CUTE = {Capability(*t) for t in ((8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (10, 7), (11, 0),
                                 (12, 0), (12, 1))}  # nvidia-cutlass-dsl 4.8.0 Arch


def is_sm100(cap, cuda):
    return cap.major == 10 and cuda >= (12, 8)


def runs(choice, cap, family, phase, cuda):
    """Where a linear-attention choice has a kernel for the device (FlashInfer 0.7.2 sources)."""
    if choice == "triton":
        return cap >= Capability(7, 0)
    if choice == "nv_cutedsl":  # the fused CuTe verify on major 10, Triton's verify elsewhere
        return phase == "verify" and cap >= Capability(7, 0)
    assert choice == "flashinfer"
    if phase == "prefill" and family == "gdn":  # chunk_gated_delta_rule_sm90 / _sm100 (CUDA 13) / _sm120
        return cap in CUTE and (cap.major in (9, 12) or (cap.major == 10 and cuda >= (13, 0)))
    if phase == "prefill":  # kda_prefill: _FLASH_KDA_SUPPORTED_COMPUTE_CAPABILITIES
        return cap in (Capability(10, 0), Capability(10, 3))
    if family == "gdn":  # gdn_decode_bf16_state: SM90+ CuTe DSL
        return cap in CUTE and cap >= Capability(9, 0)
    return cap in CUTE and cap >= Capability(10, 0)  # recurrent_kda: SM100+


@pytest.mark.parametrize("cap", EXACT, ids=str)
@pytest.mark.parametrize("cuda", [(12, 8), (12, 9), (13, 0)])
def test_the_five_rules_equal_upstream_on_exact_tiers(cap, cuda):
    res = resolve(str(cap))
    assert la.decode_default(res, cuda).backend == ("flashinfer" if is_sm100(cap, cuda) else None)
    assert la.kda_decode_default(res, cuda).backend == ("triton" if is_sm100(cap, cuda) else None)
    assert la.verify_default(res, cuda).backend == ("nv_cutedsl" if is_sm100(cap, cuda) else None)
    gdn = cap.major == 9 or (cap.major == 10 and cuda >= (13, 0))
    assert la.prefill_default(res, "gdn", cuda).backend == ("flashinfer" if gdn else None)
    kda = cap in (Capability(10, 0), Capability(10, 3))
    assert la.prefill_default(res, "kda", cuda).backend == ("flashinfer" if kda else None)


def test_gdn_prefill_domains_are_upstreams():
    """gdn_backend.py: SM90 fp32 state, chunks up to 32768; SM100 bf16 state, up to 8192."""
    hopper = la.prefill_default(resolve("9.0"), "gdn")
    blackwell = la.prefill_default(resolve("10.0"), "gdn")
    assert (hopper.max_chunk, hopper.state_dtype) == (32768, "float32")
    assert (blackwell.max_chunk, blackwell.state_dtype) == (8192, "bfloat16")


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, cuda=cuda_versions)
def test_every_default_has_a_kernel_on_the_device(cap, cuda):
    res = resolve(str(cap))
    picks = [(la.decode_default(res, cuda), family, "decode") for family in la.FAMILIES]
    picks += [(la.kda_decode_default(res, cuda), "kda", "decode"), (la.verify_default(res, cuda), "kda", "verify")]
    picks += [(la.prefill_default(res, family, cuda), family, "prefill") for family in la.FAMILIES]
    for decision, family, phase in picks:
        if decision.backend is not None:
            assert runs(decision.backend, cap, family, phase, cuda), (decision, family, phase)


@settings(max_examples=200, deadline=None)
@given(cap=capabilities, cuda=cuda_versions, family=st.sampled_from(la.FAMILIES))
def test_a_dropped_pick_says_why(cap, cuda, family):
    decision = la.prefill_default(resolve(str(cap)), family, cuda)
    for name, why in decision.dropped:
        assert name == "flashinfer" and why in decision.reason and decision.backend is None


def test_unknown_major_10_keeps_the_base_backend_where_flashinfer_has_no_build():
    """docs/differences.md D18: SGLang picks FlashInfer on every major-10 device; the
    registry only where FlashInfer's kernels have a build (10.5: none)."""
    res = resolve("10.5")
    assert res.resolved.major == 10
    assert la.decode_default(res).backend is None and la.decode_default(res).dropped
    assert la.prefill_default(res, "gdn").backend is None
    assert la.verify_default(res).backend == "nv_cutedsl"  # Triton's verify below it runs anywhere


def test_an_unknown_family_is_refused():
    with pytest.raises(ValueError, match="accepted: gdn, kda"):
        la.prefill_default(resolve("9.0"), "mamba")
