"""ArchProfile: one architecture tier as a frozen value, built and checked from table data.

The same builder checks the shipped table and user override files, so a malformed
override fails with the file, the entry and the field named.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from .capability import Capability, parse_capability
from .topology import TOPOLOGIES
from .validate import (
    CUDA_MAX_MAJOR,
    CUDA_MAX_MINOR,
    MAX_GPUS_PER_NODE,
    MAX_ITEMS,
    MAX_SHOWN,
    MAX_TEXT,
    MIB,
    SMEM_MAX_KIB,
    SYMM_MEM_MAX_MIB,
    parse_int,
    shown,
)

FEATURES = ("tma", "wgmma", "tcgen05", "fp8", "fp4")
SCOPES = ("portable", "family", "arch")
CUSTOM_AR_V2_TABLES = ("sm90", "sm100", "sm107")
FUSION_BACKENDS = ("trtllm", "mnnvl", "cutedsl")


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
    # world size -> bytes for torch's two-shot kernel without NVLink multicast (stock: off)
    symm_mem_two_shot: Mapping[int, int] = field(default_factory=dict)
    # TP sizes where SGLang's PCIe-IPC all-reduce is on by default (one node, PCIe with P2P)
    pcie_ipc_world_sizes: Tuple[int, ...] = ()
    custom_ar_v2_table: Optional[str] = None
    custom_ar_v2_world_sizes: Tuple[int, ...] = tuple(range(2, 17))
    allreduce_fusion: Tuple[str, ...] = ()  # usable backends; the first is what "auto" picks
    allreduce_fusion_multi_node: Tuple[str, ...] = ()  # those that may span nodes
    allreduce_fusion_min_cuda: Optional[Tuple[int, int]] = None
    # Where fusion is turned on without being asked (SGLang's auto-enable pass), by world
    # size: None: wherever it runs (SGLang's own rule on the tiers it names); a list: only
    # these world sizes, each measured on the node (``sglang-arch tune fusion``).  An
    # explicit --flashinfer-allreduce-fusion-backend does not need it.
    allreduce_fusion_auto_world_sizes: Optional[Tuple[int, ...]] = None
    attention_mha: Tuple[str, ...] = ()
    attention_mla: Tuple[str, ...] = ()
    # field -> evidence ledger ids (``evidence.py``) carrying its value where it differs from stock
    evidence: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    lead: Tuple[str, ...] = ()
    sources: Tuple[str, ...] = ()

    def evidence_for(self, name: str) -> Tuple[str, ...]:
        return tuple(self.evidence.get(name, ()))


_KNOWN_FIELDS = {
    "inherits", "name", "examples", "smem_per_sm_kib", "smem_per_block_kib", "features",
    "topology", "min_cuda", "min_cuda_arch_specific", "min_cuda_family", "max_cuda",
    "torch_symm_mem", "symm_mem_multimem_world_sizes", "symm_mem_two_shot", "pcie_ipc_world_sizes",
    "custom_ar_v2_table",
    "custom_ar_v2_world_sizes", "allreduce_fusion", "allreduce_fusion_multi_node", "allreduce_fusion_min_cuda",
    "allreduce_fusion_auto_world_sizes", "attention_mha", "attention_mla", "evidence", "lead", "sources",
}


class TableError(ValueError):
    """A table or override entry that does not fit the schema; names where."""


def flatten_entries(raw: Mapping[str, Mapping[str, Any]], where: str) -> Dict[Capability, Dict[str, Any]]:
    """Apply ``inherits`` so each entry holds all its fields.  Keys become Capabilities."""
    by_cap: Dict[Capability, Mapping[str, Any]] = {}
    spelled: Dict[Capability, Any] = {}
    for key, entry in raw.items():
        cap = _parse_key(key, where)
        if not isinstance(entry, Mapping):
            raise TableError(f"{where}: entry {shown(key)} must be a table of fields, got {type(entry).__name__}")
        check_unique(spelled, cap, key, where)
        by_cap[cap] = entry

    flat: Dict[Capability, Dict[str, Any]] = {}

    def build(cap: Capability, chain: Tuple[Capability, ...]) -> Dict[str, Any]:
        if cap in flat:
            return flat[cap]
        entry = by_cap[cap]
        parent = inherits_of(entry, f"{where}: entry {cap}")
        merged: Dict[str, Any] = {}
        if parent is not None:
            if parent not in by_cap:
                raise TableError(f"{where}: entry {cap}: field 'inherits' names {shown(entry.get('inherits'))}, "
                                 f"which has no entry")
            if parent in chain or parent == cap:
                loop = (chain[chain.index(parent):] if parent in chain else ()) + (cap, parent)
                raise TableError(f"{where}: 'inherits' forms a cycle: {' -> '.join(map(str, loop))} (each entry "
                                 f"names the next); accepted: inherits chains that end at an entry without one")
            merged.update(build(parent, chain + (cap,)))
            merged.pop("lead", None)
            merged.pop("sources", None)
        merged.update({k: v for k, v in entry.items() if k != "inherits"})
        flat[cap] = merged
        return merged

    for cap in by_cap:
        build(cap, ())
    return flat


def check_unique(seen: Dict[Any, Any], value: Any, key: Any, where: str, what: str = "entries",
                 named: str = "capability", accepted: str = "one entry per capability") -> None:
    """Refuse a second key naming what an earlier one named ("12.0" and "sm_120", world
    sizes "2" and "02"): one line naming both keys.  Records ``key`` under ``value``."""
    if value in seen:
        label = f"{named} {value}" if named else str(value)
        raise TableError(f"{where}: {what} {shown(seen[value])} and {shown(key)} both name {label} "
                         f"(listed twice); accepted: {accepted}")
    seen[value] = key


def inherits_of(entry: Mapping[str, Any], ctx: str) -> Optional[Capability]:
    """The capability an entry's ``inherits`` names; ``None`` when absent or null."""
    value = entry.get("inherits")
    if value is None:
        return None
    if not isinstance(value, str):
        raise TableError(f"{ctx}: field 'inherits': expected a capability string such as '12.0', got {shown(value)}")
    return _parse_key(value, f"{ctx}: field 'inherits'")


