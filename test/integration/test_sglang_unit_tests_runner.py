"""The runner of SGLang's own unit tests (sglang_unit_tests.py): which files it takes and
what it calls a regression.  No SGLang, no network: a synthetic test tree."""

from sglang_unit_tests import DIFFERENCES, FILES, UNIT, regressions, select, table


def _write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_it_takes_the_files_that_simulate_a_gpu_and_name_a_routed_decision(tmp_path):
    named = _write(tmp_path, FILES[0], "import unittest\n")  # named: taken whatever it holds
    fusion = _write(tmp_path, f"{UNIT}/a/test_x.py",
                    "with override_platform(is_sm90=True):\n    fusion._resolve_backend('auto')\n")
    symm = _write(tmp_path, f"{UNIT}/b/test_y.py",
                  "patch('x.is_sm100_supported')\nTorchSymmMemCommunicator\n")
    _write(tmp_path, f"{UNIT}/c/test_z.py", "with override_platform(has_amx=True):\n    pass\n")  # no concern
    _write(tmp_path, f"{UNIT}/d/test_w.py", "_attention_backend_default(view)\n")  # simulates nothing
    _write(tmp_path, f"{UNIT}/e/helper.py", "override_platform(is_sm90=True); _resolve_backend\n")  # not a test
    assert select(tmp_path) == sorted([named, fusion, symm])


def test_a_regression_is_a_pass_unpatched_that_a_routed_tree_does_not_pass():
    results = {
        "unpatched": {"a": "passed", "b": "passed", "c": "failed", "d": "skipped", "e": "passed"},
        "plugin": {"a": "passed", "b": "passed", "c": "passed", "d": "failed", "e": "failed"},
        "patched": {"a": "passed", "b": "failed", "c": "failed", "d": "skipped"},
    }
    assert DIFFERENCES == {}  # none listed: every such test must pass routed
    assert regressions(results) == ["b", "e"]  # e: missing on the patched tree is not a pass
    rows = table(results).splitlines()
    assert rows[0] == "| test | unpatched | plugin | patched |"
    assert "| `e` | passed | failed | - |" in rows
