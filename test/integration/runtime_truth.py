"""Runtime truth: SGLang's own runtime gates, in the scheduler's import order, against the registry.

Run as a child process (one machine per process, as the plugin decides once per
process), this imports ``sglang.srt.managers.scheduler`` first and only then calls
``load_plugins()``, exactly as SGLang's spawned scheduler does, and then asks SGLang's
own code, at the point where it acts:

- fusion: ``add_norm.flashinfer_ar_fusion_applies(64)``, the gate every layer asks
  before the fused all-reduce + RMSNorm kernel, with the server arguments SGLang
  resolved and published (``set_global_server_args_for_scheduler``);
- torch symmetric memory: SGLang's ``TorchSymmMemCommunicator`` is built and its
  ``all_reduce`` called on a decode-sized bf16 tensor; which kernel it launches
  (``torch.ops.symm_mem.*``) and the size it takes are recorded;
- attention: the backend names the model runner reads from the resolved arguments, and
  the class SGLang's ``ATTENTION_BACKENDS`` creator builds for each (MHA, MLA, DSA); for
  DSA also the resolved ``--kv-cache-dtype`` and ``--dsa-prefill/decode-backend`` the
  sparse backend reads;

and prints them with the registry's decision for the same machine as one JSON line.

``--cpu`` (this machine, no GPU): the GPU is simulated by the registry's override
(``SGLANG_ARCH_CAPABILITY`` ...), and CUDA is faked only where SGLang checks it: the
platform's ``is_cuda``/``has_flashinfer`` facts (``override_platform``), the two
import-time flags of the fusion gate's module, and torch's device queries
(``plan.simulated_torch_device``).  Without ``--cpu`` nothing is faked (the GPU host).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from types import SimpleNamespace

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "models")
MODELS = {"mha": "llama-tiny", "mla": "deepseek-mla-tiny", "dsa": "deepseek-dsa-tiny"}
FUSION_MODEL = "qwen3-moe-tiny"  # an architecture SGLang auto-enables fusion for (Llama is not one)
DECODE_TOKENS, HIDDEN = 64, 4096


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--stub-missing", action="append", default=[], metavar="PACKAGE",
                        help="stand in for a kernel package that is not installed (the GPU host has no "
                             "sgl_kernel: its wheel is too large to carry); reported in the output")
    args = parser.parse_args()
    from sglang_arch.integrations.sglang.plan import stand_in_if_missing

    stubbed = [name for name in args.stub_missing if stand_in_if_missing(name)]
    os.environ.setdefault("SGLANG_OPT_USE_INKLING_CUSTOM_AR", "0")  # SGLang's JIT-AR floor: not under test

    started = time.time()
    import sglang.srt.managers.scheduler  # noqa: F401  the scheduler's own import order: first
    from sglang.srt.plugins import load_plugins

    load_plugins()  # what run_scheduler_process does after its imports
    import_s = time.time() - started

    import importlib

    from sglang.srt.layers.layer_boundary import exit as boundary_exit
    from sglang.srt.layers.layer_boundary.fusions import allreduce as fusion_stage
    from sglang.srt.layers.layer_boundary.residual import add_norm
    from sglang_arch.integrations.sglang import _state as plugin_state
    from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, simulated_torch_device

    ctx = importlib.import_module("sglang_arch.arch.runtime").current()
    traits_class = importlib.import_module("sglang_arch.arch.policies.attention").ModelTraits
    res = ctx.resolution
    cap = res.requested
    gpus = len(ctx.node.gpus)
    out = {"machine": {"capability": str(cap), "gpus": gpus, "topology": ctx.topology.name,
                       "tier": str(res.resolved), "match": res.match},
           "import_s": round(import_s, 1),
           "hooks_applied": plugin_state.get("applied"),
           "stubbed": stubbed,
           # The modules that imported the fusion gate by name hold the module's own function,
           # and (through the plugin) that is the routed one: early routing.
           "gate_references_one_function": all(
               m.flashinfer_ar_fusion_applies is add_norm.flashinfer_ar_fusion_applies
               for m in (boundary_exit, fusion_stage)),
           "gate_routed_by_plugin": bool(getattr(add_norm.flashinfer_ar_fusion_applies, "__sglang_arch_target__", None)),
           "add_norm_import_flags": {"is_sm90": getattr(add_norm, "_is_sm90_supported", None),
                                     "is_sm100": getattr(add_norm, "_is_sm100_supported", None)}}

    import contextlib

    from sglang.srt.runtime_context import override_platform

    if args.cpu:
        add_norm._is_cuda = True
        add_norm._is_flashinfer_available = True
        faked = contextlib.ExitStack()
        faked.enter_context(override_platform(**SIMULATED_MACHINE))
        faked.enter_context(simulated_torch_device(cap))
    else:
        faked = contextlib.ExitStack()
    from sglang.srt.runtime_context import get_platform

    out["registry_attention"] = {
        kind: list(_pair(ctx.attention_default(traits_class(kind=kind, cuda=ctx.cuda)))) for kind in ("mha", "mla")}
    with faked:
        platform = get_platform()  # SGLang's own facts: the routed probes
        out["identity"] = {"device_capability": list(platform.device_capability), "device_sm": platform.device_sm,
                           "is_sm120": bool(platform.is_sm120)}
        out["attention"] = {kind: attention(kind, gpus, ctx) for kind in MODELS}
        out["fusion"] = fusion(gpus, ctx, add_norm)
        out["symm_mem"] = symm_mem(gpus, ctx, args.cpu)
        out["pcie_ipc"] = pcie_ipc(gpus, ctx)
        out["deterministic"] = deterministic(gpus, ctx)
        out["build_guard"] = build_guard(gpus, ctx)
        out["vision"] = vision(ctx)
        out["hybrid_linear_draft"] = hybrid_linear_draft(ctx)
    print(json.dumps(out))
    return 0


def _pair(decision):
    return decision.prefill, decision.decode


def resolve_args(model: str, gpus: int, *extra: str):
    from sglang.srt.server_args import (
        prepare_server_args,
        set_global_server_args_for_scheduler,
    )

    argv = ["--model-path", os.path.join(FIXTURES, model), "--tp-size", str(gpus), "--device", "cuda", *extra]
    server_args = prepare_server_args(argv)
    server_args.resolve_once()
    set_global_server_args_for_scheduler(server_args)
    return server_args


def attention(kind: str, gpus: int, ctx) -> dict:
    from sglang.srt.arg_groups.overrides import attention_backends_of, resolved_view

    try:
        server_args = resolve_args(MODELS[kind], gpus)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    view = resolved_view(server_args)
    prefill, decode = attention_backends_of(view)
    use_mla = kind in ("mla", "dsa")
    out = {"prefill": prefill, "decode": decode,
           "prefill_class": built_class(prefill, use_mla, server_args),
           "decode_class": built_class(decode, use_mla, server_args)}
    if kind == "dsa":  # what DeepseekSparseAttnBackend reads: the resolved --dsa-* and KV cache
        out["dsa_args"] = {"kv_cache_dtype": view.kv_cache_dtype, "prefill": view.dsa_prefill_backend,
                           "decode": view.dsa_decode_backend}
        kv = ctx.dsa_kv_cache_dtype().dtype
        arch = server_args._model_config.hf_config.architectures[0]
        decision = ctx.dsa_backends(kv, arch)
        out["registry_dsa"] = {"kv_cache_dtype": kv, "prefill": decision.prefill, "decode": decision.decode}
    return out


class _Stop(Exception):
    pass


class _Runner:
    """A model runner that answers what SGLang's creators ask, then stops the constructor."""

    def __init__(self, use_mla: bool, server_args) -> None:
        self.use_mla_backend = use_mla
        self.server_args = server_args
        self.init_new_workspace = False
        self.kv_cache_dtype = None
        self.model_config = SimpleNamespace(hf_config=SimpleNamespace(architectures=[]), is_encoder_decoder=False)
        # With EAGLE, FlashInfer's creator makes a CUDA stream unless the runner has one.
        self.plan_stream_for_flashinfer = "a stream"

    def __getattr__(self, name):
        raise _Stop(name)


