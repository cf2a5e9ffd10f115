"""The DSA policy: KV-cache default and split backends (arch/policies/dsa.py).

Expected values are written here from their source, not imported from the registry:
SGLang 0.5.23 ``srt/arg_groups/overrides.py``, ``_dsa_kv_cache_dtype_default`` ("fp8_e4m3"
if major >= 10 and no learnable sinks, else "bfloat16") and ``_dsa_split_backend_resolution``
(GLM-5 + FP8 on major 12: flashinfer_sparse_mla; FP8: trtllm on major >= 10 else
flashmla_kv; bfloat16: prefill flashmla_sparse, decode trtllm on major >= 10 else fa3).
Then the kernel catalog: where a phase's backend has no build for the device, both phases
take tilelang (docs/differences.md D10 off the table, D11 on known tiers).  Where each
backend's kernels exist is written here from the builds (cuobjdump of the wheels,
FlashInfer 0.7.2's artifact notes), not imported from the catalog.
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
    "7.0": ("bfloat16", ("flashmla_kv",) * 2, ("flashmla_sparse", "fa3"), ("flashmla_kv",) * 2),
    "7.5": ("bfloat16", ("flashmla_kv",) * 2, ("flashmla_sparse", "fa3"), ("flashmla_kv",) * 2),
    "8.0": ("bfloat16", ("flashmla_kv",) * 2, ("flashmla_sparse", "fa3"), ("flashmla_kv",) * 2),
    "8.9": ("bfloat16", ("flashmla_kv",) * 2, ("flashmla_sparse", "fa3"), ("flashmla_kv",) * 2),
    "9.0": ("bfloat16", ("flashmla_kv",) * 2, ("flashmla_sparse", "fa3"), ("flashmla_kv",) * 2),
    "10.0": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("trtllm",) * 2),
    "10.3": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("trtllm",) * 2),
    "11.0": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("trtllm",) * 2),
    "12.0": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("flashinfer_sparse_mla",) * 2),
    "12.1": ("fp8_e4m3", ("trtllm",) * 2, ("flashmla_sparse", "trtllm"), ("flashinfer_sparse_mla",) * 2),
}



def built_for(backend, cap):
    """Where each DSA backend's kernels have a build (the sources in the module docstring)."""
    c = Capability(*map(int, cap.split("."))) if isinstance(cap, str) else cap
    if backend == "trtllm":  # trtllm-gen cubins: sm_100f, sm_103a, sm_107a
        return c.major == 10
    if backend in ("flashmla_kv", "flashmla_sparse"):  # sgl-flash-mla: sm_90a, sm_100a, sm_103a, sm_107a
        return c in (Capability(9, 0), Capability(10, 0), Capability(10, 3), Capability(10, 7))
    if backend == "fa3":  # sgl-kernel flash_ops: sm_90a (and sm_80/86 for MHA only)
        return c == Capability(9, 0)
    if backend == "flashinfer_sparse_mla":  # generated for major 12
        return c.major == 12
    assert backend == "tilelang"
    return c >= Capability(8, 0)


def expected(cap, pair):
    if all(built_for(b, cap) for b in pair):
        return pair
    return ("tilelang", "tilelang") if built_for("tilelang", cap) else (None, None)  # None: no DSA kernel runs


@pytest.mark.parametrize("cap", sorted(UPSTREAM))
def test_known_tiers_take_upstreams_rule_where_its_kernels_exist(cap):
    res = resolve(cap)
    assert res.match == "exact"
    kv, fp8, bf16, glm = UPSTREAM[cap]
    assert dsa.kv_cache_dtype_default(res).dtype == kv
    got_fp8 = dsa.split_backends(res, "fp8_e4m3", V32)
    got_bf16 = dsa.split_backends(res, "bfloat16", V32)
    got_glm = dsa.split_backends(res, "fp8_e4m3", GLM)
    assert (got_fp8.prefill, got_fp8.decode) == expected(cap, fp8)
    assert (got_bf16.prefill, got_bf16.decode) == expected(cap, bf16)
    assert (got_glm.prefill, got_glm.decode) == expected(cap, glm)
    assert got_glm.glm_sm12 is (cap.startswith("12."))
    assert not got_fp8.glm_sm12 and not got_bf16.glm_sm12
    # GLM-5 with a bfloat16 cache is the general bfloat16 rule
    glm_bf16 = dsa.split_backends(res, "bfloat16", GLM)
    assert (glm_bf16.prefill, glm_bf16.decode) == expected(cap, bf16)


# D11: the known tiers where upstream's rule names a kernel with no build for the tier.
D11_TIERS = {"7.0", "7.5", "8.0", "8.9", "11.0", "12.0", "12.1"}


