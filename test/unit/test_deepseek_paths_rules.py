"""DeepSeek-V4's Blackwell / Hopper kernel paths (``policies/deepseek.dsv4_kernel_paths``):
the rule over capabilities, the catalog's builds of the paths, the glue's one answer per
machine and ``scoped_fact`` over several facts of one decision."""

import sys
import types
from types import SimpleNamespace

import pytest
from sglang_arch.arch import catalog, resolve, runtime
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import deepseek
from sglang_arch.arch.table import ARCHITECTURES
from sglang_arch.integrations.sglang import hooks
from unit.sglang_probes import upstream_fact

EXACT = sorted(ARCHITECTURES)
CUDAS = ((12, 2), (12, 4), (12, 8), (12, 9), (13, 0))


@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_on_every_exact_tier_the_paths_are_sglangs_facts(tier, cuda):
    res = resolve(tier)
    paths = deepseek.dsv4_kernel_paths(res, cuda)
    assert paths.blackwell is upstream_fact("is_blackwell", res.requested, cuda), paths.reason
    assert paths.hopper is upstream_fact("is_sm90", res.requested, cuda), paths.reason


@pytest.mark.parametrize("cap,blackwell", [("10.5", True), ("11.5", True), ("12.3", True), ("13.0", True),
                                           ("9.5", False), ("6.1", False)])
def test_on_unknown_gpus_the_nearest_tier_decides(cap, blackwell):
    res = resolve(cap)
    assert res.match != "exact"
    paths = deepseek.dsv4_kernel_paths(res, (13, 0))
    assert paths.blackwell is blackwell, paths.reason
    assert paths.hopper is (cap == "9.5"), paths.reason
    assert f"tier {res.resolved}" in paths.reason


def test_13_0_takes_12_1s_blackwell_paths_where_sglangs_majors_rule_does_not():
    res = resolve("13.0")
    assert not upstream_fact("is_blackwell", res.requested, (13, 0))
    assert deepseek.dsv4_kernel_paths(res, (13, 0)).blackwell


@pytest.mark.parametrize("cap,runs", [("7.0", False), ("8.0", False), ("8.6", False), ("8.9", True), ("9.0", True),
                                      ("10.0", True), ("12.1", True), ("13.0", True)])
def test_the_blackwell_paths_need_tritons_fp8_and_the_hopper_paths_triton(cap, runs):
    """The Blackwell paths' MXFP8 epilogues cast to float8e4nv (Triton: capability 8.9 on)."""
    device = Capability(*map(int, cap.split(".")))
    assert catalog.choice_runs("dsv4_paths", "blackwell", device, (13, 0)).runs is runs
    assert catalog.choice_runs("dsv4_paths", "hopper", device, (13, 0)).runs


def test_a_path_without_a_build_for_the_device_is_not_taken(monkeypatch):
    """The catalog filter, on a device whose tier takes the path but which cannot build it."""
    res = resolve("10.0")
    monkeypatch.setattr(catalog, "choice_runs", lambda *a, **k: catalog.Verdict(False, "no build", "x"))
    paths = deepseek.dsv4_kernel_paths(res, (13, 0))
    assert not paths.blackwell and "no build" in paths.reason


# --- the glue: one decision per machine, SGLang's facts off CUDA --------------------------------

@pytest.fixture
def machine(monkeypatch):
    from sglang_arch.integrations.sglang import glue
    from sglang_arch.integrations.sglang.glue import moe

    monkeypatch.setattr(moe, "_cuda_platform", lambda: True)
    monkeypatch.setattr(glue, "platform_overrides", lambda: {})
    moe._dsv4_paths.clear()

    def use(cap, cuda=(13, 0)):
        ctx = SimpleNamespace(resolution=None) if cap is None else runtime.machine(capability=cap, cuda=cuda)
        monkeypatch.setattr(glue, "current", lambda: ctx)
        return ctx

    return use


@pytest.mark.parametrize("cap,answer", [("9.0", (False, True)), ("10.0", (True, False)), ("13.0", (True, False)),
                                        ("8.9", (False, False))])
def test_glue_answers_both_facts_from_one_decision(machine, cap, answer):
    from sglang_arch.integrations.sglang.glue import moe

    machine(cap)
    assert moe.dsv4_kernel_paths() == answer
    assert (moe.dsv4_blackwell_path(), moe.dsv4_hopper_path()) == answer


def test_glue_decides_once_per_machine(machine, monkeypatch):
    from sglang_arch.integrations.sglang.glue import moe

    machine("10.0")
    calls = []
    decide = deepseek.dsv4_kernel_paths
    monkeypatch.setattr(deepseek, "dsv4_kernel_paths", lambda *a: calls.append(1) or decide(*a))
    for _ in range(3):
        moe.dsv4_kernel_paths()
    assert len(calls) == 1
    machine("9.0")  # another machine context: decided again
    assert moe.dsv4_kernel_paths() == (False, True)


