"""MoE runner, FP8 block / FP4 GEMM and DeepGEMM decisions (policies/moe.py), without SGLang.

The property: on every capability, known or not, every decision the registry takes
names only kernels the catalog has a build of for that device; on the exact tiers it
is SGLang's own choice wherever that choice runs there.  Each difference (D12-D15 in
docs/differences.md) has its own test below.
"""

import pytest
from sglang_arch.arch import catalog, parse_capability, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import moe

ALL_CAPS = [Capability(major, minor) for major in range(6, 16) for minor in range(10)]
KNOWN = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]


def _res(cap):
    return resolve(parse_capability(cap) if isinstance(cap, str) else cap)


# Models whose override picks the runner of FP8 checkpoints with MXFP4 experts (fp8_mxfp4)
FP4_EXPERT_MODELS = ("DeepseekV4ForCausalLM", "BailingMoeV3ForCausalLM", "MiMoV2FlashForCausalLM")


def _decisions(res):
    out = [(moe.MOE, moe.moe_runner(res, kind), kind) for kind in moe.QUANT_KINDS]
    out += [(moe.MOE, moe.moe_runner(res, "fp8_mxfp4", arch), "fp8_mxfp4") for arch in FP4_EXPERT_MODELS]
    out += [(moe.FP8_GEMM, moe.fp8_gemm(res), None), (moe.FP4_GEMM, moe.fp4_gemm(res), None)]
    dg = moe.deep_gemm(res)
    if dg.choice == "on":
        out.append((moe.DEEP_GEMM, moe.Choice("jit", "jit", dg.reason), None))
    return out


@pytest.mark.parametrize("cap", ALL_CAPS, ids=str)
def test_every_decision_runs_on_the_device(cap):
    res = _res(cap)
    for decision, choice, kind in _decisions(res):
        if choice.choice is None or not choice.judged:
            continue  # refused: nothing of the kind has a build here (D12); FP8 below SM89: SGLang's own
        verdict = catalog.choice_runs(decision, choice.choice, cap, (13, 0), kind)
        assert verdict is not None and verdict.runs, (str(cap), decision, kind, choice)


@pytest.mark.parametrize("cap", KNOWN)
def test_exact_tiers_equal_upstream_where_upstream_runs(cap):
    res = _res(cap)
    assert res.match == "exact"
    for decision, choice, kind in _decisions(res):
        upstream_runs = catalog.choice_runs(decision, choice.upstream, res.requested, (13, 0), kind)
        if upstream_runs is None or upstream_runs.runs:
            assert choice.choice == choice.upstream, (cap, decision, kind, choice.reason)


def test_d12_mxfp8_moe_refused_where_no_mxfp8_runner_has_a_build():
    # SGLang defaults --quantization mxfp8 to flashinfer_trtllm on every GPU (trtllm-gen: sm_100f/sm_103a).
    for cap in ("9.0", "11.0", "12.0", "12.1"):
        d = moe.moe_runner(_res(cap), "mxfp8")
        assert d.upstream == "flashinfer_trtllm" and d.choice is None, cap
        assert "flashinfer_trtllm_gen_moe has no build" in d.reason
    assert moe.moe_runner(_res("10.0"), "mxfp8").choice == "flashinfer_trtllm"
    assert moe.moe_runner(_res("10.3"), "mxfp8").choice == "flashinfer_trtllm"


def test_d13_explicit_choices_without_a_build_are_refused_naming_what_runs():
    sm120 = _res("12.0")
    check = moe.check_moe_runner(sm120, "cutlass", "fp8_block")  # sgl-project/sglang #28125
    assert check.valid is False and "triton" in check.alternatives and "cutlass" not in check.alternatives
    check = moe.check_moe_runner(_res("12.1"), "cutlass", "nvfp4")  # #17421: sm_version == 120 only
    assert check.valid is False and "flashinfer_cutlass" in check.alternatives
    assert moe.check_moe_runner(sm120, "cutlass", "nvfp4").valid is True
    assert moe.check_moe_runner(_res("10.3"), "flashinfer_trtllm", "nvfp4").valid is True
    assert moe.check_moe_runner(sm120, "flashinfer_trtllm", "nvfp4").valid is False  # #39807
    check = moe.check_gemm(_res("11.0"), moe.FP8_GEMM, "deep_gemm")
    assert check.valid is False and check.alternatives == ("triton",)
    assert moe.check_gemm(_res("12.1"), moe.FP8_GEMM, "flashinfer_cutlass").valid is False
    assert moe.check_gemm(_res("12.1"), moe.FP8_GEMM, "cutlass").valid is True
    # not judged: names the catalog does not know, and kinds a runner has no kernel of its own for
    assert moe.check_moe_runner(sm120, "aiter", "fp8_block").valid is None
    assert moe.check_moe_runner(sm120, "flashinfer_cutlass", "fp8_block").valid is None


