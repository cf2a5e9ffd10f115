"""``sglang-arch tune fusion``: whether FlashInfer all-reduce fusion wins on this node.

Where the tier lists the world sizes fusion is turned on at by default
(``allreduce_fusion_auto_world_sizes``: SM12x over PCIe lists none, see
docs/differences.md D3), a node's own measurement adds one: the same benchmark run
``--trials`` times without and with ``--flashinfer-allreduce-fusion-backend auto`` at one
world size (throughput, tokens per second, higher is better).  Fusion wins only where
its median is higher *and* the trials do not overlap (its slowest trial beats the
baseline's fastest): a difference inside the spread decides nothing.  The override file
then lists the world size (a loss removes it); the registry reads it back through
``SGLANG_ARCH_CONFIG`` and ``explain`` says "on by default" there.
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..arch.validate import MAX_GPUS_PER_NODE, MAX_ITEMS, MAX_TEXT, printable, shown_path

FIELD = "allreduce_fusion_auto_world_sizes"
MIN_TRIALS = 3
MAX_TRIALS = 1000
MAX_TOKS = 1e9  # tokens per second, an upper bound far above any node


def parse_trials(text: str, flag: str) -> List[float]:
    """Comma-separated tokens-per-second figures, MIN_TRIALS to MAX_TRIALS of them."""
    values = []
    for part in text.split(","):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            value = float("nan")
        if not 0 < value <= MAX_TOKS:  # also NaN
            raise ValueError(f"{flag} {printable(text, 60)}: {printable(part, 30)!s} is not a throughput; accepted: "
                             f"{MIN_TRIALS}-{MAX_TRIALS} comma-separated tokens per second, each above 0 and at most "
                             f"{MAX_TOKS:g}")
        values.append(value)
    if not MIN_TRIALS <= len(values) <= MAX_TRIALS:
        raise ValueError(f"{flag}: {len(values)} trial(s); accepted: {MIN_TRIALS}-{MAX_TRIALS} comma-separated "
                         f"tokens per second (one per run of the same benchmark)")
    return values


def verdict(without: Sequence[float], with_fusion: Sequence[float]) -> Dict[str, Any]:
    """Whether fusion won: a higher median and no overlap of the trials."""
    base, fused = statistics.median(without), statistics.median(with_fusion)
    won = fused > base and min(with_fusion) > max(without)
    lost = fused < base and max(with_fusion) < min(without)
    return {"median_without": base, "median_with": fused, "gain": fused / base - 1.0,
            "spread_without": [min(without), max(without)], "spread_with": [min(with_fusion), max(with_fusion)],
            "result": "won" if won else "lost" if lost else "inside the spread"}


def updated_sizes(current: Sequence[int], world_size: int, result: str) -> List[int]:
    """The measured list after this measurement: a win adds the world size, a loss or a tie
    removes it (fusion stays off unasked where it is not shown to win)."""
    sizes = [w for w in current if w != world_size]
    if result == "won":
        sizes.append(world_size)
    return sorted(sizes)


def override_document(existing: Optional[Mapping[str, Any]], tier: str, sizes: List[int],
                      source: str) -> Dict[str, Dict[str, Any]]:
    """The override entries to write: ``existing`` (the file at --out, if any) with the
    tier's measured list set and the measurement added to its sources."""
    doc = {str(k): dict(v) for k, v in (existing or {}).items()}
    key = next((k for k in doc if _same_capability(k, tier)), tier)
    entry = doc.setdefault(key, {})
    entry[FIELD] = list(sizes)
    sources = [s for s in entry.get("sources", []) if s != source]
    entry["sources"] = (sources + [source])[-MAX_ITEMS:]
    return doc


def _same_capability(key: str, tier: str) -> bool:
    from ..arch.capability import parse_capability

    try:
        return parse_capability(key) == parse_capability(tier)
    except ValueError:
        return False


def source_line(tier: str, world_size: int, device: str, v: Dict[str, Any], node: str) -> str:
    """The measurement as the override's ``sources`` names it: one printable line within the
    schema's limit on a string."""
    line = (f"sglang-arch tune fusion on {node}: {device}, world size {world_size}, tokens per second "
            f"{v['median_without']:.6g} without fusion -> {v['median_with']:.6g} with (medians; spreads "
            f"{v['spread_without'][0]:.6g}-{v['spread_without'][1]:.6g} and {v['spread_with'][0]:.6g}-"
            f"{v['spread_with'][1]:.6g}): {v['result']}")
    return printable(line, MAX_TEXT)


def check_world_size(world_size: int, gpus: int) -> None:
    if not 2 <= world_size <= MAX_GPUS_PER_NODE:
        raise ValueError(f"--world-size {world_size}; accepted: an integer 2-{MAX_GPUS_PER_NODE}")
    if gpus and world_size > gpus:
        raise ValueError(f"--world-size {world_size}: this node has {gpus} GPU(s); accepted: 2-{gpus} "
                         f"(the world size the trials ran at, on this node)")


def report_text(report: Dict[str, Any]) -> str:
    v = report["verdict"]
    lines = [f"tier {report['tier']} ({report['device']}), world size {report['world_size']}: "
             f"{v['median_without']:.6g} -> {v['median_with']:.6g} tok/s (medians, {v['gain']:+.2%}); "
             f"fusion {v['result']}",
             f"fusion on by default at world sizes: {report['sizes'] or 'none'}"]
    if report.get("override_file"):
        shown_file = shown_path(report["override_file"])
        lines.append(f"override written to {shown_file} (use SGLANG_ARCH_CONFIG={shown_file})")
    return "\n".join(lines)


def render_json(report: Dict[str, Any]) -> str:
    return json.dumps(report, indent=2)


def existing_override(path: str) -> Optional[Dict[str, Any]]:
    """The override file at ``path`` when there is one (its entries are kept), else None."""
    if not os.path.lexists(path):
        return None
    from ..arch.registry import load_override_file

    return load_override_file(path, label=f"--out {printable(path, 200)}")
