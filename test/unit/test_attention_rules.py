"""Attention rules, case by case, with the expected values written as data (found by
mutation testing: docs/mutation.md).  Whether a backend runs is the kernel catalog's
answer (arch/kernels.py: FlashInfer's JIT from 7.5, fa3 on Hopper needs CUDA 12.3,
trtllm-gen cubins sm_100f/sm_103a/sm_107a); the reasons are what ``explain`` shows users."""

from dataclasses import replace

import pytest
from sglang_arch.arch import resolve
from sglang_arch.arch.policies.attention import (
    ModelTraits,
    check_backend,
    default_backend,
)
from sglang_arch.arch.registry import Resolution


def with_prefs(cap, mha=None, mla=None):
    """The tier of ``cap`` with its preference lists replaced (as an override would)."""
    r = resolve(cap)
    p = r.profile
    p = replace(p, attention_mha=tuple(mha) if mha is not None else p.attention_mha,
                attention_mla=tuple(mla) if mla is not None else p.attention_mla)
    return Resolution(r.requested, p, r.match, r.reason)


@pytest.mark.parametrize("call, message", [
    (lambda: ModelTraits(kind="gqa"), "invalid model kind 'gqa'; accepted: mha, mla"),
    (lambda: check_backend(resolve("9.0"), "fa3", "gqa"), "invalid model kind 'gqa'; accepted: mha, mla"),
    (lambda: check_backend(resolve("9.0"), "fa3", "mha", "verify"), "invalid phase 'verify'; accepted: prefill, decode"),
])
def test_invalid_kind_and_phase_messages(call, message):
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value) == message


def test_check_backend_reasons():
    v = check_backend(resolve("9.0"), "fa3", "mha", "prefill", (12, 4))
    assert (v.valid, v.reason) == (True, "fa3 runs on 9.0: fa3_sm90 has sm_90a for 9.0")
    v = check_backend(resolve("9.0"), "fa3", "mha", "prefill", (12, 2))
    assert (v.valid, v.reason) == (False, "fa3 cannot run MHA prefill on 9.0 (tier 9.0, exact): fa3_sm90 needs CUDA "
                                          ">= 12.3 (torch has 12.2); fa3_sm8x has no build for 9.0 (builds: sm_80, sm_86)")
    v = check_backend(resolve("8.0"), "fa4")
    assert v.valid is False
    assert v.reason == ("fa4 cannot run MHA prefill on 8.0 (tier 8.0, exact): fa4_cute has no build for 8.0 "
                        "(builds: jit:9.0, jit:10.0, jit:10.3, jit:10.7, jit:11.0, jit:12.0, jit:12.1)")
    # one choice, two kernels: FA4 over a paged cache runs on Hopper, its absorbed-MLA path (qv) does not
    assert check_backend(resolve("9.0"), "fa4", "mha", "decode").valid
    v = check_backend(resolve("9.0"), "fa4", "mla", "decode")
    assert v.valid is False and v.reason.endswith("fa4_cute_mla has no build for 9.0 (builds: jit:10.0, jit:10.3, "
                                                  "jit:10.7, jit:11.0)")


def test_check_backend_alternatives_use_the_given_cuda():
    # fa3 on Hopper needs CUDA 12.3: with 12.3 it is an alternative, with 12.2 it is not
    assert check_backend(resolve("9.0"), "fa4", "mla", "decode", (12, 3)).alternatives == (
        "fa3", "flashmla", "flashinfer", "triton", "torch_native")
    assert check_backend(resolve("9.0"), "fa4", "mla", "decode", (12, 2)).alternatives == (
        "flashmla", "flashinfer", "triton", "torch_native")


def test_decode_only_backend_cannot_prefill():
    v = check_backend(resolve("10.0"), "cutedsl_mla", "mla", "prefill")
    assert v.valid is False and v.reason.endswith(": cutedsl_mla has no kernel for MLA prefill")
    assert check_backend(resolve("10.0"), "cutedsl_mla", "mla", "decode").valid is True


