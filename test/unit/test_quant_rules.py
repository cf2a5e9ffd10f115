"""Quantization decisions that follow a GEMM decision (policies/quant.py), without SGLang.

SGLang 0.5.23's ``should_deepgemm_weight_requant_ue8m0`` keeps dense block-FP8 weights on
FP32 scales where ``get_device_sm() == 120`` (its dense GEMM there is CUTLASS, the
``is_sm120`` arm of ``initialize_fp8_gemm_config``, every major 12); the registry keeps them
where its own dense block-FP8 GEMM is not DeepGEMM, so 12.1 too (D26).
"""

import pytest
from sglang_arch.arch import parse_capability, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import moe, quant

ALL_CAPS = [Capability(major, minor) for major in range(6, 16) for minor in range(10)]
KNOWN = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
CUDAS = [(12, 4), (12, 8), (13, 0)]


def _res(cap):
    return resolve(parse_capability(cap) if isinstance(cap, str) else cap)


def _upstream_dense(cap):
    """SGLang's own dense answer once its first condition holds (DeepGEMM on, UE8M0 scales)."""
    return cap.sm != 120


@pytest.mark.parametrize("cuda", CUDAS)
def test_dense_scales_follow_the_registrys_fp8_gemm(cuda):
    for cap in ALL_CAPS:
        _dense_scales_follow_the_registrys_fp8_gemm(cap, cuda)


def _dense_scales_follow_the_registrys_fp8_gemm(cap, cuda):
    res = _res(cap)
    d = quant.dense_ue8m0_requant(res, cuda)
    if moe.deep_gemm(res, cuda).choice != "on":
        assert d.dense is None and d.check_sm == cap.sm, d.reason  # not reached: the device's SM
        return
    on_deep_gemm = moe.fp8_gemm(res, cuda, deep_gemm_on=True).choice == "deep_gemm"
    assert d.dense is on_deep_gemm, d.reason
    # what SGLang's check then sees gives the registry's answer
    assert (d.check_sm != 120) is on_deep_gemm
    assert d.check_sm == (cap.sm if on_deep_gemm else quant.SM12X_DENSE_SM)


@pytest.mark.parametrize("cap", KNOWN)
def test_exact_tiers_equal_upstream_but_d26(cap):
    for cuda in CUDAS:
        _exact_tier_equal_upstream_but_d26(cap, cuda)


def _exact_tier_equal_upstream_but_d26(cap, cuda):
    res = _res(cap)
    assert res.match == "exact"
    d = quant.dense_ue8m0_requant(res, cuda)
    routed = _upstream_dense(Capability(d.check_sm // 10, d.check_sm % 10))
    if cap == "12.1" and d.dense is not None:
        assert routed is False and _upstream_dense(res.requested) is True  # D26
    else:
        assert routed == _upstream_dense(res.requested), (cap, cuda, d.reason)


def test_d26_12_1_keeps_fp32_dense_scales_as_12_0():
    for cap in ("12.0", "12.1"):
        d = quant.dense_ue8m0_requant(_res(cap), (13, 0))
        assert d.dense is False and d.check_sm == 120, d.reason
        assert "cutlass" in d.reason
    for cap in ("9.0", "10.0", "10.3"):
        d = quant.dense_ue8m0_requant(_res(cap), (13, 0))
        assert d.dense is True and d.check_sm == _res(cap).requested.sm, d.reason


# --- the load-time rules read from one platform fact (quant.FACT_RULES) ---

from sglang_arch.arch.policies import attention  # noqa: E402
from unit.sglang_probes import upstream_fact  # noqa: E402


def _sglangs(res, fact, cuda):
    """What SGLang's probe answers on the device itself."""
    if fact == "_is_sm107_supported":
        return res.requested.as_tuple() == (10, 7)
    if fact == quant.LORA_FP8_FAST_DIV_FACT:
        return res.requested.as_tuple() == (9, 0)
    return upstream_fact(fact, res.requested, cuda)


@pytest.mark.parametrize("rule", sorted(quant.FACT_RULES))
def test_fact_rules_on_exact_tiers_are_sglangs_probe(rule):
    for cap in KNOWN:
        res = _res(cap)
        assert res.match == "exact"
        for cuda in CUDAS:
            d = quant.fact_rule(res, rule, cuda)
            assert d.value is None or d.value == _sglangs(res, d.fact, cuda), (rule, cap, cuda, d.reason)


@pytest.mark.parametrize("rule", sorted(quant.FACT_RULES))
def test_fact_rules_take_the_tier_and_pick_only_kernels_that_run(rule):
    for cap in ALL_CAPS:
        _fact_rule_takes_the_tier(rule, cap)


def _fact_rule_takes_the_tier(rule, cap):
    res = _res(cap)
    d = quant.fact_rule(res, rule, (13, 0))
    assert d.value in (None, True, False) and d.reason
    if rule.startswith("deep_gemm_sm100"):
        on = moe.deep_gemm(res, (13, 0)).choice == "on"
        assert (d.value is None) == (not on), d.reason
        if on:
            assert d.value == (res.resolved.major == 10)
    elif rule == "nvfp4_native_prefill":
        runs = attention.check_backend(res, "trtllm_mha", "mha", "prefill", (13, 0)).valid is not False
        assert d.value == (res.resolved.major == 10 and runs), d.reason
    elif rule == "mxfp8_moe_quantizer_sm107":
        assert d.value == (res.resolved.as_tuple() == (10, 7))
    elif rule == "lora_fp8_whole_row_fast_div":
        assert d.value == (res.resolved.as_tuple() == (9, 0)), d.reason
    else:
        assert d.value == (res.resolved.major == {"is_sm90": 9, "is_sm100": 10}[d.fact]), d.reason


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="accepted"):
        quant.fact_rule(_res("9.0"), "no_such_rule")


def test_explain_row_and_json_key_for_dense_fp8_scales():
    from sglang_arch.arch import explain

    for cap, shown, ue8m0 in (("12.1", "FP32", False), ("12.0", "FP32", False), ("10.0", "UE8M0", True),
                              ("11.0", "SGLang's (DeepGEMM off)", None)):
        d = explain(cap)
        rows = {label: (value, reason) for label, value, reason, _ in d.named()}
        assert rows["FP8 dense scales"][0] == shown, cap
        assert d.to_dict()["moe_gemm"]["fp8_dense_scales"] == {"ue8m0": ue8m0, "reason": rows["FP8 dense scales"][1]}
