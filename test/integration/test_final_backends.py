"""The final-backend matrix: what SGLang builds is runnable and the registry's.

The matrix (``final_backends.py``) resolves every model fixture x capability x mode in
SGLang's own code, in the scheduler's import order, with the plugin and without it.
Each cell is asserted on its own; ``docs/final-backends.md`` is regenerated and must be
what is committed.
"""

import importlib.util
import json
import re
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

import final_backends as fb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# Cells that fail today, each under the fix that is missing: strict, so a cell that passes
# once its fix lands fails here until it is taken off the list.  The list is exact, cell by cell.
PENDING = {}  # {reason: [cells]}: none pending
PENDING_REASON = {cell: reason for reason, cells in PENDING.items() for cell in cells}


def _cell(model, cap, mode):
    reason = PENDING_REASON.get(f"{model} {cap} {mode}")
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param((model, cap, mode), marks=marks, id=f"{model}-{cap}-{mode}")


CELLS = [_cell(model, cap, mode) for model, cap, mode in fb.cell_keys()]


@pytest.fixture(scope="module")
def results():
    return fb.run_matrix()


@pytest.fixture(scope="module")
def judged(results):
    return fb.judge(results["caps"])


def test_the_document_is_what_the_matrix_gives(results):
    assert fb.DOC.read_text() == fb.render(results), f"docs/final-backends.md is stale: run `{fb.COMMAND}`"


@pytest.mark.parametrize("cell", CELLS)
def test_built_kernels_run_and_are_the_registrys(judged, cell):
    columns = judged[cell]
    assert columns, cell
    bad = {c.name: {"built": c.plugin, "expected": c.expected, "runs": c.plugin_runs, "why": c.why}
           for c in columns if not c.ok}
    assert not bad, json.dumps(bad, indent=1)


@pytest.mark.parametrize("cap", fb.capabilities())
def test_the_v41_indexer_takes_deep_gemm_only_where_it_has_a_build(results, cap):
    """``sglang-arch explain 10.7`` says DeepGEMM has no build there; SGLang's V4.1 indexer
    must not take it there either (decode, and the answer prefill and the index store read)."""
    verdict = fb.judge_indexer(results["caps"], cap)
    assert verdict["ok"], verdict


@pytest.mark.parametrize("cap", fb.capabilities())
def test_allreduce_is_the_registrys(results, cap):
    verdict = fb.judge_allreduce(results["caps"], cap)
    assert verdict["ok"], verdict


def _readme_numbers(words, what):
    """The numbers docs/development.md states where ``words`` (a regex, any white space
    between words) matches; ``what`` names them when it does not."""
    match = re.search(words.replace(" ", r"\s+"), (ROOT / "docs" / "development.md").read_text(), re.S)
    assert match, f"docs/development.md: {what} are missing"
    return [int(x.replace(",", "")) for x in match.groups()]


def test_readme_states_the_counts(results, judged):
    total = fb.counts(results["caps"], judged)
    stated = _readme_numbers(r"final-backend matrix.*?\*\*([0-9,]+) cells\*\*.*?([0-9,]+) equal to upstream.*?"
                             r"([0-9,]+) where upstream would build a kernel.*?([0-9,]+) the registry changes on "
                             r"exact tiers", "the final-backend matrix's counts")
    assert stated == [total["cells"], total["equal_to_upstream"], total["upstream_unrunnable"],
                      total["changed_on_exact_tiers"]]


def test_forked_child_equals_a_fresh_scheduler(results):
    """The matrix forks one child per capability from one import; a fresh interpreter that
    imports the scheduler with that machine from the start answers the same."""
    cap = "12.0"  # the reference machine; the forking interpreter imported SGLang as 7.0
    fresh = fb.run_fresh(cap, upstream=False)
    forked = results["caps"][cap]["plugin"]
    for key in ("cells", "allreduce", "registry", "gpus", "topology", "indexer"):
        assert fresh[key] == forked[key], key


def test_pending_cells_are_cells_of_the_matrix():
    known = {f"{model} {cap} {mode}" for model, cap, mode in fb.cell_keys()}
    assert set(PENDING_REASON) <= known, sorted(set(PENDING_REASON) - known)


def test_fixtures_are_small_model_configs():
    for model in fb.MODELS:
        path = fb.FIXTURES / model.name / "config.json"
        assert path.stat().st_size < 4096, path
        config = json.loads(path.read_text())
        assert isinstance(config["architectures"], list) and config["model_type"], path


def test_every_fixture_is_a_model_sglang_resolves(results):
    """A fixture SGLang cannot load would turn every cell into a shared refusal."""
    for model in fb.MODELS:
        resolved = [cap for cap, both in results["caps"].items()
                    if "error" not in both["upstream"]["cells"][f"{model.name}|default"]]
        assert len(resolved) == len(results["caps"]), (model.name, sorted(set(results["caps"]) - set(resolved)))


QUANTIZED = ("qwen3-moe-fp8-block", "deepseek-v3-fp8", "gpt-oss-mxfp4", "qwen3-moe-nvfp4", "qwen3-moe-mxfp8")


def test_quantized_moe_fixtures_have_runner_and_gemm_columns(judged):
    """Each quantized MoE fixture is a row on every capability, with the MoE runner
    column and the GEMM columns its weights use, judged by the catalog."""
    assert {m.name for m in fb.MODELS if fb.quant_of(m).kind not in (None, "unquantized")} == set(QUANTIZED)
    for name in QUANTIZED:
        kind = fb.quant_of(next(m for m in fb.MODELS if m.name == name)).kind
        for cap in fb.capabilities():
            columns = {c.name: c for c in judged[(name, cap, "default")]}
            assert {"moe", "fp8_gemm", "deep_gemm", "fp4_gemm"} & set(columns) == \
                {"moe"} | ({"fp8_gemm", "deep_gemm"} if kind == "fp8_block" else set()) \
                | ({"fp4_gemm"} if kind == "nvfp4" else set()), (name, cap)
            moe = columns["moe"]
            # built and runnable, or refused with why, or FP8 below SM89 (SGLang's own: D12-D15)
            assert moe.plugin_runs is True or fb._is_error(moe.plugin) \
                or (kind == "fp8_block" and moe.plugin_runs is None), (name, cap, moe)


def test_readme_states_the_moe_gemm_counts(results, judged):
    total = fb.counts(results["caps"], judged)
    stated = _readme_numbers(r"\*\*([0-9,]+) cells with a MoE runner or GEMM column\*\*.*?([0-9,]+) of them equal "
                             r"to upstream.*?([0-9,]+) where upstream would build a MoE runner or GEMM",
                             "the MoE runner / GEMM counts")
    assert stated == \
        [total["moe_gemm_cells"], total["moe_gemm_equal"], total["moe_gemm_upstream_unrunnable"]]
