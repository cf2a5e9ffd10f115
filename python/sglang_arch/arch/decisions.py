"""Every decision for one device, topology and world size, in one value.

This is what ``sglang-arch explain`` prints and what the plugin logs; its ``to_dict``
keys are a contract for tools (``requested``, ``resolved``, ``match``, ``reason``,
``topology``, ``features``, ``collectives``, ``attention``, ``moe_gemm``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Optional, Tuple

from .capability import CapabilityLike, parse_capability
from .policies import attention, collectives, moe
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
    moe_runner: Optional[Dict[str, moe.Choice]] = None  # per quantization kind of the experts
    deep_gemm: Optional[moe.Choice] = None
    fp8_gemm: Optional[moe.Choice] = None
    fp4_gemm: Optional[moe.Choice] = None

    def gemm_rows(self) -> Dict[str, moe.Choice]:
        """The MoE / GEMM decisions as rows (name -> choice), in display order."""
        rows = {f"MoE runner {kind}": choice for kind, choice in (self.moe_runner or {}).items()}
        for name, choice in (("FP8 block GEMM", self.fp8_gemm), ("FP4 GEMM", self.fp4_gemm),
                             ("DeepGEMM", self.deep_gemm)):
            if choice is not None:
                rows[name] = choice
        return rows

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
            "moe_gemm": {
                "moe_runner": {kind: _choice(c) for kind, c in (self.moe_runner or {}).items()},
                "fp8_gemm": _choice(self.fp8_gemm),
                "fp4_gemm": _choice(self.fp4_gemm),
                "deep_gemm": _choice(self.deep_gemm),
            },
        }


def _choice(c: Optional[moe.Choice]) -> Optional[Dict[str, Any]]:
    if c is None:
        return None
    return {"choice": c.choice, "upstream": c.upstream, "changed": c.changed, "reason": c.reason}


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
        moe_runner={kind: moe.moe_runner(res, kind, traits.cuda) for kind in moe.QUANT_KINDS},
        deep_gemm=moe.deep_gemm(res, traits.cuda),
        fp8_gemm=moe.fp8_gemm(res, traits.cuda),
        fp4_gemm=moe.fp4_gemm(res, traits.cuda),
    )


def explain(capability: CapabilityLike, world_size: int = 1, topology: Optional[str] = None,
            nnodes: int = 1, cuda: Optional[Tuple[int, int]] = (13, 0)) -> Decisions:
    """Convenience entry: parse everything, resolve, decide."""
    res = resolve(parse_capability(capability))
    topo = parse_topology(topology) if topology is not None else None
    return decide(res, topo, world_size, nnodes, attention.ModelTraits(cuda=cuda))
