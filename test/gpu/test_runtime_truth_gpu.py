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
    _runnable_by_the_catalog(result, cap)


def _runnable_by_the_catalog(result, cap):
    """The kernel catalog's promise on the real device: every attention backend SGLang resolved
    here has a build for this GPU (arch/kernels.py), with the GPU's own CUDA."""
    from sglang_arch.arch import catalog, parse_capability

    device = parse_capability(cap)
    cuda = tuple(int(x) for x in torch.version.cuda.split(".")[:2])
    for kind in ("mha", "mla"):
        for phase in ("prefill", "decode"):
            name = result["attention"][kind][phase]
            verdict = catalog.choice_runs("attention", name, device, cuda, kind, phase)
            assert verdict is not None and verdict.runs, (kind, phase, name, verdict)


def test_the_catalogs_jit_claim_holds_on_this_gpu():
    """Triton is catalogued as compiled for the device from SM70 (jit:7.0+): compile and run one
    kernel for this GPU, and check the catalog says it runs here."""
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from sglang_arch.arch import catalog, parse_capability

    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)

    x = torch.zeros(1000, device="cuda")
    add_one[(4,)](x, 1000, BLOCK=256)
    torch.cuda.synchronize()
    assert float(x.sum()) == 1000.0
    cap = parse_capability("{}.{}".format(*torch.cuda.get_device_capability(0)))
    assert catalog.choice_runs("attention", "triton", cap).runs


def test_simulated_sm120_on_top():
    result = _probe(SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="8", SGLANG_ARCH_TOPOLOGY="pcie-p2p")
    assert result["machine"]["tier"] == "12.0"
    assert result["identity"]["device_capability"] == [12, 0]
    _check(result)