def test_glue_without_an_nvidia_gpu_or_off_cuda_leaves_sglangs_facts(machine, monkeypatch):
    from sglang_arch.integrations.sglang.glue import moe

    machine(None)
    assert moe.dsv4_kernel_paths() is None and moe.dsv4_blackwell_path() is None
    machine("10.0")
    monkeypatch.setattr(moe, "_cuda_platform", lambda: False)
    assert moe.dsv4_kernel_paths() is None and moe.dsv4_hopper_path() is None


# --- scoped_fact over several facts -----------------------------------------------------------

class _Platform:
    is_blackwell = False
    is_sm90 = True
    is_sm100 = False


def test_scoped_fact_answers_the_facts_of_one_decision_and_puts_the_getter_back(monkeypatch):
    user = types.ModuleType("h24_facts_user")
    platform = _Platform()
    user.get_platform = lambda: platform
    exec("def paths():\n    p = get_platform()\n    return p.is_blackwell, p.is_sm90, p.is_sm100\n", user.__dict__)
    monkeypatch.setitem(sys.modules, "h24_facts_user", user)
    own = user.get_platform
    answers = [(True, False)]
    hook = hooks.scoped_fact(lambda: answers[0], ("is_blackwell", "is_sm90"))
    assert hook(user.paths) == (True, False, False)  # both answered; is_sm100 stays SGLang's
    assert user.get_platform is own
    user.used = []
    exec("def record():\n    used.append(get_platform)\n", user.__dict__)
    hook(user.record)
    hook(user.record)
    assert user.used[0] is user.used[1] is not own  # one getter per answer: nothing built per call
    answers[0] = (False, True)
    hook(user.record)
    assert user.used[2] is not user.used[0]
    answers[0] = None
    hook(user.record)
    assert user.used[3] is own  # None: SGLang's own
    assert user.get_platform is own


def test_scoped_fact_with_one_name_still_takes_a_bare_value(monkeypatch):
    user = types.ModuleType("h24_fact_user")
    user.get_platform = lambda: _Platform()
    exec("def read():\n    return get_platform().is_sm90\n", user.__dict__)
    monkeypatch.setitem(sys.modules, "h24_fact_user", user)
    assert hooks.scoped_fact(lambda: False, "is_sm90")(user.read) is False


# --- the DeepSeek family's router GEMM ------------------------------------------------------

@pytest.mark.parametrize("tier", EXACT)
def test_router_gemm_on_every_exact_tier_is_sglangs_sm90_floor(tier):
    res = resolve(tier)
    assert deepseek.tiny_router_gemm(res, (13, 0)).tiny is (res.requested.sm >= 90)


@pytest.mark.parametrize("cap,tiny", [("10.5", True), ("11.5", True), ("12.3", True), ("13.0", True),
                                      ("9.5", True), ("6.1", False)])
def test_router_gemm_on_unknown_gpus_follows_the_tier(cap, tiny):
    decision = deepseek.tiny_router_gemm(resolve(cap), (13, 0))
    assert decision.tiny is tiny, decision.reason


@pytest.mark.parametrize("cap,runs", [("7.5", False), ("8.0", True), ("13.0", True)])
def test_the_tiny_gemm_builds_wherever_cuda_cpp_with_bf16_does(cap, runs):
    assert catalog.choice_runs("tiny_router_gemm", "tiny", Capability(*map(int, cap.split("."))), (13, 0)).runs is runs


def test_router_gemm_glue_answers_minus_one_only_where_the_registry_keeps_cublas(machine):
    from sglang_arch.integrations.sglang.glue import moe

    moe._tiny_router.clear()
    machine("8.9")
    assert moe.tiny_router_gemm_off(num_experts=256, hidden_size=7168, weight_dtype=None) == -1
    machine("9.0")
    assert moe.tiny_router_gemm_off() is None  # SGLang's function goes on to its shape checks
    machine(None)
    assert moe.tiny_router_gemm_off() is None


# --- the fused QKV-A GEMM's auto backend ----------------------------------------------------


@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_fused_a_on_every_exact_tier_is_sglangs_import_time_pick(tier, cuda):
    res = resolve(tier)
    expected = "cutedsl" if upstream_fact("is_sm120", res.requested, cuda) else "jit"
    assert deepseek.fused_a_gemm_auto(res, cuda).backend == expected


@pytest.mark.parametrize("cap", ["12.3", "12.9", "13.0"])
def test_fused_a_where_cute_dsl_has_no_build_takes_the_jit_kernel(cap):
    decision = deepseek.fused_a_gemm_auto(resolve(cap), (13, 0))
    assert decision.backend == "jit" and "no build" in decision.reason


@pytest.mark.parametrize("cap,cutedsl", [("8.0", False), ("9.0", True), ("10.7", True), ("11.0", True), ("12.1", True),
                                         ("12.3", False)])
def test_fused_a_kernels_build_where_cute_dsl_and_nvcc_target_sm90_on(cap, cutedsl):
    device = Capability(*map(int, cap.split(".")))
    assert catalog.choice_runs("fused_a_gemm", "cutedsl", device, (13, 0)).runs is cutedsl
    assert catalog.choice_runs("fused_a_gemm", "jit", device, (13, 0)).runs is (device.sm >= 90)


