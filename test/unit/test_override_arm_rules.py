"""MiniCPM's sparse backend (arch/policies/minicpm.py) and MiniMax-M3.1 NVFP4's arm
(arch/policies/minimax_m3.py), the guards' MiniCPM rule (glue/attention.py) and the catalog's
``with`` uses.

Expected values are written here from their sources, not imported from the registry:
SGLang 0.5.23 ``model_overrides/minicpm.py:57-62`` (``minicpm_flashinfer`` where
``is_blackwell``: majors 10-12 with CUDA >= 12.8, else ``minicpm_flashattn``);
``layers/attention/minicpm/backend.py`` (FlashAttention 4 on Blackwell, else 3; the fused
TileLang top-k for ``minicpm_flashinfer`` on Blackwell or with SGLANG_MINICPM_FUSE_TOPK,
else sgl-kernel's ``infllm_ops``, whose SASS is sm_80 sm_90 sm_120a); FA3's builds (sm_80
sm_86 sm_90a), FA4's paged builds (CuTe DSL 9.0 10.0 10.3 10.7 11.0 12.0 12.1), MegaMoE's
(DeepGEMM, 10.0 and 10.3), trtllm-gen FMHA's (sm_100f sm_103a sm_107a).
"""

import pytest
from hypothesis import given
from sglang_arch.arch import catalog, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import minicpm, minimax_m3
from sglang_arch.arch.runtime import machine
from sglang_arch.integrations.sglang.glue import attention as ga

from .strategies import capabilities, cuda_versions

TIERS = ("7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1")
FA4 = {(9, 0), (10, 0), (10, 3), (10, 7), (11, 0), (12, 0), (12, 1)}


def blackwell(cap, cuda):
    return cap.major in (10, 11, 12) and cuda >= (12, 8)


def minicpm_runs(cap, cuda, backend, fuse_topk=False):
    bw = blackwell(cap, cuda)
    # FA3: sm_80 / sm_86 SASS (every 8.x), sm_90a (9.0, CUDA >= 12.3); FA4: CuTe DSL's exact targets
    fa = cap.as_tuple() in FA4 if bw else (cap.major == 8 or (cap.as_tuple() == (9, 0) and cuda >= (12, 3)))
    fused = fuse_topk or (bw and backend == minicpm.FLASHINFER)
    # TileLang from 8.0; infllm_ops: sm_80 (8.x), sm_90 (9.x), sm_120a (12.0)
    topk = cap >= Capability(8, 0) if fused else (cap.major in (8, 9) or cap.as_tuple() == (12, 0))
    sparse = cap >= Capability(7, 5) if backend == minicpm.FLASHINFER else True
    return fa and topk and sparse


@given(capabilities, cuda_versions)
def test_the_minicpm_pick_is_upstreams_preference_filtered_by_the_devices_builds(cap, cuda):
    res = resolve(cap)
    d = minicpm.sparse_backend(res, cuda)
    preferred = minicpm.FLASHINFER if res.resolved.major in (10, 11, 12) and cuda >= (12, 8) else minicpm.FLASHATTN
    other = minicpm.FLASHATTN if preferred == minicpm.FLASHINFER else minicpm.FLASHINFER
    assert d.preferred == preferred
    if minicpm_runs(cap, cuda, preferred):
        assert d.backend == preferred, (cap, cuda, d)
    elif minicpm_runs(cap, cuda, other):
        assert d.backend == other, (cap, cuda, d)
    else:
        assert d.backend is None, (cap, cuda, d)


@pytest.mark.parametrize("tier", TIERS)
def test_on_every_exact_tier_the_minicpm_pick_is_upstreams(tier):
    """No D-entry: upstream's pick runs on every exact tier where any MiniCPM sparse backend
    runs; on 7.x none does and SGLang's pick stays."""
    res = resolve(tier)
    assert res.match == "exact"
    d = minicpm.sparse_backend(res, (13, 0))
    upstream = minicpm.FLASHINFER if blackwell(res.requested, (13, 0)) else minicpm.FLASHATTN
    assert d.backend == (None if res.requested.major == 7 else upstream), (tier, d)


@pytest.mark.parametrize("cap", ["10.5", "11.5", "12.3", "13.0"])
def test_on_unknown_capabilities_no_minicpm_backend_runs_and_sglang_decides(cap):
    d = minicpm.sparse_backend(resolve(cap), (13, 0))
    assert d.backend is None and "no MiniCPM sparse backend runs here" in d.reason


def test_the_fused_topk_lets_minicpm_flashattn_run_on_sm100():
    res = resolve("10.0")
    assert minicpm.check(res, minicpm.FLASHATTN).runs is False
    assert "infllm_v2 has no build for 10.0" in minicpm.check(res, minicpm.FLASHATTN).reason
    assert minicpm.check(res, minicpm.FLASHATTN, fuse_topk=True).runs is True
    assert minicpm.check(res, "fa3").runs is None  # not a MiniCPM backend: not judged here


