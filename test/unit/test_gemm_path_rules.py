"""Tuned GEMM / GEMV paths keyed to one architecture (``policies/gemm.py``): each rule over
every capability (the tier's rule as SGLang writes it on the table; elsewhere only where the
path's kernels build for the device), the catalog entries they read, the ``scoped`` form's
constant probes and ``ReplaceCall``'s ``any_args``."""

import pytest
from sglang_arch.arch import catalog, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import gemm
from sglang_arch.arch.table import ARCHITECTURES
from sglang_arch.integrations.sglang import hooks

EXACT = sorted(ARCHITECTURES)
UNKNOWN = ("6.1", "9.5", "10.5", "10.9", "11.5", "12.3", "13.0")
CUDA = (12, 9)
CUTE_DSL = {"8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"}


def _cap(text):
    return Capability(*map(int, text.split(".")))


# SGLang 0.5.23's own rules, for the device (the functions the paths are keyed in)
def upstream_k3(cap):  # cutedsl_bf16_gemm: get_device_sm() == 107
    return cap.sm == 107


def upstream_gemv_sm12x(cap):  # hopper_bf16_gemv._is_sm12x: get_jit_cuda_arch().major >= 12
    return cap.major >= 12


def upstream_router(cap):  # muse_spark_router_gemv_cutedsl._is_sm100_family: major == 10
    return cap.major == 10


def upstream_nemotron(cap):  # utils.common.is_sm120: capability == (12, 0)
    return cap.as_tuple() == (12, 0)


def upstream_sbo(cap, cuda=CUDA):  # single_batch_overlap: not is_blackwell()
    return not (cap.major in (10, 11, 12) and cuda >= (12, 8))


TORCH_CHECKS = {  # the torch reads SGLang writes inline, as each site compares the capability
    "qwen4_decode_fusion": lambda cap: cap.major == 10,
    "marlin_lora_b200_decode": lambda cap: cap.as_tuple() == (10, 0),
    "lora_cutedsl_wide_tiles": lambda cap: cap.as_tuple() < (10, 0),
    "muse_spark_gemm_ag": lambda cap: cap.as_tuple() == (10, 3),
    "muse_spark_finalize_ar": lambda cap: cap.major == 10,
}
KERNEL_PATHS = ("k3_front_splitk", "router_gemv", "qwen4_decode_fusion", "muse_spark_gemm_ag", "muse_spark_finalize_ar")


@pytest.mark.parametrize("cap", EXACT)
def test_on_every_exact_tier_each_path_is_sglangs(cap):
    c = _cap(cap)
    res = resolve(cap)
    assert res.match == "exact"
    paths = gemm.gemm_paths(res, CUDA)
    assert paths.k3_front_splitk.on is upstream_k3(c)
    assert paths.hopper_gemv_sm12x.on is upstream_gemv_sm12x(c)
    assert paths.router_gemv.on is upstream_router(c)
    assert paths.nemotron_prefill_overlap.on is upstream_nemotron(c)
    assert paths.sbo_deep_gemm_down_overlap.on is upstream_sbo(c)
    for name, check in TORCH_CHECKS.items():
        assert getattr(paths, name).on is check(c), (cap, name)
    for cuda in ((12, 4), (13, 0)):  # SGLang's is_blackwell asks for CUDA 12.8
        assert gemm.sbo_deep_gemm_down_overlap(res, cuda).on is upstream_sbo(c, cuda)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_outside_the_table_a_path_is_taken_only_where_its_kernels_build(cap):
    c = _cap(cap)
    res = resolve(cap)
    assert res.match != "exact"
    paths = gemm.gemm_paths(res, CUDA)
    for name in KERNEL_PATHS:
        if getattr(paths, name).on:
            assert catalog.choice_runs("gemm_path", name, c, CUDA).runs, (cap, name)
    # paths without a kernel of their own: the tier's rule
    tier = res.resolved
    assert paths.marlin_lora_b200_decode.on is TORCH_CHECKS["marlin_lora_b200_decode"](tier)
    assert paths.lora_cutedsl_wide_tiles.on is TORCH_CHECKS["lora_cutedsl_wide_tiles"](tier)
    if paths.sbo_deep_gemm_down_overlap.on:
        assert catalog.choice_runs("deep_gemm", "jit", c, CUDA).runs
    # no unknown GPU is SM 10.7 or 12.0: the tuned table and the measured schedule stay off
    assert not paths.k3_front_splitk.on and not paths.nemotron_prefill_overlap.on
    # the GEMV's window: the tier's major class, which is the device's own on every GPU
    assert paths.hopper_gemv_sm12x.on is upstream_gemv_sm12x(c)
    for path in vars(paths).values():
        assert str(res.resolved) in path.reason