def test_fused_a_glue_without_an_nvidia_gpu_leaves_sglangs_pick(machine):
    from sglang_arch.integrations.sglang.glue import moe

    machine(None)
    assert moe.fused_a_gemm_auto_backend() is None


# --- the series' ReplaceName edit and the spacing a deleted assignment leaves ----------------

FUSED_A = '''
from enum import Enum

from common import get_device_sm, is_sm120_supported


class Backend(str, Enum):
    AUTO = "auto"
    JIT = "jit"


_AUTO_BACKEND = (
    Backend.JIT if is_sm120_supported() else Backend.AUTO
)

_DEVICE_SM = get_device_sm()


def gemm(a, backend="auto"):
    if backend == Backend.AUTO:
        backend = _AUTO_BACKEND
    return a._AUTO_BACKEND, backend
'''


# --- DeepSeek's shared-expert fusion under NVFP4 + Marlin ---------------------------------------

@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_shared_experts_hold_on_every_exact_tier_is_sglangs_is_sm90(tier, cuda):
    res = resolve(tier)
    assert deepseek.shared_experts_hopper_marlin_hold(res, cuda).hold is upstream_fact("is_sm90", res.requested, cuda)


@pytest.mark.parametrize("cap,hold", [("9.5", True), ("10.5", False), ("13.0", False), ("6.1", False)])
def test_shared_experts_hold_on_unknown_gpus_follows_the_tier(cap, hold):
    assert deepseek.shared_experts_hopper_marlin_hold(resolve(cap), (13, 0)).hold is hold


def test_shared_experts_glue_answers_the_rule_and_leaves_sglangs_probe_without_a_gpu(machine):
    from sglang_arch.integrations.sglang.glue import moe

    machine("9.0")
    assert moe.shared_experts_hopper_marlin_hold() is True
    machine("10.0")
    assert moe.shared_experts_hopper_marlin_hold() is False
    machine(None)
    assert moe.shared_experts_hopper_marlin_hold() is None


# --- DeepSeek's NVFP4 shared expert: the fused GEMM + SwiGLU + quant -------------------------------


@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_swiglu_fusion_on_every_exact_tier_is_sglangs_is_sm100(tier, cuda):
    res = resolve(tier)
    assert deepseek.nvfp4_swiglu_fusion(res, cuda).fused is upstream_fact("is_sm100", res.requested, cuda)


@pytest.mark.parametrize("cap,fused", [("10.5", False), ("10.9", False), ("11.5", False), ("13.0", False)])
def test_swiglu_fusion_on_unknown_gpus_only_where_cute_dsl_builds_the_kernel(cap, fused):
    decision = deepseek.nvfp4_swiglu_fusion(resolve(cap), (13, 0))
    assert decision.fused is fused, decision.reason


def test_the_fused_kernel_builds_for_the_block_scaled_mma_archs():
    builds = {cap for cap in ("9.0", "10.0", "10.3", "10.5", "10.7", "11.0", "12.0", "12.1")
              if catalog.choice_runs("nvfp4_swiglu_fusion", "fused", Capability(*map(int, cap.split("."))),
                                     (13, 0)).runs}
    assert builds == {"10.0", "10.3", "10.7", "11.0"}


# --- explain ---------------------------------------------------------------------------------

@pytest.mark.parametrize("cap,paths,fused_a", [("9.0", "Hopper", "jit"), ("10.0", "Blackwell", "jit"),
                                               ("12.0", "Blackwell", "cutedsl"), ("12.3", "Blackwell", "jit"),
                                               ("8.0", "generic", "jit")])
def test_explain_shows_the_dsv4_paths_and_the_fused_a_gemm(cap, paths, fused_a):
    from sglang_arch.arch.decisions import explain

    decisions = explain(cap)
    rows = {label: (value, reason) for label, value, reason, _ in decisions.named()}
    assert rows["DeepSeek-V4 paths"][0] == paths
    assert rows["fused QKV-A GEMM auto"][0] == fused_a
    moe_gemm = decisions.to_dict()["moe_gemm"]
    assert moe_gemm["fused_a_gemm"]["auto"] == fused_a and moe_gemm["fused_a_gemm"]["reason"]
    assert (moe_gemm["dsv4_paths"]["blackwell"], moe_gemm["dsv4_paths"]["hopper"]) == (
        paths == "Blackwell", paths == "Hopper")


# --- DeepSeek-V4.1's index logits dtype ----------------------------------------------------------

@pytest.mark.parametrize("cap", EXACT + ["10.5", "11.5", "12.3", "13.0", "6.1"])
def test_index_logits_are_bf16_where_the_tier_is_sm100(cap):
    res = resolve(cap)
    decision = deepseek.dsv41_bf16_index_logits(res, (13, 0))
    assert decision.bf16 is (res.resolved.major == 10) is (res.requested.major == 10), decision.reason