def test_a_minicpm_backend_is_replaced_only_by_the_other():
    assert minicpm.replacement(resolve("10.0"), minicpm.FLASHATTN)[0] == minicpm.FLASHINFER
    assert minicpm.replacement(resolve("9.0"), minicpm.FLASHINFER) is None  # runs there
    assert minicpm.replacement(resolve("13.0"), minicpm.FLASHATTN) is None  # neither runs: SGLang's
    assert minicpm.replacement(resolve("7.5"), minicpm.FLASHINFER) is None


def _ctx(cap):
    return machine(capability=cap, cuda=(13, 0))


def test_the_guards_swap_minicpm_for_minicpm_and_never_for_a_general_backend(monkeypatch):
    monkeypatch.setattr(ga, "_fuse_topk", lambda: False)
    monkeypatch.setattr(ga, "_force_dense", lambda: True)  # the override maps it to a dense backend
    assert ga._replacement(_ctx("10.0"), object(), minicpm.FLASHATTN, ("prefill",), None) is None
    monkeypatch.setattr(ga, "_force_dense", lambda: False)
    swap = ga._replacement(_ctx("10.0"), object(), minicpm.FLASHATTN, ("prefill", "decode"), None)
    assert swap.backend == minicpm.FLASHINFER and "infllm_v2" in swap.reason
    assert ga._replacement(_ctx("12.0"), object(), minicpm.FLASHATTN, ("prefill",), None) is None
    assert ga._replacement(_ctx("13.0"), object(), minicpm.FLASHATTN, ("prefill",), None) is None


def test_a_user_passed_minicpm_backend_that_cannot_run_is_refused(monkeypatch):
    monkeypatch.setattr(ga, "_fuse_topk", lambda: False)
    monkeypatch.setattr(ga, "_force_dense", lambda: True)  # mapped to fa4, which runs: not refused
    ga._check_minicpm_backend(_ctx("10.0"), "--attention-backend", minicpm.FLASHATTN)
    monkeypatch.setattr(ga, "_force_dense", lambda: False)
    with pytest.raises(ga.ArchDecisionError, match="infllm_v2 has no build for 10.0.*valid here: minicpm_flashinfer"):
        ga._check_minicpm_backend(_ctx("10.0"), "--attention-backend", minicpm.FLASHATTN)
    ga._check_minicpm_backend(_ctx("9.0"), "--attention-backend", minicpm.FLASHATTN)  # runs: nothing raised
    monkeypatch.setattr(ga, "_fuse_topk", lambda: True)
    ga._check_minicpm_backend(_ctx("10.0"), "--attention-backend", minicpm.FLASHATTN)  # fused top-k: runs


@given(capabilities, cuda_versions)
def test_m3_nvfp4s_arm_is_the_one_the_devices_stack_is_built_for(cap, cuda):
    """The experts' method, the projections and the KV pool read the device's is_blackwell:
    the arm follows it on every capability (upstream's), whatever the tier."""
    d = minimax_m3.nvfp4_arm(resolve(cap), cuda)
    assert d.blackwell == blackwell(cap, cuda), (cap, cuda, d)


@pytest.mark.parametrize("tier, runs", [("9.0", True), ("10.0", True), ("10.3", True), ("10.7", False),
                                        ("11.0", False), ("12.0", False), ("12.1", False), ("8.9", True)])
def test_m3_nvfp4s_arm_says_where_its_kernels_have_no_build(tier, runs):
    d = minimax_m3.nvfp4_arm(resolve(tier), (13, 0))
    assert d.runs is runs, (tier, d)
    if not runs and d.blackwell:
        assert "megamoe" in d.reason and "SGLang's arm stays" in d.reason


def test_m3_nvfp4s_blackwell_arm_with_trtllm_routed_experts_runs_on_10_7():
    assert minimax_m3.nvfp4_arm(resolve("10.7"), (13, 0), trtllm_routed=True).runs


def test_a_use_runs_only_with_every_kernel_it_needs():
    cap = Capability(10, 0)
    v = catalog.choice_runs("minicpm_sparse", minicpm.FLASHINFER, cap, (13, 0), "fa4+fused_topk")
    assert v.runs and all(k in v.reason for k in ("fa4_cute", "tilelang", "flashinfer_fa2"))
    v = catalog.choice_runs("minicpm_sparse", minicpm.FLASHINFER, cap, (13, 0), "fa4+stage1")
    assert not v.runs and "infllm_v2 has no build for 10.0" in v.reason


def test_explain_shows_both_decisions():
    from sglang_arch.arch.decisions import explain

    d = explain("12.0")
    labels = {row[0]: row[1] for row in d.named()}
    assert labels["MiniCPM sparse"] == "minicpm_flashinfer"
    assert labels["M3.1 NVFP4 arm"] == "Blackwell (cannot run)"
    attention = d.to_dict()["attention"]
    assert attention["minicpm_sparse"]["backend"] == "minicpm_flashinfer"
    assert attention["minimax_m3_nvfp4"] == dict(attention["minimax_m3_nvfp4"], blackwell_arm=True, runs=False)
    assert {row[0]: row[1] for row in explain("13.0").named()}["MiniCPM sparse"] == "SGLang's (minicpm_flashinfer)"