def test_where_upstreams_rule_names_a_kernel_with_no_build_the_path_is_not_taken():
    # 10.5 / 10.9: major 10, but CuTe DSL compiles the router GEMV for no such arch
    for cap in ("10.5", "10.9"):
        c = _cap(cap)
        path = gemm.router_gemv(resolve(cap), CUDA)
        assert upstream_router(c) and not path.on
        assert "no build for" in path.reason
    # 13.0 resolves to 12.1 (Blackwell): DeepGEMM's signalled down GEMM, which upstream's
    # "not Blackwell" would take there, is not overlapped
    assert upstream_sbo(_cap("13.0")) and not gemm.sbo_deep_gemm_down_overlap(resolve("13.0"), CUDA).on
    # 9.5 resolves to 9.0 (not Blackwell), but DeepGEMM has no build for 9.5
    path = gemm.sbo_deep_gemm_down_overlap(resolve("9.5"), CUDA)
    assert not path.on and "no build for 9.5" in path.reason


def test_outside_the_table_the_torch_read_paths_take_the_tiers_rule_where_their_kernels_build():
    # 10.5 resolves to 10.3: the GEMM + all-gather's JIT kernel builds for it (multimem: SM90+),
    # CuTe DSL's finalize AR does not; upstream's exact 10.3 check says no, its major-10 check yes
    res = resolve("10.5")
    assert gemm.muse_spark_gemm_ag(res, CUDA).on and not TORCH_CHECKS["muse_spark_gemm_ag"](_cap("10.5"))
    path = gemm.muse_spark_finalize_ar(res, CUDA)
    assert not path.on and "no build for 10.5" in path.reason
    assert gemm.qwen4_decode_fusion(res, CUDA).on  # the fused kernel is JIT-compiled for the device
    # 11.5 resolves to 11.0, whose major is not 10: nothing of major 10 taken
    assert not any(p.on for p in (gemm.qwen4_decode_fusion(resolve("11.5"), CUDA),
                                  gemm.muse_spark_finalize_ar(resolve("11.5"), CUDA)))


def test_the_catalog_entries_of_the_paths():
    splitk = catalog.CATALOG["sglang_warp_splitk_bf16_gemm"]
    assert {str(t.capability) for t in splitk.targets} == {"10.0", "10.3", "10.7"}
    assert splitk.min_cuda == (12, 8)
    router = catalog.CATALOG["sglang_cutedsl_router_gemv"]
    assert {str(t.capability) for t in router.targets} == CUTE_DSL
    for cap in CUTE_DSL | set(UNKNOWN):
        runs = catalog.choice_runs("gemm_path", "router_gemv", _cap(cap), CUDA).runs
        assert runs is (cap in CUTE_DSL), cap
    # the split-K path needs both kernels (the TGV GEMM it sits beside, and the warp split-K)
    assert catalog.choice_runs("gemm_path", "k3_front_splitk", _cap("10.7"), CUDA).runs
    assert not catalog.choice_runs("gemm_path", "k3_front_splitk", _cap("10.7"), (12, 4)).runs
    assert not catalog.choice_runs("gemm_path", "k3_front_splitk", _cap("11.0"), CUDA).runs