def build_profile(cap: Capability, fields: Mapping[str, Any], where: str) -> ArchProfile:
    """Check every field of one flattened entry against its type and range, and build its profile."""
    ctx = f"{where}: entry {cap}"
    unknown = sorted(str(k) for k in set(fields) - _KNOWN_FIELDS)
    if unknown:
        raise TableError(f"{ctx}: unknown field(s) {[k[:MAX_SHOWN] for k in unknown[:5]]}; accepted: {sorted(_KNOWN_FIELDS)}")
    if "name" not in fields:
        raise TableError(f"{ctx}: field 'name' is required")

    def f(name: str, default: Any = None) -> Any:
        value = fields.get(name, default)
        return default if value is None else value

    features = f("features", {})
    if not isinstance(features, Mapping):
        raise TableError(f"{ctx}: field 'features' must map feature -> scope, got {shown(features)}")
    for feat, scope in features.items():
        if not isinstance(feat, str) or feat not in FEATURES:
            raise TableError(f"{ctx}: field 'features': unknown feature {shown(feat)}; accepted: {list(FEATURES)}")
        if not isinstance(scope, str) or scope not in SCOPES:
            raise TableError(f"{ctx}: field 'features.{feat}': unknown scope {shown(scope)}; accepted: {list(SCOPES)}")

    topology = f("topology", "pcie")
    if not isinstance(topology, str) or topology not in TOPOLOGIES:
        raise TableError(f"{ctx}: field 'topology': unknown {shown(topology)}; accepted: {', '.join(TOPOLOGIES)}")

    symm_bytes = _sizes(f("torch_symm_mem", {}), ctx, "torch_symm_mem")
    two_shot_bytes = _sizes(f("symm_mem_two_shot", {}), ctx, "symm_mem_two_shot")
    evidence = _evidence(f("evidence", {}), ctx)

    table = fields.get("custom_ar_v2_table")
    if table is not None and (not isinstance(table, str) or table not in CUSTOM_AR_V2_TABLES):
        raise TableError(f"{ctx}: field 'custom_ar_v2_table': unknown {shown(table)}; "
                         f"accepted: {list(CUSTOM_AR_V2_TABLES)} or none")
    fusion = _strs(f("allreduce_fusion", []), f"{ctx}: field 'allreduce_fusion'")
    fusion_multi = _strs(f("allreduce_fusion_multi_node", []), f"{ctx}: field 'allreduce_fusion_multi_node'")
    for name, values in (("allreduce_fusion", fusion), ("allreduce_fusion_multi_node", fusion_multi)):
        bad = [v[:MAX_SHOWN] for v in values if v not in FUSION_BACKENDS]
        if bad:
            raise TableError(f"{ctx}: field '{name}': unknown backend(s) {bad[:3]}; accepted: {list(FUSION_BACKENDS)}")
    if not set(fusion_multi) <= set(fusion):
        raise TableError(f"{ctx}: field 'allreduce_fusion_multi_node' lists backends missing from 'allreduce_fusion'")

    smem = {}
    for kib_field in ("smem_per_sm_kib", "smem_per_block_kib"):
        smem[kib_field] = None if f(kib_field) is None else _int(f(kib_field), f"{ctx}: field '{kib_field}'",
                                                                 1, SMEM_MAX_KIB)

    min_cuda = _version(f("min_cuda"), f"{ctx}: field 'min_cuda'")
    max_cuda = _version(f("max_cuda"), f"{ctx}: field 'max_cuda'")
    if min_cuda is not None and max_cuda is not None and min_cuda > max_cuda:
        raise TableError(f"{ctx}: field 'min_cuda' {format_version(min_cuda)} is above field 'max_cuda' "
                         f"{format_version(max_cuda)}; accepted: min_cuda <= max_cuda")

    return ArchProfile(
        capability=cap,
        name=_name(f("name"), f"{ctx}: field 'name'"),
        examples=_strs(f("examples", []), f"{ctx}: field 'examples'"),
        smem_per_sm_kib=smem["smem_per_sm_kib"],
        smem_per_block_kib=smem["smem_per_block_kib"],
        features=dict(features),
        topology=topology,
        min_cuda=min_cuda,
        min_cuda_arch_specific=_version(f("min_cuda_arch_specific"), f"{ctx}: field 'min_cuda_arch_specific'"),
        min_cuda_family=_version(f("min_cuda_family"), f"{ctx}: field 'min_cuda_family'"),
        max_cuda=max_cuda,
        torch_symm_mem=symm_bytes,
        symm_mem_multimem_world_sizes=_ints(f("symm_mem_multimem_world_sizes", []),
                                            f"{ctx}: field 'symm_mem_multimem_world_sizes'", 2, MAX_GPUS_PER_NODE),
        symm_mem_two_shot=two_shot_bytes,
        pcie_ipc_world_sizes=_ints(f("pcie_ipc_world_sizes", []), f"{ctx}: field 'pcie_ipc_world_sizes'", 2,
                                   MAX_GPUS_PER_NODE),
        custom_ar_v2_table=table,
        custom_ar_v2_world_sizes=_ints(f("custom_ar_v2_world_sizes", list(range(2, 17))),
                                       f"{ctx}: field 'custom_ar_v2_world_sizes'", 1, MAX_GPUS_PER_NODE),
        allreduce_fusion=fusion,
        allreduce_fusion_multi_node=fusion_multi,
        allreduce_fusion_min_cuda=_version(f("allreduce_fusion_min_cuda"), f"{ctx}: field 'allreduce_fusion_min_cuda'"),
        allreduce_fusion_auto_world_sizes=None if fields.get("allreduce_fusion_auto_world_sizes") is None else _ints(
            fields["allreduce_fusion_auto_world_sizes"], f"{ctx}: field 'allreduce_fusion_auto_world_sizes'", 2,
            MAX_GPUS_PER_NODE),
        attention_mha=_strs(f("attention_mha", []), f"{ctx}: field 'attention_mha'"),
        attention_mla=_strs(f("attention_mla", []), f"{ctx}: field 'attention_mla'"),
        evidence=evidence,
        lead=_lead(f("lead", []), f"{ctx}: field 'lead'"),
        sources=_strs(f("sources", []), f"{ctx}: field 'sources'"),
    )


