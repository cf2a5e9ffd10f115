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

# How soon a signalled run must be gone: at once on an idle machine (well under a second), this
# bound on a loaded 2-core runner where the other test worker starts interpreters too.
PROMPT_S = 20.0


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
    """`-- --tp-size 8` with `--tp 1` printed a
    one-GPU machine from SGLang arguments resolved for eight (SGLang's parser takes the last)."""
    monkeypatch.setattr(plan, "run_plan", lambda *a, **k: pytest.fail("a worker ran"))
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "llama-tiny"
    err = plan_2(capsys, fixture, "--", *extra)
    assert f"names the simulated machine ({flag})" in err


def test_other_server_arguments_pass_the_machine_check():
    plan_cli.check_extra(["--trust-remote-code", "--mem-fraction-static", "0.5", "--model-loader-extra-config=x",
                          "--tokenizer-path", "/t", "--n", "-m", "2"])


ARCH_ERROR = ("ArchDecisionError: --attention-backend fa3: fa3 cannot run MHA prefill on 12.0 (tier 12.0, exact): "
              "fa3_sm90 has no build for 12.0 (builds: sm_90a). Valid here: flashinfer, triton")


def test_a_refused_choice_is_a_difference_on_its_row_with_the_reason_under_it():
    lines = plan_cli.render(result(routed_error=ARCH_ERROR)).splitlines()
    prefill = next(i for i, line in enumerate(lines) if line.startswith("attention prefill"))
    assert lines[prefill].split() == ["attention", "prefill", "refused", "fa3", "<-", "differs"]
    assert lines[prefill + 1].split()[:4] == ["with", "sglang-arch:", "ArchDecisionError:", "--attention-backend"]
    assert "Valid here: flashinfer, triton" in " ".join(" ".join(lines).split())
    decode = next(line for line in lines if line.startswith("attention decode"))
    assert decode.split() == ["attention", "decode", "refused", "fa3", "<-", "differs"]
    assert " ".join(lines).count("fa3 cannot run") == 1  # the reason once, under the first row
    assert "with sglang-arch: server would not start (refused above)" in lines
    assert max(len(line) for line in lines) <= 100


def test_an_error_that_names_no_row_stays_in_the_footer():
    lines = plan_cli.render(result(routed_error="ValueError: something else")).splitlines()
    assert "refused" not in " ".join(line for line in lines if not line.startswith("with sglang-arch:"))
    assert "with sglang-arch: server would not start: ValueError: something else" in lines


@pytest.mark.parametrize("error,label", [
    ("ArchDecisionError: --moe-runner-backend deep_gemm: cannot run", "MoE runner"),
    ("ArchDecisionError: --fp8-gemm-backend deep_gemm: cannot run", "FP8 block GEMM"),
    ("ArchDecisionError: --speculative-draft-attention-backend fa3: cannot run", "draft attention"),
])
def test_each_refusable_flag_marks_its_own_row(error, label):
    r = result(routed_error=error)
    for mode in ("routed", "upstream"):
        r[mode]["speculative"] = {"algorithm": "EAGLE", "draft_attention": "fa3"}
        r[mode]["moe_gemm"] = {"quantization": "fp8_block", **{k: {"backend": "deep_gemm", "runs": True} for k in (
            "moe_runner", "fp8_gemm", "fp4_gemm", "deep_gemm")}}
    rows = {name: (a, b) for name, a, b in plan_cli.rows_of(r)}
    refused = [name for name, (a, _) in rows.items() if a == plan_cli.REFUSED]
    assert len(refused) == 1 and refused[0].startswith(label), refused
    assert all(b != plan_cli.REFUSED for _, b in rows.values())


