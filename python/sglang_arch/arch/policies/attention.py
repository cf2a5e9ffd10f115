"""Attention backends: the default for a tier and a model, and the check of a choice.

The tier gives the preference order; whether a backend can run is the kernel catalog's
answer for the device itself (``catalog.choice_runs`` on ``Resolution.requested``): a
fallback lends the neighbour's preferences, never its kernels.  The default is the
first backend of the tier's preference list, then the portable tail, that has a kernel
for this device, model kind and phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from .. import catalog
from ..registry import Resolution
from .platform import tier_where

MODEL_KINDS = ("mha", "mla")
PHASES = ("prefill", "decode")


DECISION = "attention"  # the kernel catalog's name for this decision (arch/kernels.py CHOICES)


@dataclass(frozen=True)
class ModelTraits:
    """What the attention default depends on besides the GPU."""

    kind: str = "mha"  # "mha" | "mla"
    asymmetric_kv: bool = False  # K and V head sizes differ
    attention_sinks: bool = False
    speculative_multi_branch: bool = False  # speculative top-k > 1 (or top-k 1 with pages > 1)
    speculative_topk_pending: bool = False  # speculative on, top-k not decided yet
    cross_attention_needs_flashinfer: bool = False  # Whisper-style cross attention
    flashinfer_available: bool = True
    cuda: Optional[Tuple[int, int]] = (13, 0)

    def __post_init__(self) -> None:
        if self.kind not in MODEL_KINDS:
            raise ValueError(f"invalid model kind {self.kind!r}; accepted: {', '.join(MODEL_KINDS)}")


@dataclass(frozen=True)
class Validity:
    valid: Optional[bool]  # None: a backend this registry has no requirements for
    reason: str
    alternatives: Tuple[str, ...] = ()


@dataclass(frozen=True)
class AttentionDecision:
    prefill: str
    decode: str
    reason: str
    dropped: Tuple[Tuple[str, str], ...] = ()  # (candidate, why not), in preference order


@dataclass(frozen=True)
class Replacement:
    """What the build guard builds instead of a backend that cannot run here."""

    backend: Optional[str]  # the registry's runnable choice (None: none runs; only the draft guard)
    reason: str  # why the chosen one cannot run, and what replaces it


def check_backend(res: Resolution, name: str, kind: str = "mha", phase: str = "prefill",
                  cuda: Optional[Tuple[int, int]] = (13, 0)) -> Validity:
    """Whether ``name`` has a kernel for this device, model kind and phase; when not, which do."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"invalid model kind {kind!r}; accepted: {', '.join(MODEL_KINDS)}")
    if phase not in PHASES:
        raise ValueError(f"invalid phase {phase!r}; accepted: {', '.join(PHASES)}")
    verdict = catalog.choice_runs(DECISION, name, res.identities, cuda, kind, phase)
    if verdict is None:
        return Validity(None, f"{name!r} has no entry in the kernel catalog; not checked")
    if verdict.runs:
        return Validity(True, f"{name} runs on {res.requested}: {verdict.reason}")
    alternatives = catalog.runnable(DECISION, catalog.known_choices(DECISION), res.identities, cuda, kind, phase)
    return Validity(False, f"{name} cannot run {kind.upper()} {phase} on {res.requested} "
                           f"(tier {res.resolved}, {res.match}): {verdict.reason}", alternatives)


def default_backend(res: Resolution, traits: ModelTraits) -> AttentionDecision:
    """The attention backend a server picks when none is given."""
    prefs = res.profile.attention_mla if traits.kind == "mla" else res.profile.attention_mha
    dropped = []
    if traits.cross_attention_needs_flashinfer:
        # Whisper's cross attention needs flashinfer for CUDA graphs; where flashinfer
        # cannot run, the normal choice below is the only one that works.
        check = check_backend(res, "flashinfer", traits.kind, "prefill", traits.cuda)
        if check.valid:
            return AttentionDecision("flashinfer", "flashinfer", "cross attention needs flashinfer")
        dropped.append(("flashinfer for cross attention", "cannot run here"))
    for name in prefs:
        blocked = model_blocks(name, traits)
        if blocked:
            dropped.append((name, blocked))
            continue
        if traits.kind == "mha" and name == "trtllm_mha" and traits.asymmetric_kv:
            name = "fa4"  # carries v_head_dim through; trtllm_mha needs equal K/V widths
        check = check_backend(res, name, traits.kind, "prefill", traits.cuda)
        if check.valid:
            note = f"; skipped {_listed(dropped)}" if dropped else ""
            return AttentionDecision(name, name, f"tier {res.resolved} prefers {name}{note}", tuple(dropped))
        dropped.append((name, f"cannot run: {check.reason.split('): ', 1)[-1]}"))
    tail = _portable_tail(res, traits)
    note = f" after {_listed(dropped)}" if dropped else ""
    return AttentionDecision(tail, tail, f"{tier_where(res)}: portable default {tail}{note}",
                             tuple(dropped))


