"""How the GPUs of a node talk to each other: an input to every collective decision.

Capability alone cannot tell an 8x H200 HGX (NVSwitch with multicast) from 8x RTX PRO
6000 on PCIe, yet torch symmetric memory's multimem path needs multicast and its
two-shot path only peer-to-peer access.  So topology is a value of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class Topology:
    name: str
    p2p: bool  # every GPU can load/store every other GPU's memory
    full_nvlink: bool  # every pair is NVLink-connected
    multicast: bool  # NVLink SHARP / NVLS multicast objects work
    description: str


TOPOLOGIES: Dict[str, Topology] = {
    t.name: t
    for t in (
        Topology("single", p2p=False, full_nvlink=False, multicast=False, description="one GPU"),
        Topology("nvswitch", p2p=True, full_nvlink=True, multicast=True, description="NVLink all-to-all with multicast (HGX/NVL)"),
        Topology("nvlink", p2p=True, full_nvlink=True, multicast=False, description="NVLink all-to-all, no multicast"),
        Topology("pcie-p2p", p2p=True, full_nvlink=False, multicast=False, description="PCIe with peer-to-peer access"),
        Topology("pcie", p2p=False, full_nvlink=False, multicast=False, description="PCIe without peer-to-peer access"),
    )
}


def parse_topology(value: object) -> Topology:
    if isinstance(value, Topology):
        return value
    if isinstance(value, str) and value.strip().lower() in TOPOLOGIES:
        return TOPOLOGIES[value.strip().lower()]
    raise ValueError(f"invalid topology {value!r}; accepted: {', '.join(TOPOLOGIES)}")

