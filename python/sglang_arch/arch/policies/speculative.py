"""Speculative decoding: the draft attention backend of hybrid linear-attention models.

SGLang 0.5.23 (``srt/speculative/draft_utils.py``, ``DraftBackendFactory``
``_create_hybrid_linear_attn_decode_backend`` / ``_prefill_backend``) builds the draft's
full-attention backend as ``triton`` on Blackwell (``is_blackwell``: major 10, 11 or 12
with CUDA >= 12.8) and ``fa3`` elsewhere, so on 7.x, 13.0 or 9.5 it builds FA3, whose
builds are sm_80/sm_86 and sm_90a.

The registry applies upstream's rule to the tier and keeps it where the kernel catalog
runs it on the device itself (for an MHA draft, in the phase asked), else ``triton``,
which compiles for the device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .. import catalog
from ..registry import Resolution
from . import attention
from .platform import tier_fact, tier_where

DECISION = "attention"
PORTABLE = "triton"


@dataclass(frozen=True)
class DraftDecision:
    backend: Optional[str]  # None: no draft backend runs here (below SM70)
    reason: str
    dropped: Tuple[Tuple[str, str], ...] = ()


def upstream_pick(res: Resolution, cuda: Optional[Tuple[int, int]]) -> str:
    return "triton" if tier_fact(res, "is_blackwell", cuda) else "fa3"


def hybrid_linear_draft_backend(res: Resolution, phase: str = "decode",
                                cuda: Optional[Tuple[int, int]] = (13, 0)) -> DraftDecision:
    """The full-attention backend of a hybrid linear-attention model's draft."""
    pick = upstream_pick(res, cuda)
    where = tier_where(res)
    verdict = catalog.choice_runs(DECISION, pick, res.identities, cuda, "mha", phase)
    if verdict is not None and verdict.runs:
        return DraftDecision(pick, f"{where}: SGLang's rule picks {pick}")
    dropped = ((pick, verdict.reason),)
    portable = catalog.choice_runs(DECISION, PORTABLE, res.identities, cuda, "mha", phase)
    if not portable.runs:
        return DraftDecision(None, f"{where}: no draft attention backend runs on {res.requested} "
                                   f"({pick}: {verdict.reason}; {portable.reason})", dropped + ((PORTABLE, portable.reason),))
    return DraftDecision(PORTABLE, f"{where}: SGLang's rule picks {pick}, but {verdict.reason}; "
                                   f"{PORTABLE} compiles for {res.requested}", dropped)


# SGLang 0.5.23 (``srt/speculative/draft_worker_common.py``,
# ``resolve_draft_worker_attention_backend``): the draft worker of DFLASH / DSPARK takes
# ``--speculative-draft-attention-backend``, else the process's prefill backend; one the
# draft worker does not support (``DRAFT_ATTENTION_BACKEND_CHOICES``), or none, becomes
# ``flashinfer`` on CUDA.  On 7.0 FlashInfer has no build (D5); below SM70 none of the
# draft worker's backends has one.
WORKER_FALLBACK = "flashinfer"
DRAFT_FLAG = "--speculative-draft-attention-backend"
SPECULATIVE_FLAG = "--speculative-algorithm"


@dataclass(frozen=True)
class DraftWorkerDecision:
    backend: Optional[str]  # None: refused (``refused`` names the user's flag)
    reason: str
    refused: Optional[str] = None  # the flag the user passed that cannot run here
    dropped: Tuple[Tuple[str, str], ...] = ()


def worker_upstream_pick(named: Optional[str], choices: Tuple[str, ...]) -> str:
    """SGLang 0.5.23's rule on CUDA: ``named`` (the draft flag, else the prefill backend)
    when the draft worker supports it, else FlashInfer."""
    return named if named is not None and named in choices else WORKER_FALLBACK


def _runs_both_phases(res: Resolution, name: str, traits: attention.ModelTraits) -> Tuple[bool, str]:
    for phase in ("prefill", "decode"):
        check = attention.check_backend(res, name, traits.kind, phase, traits.cuda)
        if check.valid is False:
            return False, check.reason
    return True, ""


def draft_worker_backend(res: Resolution, named: Optional[str], choices: Tuple[str, ...],
                         traits: attention.ModelTraits, user_named: bool = False) -> DraftWorkerDecision:
    """The attention backend of a DFLASH / DSPARK draft worker.

    ``named``: ``--speculative-draft-attention-backend`` (``user_named``: the user passed
    it) else the process's prefill backend; ``choices``: the backends the draft worker
    supports.  Upstream's pick is kept where it runs for both phases (or is not in the
    catalog); a pick the user named that cannot run refuses that flag; otherwise the
    first of the registry's preferences for the model (its default, the tier's list,
    then flashinfer and triton) that the draft worker supports and that runs; where none
    does, the user's ``--speculative-algorithm`` is refused with the reason.
    """
    pick = worker_upstream_pick(named, choices)
    where = tier_where(res)
    runs, why = _runs_both_phases(res, pick, traits)
    if runs:
        return DraftWorkerDecision(pick, f"{where}: SGLang's rule picks {pick}")
    if user_named and pick == named:
        return DraftWorkerDecision(None, f"{DRAFT_FLAG} {pick}: {why}", DRAFT_FLAG)
    dropped = [(pick, why)]
    default = attention.default_backend(res, traits)
    prefs = res.profile.attention_mla if traits.kind == "mla" else res.profile.attention_mha
    for candidate in dict.fromkeys((default.prefill, default.decode, *prefs, "flashinfer", "triton")):
        if candidate == pick:
            continue
        if candidate not in choices:
            dropped.append((candidate, "the draft worker does not support it"))
            continue
        blocked = attention.model_blocks(candidate, traits)
        ok, reason = _runs_both_phases(res, candidate, traits)
        if blocked or not ok:
            dropped.append((candidate, blocked or reason))
            continue
        return DraftWorkerDecision(candidate, f"{where}: SGLang's rule picks {pick}, but {why}; the registry's "
                                              f"draft backend {candidate} runs here", dropped=tuple(dropped))
    tried = "; ".join(f"{n}: {w}" for n, w in dropped)
    return DraftWorkerDecision(None, f"{SPECULATIVE_FLAG}: no attention backend the draft worker supports runs on "
                                     f"{res.requested} ({tried})", SPECULATIVE_FLAG, tuple(dropped))
