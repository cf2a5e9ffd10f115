"""MoE runners, FP8 block / FP4 GEMM backends and DeepGEMM: from the registry.

The registry keeps SGLang's choice wherever the kernel catalog has a build of its
kernels for this GPU, and takes one that does elsewhere (docs/differences.md D12-D15).
Explicit choices (``--moe-runner-backend``, ``--fp8-gemm-backend``,
``--fp4-gemm-backend``) that cannot run here fail during argument resolution, before
any weight is loaded, naming what runs instead; the same values picked by a model
override or an earlier pass (from an identity probe, not by the user) are replaced by
the registry's choice with one warning (D20).  Without an NVIDIA GPU, off CUDA and on
ROCm / NPU everything stays SGLang's.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Dict, Optional, Tuple

from . import REGISTRY, ArchDecisionError, device_context, fail_open, per_machine, routed_context

_OVERRIDES = "sglang.srt.arg_groups.overrides"
_FP8 = "sglang.srt.layers.quantization.fp8_utils"
_FP4 = "sglang.srt.layers.quantization.fp4_utils"
_CONFIGURER = "sglang.srt.layers.deep_gemm_wrapper.configurer"
_UNQUANT = "sglang.srt.layers.quantization.unquant"
_MXFP4 = "sglang.srt.layers.quantization.mxfp4"

# quant_method (HF quantization_config, or --quantization) -> the experts' kind
_NVFP4_METHODS = ("modelopt_fp4", "nvfp4")


def _cuda_platform() -> bool:
    from sglang.srt.runtime_context import get_platform

    platform = get_platform()
    return bool(platform.is_cuda) and not platform.is_hip and not platform.is_npu


def _quant_config(view: Any) -> Any:
    hf_config = sys.modules[_OVERRIDES].model_config_of(view).hf_config
    config = getattr(hf_config, "quantization_config", None)
    if config is None:  # a multimodal wrapper's language model (Kimi-K3's text_config)
        config = getattr(getattr(hf_config, "text_config", None), "quantization_config", None)
    return config or {}


def quant_kind(view: Any) -> Tuple[Optional[str], bool]:
    """(kind of the MoE experts, whether ``--quantization`` named it); kind None: a
    quantization the registry does not judge (SGLang decides)."""
    return kind_of(view.quantization, _quant_config(view), _fp4_experts(view))


def _fp4_experts(view: Any) -> bool:
    """Whether the routed experts of an FP8 checkpoint are MXFP4 as SGLang serves them:
    ``ModelConfig.is_fp4_experts`` (the config's ``routed_experts_quant_method``, MiMo-V2's
    ``store_dtype``, DeepSeek-V4's checkpoint probe), unless SGLang dequantizes them to FP8
    (``SGLANG_DSV4_FP4_DEQUANT``) or a hybrid checkpoint serves them as NVFP4."""
    model_config = sys.modules[_OVERRIDES].model_config_of(view)
    if not getattr(model_config, "is_fp4_experts", False) or getattr(model_config, "nvfp4_moe_meta", None) is not None:
        return False
    from sglang.srt.environ import envs  # only for checkpoints with FP4 experts

    return not envs.SGLANG_DSV4_FP4_DEQUANT.get()


def compressed_tensors(view: Any) -> bool:
    """Whether the experts are an llm-compressor (compressed-tensors) checkpoint's."""
    return _method(view.quantization, _quant_config(view))[0] == "compressed-tensors"


def _method(explicit: Optional[str], config: Any) -> Tuple[Optional[str], dict]:
    """(the quantization method, lower case; None: unquantized, the config as a dict)."""
    if not isinstance(config, dict):
        config = getattr(config, "__dict__", {}) or {}
    method = explicit or config.get("quant_method")
    return (None if method is None else str(method).lower()), config


def kind_of(explicit: Optional[str], config: Any,
            fp4_experts: Optional[bool] = None) -> Tuple[Optional[str], bool]:
    """The experts' kind from ``--quantization`` and the HF ``quantization_config``;
    ``fp4_experts``: whether an FP8 checkpoint's routed experts are served as MXFP4
    (``_fp4_experts``, from SGLang's model config); None: as the config's
    ``routed_experts_quant_method`` says."""
    method, config = _method(explicit, config)
    if method is None:
        return "unquantized", False
    algo = str(config.get("quant_algo", "")).upper()
    if method == "compressed-tensors":
        return _compressed_tensors_kind(config), bool(explicit)
    if method == "fp8":
        if fp4_experts is None:
            fp4_experts = config.get("routed_experts_quant_method") == "mxfp4"
        if fp4_experts:
            return "fp8_mxfp4", bool(explicit)  # Fp8Config.get_quant_method's MXFP4 expert wrappers
        return ("fp8_block" if config.get("weight_block_size") else None), bool(explicit)
    if method == "mxfp8" or (method.startswith("modelopt") and algo == "MXFP8"):
        return "mxfp8", bool(explicit)
    if method in _NVFP4_METHODS or (method == "modelopt" and algo == "NVFP4"):
        return "nvfp4", bool(explicit)
    if method == "mxfp4":
        return "mxfp4", bool(explicit)
    return None, bool(explicit)


def _formats(config: dict) -> Tuple[list, list]:
    groups = config.get("config_groups") or {}
    groups = [g for g in groups.values() if isinstance(g, dict)] if isinstance(groups, dict) else []
    return [str(config.get("format") or "")] + [str(g.get("format") or "") for g in groups], groups


def _compressed_tensors_kind(config: dict) -> Optional[str]:
    """llm-compressor's packed FP4 formats, as SGLang 0.5.23 serves their experts:

    - ``mxfp4-pack-quantized`` (Kimi-K3): ``CompressedTensorsConfig.get_quant_method``
      sends MoE layers whose format names mxfp4 to ``Mxfp4MoEMethod``, the MXFP4 experts
      method GPT-OSS uses (its runners: flashinfer_mxfp4, triton_kernel, triton);
    - ``nvfp4-pack-quantized`` with 4-bit activations (W4A4, Command-A): the
      ``CompressedTensorsW4A4Nvfp4MoE`` scheme, flashinfer_trtllm or flashinfer_cutlass.
      Weight-only NVFP4 (no input activations) runs Marlin whatever the flag says: not
      judged, nor any other compressed-tensors scheme (INT4, W8A8 FP8, ...).
    """
    formats, groups = _formats(config)
    if any("mxfp4" in fmt for fmt in formats):
        return "mxfp4"
    if any("nvfp4" in fmt for fmt in formats):
        acts = [g.get("input_activations") for g in groups]
        if acts and all(isinstance(a, dict) and a.get("num_bits") == 4 for a in acts):
            return "nvfp4"
    return None


# HF config fields that give a model routed experts (Qwen-MoE, Mixtral, DeepSeek, GPT-OSS, ...)
_EXPERT_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")


def has_experts(hf_config: Any) -> bool:
    """Whether the model has MoE experts at all (a dense model never builds a MoE runner)."""
    for config in (hf_config, getattr(hf_config, "text_config", None)):
        for field in _EXPERT_FIELDS:
            value = getattr(config, field, None) if config is not None else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return True
    return False


def _user_value(view: Any, field: str) -> Any:
    """What the user passed for ``field`` (SGLang's raw input), not a pass's declaration."""
    server_args = object.__getattribute__(view, "_server_args") if hasattr(view, "_server_args") else view
    raw = getattr(server_args, "_raw_input", None) or {}
    return raw.get(field, "auto")


def _refuse(flag: str, name: str, check: Any) -> None:
    runs = ", ".join(check.alternatives) or "none of the backends the registry knows"
    raise ArchDecisionError(f"{flag} {name}: {check.reason}. Valid here: {runs}. (checked by {REGISTRY})")


_GEMM_FLAGS = (("--fp8-gemm-backend", "fp8_gemm_runner_backend", "fp8_gemm", "FP8 block GEMM"),
               ("--fp4-gemm-backend", "fp4_gemm_runner_backend", "fp4_gemm", "FP4 GEMM"))


def _gemm_backends(ctx: Any, view: Any) -> dict:
    """Judge the FP8 / FP4 GEMM backends the arguments name: one the user passed that
    cannot run here is refused; one a model override or an earlier pass picked (an
    identity probe's choice: DeepSeek-V4.1's flashinfer_cutedsl, LongCat's
    flashinfer_trtllm, Muse Glimmer's marlin) is replaced by ``auto``, which the
    registry resolves at load time (``fp8_gemm_config`` / ``fp4_gemm_config``)."""
    fixed = {}
    for flag, field, decision, what in _GEMM_FLAGS:
        name = getattr(view, field, "auto")
        if not name or name == "auto":
            continue
        check = ctx.check_gemm(decision, name)
        if check.valid is not False:
            continue
        if _user_value(view, field) == name:
            _refuse(flag, name, check)
        fixed[field] = (what, name, check.reason)
    return fixed


def _warn_replaced_gemm(fixed: dict) -> None:
    for what, name, reason in fixed.values():
        sys.modules[_OVERRIDES].logger.warning(
            "%s %s, picked by a model override or an earlier pass, cannot run here (%s); the "
            "registry's choice for auto instead (%s).", what, name, reason, REGISTRY)


def _declare(view: Any, fields: dict) -> None:
    """Declare ``fields`` on the server arguments under resolution, as this pass's own
    decisions (SGLang's pass runs after and declares the MoE runner)."""
    overrides = sys.modules[_OVERRIDES]
    server_args = object.__getattribute__(view, "_server_args")
    source = "_moe_runner_backend_quant_constraints"
    overrides.declare_resolution(server_args, source, **fields)
    overrides.validate_declarations(server_args, [(source, dict(fields))])


@fail_open
def moe_runner_backend(view: Any) -> Optional[dict]:
    """SGLang's MoE runner pass (``_moe_runner_backend_quant_constraints``), registry first.

    Checks the MoE runner and FP8 / FP4 GEMM backends the arguments name (the user's are
    refused where they cannot run, a model override's replaced); for ``auto`` declares
    the registry's runner where SGLang's has no build here.  None: SGLang's own pass
    runs (its answer runs here, or the registry does not judge this case); a GEMM
    backend replaced then is declared here, before SGLang's pass.
    """
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    fixed = _gemm_backends(ctx, view)
    gemm = {field: "auto" for field in fixed}
    runner = _moe_runner(ctx, view)
    if runner is None and gemm:
        _declare(view, gemm)  # before the warnings: a failed declaration leaves SGLang's pass alone
    _warn_replaced_gemm(fixed)
    return {**gemm, **runner} if runner is not None else None


def _moe_runner(ctx: Any, view: Any) -> Optional[dict]:
    if view.quantization == "nvfp4_online":
        return None  # SGLang's own SM100/SM103 requirement, then its runner list
    kind, explicit_quantization = quant_kind(view)
    if kind is None:
        return None
    runner = view.moe_runner_backend
    if runner == "auto" and compressed_tensors(view):
        # The compressed-tensors schemes pick their own runner for auto (W4A4 NVFP4:
        # trtllm-gen on Blackwell, else CUTLASS); the registry's auto rule models ModelOpt's
        # and GPT-OSS's methods, so it judges these experts only where an override named one.
        return None
    if runner != "auto":
        check = ctx.check_moe_runner(runner, kind)
        if check.valid is not False:
            return None
        if _user_value(view, "moe_runner_backend") == runner:
            _refuse("--moe-runner-backend", runner, check)
        # a model override chose it from an identity probe: the registry's runner instead
    hf_config = sys.modules[_OVERRIDES].model_config_of(view).hf_config
    arch = (getattr(hf_config, "architectures", None) or [""])[0]
    decision = ctx.moe_runner(kind, arch, explicit_quantization)
    if decision.choice is None:
        if not has_experts(hf_config):
            return None  # a dense model builds no MoE runner: nothing to refuse
        raise ArchDecisionError(f"{kind} MoE experts: {decision.reason}; no MoE runner for them runs here. "
                                f"(checked by {REGISTRY})")
    if decision.choice == runner or (runner == "auto" and not decision.changed):
        return None
    if runner != "auto":
        sys.modules[_OVERRIDES].logger.warning(
            "MoE runner %s, picked by a model override or an earlier pass, cannot run %s experts here (%s); "
            "%s instead (%s; %s).",
            runner, kind, check.reason, decision.choice, decision.reason, REGISTRY)
    else:
        sys.modules[_OVERRIDES].logger.warning("MoE runner %s for %s experts (%s; %s).", decision.choice, kind,
                                               decision.reason, REGISTRY)
    return {"moe_runner_backend": decision.choice}


@fail_open
def deep_gemm_enabled() -> Optional[bool]:
    """``_compute_enable_deep_gemm``: False where SGLang would enable DeepGEMM on a GPU it
    has no build for; None (SGLang's own checks: the package, its APIs, the env) elsewhere."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    decision = ctx.deep_gemm()
    return False if decision.choice == "off" and decision.upstream == "on" else None


def refresh_deep_gemm_flags(module: Any) -> None:
    """Recompute the configurer's import-time flags after its function is routed (the
    plugin routes a module once its code has run, before any other module imports them)."""
    if module.ENABLE_JIT_DEEPGEMM and deep_gemm_enabled() is False:
        module.ENABLE_JIT_DEEPGEMM = False
        module.DEEPGEMM_BLACKWELL = False
        module.DEEPGEMM_SCALE_UE8M0 = False
        module.DEEPGEMM_NEED_TMA_ALIGNED_SCALES = not getattr(module, "_is_musa", False)
        module.DEEPGEMM_PAGED_SPARSE_MQA_LOGITS = False


def _set_gemm_backend(module: str, field: str, decide: Any, enum: str, global_name: str) -> bool:
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return False
    mod = sys.modules[module]
    if getattr(mod.get_exec().kernel, field) != "auto":
        return False  # explicit: checked during argument resolution
    decision = decide(ctx)
    if decision.choice is None or not decision.changed:
        return False
    setattr(mod, global_name, getattr(mod, enum)(decision.choice))
    return True


@fail_open
def fp8_gemm_config() -> bool:
    """``initialize_fp8_gemm_config``: the registry's FP8 block GEMM where SGLang's ``auto``
    has no build here (True: set; False: SGLang's own function runs)."""

    def decide(ctx: Any) -> Any:
        from sglang.srt.utils import is_flashinfer_available

        return ctx.fp8_gemm(deep_gemm_on=bool(sys.modules[_CONFIGURER].ENABLE_JIT_DEEPGEMM),
                            flashinfer=bool(is_flashinfer_available()))

    return _set_gemm_backend(_FP8, "fp8_gemm_runner_backend", decide, "Fp8GemmRunnerBackend",
                             "FP8_GEMM_RUNNER_BACKEND")


@fail_open
def fp4_gemm_config() -> bool:
    """``initialize_fp4_gemm_config``: the registry's NVFP4 GEMM where SGLang's ``auto``
    has no build here (True: set; False: SGLang's own function runs)."""
    return _set_gemm_backend(_FP4, "fp4_gemm_runner_backend", lambda ctx: ctx.fp4_gemm(),
                             "Fp4GemmRunnerBackend", "FP4_GEMM_RUNNER_BACKEND")


@fail_open
def bf16_gemm_cutedsl() -> Optional[bool]:
    """``initialize_bf16_gemm_config``: ``--bf16-gemm-backend auto`` becomes ``cutedsl`` (or
    ``torch`` under deterministic inference) where ``get_platform().is_sm100``; for that call
    the registry's decision answers the fact (``policies/moe.py`` ``bf16_gemm``): whether its
    BF16 GEMM is SGLang's CuTe DSL kernel.  None (SGLang's own probe) for an explicit backend,
    whose SM100 check of ``cutedsl`` stays SGLang's, and where the registry does not decide."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    if sys.modules[_UNQUANT].get_exec().kernel.bf16_gemm_backend != "auto":
        return None
    return ctx.bf16_gemm().choice == "cutedsl"


# --- block-FP8 weights' UE8M0 requantization at load (policies/quant.py) ---

_REQUANT: dict = {}


@fail_open
def dense_ue8m0_requant_sm() -> Optional[int]:
    """What ``get_device_sm()`` answers while ``should_deepgemm_weight_requant_ue8m0`` reads
    it for its dense SM12x check (the ``scoped`` form): 120 (SGLang's SM of FP32 dense
    scales) where the registry's dense block-FP8 GEMM reads FP32 scales, else the device's
    own SM (``policies/quant.dense_ue8m0_requant``).  Asked per weight at load; decided once
    per machine.  None (SGLang's probe) without an NVIDIA GPU.  The device is the one
    SGLang's probe reads (no platform override reaches ``get_device_sm``)."""
    ctx = device_context()
    if ctx is None:
        return None
    return per_machine(_REQUANT, ctx, "dense", lambda: ctx.dense_ue8m0_requant().check_sm)


# --- load-time quantization rules SGLang reads from one platform fact (policies/quant.py) ---
#
# The ``scoped_fact`` / ``scoped`` forms: for the call of the function that holds the rule,
# the fact answers the registry's decision.  Decided once per machine (``per_machine``); a call costs one dictionary look-up.

_QUANT_FACTS: dict = {}


def _quant_fact(rule: str, ctx: Any) -> Optional[bool]:
    if ctx is None:
        return None
    return per_machine(_QUANT_FACTS, ctx, rule, lambda: ctx.quant_fact(rule).value)


def _cuda_quant_fact(rule: str) -> Optional[bool]:
    """A load-time rule answered from the routed machine, on SGLang's CUDA platform only (the
    machine is asked first: without one, no SGLang module is imported)."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    return _quant_fact(rule, ctx)


@fail_open
def hopper_bf16_weight_cache() -> Optional[bool]:
    """``get_platform().is_sm90`` in ``Fp8LinearMethod.process_weights_after_loading_block_quant``:
    whether block-32 FP8 linears on Triton keep a BF16 weight cache (opt-in)."""
    return _cuda_quant_fact("hopper_bf16_weight_cache")


@fail_open
def deep_gemm_sm100_block32() -> Optional[bool]:
    """``get_platform().is_sm100`` in ``dispatch_w8a8_block_fp8_linear``'s SM100 arm: block-32
    FP8 on DeepGEMM's SM100 kernel (None where the registry's DeepGEMM is off)."""
    return _cuda_quant_fact("deep_gemm_sm100_block32")


@fail_open
def deep_gemm_sm100_fused_activation() -> Optional[bool]:
    """``get_platform().is_sm100`` in ``DenseSiluAndMulQuant.__init__``: SiLU-and-mul fused with
    the FP8 quantization DeepGEMM's SM100 dense GEMM reads (None where DeepGEMM is off)."""
    return _cuda_quant_fact("deep_gemm_sm100_fused_activation")


@fail_open
def triton_mxfp4_persistent() -> Optional[bool]:
    """``get_platform().is_sm100`` in ``_swizzle_mxfp4``: triton_kernels' persistent MXFP4 matmul."""
    return _cuda_quant_fact("triton_mxfp4_persistent")


@fail_open
def marlin_mxfp4_hopper_widths() -> Optional[bool]:
    """``get_platform().is_sm90`` in ``Mxfp4MarlinMoEMethod.create_weights``: the experts keep
    their logical width until Marlin's preparation pads it."""
    return _cuda_quant_fact("marlin_mxfp4_hopper_widths")


@fail_open
def nvfp4_native_prefill() -> Optional[bool]:
    """``get_platform().is_sm100`` in ``handle_nvfp4_prefill_kv_dequant_dtype``: with an NVFP4
    KV cache and no backend named, whether prefill reads native NVFP4 (``trtllm_mha``)."""
    return _cuda_quant_fact("nvfp4_native_prefill")


@fail_open
def mxfp8_moe_quantizer_sm107() -> Optional[bool]:
    """What ``_is_sm107_supported()`` answers while ``_prepare_flashinfer_mxfp8_activations``
    reads it (the ``scoped`` form): whether FlashInfer's MXFP8 quantizer takes the MoE
    activations.  Asked per MoE call: one look-up.  The probe reads the device
    (``get_device_capability``), so the device's context answers, not a platform override."""
    return _quant_fact("mxfp8_moe_quantizer_sm107", device_context())


@fail_open
def minimax_fp8_index_hopper() -> Optional[bool]:
    """``get_platform().is_sm90`` in ``get_minimax_sparse_index_dtype``: MiniMax's sparse index K
    in FP8 beside an FP8 KV cache (the Hopper Triton decode reads it)."""
    return _cuda_quant_fact("minimax_fp8_index_hopper")


@fail_open
def lora_fp8_whole_row_fast_div() -> Optional[bool]:
    """``_WHOLE_ROW_FAST_DIV`` in ``kernels/ops/lora/moe/fp8_quant.py``: whether the LoRA MoE's
    FP8 quantizer divides whole rows with fast math.  SGLang binds it at import as a Triton
    ``constexpr`` read only inside ``@triton.jit`` code, so no Python function is there to
    hook: the plugin binds the module value to this answer once the module has run, before
    Triton compiles anything that reads it (a ``value`` target).  The module reads torch's
    capability, so the device's context answers, not a platform override."""
    return _quant_fact("lora_fp8_whole_row_fast_div", device_context())


# --- Tuned GEMM / GEMV paths keyed to one architecture (policies/gemm.py) ---
#
# SGLang reads the device's identity inline, per call, to take a path tuned on one GPU.
# The registry decides each path once per machine (``ctx.gemm_paths()``, cached below);
# the plugin's ``scoped`` hooks answer the probe the call site reads with that decision.
# The device is the one SGLang's probes read (none of them reads the platform context), so
# these ask ``device_context``.  Each ask answers ``None`` (SGLang's own probe) without an
# NVIDIA GPU; per call: one dict look-up once the machine's answer is cached.

_GEMM_PATHS: dict = {}


def _per_machine(key: Any, decide: Callable[..., Any], *args: Any) -> Any:
    """``decide(ctx, *args)`` once per machine; a call after the first is one look-up (no
    closure built)."""
    ctx = device_context()
    if ctx is None:
        return None
    entry = _GEMM_PATHS.get(key)
    if entry is not None and entry[0] is ctx:
        return entry[1]
    return per_machine(_GEMM_PATHS, ctx, key, lambda: decide(ctx, *args))


def _gemm_paths() -> Optional[Any]:
    return _per_machine(None, lambda ctx: ctx.gemm_paths())


def _decide_k3_splitk_sm(ctx: Any) -> int:
    if ctx.gemm_paths().k3_front_splitk.on:
        return 107
    own = ctx.resolution.requested.sm
    return own if own != 107 else 0


def _k3_splitk_sm() -> Optional[int]:
    return _per_machine("k3_splitk_sm", _decide_k3_splitk_sm)


@fail_open
def bf16_gemm_k3_splitk_sm() -> Optional[int]:
    """What ``get_device_sm()`` answers where ``use_cutedsl_bf16_gemm`` and
    ``_tgv_bf16_gemm_out_run`` test it against 107 for K3's split-K table: 107 where the
    registry takes the table (``policies/gemm.k3_front_splitk``), else the device's own SM
    when that is not 107, else 0."""
    return _k3_splitk_sm()


@fail_open
def hopper_gemv_sm12x() -> Optional[bool]:
    """What ``_is_sm12x()`` answers in ``hopper_bf16_gemv``'s window and its tile config
    (the two must agree: the SM12x window admits K only the unroll-1 kernel serves)."""
    paths = _gemm_paths()
    return None if paths is None else paths.hopper_gemv_sm12x.on


@fail_open
def router_gemv_sm100_family() -> Optional[bool]:
    """What ``_is_sm100_family(...)`` answers in ``router_gemv_cute_eligible``: whether the
    registry takes Muse Spark's CuTe DSL router GEMV on this machine."""
    paths = _gemm_paths()
    return None if paths is None else paths.router_gemv.on


@fail_open
def nemotron_prefill_overlap() -> Optional[bool]:
    """What ``is_sm120()`` answers in ``NemotronHMoE._forward_core``: whether the registry
    takes Nemotron-H's prefill overlap on this machine."""
    paths = _gemm_paths()
    return None if paths is None else paths.nemotron_prefill_overlap.on


@fail_open
def sbo_deep_gemm_blackwell() -> Optional[bool]:
    """What ``is_blackwell()`` answers in ``SboFlags.enable_combine_down_gemm_two_stream_overlap``:
    True where the registry does not overlap the combine with DeepGEMM's down GEMM."""
    paths = _gemm_paths()
    return None if paths is None else not paths.sbo_deep_gemm_down_overlap.on


# Paths SGLang keys to a torch read written inline (``torch.cuda.get_device_capability()``
# compared in a larger function): the capability the comparison reads is answered, once per
# machine, so that the comparison says the registry's decision: the device's own where
# SGLang's check already says it, else the capability the path is keyed to (on) or (0, 0)
# (off, as SGLang's check reads on no GPU of that architecture).  The plugin answers it
# through the module's torch for the call (``scoped_capability``).

_PATH_CHECKS = {
    # path: (SGLang's check of the capability, the capability answered for on, for off)
    "qwen4_decode_fusion": (lambda cap: cap[0] == 10, (10, 0), (0, 0)),
    "marlin_lora_b200_decode": (lambda cap: cap == (10, 0), (10, 0), (0, 0)),
    "lora_cutedsl_wide_tiles": (lambda cap: cap < (10, 0), (9, 0), (10, 0)),
    "muse_spark_gemm_ag": (lambda cap: cap == (10, 3), (10, 3), (0, 0)),
    "muse_spark_finalize_ar": (lambda cap: cap[0] == 10, (10, 0), (0, 0)),
}


def _decide_capability(ctx: Any, path: str) -> Tuple[int, int]:
    on = getattr(ctx.gemm_paths(), path).on
    holds, when_on, when_off = _PATH_CHECKS[path]
    own = ctx.resolution.requested.as_tuple()
    if holds(own) == on:
        return own
    return when_on if on else when_off


def _path_capability(path: str) -> Optional[Tuple[int, int]]:
    return _per_machine(path, _decide_capability, path)


@fail_open
def qwen4_decode_capability() -> Optional[Tuple[int, int]]:
    """The capability ``prepare_qwen4_decode_comm`` reads (major 10: Qwen's fused decode)."""
    return _path_capability("qwen4_decode_fusion")


@fail_open
def marlin_lora_decode_capability() -> Optional[Tuple[int, int]]:
    """The capability the Marlin LoRA MoE runner's B200 decode factorization check reads."""
    return _path_capability("marlin_lora_b200_decode")


@fail_open
def lora_cutedsl_tile_capability() -> Optional[Tuple[int, int]]:
    """The capability the CuTe DSL BF16 LoRA MoE provider's tile set reads (below 10.0: wide tiles)."""
    return _path_capability("lora_cutedsl_wide_tiles")


@fail_open
def muse_spark_gemm_ag_capability() -> Optional[Tuple[int, int]]:
    """The capability Muse Spark's GEMM + all-gather checks read (10.3), at init and per call."""
    return _path_capability("muse_spark_gemm_ag")


@fail_open
def muse_spark_finalize_ar_capability() -> Optional[Tuple[int, int]]:
    """The capability Muse Spark's finalize AR fusion check reads (major 10)."""
    return _path_capability("muse_spark_finalize_ar")


# --- DeepSeek-V4: the model's inline Blackwell / Hopper path reads ---
#
# ``deepseek_v4._apply_wo_a_bf16_matmul``, ``MQALayer._normalize_q_lora``,
# ``deepseek_v4_mhc._mix_stats_impl`` / ``_combine`` and the V4.1 indexer's
# ``scoring.decode_scores`` read ``get_platform().is_blackwell`` / ``is_sm90`` per layer to
# take their Triton paths tuned on those architectures.  One registry decision answers every
# read (``policies/deepseek.dsv4_kernel_paths``), decided once per machine: per call, the
# machine context and one dictionary look-up.
_dsv4_paths: Dict[Any, Tuple[Any, Any]] = {}


@fail_open
def dsv4_kernel_paths() -> Optional[Tuple[bool, bool]]:
    """(``is_blackwell``, ``is_sm90``) as DeepSeek-V4's kernel paths read them: whether the
    model takes its Blackwell and its Hopper paths, as the registry decides.  None (SGLang's
    facts) without an NVIDIA GPU, off CUDA."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None

    def decide() -> Tuple[bool, bool]:
        paths = ctx.dsv4_kernel_paths()
        return paths.blackwell, paths.hopper

    return per_machine(_dsv4_paths, ctx, None, decide)


@fail_open
def dsv4_blackwell_path() -> Optional[bool]:
    """The Blackwell half of ``dsv4_kernel_paths`` (a method that reads only that fact)."""
    paths = dsv4_kernel_paths()
    return None if paths is None else paths[0]


@fail_open
def dsv4_hopper_path() -> Optional[bool]:
    """The Hopper half of ``dsv4_kernel_paths`` (the V4.1 indexer's paged decode scoring)."""
    paths = dsv4_kernel_paths()
    return None if paths is None else paths[1]


# --- DeepSeek-V4.1's indexer (dsv4/v41_indexer.is_sm100_or_newer) ---
_dsv41_indexer: Dict[Any, Tuple[Any, Any]] = {}


@fail_open
def dsv41_indexer_deep_gemm() -> Optional[bool]:
    """``is_sm100_or_newer`` as the V4.1 indexer reads it: whether its index layers score
    with DeepGEMM's MQA logits (decode, prefill, the candidate sparse table and the fused
    index store), as the registry decides (``policies/deepseek.dsv41_indexer_deep_gemm``:
    never where DeepGEMM has no build for the device).  None (SGLang's) without an
    NVIDIA GPU, off CUDA."""
    ctx = routed_context()
    if ctx is None or ctx.resolution is None or not _cuda_platform():
        return None
    from ....arch.policies.deepseek import dsv41_indexer_deep_gemm as rule

    res = ctx.resolution

    def decide() -> bool:
        return rule(res, ctx.cuda).deep_gemm

    return per_machine(_dsv41_indexer, ctx, None, decide)


# --- the DeepSeek family's router GEMM (deepseek_common/utils.tiny_router_gemm_max_tokens) ---
_tiny_router: Dict[Any, Tuple[Any, Any]] = {}


@fail_open
def tiny_router_gemm_off(*args: Any, **kwargs: Any) -> Optional[int]:
    """``tiny_router_gemm_max_tokens`` (asked once per router layer at model init): -1 (cuBLAS)
    where the registry keeps the router off SGLang's tiny BF16 GEMM
    (``policies/deepseek.tiny_router_gemm``); None where it may take it, so SGLang's function
    goes on to its CUDA, dtype and shape checks (its own SM90 floor then holds on every
    device whose tier takes the tiny GEMM).  None (SGLang's) without an NVIDIA GPU, off CUDA.
    The function's arguments are SGLang's to judge: none of them is read here."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    tiny = per_machine(_tiny_router, ctx, None, lambda: ctx.tiny_router_gemm().tiny)
    return None if tiny else -1


# --- the DeepSeek-V3 fused QKV-A GEMM's automatic backend (kernels/ops/gemm/fused_a_gemm.py) ---
_FUSED_A = "sglang.kernels.ops.gemm.fused_a_gemm"
_fused_a: Dict[Any, Tuple[Any, Any]] = {}


@fail_open
def fused_a_gemm_auto_backend() -> Any:
    """``dsv3_fused_a_gemm``'s ``backend="auto"`` (``_AUTO_BACKEND``, bound at import from
    ``is_sm120_supported()``): the registry's backend (``policies/deepseek.fused_a_gemm_auto``),
    SGLang's ``FusedAGemmBackend`` member, decided once per machine (asked per GEMM call: the
    machine context and one look-up).  None (SGLang's) without an NVIDIA GPU, off CUDA."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None

    def decide() -> Any:
        return sys.modules[_FUSED_A].FusedAGemmBackend(ctx.fused_a_gemm_auto().backend)

    return per_machine(_fused_a, ctx, None, decide)


# --- DeepSeek's shared-expert fusion under Hopper NVFP4 + Marlin ---


@fail_open
def shared_experts_hopper_marlin_hold() -> Optional[bool]:
    """``DeepseekV2ForCausalLM.shared_experts_fusion_disable_reason``'s ``is_sm90_supported()``
    (asked once per runner): whether an NVFP4 checkpoint on the Marlin MoE runner keeps its
    shared expert unfused here, as the registry decides
    (``policies/deepseek.shared_experts_hopper_marlin_hold``); SGLang's quantization and runner
    conditions stay around it.  None (SGLang's probe) without an NVIDIA GPU, off CUDA."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    return ctx.shared_experts_hopper_marlin_hold().hold


# --- DeepSeek's shared expert: the fused NVFP4 GEMM + SwiGLU + quant ---


@fail_open
def nvfp4_swiglu_fusion() -> Optional[bool]:
    """``DeepseekV2MoE.__init__``'s ``get_platform().is_sm100`` (once per MoE layer): whether a
    W4A4 NVFP4 shared expert may take SGLang's fused GEMM + SwiGLU + quant kernel, as the
    registry decides (``policies/deepseek.nvfp4_swiglu_fusion``); SGLang's LoRA, quantization,
    backend, shape and CUDA-graph conditions stay around it.  None (SGLang's fact) without an
    NVIDIA GPU, off CUDA."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    return ctx.nvfp4_swiglu_fusion().fused


# --- DeepSeek-V4.1's index logits dtype (kernels/ops/attention/dsv4/index_logits.py) ---
_index_logits: Dict[Any, Tuple[Any, Any]] = {}


@fail_open
def dsv41_bf16_index_logits() -> Optional[bool]:
    """``index_logits_dtype``'s ``_is_sm100()``: whether DeepSeek-V4.1's index logits are bf16
    here, as the registry decides (``policies/deepseek.dsv41_bf16_index_logits``); the
    environment override stays SGLang's.  Decided once per machine (asked per indexer call:
    the machine context and one look-up).  None (SGLang's probe) without an NVIDIA GPU, off
    CUDA."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    return per_machine(_index_logits, ctx, None, lambda: ctx.dsv41_bf16_index_logits().bf16)


# --- the NVFP4 KV cache's dequantize (srt/layers/quantization/kvfp4_tensor.py) ---
#
# ``NVFP4KVQuantizeUtil.dequantize`` reads ``get_platform().is_sm100 or is_sm120`` per
# call to take FlashInfer's ``nvfp4_kv_dequantize``, else its PyTorch fallback.  The registry's
# answer (``policies/quant.nvfp4_kv_dequant``), decided once per machine: per call, the machine
# context and one dictionary look-up.
_kv_dequant: Dict[Any, Tuple[Any, Any]] = {}


@fail_open
def nvfp4_kv_dequant() -> Optional[Tuple[bool, bool]]:
    """(``is_sm100``, ``is_sm120``) as the NVFP4 KV dequantize reads them: the tier's facts,
    each kept where FlashInfer's dequantize builds for the device.  None (SGLang's facts)
    without an NVIDIA GPU, off CUDA."""
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None

    def decide() -> Tuple[bool, bool]:
        decision = ctx.nvfp4_kv_dequant()
        return decision.sm100, decision.sm120

    return per_machine(_kv_dequant, ctx, None, decide)


# --- FlashInfer's FP4 / MXFP8 activation quantize backend ---
#
# ``fp4_utils._flashinfer_fp4_quantize_impl`` and ``FlashInferMxfp4TrtllmMoEMethod.
# quantize_routed_input`` pass FlashInfer a backend bound at import
# (``_flashinfer_fp4_quantize_backend``, ``_MXFP8_QUANTIZE_BACKEND``: ``"cute-dsl" if
# get_platform().is_sm100 else "cuda"``).  The registry's backend
# (``policies/quant.flashinfer_quantize_backend``), decided once per machine.
_quantize_backend: Dict[Any, Tuple[Any, Any]] = {}


def _quantize_backend_of(which: str) -> Optional[str]:
    ctx = routed_context()
    if ctx is None or not _cuda_platform():
        return None
    return per_machine(_quantize_backend, ctx, which, lambda: ctx.flashinfer_quantize_backend(which).backend)


@fail_open
def fp4_quantize_backend() -> Optional[str]:
    """``_flashinfer_fp4_quantize_backend``: FlashInfer's ``fp4_quantize`` backend, the
    registry's ("cute-dsl" or "cuda"); None (SGLang's) without an NVIDIA GPU, off CUDA."""
    return _quantize_backend_of("fp4")


@fail_open
def mxfp8_quantize_backend() -> Optional[str]:
    """``_MXFP8_QUANTIZE_BACKEND``: FlashInfer's ``mxfp8_quantize`` backend for the MXFP4
    TRT-LLM MoE's routed input, the registry's; None (SGLang's) without an NVIDIA GPU."""
    return _quantize_backend_of("mxfp8")


def refresh_fp4_quantize_backend(module: Any) -> None:
    """SGLang registers ``_flashinfer_fp4_quantize_impl`` as a torch custom op at import
    (``register_custom_op_from_extern``), which holds the function itself, so calls through
    ``fp4_quantize`` do not pass the routed name: the module value the function reads is set
    to the registry's once the module is routed (the plugin routes a module once its code
    has run, before any other module imports it)."""
    backend = fp4_quantize_backend()
    if backend is not None and hasattr(module, "_flashinfer_fp4_quantize_backend"):
        module._flashinfer_fp4_quantize_backend = backend
