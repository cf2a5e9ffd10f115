"""The NVFP4 KV cache's dequantize and FlashInfer's FP4 / MXFP8 quantize backends
(``policies/quant.nvfp4_kv_dequant`` / ``flashinfer_quantize_backend``), without SGLang:
SGLang's rules over capabilities, the catalog's builds of the kernels, the glue's one answer
per machine, the series' edits of a value bound in a module-level ``try:``, and modelopt's
fake registration filed as metadata."""

from types import SimpleNamespace

import pytest
from sglang_arch.arch import catalog, resolve, runtime
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import quant
from sglang_arch.arch.table import ARCHITECTURES
from unit.sglang_probes import upstream_fact

EXACT = sorted(ARCHITECTURES)
CUDAS = ((12, 4), (12, 8), (12, 9), (13, 0))
UNKNOWN = ("10.5", "11.5", "12.3", "13.0")


def _cap(text):
    return Capability(*map(int, text.split(".")))


# --- the NVFP4 KV cache's dequantize -----------------------------------------------------------

@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_kv_dequant_on_every_exact_tier_is_sglangs_two_facts(tier, cuda):
    res = resolve(tier)
    decision = quant.nvfp4_kv_dequant(res, cuda)
    assert (decision.sm100, decision.sm120) == (upstream_fact("is_sm100", res.requested, cuda),
                                                upstream_fact("is_sm120", res.requested, cuda)), decision.reason


@pytest.mark.parametrize("cap", UNKNOWN)
def test_kv_dequant_on_unknown_gpus_takes_flashinfer_only_where_it_builds(cap):
    res = resolve(cap)
    decision = quant.nvfp4_kv_dequant(res, (13, 0))
    assert not catalog.choice_runs("nvfp4_kv_dequant", "flashinfer", res.requested, (13, 0)).runs
    assert not decision.flashinfer, decision.reason
    if cap != "11.5":  # 10.5 / 12.3 / 13.0: the tier's rule takes FlashInfer, which has no build there
        assert "no build" in decision.reason


@pytest.mark.parametrize("cap,runs", [("7.5", False), ("8.0", True), ("8.7", False), ("9.0", True), ("10.5", False),
                                      ("11.0", True), ("12.1", True), ("12.3", False)])
def test_flashinfers_dequantize_builds_where_its_check_accepts(cap, runs):
    assert catalog.choice_runs("nvfp4_kv_dequant", "flashinfer", _cap(cap), (13, 0)).runs is runs
    assert catalog.choice_runs("nvfp4_kv_dequant", "torch", _cap(cap), (13, 0)).runs


# --- FlashInfer's quantize backend -------------------------------------------------------------

@pytest.mark.parametrize("which", ["fp4", "mxfp8"])
@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_quantize_backend_on_every_exact_tier_is_sglangs_import_time_pick(which, tier, cuda):
    res = resolve(tier)
    expected = "cute-dsl" if upstream_fact("is_sm100", res.requested, cuda) else "cuda"
    got = quant.flashinfer_quantize_backend(res, which, cuda).backend
    # None: neither backend builds here and SGLang's own value (``expected``) stays
    assert got == expected or (got is None and not catalog.choice_runs(quant.QUANTIZE_DECISIONS[which], expected,
                                                                        res.requested, cuda).runs)


def test_quantize_backend_on_10_5_keeps_cute_dsl_off_where_cute_dsl_has_no_build():
    res = resolve("10.5")
    assert res.match != "exact" and upstream_fact("is_sm100", res.resolved, (13, 0))
    mxfp8 = quant.flashinfer_quantize_backend(res, "mxfp8", (13, 0))
    assert mxfp8.backend == "cuda" and "no build" in mxfp8.reason  # FlashInfer's CUDA MXFP8 quantize builds
    fp4 = quant.flashinfer_quantize_backend(res, "fp4", (13, 0))
    assert fp4.backend is None and "picks none" in fp4.reason  # neither builds for 10.5 (no '105' module)


@pytest.mark.parametrize("cap", ["11.5", "12.3", "13.0"])
def test_quantize_backend_on_other_unknown_gpus_is_cuda_where_it_builds(cap):
    assert quant.flashinfer_quantize_backend(resolve(cap), "mxfp8", (13, 0)).backend == "cuda"
    assert quant.flashinfer_quantize_backend(resolve(cap), "fp4", (13, 0)).backend is None  # no FP4 build there


@pytest.mark.parametrize("which", ["fp4", "mxfp8"])
@pytest.mark.parametrize("cap", ["7.0", "8.0", "9.0", "9.5", "10.0", "10.5", "11.0", "11.5", "12.0", "12.3", "13.0",
                                 "15.2"])
def test_a_quantize_backend_the_registry_picks_always_builds_on_the_device(which, cap):
    res = resolve(cap)
    decision = quant.flashinfer_quantize_backend(res, which, (13, 0))
    if decision.backend is not None:
        verdict = catalog.choice_runs(quant.QUANTIZE_DECISIONS[which], decision.backend, res.requested, (13, 0))
        assert verdict is None or verdict.runs, decision.reason


@pytest.mark.parametrize("cap,cute,fp4_cuda", [("9.0", False, True), ("10.0", True, True), ("10.5", False, False),
                                               ("10.7", True, True), ("12.1", True, True), ("12.3", False, False)])
