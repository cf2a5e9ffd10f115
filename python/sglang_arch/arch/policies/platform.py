"""The yes/no platform facts SGLang reads (``get_platform().is_sm90`` and friends).

Upstream answers each from the device's major and torch's CUDA version; here the
major is the resolved tier's, so an unknown GPU takes its nearest tier's paths
instead of none.  The (majors, minimum CUDA) pairs are SGLang 0.5.23's own
(``srt/utils/common.py``), so on every known capability the answers are equal.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple, Union

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
    """Every routed fact for a device (``res=None``: no NVIDIA GPU)."""
    if res is None or res.match == "portable" or cuda is None:
        facts: Dict[str, Fact] = {name: False for name in FACT_RULES}
    else:
        major = res.resolved.major
        facts = {name: major in majors and cuda >= min_cuda for name, (majors, min_cuda) in FACT_RULES.items()}
    if res is not None:
        facts["device_capability"] = res.resolved.as_tuple()
        facts["device_sm"] = res.resolved.sm
    return facts
