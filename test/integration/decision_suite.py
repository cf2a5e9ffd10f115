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
symmetric buffers) does not exist on a CPU machine; ``_symm_mem_runtime`` stands in for
those torch pieces only, so SGLang's own communicator code runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import itertools
import json
import logging
import os
import sys
from types import SimpleNamespace
from typing import Any, Dict, Iterator, List, Tuple

CAPABILITIES = ["7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1",
                "9.5", "10.5", "11.5", "12.5", "13.0", "6.1"]
KNOWN_TO_UPSTREAM_DOMAIN = ["7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
TOPOLOGIES = ["nvswitch", "nvlink", "pcie-p2p", "pcie"]
WORLD_SIZES = [2, 4, 8]
CUDA = "13.0"
FUSION_REQUESTS = ["auto", "trtllm", "mnnvl", "cutedsl"]
SIMULATED_NUM_SM = 132

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


@contextlib.contextmanager
def _torch_device(cap: Tuple[int, int]) -> Iterator[None]:
    import torch

    saved = (torch.cuda.get_device_capability, torch.cuda.get_device_properties, torch.cuda.set_device)
    torch.cuda.get_device_capability = lambda *a, **k: cap
    torch.cuda.get_device_properties = lambda *a, **k: SimpleNamespace(multi_processor_count=SIMULATED_NUM_SM)
    torch.cuda.set_device = lambda *a, **k: None
    try:
        yield
    finally:
        torch.cuda.get_device_capability, torch.cuda.get_device_properties, torch.cuda.set_device = saved


@contextlib.contextmanager
def _symm_mem_runtime(world_size: int, multicast: bool) -> Iterator[None]:
    """torch's symmetric-memory runtime for one rank of a simulated group, on the CPU."""
    import torch

    module = importlib.import_module("sglang.srt.distributed.device_communicators.torch_symm_mem")

    class FakeSymmMem:
        @staticmethod
        def empty(numel, device=None, dtype=None):
            return torch.empty(0, dtype=dtype)  # size is reported through max_size

        @staticmethod
        def rendezvous(buffer, group_name):
            return SimpleNamespace(multicast_ptr=1 if multicast else 0)

    saved = {name: getattr(module, name) for name in ("torch_symm_mem", "dist", "torch_symm_mem_available")
             if hasattr(module, name)}
    module.torch_symm_mem = FakeSymmMem
    module.dist = SimpleNamespace(get_world_size=lambda group=None: world_size)
    module.torch_symm_mem_available = True
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _symm_mem(cap: Tuple[int, int], world_size: int, multicast: bool) -> Dict[str, Any]:
    module = importlib.import_module("sglang.srt.distributed.device_communicators.torch_symm_mem")
    with _torch_device(cap), _symm_mem_runtime(world_size, multicast):
        comm = module.TorchSymmMemCommunicator(SimpleNamespace(group_name="suite"), 0)
    if comm.disabled:
        return {"enabled": False}
    multimem = world_size in comm._WORLD_SIZES_MULTIMEM.get(comm.device_capability, ())
    return {"enabled": True, "max_bytes": comm.max_size, "algorithm": "multimem" if multimem else "two_shot"}


def _custom_ar_table(cap: Tuple[int, int]) -> str:
    car = importlib.import_module("sglang.srt.distributed.device_communicators.configs.custom_all_reduce_v2")
    fn = car._get_all_reduce_configs
    while fn is not None:  # upstream caches the first device's answer; each machine is new here
        if hasattr(fn, "cache_clear"):
            fn.cache_clear()
        fn = getattr(fn, "__wrapped__", None)
    with _torch_device(cap):
        configs = car._get_all_reduce_configs()
        for name in ("sm90", "sm100", "sm107"):
            if configs is getattr(car, f"_{name}_configs")(SIMULATED_NUM_SM):
                return name
        sizes = sorted(configs)
        one = configs[sizes[0]]
        return f"default:{sizes[0]}-{sizes[-1]}:{one.graph.one_shot_push_threshold}:{one.graph.two_shot_pull_threshold}"


def _call(fn, *args) -> Any:
    try:
        return fn(*args)
    except ValueError as exc:
        return "ValueError"


def upstream_facts(cap: Tuple[int, int]) -> Dict[str, Any]:
    from sglang.srt.runtime_context import _PLATFORM_PROBES
    from sglang.srt.utils import common

    cuda = tuple(int(x) for x in CUDA.split("."))
    facts: Dict[str, Any] = {}
    for fact, helper in _PLATFORM_PROBES.items():
        keywords = getattr(getattr(getattr(common, helper, None), "__wrapped__", None), "keywords", None) or {}
        if "device_capability_majors" in keywords:
            facts[fact] = cap[0] in keywords["device_capability_majors"] and cuda >= tuple(keywords["cuda_version"])
    facts.update(device_capability=cap, device_sm=cap[0] * 10 + cap[1])
    return facts


MACHINE = {"is_cuda": True, "is_hip": False, "is_npu": False, "is_xpu": False, "is_musa": False, "is_mps": False,
           "has_flashinfer": True}


def run_suite(mode: str, runtime: str) -> Dict[str, Any]:
    logging.disable(logging.CRITICAL)
    os.environ["SGLANG_OPT_USE_INKLING_CUSTOM_AR"] = "0"  # compare the tables, not the inkling floor
    from sglang.srt.arg_groups import model_override_base, overrides
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
        cap = tuple(int(x) for x in cap_text.split("."))
        facts = dict(MACHINE)
        if mode == "upstream":
            facts.update(upstream_facts(cap))
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
            row["symm_mem"] = _symm_mem(cap, ws, multicast=topo == "nvswitch")
            row["custom_ar_v2"] = _custom_ar_table(cap)
        out[f"{cap_text}|{topo}|{ws}"] = row
    return out


def _auto_enable_view(ws: int):
    """A resolution view for Qwen3-MoE at TP=ws on one node (the fusion auto-enable inputs)."""
    model_config = SimpleNamespace(hf_config=SimpleNamespace(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                                                             hidden_size=2048))
    return SimpleNamespace(flashinfer_allreduce_fusion_backend=None, tp_size=ws, nnodes=1, moe_a2a_backend="none",
                           disable_custom_all_reduce=False, attn_dp_size=1, dp_size=1, attn_cp_size=1,
                           ep_join_mode=None, encoder_only=False, enable_pdmux=False, _model_config=model_config,
                           model_path="/suite/qwen3-moe")


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
