"""The GPU architecture registry.

Pure Python: no torch, no sglang, no GPU needed to import it.  Data flows one way:
capability (detect) -> resolution (registry) -> decisions (policies) -> consumers.
This package uses only relative imports, so it can live in an SGLang tree as
``sglang/srt/arch/`` unchanged.
"""

from .capability import ACCEPTED_FORMS, Capability, parse_capability
from .decisions import Decisions, decide, explain
from .detect import Gpu, Node, detect, node_resolution
from .profile import FEATURES, ArchProfile, TableError
from .registry import (
    MATCH_KINDS,
    Registry,
    Resolution,
    UnknownCapabilityError,
    build_registry,
    default_registry,
    reset_default_registry,
    resolve,
)
from .topology import TOPOLOGIES, Topology, parse_topology

__all__ = [
    "ACCEPTED_FORMS", "ArchProfile", "Capability", "Decisions", "FEATURES", "Gpu", "MATCH_KINDS",
    "Node", "Registry", "Resolution", "TOPOLOGIES", "TableError", "Topology", "UnknownCapabilityError",
    "build_registry", "decide", "default_registry", "detect", "explain", "node_resolution",
    "parse_capability", "parse_topology", "reset_default_registry", "resolve",
]
