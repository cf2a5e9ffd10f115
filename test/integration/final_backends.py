"""The final-backend matrix: what SGLang 0.5.23 finally builds, cell by cell.

A cell is (model, capability, mode).  For each capability one child process imports
``sglang.srt.managers.scheduler`` first and calls ``load_plugins()`` after, as SGLang's
spawned scheduler does (the plugin decides once per process), then loops over every
model fixture and mode, reusing the imported SGLang, and asks SGLang's own code what it
builds:

- attention: the prefill and decode backend names the model runner reads from the
  resolved arguments, and the class SGLang's ``ATTENTION_BACKENDS`` creator constructs
  for each (``runtime_truth.built_class``); with EAGLE, the draft worker's backend
  (``draft_worker_common.resolve_draft_worker_attention_backend``) and its class; for a
  vision model, the backend ``VisionAttention._determine_attention_backend`` picks;
- all-reduce: what ``--enable-torch-symm-mem`` builds (SGLang's ``TorchSymmMemCommunicator``:
  its kernel and size) and the custom all-reduce v2 table ``_get_all_reduce_configs`` picks
  (machine-wide: the same for every model and mode);
- fusion: the resolved ``--flashinfer-allreduce-fusion-backend`` and the gate every layer
  asks before the fused all-reduce + RMSNorm, at a decode batch of 64 tokens;
- MoE / GEMM: the MoE runner a model with experts finally uses (the resolved
  ``--moe-runner-backend``, and for ``auto`` the quantization method's ``create_moe_runner``),
  and for FP8 block / NVFP4 weights DeepGEMM and the FP8 / FP4 GEMM backend (``moe_gemm``).

The same child runs twice per capability: with the plugin, and with SGLang alone
(``SGLANG_ARCH_DISABLE=1``; SGLang's probes are given the simulated device's facts
through its own ``override_platform``, as ``sglang-arch plan`` does), which is
upstream's cell.  The GPU is simulated as in ``runtime_truth.py --cpu``.

Every cell is judged with the kernel catalog (``sglang_arch.arch.catalog``) on the
device's own capability.  ``python test/integration/final_backends.py --write`` runs the
matrix and writes ``docs/final-backends.md``; ``test_final_backends.py`` runs it, asserts
each cell and fails when the file differs from what it regenerates.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FIXTURES = HERE.parent / "fixtures" / "models"
DOC = ROOT / "docs" / "final-backends.md"
COMMAND = "python test/integration/final_backends.py --write"
DECODE_TOKENS = 64
CUDA = "13.0"


@dataclass(frozen=True)
class Model:
    """A fixture and the SGLang 0.5.23 code whose capability-dependent choice it exercises."""

    name: str  # the fixture folder under test/fixtures/models
    kind: str  # mha | mla | dsa: which backend family the model runner builds
    source: str  # where SGLang picks its attention backend by capability
    vision: bool = False  # the model has a vision tower built on VisionAttention
    args: Tuple[str, ...] = ()  # server arguments the fixture is served with (a quantized one: --quantization)
    modes: Optional[Tuple[str, ...]] = None  # None: every mode of MODES


MODELS: Tuple[Model, ...] = (
    Model("llama-tiny", "mha", "arg_groups/model_override_base.py get_default_attn_backend (no override)"),
    Model("qwen3-moe-tiny", "mha", "the default, and the fusion auto-enable pass (overrides.py)"),
    Model("deepseek-mla-tiny", "mla", "model_overrides/deepseek_v2.py: trtllm_mla on is_sm100"),
    Model("deepseek-dsa-tiny", "dsa", "model_overrides/deepseek_v2.py + overrides.py _dsa_split_backend_resolution"),
    Model("gemma4-tiny", "mha", "model_overrides/gemma4.py: trtllm_mha on is_sm100, else triton"),
    Model("exaone4-tiny", "mha", "model_overrides/exaone.py: trtllm_mha on is_sm100, fa3 from SM80, else triton"),
    Model("olmo2-tiny", "mha", "model_overrides/olmo2.py: trtllm_mha on is_sm100, fa3 from SM80, else triton"),
    Model("gpt-oss-tiny", "mha", "model_overrides/gpt_oss.py: trtllm_mha on is_sm100, fa3 on is_sm90, else triton"),
    Model("llama4-tiny", "mha", "model_overrides/llama4.py: trtllm_mha on is_sm100, fa3 on is_sm90, else triton"),
    Model("lfm2-tiny", "mha", "model_overrides/lfm2.py: flashinfer on is_sm100"),
    Model("granitemoehybrid-tiny", "mha", "model_overrides/granitemoehybrid.py: flashinfer on is_sm100 (mamba layers)"),
    Model("falcon-h1-tiny", "mha", "model_overrides/falcon_h1.py: triton on is_sm100"),
    Model("nemotron-h-tiny", "mha", "model_overrides/nemotron_h.py: trtllm_mha / triton on Blackwell, draft backend"),
    Model("beam-tiny", "mha", "model_overrides/beam.py: trtllm_mha on is_sm90, is_sm100 or is_sm120"),
    Model("mimo-v2-tiny", "mha", "model_overrides/mimo_v2.py: fa4 on is_sm100"),
    Model("qwen3-next-tiny", "mha", "model_overrides/qwen3_5.py (Qwen3Next, Qwen3.5): triton or trtllm_mha on is_sm100"),
    Model("qwen3-vl-tiny", "mha", "model_overrides/qwen3_vl.py (decode on large Hopper) + layers/attention/vision.py "
                                  "_determine_attention_backend: fa3 on major 9, fa4 on 10, else triton_attn",
          vision=True),
    # Quantized MoE fixtures: the MoE runner and GEMM columns; the default mode only.
    Model("qwen3-moe-fp8-block", "mha", "fp8.py Fp8MoEMethod.create_moe_runner (auto: DeepGEMM with an all-to-all "
                                        "backend, else triton); fp8_utils FP8 block GEMM; DeepGEMM's configurer",
          modes=("default",)),
    Model("deepseek-v3-fp8", "mla", "overrides.py _deepseek_moe_quant_resolution: flashinfer_trtllm on is_sm100; "
                                    "FP8 block GEMM; DeepGEMM", modes=("default",)),
    Model("gpt-oss-mxfp4", "mha", "model_overrides/gpt_oss.py: flashinfer_mxfp4 on is_sm100 / is_sm120, else "
                                  "triton_kernel", modes=("default",)),
    Model("qwen3-moe-nvfp4", "mha", "overrides.py MoE runner pass: flashinfer_cutlass on is_sm110 / is_sm120; "
                                    "modelopt_quant.py create_moe_runner: marlin on SM80-SM9x, else flashinfer_trtllm; "
                                    "fp4_utils FP4 GEMM", args=("--quantization", "modelopt_fp4"), modes=("default",)),
    Model("qwen3-moe-mxfp8", "mha", "overrides.py MoE runner pass: flashinfer_trtllm for MXFP8 whatever the GPU",
          args=("--quantization", "mxfp8"), modes=("default",)),
)

MODES: Dict[str, Tuple[str, ...]] = {
    "default": (),
    "deterministic": ("--enable-deterministic-inference",),
    "eagle": ("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
              "--speculative-num-draft-tokens", "3"),
    "fp8-kv": ("--kv-cache-dtype", "fp8_e4m3"),
}

EXTRA_CAPABILITIES = ("10.5", "11.5", "12.3", "13.0", "6.1")
PORTABLE_TOPOLOGY = ("pcie", 8)  # below every tier: a PCIe box of Pascal cards (GTX 1080 class)


def modes_of(model: Model) -> Tuple[str, ...]:
    """The modes a fixture's cells run in."""
    return model.modes if model.modes is not None else tuple(MODES)