def built_class(name: str, use_mla: bool, server_args) -> str:
    """The class SGLang's creator for ``name`` constructs (its ``__init__`` is stopped)."""
    from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS
    from sglang.srt.layers.attention.base_attn_backend import AttentionBackend

    creator = ATTENTION_BACKENDS.get(name)
    if creator is None:
        return f"no creator for {name}"
    try:
        creator(_Runner(use_mla, server_args))
    except BaseException as exc:  # the stopped constructor, or the creator refusing
        tb = exc.__traceback__
        built = None
        while tb is not None:
            this = tb.tb_frame.f_locals.get("self")
            if isinstance(this, AttentionBackend):
                built = type(this).__name__
                break
            tb = tb.tb_next
        return built or f"refused: {type(exc).__name__}: {str(exc)[:160]}"
    return "built without stopping"


def deterministic(gpus: int, ctx) -> dict:
    """--enable-deterministic-inference with no backend: what SGLang resolves and builds, per model kind."""
    from sglang.srt.arg_groups.overrides import attention_backends_of, resolved_view
    from sglang.srt.server_args import DETERMINISTIC_ATTENTION_BACKEND_CHOICES

    out = {}
    for kind in ("mha", "mla"):
        try:
            server_args = resolve_args(MODELS[kind], gpus, "--enable-deterministic-inference")
        except Exception as exc:
            out[kind] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        prefill, decode = attention_backends_of(resolved_view(server_args))
        decision = ctx.deterministic_backend(tuple(DETERMINISTIC_ATTENTION_BACKEND_CHOICES), kind, kind == "mla")
        out[kind] = {"prefill": prefill, "decode": decode,
                     "prefill_class": built_class(prefill, kind == "mla", server_args),
                     "registry": decision.backend, "upstream_rule": decision.upstream}
    return out


