"""Helpers shared by the integration tests."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures" / "models"
SUITE = Path(__file__).with_name("decision_suite.py")


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    env.pop("SGLANG_PLUGINS", None)
    env.update(extra)
    return env


def run_suite(mode, runtime="sglang_arch.arch.runtime", env=None, cwd=None):
    out = subprocess.run([sys.executable, str(SUITE), "--mode", mode, "--runtime", runtime], capture_output=True,
                         text=True, env=env or clean_env(), cwd=cwd)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