def test_speculative_decoding_and_an_fp8_kv_cache_show_the_rows_they_change():
    plain = [name for name, _, _ in plan_cli.rows_of(result())]
    assert not {"draft attention", "KV cache dtype", "DSA KV prefill"} & set(plain)
    r = result()
    r["routed"].update(speculative={"algorithm": "EAGLE", "draft_attention": "flashinfer"},
                       kv_cache={"dtype": "fp8_e4m3", "dsa_prefill": "tilelang", "dsa_decode": "tilelang"})
    r["upstream"].update(speculative={"algorithm": "EAGLE", "draft_attention": "fa3"},
                         kv_cache={"dtype": "fp8_e4m3", "dsa_prefill": "trtllm", "dsa_decode": "trtllm"})
    rows = {name: (a, b) for name, a, b in plan_cli.rows_of(r)}
    assert rows["draft attention"] == ("flashinfer", "fa3")
    assert rows["KV cache dtype"] == ("fp8_e4m3", "fp8_e4m3")
    assert rows["DSA KV prefill"] == rows["DSA KV decode"] == ("tilelang", "trtllm")
    lines = plan_cli.render(r).splitlines()
    assert next(line for line in lines if line.startswith("DSA KV prefill")).split() == [
        "DSA", "KV", "prefill", "tilelang", "trtllm", "<-", "differs"]
    assert next(line for line in lines if line.startswith("draft attention")).endswith("<- differs")