def build_guard(gpus: int, ctx) -> dict:
    """A later path sets fa3 on the published config (as a model's own code could): what the
    model runner then resolves to build, through SGLang's resolve_attention_backend_strs."""
    from sglang.srt.model_executor.model_runner_components import attention_backend_setup as setup
    from sglang.srt.runtime_context import get_context

    try:
        server_args = resolve_args(MODELS["mha"], gpus)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    get_context().override("a later path", attention_backend="fa3", prefill_attention_backend=None,
                           decode_attention_backend=None)
    runner = SimpleNamespace(is_draft_worker=False, draft_attention_backend=None, use_mla_backend=False,
                             server_args=server_args, model_config=server_args._model_config)
    resolved = setup.resolve_attention_backend_strs(model_runner=runner)
    upstream = getattr(setup.resolve_attention_backend_strs, "__wrapped__", None)
    original = upstream(model_runner=runner) if upstream is not None else None
    return {"built": [resolved.prefill, resolved.decode],
            "upstream": [original.prefill, original.decode] if original is not None else None,
            "registry_runs_fa3": bool(ctx.check_backend("fa3", "mha", "prefill").valid)}


def vision(ctx) -> dict:
    """The ViT attention backend VisionAttention picks when neither the user nor the model names one."""
    from sglang.srt.layers.attention.vision import VisionAttention

    try:
        picked = VisionAttention._determine_attention_backend(SimpleNamespace(), None)
    except Exception as exc:
        picked = f"refused: {type(exc).__name__}: {exc}"[:200]
    return {"picked": picked, "registry": ctx.vision_backend(None).backend}


