"""Attention backends: the default, and the check of explicitly chosen ones.

The registry's attention policy holds each tier's preference order and what every
backend needs (compute capability, CUDA, model kind, phase).  The model and speculative
traits the default depends on are read with SGLang's own helpers, so the default
follows the same model rules as ``get_default_attn_backend``; an explicit choice that
cannot run here fails during argument resolution, before any weight is loaded, with
the reason and the backends that do run.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any, Dict, Optional, Tuple

from ....arch.policies.attention import ModelTraits
from . import REGISTRY, ArchDecisionError, device_context, fail_open, per_machine, routed_context

_BASE = "sglang.srt.arg_groups.model_override_base"
_OVERRIDES = "sglang.srt.arg_groups.overrides"

logger = logging.getLogger(__name__)


@fail_open
def default_backend(
    server_args: Any, use_mla_backend: bool, model_config: Any
) -> Optional[str]:
    """The default attention backend, from the tier's preferences; None: SGLang's own
    rules pick.

    None without an NVIDIA GPU, off CUDA (ROCm, MPS, CPU), and on out-of-tree platforms.
    Reads the model and speculative traits with the release's own helpers, whichever of
    them it has.
    """
    ctx = routed_context()
    if ctx is None or sys.modules[_BASE].current_platform.is_out_of_tree():
        return None
    from sglang.srt.runtime_context import get_platform

    platform = get_platform()
    if not platform.is_cuda or platform.is_hip:
        return None
    traits = _model_traits(
        sys.modules[_BASE],
        server_args,
        use_mla_backend,
        model_config,
        bool(platform.has_flashinfer),
        ctx.cuda,
    )
    return ctx.attention_default(traits).prefill


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


_BACKEND_FIELDS = (
    ("attention_backend", "--attention-backend", ("prefill", "decode")),
    ("prefill_attention_backend", "--prefill-attention-backend", ("prefill",)),
    ("decode_attention_backend", "--decode-attention-backend", ("decode",)),
)


def _user_passed(view: Any) -> Optional[dict]:
    """The values the user passed (SGLang's ``_raw_input``, taken before any pass ran);
    None for an object that is not a resolving record (then every value is the user's)."""
    raw = getattr(view, "_raw_input", None)
    return raw if isinstance(raw, dict) else None


def _declared_by(view: Any, field: str) -> str:
    """The pass or model override that declared ``field`` last (SGLang's record)."""
    for source, declared in reversed(getattr(view, "_resolved_overrides", None) or ()):
        if field in declared:
            return str(source)
    return "a resolution pass"


def _on_cuda() -> bool:
    from sglang.srt.runtime_context import get_platform

    platform = get_platform()
    return bool(platform.is_cuda) and not platform.is_hip


@fail_open
def check_explicit_backends(view: Any) -> None:
    """Refuse an attention backend the user passed that cannot run on this GPU.

    Only what the user passed is judged (SGLang's record of the raw input): a backend a
    pass or a model override declared is the registry's to replace
    (``attention_backend_default``), never a reason to refuse the user.  Backends the
    registry has no requirements for are not judged; without an NVIDIA GPU or off CUDA
    nothing is checked.
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    raw = _user_passed(view)
    kind = "mla" if sys.modules[_OVERRIDES].use_mla_backend(view) else "mha"
    for field, flag, phases in _BACKEND_FIELDS:
        name = getattr(view, field) if raw is None else raw.get(field)
        if name is None:
            continue
        if name in MINICPM_SPARSE_BACKENDS:
            _check_minicpm_backend(ctx, flag, name)
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


@fail_open
def attention_backend_default(view: Any) -> Optional[dict]:
    """``_attention_backend_default``: the user's backends checked, and a backend that a
    pass or a model override declared (DeepSeek -> trtllm_mla on SM100, ...) replaced by
    the registry's default where the kernel catalog says it cannot run here, with one
    warning naming who declared it.  None (SGLang's pass runs) when nothing is replaced.
    """
    check_explicit_backends(view)
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    raw = _user_passed(view)
    if raw is None:
        return None
    overrides = sys.modules[_OVERRIDES]
    use_mla = overrides.use_mla_backend(view)
    traits = None
    declared = {}
    for field, flag, phases in _BACKEND_FIELDS:
        name = getattr(view, field)
        if name is None or raw.get(field) == name:
            continue
        if traits is None:
            traits = _traits_of(view, use_mla, overrides.model_config_of(view), ctx)
        swap = _replacement(ctx, view, name, phases, traits)
        if swap is None:
            continue
        declared[field] = swap.backend
        overrides.logger.warning(
            "%s declared %s=%s, which cannot run here: %s; using %s (%s).",
            _declared_by(view, field),
            field,
            name,
            swap.reason,
            swap.backend,
            REGISTRY,
        )
    if not declared:
        return None
    prefill = declared.get("prefill_attention_backend", view.prefill_attention_backend)
    decode = declared.get("decode_attention_backend", view.decode_attention_backend)
    if prefill is not None and prefill == decode:  # the pass's own split rule
        declared["attention_backend"] = prefill
    elif declared.get("attention_backend", view.attention_backend) is None:
        declared["attention_backend"] = ctx.attention_default(traits).prefill
    return declared


def _replacement(ctx: Any, server_args: Any, name: str, phases: tuple, traits: ModelTraits) -> Optional[Any]:
    """What replaces ``name`` where it cannot run here: the registry's default for the
    model, or under ``--enable-deterministic-inference`` its deterministic decision
    (``policies/deterministic.py``); where no deterministic backend runs, the user's flag
    is refused with the reason.  A MiniCPM sparse backend is replaced only by the other
    (``minicpm_replacement``): no other backend serves MiniCPM's sparse layers."""
    if name in MINICPM_SPARSE_BACKENDS:
        return minicpm_replacement(ctx, name)
    swap = ctx.backend_replacement(name, phases, traits)
    if swap is None or not getattr(server_args, "enable_deterministic_inference", False):
        return swap
    from sglang.srt.server_args import DETERMINISTIC_ATTENTION_BACKEND_CHOICES

    overrides = sys.modules[_OVERRIDES]
    decision = ctx.deterministic_backend(
        tuple(DETERMINISTIC_ATTENTION_BACKEND_CHOICES),
        traits.kind,
        bool(overrides._deterministic_is_deepseek_model(server_args)),
    )
    cannot = swap.reason.split("; the registry's", 1)[0]
    if decision.backend is None:
        raise ArchDecisionError(
            f"--enable-deterministic-inference: {cannot}; {decision.reason} (checked by {REGISTRY})"
        )
    from ....arch.policies.attention import Replacement

    return Replacement(
        decision.backend,
        f"{cannot}; the registry's deterministic backend {decision.backend} runs here ({decision.reason})",
    )


def _traits_of(server_args: Any, use_mla: bool, model_config: Any, ctx: Any) -> ModelTraits:
    from sglang.srt.runtime_context import get_platform

    return _model_traits(
        importlib.import_module(_BASE),
        server_args,
        use_mla,
        model_config,
        bool(get_platform().has_flashinfer),
        ctx.cuda,
    )


@fail_open
def deterministic_backend(view: Any) -> Optional[dict]:
    """``_deterministic_attention_backend``: the backend for deterministic inference
    when the user gave none (``policies/deterministic.py``).

    A backend a model override declared that SGLang cannot make deterministic is
    replaced the same way (SGLang would refuse it as if the user had passed it).  None
    (SGLang's pass runs, and validates) when deterministic inference is off, for the
    user's own backend, without an NVIDIA GPU and off CUDA.
    """
    ctx = routed_context()
    if ctx is None or not view.enable_deterministic_inference or not _on_cuda():
        return None
    from sglang.srt.server_args import DETERMINISTIC_ATTENTION_BACKEND_CHOICES

    capable = tuple(DETERMINISTIC_ATTENTION_BACKEND_CHOICES)
    current = view.attention_backend
    note = ""
    if current is not None:
        raw = _user_passed(view)
        if raw is None or raw.get("attention_backend") == current or current in capable:
            return None
        note = f"{_declared_by(view, 'attention_backend')} declared {current}, not deterministic; "
    overrides = sys.modules[_OVERRIDES]
    kind = "mla" if overrides.use_mla_backend(view) else "mha"
    decision = ctx.deterministic_backend(
        capable, kind, bool(overrides._deterministic_is_deepseek_model(view))
    )
    if decision.backend is None:
        raise ArchDecisionError(
            f"--enable-deterministic-inference: {decision.reason} (checked by {REGISTRY})"
        )
    overrides.logger.warning(
        "Attention backend not specified. Falling back to '%s' for deterministic "
        "inference (%s%s; %s). You can explicitly set --attention-backend to one of %s.",
        decision.backend,
        note,
        decision.reason,
        REGISTRY,
        list(capable),
    )
    return {"attention_backend": decision.backend}


# --- the build guard: what SGLang builds, whichever path chose it ---

_SETUP = "sglang.srt.model_executor.model_runner_components.attention_backend_setup"


def _runner_traits(model_runner: Any, ctx: Any) -> ModelTraits:
    return _traits_of(
        model_runner.server_args,
        bool(model_runner.use_mla_backend),
        model_runner.model_config,
        ctx,
    )


def _warn_built(path: str, swaps: list) -> None:
    """One warning for one build: the path that chose, and each backend replaced."""
    logger.warning(
        "%s chose attention backends that cannot run here; %s (%s).",
        path,
        "; ".join(
            f"{phase} {name}: {swap.reason}; building {swap.backend} instead"
            for phase, name, swap in swaps
        ),
        REGISTRY,
    )


@fail_open
def built_backends(model_runner: Any) -> Optional[Any]:
    """``resolve_attention_backend_strs``: the (prefill, decode) pair a model runner
    builds, with any backend the kernel catalog says cannot run here replaced by the
    registry's default for the model, one warning naming the path that chose it.

    None (SGLang's own resolution) when every backend runs here or is not in the
    catalog, without an NVIDIA GPU and off CUDA.  This covers every path that chose
    the backend before the runner builds it (passes, model overrides, later sites).
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    draft = bool(model_runner.is_draft_worker and model_runner.draft_attention_backend)
    if draft:
        prefill = decode = model_runner.draft_attention_backend
        path = "the draft model runner's draft attention backend"
    else:
        from sglang.srt.runtime_context import attention_backends

        prefill, decode = attention_backends()
        path = "the server's attention backend (resolution, model overrides)"
    traits = _runner_traits(model_runner, ctx)
    chosen, swaps = {}, []
    for phase, name in (("prefill", prefill), ("decode", decode)):
        swap = _replacement(ctx, model_runner.server_args, name, (phase,), traits) if name else None
        chosen[phase] = name if swap is None else swap.backend
        if swap is not None:
            swaps.append((phase, name, swap))
    if not swaps:
        return None
    _warn_built(path, swaps)
    if draft and chosen["prefill"] != chosen["decode"]:
        chosen["decode"] = chosen["prefill"] = ctx.attention_default(traits).prefill
    return importlib.import_module(_SETUP).ResolvedAttentionBackendStr(
        prefill=chosen["prefill"], decode=chosen["decode"], is_draft_override=draft
    )


@fail_open
def guard_draft_backend(
    factory: Any,
    backend_name: str,
    backend_map: dict,
    error_template: str,
    stamps_children: bool = False,
) -> None:
    """``DraftBackendFactory._create_backend``: the speculative draft's multi-step and
    draft-extend backends.  Where the backend it is about to build cannot run here, the
    factory's draft backend becomes the first the registry prefers for the draft model
    that the factory can build and that runs here (one warning naming the path); SGLang's
    body then builds it.  Where none runs, the user's ``--speculative-algorithm`` is
    refused with the reason.
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    from sglang.srt.runtime_context import attention_backends

    prefill, decode = attention_backends()
    configured = decode if backend_name == "decode_attention_backend" else prefill
    name = factory.draft_attn_backend or configured
    phase = "decode" if backend_name == "decode_attention_backend" else "prefill"
    runner = factory.draft_model_runner
    traits = _runner_traits(runner, ctx)
    swap = ctx.draft_replacement(name, phase, traits, tuple(backend_map)) if name else None
    if swap is None:
        return None
    if swap.backend is None:  # the user asked for speculative decoding: refuse it, with why
        raise ArchDecisionError(
            f"--speculative-algorithm: the speculative draft ({backend_name}) {name}: {swap.reason} "
            f"(checked by {REGISTRY})"
        )
    _warn_built(f"the speculative draft ({backend_name})", [(phase, name, swap)])
    factory.draft_attn_backend = swap.backend
    return None


def _hybrid_linear_draft(factory: Any, phase: str) -> Optional[Any]:
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    decision = ctx.hybrid_linear_draft_backend(phase)
    if decision.backend is None:
        return None
    if decision.dropped:
        logger.warning("Hybrid linear-attention draft: %s (%s).", decision.reason, REGISTRY)
    build = getattr(factory, f"_create_{decision.backend}_{phase}_backend")
    return build()


@fail_open
def hybrid_linear_draft_decode(factory: Any) -> Optional[Any]:
    """``_create_hybrid_linear_attn_decode_backend``: triton or fa3 by the registry."""
    return _hybrid_linear_draft(factory, "decode")


@fail_open
def hybrid_linear_draft_prefill(factory: Any) -> Optional[Any]:
    """``_create_hybrid_linear_attn_prefill_backend``: triton or fa3 by the registry."""
    return _hybrid_linear_draft(factory, "prefill")


_DRAFT_CHOICES_MODULE = "sglang.srt.server_args"


def _draft_kind() -> str:
    """The model kind the draft worker serves: MLA where the process's model uses an
    MLA backend (SGLang's own ``use_mla_backend``), else MHA (also when unknown)."""
    overrides = sys.modules.get(_OVERRIDES)
    try:
        from sglang.srt.runtime_context import get_server_args

        view = overrides.resolved_view(get_server_args())
        return "mla" if overrides.use_mla_backend(view) else "mha"
    except Exception:  # no published server args (a unit test, a tool): MHA
        return "mha"


def _user_named_draft(name: str) -> bool:
    """Whether the user passed ``--speculative-draft-attention-backend name`` (SGLang's
    record of the raw input); False where the record is missing (never refuse then)."""
    try:
        from sglang.srt.runtime_context import get_server_args

        raw = getattr(get_server_args(), "_raw_input", None)
    except Exception:
        return False
    return isinstance(raw, dict) and raw.get("speculative_draft_attention_backend") == name


@fail_open
def draft_worker_backend(algo_label: Optional[str] = None) -> Optional[str]:
    """``resolve_draft_worker_attention_backend``: the DFLASH / DSPARK draft worker's
    attention backend.  SGLang's pick (the draft flag, else the prefill backend, else
    FlashInfer) where it runs here; else the registry's runnable choice among the
    backends the draft worker supports (one warning).  A draft backend the user passed
    that cannot run refuses that flag; where no supported backend runs, the user's
    ``--speculative-algorithm`` is refused with the reason.
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    from sglang.srt.runtime_context import attention_backends, get_spec

    choices = tuple(
        importlib.import_module(_DRAFT_CHOICES_MODULE).DRAFT_ATTENTION_BACKEND_CHOICES
    )
    flagged = get_spec().speculative_draft_attention_backend
    named = flagged if flagged is not None else attention_backends()[0]
    user_named = flagged is not None and _user_named_draft(flagged)
    decision = ctx.draft_worker_backend(named, choices, _draft_kind(), user_named)
    if decision.backend is None:
        raise ArchDecisionError(f"{decision.reason} (checked by {REGISTRY})")
    if decision.dropped:
        logger.warning(
            "%s draft worker: %s (%s).",
            algo_label or "The speculative",
            decision.reason,
            REGISTRY,
        )
    return decision.backend


@fail_open
def vision_backend(attention: Any, passed_backend: Optional[str]) -> Optional[str]:
    """``VisionAttention._determine_attention_backend`` on an NVIDIA GPU: the model's
    own backend where it runs, else the registry's (``policies/vision.py``).

    None (SGLang's own rule) for the user's ``--mm-attention-backend``, without an
    NVIDIA GPU, off CUDA, and before the multimodal config is published.
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    from sglang.srt.runtime_context import get_mm

    try:
        if get_mm().mm_attention_backend is not None:
            return None
    except ValueError:
        return None
    decision = ctx.vision_backend(passed_backend)
    if decision.dropped:
        logger.warning("Multimodal attention: %s (%s).", decision.reason, REGISTRY)
    return decision.backend


_KIMI_K3_VL = "sglang.srt.models.kimi_k3_vl"


def _vision_answer(decision: Any, what: str) -> str:
    if decision.dropped:
        logger.warning("%s attention: %s (%s).", what, decision.reason, REGISTRY)
    return decision.backend


@fail_open
def gemma4_vision_backend() -> Optional[str]:
    """``Gemma4VisionAttention._select_backend`` on an NVIDIA GPU: Gemma 4's rule on the
    tier, kept where the kernel catalog runs it (``policies/vision.py``).  None (SGLang's
    rule) for the user's ``--mm-attention-backend``, without an NVIDIA GPU and off CUDA."""
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    from sglang.srt.runtime_context import get_mm

    if get_mm().mm_attention_backend is not None:
        return None
    return _vision_answer(ctx.gemma4_vision_backend(), "Gemma 4 vision")


@fail_open
def kimi_k3_vision_backend(
    configured_backend: str,
    max_seqlen: int = 0,
    total_tokens: int = 0,
    device: Any = None,
    fa4_available: Optional[bool] = None,
) -> Optional[str]:
    """``_resolve_mm_attention_backend`` (Kimi K3's MoonViT) for ``auto`` on a CUDA
    device: SGLang's SM103 split on the tier, catalog-filtered (``policies/vision.py``).
    None (SGLang's rule) for a configured backend, off CUDA, without an NVIDIA GPU."""
    if configured_backend != "auto" or getattr(device, "type", None) != "cuda":
        return None
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    kimi = sys.modules[_KIMI_K3_VL]

    def fa4() -> bool:
        return kimi._is_fa4_available() if fa4_available is None else fa4_available

    decision = ctx.kimi_k3_vision_backend(
        max_seqlen,
        total_tokens,
        fa4,
        kimi._SM103_TRITON_MAX_SEQLEN,
        kimi._SM103_FA4_MIN_ATTENTION_WORK,
    )
    return _vision_answer(decision, "Kimi K3 vision")


@fail_open
def mimo_local_attention() -> Optional[bool]:
    """``AudioEncoderMixin.build_audio_encoder``'s ``is_sm90_supported()``: whether MiMo's
    audio encoder takes its local Triton attention, as the registry decides for the tier
    (``policies/vision.py``).  None (SGLang's probe) without an NVIDIA GPU, off CUDA."""
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    return ctx.mimo_local_attention().enabled


# --- MiniCPM's sparse attention backends (policies/minicpm.py) ---

MINICPM_SPARSE_BACKENDS = ("minicpm_flashattn", "minicpm_flashinfer")


def _fuse_topk() -> bool:
    """``SGLANG_MINICPM_FUSE_TOPK``: the fused TileLang top-k on any device."""
    from sglang.srt.environ import envs

    return bool(envs.SGLANG_MINICPM_FUSE_TOPK.get())


def _force_dense() -> bool:
    """``SGLANG_MINICPM_FORCE_DENSE``: MiniCPM's override maps each MiniCPM backend to a
    dense one (``minicpm_flashattn`` -> fa4 / fa3, ``minicpm_flashinfer`` -> flashinfer),
    which the guards judge once mapped; the MiniCPM backend itself is never built."""
    from sglang.srt.environ import envs

    return bool(envs.SGLANG_MINICPM_FORCE_DENSE.get())


def _minicpm_sparse_decision() -> Optional[Any]:
    """The registry's MiniCPM sparse backend; None without an NVIDIA GPU, off CUDA, or
    where no MiniCPM sparse backend runs here (SGLang's own pick stays)."""
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    decision = ctx.minicpm_sparse_backend(_fuse_topk())
    return decision if decision.backend is not None else None


@fail_open
def minicpm_sparse_flashinfer() -> Optional[bool]:
    """``_minicpm_sala_overrides``: a sparse-attention MiniCPM with no backend set gets
    ``minicpm_flashinfer`` where its ``get_platform().is_blackwell`` is true, else
    ``minicpm_flashattn``; for that call the registry's decision answers the fact
    (``policies/minicpm.py``): whether its MiniCPM sparse backend is ``minicpm_flashinfer``.
    None (SGLang's own probe) under ``SGLANG_MINICPM_FORCE_DENSE``, whose arm reads the
    same fact to map each MiniCPM backend to its dense one (the attention guards judge
    that), and where the registry does not decide.
    """
    decision = _minicpm_sparse_decision()
    if decision is None or _force_dense():
        return None
    return decision.backend == "minicpm_flashinfer"


def minicpm_replacement(ctx: Any, name: str) -> Optional[Any]:
    """What the guards build instead of MiniCPM sparse backend ``name`` where its kernels
    have no build here: the other MiniCPM sparse backend where that runs; None where
    ``name`` runs, or where neither does (no other backend serves the sparse layers)."""
    if _force_dense():
        return None
    swap = ctx.minicpm_replacement(name, _fuse_topk())
    if swap is None:
        return None
    from ....arch.policies.attention import Replacement

    return Replacement(*swap)


def _check_minicpm_backend(ctx: Any, flag: str, name: str) -> None:
    """Refuse a MiniCPM sparse backend the user passed whose kernels have no build here
    (under ``SGLANG_MINICPM_FORCE_DENSE`` the dense backend it maps to is judged instead)."""
    if _force_dense():
        return
    check = ctx.check_minicpm_backend(name, _fuse_topk())
    if check.runs is not False:
        return
    runs = [
        other
        for other in MINICPM_SPARSE_BACKENDS
        if ctx.check_minicpm_backend(other, _fuse_topk()).runs
    ]
    raise ArchDecisionError(
        f"{flag} {name}: {check.reason}. "
        f"MiniCPM sparse backends valid here: {', '.join(runs) or 'none'}. "
        f"(checked by {REGISTRY})"
    )


# --- MiniMax-M3.1 NVFP4: the Blackwell stack or the other (policies/minimax_m3.py) ---



@fail_open
def minimax_m3_blackwell_arm() -> Optional[bool]:
    """``_minimax_m3_overrides``: M3.1 NVFP4 takes its Blackwell arm (MegaMoE, DeepGEMM,
    fp8 KV, trtllm_mha) where its ``get_platform().is_blackwell`` is true, else Marlin and
    fa3; for that call the registry's arm answers the fact (its only reads of it are that
    arm and the speculative check that DSPARK / DFLASH need the Blackwell arm).  None
    (SGLang's own probe) without an NVIDIA GPU and off CUDA."""
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    return ctx.minimax_m3_nvfp4_arm().blackwell


@fail_open
def minimax_m3_native_stack(quantization: Optional[str]) -> Optional[bool]:
    """``uses_minimax_m3_nvfp4_native_stack`` (``configs/model_config.py``): whether an
    M3.1 NVFP4 checkpoint runs its Blackwell stack, the answer the attention backend, the KV
    pool class and the KV cell-size budget share.  The override's arm and this answer are
    one decision (``policies/minimax_m3.nvfp4_arm``), so they cannot split.  None (SGLang's
    function) where the arm is SGLang's own probe, and for any other checkpoint (SGLang's
    function answers False there, whatever the GPU; the arm is not asked)."""
    if quantization != "minimax_m3_nvfp4":
        return None
    return minimax_m3_blackwell_arm()


# --- DeepSeek sparse attention (DSA): the KV-cache default and the split backends ---


_DIFFUSION_GEMMA = "DiffusionGemmaForBlockDiffusion"


@fail_open
def fa4_page_size(view: Any) -> Optional[dict]:
    """``_fa4_page_constraint``: the page size FA4 sets, from the registry.

    None (SGLang's own pass runs) without an NVIDIA GPU, off CUDA and where no backend
    is FA4 (the pass sets nothing then); else the registry's decision for the model's
    kind, its EAGLE top-k and DiffusionGemma: ``{}`` where the page size is kept.
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    backends = (
        view.attention_backend,
        view.prefill_attention_backend,
        view.decode_attention_backend,
    )
    if "fa4" not in backends:
        return None
    overrides = sys.modules[_OVERRIDES]
    use_mla = overrides.use_mla_backend(view)
    architectures = overrides.model_config_of(view).hf_config.architectures or ()
    decision = ctx.fa4_page_size(
        "mla" if use_mla else "mha",
        view.speculative_eagle_topk or 0,
        _DIFFUSION_GEMMA in architectures,
    )
    if decision.page_size is None:
        return {}
    if decision.page_size != view.page_size:
        overrides.logger.warning(
            "FA4: changing page_size from %s to %s (%s; %s).",
            view.page_size,
            decision.page_size,
            decision.reason,
            REGISTRY,
        )
    return {"page_size": decision.page_size}


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
    GPU.  The chosen pair still passes SGLang's own constraint check.  Where no DSA
    kernel has a build for the GPU (below SM80), the model is refused with the reason.
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
    if decision.prefill is None and (view.dsa_prefill_backend is None or view.dsa_decode_backend is None):
        # Below SM80 nothing runs DSA (TileLang included): refuse the model, with why.
        raise ArchDecisionError(
            f"{hf_config.architectures[0]} uses DeepSeek sparse attention, and no DSA kernel has a "
            f"build for this GPU: {decision.reason} (checked by {REGISTRY})"
        )
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


# Asked per layer per forward pass: decided once per machine and backend.
_tail: Dict[str, Tuple[Any, str]] = {}


@fail_open
def dsa_kpool_tail_backend(self: Any, topk_indices: Any, dsa_impl: str) -> Optional[str]:
    """The DSA backend a phase runs when the K-pool tail is appended to the top-k indices.

    None (SGLang's own rule) without an NVIDIA GPU and wherever the rule does not depend
    on the GPU: no top-k indices, no K-pool (``dsa_index_kpool`` <= 1), a backend other
    than ``flashmla_sparse``.  The device is the one SGLang's rule reads (its own
    ``get_device_capability()``, no platform override).
    """
    if dsa_impl != "flashmla_sparse" or topk_indices is None or self.dsa_index_kpool <= 1:
        return None
    ctx = device_context()
    if ctx is None:
        return None
    return per_machine(_tail, ctx, dsa_impl, lambda: ctx.dsa_kpool_tail_backend(dsa_impl).backend)


# Asked once per forward batch: decided once per machine.
_prefill: Dict[Any, Tuple[Any, Any]] = {}


def _dsa_prefill_bands() -> Optional[Any]:
    ctx = device_context()
    if ctx is None:
        return None
    return per_machine(_prefill, ctx, None, ctx.dsa_prefill_bands)


@fail_open
def dsa_prefill_probes(self: Any) -> Optional[Tuple[int, bool]]:
    """What ``DeepseekSparseAttnBackend.set_dsa_prefill_impl``'s two probes answer for its
    per-batch pick, from the registry: ``(get_device_sm(), is_blackwell())``.

    The MHA one-shot band reads the first (the tier's SM; 0 where the band's kernel has no
    build for the device), ``flashmla_auto``'s FlashMLA variant the second (the tier is
    Blackwell).  None (SGLang's own probes) without an NVIDIA GPU.  The device is the one
    SGLang's probes read (no platform override reaches them: they are bound at the
    backend's init).
    """
    bands = _dsa_prefill_bands()
    return None if bands is None else (bands.band_sm, bands.flashmla_sparse_band)


# --- DeepSeek-V4: the attention backend default and DSpark's commit-KV views ---


@fail_open
def dsv4_flashmla_mega_default() -> Optional[bool]:
    """``_default_dsv4_attention_backend``'s ``is_sm100_supported()``: whether
    ``--dsv4-attn-backend auto`` may become ``flashmla_mega`` on this GPU, as the registry
    decides (``policies/dsa.dsv4_mega_default``); SGLang's model, KV-dtype, parallelism and
    layout conditions stay around it.  None (SGLang's probe) without an NVIDIA GPU.  The
    device is the one SGLang's probe reads (a direct probe, which no platform override
    reaches)."""
    ctx = device_context()
    if ctx is None:
        return None
    return ctx.dsv4_mega_default().allowed


@fail_open
def check_dsv4_attn_backend(server_args: Any, model_arch: str) -> None:
    """``apply_deepseek_v4_defaults``: refuse a ``--dsv4-attn-backend flashmla_mega`` the user
    passed where SGLang's own assertion would let it through but MegaAttention has no build
    for the GPU (``policies/dsa.dsv4_explicit_mega``: a 10.x the table does not list).  Only
    the user's value is judged; elsewhere SGLang's checks run as they are (they refuse it off
    SM100 themselves).  Nothing is checked without an NVIDIA GPU."""
    ctx = device_context()  # SGLang's assertion reads the direct probe: the device
    if ctx is None:
        return None
    raw = _user_passed(server_args)
    name = getattr(server_args, "dsv4_attn_backend", None) if raw is None else raw.get("dsv4_attn_backend")
    if name != "flashmla_mega":
        return None
    reason = ctx.dsv4_explicit_mega()
    if reason is not None:
        raise ArchDecisionError(
            f"--dsv4-attn-backend flashmla_mega: {reason}. Valid here: flashmla. (checked by {REGISTRY})"
        )
    return None


# Asked once per DSpark draft step: decided once per machine.
_commit_kv: Dict[Any, Tuple[Any, Any]] = {}


@fail_open
def dspark_commit_kv_views() -> Optional[bool]:
    """``DeepseekV4ForCausalLMDSpark.project_commit_kv``'s ``get_platform().is_blackwell``:
    whether the commit-KV slices may reach the FlashMLA-layout writer as strided views, as
    the registry decides (``policies/dsa.dspark_commit_kv_views``); the unified-KV and
    uniform-FP8 conditions stay SGLang's.  None (SGLang's fact) without an NVIDIA GPU, off
    CUDA."""
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    return per_machine(_commit_kv, ctx, None, lambda: ctx.dspark_commit_kv_views().strided)


# --- DSA's MTP verify: DeepGEMM's native [B, next_n] paged-MQA schedule ---
#
# ``DeepseekSparseAttnBackend._build_paged_mqa_schedule_2d_ctx_lens`` (per verify batch)
# and ``_apply_cuda_graph_metadata`` (per CUDA-graph replay) read ``get_platform().is_sm100``
# for one decision, whether target_verify with ``next_n >= 2`` takes the native layout
# (policies/dsa.dg_native_verify).  Both follow the same per-machine answer.

_dg_native: Dict[Any, Tuple[Any, Any]] = {}


@fail_open
def dsa_dg_native_verify() -> Optional[bool]:
    """Whether DSA's MTP verify takes DeepGEMM's native ``[B, next_n]`` schedule, from the
    registry; None (SGLang's ``is_sm100``) without an NVIDIA GPU."""
    ctx = routed_context()  # the sites read get_platform(): an override_platform scope's GPU
    if ctx is None:
        return None
    return per_machine(_dg_native, ctx, None, ctx.dsa_dg_native_verify).native


# --- linear attention (hybrid GDN / KDA models): the kernel backend defaults ---

_ATTENTION_HOOK = "sglang.srt.arg_groups.attention_hook"
_GLM5_NEXT_HOOK = "sglang.srt.arg_groups.glm5_next_hook"
_KIMI_K3_HOOK = "sglang.srt.arg_groups.kimi_k3_hook"
_GDN = "sglang.srt.layers.attention.linear.gdn_backend"
_KDA = "sglang.srt.layers.attention.linear.kda_backend"


def _linear_decode_applies(cfg: Any) -> bool:
    """The SSM settings of ``handle_linear_attn_backend``'s decode default (not the GPU)."""
    return (
        cfg.linear_attn_decode_backend is None
        and cfg.linear_attn_backend != "helion"
        and cfg.mamba_ssm_dtype == "bfloat16"
    )


@fail_open
def linear_decode_default(server_args: Any) -> None:
    """``handle_linear_attn_backend``: the decode backend of a bf16 SSM state when the
    user gave none, from the registry (``policies/linear_attention.py``).

    Declared before SGLang's body runs, which then keeps it.  Where SGLang's own rule
    would pick FlashInfer but no FlashInfer decode kernel has a build for the device,
    decode is declared as what it would otherwise inherit (the base backend; Triton for
    the prefill-only FlashKDA).  Nothing (SGLang's body decides) without an NVIDIA GPU
    and off CUDA.
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    module = sys.modules[_ATTENTION_HOOK]
    cfg = module.resolving_view(server_args)
    if not _linear_decode_applies(cfg):
        return None
    decision = ctx.linear_decode_default()
    if decision.backend is not None:
        backend = decision.backend
    elif module.get_platform().is_sm100:  # SGLang's rule would pick a kernel with no build here
        backend = "triton" if cfg.linear_attn_backend == "flashkda" else cfg.linear_attn_backend
        logger.warning("Linear attention decode: %s; keeping %s (%s).", decision.reason, backend, REGISTRY)
    else:
        return None
    module.declare_resolution(
        server_args, "_handle_linear_attn_backend", linear_attn_decode_backend=backend
    )
    module.logger.info(
        "Defaulting --linear-attn-decode-backend to %s (%s; %s).", backend, decision.reason, REGISTRY
    )
    return None


def _declare_default(server_args: Any, module_name: str, source: str, field: str, decision: Any) -> bool:
    module = sys.modules[module_name]
    if decision.backend is not None:
        module.declare_resolution(server_args, source, **{field: decision.backend})
        module.logger.info(
            "Defaulting --%s to %s (%s; %s).",
            field.replace("_", "-"),
            decision.backend,
            decision.reason,
            REGISTRY,
        )
    return True


@fail_open
def kimi_linear_decode_default(server_args: Any) -> Optional[bool]:
    """``apply_kimi_k3_linear_attn_defaults`` (Kimi's KDA models): Triton decode for a bf16
    SSM state on the machines where the generic rule picks FlashInfer, from the registry.
    True: done; None (SGLang's function runs) without an NVIDIA GPU and off CUDA."""
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    cfg = sys.modules[_KIMI_K3_HOOK].resolving_view(server_args)
    if cfg.linear_attn_decode_backend is not None or cfg.mamba_ssm_dtype != "bfloat16":
        return True
    return _declare_default(
        server_args,
        _KIMI_K3_HOOK,
        "apply_kimi_k3_linear_attn_defaults",
        "linear_attn_decode_backend",
        ctx.linear_kda_decode_default(),
    )


@fail_open
def glm5_verify_default(server_args: Any) -> Optional[bool]:
    """``apply_glm5_next_spec_backend_defaults``: the speculative verify backend when the
    user gave none, from the registry.  True: done; None (SGLang's function runs) without
    an NVIDIA GPU and off CUDA."""
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    cfg = sys.modules[_GLM5_NEXT_HOOK].resolving_view(server_args)
    if cfg.speculative_algorithm is None or cfg.linear_attn_verify_backend is not None:
        return True
    return _declare_default(
        server_args,
        _GLM5_NEXT_HOOK,
        "apply_glm5_next_spec_backend_defaults",
        "linear_attn_verify_backend",
        ctx.linear_verify_default(),
    )


@fail_open
def gdn_prefill_default(model_runner: Any) -> Optional[str]:
    """``flashinfer_gdn_prefill_default``: FlashInfer GDN prefill where the registry's
    tier rule picks it, its kernel has a build for the device, and the model and schedule
    are in the kernel's validated domain (chunk size, 128-wide heads, the state dtype the
    registry names); else ``"triton"``, the base backend that SGLang's ``None`` leaves.

    None (SGLang's function runs) without an NVIDIA GPU, off CUDA, and where SGLang
    defaults nothing whatever the GPU (an explicit prefill backend, a base backend other
    than Triton, deterministic inference).
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    module = sys.modules[_GDN]
    execution = module.get_exec()
    if (
        execution.mamba.linear_attn_prefill_backend is not None
        or execution.mamba.linear_attn_backend != "triton"
        or execution.deterministic.enable_deterministic_inference
    ):
        return None
    decision = ctx.linear_prefill_default("gdn")
    if decision.backend is None:
        return "triton"
    import torch

    schedule = module.get_schedule()
    chunk = schedule.chunked_prefill_size
    config = module.hybrid_gdn_config(model_runner.model_config)
    state = model_runner.req_to_token_pool.mamba_pool.mamba_cache.temporal.dtype
    if (
        schedule.enable_dynamic_chunking
        or chunk is None
        or not 1 <= chunk <= decision.max_chunk
        or getattr(config, "linear_key_head_dim", None) != 128
        or getattr(config, "linear_value_head_dim", None) != 128
        or state != getattr(torch, decision.state_dtype)
    ):
        return "triton"
    from sglang.srt.layers.attention.linear.kernels.gdn_flashinfer import (
        is_flashinfer_gdn_prefill_available,
    )

    if not is_flashinfer_gdn_prefill_available():
        return "triton"
    module.rank0_log(f"Defaulting GDN prefill backend to FlashInfer ({decision.reason}; {REGISTRY}).")
    return decision.backend


@fail_open
def kda_prefill_default(model_runner: Any) -> Optional[str]:
    """``flashinfer_kda_prefill_default``: FlashInfer KDA prefill where the registry's tier
    rule picks it and its kernel has a build for the device, for a safe-gate KDA model
    (a gate lower bound) on the eager Triton base; else ``"triton"`` (SGLang's ``None``).

    None (SGLang's function runs) without an NVIDIA GPU, off CUDA, and where SGLang
    defaults nothing whatever the GPU.
    """
    ctx = routed_context()
    if ctx is None or not _on_cuda():
        return None
    from sglang.srt.configs.bailing_hybrid import BailingHybridConfig
    from sglang.srt.configs.hybrid_arch import hybrid_kda_config

    module = sys.modules[_KDA]
    config = hybrid_kda_config(model_runner.model_config)
    lower_bound = (
        config.kda_lower_bound
        if isinstance(config, BailingHybridConfig)
        else config.linear_attn_config.get("gate_lower_bound")
    )
    execution = module.get_exec()
    if (
        lower_bound is None
        or execution.mamba.linear_attn_backend != "triton"
        or execution.deterministic.enable_deterministic_inference
        or execution.overlap.enable_two_batch_overlap
        or execution.graph.cuda_graph_config.prefill.backend == module.CudaGraphBackend.FULL
    ):
        return None
    decision = ctx.linear_prefill_default("kda")
    return decision.backend or "triton"