def _sizes(value: Any, ctx: str, name: str) -> Dict[int, int]:
    """A world size -> symmetric-memory size table (``torch_symm_mem``, ``symm_mem_two_shot``) in bytes."""
    if not isinstance(value, Mapping):
        raise TableError(f"{ctx}: field '{name}' must map world size -> MiB, got {shown(value)}")
    out: Dict[int, int] = {}
    keys: Dict[int, Any] = {}
    for ws, mib in value.items():
        ws_i = _int(ws, f"{ctx}: field '{name}' key", 2, MAX_GPUS_PER_NODE)
        check_unique(keys, ws_i, ws, f"{ctx}: field '{name}'", what="keys", named="world size",
                     accepted="one size per world size")
        out[ws_i] = symm_size_bytes(mib, f"{ctx}: field '{name}.{shown(ws).strip(chr(39))}'")
    return out


def _evidence(value: Any, ctx: str) -> Dict[str, Tuple[str, ...]]:
    """``evidence``: field name -> ledger ids; every field a known one, every id in the ledger."""
    from .evidence import LEDGER

    if not isinstance(value, Mapping):
        raise TableError(f"{ctx}: field 'evidence' must map field name -> a list of evidence ids, got {shown(value)}")
    out: Dict[str, Tuple[str, ...]] = {}
    for name, ids in value.items():
        if not isinstance(name, str) or name not in LEAD_FIELDS:
            raise TableError(f"{ctx}: field 'evidence': unknown field {shown(name)}; accepted: names of this "
                             f"entry's fields ({', '.join(LEAD_FIELDS)})")
        listed = _strs(ids, f"{ctx}: field 'evidence.{name}'")
        unknown = [i for i in listed if i not in LEDGER]
        if unknown:
            raise TableError(f"{ctx}: field 'evidence.{name}': unknown evidence {shown(unknown[0])}; accepted: "
                             f"ids of the evidence ledger ({', '.join(LEDGER)})")
        out[name] = listed
    return out


