"""The runner of SGLang's own unit tests (sglang_unit_tests.py): which files it takes,
what it calls a regression, and a run on the installed release with a synthetic test
tree (no GitHub)."""

import subprocess
import sys
from pathlib import Path

from sglang_unit_tests import FILES, UNIT, regressions, select, table

RUNNER = Path(__file__).with_name("sglang_unit_tests.py")


def _write(root, relative, text):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_it_takes_the_named_files_and_those_that_simulate_a_gpu_for_a_routed_decision(tmp_path):
    named = _write(tmp_path, f"{UNIT}/{FILES[0]}", "import unittest\n")  # taken whatever it holds
    fusion = _write(tmp_path, f"{UNIT}/a/test_x.py",
                    "with override_platform(is_sm90=True):\n    fusion._resolve_backend('auto')\n")
    symm = _write(tmp_path, f"{UNIT}/b/test_y.py", "patch('x.is_sm100_supported')\nTorchSymmMemCommunicator\n")
    _write(tmp_path, f"{UNIT}/c/test_z.py", "with override_platform(has_amx=True):\n    pass\n")  # no concern
    _write(tmp_path, f"{UNIT}/d/test_w.py", "_attention_backend_default(view)\n")  # simulates nothing
    _write(tmp_path, f"{UNIT}/e/helper.py", "override_platform(is_sm90=True); _resolve_backend\n")  # not a test
    assert select(tmp_path) == sorted([named, fusion, symm])


def test_a_regression_is_a_pass_unpatched_that_the_same_release_patched_does_not_pass():
    results = {
        "0.5.22 unpatched": {"f.py::a": "passed", "f.py::b": "passed", "f.py::c": "failed"},
        "0.5.22 patched": {"f.py::a": "passed", "f.py::b": "failed", "f.py::c": "passed"},
        "0.5.23 unpatched": {"f.py::a": "failed", "f.py::b": "passed", "g.py::(collection)": "error"},
        "0.5.23 patched": {"f.py::a": "passed", "g.py::(collection)": "error"},
    }
    releases = ["0.5.22", "0.5.23"]
    assert regressions(results, releases) == ["0.5.22 f.py::b", "0.5.23 f.py::b"]  # missing is no pass
    rows = table(results, releases).splitlines()
    assert rows[0] == "| file | 0.5.22 unpatched | 0.5.22 patched | 0.5.23 unpatched | 0.5.23 patched |"
    assert ("| `f.py` | 2 passed / 1 failed / 0 error / 0 skipped | 2 passed / 1 failed / 0 error / 0 skipped"
            " | 1 passed / 1 failed / 0 error / 0 skipped | 1 passed / 0 failed / 0 error / 0 skipped |") in rows
    assert "| `f.py::b` | passed | failed | passed | - |" in rows


PROBE = '''# taken by the scan: override_platform( and _resolve_backend
import importlib.util
import os

import sglang


def test_sglang_is_the_tree_on_the_path():
    assert sglang.__file__.startswith(os.environ["PYTHONPATH"])
    assert os.environ["SGLANG_PLUGINS"] == "none" and os.environ["SGLANG_ARCH_DISABLE"] == "1"


def test_passes_only_unpatched():
    assert importlib.util.find_spec("sglang.srt.platforms.cuda_arch") is None  # the series' platform table


def test_fails_on_both():
    assert False
'''


def test_a_run_builds_both_trees_and_reports_a_pass_lost_by_the_patch(tmp_path):
    tests = tmp_path / "sglang"
    _write(tests, f"{UNIT}/layers/test_probe.py", PROBE)
    _write(tests, f"{UNIT}/{FILES[1]}", "import no_such_module_here\n")  # a collection error
    from importlib.metadata import version

    release = version("sglang")
    out = subprocess.run([sys.executable, str(RUNNER), "--tests", str(tests), "--releases", release],
                         capture_output=True, text=True, timeout=1200)
    assert out.returncode == 1, out.stdout + out.stderr
    rows = out.stdout.splitlines()
    assert rows[0] == f"| file | {release} unpatched | {release} patched |"
    assert "| `layers/test_probe.py::test_sglang_is_the_tree_on_the_path` | passed | passed |" in rows
    assert "| `layers/test_probe.py::test_passes_only_unpatched` | passed | failed |" in rows
    assert "| `layers/test_probe.py::test_fails_on_both` | failed | failed |" in rows
    assert f"| `{FILES[1]}::(collection)` | error | error |" in rows
    assert f"REGRESSION {release} layers/test_probe.py::test_passes_only_unpatched" in out.stderr.splitlines()
    assert "REGRESSION" not in out.stderr.replace(
        f"REGRESSION {release} layers/test_probe.py::test_passes_only_unpatched", "")
