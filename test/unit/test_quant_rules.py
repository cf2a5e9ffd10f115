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
@pytest.mark.parametrize("cap", ALL_CAPS, ids=str)
def test_dense_scales_follow_the_registrys_fp8_gemm(cap, cuda):
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


@pytest.mark.parametrize("cuda", CUDAS)
@pytest.mark.parametrize("cap", KNOWN)
def test_exact_tiers_equal_upstream_but_d26(cap, cuda):
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
