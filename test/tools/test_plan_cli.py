"""``sglang-arch plan``'s own checks, without an SGLang process: the model directory's
config.json, the worker timeout, when a plan is an error, and the table's layout."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sglang_arch.cli import main
from sglang_arch.integrations.sglang import plan, plan_cli
from sglang_arch.integrations.sglang.plan import (
    MAX_MODEL_CONFIG_BYTES,
    MAX_WORKER_TIMEOUT_S,
)

ACCEPTED = "accepted: a model directory whose config.json is a JSON object in a regular file of at most 16 MiB"


def plan_2(capsys, model_path, *more):
    start = time.monotonic()
    code = main(["plan", "--capability", "9.0", "--model-path", str(model_path), *more])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert time.monotonic() - start < 5  # refused before any SGLang process starts
    return err


def model_dir(tmp_path, content: bytes, name="m"):
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_bytes(content)
    return d


@pytest.mark.parametrize("content,message", [
    (b"{not json", "config.json is not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2"),
    (b"[1]", "config.json holds a JSON list, not an object"),
    (b"\xff{}", "config.json is not UTF-8 (invalid start byte at byte 0)"),
    (b"[" * 100_000 + b"]" * 100_000, "config.json is not valid JSON (nested too deeply)"),
])
def test_a_config_json_that_is_not_a_json_object_is_refused(tmp_path, capsys, content, message):
    d = model_dir(tmp_path, content)
    err = plan_2(capsys, d)
    assert f"--model-path '{d}': {message}" in err and ACCEPTED in err


def test_a_4_gb_sparse_config_json_is_refused_at_once(tmp_path, capsys):
    d = model_dir(tmp_path, b"")
    os.truncate(d / "config.json", 4 << 30)
    err = plan_2(capsys, d)
    assert f"config.json is larger than {MAX_MODEL_CONFIG_BYTES} bytes" in err and ACCEPTED in err


def test_a_config_json_at_the_bound_passes_the_check(tmp_path):
    d = model_dir(tmp_path, b'{"a": "' + b"x" * (MAX_MODEL_CONFIG_BYTES - 9) + b'"}')
    assert (d / "config.json").stat().st_size == MAX_MODEL_CONFIG_BYTES
    plan_cli.check_model_dir(str(d))
    with open(d / "config.json", "ab") as fh:
        fh.write(b" ")
    with pytest.raises(ValueError, match="larger than"):
        plan_cli.check_model_dir(str(d))


def test_a_fifo_config_json_is_refused_without_blocking(tmp_path, capsys):
    d = tmp_path / "m"
    d.mkdir()
    os.mkfifo(d / "config.json")
    assert "config.json is not a regular file" in plan_2(capsys, d)


def test_a_model_path_is_shown_escaped(tmp_path, capsys):
    err = plan_2(capsys, tmp_path / "a\x1b[31mb")
    assert "\x1b" not in err and "a\\x1b[31mb' has no config.json" in err


@pytest.mark.parametrize("value", ["0", str(MAX_WORKER_TIMEOUT_S + 1), "ten"])
def test_timeout_is_bounded(tmp_path, capsys, value):
    err = plan_2(capsys, model_dir(tmp_path, b"{}"), "--timeout", value)
    assert f"--timeout {value}" in err and f"<= {MAX_WORKER_TIMEOUT_S}" in err


def test_a_worker_past_its_timeout_is_killed_and_is_one_line(tmp_path, capsys, monkeypatch):
    real_run = subprocess.run

    def sleeping_worker(cmd, **kwargs):  # the real subprocess.run, on a worker that never answers
        return real_run([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)

    monkeypatch.setattr(plan.subprocess, "run", sleeping_worker)
    start = time.monotonic()
    code = main(["plan", "--capability", "9.0", "--model-path", str(model_dir(tmp_path, b"{}")), "--timeout", "1"])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "worker did not finish in 1 s (killed); accepted: --timeout up to 3600 s" in err
    assert time.monotonic() - start < 20


def result(routed_error=None, upstream_error=None, routed_about="arguments", upstream_about="arguments"):
    def one(error, about):
        return {"tier": {"resolved": "9.0", "match": "exact"}, "routed": ["attention backend"], "error": error,
                "error_about": about if error else None,
                "attention": {"prefill": "fa3", "decode": "fa3"},
                "allreduce_fusion": {"requested": None, "backend": None},
                "torch_symm_mem": {"enabled": False, "flag": False},
                "custom_allreduce": {"disabled_by_flag": False, "v2_table": "sm90"}}

    return {"machine": {"capability": "9.0", "gpus": 1, "topology": "single", "nnodes": 1, "cuda": "13.0"},
            "routed": one(routed_error, routed_about), "upstream": one(upstream_error, upstream_about)}


def test_one_mode_refusing_is_a_result():
    plan_cli.check_resolved(result(routed_error="ArchDecisionError: fa3 cannot run"), "m")
    plan_cli.check_resolved(result(), "m")


def test_both_modes_refusing_is_an_error():
    with pytest.raises(ValueError) as e:
        plan_cli.check_resolved(result("AssertionError: assert x", "AssertionError: assert x"), "m", ["--dp-size", "3"])
    assert str(e.value) == ("plan: --model-path 'm' with server arguments '--dp-size 3': SGLang would not start, "
                            "with or without sglang-arch: AssertionError: assert x; accepted: server arguments "
                            "SGLang accepts for this model and machine")
    with pytest.raises(ValueError, match="with sglang-arch: A; SGLang alone: B"):
        plan_cli.check_resolved(result("A", "B"), "m")


def test_the_model_refused_in_either_mode_is_an_error():
    with pytest.raises(ValueError) as e:
        plan_cli.check_resolved(result(upstream_error="OSError: bad\nconfig " + "x" * 5000, upstream_about="model"), "m")
    text = str(e.value)
    assert text.startswith("plan: --model-path 'm': SGLang cannot load the model's config: OSError: bad config x")
    assert "\n" not in text and len(text) < 1000


def test_an_exception_from_transformers_is_about_the_model():
    def raised(filename, source="raise OSError('x')"):
        try:
            exec(compile(source, filename, "exec"), {})
        except Exception as exc:
            return exc

    assert plan.about_the_model(raised("/venv/site-packages/transformers/configuration_utils.py"))
    assert plan.about_the_model(raised("/venv/site-packages/sglang/srt/utils/hf_transformers/config.py"))
    assert not plan.about_the_model(raised("/venv/site-packages/sglang/srt/server_args.py"))
    try:  # raised elsewhere, from one raised in Transformers
        raise ValueError("wrapped") from raised("/x/transformers/y.py")
    except ValueError as exc:
        assert plan.about_the_model(exc)


def test_a_bare_assert_is_quoted_with_its_line():
    try:
        assert 1 + 1 == 3
    except AssertionError as exc:
        assert plan.failing_line(exc).startswith("assert 1 + 1 == 3 (test_plan_cli.py:")


def test_table_columns_are_apart_whatever_the_values():
    lines = plan_cli.render(result()).splitlines()
    header = lines[2]
    assert "with sglang-arch  SGLang alone" in header
    fa3 = next(line for line in lines if line.startswith("attention prefill"))
    assert header.index("with sglang-arch") == fa3.index("fa3")
    assert header.index("SGLang alone") == fa3.rindex("fa3")


def test_a_gemm_the_registry_finds_nothing_for_is_named_so_not_none(monkeypatch):
    """Below every tier no NVFP4 GEMM has a build: plan says so instead of printing None."""
    from pathlib import Path
    from types import SimpleNamespace

    from sglang_arch.arch import parse_capability, runtime

    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "6.1")
    monkeypatch.setenv("SGLANG_ARCH_GPU_COUNT", "8")
    runtime.reset()
    try:
        fixture = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "qwen3-moe-nvfp4"
        view = SimpleNamespace(model_path=str(fixture), quantization="modelopt_fp4",
                               moe_runner_backend="auto", fp8_gemm_runner_backend="auto",
                               fp4_gemm_runner_backend="auto")
        out = plan.moe_gemm_outcome("routed", parse_capability("6.1"), view)
    finally:
        runtime.reset()
    assert out["fp4_gemm"] == {"backend": "none runs", "runs": None}
    assert out["moe_runner"]["backend"] == "none runs"


@pytest.mark.parametrize("extra, flag", [
    (["--tp-size", "8"], "--tp-size"), (["--tp=8"], "--tp-size"), (["--tensor-parallel-size", "8"], "--tensor-parallel-size"),
    (["--model-path", "/x"], "--model-path"), (["--model=/x"], "--model-path"), (["--nnodes", "2"], "--nnodes"),
    (["--trust-remote-code", "--nnod", "2"], "--nnodes"),
])
def test_a_server_argument_naming_the_machine_is_refused_before_any_worker(tmp_path, capsys, monkeypatch, extra, flag):
    """The adversarial pass of the fifth session: `-- --tp-size 8` with `--tp 1` printed a
    one-GPU machine from SGLang arguments resolved for eight (SGLang's parser takes the last)."""
    monkeypatch.setattr(plan, "run_plan", lambda *a, **k: pytest.fail("a worker ran"))
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "llama-tiny"
    err = plan_2(capsys, fixture, "--", *extra)
    assert f"names the simulated machine ({flag})" in err


def test_other_server_arguments_pass_the_machine_check():
    plan_cli.check_extra(["--trust-remote-code", "--mem-fraction-static", "0.5", "--model-loader-extra-config=x",
                          "--tokenizer-path", "/t", "--n", "-m", "2"])
