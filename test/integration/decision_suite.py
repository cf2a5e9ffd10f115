"""The decision suite: what the installed SGLang decides, over a grid of machines.

Runs SGLang's own functions (whatever is importable as ``sglang``: the PyPI release,
the release with the plugin, or a tree patched by ``sglang-arch upstream``) for every
GPU x world size x topology x model in the grid, and prints one JSON object.

Modes:
- ``upstream``: SGLang alone; the GPU is given to SGLang through its own
  ``override_platform`` with the facts its probes would compute.
- ``routed``: the registry decides; the GPU is simulated through the registry's
  override (``SGLANG_ARCH_CAPABILITY`` ...); ``--runtime`` names the registry runtime
  module to reset between machines (``sglang_arch.arch.runtime`` for the plugin,
  ``sglang.srt.arch.runtime`` for a patched tree).

The distributed runtime torch symmetric memory needs (a CUDA device, a process group,
symmetric buffers) does not exist on a CPU machine; ``symm_mem_outcome`` (shared with
``sglang-arch plan``) stands in for those torch pieces only, so SGLang's own communicator
code runs.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import logging
import os
import sys
from types import SimpleNamespace
from typing import Any, Dict, List, Tuple

from sglang_arch.arch import parse_capability
from sglang_arch.integrations.sglang.plan import (
    SIMULATED_MACHINE,
    custom_ar_table,
    simulated_torch_device,
    symm_mem_outcome,
    upstream_platform_facts,
)

CAPABILITIES = ["7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1",
                "9.5", "10.5", "11.5", "12.5", "13.0", "6.1"]
KNOWN_TO_UPSTREAM_DOMAIN = ["7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
TOPOLOGIES = ["nvswitch", "nvlink", "pcie-p2p", "pcie"]
WORLD_SIZES = [2, 4, 8]
CUDA = "13.0"
CUDA_VERSION = (13, 0)
FUSION_REQUESTS = ["auto", "trtllm", "mnnvl", "cutedsl"]
# DSA models (architecture) x the KV-cache dtype asked for: SGLang's two DSA passes.
DSA_MODELS = ["DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"]
DSA_KV_CACHE_DTYPES = ["auto", "fp8_e4m3", "bfloat16"]

# (name, use_mla, server-args fields, model-config fields)
MODELS: List[Tuple[str, bool, Dict[str, Any], Dict[str, Any]]] = [
    ("mha", False, {}, {}),
    ("mla", True, {}, {}),
    ("mha-spec-topk4", False, {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4}, {}),
    ("mha-spec-topk-pending", False, {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": None}, {}),
    ("mha-asym-kv", False, {}, {"has_asymmetric_kv": True}),
    ("mha-sinks", False, {}, {"has_attention_sinks": True}),
    ("whisper", False, {}, {"architectures": ["WhisperForConditionalGeneration"]}),
]


def _server_args(fields: Dict[str, Any]) -> SimpleNamespace:
    base = dict(speculative_algorithm=None, speculative_eagle_topk=None, page_size=1, tp_size=1)
    base.update(fields)
    return SimpleNamespace(**base)


def _model_config(fields: Dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(hf_config=SimpleNamespace(architectures=fields.get("architectures", ["LlamaForCausalLM"])),
                           has_asymmetric_kv=fields.get("has_asymmetric_kv", False),
                           has_attention_sinks=fields.get("has_attention_sinks", False))


def _call(fn, *args) -> Any:
    try:
        return fn(*args)
    except ValueError:
        return "ValueError"


MACHINE = SIMULATED_MACHINE


def run_suite(mode: str, runtime: str) -> Dict[str, Any]:
    logging.disable(logging.CRITICAL)
    os.environ["SGLANG_OPT_USE_INKLING_CUSTOM_AR"] = "0"  # compare the tables, not the inkling floor
    os.environ.pop("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", None)  # SGLang's opt-in unset: the default is compared
    from sglang.srt.arg_groups import model_override_base, overrides
    from sglang.srt.distributed.device_communicators import pcie_ipc_ar
    from sglang.srt.layers import flashinfer_comm_fusion
    from sglang.srt.runtime_context import get_platform, override_platform

    if mode == "routed" and runtime == "sglang_arch.arch.runtime":
        from sglang.srt.plugins.hook_registry import HookRegistry
        from sglang_arch.integrations.sglang import register

        os.environ["SGLANG_ARCH_CAPABILITY"] = "9.0"
        importlib.import_module(runtime).reset()
        register()
        HookRegistry.apply_hooks()
    facts_names = ["is_sm90", "is_sm100", "is_sm100_or_sm110", "is_sm110", "is_sm120", "is_blackwell",
                   "is_hopper_with_cuda_12_3", "device_capability", "device_sm"]
    out: Dict[str, Any] = {}
    for cap_text, topo, ws in itertools.product(CAPABILITIES, TOPOLOGIES, WORLD_SIZES):
        cap = parse_capability(cap_text)
        facts = dict(MACHINE)
        if mode == "upstream":
            facts.update(upstream_platform_facts(cap, CUDA_VERSION))
        else:
            os.environ.update(SGLANG_ARCH_CAPABILITY=cap_text, SGLANG_ARCH_GPU_COUNT=str(ws),
                              SGLANG_ARCH_TOPOLOGY=topo, SGLANG_ARCH_CUDA=CUDA)
            importlib.import_module(runtime).reset()
        with override_platform(**facts):
            platform = get_platform()
            row: Dict[str, Any] = {"facts": {name: _jsonable(getattr(platform, name)) for name in facts_names}}
            row["fusion"] = {f"{req}/{'multi' if multi else 'single'}": _call(flashinfer_comm_fusion._resolve_backend, req, multi)
                             for req in FUSION_REQUESTS for multi in (False, True)}
            row["attention"] = {name: _call(model_override_base.get_default_attn_backend, _server_args(sa), mla,
                                            _model_config(mc)) for name, mla, sa, mc in MODELS}
            row["fusion_auto_enable"] = _call(overrides._flashinfer_allreduce_fusion_auto_enable,
                                              _auto_enable_view(ws))
            row["symm_mem"] = symm_mem_outcome(cap, ws, multicast=topo == "nvswitch")
            row["pcie_ipc"] = _call(lambda: pcie_ipc_ar.eligible_group(group_name="tp", world_size=ws,
                                                                        deterministic=False))
            if topo == "nvswitch" and ws == 8:  # DSA depends on the GPU alone: one cell per capability
                with simulated_torch_device(cap):  # the passes read torch's capability directly
                    row["dsa"] = {f"{arch}/{kv}": _dsa(overrides, arch, kv)
                                  for arch in DSA_MODELS for kv in DSA_KV_CACHE_DTYPES}
                # --enable-deterministic-inference without a backend: the GPU and the model alone
                row["deterministic"] = {name: _call(overrides._deterministic_attention_backend,
                                                    _deterministic_view(arch, mla))
                                        for name, arch, mla in DETERMINISTIC_MODELS}
            row["custom_ar_v2"] = custom_ar_table(cap)
        out[f"{cap_text}|{topo}|{ws}"] = row
    return out


# (name, architecture, MLA): a Llama, and DeepSeek V3 (SGLang's deterministic DeepSeek family)
DETERMINISTIC_MODELS = [("mha", "LlamaForCausalLM", False), ("mla", "DeepseekV3ForCausalLM", True)]


def _deterministic_view(arch: str, mla: bool):
    from sglang.srt.configs.model_config import AttentionArch

    model_config = SimpleNamespace(hf_config=SimpleNamespace(architectures=[arch]),
                                   attention_arch=AttentionArch.MLA if mla else AttentionArch.MHA)
    return SimpleNamespace(enable_deterministic_inference=True, attention_backend=None,
                           model_path=f"/suite/{arch}", _model_config=model_config)


def _auto_enable_view(ws: int):
    """A resolution view for Qwen3-MoE at TP=ws on one node (the fusion auto-enable inputs)."""
    model_config = SimpleNamespace(hf_config=SimpleNamespace(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                                                             hidden_size=2048))
    return SimpleNamespace(flashinfer_allreduce_fusion_backend=None, tp_size=ws, nnodes=1, moe_a2a_backend="none",
                           disable_custom_all_reduce=False, attn_dp_size=1, dp_size=1, attn_cp_size=1,
                           ep_join_mode=None, encoder_only=False, enable_pdmux=False, _model_config=model_config,
                           model_path="/suite/qwen3-moe")


def _dsa(overrides, arch: str, kv_cache_dtype: str) -> Any:
    """SGLang's DSA passes in resolution order (KV-cache default, then split backends)."""
    hf_config = SimpleNamespace(architectures=[arch], index_topk=2048)
    view = SimpleNamespace(kv_cache_dtype=kv_cache_dtype, dsa_prefill_backend=None, dsa_decode_backend=None,
                           enable_hisparse=False, dcp_size=1, model_path=f"/suite/{arch}",
                           _model_config=SimpleNamespace(hf_config=hf_config))
    declared = _call(overrides._dsa_kv_cache_dtype_default, view)
    if not isinstance(declared, dict):
        return declared
    view.kv_cache_dtype = declared.get("kv_cache_dtype", view.kv_cache_dtype)
    backends = _call(overrides._dsa_split_backend_resolution, view)
    return {"kv_cache_dtype": view.kv_cache_dtype, **backends} if isinstance(backends, dict) else backends


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("upstream", "routed"), required=True)
    parser.add_argument("--runtime", default="sglang_arch.arch.runtime")
    args = parser.parse_args()
    result = run_suite(args.mode, args.runtime)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