def test_d14_deep_gemm_off_where_it_has_no_build():
    for cap, choice, upstream in (("9.0", "on", "on"), ("10.0", "on", "on"), ("10.3", "on", "on"),
                                  ("12.0", "on", "on"), ("12.1", "on", "on"), ("8.9", "off", "off"),
                                  ("11.0", "off", "on"), ("10.5", "off", "on"), ("12.3", "off", "on"),
                                  ("13.0", "off", "on")):
        d = moe.deep_gemm(_res(cap))
        assert (d.choice, d.upstream) == (choice, upstream), cap
    # on SM110 the FP8 block GEMM was already triton upstream (initialize_fp8_gemm_config)
    assert moe.fp8_gemm(_res("11.0")).choice == "triton"


def test_d15_gpus_outside_the_table_get_kernels_built_for_them():
    d = moe.moe_runner(_res("13.0"), "nvfp4")  # tier 12.1's flashinfer_cutlass is generated for major 12
    assert (d.choice, d.upstream) == ("marlin", "flashinfer_cutlass")
    d = moe.fp4_gemm(_res("10.5"))  # tier 10.3's CuTe DSL kernels are compiled for 10.0 / 10.3 only
    assert (d.choice, d.upstream) == ("flashinfer_cutlass", "flashinfer_cutedsl")
    d = moe.fp8_gemm(_res("13.0"))  # tier 12.1's cutlass FP8 block GEMM is JIT for SM12x only
    assert (d.choice, d.upstream) == ("triton", "cutlass")
    d = moe.moe_runner(_res("13.0"), "mxfp4")
    assert (d.choice, d.upstream) == ("triton_kernel", "flashinfer_mxfp4")


def test_upstream_rules_are_sglangs_0_5_23_rules():
    cap = parse_capability
    assert moe.upstream_moe_runner(cap("12.1"), "nvfp4") == "flashinfer_cutlass"
    assert moe.upstream_moe_runner(cap("11.0"), "nvfp4") == "flashinfer_cutlass"
    assert moe.upstream_moe_runner(cap("9.0"), "nvfp4") == "marlin"
    assert moe.upstream_moe_runner(cap("10.3"), "nvfp4") == "flashinfer_trtllm"
    assert moe.upstream_moe_runner(cap("13.0"), "nvfp4") == "flashinfer_trtllm"
    assert moe.upstream_moe_runner(cap("8.0"), "mxfp8") == "flashinfer_trtllm"
    assert moe.upstream_moe_runner(cap("12.0"), "mxfp4") == "flashinfer_mxfp4"
    assert moe.upstream_moe_runner(cap("9.0"), "mxfp4") == "triton_kernel"
    # BF16 GPT-OSS as well (model_overrides/gpt_oss.py: triton_kernel with no --quantization); other models: triton
    assert moe.upstream_moe_runner(cap("9.0"), "unquantized", "GptOssForCausalLM") == "triton_kernel"
    assert moe.upstream_moe_runner(cap("9.0"), "unquantized", "Qwen3MoeForCausalLM") == "triton"
    assert moe.upstream_moe_runner(cap("10.0"), "fp8_block", "DeepseekV3ForCausalLM") == "flashinfer_trtllm"
    assert moe.upstream_moe_runner(cap("12.0"), "fp8_block", "DeepseekV3ForCausalLM") == "triton"
    assert moe.upstream_fp8_gemm(cap("12.1"), True) == "cutlass"
    assert moe.upstream_fp8_gemm(cap("11.0"), True) == "triton"
    assert moe.upstream_fp8_gemm(cap("10.0"), False) == "flashinfer_trtllm"
    assert moe.upstream_fp8_gemm(cap("9.0"), True) == "deep_gemm"
    assert moe.upstream_fp4_gemm(cap("10.3")) == "flashinfer_cutedsl"
    assert moe.upstream_fp4_gemm(cap("8.9")) == "marlin"


