"""The registry's hardware claims for this GPU, checked by the probes in sgl-kernel/probes."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from gpu_env import ROOT


@pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"), reason="needs nvcc")
def test_no_claim_of_the_detected_tier_is_refuted(tmp_path, report):
    out_file = tmp_path / "probes.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, str(ROOT / "sgl-kernel" / "probes" / "run_probes.py"), "--out", str(out_file),
                           "--build-dir", str(tmp_path / "build")], capture_output=True, text=True, timeout=900, env=env)
    data = json.loads(out_file.read_text())
    keep = os.environ.get("SGLANG_ARCH_GPU_OUT")
    if keep:
        shutil.copy(out_file, os.path.join(keep, "probes.json"))
    statuses = {name: claim["status"] for name, claim in data["claims"].items()}
    report("probes", json.dumps(statuses))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "refuted" not in statuses.values()
    if data.get("capability") == "9.0":
        unverified = {k: data["claims"][k]["detail"] for k, v in statuses.items() if v != "verified"}
        assert not unverified, unverified
