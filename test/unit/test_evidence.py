"""The evidence ledger pins every difference from stock SGLang: each entry complete, each test
it names real, each table value that differs from stock naming an entry, the docs rendering it."""

import re
from pathlib import Path

import pytest
from sglang_arch import stock
from sglang_arch.arch import TOPOLOGIES, default_registry, explain, resolve
from sglang_arch.arch.evidence import ENTRIES, KINDS, LEDGER, entry, ledger_markdown
from sglang_arch.arch.profile import TableError, build_profile
from sglang_arch.explain_text import evidence_lines

ROOT = Path(__file__).resolve().parents[2]
DIFFERENCES = (ROOT / "docs" / "differences.md").read_text()


@pytest.mark.parametrize("e", ENTRIES, ids=lambda e: e.id)
def test_every_entry_is_complete_and_its_tests_exist(e):
    assert e.kind in KINDS
    for field in ("supports", "hardware", "software", "numbers", "source"):
        assert getattr(e, field).strip(), (e.id, field)
    assert e.tests
    for node in e.tests:
        path, _, name = node.partition("::")
        text = (ROOT / path).read_text()
        if name:
            assert re.search(rf"^def {re.escape(name)}\(", text, re.M), f"{e.id}: {node} does not exist"


def test_ids_are_unique_and_unknown_ids_are_refused():
    assert len(LEDGER) == len(ENTRIES)
    with pytest.raises(ValueError, match="unknown evidence 'nope'; accepted: pcie-ipc-tp8-sm120"):
        entry("nope")


def test_a_table_entry_names_only_ledger_entries_and_known_fields():
    ok = {"name": "x", "symm_mem_two_shot": {2: 16}, "evidence": {"symm_mem_two_shot": ["two-shot-ws2-sm90-no-multicast"]}}
    assert build_profile(resolve("9.0").requested, ok, "t").evidence_for("symm_mem_two_shot")
    with pytest.raises(TableError, match="unknown evidence 'measured-by-me'"):
        build_profile(resolve("9.0").requested, {"name": "x", "evidence": {"pcie_ipc_world_sizes": ["measured-by-me"]}}, "t")
    with pytest.raises(TableError, match="field 'evidence': unknown field 'speed'"):
        build_profile(resolve("9.0").requested, {"name": "x", "evidence": {"speed": ["kernel-catalog"]}}, "t")


# Where stock SGLang 0.5.23 has a value of its own, the table's equal value needs no evidence.
STOCK_FUSION_MAJORS = (9, 10)


@pytest.mark.parametrize("cap", [str(c) for c in default_registry().known])
def test_no_table_value_differs_from_stock_without_evidence(cap):
    p = resolve(cap).profile
    if p.symm_mem_two_shot:  # stock: off without multicast
        assert p.evidence_for("symm_mem_two_shot"), cap
    if p.pcie_ipc_world_sizes:  # stock: opt-in everywhere
        assert p.evidence_for("pcie_ipc_world_sizes"), cap
    if p.allreduce_fusion and p.capability.major not in STOCK_FUSION_MAJORS:  # stock: ValueError
        assert p.evidence_for("allreduce_fusion"), cap
    if p.torch_symm_mem:  # with multicast: SGLang's own sizes, by major
        assert {ws: b for ws, b in p.torch_symm_mem.items()} == stock.SYMM_MEM_MAX_BYTES.get(p.capability.major), cap


def test_explain_prints_the_evidence_beside_each_difference():
    d = explain("9.0", 2, "nvlink")
    assert d.symm_mem.evidence == ("two-shot-ws2-sm90-no-multicast",)
    text = " ".join(line.strip() for line in evidence_lines(d.symm_mem.evidence))
    assert text.startswith("evidence: [two-shot-ws2-sm90-no-multicast] graph replay medians, two-shot vs NCCL:")
    assert "benchmark/results/h200x2-collectives.json" in text
    assert d.to_dict()["collectives"]["torch_symm_mem"]["evidence"] == ["two-shot-ws2-sm90-no-multicast"]
    assert explain("9.0", 8, "nvswitch").evidence() == ()  # as stock: no evidence needed, none shown


def test_docs_render_the_ledger_and_every_difference_names_an_entry():
    block = DIFFERENCES.split("<!-- ledger:begin")[1].split("\n", 1)[1].split("<!-- ledger:end")[0]
    assert block == ledger_markdown(), "docs/differences.md's ledger drifted; regenerate it from ledger_markdown()"
    sections = re.split(r"(?m)^## (D\d+) ", DIFFERENCES)[1:]
    named = {}
    for d, body in zip(sections[::2], sections[1::2]):
        line = next((ln for ln in body.splitlines() if ln.startswith("- Evidence:")), None)
        assert line, f"{d} names no evidence"
        named[d] = set(re.findall(r"`([a-z0-9-]+)`", line)) & set(LEDGER)
        assert named[d], f"{d}: {line}"
    assert set().union(*named.values()) == set(LEDGER)  # every entry carries a difference


TEXTS = [*(ROOT / "python").rglob("*.py"), *(ROOT / "docs").rglob("*.md"), ROOT / "README.md",
         *(ROOT / "benchmark").glob("*.py"), *(ROOT / "benchmark").glob("*.md")]


def test_no_text_calls_a_measurement_the_seed():
    """A measurement is named by what it was (hardware, release, who published it)."""
    for path in TEXTS:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"\b[Ss]eed\b", line) and not re.search(r"manual_seed|random|hypothesis|seed=", line):
                pytest.fail(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")


def test_reference_box_cites_what_each_figure_is_evidence_for():
    e = LEDGER["fusion-sm12x-opt-in"]
    assert "92.6 -> 92.7 tok/s" in e.numbers and "noise" in e.limits
    d = explain("12.0", 8, "pcie-p2p")
    assert "92.6 -> 92.7 tok/s" in d.fusion.reason and "89.5" not in d.fusion.reason
    assert not d.symm_mem.enabled and "54.1" not in DIFFERENCES.split("## The evidence ledger")[1]
    assert TOPOLOGIES["pcie-p2p"].multicast is False