def test_fp8_checkpoints_with_mxfp4_experts_are_their_own_kind():
    """Bailing V3 / DeepSeek-V4 / MiMo-V2 mixed checkpoints: Fp8Config's own MXFP4 wrappers
    (fp8.py get_quant_method), whose runners the overrides pick from is_sm90 / is_sm100 /
    is_sm120; Fp8MoEMethod's triton reads no packed MXFP4 (model_overrides/mimo_v2.py)."""
    cap = parse_capability
    for arch in ("DeepseekV4ForCausalLM", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration"):
        for major in ("9.0", "10.0", "10.3", "12.0", "12.1"):
            assert moe.upstream_moe_runner(cap(major), "fp8_mxfp4", arch) == "flashinfer_mxfp4", (arch, major)
        assert moe.upstream_moe_runner(cap("11.0"), "fp8_mxfp4", arch) == "triton"
        assert moe.upstream_moe_runner(cap("8.9"), "fp8_mxfp4", arch) == "triton"
    assert moe.upstream_moe_runner(cap("10.0"), "fp8_mxfp4", "MiMoV2FlashForCausalLM") == "flashinfer_mxfp4"
    assert moe.upstream_moe_runner(cap("9.0"), "fp8_mxfp4", "MiMoV2FlashForCausalLM") == "marlin"
    assert moe.upstream_moe_runner(cap("12.0"), "fp8_mxfp4", "MiMoV2FlashForCausalLM") == "triton"
    # the fall-through to Fp8MoEMethod's triton is SGLang's own, not judged
    d = moe.moe_runner(_res("11.0"), "fp8_mxfp4", model_arch="DeepseekV4ForCausalLM")
    assert (d.choice, d.judged) == ("triton", False)
    # an override's pick on a GPU outside the table: only what has a build for it
    d = moe.moe_runner(_res("13.0"), "fp8_mxfp4", model_arch="DeepseekV4ForCausalLM")
    assert (d.choice, d.upstream) == ("marlin", "flashinfer_mxfp4")
    for c in ("10.0", "10.3", "12.0", "12.1", "9.0"):
        d = moe.moe_runner(_res(c), "fp8_mxfp4", model_arch="BailingMoeV3ForCausalLM")
        assert (d.choice, d.upstream) == ("flashinfer_mxfp4", "flashinfer_mxfp4"), c
    # flashinfer_mxfp4 for these experts: CUTLASS on is_sm90 / is_sm120, trtllm-gen elsewhere
    check = moe.check_moe_runner(_res("11.0"), "flashinfer_mxfp4", "fp8_mxfp4")
    assert check.valid is False and "marlin" in check.alternatives and "triton" not in check.alternatives
    assert moe.check_moe_runner(_res("12.1"), "flashinfer_mxfp4", "fp8_mxfp4").valid is True
    assert moe.check_moe_runner(_res("12.1"), "triton", "fp8_mxfp4").valid is None  # no kernel of its own


def test_flashinfer_cutedsl_fp8_gemm_runs_on_sm100_datacenter_parts_only():
    """DeepSeek-V4.1's MXFP8 dense GEMM (FlashInfer mm_mxfp8 cute-dsl: 100, 103, 107)."""
    for c in ("10.0", "10.3", "10.7"):
        assert moe.check_gemm(_res(c), moe.FP8_GEMM, "flashinfer_cutedsl").valid is True, c
    for c in ("9.0", "11.0", "12.0", "12.1", "10.5"):
        check = moe.check_gemm(_res(c), moe.FP8_GEMM, "flashinfer_cutedsl")
        assert check.valid is False and "flashinfer_cutedsl" not in check.alternatives, c


def test_fp8_below_sm89_is_left_to_sglang():
    for cap in ("7.0", "8.0", "8.6"):
        assert not moe.moe_runner(_res(cap), "fp8_block").judged and not moe.fp8_gemm(_res(cap)).judged
        assert not moe.moe_runner(_res(cap), "fp8_block").changed
    assert moe.moe_runner(_res("8.9"), "fp8_block").judged
    assert moe.check_moe_runner(_res("8.0"), "cutlass", "fp8_block").valid is None
    assert moe.check_moe_runner(_res("8.9"), "cutlass", "fp8_block").valid is False


def test_bad_kinds_and_decisions_are_refused():
    with pytest.raises(ValueError, match="accepted: unquantized"):
        moe.moe_runner(_res("12.0"), "int4")
    with pytest.raises(ValueError, match="accepted: fp8_gemm, fp4_gemm"):
        moe.check_gemm(_res("12.0"), "attention", "fa3")


def test_a_dense_model_is_never_refused_over_moe_runners():
    """6.1 has no MoE runner build, but a dense model builds none: only models with experts
    may be refused (the final-backend matrix found every model refused on 6.1)."""
    from types import SimpleNamespace

    from sglang_arch.integrations.sglang.glue.moe import has_experts

    assert not has_experts(SimpleNamespace(architectures=["LlamaForCausalLM"], hidden_size=64))
    assert has_experts(SimpleNamespace(num_experts=8))
    assert has_experts(SimpleNamespace(n_routed_experts=4))
    assert has_experts(SimpleNamespace(text_config=SimpleNamespace(num_local_experts=2)))
    assert not has_experts(SimpleNamespace(num_experts=0))
    assert not has_experts(SimpleNamespace(num_experts=True))
