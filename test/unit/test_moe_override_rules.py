"""D20: the MoE pass's guard (glue/moe.py ``moe_runner_backend``) over a MoE runner or
FP8 / FP4 GEMM backend the arguments name, without SGLang: a value the user passed that
cannot run here is refused; the same value picked by a model override (not in the
user's raw input) is replaced by the registry's choice with one warning naming it."""

import logging
import sys
import types
from types import SimpleNamespace

import pytest
from sglang_arch.arch import catalog, parse_capability, runtime
from sglang_arch.integrations.sglang.glue import ArchDecisionError
from sglang_arch.integrations.sglang.glue import moe as glue_moe

_OVERRIDES = "sglang.srt.arg_groups.overrides"
NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4"}
FP8_BLOCK = {"quant_method": "fp8", "weight_block_size": [128, 128]}


@pytest.fixture
def guard(monkeypatch):
    """``run(cap, quant_config, user=..., **fields)``: (answer, declared) of the guard on
    ``cap`` for a MoE model whose arguments hold ``fields``; ``user``: the raw input."""
    declared = []
    fake = types.ModuleType(_OVERRIDES)
    fake.logger = logging.getLogger("test_moe_override_rules")
    fake.declare_resolution = lambda server_args, source, **fields: declared.append((source, fields))
    fake.validate_declarations = lambda server_args, decls: None
    monkeypatch.setitem(sys.modules, _OVERRIDES, fake)
    monkeypatch.setattr(glue_moe, "_cuda_platform", lambda: True)

    def run(cap, quant_config, user=None, **fields):
        ctx = runtime.machine(capability=cap, gpu_count=1, cuda=(13, 0))
        monkeypatch.setattr(glue_moe, "routed_context", lambda: ctx)
        hf = SimpleNamespace(architectures=["Qwen3MoeForCausalLM"], num_experts=8, quantization_config=quant_config)
        fake.model_config_of = lambda view: SimpleNamespace(hf_config=hf)
        args = dict(quantization=None, moe_runner_backend="auto", fp8_gemm_runner_backend="auto",
                    fp4_gemm_runner_backend="auto")
        args.update(fields)
        view = SimpleNamespace(_server_args=SimpleNamespace(_raw_input=dict(user or {})), **args)
        declared.clear()
        return glue_moe.moe_runner_backend(view), list(declared)

    return run


def _runs(decision, name, cap, kind=None):
    return catalog.choice_runs(decision, name, parse_capability(cap), (13, 0), kind).runs


@pytest.mark.parametrize("flag,field,decision,name", [
    ("--fp8-gemm-backend", "fp8_gemm_runner_backend", "fp8_gemm", "flashinfer_trtllm"),  # LongCat's pick on SM100
    ("--fp4-gemm-backend", "fp4_gemm_runner_backend", "fp4_gemm", "flashinfer_cutedsl"),
])
def test_a_gemm_backend_an_override_picked_is_replaced_by_auto_and_the_users_is_refused(
        guard, caplog, flag, field, decision, name):
    assert not _runs(decision, name, "12.0")  # no SM12x build: the case under test
    with caplog.at_level(logging.WARNING, logger="test_moe_override_rules"):
        answer, declared = guard("12.0", FP8_BLOCK, **{field: name})
    assert answer is None  # SGLang's own MoE pass still runs (its runner for these experts runs here)
    assert declared == [("_moe_runner_backend_quant_constraints", {field: "auto"})]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f" {name}, picked by a model override or an earlier pass, cannot run here" in warnings[0]
    with pytest.raises(ArchDecisionError) as e:
        guard("12.0", FP8_BLOCK, user={field: name}, **{field: name})
    assert str(e.value).startswith(f"{flag} {name}: ")


def test_a_gemm_backend_that_runs_is_kept_whoever_picked_it(guard):
    assert _runs("fp8_gemm", "flashinfer_trtllm", "10.0") and _runs("fp4_gemm", "marlin", "12.0")
    assert guard("10.0", FP8_BLOCK, fp8_gemm_runner_backend="flashinfer_trtllm") == (None, [])
    assert guard("12.0", NVFP4, fp4_gemm_runner_backend="marlin") == (None, [])  # Muse Glimmer's SM120 pick
    assert guard("12.0", NVFP4, user={"fp4_gemm_runner_backend": "marlin"}, fp4_gemm_runner_backend="marlin") == (
        None, [])


