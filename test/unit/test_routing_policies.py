"""The decisions routed here: deterministic inference's backend, the ViT backend, the
hybrid linear-attention draft backend, and the build guard's replacement.

Upstream's rules are written here from SGLang 0.5.23's source (not imported from the
registry): ``arg_groups/overrides.py`` ``_deterministic_attention_backend``,
``layers/attention/vision.py`` ``_determine_attention_backend``,
``speculative/draft_utils.py`` ``_create_hybrid_linear_attn_*_backend``.  Where each
kernel has a build is written from the wheels (cuobjdump: flash_ops sm_80 sm_86 sm_90a;
FlashInfer's JIT from 7.5; Triton from 7.0; FA4's CuTe targets 8.0 8.6 8.7 8.9 9.0 10.0 10.3
10.7 11.0 12.0 12.1, less 8.x over a paged cache and less all but 10.x/11.x for MLA's qv), not
imported from the catalog.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_arch.arch import resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import attention, deterministic, speculative, vision
from sglang_arch.arch.policies.attention import ModelTraits

from .strategies import KNOWN_TIERS, capabilities

DETERMINISTIC = ("ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton")  # arg_groups/choices.py
EXACT = [f"{a}.{b}" for a, b in KNOWN_TIERS]


def runs(backend, cap, kind="mha"):
    """Where a backend's kernels have a build (module docstring), for the device itself."""
    c = cap if isinstance(cap, Capability) else Capability(*map(int, cap.split(".")))
    if backend == "fa3":  # sm_90a for every kind; sm_80/sm_86 SASS (8.x) for MHA only
        return c == Capability(9, 0) or (kind in ("mha", "vision") and c.major == 8)
    if backend == "fa4":
        cute = {Capability(*t) for t in ((8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (10, 7), (11, 0),
                                         (12, 0), (12, 1))}
        if kind == "mla":
            return c in cute and c.major in (10, 11)
        return c in cute and (kind == "vision" or c.major != 8)
    if backend == "flashinfer":
        return c >= Capability(7, 5)
    if backend in ("triton", "triton_attn"):
        return c >= Capability(7, 0)
    assert backend in ("sdpa", "torch_native"), backend
    return True


def upstream_deterministic(cap, deepseek):
    major = int(cap.split(".")[0])
    if major in (10, 12):  # is_sm100 or is_sm120 (CUDA 13.0 >= 12.8)
        return "triton" if deepseek else "flashinfer"
    return "fa3"


@pytest.mark.parametrize("cap", EXACT)
@pytest.mark.parametrize("kind,deepseek", [("mha", False), ("mla", True), ("mla", False)])
def test_deterministic_on_exact_tiers_is_upstreams_where_it_runs(cap, kind, deepseek):
    d = deterministic.default_backend(resolve(cap), DETERMINISTIC, kind, deepseek)
    upstream = upstream_deterministic(cap, deepseek)
    assert d.upstream == upstream
    if runs(upstream, cap, kind):
        assert d.backend == upstream and d.dropped == ()
    else:  # D16: the next deterministic backend with a build here
        assert d.backend == ("triton" if deepseek or not runs("flashinfer", cap) else "flashinfer")
        assert d.dropped[0][0] == upstream


def test_deterministic_d16_cases_named_in_the_docs():
    # 13.0: upstream names fa3 (neither is_sm100 nor is_sm120); the registry asks 12.1's rule
    d = deterministic.default_backend(resolve("13.0"), DETERMINISTIC, "mha", False)
    assert (d.backend, d.upstream, d.dropped) == ("flashinfer", "flashinfer", ())
    assert upstream_deterministic("13.0", False) == "fa3" and not runs("fa3", "13.0")
    assert deterministic.default_backend(resolve("11.0"), DETERMINISTIC, "mha", False).backend == "flashinfer"
    assert deterministic.default_backend(resolve("7.5"), DETERMINISTIC, "mha", False).backend == "flashinfer"
    assert deterministic.default_backend(resolve("7.0"), DETERMINISTIC, "mha", False).backend == "triton"
    assert deterministic.default_backend(resolve("8.0"), DETERMINISTIC, "mla", True).backend == "triton"
    # a CUDA too old for FA3 on Hopper (12.3): the next one
    assert deterministic.default_backend(resolve("9.0"), DETERMINISTIC, "mha", False, (12, 2)).backend == "flashinfer"


def test_deterministic_takes_only_sglangs_deterministic_backends():
    d = deterministic.default_backend(resolve("7.5"), ("fa3", "triton"), "mha", False)
    assert d.backend == "triton"
    assert ("flashinfer", "not among SGLang's deterministic backends") in d.dropped


def test_no_deterministic_backend_below_sm70_is_said_not_guessed():
    d = deterministic.default_backend(resolve("6.1"), DETERMINISTIC, "mha", False)
    assert d.backend is None and "no deterministic attention backend runs MHA on 6.1" in d.reason


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, kind=st.sampled_from(["mha", "mla"]), deepseek=st.booleans())
def test_deterministic_backend_always_runs_on_the_device(cap, kind, deepseek):
    d = deterministic.default_backend(resolve(cap), DETERMINISTIC, kind, deepseek)
    if d.backend is None:
        assert not runs("triton", cap)
    else:
        assert runs(d.backend, cap, kind) and d.backend in DETERMINISTIC
        assert not (deepseek and d.backend == "flashinfer" and d.upstream != "flashinfer")