def test_d11_known_tiers_where_upstream_names_a_kernel_never_built_for_them():
    differs = {cap for cap, (_, fp8, bf16, glm) in UPSTREAM.items()
               if any(expected(cap, pair) != pair for pair in (fp8, bf16, glm))}
    assert differs == D11_TIERS
    assert "has no build for 12.0" in dsa.split_backends(resolve("12.0"), "fp8_e4m3", V32).reason


def test_sinks_keep_a_bfloat16_cache_everywhere():
    for cap in ("9.0", "10.0", "12.0", "13.0"):
        decision = dsa.kv_cache_dtype_default(resolve(cap), attention_sinks=True)
        assert decision.dtype == "bfloat16"
        assert "sinks" in decision.reason


@pytest.mark.parametrize("cap", ["6.1", "7.0", "7.5", "5.0"])
def test_below_sm80_no_dsa_backend_with_the_reason(cap):
    """TileLang compiles from SM80, and nothing else is built below it: no DSA backend."""
    res = resolve(cap)
    for kv in ("fp8_e4m3", "bfloat16"):
        for arch in (V32, GLM):
            decision = dsa.split_backends(res, kv, arch)
            assert (decision.prefill, decision.decode) == (None, None), decision
            assert decision.reason.endswith(f"no DSA kernel has a build for {cap}")
            assert ("tilelang", f"tilelang has no build for {cap} (builds: jit:8.0+)") in decision.dropped
            assert not any(built_for(c, cap) for c in ("tilelang", "trtllm", "flashmla_kv", "flashmla_sparse",
                                                       "fa3", "flashinfer_sparse_mla"))


@pytest.mark.parametrize("cap", ["9.5", "11.5", "13.0", "20.0"])
def test_off_the_table_dsa_takes_tilelang(cap):
    res = resolve(cap)
    assert res.match not in ("exact", "override")
    for kv in ("fp8_e4m3", "bfloat16"):
        for arch in (V32, GLM):
            decision = dsa.split_backends(res, kv, arch)
            assert (decision.prefill, decision.decode) == ("tilelang", "tilelang")
            assert not decision.glm_sm12
            assert cap in decision.reason and "tilelang" in decision.reason


def test_off_the_table_keeps_family_builds():
    """10.5 runs trtllm-gen's sm_100f cubins; 12.5 runs FlashInfer's SM12x sparse MLA."""
    d = dsa.split_backends(resolve("10.5"), "fp8_e4m3", V32)
    assert (d.prefill, d.decode) == ("trtllm", "trtllm")
    d = dsa.split_backends(resolve("10.5"), "bfloat16", V32)  # FlashMLA has no 10.5 build
    assert (d.prefill, d.decode) == ("tilelang", "tilelang")
    d = dsa.split_backends(resolve("12.5"), "fp8_e4m3", GLM)
    assert (d.prefill, d.decode) == ("flashinfer_sparse_mla",) * 2 and d.glm_sm12


@given(major=st.integers(min_value=0, max_value=30), minor=st.integers(min_value=0, max_value=9))
def test_kv_default_from_the_tier_equals_upstreams_from_the_device(major, minor):
    """A data layout, not a kernel: the tier's answer is the device's on every capability."""
    res = resolve(Capability(major, minor))
    expected = "fp8_e4m3" if major >= 10 else "bfloat16"  # upstream reads the device's major
    assert dsa.kv_cache_dtype_default(res).dtype == expected


@given(major=st.integers(min_value=0, max_value=30), minor=st.integers(min_value=0, max_value=9),
       kv=st.sampled_from(dsa.KV_CACHE_DTYPES), arch=st.sampled_from([V32, GLM]))
def test_dsa_backends_only_where_their_kernels_are_built(major, minor, kv, arch):
    """The safety rule: a prebuilt backend only where it has a build for the device itself."""
    cap = Capability(major, minor)
    decision = dsa.split_backends(resolve(cap), kv, arch)
    if (decision.prefill, decision.decode) == (None, None):  # only where no DSA kernel runs at all
        assert not any(built_for(c, cap) for c in ("tilelang", "trtllm", "flashmla_kv", "flashmla_sparse", "fa3",
                                                   "flashinfer_sparse_mla")), decision
    elif (decision.prefill, decision.decode) != ("tilelang", "tilelang"):
        assert built_for(decision.prefill, cap) and built_for(decision.decode, cap), decision


def test_invalid_kv_cache_dtype_is_named():
    with pytest.raises(ValueError, match=r"invalid DSA KV-cache dtype 'fp4'; accepted: bfloat16, fp8_e4m3"):
        dsa.split_backends(resolve("9.0"), "fp4")


# --- the K-pool tail backend (sglang 0.5.23 dsa/dsa_backend_kpool.py _resolve_kpool_tail_backend:
# flashmla_sparse -> trtllm on major >= 10, fa3 on major 9, kept below; any other backend kept)

