"""Runtime truth: what SGLang runs equals what the registry decides.

Each machine runs ``runtime_truth.py`` in its own interpreter, which imports SGLang in
the scheduler's own order (``sglang.srt.managers.scheduler`` first, ``load_plugins()``
after) and asks SGLang's own runtime gates.  The interpreters come from the warm start
(``helpers.run_python``: torch, Transformers and the other third-party modules imported
already, SGLang and sglang-arch fresh); one machine also runs in a truly fresh interpreter,
which must print the same.  The expectations here are the registry's
decisions for the same machine (printed by the child from the registry), and, where
noted, facts from the field report and SGLang's own tables.
"""

import importlib
import importlib.util
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import clean_env, run_python  # noqa: E402

MULTICAST_OFF = importlib.import_module("sglang_arch.arch.detect").MULTICAST_OFF

PROBE = Path(__file__).with_name("runtime_truth.py")
MIB = 1024 * 1024

# (capability, GPUs, topology): the machines the issue names.
MACHINES = [("12.0", 8, "pcie-p2p"), ("9.0", 2, "nvlink"), ("10.0", 8, "nvswitch"), ("12.1", 1, "single"),
            ("13.0", 8, "pcie-p2p"), ("8.9", 4, "pcie")]


def _run(machine, warm=True):
    cap, gpus, topology = machine
    env = clean_env(SGLANG_ARCH_CAPABILITY=cap, SGLANG_ARCH_GPU_COUNT=str(gpus), SGLANG_ARCH_TOPOLOGY=topology,
                    SGLANG_ARCH_CUDA="13.0")
    for name in MULTICAST_OFF:  # the simulated topology decides, not this machine's settings
        env.pop(name, None)
    out = run_python([str(PROBE), "--cpu"], env=env, timeout=600, warm=warm)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


FRESH = MACHINES[0]  # also run in a fresh interpreter (no warm start)


@pytest.fixture(scope="module")
def runs():
    with ThreadPoolExecutor(2) as pool:
        fresh = pool.submit(_run, FRESH, False)
        warm = dict(zip(MACHINES, pool.map(_run, MACHINES)))
        return warm, fresh.result()


@pytest.fixture(scope="module")
def truth(runs):
    return runs[0]


def test_the_warm_start_prints_what_a_fresh_interpreter_prints(runs):
    warm, (fresh, fresh_stderr) = runs[0][FRESH], runs[1]
    assert dict(warm[0], import_s=None) == dict(fresh, import_s=None)
    _assert_one_startup_line(fresh_stderr)
    assert fresh["hooks_applied"] == "early"


def _assert_one_startup_line(stderr):
    """One line per process says the decisions (at most 200 characters); the hook list is debug."""
    line = [x for x in stderr.splitlines() if "sglang-arch: " in x and " -> tier " in x]
    assert len(line) == 1 and len(line[0].split("sglang-arch: ", 1)[1]) <= 200 - len("sglang-arch: "), stderr[-2000:]
    assert not [x for x in stderr.splitlines() if "routed:" in x and "sglang-arch:" in x], stderr[-2000:]


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_routed_before_the_scheduler_reads_anything(truth, machine):
    result, stderr = truth[machine]
    # The fusion gate, as the modules that imported it by name hold it, is the routed one.
    assert result["gate_references_one_function"] is True and result["gate_routed_by_plugin"] is True
    _assert_one_startup_line(stderr)
    assert result["hooks_applied"] == "early"


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_fused_allreduce_gate_is_the_registrys_decision(truth, machine):
    fusion = truth[machine][0]["fusion"]
    assert "error" not in fusion, fusion
    assert fusion["gate_at_64"] is fusion["registry"]["enabled"]
    assert (fusion["server_args_backend"] is not None) is fusion["registry"]["enabled"]


def test_sm120_fused_allreduce_is_not_turned_on_unasked(truth):
    """D3: on 8x RTX PRO 6000 fusion is not auto-enabled (no measured gain), so the server
    arguments name no backend and the layers' gate stays shut; asked for, it runs
    (test_plan.py, test_glue_rules.py)."""
    fusion = truth[("12.0", 8, "pcie-p2p")][0]["fusion"]
    assert fusion["registry"] == {"enabled": False, "backend": None}
    assert fusion["server_args_backend"] is None and fusion["gate_at_64"] is False


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
    """The evidence ledger (docs/differences.md D1, D2) and SGLang 0.5.23's own table."""
    from sglang.srt.distributed.device_communicators.all_reduce_utils import (
        TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES,
    )

    sm120 = truth[("12.0", 8, "pcie-p2p")][0]["symm_mem"]["sglang"]
    assert sm120["enabled"] is False  # nothing measured torch's kernels over PCIe
    sm90 = truth[("9.0", 2, "nvlink")][0]["symm_mem"]["sglang"]
    assert (sm90["kernel"], sm90["max_bytes"]) == ("two_shot", 16 * MIB)  # measured without multicast
    sm100 = truth[("10.0", 8, "nvswitch")][0]["symm_mem"]["sglang"]
    assert (sm100["kernel"], sm100["max_bytes"]) == ("multimem", TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES[10][8])
    assert truth[("8.9", 4, "pcie")][0]["symm_mem"]["sglang"]["enabled"] is False  # no P2P


