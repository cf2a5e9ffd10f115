"""``tune collectives``' printed table: a gloo run (CPUs, the harness only) names its backend
once, labels the all-reduce column after it and says no registry pick is judged; an nccl
run keeps its ``nccl`` column and its picks."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tune(*argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    env["PYTHONPATH"] = str(ROOT / "python")
    return subprocess.run([sys.executable, "-m", "sglang_arch", "tune", "collectives", *argv], capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.mark.skipif(sys.platform != "linux", reason="the gloo harness spawns ranks on Linux")
def test_a_gloo_run_names_its_backend_once_and_judges_no_pick(tmp_path):
    pytest.importorskip("torch")
    results = tmp_path / "gloo.json"
    out = tune("--backend", "gloo", "--world-sizes", "2", "--sizes", "4096", "--iters", "2", "--trials", "1",
               "--modes", "eager", "--results", str(results))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].count("gloo") == 1 and lines[0].startswith("cpu (gloo: correctness of the harness only), ")
    assert "registry pick: none on gloo (CPUs)" in out.stdout
    head = next(line for line in lines if line.lstrip().startswith("ws "))
    assert "gloo" in head.split() and "nccl" not in head.split() and "registry pick" not in head
    row = next(line for line in lines if line.lstrip().startswith("2 "))
    assert row.split()[:3] == ["2", "4", "KiB"] and row == row.rstrip()
    # the saved run reads the same
    again = tune("--from-results", str(results))
    assert again.returncode == 0 and again.stdout == out.stdout
    assert json.loads(results.read_text())["run"]["backend"] == "gloo"


def test_an_nccl_run_keeps_its_column_and_picks(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_tune_hostile import valid_results

    path = tmp_path / "r.json"
    path.write_text(json.dumps(valid_results()))
    out = tune("--from-results", str(path))
    assert out.returncode == 0, out.stderr
    head = next(line for line in out.stdout.splitlines() if line.lstrip().startswith("ws "))
    assert "nccl" in head.split() and head.endswith("registry pick")
    assert out.stdout.splitlines()[0].startswith("NVIDIA H200 (nccl), ")
    assert "SGLang's fastest" in out.stdout
