"""The README's coverage numbers are the generated audit's (docs/capability-sites.md)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _summary():
    rows = {}
    for line in (ROOT / "docs" / "capability-sites.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 10 and cells[1].isdigit():
            rows[cells[0]] = [int(c) for c in cells[1:]]
    return rows


def test_readme_states_the_generated_numbers():
    rows = _summary()
    readme = re.sub(r"\s+", " ", (ROOT / "README.md").read_text())
    for concern in ("collectives", "fusion"):
        total, r, p, d, u = rows[concern][:5]
        assert f"{concern} {total}: {r} / {p} / {d} / {u}" in readme, concern
    for kind in ("mha", "mla", "dsa", "linear", "other"):
        total, r, p, d, u = rows[f"attention/{kind}"][:5]
        assert f"{kind} {total}: {r} / {p} / {d} / {u}" in readme, kind
    attention = [sum(v[i] for k, v in rows.items() if k.startswith("attention/")) for i in range(5)]
    assert "attention/* {}: {} / {} / {} / {}".format(*attention) in readme
    assert attention[4] == 0, "unrouted attention sites"
    total = rows["total"]
    assert "all concerns {}: {} / {} / {} / {} (the patched tree: {} / {} / {} / {})".format(
        total[0], *total[1:]) in readme
    assert f"The {total[4]} unrouted sites" in readme
