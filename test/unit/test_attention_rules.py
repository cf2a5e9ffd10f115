"""Attention rules, case by case, with the expected values written as data (found by
mutation testing: docs/mutation.md).  A backend's needs come from the sources listed
next to ``BACKENDS`` (FlashInfer 7.5 to 12.1, fa3 on Hopper needs CUDA 12.3, SM100
paths 12.8); the reasons are what ``explain`` shows users."""

from dataclasses import replace

import pytest
from sglang_arch.arch import resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import attention as a
from sglang_arch.arch.policies.attention import (
    ModelTraits,
    Need,
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


def test_cc_parses_major_dot_minor():
    assert a._cc("8.9") == Capability(8, 9)
    assert a._cc("12.1") == Capability(12, 1)


@pytest.mark.parametrize("need, text", [
    (Need(), "any CUDA GPU"),
    (Need(feature="wgmma"), "wgmma"),
    (Need(family=12), "SM12x"),
    (Need(min_cc=Capability(8, 0)), "SM 8.0.."),
    (Need(max_cc=Capability(8, 9)), "SM ..8.9"),
    (Need(min_cc=Capability(7, 5), max_cc=Capability(12, 1)), "SM 7.5..12.1"),
    (Need(kinds=frozenset({"mla"})), "MLA only"),
    (Need(min_cuda=(12, 3)), "CUDA >= 12.3"),
    (Need(feature="tcgen05", family=10, kinds=frozenset({"mla"}), min_cuda=(12, 8)),
     "tcgen05 + SM10x + MLA only + CUDA >= 12.8"),
])
def test_need_describe(need, text):
    assert need.describe() == text


def test_need_holds_portable_never():
    assert Need().holds(resolve("6.1"), "mha", (13, 0)) is False


def test_need_holds_kind():
    n = Need(kinds=frozenset({"mla"}))
    assert n.holds(resolve("8.0"), "mha", (13, 0)) is False
    assert n.holds(resolve("8.0"), "mla", (13, 0)) is True


def test_need_holds_family_needs_same_major_and_family_code():
    n = Need(family=12)
    assert n.holds(resolve("12.0"), "mha", (13, 0)) is True
    assert n.holds(resolve("10.0"), "mha", (13, 0)) is False  # other family, family code kept
    assert n.holds(resolve("13.0"), "mha", (13, 0)) is False  # tier 12.1 by generation: no family code


def test_need_holds_min_cuda_is_inclusive():
    n = Need(min_cuda=(12, 3))
    assert n.holds(resolve("9.0"), "mha", (12, 3)) is True
    assert n.holds(resolve("9.0"), "mha", (12, 2)) is False
    assert n.holds(resolve("9.0"), "mha", None) is False


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
    assert (v.valid, v.reason) == (True, "fa3 runs on tier 9.0 (exact): wgmma + CUDA >= 12.3")
    v = check_backend(resolve("8.0"), "fa4")
    assert v.valid is False
    assert v.reason == "fa4 cannot run MHA prefill on 8.0 (tier 8.0, exact): needs tcgen05 or SM12x"


def test_check_backend_alternatives_use_the_given_cuda():
    # fa3 on Hopper needs CUDA 12.3: with 12.3 it is an alternative, with 12.2 it is not
    assert check_backend(resolve("9.0"), "fa4", "mha", "prefill", (12, 3)).alternatives == (
        "fa3", "trtllm_mha", "flashinfer", "triton", "torch_native")
    assert check_backend(resolve("9.0"), "fa4", "mha", "prefill", (12, 2)).alternatives == (
        "trtllm_mha", "flashinfer", "triton", "torch_native")


def test_decode_only_backend_cannot_prefill():
    v = check_backend(resolve("10.0"), "cutedsl_mla", "mla", "prefill")
    assert v.valid is False and v.reason.endswith(": needs decode only")
    assert check_backend(resolve("10.0"), "cutedsl_mla", "mla", "decode").valid is True


def test_cross_attention_picks_flashinfer_where_it_runs():
    # MLA's normal tail is triton, so only the cross-attention rule gives flashinfer
    d = default_backend(resolve("8.0"), ModelTraits(kind="mla", cross_attention_needs_flashinfer=True))
    assert (d.prefill, d.decode, d.reason) == ("flashinfer", "flashinfer", "cross attention needs flashinfer")


def test_cross_attention_where_flashinfer_cannot_run():
    d = default_backend(with_prefs("7.0", mha=["fa3"]), ModelTraits(cross_attention_needs_flashinfer=True))
    assert (d.prefill, d.decode) == ("triton", "triton")
    assert d.reason == ("tier 7.0 (exact): portable default triton after flashinfer for cross attention "
                        "(cannot run here), fa3 (cannot run: wgmma + CUDA >= 12.3 or SM 8.0..8.9 + MHA only)")


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
    d = default_backend(with_prefs("9.0", mha=["trtllm_mha", "fa4", "fa3"]), ModelTraits(speculative_topk_pending=True))
    assert (d.prefill, d.decode) == ("fa3", "fa3")
    assert d.reason == ("tier 9.0 prefers fa3; skipped trtllm_mha (speculative top-k not decided), "
                        "fa4 (cannot run: tcgen05 or SM12x)")
