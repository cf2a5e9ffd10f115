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
from .platform import FACT_RULES

DECISION = "attention"
PORTABLE = "triton"


@dataclass(frozen=True)
class DraftDecision:
    backend: Optional[str]  # None: no draft backend runs here (below SM70)
    reason: str
    dropped: Tuple[Tuple[str, str], ...] = ()


def upstream_pick(res: Resolution, cuda: Optional[Tuple[int, int]]) -> str:
    majors, min_cuda = FACT_RULES["is_blackwell"]
    blackwell = res.resolved.major in majors and (cuda is None or cuda >= min_cuda)
    return "triton" if blackwell else "fa3"


def hybrid_linear_draft_backend(res: Resolution, phase: str = "decode",
                                cuda: Optional[Tuple[int, int]] = (13, 0)) -> DraftDecision:
    """The full-attention backend of a hybrid linear-attention model's draft."""
    pick = upstream_pick(res, cuda)
    where = f"tier {res.resolved} ({res.match})"
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
