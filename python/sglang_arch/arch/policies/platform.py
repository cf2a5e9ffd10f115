"""The platform facts SGLang reads (``get_platform().is_sm90`` and friends).

These are *identity*, not decisions: SGLang reads them to pick, build and load
compiled kernels (sm_90a wgmma paths, sm_100a tcgen05 paths, JIT arch lists,
``CapabilityRequirement`` windows), as well as to decide.  The safe fallback rule
(docs/fallback.md):

- identity facts always describe the device itself: its own capability, and the
  ``is_sm*`` answers of its own major, with SGLang 0.5.23's (majors, minimum CUDA) rule
  (``srt/utils/common.py``), so they equal upstream's probes on every capability, known
  or not, and agree with every site that reads torch directly;
- decisions (sizes, backends, enablement) come from the resolved tier, through the
  routed decision sites (collectives, fusion, attention), never by claiming another
  architecture's identity.

So a fallback can change what SGLang decides, never make it build or load code for an
architecture the GPU is not.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Union

from .. import catalog
from ..registry import Resolution

# fact -> (tier majors, minimum torch CUDA version)
FACT_RULES: Dict[str, Tuple[Tuple[int, ...], Tuple[int, int]]] = {
    "is_sm90": ((9,), (12, 3)),
    "is_hopper_with_cuda_12_3": ((9,), (12, 3)),
    "is_sm100": ((10,), (12, 8)),
    "is_sm100_or_sm110": ((10, 11), (12, 8)),
    "is_sm110": ((11,), (12, 8)),
    "is_sm120": ((12,), (12, 8)),
    "is_blackwell": ((10, 11, 12), (12, 8)),
}

Fact = Union[bool, int, Tuple[int, int]]


def platform_facts(res: Optional[Resolution], cuda: Optional[Tuple[int, int]]) -> Dict[str, Fact]:
    """Every routed fact for a device (``res=None``: no NVIDIA GPU).

    Computed from ``res.requested`` (the device; the lowest GPU of a mixed node), never
    from the tier it resolved to.
    """
    if res is None or cuda is None:
        facts: Dict[str, Fact] = {name: False for name in FACT_RULES}
    else:
        major = res.requested.major
        facts = {name: major in majors and cuda >= min_cuda for name, (majors, min_cuda) in FACT_RULES.items()}
    if res is not None:
        facts["device_capability"] = res.requested.as_tuple()
        facts["device_sm"] = res.requested.sm
    return facts


def tier_fact(res: Resolution, fact: str, cuda: Optional[Tuple[int, int]]) -> bool:
    """SGLang's probe ``fact`` asked of the tier's major, not the device's: a decision's
    rule as SGLang writes it, for the tier (``cuda=None``: the CUDA minimum is not checked)."""
    majors, min_cuda = FACT_RULES[fact]
    return res.resolved.major in majors and (cuda is None or cuda >= min_cuda)


def tier_where(res: Resolution) -> str:
    """The prefix of a tier-rule decision's reason: which tier answered, and how it matched."""
    return f"tier {res.resolved} ({res.match})"


def runs_here(res: Resolution, decision: str, choice: str, cuda: Optional[Tuple[int, int]],
              rule: str) -> Tuple[bool, str]:
    """A tier rule's pick ``choice`` of the kernel catalog's ``decision``, kept only where the
    catalog runs it on the device: (kept, why), ``rule`` saying what the tier's rule picks."""
    verdict = catalog.choice_runs(decision, choice, res.identities, cuda)
    if verdict is not None and not verdict.runs:
        return False, f"{rule}, but on {res.requested} {verdict.reason}"
    return True, f"{rule} ({verdict.reason if verdict else choice})"