def upstream_vision(cap):
    return {9: "fa3", 10: "fa4"}.get(int(cap.split(".")[0]), "triton_attn")


@pytest.mark.parametrize("cap", EXACT)
def test_vision_on_exact_tiers_is_upstreams(cap):
    d = vision.backend(resolve(cap))
    assert runs(upstream_vision(cap), cap, "vision")  # every exact tier: upstream's pick has a build
    assert (d.backend, d.dropped) == (upstream_vision(cap), ())


def test_vision_off_the_table_and_a_models_own_backend():
    assert vision.backend(resolve("9.5")).backend == "triton_attn"  # fa3 is sm_90a only
    assert vision.backend(resolve("10.5")).backend == "triton_attn"  # FA4's CuTe targets: 10.0 10.3 10.7
    assert vision.backend(resolve("6.1")).backend == "sdpa"  # Triton needs SM70
    assert vision.backend(resolve("9.0"), "sdpa").backend == "sdpa"  # the model's choice, where it runs
    d = vision.backend(resolve("10.0"), "fa3")  # upstream: "fa3 is not supported on Blackwell" (D17)
    assert d.backend == "fa4" and d.dropped[0][0] == "fa3"
    assert vision.backend(resolve("9.0"), "flashinfer_cudnn").backend == "flashinfer_cudnn"  # not judged


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, passed=st.sampled_from([None, "fa3", "fa4", "triton_attn", "sdpa"]))
def test_vision_backend_always_runs_on_the_device(cap, passed):
    d = vision.backend(resolve(cap), passed)
    assert runs(d.backend, cap, "vision")
    if passed is not None and runs(passed, cap, "vision"):
        assert d.backend == passed


@pytest.mark.parametrize("cap", EXACT)
def test_hybrid_linear_draft_on_exact_tiers(cap):
    upstream = "triton" if int(cap.split(".")[0]) in (10, 11, 12) else "fa3"  # is_blackwell
    d = speculative.hybrid_linear_draft_backend(resolve(cap))
    assert d.backend == (upstream if runs(upstream, cap) else "triton")  # 7.x: D16


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, phase=st.sampled_from(["prefill", "decode"]))
def test_hybrid_linear_draft_always_runs_on_the_device(cap, phase):
    d = speculative.hybrid_linear_draft_backend(resolve(cap), phase)
    if d.backend is None:
        assert not runs("triton", cap) and not runs("fa3", cap)
    else:
        assert runs(d.backend, cap)


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, kind=st.sampled_from(["mha", "mla"]),
       name=st.sampled_from(["fa3", "fa4", "flashinfer", "triton", "trtllm_mha", "trtllm_mla", "flashmla",
                             "cutedsl_mla", "torch_native", "aiter", "dsa"]),
       phase=st.sampled_from(["prefill", "decode"]))