def test_a_moe_runner_an_override_picked_is_replaced_and_the_users_is_refused(guard, caplog):
    assert not _runs("moe_runner", "flashinfer_trtllm", "12.0", "nvfp4")
    with caplog.at_level(logging.WARNING, logger="test_moe_override_rules"):
        answer, declared = guard("12.0", NVFP4, moe_runner_backend="flashinfer_trtllm")
    assert answer == {"moe_runner_backend": "flashinfer_cutlass"} and declared == []
    assert _runs("moe_runner", answer["moe_runner_backend"], "12.0", "nvfp4")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("MoE runner flashinfer_trtllm, picked by a model override or an earlier pass")
    with pytest.raises(ArchDecisionError) as e:
        guard("12.0", NVFP4, user={"moe_runner_backend": "flashinfer_trtllm"}, moe_runner_backend="flashinfer_trtllm")
    assert str(e.value).startswith("--moe-runner-backend flashinfer_trtllm: ")


def test_both_replaced_in_one_answer(guard):
    answer, declared = guard("12.0", NVFP4, moe_runner_backend="flashinfer_trtllm",
                             fp4_gemm_runner_backend="flashinfer_cutedsl")
    assert answer == {"moe_runner_backend": "flashinfer_cutlass", "fp4_gemm_runner_backend": "auto"}
    assert declared == []  # the answer carries both: SGLang's pass does not run


def _ct(fmt, act_bits):
    weights = {"num_bits": 4, "type": "float"}
    return {"quant_method": "compressed-tensors", "format": fmt,
            "config_groups": {"group_0": {"format": fmt, "weights": weights,
                                          "input_activations": None if act_bits is None else {"num_bits": act_bits}}}}


def test_compressed_tensors_fp4_experts_get_the_kind_sglang_serves_them_with():
    # Command-A's llm-compressor NVFP4 (W4A4): CompressedTensorsW4A4Nvfp4MoE (trtllm-gen or CUTLASS)
    assert glue_moe.kind_of(None, _ct("nvfp4-pack-quantized", 4)) == ("nvfp4", False)
    # weight-only NVFP4 runs Marlin whatever the flag: not judged
    assert glue_moe.kind_of(None, _ct("nvfp4-pack-quantized", None)) == (None, False)
    # Kimi-K3's MXFP4 pack: Mxfp4MoEMethod, GPT-OSS's MXFP4 method
    assert glue_moe.kind_of(None, _ct("mxfp4-pack-quantized", None)) == ("mxfp4", False)
    assert glue_moe.kind_of(None, {"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"}) == (
        "mxfp4", False)
    # other compressed-tensors schemes (INT4 Kimi-K2, W8A8 FP8): SGLang decides
    assert glue_moe.kind_of(None, _ct("pack-quantized", None)) == (None, False)
    assert glue_moe.kind_of("compressed-tensors", _ct("float-quantized", 8)) == (None, True)


def test_fp8_checkpoints_with_mxfp4_experts_are_the_fp8_mxfp4_kind():
    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    assert glue_moe.kind_of(None, fp8) == ("fp8_block", False)
    assert glue_moe.kind_of(None, dict(fp8, routed_experts_quant_method="mxfp4")) == ("fp8_mxfp4", False)
    # SGLang's model config decides where it reads more than the config (DeepSeek-V4's probe, dequantization)
    assert glue_moe.kind_of(None, fp8, fp4_experts=True) == ("fp8_mxfp4", False)
    assert glue_moe.kind_of(None, dict(fp8, routed_experts_quant_method="mxfp4"), fp4_experts=False) == (
        "fp8_block", False)



@pytest.mark.parametrize("cap", ["13.0", "12.0", "10.5", "9.0"])
def test_compressed_tensors_experts_keep_sglangs_own_auto_pick(guard, cap):
    """Their schemes pick their own runner for auto (W4A4 NVFP4: trtllm-gen on Blackwell,
    else CUTLASS); the registry's auto rule models ModelOpt's method (marlin on 13.0 would
    be declared for a scheme that has no Marlin path), so auto is left to SGLang."""
    answer, declared = guard(cap, _ct("nvfp4-pack-quantized", 4))
    assert answer is None and declared == []
    # a ModelOpt NVFP4 checkpoint on the same GPU is still judged by the registry's auto rule
    modelopt, _ = guard(cap, NVFP4)
    assert modelopt is None or set(modelopt) == {"moe_runner_backend"}
