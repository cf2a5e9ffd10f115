"""Runtime truth (issue 9's acceptance): what SGLang runs equals what the registry decides.

Each machine runs ``runtime_truth.py`` in its own interpreter, which imports SGLang in
the scheduler's own order (``sglang.srt.managers.scheduler`` first, ``load_plugins()``
after) and asks SGLang's own runtime gates.  The expectations here are the registry's
decisions for the same machine (printed by the child from the registry), and, where
noted, facts from the field report and SGLang's own tables.
"""

import importlib
import importlib.util
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import clean_env  # noqa: E402

MULTICAST_OFF = importlib.import_module("sglang_arch.arch.detect").MULTICAST_OFF

PROBE = Path(__file__).with_name("runtime_truth.py")
MIB = 1024 * 1024

# (capability, GPUs, topology): the machines the issue names.
MACHINES = [("12.0", 8, "pcie-p2p"), ("9.0", 2, "nvlink"), ("10.0", 8, "nvswitch"), ("12.1", 1, "single"),
            ("13.0", 8, "pcie-p2p"), ("8.9", 4, "pcie")]


def _run(machine):
    cap, gpus, topology = machine
    env = clean_env(SGLANG_ARCH_CAPABILITY=cap, SGLANG_ARCH_GPU_COUNT=str(gpus), SGLANG_ARCH_TOPOLOGY=topology,
                    SGLANG_ARCH_CUDA="13.0")
    for name in MULTICAST_OFF:  # the simulated topology decides, not this machine's settings
        env.pop(name, None)
    out = subprocess.run([sys.executable, str(PROBE), "--cpu"], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


@pytest.fixture(scope="module")
def truth():
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(MACHINES, pool.map(_run, MACHINES)))


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_routed_before_the_scheduler_reads_anything(truth, machine):
    result, stderr = truth[machine]
    # The fusion gate, as the modules that imported it by name hold it, is the routed one.
    assert result["gate_references_one_function"] is True and result["gate_routed_by_plugin"] is True
    line = [x for x in stderr.splitlines() if "sglang-arch:" in x and "routed:" in x]
    assert len(line) == 1 and line[0].endswith("(hooks applied early)"), stderr[-2000:]


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_fused_allreduce_gate_is_the_registrys_decision(truth, machine):
    fusion = truth[machine][0]["fusion"]
    assert "error" not in fusion, fusion
    assert fusion["gate_at_64"] is fusion["registry"]["enabled"]
    assert (fusion["server_args_backend"] is not None) is fusion["registry"]["enabled"]


def test_sm120_fused_allreduce_runs_where_sglangs_own_gate_refused(truth):
    """Issue 9: on 8x RTX PRO 6000 the fused kernel never ran though every report said trtllm."""
    fusion = truth[("12.0", 8, "pcie-p2p")][0]["fusion"]
    assert fusion["registry"] == {"enabled": True, "backend": "trtllm"}  # D3
    assert fusion["gate_at_64"] is True and fusion["upstream_gate_at_64"] is False


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_symm_mem_kernel_and_size_are_the_registrys(truth, machine):
    symm = truth[machine][0]["symm_mem"]
    registry, sglang = symm["registry"], symm["sglang"]
    assert sglang["enabled"] is registry["enabled"]
    if registry["enabled"]:
        assert sglang["kernel"] == registry["algorithm"]
        assert sglang["max_bytes"] == registry["max_bytes"]
        assert sglang["took_the_path"] is True


def test_symm_mem_values_from_their_sources(truth):
    """Field report (8x RTX PRO 6000, docs/differences.md D1) and SGLang 0.5.23's own table."""
    from sglang.srt.distributed.device_communicators.all_reduce_utils import (
        TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES,
    )

    sm120 = truth[("12.0", 8, "pcie-p2p")][0]["symm_mem"]["sglang"]
    assert (sm120["kernel"], sm120["max_bytes"]) == ("two_shot", 128 * MIB)  # no NVLink, no multicast
    sm90 = truth[("9.0", 2, "nvlink")][0]["symm_mem"]["sglang"]
    assert (sm90["kernel"], sm90["max_bytes"]) == ("two_shot", TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES[9][2])
    sm100 = truth[("10.0", 8, "nvswitch")][0]["symm_mem"]["sglang"]
    assert (sm100["kernel"], sm100["max_bytes"]) == ("multimem", TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES[10][8])
    assert truth[("8.9", 4, "pcie")][0]["symm_mem"]["sglang"]["enabled"] is False  # no P2P