def _listed(dropped) -> str:
    return ", ".join(f"{name} ({why})" for name, why in dropped)


def replacement(res: Resolution, name: str, phases: Tuple[str, ...], traits: ModelTraits) -> Optional[Replacement]:
    """The build guard: None when ``name`` has a kernel here for every phase it serves (or
    is not in the catalog: not judged); else the registry's default for the model."""
    for phase in phases:
        check = check_backend(res, name, traits.kind, phase, traits.cuda)
        if check.valid is False:
            default = default_backend(res, traits)
            chosen = default.prefill if phase == "prefill" else default.decode
            return Replacement(chosen, f"{check.reason}; the registry's {traits.kind.upper()} default "
                                       f"{chosen} runs here ({default.reason})")
    return None


def draft_replacement(res: Resolution, name: str, phase: str, traits: ModelTraits,
                      buildable: Sequence[str]) -> Optional[Replacement]:
    """The build guard for a speculative draft backend SGLang's draft factory builds.

    None when ``name`` runs here (or is not in the catalog).  Else the first backend the
    registry prefers for the model (its default, the tier's preferences, then the portable
    ones) that the factory can build (``buildable``: its backend map) and that has a
    kernel here; ``Replacement.backend`` None when no such backend runs on the device.
    """
    check = check_backend(res, name, traits.kind, phase, traits.cuda)
    if check.valid is not False:
        return None
    default = default_backend(res, traits)
    prefs = res.profile.attention_mla if traits.kind == "mla" else res.profile.attention_mha
    order = [default.prefill if phase == "prefill" else default.decode, *prefs, "flashinfer", "triton"]
    tried = []
    for candidate in dict.fromkeys(order):
        if candidate not in buildable:
            tried.append(f"{candidate} (no draft backend of it)")
            continue
        blocked = model_blocks(candidate, traits)
        verdict = check_backend(res, candidate, traits.kind, phase, traits.cuda)
        if blocked or not verdict.valid:
            tried.append(f"{candidate} ({blocked or 'cannot run here'})")
            continue
        return Replacement(candidate, f"{check.reason}; the registry's draft backend {candidate} runs here"
                                      + (f" (skipped {', '.join(tried)})" if tried else ""))
    return Replacement(None, f"{check.reason}; no draft backend SGLang can build runs {traits.kind.upper()} "
                             f"{phase} on {res.requested} (tried {', '.join(tried)})")


def model_blocks(name: str, traits: ModelTraits) -> Optional[str]:
    """Model and speculative settings that rule a preferred MHA backend out."""
    if traits.kind != "mha":
        return None
    if name in ("fa3", "trtllm_mha") and traits.speculative_multi_branch:
        return "speculative top-k > 1"
    if name == "trtllm_mha" and traits.speculative_topk_pending:
        return "speculative top-k not decided"
    return None


def _portable_tail(res: Resolution, traits: ModelTraits) -> str:
    """MLA: triton.  MHA: flashinfer where it is installed, runs here and the model has
    no attention sinks (FlashInfer has none), else triton; torch_native where Triton has
    no build for the device (below SM70)."""
    if (traits.kind == "mha" and traits.flashinfer_available and not traits.attention_sinks
            and check_backend(res, "flashinfer", "mha", "prefill", traits.cuda).valid):
        return "flashinfer"
    if check_backend(res, "triton", traits.kind, "prefill", traits.cuda).valid:
        return "triton"
    return "torch_native"