def cell_keys(caps: Optional[Sequence[str]] = None) -> List[Tuple[str, str, str]]:
    """Every (model, capability, mode) of the matrix, in the document's order."""
    return [(model.name, cap, mode) for cap in (caps or capabilities()) for model in MODELS
            for mode in modes_of(model)]


def capabilities() -> List[str]:
    """Every exact tier of the registry's table, then the capabilities it does not know."""
    from sglang_arch.arch.table import ARCHITECTURES

    return list(ARCHITECTURES) + list(EXTRA_CAPABILITIES)


def machine(cap: str) -> Tuple[int, str]:
    """(GPUs, topology): 8 GPUs of the resolved tier's typical topology; single-GPU tiers
    (Jetson, DGX Spark) run one GPU; below every tier, ``PORTABLE_TOPOLOGY``."""
    from sglang_arch.arch import resolve

    profile = resolve(cap).profile
    if profile is None:
        return PORTABLE_TOPOLOGY[1], PORTABLE_TOPOLOGY[0]
    if profile.topology == "single":
        return 1, "single"
    return 8, profile.topology


# --------------------------------------------------------------------------- child


def _mode_args(model: Model, mode: str) -> List[str]:
    args = list(model.args) + list(MODES[mode])
    if mode == "eagle":
        args += ["--speculative-draft-model-path", str(FIXTURES / model.name)]
    return args


def zygote(upstream: bool, caps: Sequence[str]) -> List[Dict[str, Any]]:
    """Import SGLang's scheduler once, then fork one child per capability.

    Each child sets the simulated machine, forgets the machine the import resolved
    (``runtime.reset()``, the registry's own way to re-read ``SGLANG_ARCH_*``), calls
    ``load_plugins()`` (as the spawned scheduler does after its imports) and resolves
    every cell.  One import instead of one per capability: each costs 15-25 s of CPU.
    The decisions under test are taken at call time (argument resolution, backend
    creators, the fusion gate, the communicator), after the reset;
    ``test_forked_child_equals_a_fresh_scheduler`` checks one capability against a fresh
    interpreter.
    """
    sys.path.insert(0, str(HERE))
    os.environ.setdefault("SGLANG_OPT_USE_INKLING_CUSTOM_AR", "0")  # SGLang's JIT-AR floor: not under test
    from helpers import memoize_struct_fields

    memoize_struct_fields()  # each cell's prepare_server_args: 0.19 s -> 0.10 s of CPU
    started = time.process_time()
    import sglang.srt.managers.scheduler  # noqa: F401  the scheduler's own import order: first

    import_cpu_s = time.process_time() - started
    results = []
    for cap in caps:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: one machine
            os.close(read)
            status = 1
            try:
                os.environ.update(_machine_env(cap))
                result = child(upstream)
                result["import_cpu_s"] = round(import_cpu_s, 1)
                with os.fdopen(write, "w") as sink:
                    sink.write(json.dumps(result))
                status = 0
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        os.close(write)
        with os.fdopen(read) as source:
            text = source.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not text:
            raise RuntimeError(f"matrix child for {cap} ({'upstream' if upstream else 'plugin'}) failed: {status}")
        results.append(json.loads(text))
    return results


def child(upstream: bool) -> Dict[str, Any]:
    """One machine (``SGLANG_ARCH_*`` set), in a process that imported the scheduler."""
    import logging

    started = time.process_time()
    if not upstream:
        from sglang_arch.arch import runtime

        runtime.reset()  # the machine of this child, not the one the import saw
    from sglang.srt.plugins import load_plugins

    load_plugins()  # what run_scheduler_process does after its imports
    logging.disable(logging.WARNING)

    from runtime_truth import built_class
    from sglang.srt.layers.attention import vision
    from sglang.srt.layers.layer_boundary.residual import add_norm
    from sglang.srt.runtime_context import override_platform
    from sglang_arch.arch import parse_capability
    from sglang_arch.integrations.sglang.plan import (
        SIMULATED_MACHINE,
        custom_ar_table,
        simulated_torch_device,
        symm_mem_outcome,
        upstream_platform_facts,
    )

    cap = parse_capability(os.environ["SGLANG_ARCH_CAPABILITY"])
    gpus = int(os.environ["SGLANG_ARCH_GPU_COUNT"])
    topology = os.environ["SGLANG_ARCH_TOPOLOGY"]
    facts = dict(SIMULATED_MACHINE)
    if upstream:
        facts.update(upstream_platform_facts(cap, tuple(int(x) for x in CUDA.split("."))))
        # What SGLang computes at import on that GPU (this process imported it on a CPU).
        add_norm._is_sm90_supported = bool(facts.get("is_sm90"))
        add_norm._is_sm100_supported = bool(facts.get("is_sm100"))
    add_norm._is_cuda = True
    from sglang.srt.layers import quantization

    # SGLang registers the mxfp4 method at import only where is_cuda() holds (this process imported it on a CPU).
    quantization.QUANTIZATION_METHODS.setdefault("mxfp4", quantization.Mxfp4Config)
    add_norm._is_flashinfer_available = True
    vision.is_cuda = lambda: True
    vision.get_device_capability = lambda device_id=0: cap.as_tuple()

    out: Dict[str, Any] = {"capability": str(cap), "gpus": gpus, "topology": topology,
                           "mode": "upstream" if upstream else "plugin", "cells": {}}
    if not upstream:
        out["registry"] = registry_decisions(gpus)
    with contextlib.ExitStack() as faked:
        faked.enter_context(override_platform(**facts))
        faked.enter_context(simulated_torch_device(cap))
        out["allreduce"] = allreduce(cap, gpus, topology, symm_mem_outcome, custom_ar_table)
        for model in MODELS:
            for mode in modes_of(model):
                out["cells"][f"{model.name}|{mode}"] = cell(model, mode, gpus, add_norm, built_class, cap)
        out["indexer"] = v41_indexer()  # last: it marks SGLang's indexer module as on a CUDA device
    out["cpu_s"] = round(time.process_time() - started, 1)
    return out


def registry_decisions(gpus: int) -> Dict[str, Any]:
    """The registry's own decisions for this process's machine (the plugin's child)."""
    from sglang_arch.arch import runtime
    from sglang_arch.arch.policies.attention import ModelTraits

    ctx = runtime.current()
    out: Dict[str, Any] = {
        "tier": str(ctx.resolution.resolved), "match": ctx.resolution.match,
        "attention": {kind: [d.prefill, d.decode] for kind in ("mha", "mla")
                      for d in [ctx.attention_default(ModelTraits(kind=kind, cuda=ctx.cuda))]},
        "dsa": {}, "custom_ar_v2": ctx.custom_ar_table(),
    }
    # Decisions a later registry takes, recorded where this one has them.
    if hasattr(ctx, "deterministic_backend"):
        from sglang.srt.server_args import DETERMINISTIC_ATTENTION_BACKEND_CHOICES

        capable = tuple(DETERMINISTIC_ATTENTION_BACKEND_CHOICES)
        out["deterministic"] = {kind: ctx.deterministic_backend(capable, kind, kind == "mla").backend
                                for kind in ("mha", "mla")}  # the MLA fixtures are DeepSeek's
    if hasattr(ctx, "vision_backend"):
        out["vision"] = ctx.vision_backend(None).backend
    for kv in ("auto", "fp8_e4m3"):
        dtype = ctx.dsa_kv_cache_dtype().dtype if kv == "auto" else kv
        decision = ctx.dsa_backends(dtype, "DeepseekV3ForCausalLM")
        out["dsa"][kv] = [decision.prefill, decision.decode]
    if gpus > 1:
        fusion = ctx.fusion(nnodes=1)
        symm = ctx.symm_mem(gpus)
        out["fusion"] = fusion.backend if fusion.enabled else None
        out["symm_mem"] = ({"enabled": True, "algorithm": symm.algorithm, "max_bytes": symm.max_bytes}
                           if symm.enabled else {"enabled": False})
    else:
        out["fusion"], out["symm_mem"] = None, {"enabled": False}
    return out