def test_cross_attention_picks_flashinfer_where_it_runs():
    # MLA's normal tail is triton, so only the cross-attention rule gives flashinfer
    d = default_backend(resolve("8.0"), ModelTraits(kind="mla", cross_attention_needs_flashinfer=True))
    assert (d.prefill, d.decode, d.reason) == ("flashinfer", "flashinfer", "cross attention needs flashinfer")


def test_cross_attention_where_flashinfer_cannot_run():
    d = default_backend(with_prefs("7.0", mha=["fa3"]), ModelTraits(cross_attention_needs_flashinfer=True))
    assert (d.prefill, d.decode) == ("triton", "triton")
    assert d.reason == ("tier 7.0 (exact): portable default triton after flashinfer for cross attention "
                        "(cannot run here), fa3 (cannot run: fa3_sm90 has no build for 7.0 (builds: sm_90a); "
                        "fa3_sm8x has no build for 7.0 (builds: sm_80, sm_86))")


@pytest.mark.parametrize("cap, traits, prefill, reason", [
    ("9.0", ModelTraits(), "fa3", "tier 9.0 prefers fa3"),
    ("10.0", ModelTraits(), "trtllm_mha", "tier 10.0 prefers trtllm_mha"),
    ("12.0", ModelTraits(), "flashinfer", "tier 12.0 (exact): portable default flashinfer"),
    ("12.0", ModelTraits(kind="mla"), "triton", "tier 12.0 (exact): portable default triton"),
    ("9.0", ModelTraits(speculative_multi_branch=True), "flashinfer",
     "tier 9.0 (exact): portable default flashinfer after fa3 (speculative top-k > 1)"),
    ("10.0", ModelTraits(speculative_multi_branch=True), "flashinfer",
     "tier 10.0 (exact): portable default flashinfer after trtllm_mha (speculative top-k > 1)"),
    ("10.0", ModelTraits(speculative_topk_pending=True), "flashinfer",
     "tier 10.0 (exact): portable default flashinfer after trtllm_mha (speculative top-k not decided)"),
])
def test_default_backend_reasons(cap, traits, prefill, reason):
    d = default_backend(resolve(cap), traits)
    assert (d.prefill, d.decode, d.reason) == (prefill, prefill, reason)


def test_a_blocked_preference_moves_on_to_the_next():
    d = default_backend(with_prefs("8.0", mha=["trtllm_mha", "fa4", "fa3"]), ModelTraits(speculative_topk_pending=True))
    assert (d.prefill, d.decode) == ("fa3", "fa3")
    assert d.reason == ("tier 8.0 prefers fa3; skipped trtllm_mha (speculative top-k not decided), "
                        "fa4 (cannot run: fa4_cute has no build for 8.0 (builds: jit:9.0, jit:10.0, jit:10.3, "
                        "jit:10.7, jit:11.0, jit:12.0, jit:12.1))")


def test_trtllm_mla_on_sm12x_decodes_and_refuses_prefill():
    """Ledger entry trtllm-mla-sm12x-decode-only: FlashInfer 0.7.2 decodes MLA on SM12x through
    XQA (catalog: xqa_mla, decode only); its prefill is trtllm-gen's, which has no SM12x build."""
    for cap in ("12.0", "12.1"):
        res = resolve(cap)
        decode = check_backend(res, "trtllm_mla", "mla", "decode")
        prefill = check_backend(res, "trtllm_mla", "mla", "prefill")
        assert decode.valid is True and "xqa_mla" in decode.reason
        assert prefill.valid is False and "trtllm_gen_fmha has no build" in prefill.reason
        assert "trtllm_mla" not in prefill.alternatives
        assert check_backend(res, "trtllm_mla", "mha", "decode").valid is False  # XQA MLA serves MLA only
    for cap in ("10.0", "10.3"):
        assert all(check_backend(resolve(cap), "trtllm_mla", "mla", ph).valid for ph in ("prefill", "decode"))
    for cap in ("9.0", "11.0", "13.0"):  # XQA MLA is built for major 12 only
        assert check_backend(resolve(cap), "trtllm_mla", "mla", "decode").valid is False, cap