# --- FA4's page size ---------------------------------------------------------------------
#
# SGLang 0.5.23's ``_fa4_page_constraint`` (``srt/arg_groups/overrides.py``) sets
# ``page_size`` 128 (1 for DiffusionGemma, whose fa4 backend is the dLLM Triton backend)
# when FA4 serves a non-MLA model on ``is_sm100`` (major 10) and EAGLE top-k is at most 1.
# What the 128 is for is FA4's own (sglang/kernels/ops/attention/flash_attn/cute/):
#
# - ``interface.py`` runs one forward kernel for ``arch // 10 in [10, 11]``
#   (FlashAttentionForwardSm100, line 1476), the tcgen05 kernel, with tile_n 128 (line 747);
# - paged KV is loaded by TMA only when ``page_size == tile_n``, else by cp.async
#   ("paged KV non-TMA", lines 1552 and 1320; flash_fwd_sm100.py:267), and the 2-CTA
#   instructions need ``page_size in [None, 128]`` (line 936): a performance default;
# - the head-dim-256 kernel of the same family (lines 945-947) refuses any other page size
#   ("SM100 hd256 2CTA supports TMA paged KV only (page_size must equal tile_n=128)",
#   sm100_hd256_2cta_fmha_forward.py:91-93), and an MXFP8 KV cache's scales are laid out for
#   128 (interface.py:496-498): a requirement.
#
# Hopper's kernel (line 1471) picks its tile from the head dims, and SM12x runs its own
# forward host (flashattention_backend.py:291, fa4_sm120/flash_fwd.py:76: no paged TMA):
# neither has one page size to match.  So the registry keys the rule on the tier having the
# tcgen05 family (10.x and 11.x: the family FA4 serves with that kernel) and FA4 having a
# kernel for the device (the catalog), which on 11.x sets 128 where upstream's ``is_sm100``
# does not (docs/differences.md D21).
FA4 = "fa4"
FA4_TMA_PAGE_SIZE = 128  # tile_n of FA4's tcgen05 kernel (flash_attn/cute/interface.py:747)
FA4_TCGEN05_FEATURE = "tcgen05"
DIFFUSION_PAGE_SIZE = 1  # DiffusionGemma's fa4 backend is the dLLM Triton backend


@dataclass(frozen=True)
class PageSizeDecision:
    page_size: Optional[int]  # None: FA4 sets none here, the configured page size is kept
    reason: str


def fa4_page_size(res: Resolution, kind: str = "mha", eagle_topk: int = 0, diffusion: bool = False,
                  cuda: Optional[Tuple[int, int]] = (13, 0)) -> PageSizeDecision:
    """The page size a server whose attention (or prefill / decode) backend is FA4 gets.

    ``kind``: the model's attention kind; ``eagle_topk``: EAGLE's top-k (0: none);
    ``diffusion``: a DiffusionGemma model (its fa4 backend is the dLLM one, page size 1).
    """
    if kind not in MODEL_KINDS:
        raise ValueError(f"invalid model kind {kind!r}; accepted: {', '.join(MODEL_KINDS)}")
    if kind == "mla":
        return PageSizeDecision(None, "MLA: FA4's page-size rule is for non-MLA models; page size kept")
    if eagle_topk > 1:
        return PageSizeDecision(None, f"EAGLE top-k {eagle_topk} runs the page-tree cascade, which FA4 only "
                                      "runs at page size 1; page size kept")
    where = tier_where(res)
    if not res.has(FA4_TCGEN05_FEATURE):
        return PageSizeDecision(None, f"{where}: FA4 has no tcgen05 kernel here (no fixed KV tile to match: "
                                      "its Hopper and SM12x kernels size theirs); page size kept")
    verdict = catalog.choice_runs(DECISION, FA4, res.identities, cuda, kind)
    if verdict is not None and not verdict.runs:
        return PageSizeDecision(None, f"{where}: {verdict.reason}; page size kept")
    if diffusion:
        return PageSizeDecision(DIFFUSION_PAGE_SIZE, f"{where}: DiffusionGemma's fa4 backend (dLLM) on the "
                                                     "tcgen05 family uses page size 1")
    return PageSizeDecision(FA4_TMA_PAGE_SIZE, f"{where}: FA4's tcgen05 kernel loads paged KV by TMA only at "
                                               f"page size {FA4_TMA_PAGE_SIZE} (its KV tile; its head-dim-256 "
                                               "kernel requires it)")