def v41_indexer() -> Dict[str, Any]:
    """What DeepSeek-V4.1's full top-k indexer is built with (machine-wide: every V4.1 index
    layer asks ``v41_indexer.is_sm100_or_newer``, the same for every model and mode): SGLang's
    own ``make_full_topk_indexer``, and the answer its prefill, candidate sparse table and
    fused index store read.  ``deep_gemm`` where DeepGEMM's MQA logits are taken, else ``torch``.
    (Prefill also needs DeepGEMM's dense FP4 indexer installed with a CUDA torch: not here.)"""
    from sglang.srt.layers.attention.dsv4 import v41_indexer as indexer

    indexer.is_cuda = lambda: True  # this process imported SGLang on a CPU: the simulated GPU is CUDA
    cached = getattr(indexer.is_sm100_or_newer, "cache_clear", None)  # SGLang's functools.cache, unhooked
    if cached is not None:
        cached()
    try:
        built = indexer.make_full_topk_indexer(token_to_kv_pool=None, req_to_token=None)
        picks = indexer.is_sm100_or_newer()
    except Exception as exc:  # noqa: BLE001 - recorded, and judged as a refusal
        return {"error": _error(exc)}
    name = lambda on: "deep_gemm" if on else "torch"  # noqa: E731
    return {"decode": name(built.use_deep_gemm_decode), "mqa_logits": name(picks)}


def judge_indexer(caps: Dict[str, Any], cap: str) -> Dict[str, Any]:
    """The V4.1 indexer on ``cap``: with the plugin, DeepGEMM only where the catalog runs
    DeepGEMM on the device and the registry's rule takes it; without it, SGLang's
    ``major >= 10``."""
    from sglang_arch.arch import catalog, parse_capability, resolve
    from sglang_arch.arch.policies.deepseek import dsv41_indexer_deep_gemm

    cuda = tuple(int(x) for x in CUDA.split("."))
    res = resolve(parse_capability(cap))
    verdict = catalog.choice_runs("deep_gemm", "jit", res.identities, cuda)
    runs = verdict is not None and verdict.runs
    expected = "deep_gemm" if dsv41_indexer_deep_gemm(res, cuda).deep_gemm else "torch"
    plugin, upstream = caps[cap]["plugin"].get("indexer"), caps[cap]["upstream"].get("indexer")
    upstream_expected = "deep_gemm" if parse_capability(cap).major >= 10 else "torch"
    built = [plugin.get(k) for k in ("decode", "mqa_logits")] if plugin else [None]
    ok = (bool(plugin) and all(b == expected for b in built) and (runs or "deep_gemm" not in built)
          and bool(upstream) and upstream.get("decode") == upstream_expected)
    return {"ok": ok, "plugin": plugin, "upstream": upstream, "expected": expected, "deep_gemm_runs": runs,
            "why": verdict.reason if verdict else "not in the catalog"}


def _indexer_show(built: Optional[Dict[str, Any]], deep_gemm_runs: bool) -> str:
    if not built or "error" in built:
        return f"`{(built or {}).get('error', 'not recorded')}`"
    name = built.get("mqa_logits")
    return f"`{name}`" + (" ✗" if name == "deep_gemm" and not deep_gemm_runs else "")


def allreduce(cap, gpus: int, topology: str, symm_mem_outcome, custom_ar_table) -> Dict[str, Any]:
    from sglang_arch.arch import parse_topology

    if gpus < 2:
        return {"symm_mem": {"enabled": False}, "custom_ar_v2": None}
    symm = symm_mem_outcome(cap, gpus, parse_topology(topology).multicast)
    return {"symm_mem": symm, "custom_ar_v2": custom_ar_table(cap)}


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:240]


def cell(model: Model, mode: str, gpus: int, add_norm, built_class, cap=None) -> Dict[str, Any]:
    from sglang.srt.arg_groups.overrides import attention_backends_of, resolved_view
    from sglang.srt.runtime_context import get_exec
    from sglang.srt.server_args import prepare_server_args, set_global_server_args_for_scheduler

    argv = ["--model-path", str(FIXTURES / model.name), "--tp-size", str(gpus), "--device", "cuda",
            *_mode_args(model, mode)]
    try:
        server_args = prepare_server_args(argv)
        server_args.resolve_once()
        set_global_server_args_for_scheduler(server_args)
    except Exception as exc:  # what the server would say at start-up
        return {"error": _error(exc)}
    view = resolved_view(server_args)
    use_mla = model.kind in ("mla", "dsa")
    prefill, decode = attention_backends_of(view)
    out: Dict[str, Any] = {
        "prefill": prefill, "decode": decode,
        "prefill_class": built_class(prefill, use_mla, server_args),
        "decode_class": built_class(decode, use_mla, server_args),
        "kv_cache_dtype": view.kv_cache_dtype,
    }
    if model.kind == "dsa":
        out["dsa"] = [view.dsa_prefill_backend, view.dsa_decode_backend]
    if mode == "eagle":
        from sglang.srt.speculative.draft_worker_common import resolve_draft_worker_attention_backend

        try:
            draft = resolve_draft_worker_attention_backend(algo_label="EAGLE")
            out["draft"] = draft
            out["draft_class"] = built_class(draft, use_mla, server_args)
        except Exception as exc:
            out["draft"] = f"error: {_error(exc)}"
    if model.vision:
        from sglang.srt.layers.attention.vision import VisionAttention

        try:
            out["vision"] = VisionAttention._determine_attention_backend(None, None)
        except Exception as exc:
            out["vision"] = f"error: {_error(exc)}"
    if cap is not None:
        out.update(moe_gemm(view, cap))
    backend = get_exec().comm.flashinfer_allreduce_fusion_backend
    out["fusion_requested"] = backend
    if backend is not None:  # "auto" is resolved when the workspace is built
        from sglang.srt.layers import flashinfer_comm_fusion

        try:
            backend = flashinfer_comm_fusion._resolve_backend(backend, False)
        except ValueError as exc:
            backend = f"error: {_error(exc)}"
    out["fusion"] = backend
    try:
        out["fusion_gate"] = bool(add_norm.flashinfer_ar_fusion_applies(DECODE_TOKENS))
    except Exception as exc:
        out["fusion_gate"] = f"error: {_error(exc)}"
    return out


class _RunnerStandIn:
    """Stands in for SGLang's ``MoeRunner`` (which builds the runner's kernels on a GPU):
    it keeps the backend SGLang's quantization method asked for."""

    def __init__(self, runner_backend, config=None):
        self.runner_backend = runner_backend
        self.config = config