# Model-specific attention overrides SGLang applies after the default, not yet routed
# through the registry (listed in docs/capability-sites.md).
# (model kind, device major) -> what SGLang then runs, and where it is decided.
# A model override's backend, kept by the registry where the kernel catalog runs it
# (glue/attention.py attention_backend_default replaces it only where it cannot run).
MODEL_OVERRIDES_KEPT = {
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
        if (kind, major) in MODEL_OVERRIDES_KEPT:
            backend, _site = MODEL_OVERRIDES_KEPT[(kind, major)]
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
    """docs/fallback.md: 13.0 takes 12.1's decisions, never sm_120's identity, and no path
    stock SGLang leaves off (12.1 has no symm-mem sizes; PCIe-IPC only where measured)."""
    result = truth[("13.0", 8, "pcie-p2p")][0]
    assert result["machine"]["tier"] == "12.1" and result["machine"]["match"] == "generation"
    assert result["identity"] == {"device_capability": [13, 0], "device_sm": 130, "is_sm120": False}
    assert result["symm_mem"]["sglang"]["enabled"] is False
    assert result["pcie_ipc"] == {"registry": False, "sglang": False}


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_pcie_ipc_in_sglangs_import_order_is_the_registrys(truth, machine):
    """SGLang's eligible_group, routed as SGLang imports it, answers the registry's decision:
    on for 8x 12.0 over PCIe with P2P (D1), off (SGLang's opt-in) everywhere else here."""
    got = truth[machine][0]["pcie_ipc"]
    assert got["sglang"] is got["registry"]
    assert got["sglang"] is (machine == ("12.0", 8, "pcie-p2p"))



def _runs(cap, backend, kind, phase="prefill"):
    """The kernel catalog's verdict for the device itself (the test process's registry)."""
    from sglang_arch.arch import resolve
    from sglang_arch.arch.policies.attention import check_backend

    return check_backend(resolve(cap), backend, kind, phase).valid


# SGLang 0.5.23 _deterministic_attention_backend, written from overrides.py: is_sm100 or
# is_sm120 (major 10 or 12) -> triton for the DeepSeek family, flashinfer otherwise; else fa3.
def _upstream_deterministic(cap, deepseek):
    if int(cap.split(".")[0]) in (10, 12):
        return "triton" if deepseek else "flashinfer"
    return "fa3"


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_deterministic_inference_starts_with_a_runnable_registry_backend(truth, machine):
    """--enable-deterministic-inference with no backend (13.0 once refused over fa3)."""
    cap = machine[0]
    for kind in ("mha", "mla"):
        det = truth[machine][0]["deterministic"][kind]
        assert "error" not in det, (kind, det)
        assert det["prefill"] == det["decode"] == det["registry"], (kind, det)
        assert _runs(cap, det["prefill"], kind), (kind, det)
        assert not det["prefill_class"].startswith("refused") or "sgl_kernel" in det["prefill_class"], det
        upstream = _upstream_deterministic(cap, deepseek=kind == "mla")
        # upstream's rule asked of the tier: 13.0 resolves to 12.1 (upstream itself names fa3 there)
        assert det["upstream_rule"] == _upstream_deterministic("12.1" if cap == "13.0" else cap, kind == "mla")
        if cap != "13.0" and _runs(cap, upstream, kind):  # exact tiers: upstream's pick where it runs
            assert det["prefill"] == upstream, (kind, det)
    # 8.9 MLA: upstream's fa3 has no MLA build below Hopper (D16); 13.0: 12.1's rule
    if cap == "8.9":
        assert truth[machine][0]["deterministic"]["mla"]["prefill"] == "triton"
    if cap == "13.0":
        assert truth[machine][0]["deterministic"]["mha"]["prefill"] == "flashinfer"


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_build_guard_builds_a_runnable_backend_whatever_path_chose(truth, machine):
    """A later path puts fa3 on the published config: the model runner builds the registry's
    runnable backend where fa3 has no kernel for the device, and fa3 itself where it has one."""
    cap = machine[0]
    guard = truth[machine][0]["build_guard"]
    assert "error" not in guard, guard
    assert guard["upstream"] == ["fa3", "fa3"]
    assert guard["registry_runs_fa3"] is _runs(cap, "fa3", "mha")
    if guard["registry_runs_fa3"]:
        assert guard["built"] == ["fa3", "fa3"]
    else:
        assert guard["built"] == list(truth[machine][0]["registry_attention"]["mha"])
        assert all(_runs(cap, b, "mha", phase) for b, phase in zip(guard["built"], ("prefill", "decode")))


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_vision_and_draft_backends_sglang_builds_are_the_registrys(truth, machine):
    cap = machine[0]
    result = truth[machine][0]
    assert result["vision"]["picked"] == result["vision"]["registry"]
    # SGLang 0.5.23 vision.py: fa3 on major 9, fa4 on 10, triton_attn otherwise (all run on these tiers)
    assert result["vision"]["picked"] == {"9": "fa3", "10": "fa4"}.get(cap.split(".")[0], "triton_attn")
    draft = result["hybrid_linear_draft"]
    assert draft["built"] == draft["registry"]
    # draft_utils.py: triton on is_blackwell (10, 11, 12), fa3 elsewhere; 13.0 is neither, and fa3
    # has no build for it
    assert draft["built"] == ("triton" if cap.split(".")[0] in ("10", "11", "12", "13") else "fa3")
