"""``sglang-arch plan`` against the real SGLang: the SM120 difference, and errors.

One plan runs as a user runs it (``python -m sglang_arch plan``: a fresh interpreter per
worker).  The others run the command in this process with its two workers from the warm
start (``helpers.run_python``: the third-party modules SGLang imports are imported already,
SGLang and sglang-arch start fresh in each worker); the first plan, run that way too, must
print the same."""

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import types

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import FIXTURES, clean_env, run_python  # noqa: E402


def fresh_plan(*args):
    """The command as a user runs it: its own interpreter, each worker a fresh one."""
    return subprocess.run([sys.executable, "-m", "sglang_arch", "plan", *args], capture_output=True, text=True,
                          env=clean_env(), timeout=600)


def _warm_worker(cmd, capture_output, text, env, timeout, **kwargs):
    assert cmd[0] == sys.executable and capture_output and text, cmd
    return run_python(cmd[1:], env=env, timeout=timeout)


def plan(*args):
    """``sglang-arch plan`` (cli.main) in this process, under the environment ``fresh_plan``
    gives its interpreter; its workers (``plan.run_plan``) from the warm start."""
    from sglang_arch.cli import main
    from sglang_arch.integrations.sglang import plan as plan_module

    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    warm = types.SimpleNamespace(run=_warm_worker, TimeoutExpired=subprocess.TimeoutExpired)
    try:
        os.environ.clear()
        os.environ.update(clean_env())
        with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            mp.setattr(plan_module, "subprocess", warm)
            try:
                code = main(["plan", *args])
            except SystemExit as exc:  # argparse
                code = exc.code
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["sglang-arch", "plan", *args], code, out.getvalue(), err.getvalue())


SM120_PCIE = ("--capability", "12.0", "--tp", "8", "--topology", "pcie-p2p",
              "--model-path", str(FIXTURES / "qwen3-moe-tiny"), "--json")


@pytest.fixture(scope="module")
def sm120_pcie():
    out = fresh_plan(*SM120_PCIE)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_the_command_in_this_process_with_warm_workers_prints_what_a_user_sees(sm120_pcie):
    out = plan(*SM120_PCIE)
    assert out.returncode == 0, out.stderr[-2000:]
    seen, fresh = json.loads(out.stdout), dict(sm120_pcie)
    # the time each run took differs; the plan itself does not
    assert set(seen.pop("timing")) == set(fresh.pop("timing")) == {"routed_s", "upstream_s", "wall_s"}
    assert seen == fresh


def test_sm120_pcie_decode_on_pcie_ipc_and_no_torch_symm_mem(sm120_pcie):
    """D1: SGLang's PCIe-IPC all-reduce on by default at TP 8 (measured); torch symm mem stays
    off over PCIe as in SGLang (nothing measured its kernels there)."""
    routed, upstream = sm120_pcie["routed"], sm120_pcie["upstream"]
    assert routed["pcie_ipc"] == {"enabled": True} and upstream["pcie_ipc"] == {"enabled": False}
    assert routed["torch_symm_mem"]["enabled"] is False and routed["torch_symm_mem"]["table"] == {"12": {}}
    assert upstream["torch_symm_mem"]["enabled"] is False


def test_sm120_pcie_fusion_and_attention(sm120_pcie):
    """D3: fusion is not turned on unasked on 12.0 over PCIe (no measured gain); asked, it runs."""
    routed, upstream = sm120_pcie["routed"], sm120_pcie["upstream"]
    assert routed["allreduce_fusion"]["requested"] is None and routed["allreduce_fusion"]["backend"] is None
    assert upstream["allreduce_fusion"]["requested"] is None
    assert routed["attention"] == upstream["attention"] == {"prefill": "flashinfer", "decode": "flashinfer"}
    assert routed["tier"] == {"resolved": "12.0", "match": "exact"}
    assert routed["error"] is None and upstream["error"] is None


