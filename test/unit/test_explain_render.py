"""``sglang-arch explain``'s table: every cell stays in its column, whatever its length."""

import pytest
from sglang_arch.arch.decisions import explain
from sglang_arch.arch.table import ARCHITECTURES
from sglang_arch.cli import render_decisions

CAPABILITIES = list(ARCHITECTURES) + ["10.5", "11.5", "12.3", "13.0", "6.1"]


@pytest.mark.parametrize("cap", CAPABILITIES)
def test_every_row_starts_its_value_and_reason_where_the_header_does(cap):
    lines = render_decisions(explain(cap)).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("decision "))
    value_at, reason_at = lines[header].index("value"), lines[header].index("reason")
    rows = [line for line in lines[header + 1:] if not line.lstrip().startswith("dropped ")]
    assert len(rows) >= 15
    for line in rows:
        assert line[value_at - 1] == " " and line[value_at] != " ", line  # the label ended before the value
        assert line[reason_at - 1] == " " and line[reason_at] != " ", line  # the value ended before the reason


def test_a_refusal_with_upstreams_choice_does_not_run_into_its_reason():
    """11.0's MXFP8 MoE row: 'refused (stock: flashinfer_trtllm)' is longer than the
    26-character column it had; the reason once followed it without a space."""
    row = next(line for line in render_decisions(explain("11.0")).splitlines() if line.startswith("MoE runner mxfp8"))
    assert "refused (stock: flashinfer_trtllm) tier 11.0" in " ".join(row.split())
    assert ")tier" not in row