def test_to_dict_names_every_path():
    d = gemm.gemm_paths(resolve("10.7"), CUDA).to_dict()
    assert set(d) == {"k3_front_splitk", "hopper_gemv_sm12x", "router_gemv", "nemotron_prefill_overlap",
                      "sbo_deep_gemm_down_overlap"} | set(TORCH_CHECKS)
    assert d["k3_front_splitk"]["on"] is True and "10.7" in d["k3_front_splitk"]["reason"]


def test_scoped_builds_one_constant_probe_per_value_and_restores_the_module():
    import sys
    import types

    module = types.ModuleType("scoped_probe_test")
    module.probe = lambda index: "device"

    def original(x):
        return module.probe(x)

    original.__module__ = module.__name__
    sys.modules[module.__name__] = module
    try:
        answers = iter([True, True, None])

        def ask():
            return next(answers)

        ask.__module__ = "glue"
        hook = hooks.scoped(ask, "probe")
        seen = []
        real = module.probe
        for _ in range(2):
            assert hook(original, 3) is True
            seen.append(module.probe)
        assert seen == [real, real]
        assert hook(original, 3) == "device"  # None: SGLang's own probe
        assert hooks._answering(True) is hooks._answering(True)
        assert hooks._answering(1) is not hooks._answering(True)
    finally:
        del sys.modules[module.__name__]


ROUTER = '''
@cache
def _is_sm100_family(device_index):
    return major(device_index) == 10


def eligible(x, w):
    return x.ok and _is_sm100_family(x.device.index)
'''


def test_scoped_capability_answers_the_modules_torch_for_the_call_only():
    import sys
    import types

    cuda = types.SimpleNamespace(get_device_capability=lambda device=None: (9, 0), current_stream=lambda: "s")
    fake_torch = types.SimpleNamespace(cuda=cuda, float32="f32")
    module = types.ModuleType("scoped_capability_test")
    module.torch = fake_torch

    def original(device=None):
        t = module.torch
        return t.cuda.get_device_capability(device), t.cuda.current_stream(), t.float32

    original.__module__ = module.__name__
    sys.modules[module.__name__] = module
    try:
        answers = iter([(10, 3), None])

        def ask():
            return next(answers)

        ask.__module__ = "glue"
        hook = hooks.scoped_capability(ask)
        assert hook(original, "cuda:1") == ((10, 3), "s", "f32")  # every other attribute torch's own
        assert module.torch is fake_torch
        assert hook(original) == ((9, 0), "s", "f32")  # None: torch's own read
        view = hooks._torch_answering(fake_torch, (10, 3))
        assert hooks._torch_answering(fake_torch, (10, 3)) is view  # built once per answer
        assert hooks._torch_answering(view, (12, 0)).cuda.get_device_capability() == (12, 0)  # nested
    finally:
        del sys.modules[module.__name__]


QWEN = '''
def prepare(mlp):
    if (
        mlp.tp != 4
        or torch.cuda.get_device_capability()[0] != 10
    ):
        return None
    cap = torch.cuda.get_device_capability(mlp.device)
    return torch.cuda.is_available() and cap
'''


def test_explain_shows_the_tuned_paths_taken_and_json_has_every_path():
    from sglang_arch.arch.decisions import explain

    d = explain("10.5", cuda=CUDA)
    rows = {label: (value, reason) for label, value, reason, _ in d.named()}
    value, reason = rows["tuned GEMM paths"]
    assert value == "qwen4_decode_fusion, muse_spark_gemm_ag"  # 10.5: no CuTe DSL router GEMV nor finalize AR
    assert "tier 10.3 (family)" in reason
    tuned = d.to_dict()["moe_gemm"]["tuned_paths"]
    assert set(tuned) == set(vars(d.gemm_paths)) and tuned["router_gemv"]["on"] is False
    none = {label: value for label, value, _, _ in explain("7.0", cuda=CUDA).named()}["tuned GEMM paths"]
    assert none == "sbo_deep_gemm_down_overlap, lora_cutedsl_wide_tiles"
