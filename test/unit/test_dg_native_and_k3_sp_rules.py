"""DSA's DeepGEMM-native MTP verify layout (``policies/dsa.dg_native_verify``) and Kimi K3's
SP collective band (``policies/collectives.k3_sp_collective``), as rules over capabilities.

Upstream's rules, written here from sglang 0.5.23: ``dsa_backend.py``
``_build_paged_mqa_schedule_2d_ctx_lens`` / ``_apply_cuda_graph_metadata`` take the native
``[B, next_n]`` schedule where ``get_platform().is_sm100`` (major 10, CUDA >= 12.8);
``k3_sp_collective._init_state`` enables the SP collective where ``get_device_sm()`` is 100
or 103.  Where the kernels have builds, written here from their sources, not imported from the
catalog: DeepGEMM's SM100 paged-MQA kernel is JIT-compiled for 10.0 and 10.3 (its 100f family
target, the builds D14 gives DeepGEMM); the SP collective's kernel is SGLang's JIT for the
device, multimem needing SM90 or newer.
"""

from hypothesis import given, settings
from sglang_arch.arch import resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import collectives, dsa

from .strategies import capabilities, known_capabilities

CUDA = (12, 9)
DG_SM100_BUILDS = {(10, 0), (10, 3)}


def dg_native_upstream(cap, cuda=CUDA):
    return cap.major == 10 and cuda >= (12, 8)


def k3_band_upstream(cap):
    return cap.major * 10 + cap.minor in (100, 103)


@settings(max_examples=200, deadline=None)
@given(cap=known_capabilities)
def test_on_exact_tiers_the_native_layout_is_upstreams_where_its_kernel_builds(cap):
    d = dsa.dg_native_verify(resolve(str(cap)), CUDA)
    builds = (cap.major, cap.minor) in DG_SM100_BUILDS
    assert d.native == (dg_native_upstream(cap) and builds)
    assert bool(d.dropped) == (dg_native_upstream(cap) and not builds)


def test_d22_10_7_keeps_the_per_token_layout():
    d = dsa.dg_native_verify(resolve("10.7"), CUDA)
    assert dg_native_upstream(Capability(10, 7)) and not d.native
    assert d.dropped and "deep_gemm_paged_mqa_sm100 has no build for 10.7" in d.reason


@settings(max_examples=300, deadline=None)
@given(cap=capabilities)
def test_the_native_layout_only_on_a_device_its_kernel_is_built_for(cap):
    res = resolve(str(cap))
    d = dsa.dg_native_verify(res, CUDA)
    assert d.native == (res.resolved.major == 10 and (cap.major, cap.minor) in DG_SM100_BUILDS)
    assert d.reason.startswith(f"tier {res.resolved} ({res.match})")


def test_before_cuda_12_8_no_native_layout():
    """upstream's is_sm100 needs CUDA 12.8: the tier rule asks it too."""
    assert not dsa.dg_native_verify(resolve("10.0"), (12, 6)).native
    assert dsa.dg_native_verify(resolve("10.0"), None).native  # an unknown CUDA is not judged


@settings(max_examples=200, deadline=None)
@given(cap=known_capabilities)
def test_on_exact_tiers_the_sp_collective_band_is_upstreams(cap):
    d = collectives.k3_sp_collective(resolve(str(cap)))
    assert d.allowed == k3_band_upstream(cap)
    assert d.band_sm == cap.major * 10 + cap.minor  # what SGLang's probe answers, and its message names


@settings(max_examples=300, deadline=None)
@given(cap=capabilities)
def test_elsewhere_the_tiers_band_where_the_collectives_kernel_builds(cap):
    res = resolve(str(cap))
    d = collectives.k3_sp_collective(res)
    runs = cap.major >= 9  # SGLang's JIT for the device; multimem needs SM90+
    assert d.allowed == (res.resolved.sm in (100, 103) and runs)
    own = cap.major * 10 + cap.minor
    if d.allowed:
        assert d.band_sm in (100, 103)
    else:  # outside the band: the device's own SM where that is outside it too, else 0
        assert d.band_sm == (own if own not in (100, 103) else 0)


def test_an_unknown_10_x_takes_10_3s_band():
    d = collectives.k3_sp_collective(resolve("10.5"))
    assert (d.allowed, d.band_sm) == (True, 103) and "tier 10.3 (family)" in d.reason
    assert not k3_band_upstream(Capability(10, 5))