# A symmetric-memory size: an integer is MiB (the table's unit); a string with a unit keeps
# what a measurement found below or between whole MiB ("512 KiB", "1536 KiB", "8 B").
_SIZE_RE = re.compile(r"([0-9]{1,10}) ?(B|KiB|MiB)")
_SIZE_UNITS = {"B": 1, "KiB": 1024, "MiB": MIB}
SYMM_SIZE_ACCEPTED = (f"an integer 1-{SYMM_MEM_MAX_MIB} (MiB), or a string '<n> B', '<n> KiB' or '<n> MiB' "
                      f"(one space or none before the unit, nothing around) of a multiple of 4 bytes from 4 B "
                      f"to {SYMM_MEM_MAX_MIB} MiB")


def symm_size_bytes(value: Any, ctx: str) -> int:
    """A ``torch_symm_mem`` size in bytes: MiB as an integer, or a string with its unit."""
    if isinstance(value, str):
        m = _SIZE_RE.fullmatch(value)
        size = int(m.group(1)) * _SIZE_UNITS[m.group(2)] if m else 0
        if 4 <= size <= SYMM_MEM_MAX_MIB * MIB and size % 4 == 0:  # whole 4-byte words, as tune measures
            return size
        raise TableError(f"{ctx}: expected {SYMM_SIZE_ACCEPTED}, got {shown(value)}")
    try:
        return parse_int(value, ctx, 1, SYMM_MEM_MAX_MIB) * MIB
    except ValueError:
        raise TableError(f"{ctx}: expected {SYMM_SIZE_ACCEPTED}, got {shown(value)}") from None


def symm_size_text(size: int):
    """The table's spelling of ``size`` bytes (inverse of ``symm_size_bytes``): whole MiB as
    an integer, otherwise the largest unit that holds it exactly."""
    if size % MIB == 0:
        return size // MIB
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"


def _parse_key(key: Any, where: str) -> Capability:
    try:
        return parse_capability(key)
    except ValueError as exc:
        raise TableError(f"{where}: {exc}") from None


def _int(value: Any, ctx: str, minimum: int, maximum: int) -> int:
    try:
        return parse_int(value, ctx, minimum, maximum)
    except ValueError as exc:
        raise TableError(str(exc)) from None


def _list(values: Any, ctx: str, what: str) -> list:
    if not isinstance(values, (list, tuple)):
        raise TableError(f"{ctx}: expected a list of {what}, got {shown(values)}")
    if len(values) > MAX_ITEMS:
        raise TableError(f"{ctx}: expected at most {MAX_ITEMS} {what}, got {len(values)}")
    return list(values)


def _ints(values: Any, ctx: str, minimum: int, maximum: int) -> Tuple[int, ...]:
    """A list of distinct integers (world sizes): a value listed twice is refused, both named."""
    seen: Dict[int, Any] = {}
    for v in _list(values, ctx, f"integers {minimum}-{maximum}"):
        check_unique(seen, _int(v, ctx, minimum, maximum), v, ctx, what="items", named="",
                     accepted="each value once")
    return tuple(seen)