# Model-specific attention overrides SGLang applies after the default, not yet routed
# through the registry (listed in docs/capability-sites.md; issue 9 remains open for them).
# (model kind, device major) -> what SGLang then runs, and where it is decided.
UNROUTED_MODEL_OVERRIDES = {
    ("mla", 10): ("trtllm_mla", "sglang 0.5.23 arg_groups/model_overrides/deepseek_v2.py: "
                                "DeepseekV3ForCausalLM on is_sm100 -> trtllm_mla"),
}


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_attention_backends_the_model_runner_builds(truth, machine):
    result = truth[machine][0]
    major = int(machine[0].split(".")[0])
    for kind in ("mha", "mla"):
        att = result["attention"][kind]
        assert "error" not in att, (kind, att)
        expected = tuple(result["registry_attention"][kind])
        if (kind, major) in UNROUTED_MODEL_OVERRIDES:
            backend, _site = UNROUTED_MODEL_OVERRIDES[(kind, major)]
            expected = (backend, backend)
        assert (att["prefill"], att["decode"]) == expected, kind
        for phase in ("prefill", "decode"):
            built = att[f"{phase}_class"]
            # On this machine a backend whose module loads sgl_kernel cannot be imported (no
            # libcuda); every other creator must build its class without refusing.
            assert not built.startswith("refused") or "sgl_kernel" in built, (kind, phase, built)
    dsa = result["attention"]["dsa"]
    assert (dsa["prefill"], dsa["decode"], dsa["prefill_class"]) == ("dsa", "dsa", "DeepseekSparseAttnBackend")


# What SGLang 0.5.23's DSA passes resolve for DeepSeek V3.2 (overrides.py: FP8 KV cache and
# trtllm on major >= 10, else bfloat16 with flashmla_sparse / fa3) where those kernels have a
# build for the device; tilelang where they have none: D10 off the table, D11 on 12.x (trtllm-gen
# ships sm_100f/sm_103a/sm_107a) and 8.9 (FlashMLA and FA3's MLA are sm_90a and newer).
DSA_EXPECTED = {"12.0": ("fp8_e4m3", "tilelang", "tilelang"), "9.0": ("bfloat16", "flashmla_sparse", "fa3"),
                "10.0": ("fp8_e4m3", "trtllm", "trtllm"), "12.1": ("fp8_e4m3", "tilelang", "tilelang"),
                "13.0": ("fp8_e4m3", "tilelang", "tilelang"), "8.9": ("bfloat16", "tilelang", "tilelang")}


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_dsa_defaults_are_the_registrys(truth, machine):
    """The --dsa-* backends and the KV cache the sparse backend reads are the registry's."""
    dsa = truth[machine][0]["attention"]["dsa"]
    assert dsa["dsa_args"] == dsa["registry_dsa"]
    got = dsa["dsa_args"]
    assert (got["kv_cache_dtype"], got["prefill"], got["decode"]) == DSA_EXPECTED[machine[0]]


def test_unknown_gpu_keeps_its_own_identity(truth):
    """docs/fallback.md: 13.0 takes 12.1's sizes, never sm_120's identity."""
    result = truth[("13.0", 8, "pcie-p2p")][0]
    assert result["machine"]["tier"] == "12.1" and result["machine"]["match"] == "generation"
    assert result["identity"] == {"device_capability": [13, 0], "device_sm": 130, "is_sm120": False}
    assert result["symm_mem"]["sglang"]["max_bytes"] == 128 * MIB  # 12.1's tuned size, a decision