def test_sm120_pcie_fusion_asked_for_resolves_to_trtllm():
    out = plan(*SM120_PCIE, "--", "--enable-flashinfer-allreduce-fusion")
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    assert d["routed"]["allreduce_fusion"] == {"requested": "auto", "backend": "trtllm"}
    assert d["routed"]["error"] is None


def test_hopper_plan_equals_upstream():
    out = plan("--capability", "9.0", "--tp", "8", "--model-path", str(FIXTURES / "llama-tiny"), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    for key in ("attention", "allreduce_fusion", "custom_allreduce"):
        assert d["routed"][key] == d["upstream"][key], key
    assert d["routed"]["attention"]["prefill"] == "fa3"
    assert d["routed"]["custom_allreduce"]["v2_table"] == "sm90"


def test_invalid_explicit_backend_is_a_clear_error_before_weights():
    out = plan("--capability", "12.0", "--tp", "2", "--model-path", str(FIXTURES / "llama-tiny"), "--json",
               "--", "--attention-backend", "fa3")
    d = json.loads(out.stdout)
    assert "--attention-backend fa3: fa3 cannot run MHA prefill on 12.0" in d["routed"]["error"]
    assert "Valid here: fa4, trtllm_mha, flashinfer, triton, torch_native" in d["routed"]["error"]


@pytest.mark.parametrize("args,message", [
    (["--capability", "12.0"], "the following arguments are required: --model-path"),
    (["--capability", "12.0", "--model-path", "/nonexistent"], "has no config.json"),
    (["--capability", "twelve", "--model-path", "/tmp"], "invalid compute capability 'twelve'"),
])
def test_plan_bad_input(args, message):
    out = plan(*args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def one_line_2(out):
    assert out.returncode == 2, (out.stdout[-2000:], out.stderr[-2000:])
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr, out.stderr
    assert out.stdout == ""
    return out.stderr


def test_invalid_config_json_is_refused_before_sglang_starts(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    err = one_line_2(plan("--capability", "9.0", "--model-path", str(tmp_path)))
    assert f"--model-path '{tmp_path}': config.json is not valid JSON" in err
    assert "a regular file of at most 16 MiB" in err


def test_a_model_sglang_cannot_load_is_an_error_not_a_table(tmp_path):
    (tmp_path / "config.json").write_text("{}")  # JSON, but no model_type: Transformers refuses it
    err = one_line_2(plan("--capability", "9.0", "--model-path", str(tmp_path)))
    assert f"plan: --model-path '{tmp_path}': SGLang cannot load the model's config: ValueError: " in err
    assert "model_type" in err


def test_a_worker_past_the_timeout_is_killed():
    err = one_line_2(fresh_plan("--capability", "9.0", "--timeout", "1", "--model-path", str(FIXTURES / "llama-tiny")))
    assert "worker did not finish in 1 s (killed)" in err


def test_deterministic_inference_on_an_unknown_gpu_starts_with_a_runnable_backend():
    """SGLang's deterministic pass names fa3 on 13.0 (neither is_sm100 nor is_sm120);
    the plan used to refuse it as if the user had passed --attention-backend fa3."""
    out = plan("--capability", "13.0", "--tp", "8", "--topology", "pcie-p2p",
               "--model-path", str(FIXTURES / "llama-tiny"), "--json", "--", "--enable-deterministic-inference")
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    assert d["routed"]["error"] is None
    assert d["routed"]["attention"] == {"prefill": "flashinfer", "decode": "flashinfer"}  # D16
    assert d["upstream"]["attention"] == {"prefill": "fa3", "decode": "fa3"}  # sm_90a / sm_8x builds only


def test_quantized_moe_fixture_shows_runnable_moe_and_gemm_choices_beside_upstreams():
    """Plan on an SM120 PCIe box with GPT-OSS's MXFP4 experts (SGLang registers its mxfp4
    method only on a CUDA host: the simulated GPU's process has it) shows both sides' MoE runner
    and GEMMs, each with the catalog's verdict."""
    from sglang_arch.integrations.sglang.plan_cli import render

    out = plan("--capability", "12.0", "--tp", "8", "--topology", "pcie-p2p",
               "--model-path", str(FIXTURES / "gpt-oss-mxfp4"), "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    routed, upstream = result["routed"]["moe_gemm"], result["upstream"]["moe_gemm"]
    assert result["routed"]["error"] is None and result["upstream"]["error"] is None
    assert routed["quantization"] == upstream["quantization"] == "mxfp4"
    assert routed["moe_runner"] == upstream["moe_runner"] == {"backend": "flashinfer_mxfp4", "runs": True}
    assert routed["fp8_gemm"]["runs"] is True and routed["fp4_gemm"]["runs"] is True
    text = render(result)
    assert "MoE runner (mxfp4)" in text and "flashinfer_mxfp4" in text and "no build" not in text


def test_a_refused_backend_is_a_difference_on_its_row():
    out = plan("--capability", "12.0", "--tp", "2", "--model-path", str(FIXTURES / "llama-tiny"),
               "--", "--attention-backend", "fa3")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("attention prefill"))
    assert lines[row].split() == ["attention", "prefill", "refused", "fa3", "<-", "differs"]
    assert "--attention-backend fa3: fa3 cannot run MHA prefill on 12.0" in " ".join(
        " ".join(lines[row + 1:row + 3]).split())
    # what a user sees fits 100 columns: the routed concerns counted, the time the plan took
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    assert any(line.startswith("routed through the registry: ") and line.endswith("concerns (--verbose lists them)")
               for line in lines)
    assert " ".join(lines).count("time: ") == 1 and "with the plugin (" in " ".join(out.stdout.split())


def test_an_fp8_kv_cache_shows_the_dsa_kv_path_it_changes():
    """DeepSeek's DSA hook asks torch for the device: the simulated GPU answers it (this
    plan once failed with 'Found no NVIDIA driver' in both modes)."""
    out = plan("--capability", "12.0", "--tp", "2", "--model-path", str(FIXTURES / "deepseek-dsa-tiny"),
               "--", "--kv-cache-dtype", "fp8_e4m3")
    assert out.returncode == 0, out.stderr
    rows = {line[:26].strip(): line[26:].split() for line in out.stdout.splitlines()[3:] if line[:1].strip()}
    assert rows["KV cache dtype"] == ["fp8_e4m3", "fp8_e4m3"]
    assert rows["DSA KV prefill"][:2] == rows["DSA KV decode"][:2] == ["tilelang", "trtllm"]


def test_speculative_decoding_shows_the_draft_attention_row_and_144_gpus_on_2_nodes_start():
    out = plan("--capability", "10.0", "--tp", "144", "--nnodes", "2", "--model-path", str(FIXTURES / "llama-tiny"),
               "--json", "--", "--speculative-algorithm", "EAGLE", "--speculative-draft-model-path",
               str(FIXTURES / "llama-tiny"))
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["machine"]["gpus"] == 144 and d["machine"]["nnodes"] == 2
    assert d["routed"]["speculative"]["algorithm"] == "EAGLE" and d["routed"]["speculative"]["draft_attention"]


def test_plan_honours_sglang_arch_disable_as_the_server_would():
    """With the plugin turned off, the "with sglang-arch" column is SGLang's own (MoE / GEMM
    included) and the footer says nothing is routed; a value that names no decision is
    refused before any worker starts."""
    args = ["--capability", "13.0", "--tp", "8", "--model-path", str(FIXTURES / "llama-tiny"), "--json"]
    cmd = [sys.executable, "-m", "sglang_arch", "plan", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(SGLANG_ARCH_DISABLE="1"), timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout)
    assert d["routed"]["routed"] == [] and d["routed"]["moe_gemm"] == d["upstream"]["moe_gemm"]
    bad = subprocess.run(cmd, capture_output=True, text=True, env=clean_env(SGLANG_ARCH_DISABLE="bogus"), timeout=120)
    assert bad.returncode == 2 and "not a decision: bogus" in bad.stderr and "Traceback" not in bad.stderr