# Every string field is printed as it is in reports (a name on one line of each, backend
# names and sources in explain's reasons, examples in matrix): it refuses control
# characters (Cc: U+0000-U+001F, U+007F-U+009F: ESC could clear the terminal or forge a
# line), format characters (Cf: U+200B, U+202E, ...), the line and paragraph separators
# (Zl, Zp), and a lone surrogate (Cs, a JSON "\ud800" escape: UTF-8 cannot hold it).
SURROGATE_CATEGORIES = ("Cs",)
NAME_REFUSED_CATEGORIES = ("Cc", "Cf", "Cs", "Zl", "Zp")


def _str(value: Any, ctx: str, refused: Tuple[str, ...] = NAME_REFUSED_CATEGORIES) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TEXT:
        raise TableError(f"{ctx}: expected a string of 1-{MAX_TEXT} characters, got {shown(value)}")
    for i, ch in enumerate(value):
        category = unicodedata.category(ch)
        if category in refused:
            what = "a lone surrogate" if category == "Cs" else f"a {category} character"
            accepted = ("text UTF-8 can hold (no lone surrogate)" if refused == SURROGATE_CATEGORIES else
                        f"no character of Unicode categories {', '.join(refused)} (control, format, "
                        f"separator characters, lone surrogates)")
            raise TableError(f"{ctx}: {what} U+{ord(ch):04X} at position {i} of {shown(value)}; "
                             f"accepted: a string of 1-{MAX_TEXT} characters, {accepted}")
    return value


def _name(value: Any, ctx: str) -> str:
    """A tier's name is what every report shows for it: one of blanks alone names nothing."""
    name = _str(value, ctx, NAME_REFUSED_CATEGORIES)
    if not name.strip():
        raise TableError(f"{ctx}: {shown(name)} is blank; accepted: a string of 1-{MAX_TEXT} characters "
                         f"with at least one that is not white space")
    return name


# ``lead`` names the fields of the same entry whose value has one source so far.
LEAD_FIELDS = tuple(sorted(_KNOWN_FIELDS - {"inherits", "lead", "sources", "evidence"}))


def _lead(values: Any, ctx: str) -> Tuple[str, ...]:
    lead = _strs(values, ctx)
    unknown = [v for v in lead if v not in LEAD_FIELDS]
    if unknown:
        raise TableError(f"{ctx}: unknown field(s) {', '.join(shown(v) for v in unknown[:3])}; accepted: names of this "
                         f"entry's fields ({', '.join(LEAD_FIELDS)})")
    return lead


def _strs(values: Any, ctx: str) -> Tuple[str, ...]:
    return tuple(_str(v, ctx) for v in _list(values, ctx, "strings"))


def _version(value: Any, ctx: str) -> Optional[Tuple[int, int]]:
    if value is None:
        return None
    try:
        return parse_version(value)
    except ValueError as exc:
        raise TableError(f"{ctx}: {exc}") from None


# The CUDA version grammar, as torch.version.cuda ('12.8') and nvcc ('release 12.8',
# 'V12.8.93') print it: 'M', 'M.m' or 'M.m.p', each part ASCII digits without a leading
# zero ('12.08' is not 12.8: a version is not a decimal fraction), surrounding blanks
# ignored, at most 20 characters in all.
_VERSION_RE = re.compile(r"(0|[1-9][0-9]?)(?:\.(0|[1-9][0-9]?)(?:\.(?:0|[1-9][0-9]{0,3}))?)?")
_VERSION_ACCEPTED = (f"'M.m' such as '12.8' or '13.0', or 'M' or 'M.m.p' (ASCII digits without a leading zero; "
                     f"major 1-{CUDA_MAX_MAJOR}, minor 0-{CUDA_MAX_MINOR}, patch 0-9999, dropped)")


def parse_version(value: Any) -> Tuple[int, int]:
    """'12.8' -> (12, 8); also accepts '13', (13, 0) and '12.8.1' (patch dropped).
    '12.08' is refused: no part has a leading zero."""
    major = minor = None
    if isinstance(value, (tuple, list)) and len(value) in (2, 3) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        major, minor = value[0], value[1]
    elif isinstance(value, str) and len(value) <= 20:
        m = _VERSION_RE.fullmatch(value.strip())
        if m:
            major, minor = int(m.group(1)), int(m.group(2) or 0)
    if major is None or not (1 <= major <= CUDA_MAX_MAJOR and 0 <= minor <= CUDA_MAX_MINOR):
        raise ValueError(f"invalid version {shown(value)}; accepted: {_VERSION_ACCEPTED}")
    return (major, minor)


def format_version(version: Optional[Tuple[int, int]]) -> Optional[str]:
    return None if version is None else f"{version[0]}.{version[1]}"