def load_time_moe_runner(kind: str, cap) -> str:
    """The runner an ``auto`` left by argument resolution becomes when the experts' layer is
    built: the quantization method's own ``create_moe_runner`` (SGLang's code), with only
    ``MoeRunner`` stood in and the device's capability given where the method asks CUDA."""
    from types import SimpleNamespace
    from unittest import mock

    from sglang.srt.layers.moe.utils import get_moe_runner_backend

    if kind == "fp8_block":
        from sglang.srt.layers.quantization import fp8 as module

        method = object.__new__(module.Fp8MoEMethod)
        method.is_fp4_expert, method.runner, method._moe_runner_backend = False, None, None
    elif kind == "nvfp4":
        from sglang.srt.layers.quantization import modelopt_quant as module

        method = object.__new__(module.ModelOptNvFp4FusedMoEMethod)
    elif kind == "unquantized":
        from sglang.srt.layers.quantization import unquant as module

        backend = get_moe_runner_backend()  # the flags FusedMoE.__init__ passes the method
        method = module.UnquantizedFusedMoEMethod(
            backend.is_triton_kernels(), backend.is_flashinfer_trtllm() or backend.is_flashinfer_trtllm_routed(),
            backend.is_deep_gemm() or backend.is_lora())
    else:  # MXFP4 / MXFP8: argument resolution always names a runner (gpt_oss.py, the MXFP8 default)
        return "auto (its load-time choice is not callable on this CPU machine)"
    layer = SimpleNamespace()
    config = SimpleNamespace(routing_method_type=None, activation="silu", layer=None)
    with contextlib.ExitStack() as patched:
        patched.enter_context(mock.patch.object(module, "MoeRunner", _RunnerStandIn))
        for name, value in (("is_cuda", lambda: True), ("get_device_capability", lambda *a: cap.as_tuple())):
            if hasattr(module, name):
                patched.enter_context(mock.patch.object(module, name, value))
        method.create_moe_runner(layer, config)
    getter = getattr(method, "get_moe_runner_backend", None)
    built = getter(layer) if getter is not None else method.runner.runner_backend
    return built.value


def _fp8_dispatch_name(fn, fp8_utils) -> str:
    """The ``--fp8-gemm-backend`` name of the function ``_dispatch_auto_backend`` returned."""
    name = fn.__name__
    if name.startswith("deepgemm_"):
        return "deep_gemm"
    if name.startswith("flashinfer_"):
        helper = getattr(fp8_utils, "_get_flashinfer_groupwise_backend", None)
        if helper is None:  # defined at import only on a Blackwell GPU: its rule, for the majors that get here
            return "flashinfer_trtllm"  # (initialize_fp8_gemm_config sends SM110/SM12x elsewhere): trtllm below 12
        helper.cache_clear()
        return "flashinfer_" + helper()
    return name.split("_w8a8")[0]  # cutlass_..., triton_..., aiter_..., torch_...


def moe_gemm(view, cap) -> Dict[str, Any]:
    """The MoE runner, DeepGEMM, FP8 block and NVFP4 GEMM backends SGLang finally uses for
    this cell.

    MoE runner: the resolved ``--moe-runner-backend`` (argument resolution, the model
    overrides), and where that is ``auto`` the quantization method's ``create_moe_runner``
    (``load_time_moe_runner``).  DeepGEMM: the configurer's ``_compute_enable_deep_gemm``.
    FP8 block GEMM: ``initialize_fp8_gemm_config``, and for ``auto`` ``_dispatch_auto_backend``
    with that DeepGEMM answer.  NVFP4 GEMM: ``initialize_fp4_gemm_config``.  Only the
    columns the model's weights use: none for a dense model or an unjudged quantization.
    """
    from unittest import mock

    from sglang.srt.arg_groups.model_override_base import model_config_of
    from sglang_arch.integrations.sglang.glue.moe import has_experts, kind_of

    hf = model_config_of(view).hf_config
    config = getattr(hf, "quantization_config", None) or {}
    kind, _ = kind_of(view.quantization, config)
    out: Dict[str, Any] = {}
    if kind is None:
        return out
    if has_experts(hf):
        from sglang.srt.layers.moe import utils as moe_utils

        moe_utils.initialize_moe_config()
        resolved = moe_utils.get_moe_runner_backend()
        out["moe_resolved"] = resolved.value
        try:
            out["moe"] = load_time_moe_runner(kind, cap) if resolved.is_auto() else resolved.value
        except Exception as exc:
            out["moe"] = f"error: {_error(exc)}"
        out["moe_kind"] = kind
    if kind == "fp8_block":
        from sglang.srt.layers import deep_gemm_wrapper
        from sglang.srt.layers.deep_gemm_wrapper import configurer
        from sglang.srt.layers.quantization import fp8_utils

        with contextlib.ExitStack() as patched:  # what the configurer computes at import on that GPU
            patched.enter_context(mock.patch.object(configurer, "_is_cuda", True))
            patched.enter_context(mock.patch.object(configurer, "get_device_sm", lambda: cap.major * 10 + cap.minor))
            deep = bool(configurer._compute_enable_deep_gemm())
        out["deep_gemm"] = "on" if deep else "off"
        with contextlib.ExitStack() as patched:
            for module in (deep_gemm_wrapper, configurer):  # the flag as the configurer computed it at import
                patched.enter_context(mock.patch.object(module, "ENABLE_JIT_DEEPGEMM", deep))
            patched.enter_context(mock.patch.object(fp8_utils, "is_flashinfer_available", lambda: True))
            patched.enter_context(mock.patch.object(fp8_utils, "get_device_capability", lambda *a: cap.as_tuple()))
            try:
                fp8_utils.initialize_fp8_gemm_config()
                backend = fp8_utils.get_fp8_gemm_runner_backend()
                out["fp8_gemm"] = (_fp8_dispatch_name(fp8_utils._dispatch_auto_backend(), fp8_utils)
                                   if backend.is_auto() else backend.value)
            except Exception as exc:
                out["fp8_gemm"] = f"error: {_error(exc)}"
    if kind == "nvfp4":
        from sglang.srt.layers.quantization import fp4_utils

        with contextlib.ExitStack() as patched:
            patched.enter_context(mock.patch.object(fp4_utils, "is_cuda", lambda: True))
            patched.enter_context(mock.patch.object(fp4_utils, "get_device_capability", lambda *a: cap.as_tuple()))
            try:
                fp4_utils.initialize_fp4_gemm_config()
                out["fp4_gemm"] = fp4_utils.get_fp4_gemm_runner_backend().value
            except Exception as exc:
                out["fp4_gemm"] = f"error: {_error(exc)}"
    return out


# --------------------------------------------------------------------------- parent


def _machine_env(cap: str) -> Dict[str, str]:
    gpus, topology = machine(cap)
    return {"SGLANG_ARCH_CAPABILITY": cap, "SGLANG_ARCH_GPU_COUNT": str(gpus), "SGLANG_ARCH_TOPOLOGY": topology}


def _env(upstream: bool, cap: Optional[str] = None) -> Dict[str, str]:
    from helpers import clean_env
    from sglang_arch.arch.detect import MULTICAST_OFF

    env = clean_env(SGLANG_ARCH_CUDA=CUDA, **_machine_env(cap or capabilities()[0]))
    for name in [*MULTICAST_OFF, "SGLANG_ENABLE_DETERMINISTIC_INFERENCE"]:  # the simulated machine decides
        env.pop(name, None)
    if upstream:
        env["SGLANG_ARCH_DISABLE"] = "1"
    return env


