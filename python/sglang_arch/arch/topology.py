"""How the GPUs of a node talk to each other: an input to every collective decision.

Capability alone cannot tell an 8x H200 HGX (NVSwitch with multicast) from 8x RTX PRO
6000 on PCIe, yet torch symmetric memory's multimem path needs multicast and its
two-shot path only peer-to-peer access.  So topology is a value of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple


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
# The topologies of more than one GPU, in the table's order (``single`` is one GPU).
MULTI_GPU_TOPOLOGIES: Tuple[str, ...] = tuple(name for name in TOPOLOGIES if name != "single")


def parse_topology(value: object) -> Topology:
    if isinstance(value, Topology):
        return value
    if isinstance(value, str) and value.strip().lower() in TOPOLOGIES:
        return TOPOLOGIES[value.strip().lower()]
    raise ValueError(f"invalid topology {value!r}; accepted: {', '.join(TOPOLOGIES)}")



# A node of several GPUs whose tier is typically a single-GPU device (a DGX Spark, a Jetson,
# an unknown GPU that falls back to one of them) is simulated on the most conservative
# multi-GPU link: PCIe without peer-to-peer access, so no path that needs P2P, NVLink or
# multicast is assumed.
MULTI_GPU_STAND_IN = "pcie"


def default_topology(typical: str, gpus: int) -> Topology:
    """The topology a simulated node of ``gpus`` GPUs gets when none is given: ``single``
    for one GPU, else the tier's ``typical`` one, except that ``single`` never describes
    more than one GPU (then :data:`MULTI_GPU_STAND_IN`)."""
    if gpus <= 1:
        return TOPOLOGIES["single"]
    if typical == "single" or typical not in TOPOLOGIES:
        return TOPOLOGIES[MULTI_GPU_STAND_IN]
    return TOPOLOGIES[typical]


def stand_in_note(typical: str, gpus: int, given: Optional[Topology] = None) -> Optional[str]:
    """What a reader must be told when the default is not the tier's typical topology."""
    if given is not None or gpus <= 1 or typical != "single":
        return None
    return (f"the tier is typically a single GPU; {gpus} GPUs are assumed on {MULTI_GPU_STAND_IN} "
            f"(no peer-to-peer access), the most conservative link; pass --topology to choose")


def check_machine_topology(topology: Topology, gpus: int) -> None:
    """``single`` describes exactly one GPU; ValueError naming both otherwise."""
    if topology.name == "single" and gpus > 1:
        others = ", ".join(MULTI_GPU_TOPOLOGIES)
        raise ValueError(f"topology single is one GPU, but {gpus} GPUs are given; accepted: one of "
                         f"{others} for more than one GPU, or single with one GPU")