def hf_cache(root, model_id, revisions, main=None):
    repo = root / ("models--" + model_id.replace("/", "--"))
    for i, rev in enumerate(revisions):
        snap = repo / "snapshots" / rev
        snap.mkdir(parents=True)
        (snap / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
        os.utime(snap, (1000 + i, 1000 + i))
    if main:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(main)
    return repo


def test_a_model_id_resolves_from_the_local_hugging_face_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = hf_cache(tmp_path / "hub", "org/model-1.5B", ["aaa", "bbb"], main="aaa")
    assert plan_cli.resolve_model_path("org/model-1.5B") == str(repo / "snapshots" / "aaa")
    (repo / "refs" / "main").write_text("gone")  # the newest snapshot, where refs/main names none
    assert plan_cli.resolve_model_path("org/model-1.5B") == str(repo / "snapshots" / "bbb")
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    other = hf_cache(tmp_path / "home" / "hub", "org/other", ["ccc"])
    assert plan_cli.resolve_model_path("org/other") == str(other / "snapshots" / "ccc")
    assert plan_cli.resolve_model_path("org/absent") == "org/absent"
    assert plan_cli.resolve_model_path("../../etc") == "../../etc"  # not a model id


def test_a_model_id_not_in_the_cache_is_one_line_naming_the_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    err = plan_2(capsys, "org/absent")
    assert err.strip() == (f"sglang-arch: error: --model-path 'org/absent' has no config.json (nor is it a model "
                           f"id in the local Hugging Face cache, {tmp_path / 'hub'}); give a model directory")


def test_the_cached_snapshot_is_what_the_workers_get(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = hf_cache(tmp_path / "hub", "org/m", ["abc"], main="abc")
    seen = {}

    def fake_run_plan(cap, tp, topology, nnodes, cuda, model_path, extra, timeout):
        seen["model_path"] = model_path
        raise RuntimeError("stop here")

    monkeypatch.setattr(plan, "run_plan", fake_run_plan)
    assert main(["plan", "--capability", "9.0", "--model-path", "org/m"]) == 2
    assert seen["model_path"] == str(repo / "snapshots" / "abc")


@pytest.mark.parametrize("tp,nnodes,per_node", [(144, 2, 72), (16, 2, 8), (8, 1, 8), (4, 4, 1)])
def test_the_simulated_node_holds_the_gpus_of_one_node(tmp_path, monkeypatch, tp, nnodes, per_node):
    """--tp 144 --nnodes 2 is 72 GPUs a node; it was passed whole as the node's GPU count."""
    envs = []

    class Done:
        returncode, stdout, stderr = 1, "", "stop"

    def fake_run(cmd, capture_output, text, env, timeout, **kwargs):
        envs.append(env)
        return Done()

    monkeypatch.setattr(plan.subprocess, "run", fake_run)
    with pytest.raises(RuntimeError):
        plan.run_plan(plan.parse_capability("10.0"), tp, None, nnodes, (13, 0), str(tmp_path), [])
    assert {e["SGLANG_ARCH_GPU_COUNT"] for e in envs} == {str(per_node)}
    assert {e["SGLANG_ARCH_TOPOLOGY"] for e in envs} == {"nvswitch"}


def test_a_single_gpu_tier_on_several_gpus_is_simulated_on_pcie(tmp_path, monkeypatch):
    envs = []

    class Done:
        returncode, stdout, stderr = 1, "", "stop"

    monkeypatch.setattr(plan.subprocess, "run", lambda cmd, env, **kw: envs.append(env) or Done())
    with pytest.raises(RuntimeError):
        plan.run_plan(plan.parse_capability("12.1"), 4, None, 1, (13, 0), str(tmp_path), [])
    assert {e["SGLANG_ARCH_TOPOLOGY"] for e in envs} == {"pcie"}


def test_plan_refuses_single_with_several_gpus(tmp_path, capsys):
    err = plan_2(capsys, model_dir(tmp_path, b"{}"), "--tp", "4", "--topology", "single")
    assert "topology single is one GPU, but --tp 4 GPUs are given" in err


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_ends_plan_and_its_workers_at_once(tmp_path, signame):
    """The workers import SGLang for many seconds: a signal to ``plan`` must not wait for
    them (nor leave them running)."""
    import signal

    model = model_dir(tmp_path, b'{"architectures": ["LlamaForCausalLM"], "model_type": "llama"}', "signal-model")
    proc = subprocess.Popen([sys.executable, "-m", "sglang_arch", "plan", "--capability", "9.0", "--model-path",
                             str(model), "--timeout", "600"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)

    def workers():
        found = []
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    data = f.read()
                if str(model).encode() in data and b"--mode" in data:
                    found.append(pid)
            except OSError:
                continue
        return found

    deadline = time.monotonic() + 60
    while not workers() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert workers(), "the workers never started"
    time.sleep(1)
    start = time.monotonic()
    proc.send_signal(getattr(signal, signame))
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - start < PROMPT_S, err
    assert proc.returncode != 0 and "Traceback" not in err, err
    time.sleep(0.5)
    assert workers() == []


ROUTED = ["platform facts", "torch symm mem", "custom all-reduce v2", "all-reduce fusion", "attention backend"] * 12


def test_every_line_of_a_plan_fits_100_columns_and_the_routed_concerns_are_counted():
    r = result(upstream_error="ValueError: " + "a long reason " * 40)
    r["routed"]["routed"] = list(ROUTED)
    r["timing"] = {"routed_s": 21.5, "upstream_s": 20.25, "wall_s": 22.0}
    lines = plan_cli.render(r).splitlines()
    assert max(len(line) for line in lines) <= 100
    assert f"routed through the registry: {len(ROUTED)} concerns (--verbose lists them)" in lines
    text = " ".join(" ".join(lines).split())
    assert "SGLang alone: server would not start: ValueError: a long reason" in text
    assert ("time: 22.0 s for two resolutions of SGLang's server arguments run side by side, with the plugin "
            "(21.5 s) and SGLang alone (20.2 s)") in text
    verbose = plan_cli.render(r, verbose=True).splitlines()
    assert max(len(line) for line in verbose) <= 100
    assert "routed through the registry: platform facts, torch symm mem" in " ".join(verbose)


@pytest.mark.parametrize("gpus, disabled, shown", [(1, False, "off (1 GPU)"), (8, False, "sm90"),
                                                   (8, True, "off (--disable-custom-all-reduce)")])
def test_the_custom_all_reduce_row_says_off_where_explain_does(gpus, disabled, shown):
    r = result()
    r["machine"]["gpus"] = gpus
    for mode in ("routed", "upstream"):
        r[mode]["custom_allreduce"]["disabled_by_flag"] = disabled
    rows = {name: (a, b) for name, a, b in plan_cli.rows_of(r)}
    assert rows["custom AR v2 table"] == (shown, shown)
    line = next(line for line in plan_cli.render(r).splitlines() if line.startswith("custom AR v2 table"))
    assert line.split("  ")[-1].strip() == shown
