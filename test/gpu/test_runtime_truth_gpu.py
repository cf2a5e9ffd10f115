"""Runtime truth on a real GPU: SGLang's gates in the scheduler's import order, real device.

The same probe as test/integration/test_runtime_truth.py, without the CPU fakes: torch,
NVML and SGLang's probes see the real GPU.  Run twice: as the GPU is, and with a
simulated 12.0 on top (the registry's override; torch still sees the real device).
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_env import missing_requirement

torch = pytest.importorskip("torch")
if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs sglang (scripts/gpu-wheels --server carries it)", allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here", allow_module_level=True)

PROBE = Path(__file__).resolve().parents[1] / "integration" / "runtime_truth.py"


def _probe(**env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    full.update(env)
    out = subprocess.run([sys.executable, str(PROBE), "--stub-missing", "sgl_kernel"], capture_output=True,
                         text=True, env=full, timeout=900)
    missing = missing_requirement(out.stderr) if out.returncode else None
    if missing:  # SGLang's scheduler imports its server-side requirements (section B)
        pytest.skip(f"needs {missing}, which SGLang's scheduler imports: the wheels of a plain scripts/gpu-wheels "
                    f"lack it; scripts/gpu-wheels --server carries it")
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    gpu_out = os.environ.get("SGLANG_ARCH_GPU_OUT")
    if gpu_out:
        name = "truth-" + (env.get("SGLANG_ARCH_CAPABILITY") or "real") + ".json"
        Path(gpu_out, name).write_text(json.dumps(result, indent=1))
    return result


def _check(result):
    assert result["gate_references_one_function"] is True and result["gate_routed_by_plugin"] is True
    fusion = result["fusion"]
    assert "error" not in fusion, fusion
    # The gate also needs FlashInfer installed; where it is not, it is off either way.
    flashinfer = fusion.get("flashinfer_available", True)
    assert fusion["gate_at_64"] is (fusion["registry"]["enabled"] and flashinfer)
    for kind in ("mha", "mla"):
        att = result["attention"][kind]
        assert "error" not in att, (kind, att)


def test_real_gpu():
    result = _probe()
    cap = "{}.{}".format(*torch.cuda.get_device_capability(0))
    assert result["machine"]["capability"] == cap and result["machine"]["match"] == "exact"
    assert result["identity"]["device_capability"] == list(torch.cuda.get_device_capability(0))
    _check(result)
    assert tuple(result["attention"]["mha"][p] for p in ("prefill", "decode")) == tuple(
        result["registry_attention"]["mha"])


def test_simulated_sm120_on_top():
    result = _probe(SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="8", SGLANG_ARCH_TOPOLOGY="pcie-p2p")
    assert result["machine"]["tier"] == "12.0"
    assert result["identity"]["device_capability"] == [12, 0]
    _check(result)
