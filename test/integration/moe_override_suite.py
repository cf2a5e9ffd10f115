"""Child process of ``test_moe_override_guard.py``: SGLang 0.5.23's own argument
resolution for each model override that picks a MoE runner or a GEMM backend from an
identity probe (docs/differences.md D20), with and without the registry's guard.

One interpreter for every case (each SGLang import costs seconds): for every capability
and case, ``prepare_server_args`` + ``resolve_once`` run twice under SGLang's own
``override_platform`` (the simulated GPU's facts, as ``sglang-arch plan`` gives them):
once with SGLang's MoE pass (``_moe_runner_backend_quant_constraints``) as released, once
routed through the plugin's hook.  ``--narrow`` also resolves each case with a kernel
catalog in which the override's pick has no build for the device (the case the guard
exists for: the catalog of 0.5.23's kernels builds every one of these picks wherever its
probe fires).  Prints one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "models"

_TINY = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 8, "num_key_value_heads": 4,
         "num_hidden_layers": 2, "vocab_size": 1000, "head_dim": 32, "max_position_embeddings": 4096,
         "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16", "tie_word_embeddings": False}
_MODELOPT_NVFP4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                   "exclude_modules": ["lm_head"]}
_FP8_BLOCK = {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]}
# An FP8 checkpoint whose routed experts are MXFP4 (ModelConfig.is_fp4_experts reads this key).
_FP8_MXFP4_EXPERTS = dict(_FP8_BLOCK, routed_experts_quant_method="mxfp4")
# DeepSeek-V4.1's MXFP8-shaped FP8 (32-wide UE8M0 blocks: model_overrides/deepseek_v4.py:35-37).
_FP8_32_UE8M0 = dict(_FP8_BLOCK, weight_block_size=[32, 32], scale_fmt="ue8m0")


def _ct(fmt: str, act_bits):
    """A compressed-tensors quantization_config as llm-compressor writes it (one group)."""
    weights = {"num_bits": 4, "type": "float", "strategy": "tensor_group" if "nvfp4" in fmt else "group",
               "group_size": 16 if "nvfp4" in fmt else 32, "symmetric": True, "dynamic": False}
    acts = None if act_bits is None else dict(weights, num_bits=act_bits, dynamic="local")
    return {"quant_method": "compressed-tensors", "format": fmt, "ignore": ["lm_head"],
            "config_groups": {"group_0": {"targets": ["Linear"], "format": fmt, "weights": weights,
                                          "input_activations": acts}}}


def _fixture(name):
    return json.loads((FIXTURES / name / "config.json").read_text())


# The experts' kind each case's MoE runner serves, as SGLang 0.5.23 builds it (the kernel
# catalog's kinds): read from the quantization method each config reaches.
KINDS = {"glm4_moe": "unquantized", "gemma4_nvfp4": "nvfp4", "llama4_fp8": "fp8_block", "minimax_m2_nvfp4": "nvfp4",
         "cohere2_moe_ct_nvfp4": "nvfp4", "kimi_k3_ct_mxfp4": "mxfp4", "beam_nvfp4": "nvfp4",
         "gpt_oss_mxfp4": "mxfp4", "gpt_oss_bf16": "unquantized", "gpt_oss_bf16_driver_595": "unquantized",
         "deepseek_v3_fp8": "fp8_block", "longcat_fp8": "fp8_block", "muse_glimmer": "unquantized",
         "bailing_moe_v3_fp4_experts": "fp8_mxfp4", "deepseek_v4_fp4_experts": "fp8_mxfp4",
         "deepseek_v41_mxfp8": "fp8_mxfp4"}  # V4's experts are MXFP4 unless the checkpoint's probe says FP8
# The NVIDIA driver gpt_oss.py reads for its Blackwell arm (line 110), per case.
DRIVERS = {"gpt_oss_bf16_driver_595": (595, 0)}


def cases():
    """name -> (the site it exercises, config.json, extra server arguments)."""
    moe = dict(_TINY, moe_intermediate_size=128, num_experts_per_tok=2)
    _DSV4 = dict(moe, architectures=["DeepseekV4ForCausalLM"], model_type="deepseek_v4", n_routed_experts=8,
                 n_shared_experts=1, n_group=1, topk_group=1, num_key_value_heads=1, q_lora_rank=64,
                 qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, kv_lora_rank=64, o_lora_rank=64,
                 o_groups=2, index_n_heads=4, index_head_dim=32, compress_ratios=[0, 0], sliding_window=128)
    return {
        "glm4_moe": ("model_overrides/glm4_moe.py:19", dict(
            moe, architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe", n_routed_experts=8, n_shared_experts=1,
            first_k_dense_replace=0, partial_rotary_factor=0.5, n_group=1, topk_group=1, routed_scaling_factor=1.0,
            norm_topk_prob=True, use_qk_norm=True), ()),
        "gemma4_nvfp4": ("model_overrides/gemma4.py:45", dict(_fixture("gemma4-tiny"),
                                                              quantization_config=_MODELOPT_NVFP4), ()),
        "llama4_fp8": ("model_overrides/llama4.py:38", dict(_fixture("llama4-tiny"), quantization_config=_FP8_BLOCK),
                       ("--quantization", "fp8")),
        "minimax_m2_nvfp4": ("model_overrides/minimax_m2.py:24", dict(
            moe, architectures=["MiniMaxM2ForCausalLM"], model_type="minimax_m2", num_local_experts=8,
            rotary_dim=32, quantization_config=_MODELOPT_NVFP4), ()),
        "cohere2_moe_ct_nvfp4": ("model_overrides/cohere2_moe.py:36", dict(
            moe, architectures=["Cohere2MoeForCausalLM"], model_type="cohere2_moe", num_experts=8,
            quantization_config=_ct("nvfp4-pack-quantized", 4)), ()),
        "kimi_k3_ct_mxfp4": ("model_overrides/kimi_k3.py:182", {
            "architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
            "text_config": dict(moe, num_experts=8, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
                                kv_lora_rank=64, q_lora_rank=None,
                                quantization_config=_ct("mxfp4-pack-quantized", None))}, ()),
        "beam_nvfp4": ("model_overrides/beam.py:39", dict(_fixture("beam-tiny"), quantization_config=_MODELOPT_NVFP4),
                       ()),
        "gpt_oss_mxfp4": ("model_overrides/gpt_oss.py:65/70", _fixture("gpt-oss-mxfp4"), ()),
        "gpt_oss_bf16": ("model_overrides/gpt_oss.py:110 (driver < 595)", _fixture("gpt-oss-tiny"), ()),
        "gpt_oss_bf16_driver_595": ("model_overrides/gpt_oss.py:110", _fixture("gpt-oss-tiny"), ()),
        "muse_glimmer": ("model_overrides/muse_glimmer.py:18", {
            "architectures": ["MuseGlimmerForCausalLM"], "model_type": "muse_glimmer",
            "text_config": dict(_TINY, layer_types=["sliding_attention", "full_attention"], sliding_window=128,
                                hidden_activation="gelu_pytorch_tanh", layer_rope_theta=[1e6, 0],
                                rope_parameters={"rope_type": "default", "rope_theta": 1e6},
                                final_logit_softcapping=30.0, qk_scale_factor=1.0)}, ()),
        "deepseek_v3_fp8": ("overrides.py:771", _fixture("deepseek-v3-fp8"), ()),
        "bailing_moe_v3_fp4_experts": ("model_overrides/bailing_moe_v3.py:30", dict(
            moe, architectures=["BailingMoeV3ForCausalLM"], model_type="bailing_hybrid", num_experts=8,
            num_shared_experts=1, n_group=1, topk_group=1, first_k_dense_replace=0,
            quantization_config=_FP8_MXFP4_EXPERTS), ()),
        "deepseek_v4_fp4_experts": ("model_overrides/deepseek_v4.py:82-84", dict(
            _DSV4, quantization_config=_FP8_MXFP4_EXPERTS), ()),
        "deepseek_v41_mxfp8": ("model_overrides/deepseek_v4.py:33", dict(
            _DSV4, model_type="deepseek_v41", quantization_config=_FP8_32_UE8M0), ()),
        "longcat_fp8": ("overrides.py:771 (LongCat FP8 GEMM)", dict(
            moe, architectures=["LongcatFlashForCausalLM"], model_type="longcat_flash", n_routed_experts=8,
            quantization_config=_FP8_BLOCK), ()),
    }


def write_cases(root: Path, only=None):
    out = {}
    for name, (site, config, args) in cases().items():
        if only and name not in only:
            continue
        if config is None:
            continue
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.json").write_text(json.dumps(config))
        out[name] = (site, str(folder), list(args))
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--caps", required=True)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(HERE))
    from helpers import memoize_struct_fields, routed_target  # noqa: F401  (this checkout's plugin)

    memoize_struct_fields()

    import sglang.srt.arg_groups.moe_hook as moe_hook
    from sglang.srt.arg_groups import overrides
    from sglang.srt.layers import quantization
    from sglang.srt.runtime_context import override_platform
    from sglang.srt.server_args import prepare_server_args
    from sglang_arch.arch import catalog, parse_capability, runtime
    from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts

    quantization.QUANTIZATION_METHODS.setdefault("mxfp4", quantization.Mxfp4Config)  # as on a CUDA host
    import sglang.srt.arg_groups.model_overrides.deepseek_v4 as deepseek_v4
    import sglang.srt.arg_groups.model_overrides.gpt_oss as gpt_oss
    deepseek_v4.is_flashinfer_available = lambda: True  # as on a CUDA host with FlashInfer (line 38)
    routed = overrides._moe_runner_backend_quant_constraints
    original = getattr(routed, "__wrapped__", None)
    assert original is not None, "the plugin did not route the MoE pass in this interpreter"
    real_runs = catalog.choice_runs
    from sglang_arch.arch.policies.moe import QUANT_KINDS
    todo = write_cases(Path(args.root), set(filter(None, args.only.split(","))))
    results = {}

    def resolve(name, path, extra, fn, narrow):
        moe_hook._moe_runner_backend_quant_constraints = fn
        driver = DRIVERS.get(name, (580, 0))
        gpt_oss.get_nvidia_driver_version = lambda: driver
        catalog.choice_runs = real_runs
        if narrow:
            def choice_runs(decision, choice, identities, cuda, kind=None, *rest, **kw):
                verdict = real_runs(decision, choice, identities, cuda, kind, *rest, **kw)
                if verdict is not None and verdict.runs and verdict.kernel in narrow:
                    return dataclasses.replace(verdict, runs=False, reason=f"no build of {choice} (narrowed)")
                return verdict
            catalog.choice_runs = choice_runs
        try:
            server_args = prepare_server_args(["--model-path", path, "--device", "cuda", *extra])
            server_args.resolve_once()
            view = overrides.resolved_view(server_args)
            return {"moe": view.moe_runner_backend, "fp8_gemm": view.fp8_gemm_runner_backend,
                    "fp4_gemm": view.fp4_gemm_runner_backend, "quantization": view.quantization}
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]}
        finally:
            catalog.choice_runs = real_runs

    for cap_text in args.caps.split(","):
        os.environ.update(SGLANG_ARCH_CAPABILITY=cap_text, SGLANG_ARCH_GPU_COUNT="1", SGLANG_ARCH_TOPOLOGY="single")
        runtime.reset()
        cap = parse_capability(cap_text)
        facts = dict(SIMULATED_MACHINE, **upstream_platform_facts(cap, (13, 0)))
        with override_platform(**facts):
            for name, (site, path, extra) in todo.items():
                upstream = resolve(name, path, extra, original, None)
                mine = resolve(name, path, extra, routed, None)
                row = {"site": site, "kind": KINDS[name], "upstream": upstream, "routed": mine}
                picks = {("moe_runner", upstream.get("moe")), ("fp8_gemm", upstream.get("fp8_gemm")),
                         ("fp4_gemm", upstream.get("fp4_gemm"))}
                picks = {p for p in picks if p[1] not in (None, "auto")}
                if picks and "error" not in upstream:
                    # the kernels the picks run on this device, without a build in the narrowed catalog
                    kernels = {real_runs(d, c, cap, (13, 0), kind).kernel for d, c in picks
                               for kind in (None,) + QUANT_KINDS if real_runs(d, c, cap, (13, 0), kind) is not None
                               and real_runs(d, c, cap, (13, 0), kind).runs}
                    row["narrowed"] = sorted(k for k in kernels if k)
                    row["narrow"] = resolve(name, path, extra, routed, kernels)
                results[f"{name}|{cap_text}"] = row
    moe_hook._moe_runner_backend_quant_constraints = routed
    print(json.dumps(results))


if __name__ == "__main__":
    main()
