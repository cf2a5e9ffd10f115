"""The DSA policy: KV-cache default and split backends (arch/policies/dsa.py).

Expected values are written here from their source, not imported from the registry:
SGLang 0.5.23 ``srt/arg_groups/overrides.py``, ``_dsa_kv_cache_dtype_default`` ("fp8_e4m3"
if major >= 10 and no learnable sinks, else "bfloat16") and ``_dsa_split_backend_resolution``
(GLM-5 + FP8 on major 12: flashinfer_sparse_mla; FP8: trtllm on major >= 10 else
flashmla_kv; bfloat16: prefill flashmla_sparse, decode trtllm on major >= 10 else fa3).
Off the table (docs/differences.md D10): tilelang for both phases.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch import resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import dsa

GLM = "GlmMoeDsaForCausalLM"
V32 = "DeepseekV32ForCausalLM"

# tier -> (auto KV dtype, FP8 pair, bfloat16 pair, GLM-5 FP8 pair), from overrides.py 0.5.23
UPSTREAM = {
    "8.0": ("bfloat16", ("flashmla_kv",) * 2, ("flashmla_sparse", "fa3"), ("flashmla_kv",) * 2),
    "8.9": ("bfloat16", ("flashmla_kv",) * 2, ("flashmla_sparse", "fa3"), ("flashmla_kv",) * 2),
    "9.0": ("bfloat16", ("flashmla_kv",) * 2, ("flashmla_sparse", "fa3"), ("flashmla_kv",) * 2),
    "10.0": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("trtllm",) * 2),
    "10.3": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("trtllm",) * 2),
    "11.0": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("trtllm",) * 2),
    "12.0": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("flashinfer_sparse_mla",) * 2),
    "12.1": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("flashinfer_sparse_mla",) * 2),
}


@pytest.mark.parametrize("cap", sorted(UPSTREAM))
def test_known_tiers_take_upstreams_rule(cap):
    res = resolve(cap)
    assert res.match == "exact"
    kv, fp8, bf16, glm = UPSTREAM[cap]
    assert dsa.kv_cache_dtype_default(res).dtype == kv
    got_fp8 = dsa.split_backends(res, "fp8_e4m3", V32)
    got_bf16 = dsa.split_backends(res, "bfloat16", V32)
    got_glm = dsa.split_backends(res, "fp8_e4m3", GLM)
    assert (got_fp8.prefill, got_fp8.decode) == fp8
    assert (got_bf16.prefill, got_bf16.decode) == bf16
    assert (got_glm.prefill, got_glm.decode) == glm
    assert got_glm.glm_sm12 is (cap.startswith("12."))
    assert not got_fp8.glm_sm12 and not got_bf16.glm_sm12
    # GLM-5 with a bfloat16 cache is the general bfloat16 rule
    glm_bf16 = dsa.split_backends(res, "bfloat16", GLM)
    assert (glm_bf16.prefill, glm_bf16.decode) == bf16


def test_sinks_keep_a_bfloat16_cache_everywhere():
    for cap in ("9.0", "10.0", "12.0", "13.0"):
        decision = dsa.kv_cache_dtype_default(resolve(cap), attention_sinks=True)
        assert decision.dtype == "bfloat16"
        assert "sinks" in decision.reason


@pytest.mark.parametrize("cap", ["9.5", "10.5", "11.5", "12.5", "13.0", "20.0", "6.1"])
def test_off_the_table_dsa_takes_tilelang(cap):
    res = resolve(cap)
    assert res.match not in ("exact", "override")
    for kv in ("fp8_e4m3", "bfloat16"):
        for arch in (V32, GLM):
            decision = dsa.split_backends(res, kv, arch)
            assert (decision.prefill, decision.decode) == ("tilelang", "tilelang")
            assert not decision.glm_sm12
            assert cap in decision.reason and "tilelang" in decision.reason


@given(major=st.integers(min_value=0, max_value=30), minor=st.integers(min_value=0, max_value=9))
def test_kv_default_from_the_tier_equals_upstreams_from_the_device(major, minor):
    """A data layout, not a kernel: the tier's answer is the device's on every capability."""
    res = resolve(Capability(major, minor))
    expected = "fp8_e4m3" if major >= 10 else "bfloat16"  # upstream reads the device's major
    assert dsa.kv_cache_dtype_default(res).dtype == expected


@given(major=st.integers(min_value=0, max_value=30), minor=st.integers(min_value=0, max_value=9),
       kv=st.sampled_from(dsa.KV_CACHE_DTYPES), arch=st.sampled_from([V32, GLM]))
def test_prebuilt_dsa_kernels_only_on_known_tiers(major, minor, kv, arch):
    """The safety rule: a backend of prebuilt kernels only where the tier is the device."""
    res = resolve(Capability(major, minor))
    decision = dsa.split_backends(res, kv, arch)
    portable = (decision.prefill, decision.decode) == ("tilelang", "tilelang")
    assert portable is (res.match not in ("exact", "override"))


def test_invalid_kv_cache_dtype_is_named():
    with pytest.raises(ValueError, match=r"invalid DSA KV-cache dtype 'fp4'; accepted: bfloat16, fp8_e4m3"):
        dsa.split_backends(resolve("9.0"), "fp4")