DSA_IMPLS = ("flashmla_sparse", "flashmla_kv", "fa3", "tilelang", "trtllm", "flashinfer_sparse_mla")


def upstream_tail(major, impl):
    if impl != "flashmla_sparse":
        return impl
    return "trtllm" if major >= 10 else "fa3" if major == 9 else impl


@pytest.mark.parametrize("cap", sorted(UPSTREAM))
@pytest.mark.parametrize("impl", DSA_IMPLS)
def test_kpool_tail_on_known_tiers_is_upstreams_where_its_kernels_exist(cap, impl):
    res = resolve(cap)
    want = upstream_tail(res.resolved.major, impl)
    if want != impl and not built_for(want, cap):  # D11: trtllm-gen has no 11.0 / 12.x build
        want = "tilelang"
    assert dsa.kpool_tail_backend(res, impl).backend == want


def test_kpool_tail_d11_tiers():
    got = {cap: dsa.kpool_tail_backend(resolve(cap), "flashmla_sparse") for cap in ("11.0", "12.0", "12.1")}
    assert {cap: d.backend for cap, d in got.items()} == dict.fromkeys(got, "tilelang")
    assert all(d.dropped[0][0] == "trtllm" and "no build for" in d.reason for d in got.values())


@given(major=st.integers(min_value=0, max_value=30), minor=st.integers(min_value=0, max_value=9),
       impl=st.sampled_from(DSA_IMPLS))
def test_kpool_tail_moves_only_to_a_backend_built_for_the_device(major, minor, impl):
    """The safety rule: where the tail moves the phase, the backend has a build for the
    device itself (tilelang where upstream's pick has none); else the phase is unchanged."""
    cap = Capability(major, minor)
    decision = dsa.kpool_tail_backend(resolve(cap), impl)
    if decision.backend != impl:
        assert impl == "flashmla_sparse" and built_for(decision.backend, cap), decision
        assert decision.backend in ("trtllm", "fa3", "tilelang")  # what SGLang's tail check accepts
    else:
        assert impl != "flashmla_sparse" or major < 9 or not built_for("tilelang", cap), decision


# --- the per-batch prefill pick (sglang 0.5.23 dsa_backend.py set_dsa_prefill_impl: MHA
# one-shot when ``device_sm == 90 or 100 <= device_sm < 110``, run by trtllm-gen's ragged
# kernel on major >= 10 and FA3 below (_forward_standard_mha); flashmla_auto's variant:
# flashmla_sparse possible where ``is_blackwell()``: majors 10, 11, 12 with CUDA >= 12.8)

def upstream_mha_band(sm):
    return sm == 90 or 100 <= sm < 110


@pytest.mark.parametrize("cap", sorted(UPSTREAM))
def test_prefill_bands_on_known_tiers_are_upstreams(cap):
    c = Capability(*map(int, cap.split(".")))
    sm = c.major * 10 + c.minor
    bands = dsa.prefill_bands(resolve(cap), (12, 9))
    assert bands.mha_one_shot == upstream_mha_band(sm)
    assert bands.band_sm == sm  # what SGLang's probe answers on the device itself
    assert upstream_mha_band(bands.band_sm) == bands.mha_one_shot
    assert bands.flashmla_sparse_band == (c.major in (10, 11, 12))
    assert bands.mha_kernel == ("trtllm" if c.major >= 10 else "fa3")


def test_flashmla_band_needs_cuda_12_8_as_is_blackwell_does():
    assert not dsa.prefill_bands(resolve("10.0"), (12, 6)).flashmla_sparse_band
    assert dsa.prefill_bands(resolve("10.0"), (12, 8)).flashmla_sparse_band


def test_a_9x_device_on_tier_9_0_keeps_mla_fa3_is_sm_90a_only():
    bands = dsa.prefill_bands(resolve("9.5"))
    assert resolve("9.5").resolved == Capability(9, 0)
    assert not bands.mha_one_shot and bands.band_sm == 0 and "fa3" in bands.reason


@given(major=st.integers(min_value=0, max_value=30), minor=st.integers(min_value=0, max_value=9))
def test_mha_one_shot_only_where_its_kernel_has_a_build_for_the_device(major, minor):
    """The safety rule: the band's kernel (picked by the device's major, as SGLang does) has
    a build for the device wherever the registry keeps MHA one-shot; the probe answer agrees."""
    cap = Capability(major, minor)
    bands = dsa.prefill_bands(resolve(cap))
    if bands.mha_one_shot:
        assert built_for("trtllm" if major >= 10 else "fa3", cap), bands
    assert upstream_mha_band(bands.band_sm) == bands.mha_one_shot