def _run(args: List[str], env: Dict[str, str], timeout: float) -> List[Dict[str, Any]]:
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    lines = [line for line in out.stdout.splitlines() if line.startswith("[")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


def run_zygote(upstream: bool, caps: Sequence[str], timeout: float = 1200) -> List[Dict[str, Any]]:
    """One interpreter that imports SGLang once and forks a child per capability."""
    args = ["--zygote", "--caps", ",".join(caps)] + (["--upstream"] if upstream else [])
    return _run(args, _env(upstream), timeout)


def run_fresh(cap: str, upstream: bool, timeout: float = 900) -> Dict[str, Any]:
    """One fresh interpreter for one capability (no fork): the reference for the zygote."""
    args = ["--child"] + (["--upstream"] if upstream else [])
    return _run(args, _env(upstream, cap), timeout)[0]


def run_matrix(caps: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Both zygotes in parallel (two workers): {"caps": {cap: {"plugin": ..., "upstream": ...}}, "meta": ...}."""
    caps = list(caps or capabilities())
    started = time.time()
    with ThreadPoolExecutor(2) as pool:
        plugin, upstream = pool.map(lambda up: run_zygote(up, caps), (False, True))
    matrix = {cap: {"plugin": p, "upstream": u} for cap, p, u in zip(caps, plugin, upstream)}
    meta = {"wall_s": round(time.time() - started, 1),
            "cpu_s": round(sum(r["cpu_s"] for r in plugin + upstream) + plugin[0]["import_cpu_s"]
                           + upstream[0]["import_cpu_s"], 1)}
    return {"caps": matrix, "meta": meta}


# --------------------------------------------------------------------------- judging

# Vision backends (VisionAttention's names) judged as the catalog's attention choices
# that run the same kernels, until the catalog has a decision of its own for them.
VISION_AS_ATTENTION = {"fa3": "fa3", "fa4": "fa4", "triton_attn": "triton", "sdpa": "torch_native"}
VISION_FALLBACKS = ("triton_attn", "sdpa")  # SGLang's own default off Hopper/Blackwell, then torch's SDPA
FUSION_QUALIFIER = "9.0"
# The judged columns of a cell and their headings in docs/final-backends.md, in order (upstream
# auto-enables fusion on SM90 wherever the model and mode qualify).
COLUMNS = (("prefill", "prefill"), ("decode", "decode"), ("draft", "draft"), ("vision", "vision"),
           ("fusion", f"fusion @{DECODE_TOKENS}"), ("moe", "MoE runner"), ("deep_gemm", "DeepGEMM"),
           ("fp8_gemm", "FP8 GEMM"), ("fp4_gemm", "FP4 GEMM"))


# The MoE / GEMM columns and the kernel catalog's decision that judges each.
MOE_GEMM = {"moe": "moe_runner", "deep_gemm": "deep_gemm", "fp8_gemm": "fp8_gemm", "fp4_gemm": "fp4_gemm"}


@dataclass(frozen=True)
class Quant:
    """What a fixture's weights are, as the registry's MoE policy sees them."""

    kind: Optional[str]  # policies/moe.py QUANT_KINDS; None: a quantization the registry does not judge
    explicit: bool  # --quantization named it
    arch: str  # the HF architecture (DeepSeek-V3's own FP8 rule)
    experts: bool  # the model has routed experts: it builds a MoE runner


def quant_of(model: Model) -> Quant:
    """From the fixture's config.json and its ``--quantization``, with the plugin's own reading
    (``glue/moe.py`` ``kind_of``, ``has_experts``)."""
    from types import SimpleNamespace

    from sglang_arch.integrations.sglang.glue.moe import has_experts, kind_of

    config = json.loads((FIXTURES / model.name / "config.json").read_text())
    explicit = model.args[model.args.index("--quantization") + 1] if "--quantization" in model.args else None
    kind, named = kind_of(explicit, config.get("quantization_config") or {})
    hf = SimpleNamespace(**config)
    if isinstance(config.get("text_config"), dict):
        hf.text_config = SimpleNamespace(**config["text_config"])
    return Quant(kind, named, (config.get("architectures") or [""])[0], has_experts(hf))


def moe_gemm_columns(model: Model) -> Tuple[str, ...]:
    """The MoE / GEMM columns a fixture's cells have: its weights' runner and GEMMs only."""
    quant = quant_of(model)
    if quant.kind is None:
        return ()
    return (("moe",) if quant.experts else ()) + (("deep_gemm", "fp8_gemm") if quant.kind == "fp8_block" else ()) \
        + (("fp4_gemm",) if quant.kind == "nvfp4" else ())


def registry_moe_gemm(name: str, model: Model, cap: str) -> Tuple[Any, bool, str]:
    """(the registry's decision, whether it judges it, its reason) for a MoE / GEMM column."""
    from sglang_arch.arch import resolve
    from sglang_arch.arch.policies import moe

    res, cuda, quant = resolve(cap), tuple(int(x) for x in CUDA.split(".")), quant_of(model)
    if name == "moe":
        decision = moe.moe_runner(res, quant.kind, cuda, quant.arch, quant.explicit)
    elif name == "deep_gemm":
        decision = moe.deep_gemm(res, cuda)
    elif name == "fp8_gemm":
        decision = moe.fp8_gemm(res, cuda, flashinfer=True)
    else:
        decision = moe.fp4_gemm(res, cuda)
    return decision.choice, decision.judged, decision.reason


def moe_gemm_runs(name: str, value: Any, cap: str, model: Model) -> Optional[bool]:
    """The catalog's verdict on a MoE / GEMM column's value on the device ``cap``."""
    from sglang_arch.arch import catalog, parse_capability

    if value is None or _is_error(value) or value == "off" or not registry_moe_gemm(name, model, cap)[1]:
        return None  # nothing built, or a choice the registry leaves to SGLang (FP8 below SM89: D12)
    device, cuda = parse_capability(cap), tuple(int(x) for x in CUDA.split("."))
    verdict = catalog.choice_runs(MOE_GEMM[name], "jit" if name == "deep_gemm" else value, device, cuda,
                                  quant_of(model).kind if name == "moe" else None)
    return None if verdict is None else bool(verdict.runs)


@dataclass(frozen=True)
class Column:
    """One thing a cell builds: the plugin's, upstream's and the expected value, and verdicts."""

    name: str
    plugin: Any
    upstream: Any
    expected: Any
    plugin_runs: Optional[bool]  # None: nothing built (off), or not judged by the catalog
    upstream_runs: Optional[bool]
    why: str = ""

    @property
    def ok(self) -> bool:
        return self.plugin == self.expected and self.plugin_runs is not False


def _is_error(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("error:")


def runs(column: str, value: Any, cap: str, kind: str) -> Optional[bool]:
    """The catalog's verdict on ``value`` for the device ``cap``: None when nothing is built."""
    from sglang_arch.arch import catalog, parse_capability

    if value is None or _is_error(value):  # nothing built: off, or SGLang refused to start
        return None
    device, cuda = parse_capability(cap), tuple(int(x) for x in CUDA.split("."))
    if column in ("prefill", "decode") and kind == "dsa":
        verdict = catalog.choice_runs("dsa", value, device, cuda)
    elif column in ("prefill", "decode", "draft"):
        phase = column if column != "draft" else None
        verdict = catalog.choice_runs("attention", value, device, cuda, "mla" if kind == "dsa" else kind, phase)
    elif column == "vision":
        if "vision" in catalog.DECISIONS:
            verdict = catalog.choice_runs("vision", value, device, cuda)
        else:
            name = VISION_AS_ATTENTION.get(value)
            verdict = name and catalog.choice_runs("attention", name, device, cuda, "mha")
    elif column == "fusion":
        verdict = catalog.choice_runs("fusion", value, device, cuda)
    elif column == "symm_mem":
        verdict = catalog.choice_runs("symm_mem", value, device, cuda)
    else:
        raise ValueError(column)
    return bool(verdict and verdict.runs)


def cell_values(result: Dict[str, Any], model: Model, mode: str) -> Dict[str, Any]:
    """The judged columns of one child's cell: None where the model or mode has no such column.

    A column is a value ``cell`` records, a key here, the catalog decision that judges it
    (``runs``; the MoE / GEMM columns: ``moe_gemm_runs``), the registry's decision and its
    heading in ``COLUMNS`` (``judge_cell`` judges every key).
    """
    cell = result["cells"][f"{model.name}|{mode}"]
    if "error" in cell:
        error = "error: " + cell["error"]
        values = {"prefill": error, "decode": error}
        if mode == "eagle":
            values["draft"] = error
        if model.vision:
            values["vision"] = error
        values["fusion"] = None
        values.update((name, error) for name in moe_gemm_columns(model))
        return values
    if model.kind == "dsa":
        values = {"prefill": cell["dsa"][0], "decode": cell["dsa"][1]}
    else:
        values = {"prefill": cell["prefill"], "decode": cell["decode"]}
    if mode == "eagle":
        values["draft"] = cell.get("draft")
    if model.vision:
        values["vision"] = cell.get("vision")
    values["fusion"] = cell["fusion"] if cell["fusion_gate"] is True else None
    values.update((name, cell.get(name)) for name in moe_gemm_columns(model))
    return values


def _kind_key(kind: str) -> str:
    return "mla" if kind in ("mla", "dsa") else "mha"


def _tier(cap: str) -> Optional[str]:
    from sglang_arch.arch import resolve

    res = resolve(cap)
    return None if res.match == "portable" else str(res.resolved)


def _match(cap: str) -> str:
    from sglang_arch.arch import resolve

    return resolve(cap).match


def runnable_dsa(cap: str) -> bool:
    """Whether any DSA choice of the kernel catalog runs on ``cap``."""
    from sglang_arch.arch import catalog

    return any(runs("prefill", choice, cap, "dsa") for choice in catalog.known_choices("dsa"))


# The draft factory's backends (speculative/draft_utils.py backend_map) that the catalog judges.
DRAFT_BUILDABLE = ("flashinfer", "triton", "fa3", "fa4", "trtllm_mha", "trtllm_mla", "flashmla", "cutedsl_mla")


def runnable_draft(cap: str, kind: str) -> bool:
    """Whether any draft backend SGLang's draft factory can build runs on ``cap``."""
    return any(runs("draft", choice, cap, kind) for choice in DRAFT_BUILDABLE)


def _no_moe_runner_runs(cap: str, error: str) -> bool:
    """The registry's own MoE decision for the experts' kind named in ``error`` has no runner."""
    from sglang_arch.arch import resolve
    from sglang_arch.arch.policies import moe

    kind = error.split("ArchDecisionError: ", 1)[-1].split(" MoE experts:", 1)[0].strip()
    return kind in moe.QUANT_KINDS and moe.moe_runner(resolve(cap), kind).choice is None


def judge_cell(matrix: Dict[str, Any], model: Model, cap: str, mode: str) -> List[Column]:
    """Each column of one cell against the registry's rule.

    Expected: upstream's choice on the capability's tier (itself on an exact tier), where
    the catalog says it runs on this device; else the registry's runnable choice (its
    attention default for the model's kind and phase, its DSA backends; for vision
    SGLang's own off-Hopper default, then SDPA).  Fusion and DSA are the registry's own
    decisions.  Where SGLang refuses the arguments on this capability alike with and
    without the plugin, the refusal is the expected cell.
    """
    plugin_result, upstream_result = matrix[cap]["plugin"], matrix[cap]["upstream"]
    registry = plugin_result["registry"]
    plugin, upstream = cell_values(plugin_result, model, mode), cell_values(upstream_result, model, mode)
    tier = _tier(cap)
    on_tier = cell_values(matrix[tier]["upstream"], model, mode) if tier in matrix else {}
    kv = "fp8_e4m3" if mode == "fp8-kv" else "auto"
    columns = []
    for name in plugin:
        kind = model.kind
        if _is_error(upstream[name]) and plugin[name] == upstream[name]:
            expected, why = upstream[name], "SGLang refuses these arguments here, with or without the registry"
        elif mode == "fp8-kv" and _is_error(plugin[name]) and "ArchDecisionError" in plugin[name] \
                and "FP8 KV cache" in plugin[name]:
            # No DSA kernel reads an FP8 cache on this GPU: the user's own --kv-cache-dtype is refused, with why.
            expected, why = plugin[name], "the registry refuses the FP8 KV cache the user asked for (D10)"
        elif mode == "deterministic" and _is_error(plugin[name]) \
                and "ArchDecisionError: --enable-deterministic-inference:" in plugin[name] \
                and registry.get("deterministic", {}).get(_kind_key(kind), "") is None:
            expected, why = plugin[name], "no deterministic backend runs here: the user's own flag is refused"
        elif kind == "dsa" and _is_error(plugin[name]) and "no DSA kernel has a build for this GPU" in plugin[name] \
                and not runnable_dsa(cap):
            # Nothing runs DSA here (TileLang compiles from SM80): the DSA model is refused, with why.
            expected, why = plugin[name], "no DSA kernel of the catalog runs here: the registry refuses the model"
        elif name == "draft" and _is_error(plugin[name]) and "--speculative-algorithm" in plugin[name] \
                and "ArchDecisionError" in plugin[name] and not runnable_draft(cap, kind):
            expected, why = plugin[name], "no draft backend SGLang can build runs here: the user's own flag is refused"
        elif _is_error(plugin[name]) and "ArchDecisionError" in plugin[name] and "MoE experts:" in plugin[name] \
                and _no_moe_runner_runs(cap, plugin[name]):
            # A model with experts where no MoE runner of their kind has a build: refused with why.
            expected, why = plugin[name], "no MoE runner for the model's experts has a build here: refused with why"
        elif name in MOE_GEMM:
            # The registry's rule (policies/moe.py, glue/moe.py): SGLang's choice on the tier (argument
            # resolution, a model override, the load-time auto) wherever it runs here; else its own decision.
            preferred = on_tier.get(name)
            if preferred is not None and not _is_error(preferred) \
                    and moe_gemm_runs(name, preferred, cap, model) is not False:
                expected, why = preferred, f"upstream's choice on tier {tier}, which runs here"
            elif _is_error(preferred) and not _is_error(plugin[name]) \
                    and moe_gemm_runs(name, plugin[name], cap, model) is not False:
                # Upstream refuses these arguments on the tier for another reason (an attention flag):
                # SGLang's own choice in this process stands where it runs (the glue replaces no other).
                expected, why = plugin[name], f"SGLang's choice (upstream refuses these arguments on tier {tier}), " \
                                              f"which runs here"
            else:
                expected, judged, reason = registry_moe_gemm(name, model, cap)
                why = f"the registry's decision: {reason}" + ("" if judged else " (left to SGLang)")
        elif name == "fusion" and "error" in plugin_result["cells"][f"{model.name}|{mode}"]:
            expected, why = None, "the server stops at start-up: no fusion is built"
        elif name == "fusion":
            qualifies = cell_values(matrix[FUSION_QUALIFIER]["upstream"], model, mode)["fusion"] is not None \
                if FUSION_QUALIFIER in matrix else True
            expected = registry["fusion"] if qualifies else None
            why = "the registry's fusion decision" + ("" if qualifies else " (the model and mode do not auto-enable it)")
        elif kind == "dsa" and name in ("prefill", "decode"):
            expected = registry["dsa"][kv][0 if name == "prefill" else 1]
            why = "the registry's DSA backends"
        else:
            preferred = on_tier.get(name)
            here = upstream[name]
            if (_match(cap) == "generation" and name in ("prefill", "decode", "draft") and here != preferred
                    and here is not None and not _is_error(here) and runs(name, here, cap, kind)):
                # Across majors (13.0 -> 12.1) the tier lends no family: a model's own rule keyed on a
                # family probe (nemotron_h.py: is_blackwell) answers for the device, as upstream does here.
                expected, why = here, f"upstream's choice on this device (tier {tier} is another major), which runs"
            elif preferred is not None and not _is_error(preferred) and runs(name, preferred, cap, kind):
                expected, why = preferred, f"upstream's choice on tier {tier}, which runs here"
            elif name == "vision" and "vision" in registry:
                expected, why = registry["vision"], "the registry's vision decision"
            elif name == "vision":
                expected = next(v for v in VISION_FALLBACKS if runs(name, v, cap, kind))
                why = "the first runnable of SGLang's vision fallbacks"
            elif mode == "deterministic" and name != "draft" and "deterministic" in registry:
                expected = registry["deterministic"][_kind_key(kind)]
                why = f"the registry's deterministic decision (upstream on tier {tier}: {preferred})"
            else:
                pair = registry["attention"][_kind_key(kind)]
                expected = pair[1] if name == "decode" else pair[0]
                why = ("the registry's default" + (f" (upstream on tier {tier}: {preferred}, which does not run here)"
                                                   if tier else " (no tier)"))
        verdict = (lambda value: moe_gemm_runs(name, value, cap, model)) if name in MOE_GEMM else \
            (lambda value: runs(name, value, cap, kind))
        columns.append(Column(name, plugin[name], upstream[name], expected, verdict(plugin[name]),
                              verdict(upstream[name]), why))
    return columns


def judge_allreduce(matrix: Dict[str, Any], cap: str) -> Dict[str, Any]:
    """The machine-wide all-reduce: SGLang's communicator and v2 table against the registry's."""
    plugin, upstream = matrix[cap]["plugin"]["allreduce"], matrix[cap]["upstream"]["allreduce"]
    registry = matrix[cap]["plugin"]["registry"]
    symm = plugin["symm_mem"]
    symm_runs = runs("symm_mem", symm["algorithm"], cap, "mha") if symm["enabled"] else None
    table = registry["custom_ar_v2"]
    table_ok = plugin["custom_ar_v2"] is None or plugin["custom_ar_v2"] == (table or plugin["custom_ar_v2"]) \
        and (table is not None or plugin["custom_ar_v2"].startswith("default"))
    return {"plugin": plugin, "upstream": upstream, "registry": registry["symm_mem"], "symm_runs": symm_runs,
            "upstream_symm_runs": (runs("symm_mem", upstream["symm_mem"]["algorithm"], cap, "mha")
                                   if upstream["symm_mem"]["enabled"] else None),
            "ok": symm == registry["symm_mem"] and symm_runs is not False and table_ok}


def judge(matrix: Dict[str, Any]) -> Dict[Tuple[str, str, str], List[Column]]:
    return {(model.name, cap, mode): judge_cell(matrix, model, cap, mode)
            for cap in matrix for model in MODELS for mode in modes_of(model)}


def counts(matrix: Dict[str, Any], judged: Dict[Tuple[str, str, str], List[Column]]) -> Dict[str, int]:
    from sglang_arch.arch import resolve

    exact = {cap for cap in matrix if resolve(cap).match == "exact"}
    out = {"cells": len(judged), "ok": 0, "equal_to_upstream": 0, "upstream_unrunnable": 0, "upstream_refused": 0,
           "changed_on_exact_tiers": 0, "moe_gemm_cells": 0, "moe_gemm_equal": 0, "moe_gemm_upstream_unrunnable": 0,
           "quantized_cells": 0}
    quantized = {m.name for m in MODELS if quant_of(m).kind not in (None, "unquantized")}
    for (model, cap, mode), columns in judged.items():
        moe_gemm = [c for c in columns if c.name in MOE_GEMM]
        if moe_gemm:  # the MoE runner and GEMM columns alone
            out["moe_gemm_cells"] += 1
            out["moe_gemm_equal"] += all(c.plugin == c.upstream for c in moe_gemm)
            out["moe_gemm_upstream_unrunnable"] += any(c.upstream_runs is False and not _is_error(c.upstream)
                                                       for c in moe_gemm)
        out["quantized_cells"] += model in quantized
        out["ok"] += all(c.ok for c in columns)
        equal = all(c.plugin == c.upstream for c in columns)
        out["equal_to_upstream"] += equal
        out["upstream_unrunnable"] += any(c.upstream_runs is False and not _is_error(c.upstream) for c in columns)
        out["upstream_refused"] += any(_is_error(c.upstream) for c in columns)
        out["changed_on_exact_tiers"] += cap in exact and not equal
    return out


# --------------------------------------------------------------------------- the document


def _mib(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB"


def _symm(s: Dict[str, Any]) -> str:
    return f"{s['algorithm']} {_mib(s['max_bytes'])}" if s.get("enabled") else "off"


def _show(value: Any, ran: Optional[bool]) -> str:
    if value is None:
        return "-"
    text = str(value)
    if _is_error(text):
        return "refused: " + text[len("error: "):].split(":")[0]
    return text + (" ✗" if ran is False else "")


def render(results: Dict[str, Any]) -> str:
    matrix = results["caps"]
    judged = judge(matrix)
    total = counts(matrix, judged)
    _full = [m for m in MODELS if modes_of(m) == tuple(MODES)]
    lines = [
        "# What SGLang 0.5.23 finally builds, per model, GPU and mode",
        "",
        f"Generated by `{COMMAND}` (`test/integration/test_final_backends.py` regenerates it, "
        "fails on any difference, and asserts every cell). Do not edit.",
        "",
        "Each capability runs in a child process that imports `sglang.srt.managers.scheduler` first and calls "
        "`load_plugins()` after, as SGLang's spawned scheduler does, with the GPU simulated "
        "(`SGLANG_ARCH_CAPABILITY`, CUDA 13.0; CUDA faked only where SGLang checks it), then resolves every model "
        "fixture (`test/fixtures/models/`) in every mode with SGLang's own code: the attention backends the model "
        "runner reads and the class SGLang's creator builds, the EAGLE draft worker's backend, the vision "
        "backend `VisionAttention` picks, the fusion backend with the gate every layer asks at a decode batch of "
        f"{DECODE_TOKENS} tokens, and the torch symmetric-memory communicator SGLang builds. For a model with "
        "experts, the MoE runner SGLang finally uses: the resolved `--moe-runner-backend` (argument resolution, "
        "the model overrides) and, where that leaves `auto`, the quantization method's own `create_moe_runner` "
        "(only `MoeRunner`, which builds kernels on a GPU, stood in); for FP8 block weights DeepGEMM "
        "(`_compute_enable_deep_gemm`) and the FP8 block GEMM (`initialize_fp8_gemm_config`, then "
        "`_dispatch_auto_backend`); for NVFP4 weights the FP4 GEMM (`initialize_fp4_gemm_config`). The same "
        "child with `SGLANG_ARCH_DISABLE=1` gives upstream's cell.",
        "",
        "A cell is judged with the kernel catalog (`sglang_arch.arch.catalog`) on the device's own capability "
        "(✗: no build runs there) and against the registry's rule: upstream's choice on the capability's tier "
        "(itself on an exact tier) where it runs on the device, else the registry's runnable choice (its attention "
        "default for the kind and phase; for vision SGLang's off-Hopper default `triton_attn`, then `sdpa`); "
        "the DSA backends and fusion are the registry's own decisions (fusion where upstream auto-enables it for "
        "the model and mode on SM90). The MoE runner and GEMM columns follow the registry's MoE rule "
        "(`policies/moe.py`): upstream's choice on the tier where the catalog has a build of it for the device "
        "(for the experts' quantization), else the registry's decision; below SM89 FP8 weights are SGLang's own "
        "(not judged, D12-D15). A refusal both sides share is SGLang's and expected.",
        "",
        "Quantized MoE fixtures run in the default mode only (their rows exist for the MoE runner and GEMM "
        "columns; the attention columns are judged as for every model). "
        "Machines: 8 GPUs of the tier's typical topology; tiers whose typical machine has one GPU (Jetson, "
        "DGX Spark, Thor) and capabilities resolving to them run one GPU (no all-reduce, no fusion); below every "
        "tier, 8 GPUs on PCIe.",
        "",
        "## Counts",
        "",
        f"- cells (model x capability x mode): **{total['cells']}** ({len(_full)} models x {len(matrix)} "
        f"capabilities x {len(MODES)} modes, and {len(MODELS) - len(_full)} quantized MoE fixtures x "
        f"{len(matrix)} capabilities in the default mode)",
        f"- cells as the registry decides, every built kernel runnable: **{total['ok']}**",
        f"- cells equal to upstream: **{total['equal_to_upstream']}**",
        f"- cells where upstream would build a kernel the catalog says cannot run: **{total['upstream_unrunnable']}**",
        f"- cells where upstream refuses the arguments (at start-up): **{total['upstream_refused']}**",
        f"- cells the registry changes on exact tiers: **{total['changed_on_exact_tiers']}**",
        f"- cells with a MoE runner or GEMM column: **{total['moe_gemm_cells']}** (of them "
        f"{total['quantized_cells']} of the quantized fixtures); with those columns equal to upstream: "
        f"**{total['moe_gemm_equal']}**; where upstream would build a MoE runner or GEMM the catalog says "
        f"cannot run: **{total['moe_gemm_upstream_unrunnable']}**",
        "",
        "## Models",
        "",
        "| fixture | kind | where SGLang picks by capability |",
        "|---|---|---|",
    ]
    lines += [f"| `{m.name}` | {m.kind}{' + vision' if m.vision else ''} | {m.source} |" for m in MODELS]
    lines += ["", "Modes: " + "; ".join(f"`{mode}`: `{' '.join(args) or '(none)'}`" for mode, args in MODES.items())
              + " (EAGLE's draft model is the fixture itself).", ""]
    classes: Dict[Tuple[str, str], set] = {}
    for cap in matrix:
        for model in MODELS:
            for mode in modes_of(model):
                cell = matrix[cap]["plugin"]["cells"][f"{model.name}|{mode}"]
                for phase in ("prefill", "decode", "draft"):
                    name, built = cell.get(phase), cell.get(f"{phase}_class")
                    if name and built:
                        classes.setdefault((name, "mla" if model.kind != "mha" else "mha"), set()).add(
                            built if not built.startswith("refused") else
                            "(its module needs sgl_kernel's CUDA library: not loadable on this CPU machine)"
                            if "sgl_kernel" in built else built[:120])
    lines += ["## Classes SGLang builds (with the plugin)", "", "| backend | kind | class |", "|---|---|---|"]
    lines += [f"| `{name}` | {kind} | {', '.join(sorted(built))} |" for (name, kind), built in sorted(classes.items())]
    lines += [""]
    for cap in matrix:
        plugin = matrix[cap]["plugin"]
        registry = plugin["registry"]
        ar = judge_allreduce(matrix, cap)
        lines += [f"## {cap} ({registry['match']} {registry['tier']}): {plugin['gpus']} GPU"
                  f"{'s' if plugin['gpus'] > 1 else ''}, {plugin['topology']}", ""]
        if plugin["gpus"] > 1:
            lines += [f"All-reduce (every model and mode): `--enable-torch-symm-mem` builds "
                      f"{_show(_symm(ar['plugin']['symm_mem']), ar['symm_runs'])} (upstream "
                      f"{_show(_symm(ar['upstream']['symm_mem']), ar['upstream_symm_runs'])}); custom all-reduce "
                      f"v2 table `{ar['plugin']['custom_ar_v2']}` (upstream `{ar['upstream']['custom_ar_v2']}`)"
                      f"{'' if ar['ok'] else ' **not the registry' + chr(39) + 's**'}.", ""]
        ix = judge_indexer(matrix, cap)
        lines += [f"DeepSeek-V4.1 indexer (every V4.1 index layer's MQA logits): "
                  f"{_indexer_show(ix['plugin'], ix['deep_gemm_runs'])} (upstream "
                  f"{_indexer_show(ix['upstream'], ix['deep_gemm_runs'])})"
                  f"{'' if ix['ok'] else ' **not the registry' + chr(39) + 's**'}.", ""]
        lines += ["| model | mode | " + " | ".join(title for _, title in COLUMNS) + " | upstream, where it differs | "
                  "judged |", "|---|---|" + "---|" * len(COLUMNS) + "---|---|"]
        for model in MODELS:
            for mode in modes_of(model):
                columns = {c.name: c for c in judged[(model.name, cap, mode)]}

                def show(name):
                    c = columns.get(name)
                    return "" if c is None else _show(c.plugin, c.plugin_runs)

                differs = [f"{c.name} {_show(c.upstream, c.upstream_runs)}" for c in columns.values()
                           if c.upstream != c.plugin]
                bad = [f"{c.name}: expected {_show(c.expected, None)} ({c.why})" for c in columns.values() if not c.ok]
                lines.append(f"| {model.name} | {mode} | " + " | ".join(show(name) for name, _ in COLUMNS)
                             + f" | {'; '.join(differs)} | "
                             f"{'ok' if not bad else '**FAIL** ' + '; '.join(bad)} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    sys.path.insert(0, str(HERE))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--upstream", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--write", action="store_true", help=f"write {DOC.relative_to(ROOT)}")
    parser.add_argument("--json", metavar="FILE", help="also write the raw results as JSON")
    parser.add_argument("--zygote", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--caps", help=argparse.SUPPRESS)
    parser.add_argument("--capability", action="append", help="only these capabilities (not with --write)")
    args = parser.parse_args(argv)
    if args.zygote:
        print(json.dumps(zygote(args.upstream, args.caps.split(","))))
        return 0
    if args.child:  # a fresh interpreter, as SGLang's scheduler: import first, then the plugins
        sys.path.insert(0, str(HERE))
        os.environ.setdefault("SGLANG_OPT_USE_INKLING_CUSTOM_AR", "0")
        started = time.process_time()
        import sglang.srt.managers.scheduler  # noqa: F401

        result = child(args.upstream)
        result["import_cpu_s"] = round(time.process_time() - started - result["cpu_s"], 1)
        print(json.dumps([result]))
        return 0
    results = run_matrix(args.capability)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.write:
        DOC.write_text(render(results))
    print(json.dumps(dict(results["meta"], **counts(results["caps"], judge(results["caps"])))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
