"""ArchProfile: one architecture tier as a frozen value, built and checked from table data.

The same builder checks the shipped table and user override files, so a malformed
override fails with the file, the entry and the field named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from .capability import Capability, parse_capability
from .topology import TOPOLOGIES

FEATURES = ("tma", "wgmma", "tcgen05", "fp8", "fp4")
SCOPES = ("portable", "family", "arch")
CUSTOM_AR_V2_TABLES = ("sm90", "sm100", "sm107")
FUSION_BACKENDS = ("trtllm", "mnnvl", "cutedsl")
MIB = 1024 * 1024


@dataclass(frozen=True)
class ArchProfile:
    """Everything the registry knows about one tier.  Values, never behaviour."""

    capability: Capability
    name: str
    examples: Tuple[str, ...] = ()
    smem_per_sm_kib: Optional[int] = None
    smem_per_block_kib: Optional[int] = None
    features: Mapping[str, str] = field(default_factory=dict)
    topology: str = "pcie"
    min_cuda: Optional[Tuple[int, int]] = None
    min_cuda_arch_specific: Optional[Tuple[int, int]] = None
    min_cuda_family: Optional[Tuple[int, int]] = None
    max_cuda: Optional[Tuple[int, int]] = None
    torch_symm_mem: Mapping[int, int] = field(default_factory=dict)  # world size -> bytes
    symm_mem_multimem_world_sizes: Tuple[int, ...] = ()
    custom_ar_v2_table: Optional[str] = None
    custom_ar_v2_world_sizes: Tuple[int, ...] = tuple(range(2, 17))
    allreduce_fusion: Tuple[str, ...] = ()  # usable backends; the first is what "auto" picks
    allreduce_fusion_multi_node: Tuple[str, ...] = ()  # those that may span nodes
    allreduce_fusion_min_cuda: Optional[Tuple[int, int]] = None
    attention_mha: Tuple[str, ...] = ()
    attention_mla: Tuple[str, ...] = ()
    lead: Tuple[str, ...] = ()
    sources: Tuple[str, ...] = ()


_KNOWN_FIELDS = {
    "inherits", "name", "examples", "smem_per_sm_kib", "smem_per_block_kib", "features",
    "topology", "min_cuda", "min_cuda_arch_specific", "min_cuda_family", "max_cuda",
    "torch_symm_mem", "symm_mem_multimem_world_sizes", "custom_ar_v2_table",
    "custom_ar_v2_world_sizes", "allreduce_fusion", "allreduce_fusion_multi_node", "allreduce_fusion_min_cuda",
    "attention_mha", "attention_mla", "lead", "sources",
}


class TableError(ValueError):
    """A table or override entry that does not fit the schema; names where."""


def flatten_entries(raw: Mapping[str, Mapping[str, Any]], where: str) -> Dict[Capability, Dict[str, Any]]:
    """Apply ``inherits`` so each entry holds all its fields.  Keys become Capabilities."""
    by_cap: Dict[Capability, Mapping[str, Any]] = {}
    for key, entry in raw.items():
        cap = _parse_key(key, where)
        if not isinstance(entry, Mapping):
            raise TableError(f"{where}: entry {key!r} must be a table of fields, got {type(entry).__name__}")
        by_cap[cap] = entry

    flat: Dict[Capability, Dict[str, Any]] = {}

    def build(cap: Capability, chain: Tuple[Capability, ...]) -> Dict[str, Any]:
        if cap in flat:
            return flat[cap]
        entry = by_cap[cap]
        parent_key = entry.get("inherits")
        merged: Dict[str, Any] = {}
        if parent_key is not None:
            parent = _parse_key(parent_key, f"{where}: entry {cap}: field 'inherits'")
            if parent not in by_cap:
                raise TableError(f"{where}: entry {cap}: field 'inherits' names {parent_key!r}, which has no entry")
            if parent in chain:
                raise TableError(f"{where}: entry {cap}: 'inherits' forms a cycle through {parent}")
            merged.update(build(parent, chain + (cap,)))
            merged.pop("lead", None)
            merged.pop("sources", None)
        merged.update({k: v for k, v in entry.items() if k != "inherits"})
        flat[cap] = merged
        return merged

    for cap in by_cap:
        build(cap, ())
    return flat


def build_profile(cap: Capability, fields: Mapping[str, Any], where: str) -> ArchProfile:
    """Check every field of one flattened entry and build its profile."""
    ctx = f"{where}: entry {cap}"
    unknown = sorted(set(fields) - _KNOWN_FIELDS)
    if unknown:
        raise TableError(f"{ctx}: unknown field(s) {unknown}; accepted: {sorted(_KNOWN_FIELDS)}")
    if "name" not in fields:
        raise TableError(f"{ctx}: field 'name' is required")

    def f(name: str, default: Any = None) -> Any:
        return fields.get(name, default)

    features = f("features", {}) or {}
    if not isinstance(features, Mapping):
        raise TableError(f"{ctx}: field 'features' must map feature -> scope")
    for feat, scope in features.items():
        if feat not in FEATURES:
            raise TableError(f"{ctx}: field 'features': unknown feature {feat!r}; accepted: {list(FEATURES)}")
        if scope not in SCOPES:
            raise TableError(f"{ctx}: field 'features.{feat}': unknown scope {scope!r}; accepted: {list(SCOPES)}")

    topology = f("topology", "pcie")
    if topology not in TOPOLOGIES:
        raise TableError(f"{ctx}: field 'topology': unknown {topology!r}; accepted: {', '.join(TOPOLOGIES)}")

    symm = f("torch_symm_mem", {}) or {}
    if not isinstance(symm, Mapping):
        raise TableError(f"{ctx}: field 'torch_symm_mem' must map world size -> MiB")
    symm_bytes = {}
    for ws, mib in symm.items():
        ws_i = _int(ws, f"{ctx}: field 'torch_symm_mem' key", minimum=2)
        symm_bytes[ws_i] = _int(mib, f"{ctx}: field 'torch_symm_mem.{ws}'", minimum=1) * MIB

    table = f("custom_ar_v2_table")
    if table is not None and table not in CUSTOM_AR_V2_TABLES:
        raise TableError(f"{ctx}: field 'custom_ar_v2_table': unknown {table!r}; accepted: {list(CUSTOM_AR_V2_TABLES)} or none")
    fusion = _strs(f("allreduce_fusion", []), f"{ctx}: field 'allreduce_fusion'")
    fusion_multi = _strs(f("allreduce_fusion_multi_node", []), f"{ctx}: field 'allreduce_fusion_multi_node'")
    for name, values in (("allreduce_fusion", fusion), ("allreduce_fusion_multi_node", fusion_multi)):
        bad = [v for v in values if v not in FUSION_BACKENDS]
        if bad:
            raise TableError(f"{ctx}: field '{name}': unknown backend(s) {bad}; accepted: {list(FUSION_BACKENDS)}")
    if not set(fusion_multi) <= set(fusion):
        raise TableError(f"{ctx}: field 'allreduce_fusion_multi_node' lists backends missing from 'allreduce_fusion'")

    for kib_field in ("smem_per_sm_kib", "smem_per_block_kib"):
        if f(kib_field) is not None:
            _int(f(kib_field), f"{ctx}: field '{kib_field}'", minimum=1)

    return ArchProfile(
        capability=cap,
        name=_str(f("name"), f"{ctx}: field 'name'"),
        examples=_strs(f("examples", []), f"{ctx}: field 'examples'"),
        smem_per_sm_kib=f("smem_per_sm_kib"),
        smem_per_block_kib=f("smem_per_block_kib"),
        features=dict(features),
        topology=topology,
        min_cuda=_version(f("min_cuda"), f"{ctx}: field 'min_cuda'"),
        min_cuda_arch_specific=_version(f("min_cuda_arch_specific"), f"{ctx}: field 'min_cuda_arch_specific'"),
        min_cuda_family=_version(f("min_cuda_family"), f"{ctx}: field 'min_cuda_family'"),
        max_cuda=_version(f("max_cuda"), f"{ctx}: field 'max_cuda'"),
        torch_symm_mem=symm_bytes,
        symm_mem_multimem_world_sizes=_ints(f("symm_mem_multimem_world_sizes", []), f"{ctx}: field 'symm_mem_multimem_world_sizes'"),
        custom_ar_v2_table=table,
        custom_ar_v2_world_sizes=_ints(f("custom_ar_v2_world_sizes", list(range(2, 17))), f"{ctx}: field 'custom_ar_v2_world_sizes'"),
        allreduce_fusion=fusion,
        allreduce_fusion_multi_node=fusion_multi,
        allreduce_fusion_min_cuda=_version(f("allreduce_fusion_min_cuda"), f"{ctx}: field 'allreduce_fusion_min_cuda'"),
        attention_mha=_strs(f("attention_mha", []), f"{ctx}: field 'attention_mha'"),
        attention_mla=_strs(f("attention_mla", []), f"{ctx}: field 'attention_mla'"),
        lead=_strs(f("lead", []), f"{ctx}: field 'lead'"),
        sources=_strs(f("sources", []), f"{ctx}: field 'sources'"),
    )


def _parse_key(key: Any, where: str) -> Capability:
    try:
        return parse_capability(key)
    except ValueError as exc:
        raise TableError(f"{where}: {exc}") from None


def _int(value: Any, ctx: str, minimum: int) -> int:
    if isinstance(value, bool):
        raise TableError(f"{ctx}: expected an integer >= {minimum}, got {value!r}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise TableError(f"{ctx}: expected an integer >= {minimum}, got {value!r}") from None
    if number < minimum or (isinstance(value, float) and value != number):
        raise TableError(f"{ctx}: expected an integer >= {minimum}, got {value!r}")
    return number


def _ints(values: Any, ctx: str) -> Tuple[int, ...]:
    if not isinstance(values, (list, tuple)):
        raise TableError(f"{ctx}: expected a list of integers, got {values!r}")
    return tuple(_int(v, ctx, minimum=1) for v in values)


def _str(value: Any, ctx: str) -> str:
    if not isinstance(value, str):
        raise TableError(f"{ctx}: expected a string, got {value!r}")
    return value


def _strs(values: Any, ctx: str) -> Tuple[str, ...]:
    if not isinstance(values, (list, tuple)):
        raise TableError(f"{ctx}: expected a list of strings, got {values!r}")
    return tuple(_str(v, ctx) for v in values)


def _version(value: Any, ctx: str) -> Optional[Tuple[int, int]]:
    if value is None:
        return None
    try:
        return parse_version(value)
    except ValueError as exc:
        raise TableError(f"{ctx}: {exc}") from None


def parse_version(value: Any) -> Tuple[int, int]:
    """'12.8' -> (12, 8); also accepts '13', (13, 0) and '12.8.1' (patch dropped)."""
    if isinstance(value, (tuple, list)) and len(value) >= 2 and all(isinstance(v, int) for v in value[:2]):
        return (int(value[0]), int(value[1]))
    if isinstance(value, str):
        parts = value.strip().split(".")
        if 1 <= len(parts) <= 3 and all(p.isdigit() for p in parts):
            return (int(parts[0]), int(parts[1]) if len(parts) > 1 else 0)
    raise ValueError(f"invalid version {value!r}; accepted: 'M.m' such as '12.8' or '13.0'")


def format_version(version: Optional[Tuple[int, int]]) -> Optional[str]:
    return None if version is None else f"{version[0]}.{version[1]}"
