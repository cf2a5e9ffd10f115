"""The sources written down as data in test/unit/test_sources.py (and SGLang's probe rules in
test/unit/sglang_probes.py) are still SGLang's.

The unit tests compare the registry with literals (so that they never compare the
registry with itself); this test compares those literals with the installed SGLang
0.5.23, read in a process of its own with the plugin disabled (upstream_oracle.py).
"""

import importlib.util

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from unit import test_sources as src  # noqa: E402
from unit.sglang_probes import UPSTREAM_PROBES  # noqa: E402

MIB = 1 << 20


@pytest.fixture(scope="module")
def tables(upstream_answers):
    """From the oracle run the equivalence properties use (one SGLang process per run)."""
    return upstream_answers["tables"]


def test_fact_rules_are_sglangs(tables):
    assert {k: (tuple(m), tuple(c)) for k, (m, c) in tables["fact_rules"].items()} == UPSTREAM_PROBES


def test_symm_mem_sizes_and_multimem_world_sizes_are_sglangs(tables):
    assert {int(k): {int(w): b for w, b in v.items()} for k, v in tables["symm_mem_max_sizes"].items()} == {
        major: {w: mib * MIB for w, mib in sizes.items()} for major, sizes in src.UPSTREAM_SYMM_MEM_MIB.items()}
    assert {int(k): tuple(v) for k, v in tables["multimem_world_sizes"].items()} == src.UPSTREAM_MULTIMEM_WORLD_SIZES


def test_custom_allreduce_tables_are_sglangs(tables):
    assert {k: tuple(v) for k, v in tables["custom_ar_world_sizes"].items()} == {
        k: v for k, v in src.UPSTREAM_CAR_TABLES.items() if k is not None}
    assert tables["custom_ar_max_bytes"] == src.UPSTREAM_CAR_MAX_BYTES
