"""``sglang-arch show``'s table of decisions: every cell stays in its column, whatever its
length, every line fits 100 columns, and the reasons come with ``--verbose``."""

import pytest
from sglang_arch.arch.decisions import explain
from sglang_arch.arch.table import ARCHITECTURES
from sglang_arch.cli import WIDTH, decision_rows, render_decisions

CAPABILITIES = list(ARCHITECTURES) + ["10.5", "11.5", "12.3", "13.0", "6.1"]


@pytest.mark.parametrize("cap", CAPABILITIES)
@pytest.mark.parametrize("verbose", [False, True])
def test_every_row_starts_its_value_and_effect_where_the_header_does(cap, verbose):
    d = explain(cap, world_size=8)
    lines = render_decisions(d, effect=lambda label: "routed", verbose=verbose).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("decision "))
    value_at, effect_at = lines[header].index("value"), lines[header].index("in effect")
    labels = [row[0] for row in decision_rows(d)]
    firsts = [line for line in lines[header + 1:] if line.rstrip().endswith("routed")]
    assert len(firsts) == len(labels) >= 15
    for line in firsts:
        assert line[value_at - 1] == " " and line[value_at] != " ", line  # the label ended before the value
        assert line[effect_at - 1] == " " and line[effect_at:] == "routed", line  # the value ended before it
    assert max(len(line) for line in lines) <= WIDTH
    reasons = [line for line in lines if line.lstrip().startswith("why: ")]
    assert (len(reasons) == len(labels)) is verbose


def test_a_refusal_with_upstreams_choice_does_not_run_into_its_reason():
    """11.0's MXFP8 MoE row: 'refused (stock: flashinfer_trtllm)' once ran into the reason
    column without a space; the reason now goes under the row."""
    lines = render_decisions(explain("11.0"), verbose=True).splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("MoE runner mxfp8"))
    assert lines[i].split()[-3:] == ["refused", "(stock:", "flashinfer_trtllm)"]
    assert lines[i + 1].split()[:3] == ["why:", "tier", "11.0"]