def hybrid_linear_draft(ctx) -> dict:
    """The draft backend SGLang's factory builds for a hybrid linear-attention model."""
    from sglang.srt.speculative.draft_utils import DraftBackendFactory

    factory = SimpleNamespace(_create_triton_decode_backend=lambda: ("triton", None),
                              _create_fa3_decode_backend=lambda: ("fa3", None))
    stamp, _ = DraftBackendFactory._create_hybrid_linear_attn_decode_backend(factory)
    return {"built": stamp, "registry": ctx.hybrid_linear_draft_backend("decode").backend}


def fusion(gpus: int, ctx, add_norm) -> dict:
    from sglang.srt.runtime_context import get_exec

    try:
        resolve_args(FUSION_MODEL, gpus)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    decision = ctx.fusion(nnodes=1) if gpus > 1 else None
    return {"server_args_backend": get_exec().comm.flashinfer_allreduce_fusion_backend,
            "flashinfer_available": bool(add_norm._is_flashinfer_available),
            "gate_at_64": bool(add_norm.flashinfer_ar_fusion_applies(DECODE_TOKENS)),
            "upstream_gate_at_64": (bool(add_norm.flashinfer_ar_fusion_applies.__wrapped__(DECODE_TOKENS))
                                    if hasattr(add_norm.flashinfer_ar_fusion_applies, "__wrapped__") else None),
            "registry": {"enabled": bool(decision and decision.enabled),
                         "backend": decision.backend if decision else None}}


def pcie_ipc(gpus: int, ctx) -> dict:
    """Whether SGLang's own ``eligible_group`` builds its PCIe-IPC all-reduce for the TP group
    (routed in this process as SGLang imports it), beside the registry's decision."""
    from sglang.srt.distributed.device_communicators import pcie_ipc_ar

    os.environ.pop("SGLANG_ENABLE_PCIE_IPC_ALLREDUCE", None)
    return {"registry": ctx.pcie_ipc(gpus).enabled if gpus > 1 else False,
            "sglang": bool(pcie_ipc_ar.eligible_group(group_name="tp", world_size=gpus, deterministic=False))}


def symm_mem(gpus: int, ctx, cpu: bool) -> dict:
    if gpus < 2:
        return {"registry": {"enabled": False}, "sglang": {"enabled": False}}
    import torch
    from sglang.srt.distributed.device_communicators import torch_symm_mem as tsm
    from sglang_arch.integrations.sglang.plan import _symm_mem_runtime

    decision = ctx.symm_mem(gpus)
    registry = {"enabled": decision.enabled, "algorithm": decision.algorithm,
                "max_bytes": decision.max_bytes if decision.enabled else 0}
    if not cpu:  # one GPU here: SGLang's own communicator needs a real group of `gpus` ranks
        return {"registry": registry, "sglang": None}
    with _symm_mem_runtime(gpus, ctx.topology.multicast):
        comm = tsm.TorchSymmMemCommunicator(SimpleNamespace(group_name="truth"), 0)
    launched = []
    inp = torch.ones(DECODE_TOKENS * HIDDEN, dtype=torch.bfloat16)
    if not comm.disabled:
        comm.device = inp.device  # the simulated rank's tensors live on the CPU
        comm.buffer = torch.empty_like(inp)
    kernels = SimpleNamespace(
        multimem_all_reduce_=lambda *a: launched.append("multimem"),
        two_shot_all_reduce_=lambda *a: launched.append("two_shot"))
    recording = SimpleNamespace(ops=SimpleNamespace(symm_mem=kernels), empty_like=torch.empty_like)
    saved = tsm.torch
    tsm.torch = recording
    try:
        result = comm.all_reduce(inp)
    finally:
        tsm.torch = saved
    return {"registry": registry,
            "sglang": {"enabled": not comm.disabled, "max_bytes": comm.max_size if not comm.disabled else 0,
                       "kernel": launched[0] if launched else None, "took_the_path": result is not None}}


if __name__ == "__main__":
    sys.exit(main())