def test_the_build_guard_replaces_only_what_cannot_run_and_with_what_can(cap, kind, name, phase):
    res = resolve(cap)
    traits = ModelTraits(kind=kind)
    swap = attention.replacement(res, name, (phase,), traits)
    check = attention.check_backend(res, name, kind, phase)
    if check.valid is not False:  # runs here, or not in the catalog (aiter, dsa): not judged
        assert swap is None
    else:
        assert swap is not None and swap.backend != name
        assert attention.check_backend(res, swap.backend, kind, phase).valid is True
        assert swap.backend == attention.default_backend(res, traits).prefill


def test_build_guard_keeps_fa3_on_hopper_and_replaces_it_on_13():
    assert attention.replacement(resolve("9.0"), "fa3", ("prefill", "decode"), ModelTraits()) is None
    swap = attention.replacement(resolve("13.0"), "fa3", ("prefill",), ModelTraits())
    assert swap.backend == "flashinfer"
    assert "fa3_sm90 has no build for 13.0 (builds: sm_90a)" in swap.reason


# The speculative draft factory's backend map (speculative/draft_utils.py, 0.5.23, decode).
DRAFT_MAP = ("flashinfer", "triton", "intel_amx", "intel_xpu", "aiter", "fa3", "hybrid_linear_attn", "flashmla",
             "trtllm_mha", "trtllm_mla", "cutedsl_mla", "dsa", "nsa", "ascend", "fa4", "dsv4")


@pytest.mark.parametrize("cap, name, kind, want", [
    ("9.0", "fa3", "mha", None),  # runs: kept
    ("13.0", "fa3", "mha", "flashinfer"),  # the registry's default, which the factory builds
    ("7.0", "flashinfer", "mha", "triton"),  # FlashInfer's JIT from 7.5; Triton from 7.0
    ("6.1", "flashinfer", "mha", "none"),  # the default torch_native has no draft backend; nothing else runs
    ("6.1", "triton", "mla", "none"),
])
def test_the_draft_guard_builds_a_draft_backend_that_runs_or_says_none_runs(cap, name, kind, want):
    res = resolve(cap)
    swap = attention.draft_replacement(res, name, "decode", ModelTraits(kind=kind), DRAFT_MAP)
    if want is None:
        assert swap is None
    elif want == "none":
        assert swap.backend is None
        assert f"no draft backend SGLang can build runs {kind.upper()} decode on {cap}" in swap.reason
        assert "torch_native (no draft backend of it)" in swap.reason
    else:
        assert swap.backend == want and want in DRAFT_MAP
        assert attention.check_backend(res, want, kind, "decode").valid is True


@given(capabilities, st.sampled_from(["mha", "mla"]), st.sampled_from(["flashinfer", "triton", "fa3", "fa4"]))
def test_the_draft_guard_never_builds_what_cannot_run_or_what_the_factory_lacks(device, kind, name):
    res = resolve(device)
    swap = attention.draft_replacement(res, name, "decode", ModelTraits(kind=kind), DRAFT_MAP)
    if swap is not None and swap.backend is not None:
        assert swap.backend in DRAFT_MAP
        assert attention.check_backend(res, swap.backend, kind, "decode").valid is True
    if swap is not None and swap.backend is None:  # only where no buildable draft backend runs at all
        assert not any(attention.check_backend(res, b, kind, "decode").valid for b in DRAFT_MAP
                       if attention.check_backend(res, b, kind, "decode").valid is not None)