def test_quantize_kernels_build_where_cute_dsl_and_flashinfers_modules_do(cap, cute, fp4_cuda):
    device = _cap(cap)
    assert catalog.choice_runs("flashinfer_fp4_quantize", "cute-dsl", device, (13, 0)).runs is cute
    assert catalog.choice_runs("flashinfer_fp4_quantize", "cuda", device, (13, 0)).runs is fp4_cuda
    assert catalog.choice_runs("flashinfer_mxfp8_quantize", "cuda", device, (13, 0)).runs


def test_an_unknown_quantize_is_refused():
    with pytest.raises(ValueError):
        quant.flashinfer_quantize_backend(resolve("10.0"), "nvfp8")


# --- the glue ----------------------------------------------------------------------------------

@pytest.fixture
def machine(monkeypatch):
    from sglang_arch.integrations.sglang import glue
    from sglang_arch.integrations.sglang.glue import moe

    monkeypatch.setattr(moe, "_cuda_platform", lambda: True)
    monkeypatch.setattr(glue, "platform_overrides", lambda: {})
    moe._kv_dequant.clear()
    moe._quantize_backend.clear()

    def use(cap, cuda=(13, 0)):
        ctx = SimpleNamespace(resolution=None) if cap is None else runtime.machine(capability=cap, cuda=cuda)
        monkeypatch.setattr(glue, "current", lambda: ctx)
        return ctx

    yield use
    moe._kv_dequant.clear()
    moe._quantize_backend.clear()


@pytest.mark.parametrize("cap,facts,backend", [("9.0", (False, False), "cuda"), ("10.0", (True, False), "cute-dsl"),
                                               ("12.0", (False, True), "cuda"), ("12.3", (False, False), None)])
def test_glue_answers_the_registrys_decisions(machine, cap, facts, backend):
    from sglang_arch.integrations.sglang.glue import moe

    machine(cap)
    assert moe.nvfp4_kv_dequant() == facts
    # on 12.3 FlashInfer's FP4 quantize has no build: no pick, SGLang's own value stays
    assert moe.fp4_quantize_backend() == backend and moe.mxfp8_quantize_backend() == (backend or "cuda")


def test_glue_without_an_nvidia_gpu_leaves_sglangs_pick(machine):
    from sglang_arch.integrations.sglang.glue import moe

    machine(None)
    assert moe.nvfp4_kv_dequant() is None
    assert moe.fp4_quantize_backend() is None and moe.mxfp8_quantize_backend() is None


def test_refresh_sets_the_value_fp4_quantizes_custom_op_reads(machine):
    from sglang_arch.integrations.sglang.glue import moe

    machine("12.0")
    module = SimpleNamespace(_flashinfer_fp4_quantize_backend="cute-dsl")
    moe.refresh_fp4_quantize_backend(module)
    assert module._flashinfer_fp4_quantize_backend == "cuda"
    machine(None)
    moe.refresh_fp4_quantize_backend(module)  # None: SGLang's value stays
    assert module._flashinfer_fp4_quantize_backend == "cuda"


# --- the series: a function and a value in a module-level try: ---------------------------------

FP4_UTILS = '''
from common import get_platform

fp4_quantize = None
try:
    from lib import fp4_quantize as _quantize

    _backend = "cute-dsl" if get_platform().is_sm100 else "cuda"

    def _impl(input):
        return _quantize(input, backend=_backend)

    fp4_quantize = _impl
except ImportError:
    fp4_quantize = None
'''


# --- the audit: modelopt's fake registration is metadata ---------------------------------------

def test_modelopts_fake_registration_is_filed_as_metadata():
    from sglang_arch.audit import classify

    line = "if is_cuda() and (not get_platform().is_sm120) and (fp4_quantize is not None):"
    site = SimpleNamespace(file="srt/layers/quantization/modelopt_quant.py", scope="", code=line)
    assert "torch.compile metadata" in classify.metadata_reason(site)
    assert classify.metadata_reason(SimpleNamespace(file="srt/other.py", scope="", code=line)) is None


# --- explain -----------------------------------------------------------------------------------

@pytest.mark.parametrize("cap,dequant,fp4,mxfp8", [("10.0", "flashinfer", "cute-dsl", "cute-dsl"),
                                                   ("9.0", "SGLang's fallback", "cuda", "cuda"),
                                                   ("10.5", "SGLang's fallback", "SGLang's own", "cuda")])
def test_explain_shows_the_dequantize_and_the_quantize_backends(cap, dequant, fp4, mxfp8):
    from sglang_arch.arch.decisions import explain

    decisions = explain(cap)
    rows = {label: value for label, value, _reason, _ in decisions.named()}
    assert rows["NVFP4 KV dequantize"] == dequant
    assert (rows["FlashInfer FP4 quantize"], rows["FlashInfer MXFP8 quantize"]) == (fp4, mxfp8)
    moe_gemm = decisions.to_dict()["moe_gemm"]
    assert moe_gemm["kv_dequant"]["flashinfer"] is (dequant == "flashinfer")
    shown = {k: v["backend"] or "SGLang's own" for k, v in moe_gemm["quantize_backends"].items()}
    assert shown == {"fp4": fp4, "mxfp8": mxfp8}
