"""The coverage numbers docs/development.md states are the generated audit's (docs/capability-sites.md)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# concern | sites | decisions | gates | facts | plugin routed | plugin unrouted | patched routed | patched unrouted
COLUMNS = 8


def _summary():
    rows = {}
    for line in (ROOT / "docs" / "capability-sites.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == COLUMNS + 1 and cells[1].isdigit():
            rows[cells[0]] = [int(c) for c in cells[1:]]
    return rows


def _stated(name, row):
    sites, _decisions, gates, facts, routed, unrouted = row[:6]
    return f"{name} {sites}: {routed} / {unrouted}, {gates} gates, {facts} facts"


def test_readme_states_the_generated_numbers():
    rows = _summary()
    readme = re.sub(r"\s+", " ", (ROOT / "docs" / "development.md").read_text())
    assert {"collectives", "fusion", "moe", "quantization", "gemm", "total"} <= set(rows)
    for concern in ("collectives", "fusion", "moe", "quantization", "gemm"):
        assert _stated(concern, rows[concern]) in readme, concern
    kinds = [k for k in rows if k.startswith("attention/")]
    assert kinds, "no attention rows"
    for kind in kinds:
        assert _stated(kind.split("/")[1], rows[kind]) in readme, kind
    attention = [sum(rows[k][i] for k in kinds) for i in range(COLUMNS)]
    assert _stated("attention/*", attention) in readme
    total = rows["total"]
    assert _stated("all concerns", total) + f" (the patched tree: {total[6]} / {total[7]})" in readme
    three = [rows[k] for k in rows if k in ("collectives", "fusion") or k.startswith("attention/")]
    left_plugin, left_patched = sum(r[5] for r in three), sum(r[7] for r in three)
    assert (f"{left_plugin} decisions of the three concerns for the plugin and {left_patched} for the patched "
            f"tree") in readme
    beyond = [rows[k] for k in ("moe", "quantization", "gemm")]
    assert (f"{sum(r[5] for r in beyond)} remain decisions (moe {beyond[0][5]}, quantization {beyond[1][5]}, "
            f"gemm {beyond[2][5]})") in readme
