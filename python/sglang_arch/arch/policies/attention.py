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
    return AttentionDecision(tail, tail, f"tier {res.resolved} ({res.match}): portable default {tail}{note}",
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
