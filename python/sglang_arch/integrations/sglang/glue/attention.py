"""Attention backends: the default, and the check of explicitly chosen ones.

The registry's attention policy holds each tier's preference order and what every
backend needs (compute capability, CUDA, model kind, phase).  The model and speculative
traits the default depends on are read with SGLang's own helpers, so the default
follows the same model rules as ``get_default_attn_backend``; an explicit choice that
cannot run here fails during argument resolution, before any weight is loaded, with
the reason and the backends that do run.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

from ....arch.policies.attention import ModelTraits
from . import REGISTRY, ArchDecisionError, fail_open, routed_context

_BASE = "sglang.srt.arg_groups.model_override_base"
_OVERRIDES = "sglang.srt.arg_groups.overrides"


@fail_open
def default_backend(
    server_args: Any, use_mla_backend: bool, model_config: Any
) -> Optional[str]:
    """The default attention backend; None: SGLang's own rules pick.

    None without an NVIDIA GPU, off CUDA, and on out-of-tree platforms.
    """
    if routed_context() is None or sys.modules[_BASE].current_platform.is_out_of_tree():
        return None
    return nvidia_default_backend(server_args, use_mla_backend, model_config)


def _model_traits(
    base: Any,
    server_args: Any,
    use_mla: bool,
    model_config: Any,
    has_flashinfer: bool,
    cuda: Any,
) -> ModelTraits:
    """The model and speculative settings the default depends on (SGLang's helpers)."""
    forces = getattr(base, "_forces_eagle_topk_one", None)  # not in 0.5.22
    cfg = base.resolving_view(server_args)
    topk_declared = (
        cfg.speculative_algorithm is None
        or cfg.speculative_eagle_topk is not None
        or (forces is not None and forces(cfg.speculative_algorithm))
    )
    architectures = getattr(model_config.hf_config, "architectures", None) or []
    return ModelTraits(
        kind="mla" if use_mla else "mha",
        asymmetric_kv=bool(getattr(model_config, "has_asymmetric_kv", False)),
        attention_sinks=bool(getattr(model_config, "has_attention_sinks", False)),
        speculative_multi_branch=not base.is_no_spec_infer_or_topk_one(
            base.resolved_view(server_args)
        ),
        speculative_topk_pending=not topk_declared,
        cross_attention_needs_flashinfer="WhisperForConditionalGeneration"
        in architectures,
        flashinfer_available=has_flashinfer,
        cuda=cuda,
    )


@fail_open
def check_explicit_backends(view: Any) -> None:
    """Refuse an explicitly chosen attention backend that cannot run on this GPU.

    Backends the registry has no requirements for are not judged; without an NVIDIA GPU
    or off CUDA nothing is checked.
    """
    ctx = routed_context()
    if ctx is None:
        return None
    from sglang.srt.runtime_context import get_platform

    if not get_platform().is_cuda:
        return None
    kind = "mla" if sys.modules[_OVERRIDES].use_mla_backend(view) else "mha"
    chosen = (
        ("--attention-backend", view.attention_backend, ("prefill", "decode")),
        ("--prefill-attention-backend", view.prefill_attention_backend, ("prefill",)),
        ("--decode-attention-backend", view.decode_attention_backend, ("decode",)),
    )
    for flag, name, phases in chosen:
        if name is None:
            continue
        for phase in phases:
            check = ctx.check_backend(name, kind, phase)
            if check.valid is False:
                raise ArchDecisionError(
                    f"{flag} {name}: {check.reason}. "
                    f"Valid here: {', '.join(check.alternatives)}. "
                    f"(checked by {REGISTRY})"
                )
    return None


# --- the replace form (``sglang-arch upstream``: SGLang's Hopper/SM100 branches are deleted) ---


@fail_open
def nvidia_default_backend(
    server_args: Any, use_mla_backend: bool, model_config: Any
) -> Optional[str]:
    """The default attention backend on an NVIDIA GPU, from the tier's preferences.

    None off NVIDIA (ROCm, MPS, CPU, out-of-tree): the platform rules that stay in
    ``get_default_attn_backend`` pick.  Reads the model and speculative traits with the
    release's own helpers, whichever of them it has.
    """
    ctx = routed_context()
    if ctx is None:
        return None
    from sglang.srt.runtime_context import get_platform

    platform = get_platform()
    base = sys.modules[_BASE]
    if not platform.is_cuda or platform.is_hip:
        return None
    traits = _model_traits(
        base,
        server_args,
        use_mla_backend,
        model_config,
        bool(platform.has_flashinfer),
        ctx.cuda,
    )
    return ctx.attention_default(traits).prefill


# --- DeepSeek sparse attention (DSA): the KV-cache default and the split backends ---


def _dsa_cuda_model(view: Any) -> Optional[Any]:
    """The model's HF config when the registry decides DSA for it: a DSA model of the
    DeepSeek family on a CUDA (not ROCm) device; else None (SGLang's own arms)."""
    from sglang.srt.configs.model_config import is_deepseek_dsa
    from sglang.srt.runtime_context import get_platform

    overrides = sys.modules[_OVERRIDES]
    hf_config = overrides.model_config_of(view).hf_config
    platform = get_platform()
    if (
        hf_config.architectures[0] not in overrides._DEEPSEEK_FAMILY_ARCHS
        or not is_deepseek_dsa(hf_config)
        or not platform.is_cuda
        or platform.is_hip
    ):
        return None
    return hf_config


@fail_open
def dsa_kv_cache_dtype_default(view: Any) -> Optional[dict]:
    """``--kv-cache-dtype auto`` for a DSA model: the registry's default, declared.

    None (SGLang's own pass runs) without an NVIDIA GPU, off CUDA, for other models,
    for an explicit dtype and for models with learnable sinks: none of those arms
    depends on the GPU.
    """
    ctx = routed_context()
    if ctx is None or view.kv_cache_dtype != "auto":
        return None
    hf_config = _dsa_cuda_model(view)
    if hf_config is None or getattr(hf_config, "learnable_sink", False):
        return None
    log = sys.modules[_OVERRIDES].logger
    if view.dsa_prefill_backend is not None or view.dsa_decode_backend is not None:
        log.warning(
            "When specifying --dsa-prefill-backend or --dsa-decode-backend, "
            "you should also explicitly set --kv-cache-dtype (e.g., 'fp8_e4m3' or "
            "'bfloat16'). DeepSeek V3.2 defaults to FP8 KV cache which may not be "
            "compatible with all backends."
        )
    decision = ctx.dsa_kv_cache_dtype()
    log.warning(
        "Setting KV cache dtype to %s for DeepSeek DSA (%s; %s).",
        decision.dtype,
        decision.reason,
        REGISTRY,
    )
    return {"kv_cache_dtype": decision.dtype}


@fail_open
def dsa_split_backends(view: Any) -> Optional[dict]:
    """The DSA prefill/decode backends the user left unset, from the registry.

    None (SGLang's own pass runs) without an NVIDIA GPU, off CUDA, for other models,
    for models with learnable sinks and with HiSparse: those arms do not depend on the
    GPU.  The chosen pair still passes SGLang's own constraint check.
    """
    ctx = routed_context()
    if ctx is None:
        return None
    hf_config = _dsa_cuda_model(view)
    if hf_config is None or getattr(hf_config, "learnable_sink", False):
        return None
    kv_cache_dtype = view.kv_cache_dtype
    decision = ctx.dsa_backends(
        "fp8_e4m3" if kv_cache_dtype == "fp8_e4m3" else "bfloat16",
        hf_config.architectures[0],
    )
    if view.enable_hisparse and not decision.glm_sm12:
        return None
    declared = {}
    if view.dsa_prefill_backend is None:
        declared["dsa_prefill_backend"] = decision.prefill
    if view.dsa_decode_backend is None:
        declared["dsa_decode_backend"] = decision.decode
    prefill = declared.get("dsa_prefill_backend", view.dsa_prefill_backend)
    decode = declared.get("dsa_decode_backend", view.dsa_decode_backend)
    overrides = sys.modules[_OVERRIDES]
    if not decision.glm_sm12:
        try:  # SGLang's own check of the pair (TileLang FP8 needs SM89, ...)
            overrides._check_dsa_backend_constraints(
                kv_cache_dtype,
                prefill,
                decode,
                hip=False,
                dcp_size=getattr(view, "dcp_size", 1) or 1,
            )
        except ValueError as exc:
            raise ArchDecisionError(
                f"DSA backends prefill={prefill}, decode={decode} ({decision.reason}): "
                f"{exc} (checked by {REGISTRY})"
            ) from None
    overrides.logger.warning(
        "Set DSA backends for %s KV Cache: prefill=%s, decode=%s (%s; %s).",
        kv_cache_dtype,
        prefill,
        decode,
        decision.reason,
        REGISTRY,
    )
    return declared
