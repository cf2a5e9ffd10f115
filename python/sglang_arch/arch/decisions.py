"""Every decision for one device, topology and world size, in one value.

This is what ``sglang-arch explain`` prints and what the plugin logs; its ``to_dict``
keys are a contract for tools (``requested``, ``resolved``, ``match``, ``reason``,
``topology``, ``features``, ``collectives``, ``attention``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Optional, Tuple

from .capability import CapabilityLike, parse_capability
from .policies import attention, collectives
from .registry import Resolution, resolve
from .topology import Topology, parse_topology


@dataclass(frozen=True)
class Decisions:
    resolution: Resolution
    topology: Topology
    world_size: int
    nnodes: int
    symm_mem: collectives.SymmMemDecision
    custom_allreduce: collectives.CustomAllReduceDecision
    fusion: collectives.FusionDecision
    mha: attention.AttentionDecision
    mla: attention.AttentionDecision

    def to_dict(self) -> Dict[str, Any]:
        res = self.resolution
        return {
            "requested": str(res.requested),
            "resolved": str(res.resolved),
            "match": res.match,
            "reason": res.reason,
            "name": res.profile.name,
            "topology": self.topology.name,
            "world_size": self.world_size,
            "nnodes": self.nnodes,
            "features": res.features,
            "collectives": {
                "torch_symm_mem": {
                    "enabled": self.symm_mem.enabled,
                    "max_bytes": self.symm_mem.max_bytes,
                    "algorithm": self.symm_mem.algorithm,
                    "reason": self.symm_mem.reason,
                },
                "custom_allreduce": {
                    "enabled": self.custom_allreduce.enabled,
                    "max_bytes": self.custom_allreduce.max_bytes,
                    "table": self.custom_allreduce.table,
                    "reason": self.custom_allreduce.reason,
                },
                "allreduce_fusion": {
                    "enabled": self.fusion.enabled,
                    "backend": self.fusion.backend,
                    "reason": self.fusion.reason,
                },
            },
            "attention": {
                kind: {"prefill": d.prefill, "decode": d.decode, "reason": d.reason}
                for kind, d in (("mha", self.mha), ("mla", self.mla))
            },
        }


def decide(
    res: Resolution,
    topology: Optional[Topology] = None,
    world_size: int = 1,
    nnodes: int = 1,
    traits: Optional[attention.ModelTraits] = None,
) -> Decisions:
    """All decisions; ``topology`` defaults to the tier's typical one (single for one GPU)."""
    if topology is None:
        topology = parse_topology("single" if world_size == 1 else res.profile.topology)
    traits = traits or attention.ModelTraits()
    return Decisions(
        resolution=res,
        topology=topology,
        world_size=world_size,
        nnodes=nnodes,
        symm_mem=collectives.torch_symm_mem(res, topology, world_size),
        custom_allreduce=collectives.custom_allreduce(res, topology, world_size),
        fusion=collectives.allreduce_fusion(res, topology, world_size, nnodes, cuda=traits.cuda),
        mha=attention.default_backend(res, replace(traits, kind="mha")),
        mla=attention.default_backend(res, replace(traits, kind="mla")),
    )


def explain(capability: CapabilityLike, world_size: int = 1, topology: Optional[str] = None,
            nnodes: int = 1, cuda: Optional[Tuple[int, int]] = (13, 0)) -> Decisions:
    """Convenience entry: parse everything, resolve, decide."""
    res = resolve(parse_capability(capability))
    topo = parse_topology(topology) if topology is not None else None
    return decide(res, topo, world_size, nnodes, attention.ModelTraits(cuda=cuda))
