"""Hostile input gives one line and exit 2 (or a fail-open warning in the
plugin), never a traceback, a hang, an unbounded size, or a write outside its target.
One test (or parametrized case) per kind of failure; test_fuzz.py generates the rest."""

import importlib
import json
import logging
import os
import sys
import threading
import time
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_arch.arch import TableError, build_registry, parse_capability, runtime
from sglang_arch.arch.registry import env_flag, load_override_file
from sglang_arch.arch.validate import (
    MAX_FILE_BYTES,
    MAX_GPUS_PER_NODE,
    SYMM_MEM_MAX_MIB,
    read_regular_file,
)
from sglang_arch.cli import main

detect_module = importlib.import_module("sglang_arch.arch.detect")

@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for key in list(os.environ):
        if key.startswith("SGLANG_ARCH_") or key in ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "NCCL_NVLS_ENABLE",
                                                      "NVSHMEM_DISABLE_NVLS"):
            monkeypatch.delenv(key)
    monkeypatch.setattr(detect_module, "_nvml_node", lambda: None)
    monkeypatch.setattr(detect_module, "_torch_node", lambda: None)
    runtime.reset()
    yield
    runtime.reset()


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_2(capsys, *argv, expect=""):
    code, out, err = run(capsys, *argv)
    assert code == 2, (argv, code, out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert expect in err, err
    return err


# --- override files of a wrong shape -------------------------------------------------

WRONG_SHAPES = [
    ('{"architectures": 5}', "field 'architectures': expected a table"),
    ('{"architectures": {"12.0": 5}}', "must be a table of fields"),
    ('[1, 2]', "expected a table of capability -> fields at the top level"),
    ('{"12.0": {"name": ["a"]}}', "field 'name': expected a string"),
    ('{"12.0": {"topology": ["pcie"]}}', "field 'topology': unknown ['pcie']"),
    ('{"12.0": {"custom_ar_v2_table": ["sm90"]}}', "field 'custom_ar_v2_table': unknown"),
    ('{"12.0": {"features": {"fp8": ["arch"]}}}', "unknown scope"),
    ('{"13.0": {"inherits": ["12.0"], "name": "x"}}', "field 'inherits': expected a capability string"),
    ('{"12.0": {"torch_symm_mem": [2, 4]}}', "field 'torch_symm_mem' must map"),
    ('{"12.0": {"examples": "RTX"}}', "field 'examples': expected a list of strings"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"12.0": {"smem_per_sm_kib": Infinity}}', "Infinity is not a number JSON allows"),
    ('{"12.0": {"smem_per_sm_kib": 1e400}}', "out of range"),
    ('{"12.0": {"smem_per_sm_kib": NaN}}', "NaN is not a number JSON allows"),
    ('{"12.0": {"smem_per_sm_kib": 100.5}}', "field 'smem_per_sm_kib': expected an integer"),
    ('{"12.0": {"min_cuda": "１２.８"}}', "invalid version"),
    ('{"12.0": {}, "12": {}}', "listed twice"),
    ('\xff\xfe', "not UTF-8"),
]


@pytest.mark.parametrize("text,message", WRONG_SHAPES)
def test_wrong_shape_override_is_one_line(tmp_path, monkeypatch, capsys, text, message):
    path = tmp_path / "arch.json"
    path.write_bytes(text.encode("latin-1") if text.startswith("\xff") else text.encode())
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    err = one_line_2(capsys, "explain", "12.0", expect=message)
    assert str(path) in err


def test_deep_toml_is_one_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "arch.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    one_line_2(capsys, "explain", "12.0", expect="nested too deeply")


# --- bounded sizes -------------------------------------------------------------------

@pytest.mark.parametrize("entry,field", [
    ({"torch_symm_mem": {"8": 2000}}, "torch_symm_mem.8"),
    ({"torch_symm_mem": {"8": 1e300}}, "torch_symm_mem.8"),
    ({"torch_symm_mem": {"100000": 64}}, "torch_symm_mem' key"),
    ({"symm_mem_multimem_world_sizes": [10 ** 20]}, "symm_mem_multimem_world_sizes"),
    ({"custom_ar_v2_world_sizes": list(range(2, 200))}, "custom_ar_v2_world_sizes"),
    ({"smem_per_block_kib": 10 ** 9}, "smem_per_block_kib"),
    ({"min_cuda": "999.0"}, "min_cuda"),
    ({"name": "x" * 5000}, "name"),
    ({"sources": ["s"] * 1000}, "sources"),
])
def test_every_numeric_and_list_field_is_bounded_in_overrides(entry, field):
    with pytest.raises(TableError, match=field.replace(".", r"\.")) as err:
        build_registry({"12.0": entry}, override_source="o.json")
    assert len(str(err.value)) < 600  # the rejected value is quoted short


def test_symm_mem_at_the_limit_is_accepted_and_used():
    reg = build_registry({"12.0": {"torch_symm_mem": {"8": SYMM_MEM_MAX_MIB}}})
    assert reg.resolve("12.0").profile.torch_symm_mem[8] == SYMM_MEM_MAX_MIB << 20


# --- hangs ---------------------------------------------------------------------------

def _fifo(tmp_path):
    path = tmp_path / "arch.json"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize("make", [_fifo, lambda tmp: "/dev/zero", lambda tmp: str(tmp)])
def test_config_that_is_not_a_regular_file_is_refused_at_once(tmp_path, monkeypatch, capsys, make):
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", make(tmp_path))
    start = time.monotonic()
    one_line_2(capsys, "show", expect="not a regular file")
    assert time.monotonic() - start < 5


def test_config_file_size_is_capped(tmp_path):
    path = tmp_path / "big.json"
    path.write_text("{" + " " * MAX_FILE_BYTES + "}")
    with pytest.raises(TableError, match="larger than"):
        load_override_file(str(path))
    assert read_regular_file(str(tmp_path / "big.json"), limit=MAX_FILE_BYTES + 2)


def test_huge_simulated_gpu_count_is_refused_at_once(monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "12.0")
    monkeypatch.setenv("SGLANG_ARCH_GPU_COUNT", str(10 ** 20))
    monkeypatch.setenv("SGLANG_ARCH_CUDA", "13.0")  # the CUDA a simulated machine takes, without importing torch to ask
    start = time.monotonic()
    one_line_2(capsys, "show", expect="invalid GPU count")
    one_line_2(capsys, "show", "--capability", "12.0", "--gpus", str(10 ** 20), expect="invalid value")
    assert time.monotonic() - start < 5
    monkeypatch.setenv("SGLANG_ARCH_GPU_COUNT", str(MAX_GPUS_PER_NODE))
    assert run(capsys, "show")[0] == 0


def _fake_sglang(monkeypatch):
    """Just the module the plugin imports before it reads the machine (SGLang takes ~10 s to import)."""
    for name in ("sglang", "sglang.srt", "sglang.srt.plugins", "sglang.srt.plugins.hook_registry"):
        module = types.ModuleType(name)
        module.HookRegistry, module.HookType = object(), types.SimpleNamespace(AROUND="around")
        monkeypatch.setitem(sys.modules, name, module)


class _Lines(logging.Handler):
    """The plugin's own log lines (it may stop propagation to the root logger)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture
def plugin_log():
    handler = _Lines()
    logger = logging.getLogger("sglang_arch")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    logger.addHandler(handler)
    yield handler.lines
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def test_plugin_fails_open_in_one_line_on_a_fifo_config(tmp_path, monkeypatch, plugin_log):
    from sglang_arch.integrations import sglang as plugin

    _fake_sglang(monkeypatch)
    monkeypatch.setattr(plugin, "_state", {"registered": False, "routed": []})
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", _fifo(tmp_path))
    done = threading.Event()
    threading.Thread(target=lambda: (plugin.register(), done.set()), daemon=True).start()
    assert done.wait(20), "register() blocked on a FIFO"
    lines = plugin_log
    assert len(lines) == 1 and "plugin not active" in lines[0] and "not a regular file" in lines[0]
    assert not plugin._state["registered"]


# --- answers at the extremes ---------------------------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["explain", "12.0", "--world-size", "1000000"], "invalid value '1000000'"),
    (["explain", "12.0", "--world-size", "1000", "--nnodes", "2"], "at most 72 GPUs per node"),
    (["explain", "12.0", "--world-size", "73"], "at most 72 GPUs per node"),
    (["explain", "10.0", "--nnodes", "16", "--topology", "pcie"], "smaller than the node count 16"),
    (["explain", "10.0", "--world-size", "4", "--nnodes", "8"], "smaller than the node count 8"),
    (["explain", "10.0", "--world-size", "8", "--nnodes", "100000"], "invalid value '100000'"),
    (["plan", "--capability", "12.0", "--tp", "100", "--model-path", "x"], "at most 72 GPUs per node"),
    (["plan", "--capability", "12.0", "--tp", "2", "--nnodes", "4", "--model-path", "x"], "smaller than the node"),
    (["tune", "collectives", "--world-sizes", str(10 ** 20)], "invalid world sizes"),
    (["tune", "collectives", "--sizes", "1000G"], "invalid size '1000G'"),
])
def test_machine_bounds(capsys, argv, message):
    one_line_2(capsys, *argv, expect=message)


def test_machine_bounds_accept_real_deployments(capsys):
    for argv in (["explain", "10.0", "--world-size", "72", "--topology", "nvswitch"],
                 ["explain", "10.0", "--world-size", "144", "--nnodes", "2", "--topology", "nvswitch"]):
        assert run(capsys, *argv)[0] == 0


# --- upstream never leaves SRC -------------------------------------------------------

def test_upstream_refuses_a_symlinked_arch_dir_before_writing(tmp_path, capsys):
    """The folder the series' platform table goes in (srt/platforms) a link to elsewhere."""
    src = tmp_path / "sglang"
    (src / "srt").mkdir(parents=True)
    (src / "__init__.py").write_text("")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.py").write_text("x = 1\n")
    (src / "srt" / "platforms").symlink_to(outside, target_is_directory=True)
    one_line_2(capsys, "upstream", str(src), expect="is a symlink")
    assert sorted(p.name for p in outside.iterdir()) == ["keep.py"]  # nothing written, nothing deleted


def test_upstream_refuses_a_symlinked_file_inside_arch(tmp_path, capsys):
    """The series' platform table file itself a link to a file elsewhere."""
    src = tmp_path / "sglang"
    (src / "srt" / "platforms").mkdir(parents=True)
    (src / "__init__.py").write_text("")
    victim = tmp_path / "victim.py"
    victim.write_text("precious\n")
    (src / "srt" / "platforms" / "cuda_arch.py").symlink_to(victim)
    one_line_2(capsys, "upstream", str(src), expect="is a symlink")
    assert victim.read_text() == "precious\n"


# --- no traceback from commands --------------------------------------------------------

def test_plan_worker_failure_is_one_line(tmp_path, monkeypatch, capsys):
    from sglang_arch.integrations.sglang import plan

    def failing(*a, **k):
        raise RuntimeError("the routed worker failed: error: unrecognized arguments: --bogus")

    monkeypatch.setattr(plan, "run_plan", failing)
    (tmp_path / "config.json").write_text("{}")
    one_line_2(capsys, "plan", "--capability", "12.0", "--model-path", str(tmp_path), "--", "--bogus",
               expect="unrecognized arguments: --bogus")


def test_tune_without_torch_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)
    one_line_2(capsys, "tune", "collectives", expect="torch, which is not installed")


@pytest.mark.parametrize("doc,message", [
    ("{nope", "not a results file"),
    ("[]", "(top level)"),
    ('{"run": 5}', "field 'run'"),
    ('{"run": {"backend": "nccl"}}', "run.device"),
    ('{"run": {"backend": "gloo", "device": "d", "started": "s", "iters": 1, "world_sizes": [2], '
     '"capability": null, "measurements": [{"world_size": 2, "size": 4, "times_us": {"nccl": "fast"}, '
     '"errors": {}}]}}', "run.measurements[0].times_us"),
    ('{"run": {"backend": "gloo", "device": "d", "started": "s", "iters": 1, "world_sizes": [10000000000], '
     '"capability": null, "measurements": []}}', "run.world_sizes"),
    ('{"run": {"backend": "nccl", "device": "d", "started": "s", "iters": 1, "world_sizes": [2], '
     '"capability": "banana", "measurements": []}}', "field 'run.capability': expected"),
])
def test_tune_from_malformed_results_is_one_line(tmp_path, capsys, doc, message):
    path = tmp_path / "results.json"
    path.write_text(doc)
    one_line_2(capsys, "tune", "collectives", "--from-results", str(path), expect=message)


def test_unexpected_error_is_still_one_line(monkeypatch, capsys):
    import sglang_arch.cli as cli

    monkeypatch.setattr(cli, "matrix_rows", lambda: {}["boom"])
    code, _, err = run(capsys, "matrix")
    assert code == 1 and len(err.strip().splitlines()) == 1 and "internal error: KeyError" in err


# --- show prints what the plugin decides --------------------------------------------

@pytest.mark.parametrize("env", [
    {"SGLANG_ARCH_CAPABILITY": "10.0", "SGLANG_ARCH_GPU_COUNT": "8", "SGLANG_ARCH_CUDA": "12.4"},
    {"SGLANG_ARCH_CAPABILITY": "10.0", "SGLANG_ARCH_GPU_COUNT": "8", "SGLANG_ARCH_TOPOLOGY": "nvswitch"},
    {"SGLANG_ARCH_CAPABILITY": "9.0", "SGLANG_ARCH_GPU_COUNT": "4", "NCCL_NVLS_ENABLE": "0"},
    {"SGLANG_ARCH_CAPABILITY": "12.0", "SGLANG_ARCH_GPU_COUNT": "2", "SGLANG_ARCH_TOPOLOGY": "pcie-p2p"},
])
def test_show_equals_the_plugins_context(monkeypatch, capsys, env):
    monkeypatch.setenv("SGLANG_ARCH_CUDA", "13.0")  # a simulated machine's CUDA, unless the case sets one: no torch
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    code, out, _ = run(capsys, "show", "--json")
    shown = json.loads(out)["node"]
    runtime.reset()
    ctx = runtime.current()  # what the plugin's glue reads
    assert code == 0 and shown == ctx.decisions().to_dict()
    assert shown["collectives"]["torch_symm_mem"]["algorithm"] == ctx.symm_mem(ctx.world).algorithm
    assert shown["collectives"]["allreduce_fusion"]["backend"] == ctx.fusion(1).backend


def test_forced_topology_on_a_real_node_respects_multicast_off(monkeypatch, capsys):
    from sglang_arch.arch import TOPOLOGIES, Capability, Gpu, Node

    gpus = tuple(Gpu(i, "B200", Capability(10, 0)) for i in range(8))
    monkeypatch.setattr(detect_module, "_nvml_node", lambda: Node(gpus, TOPOLOGIES["nvlink"], "nvml"))
    monkeypatch.setenv("SGLANG_ARCH_TOPOLOGY", "nvswitch")
    monkeypatch.setenv("SGLANG_ARCH_CUDA", "13.0")
    code, out, _ = run(capsys, "show", "--json")
    d = json.loads(out)["node"]
    assert code == 0 and d["topology"] == "nvswitch" and d["collectives"]["torch_symm_mem"]["algorithm"] == "multimem"
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    runtime.reset()
    code, out, _ = run(capsys, "show", "--json")
    d = json.loads(out)["node"]
    # without multicast SM100 has no measured two-shot bound: off, as stock SGLang
    assert code == 0 and d["topology"] == "nvlink" and d["collectives"]["torch_symm_mem"]["enabled"] is False
    runtime.reset()
    assert runtime.current().topology.name == "nvlink"  # the plugin reads the same


def test_show_uses_the_runtimes_torch_cuda(monkeypatch, capsys):
    code, out, _ = run(capsys, "show", "--capability", "10.0", "--gpus", "8", "--cuda", "12.4", "--json")
    d = json.loads(out)["node"]
    assert code == 0 and not d["collectives"]["allreduce_fusion"]["enabled"]
    assert "needs torch CUDA >= 12.8" in d["collectives"]["allreduce_fusion"]["reason"]


# --- override semantics -------------------------------------------------------------

def test_inherits_null_patches_instead_of_wiping():
    reg = build_registry({"12.0": {"inherits": None, "torch_symm_mem": {"2": 32}}})
    p = reg.resolve("12.0").profile
    assert p.name == "Blackwell (RTX)" and p.torch_symm_mem == {2: 32 << 20}
    assert p.attention_mha == build_registry().resolve("12.0").profile.attention_mha


def test_children_of_a_patched_parent_report_override():
    reg = build_registry({"12.0": {"torch_symm_mem": {"2": 32}}}, override_source="o.json")
    child = reg.resolve("12.1")
    assert child.profile.torch_symm_mem == {2: 32 << 20}  # the patch is inherited ...
    assert child.match == "override" and "inherits from 12.0" in child.reason  # ... and said
    assert build_registry().resolve("12.1").match == "exact"
    assert reg.resolve("10.0").match == "exact"  # unrelated tiers stay exact
    assert reg.with_strict(True).resolve("12.1").match == "override"


# --- spellings ------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["(12, 0)", "(12,0)", " ( 12 , 0 ) "])
def test_tuple_spelling_from_the_readme_is_accepted(capsys, text):
    assert parse_capability(text).as_tuple() == (12, 0)
    assert run(capsys, "explain", text)[0] == 0


@pytest.mark.parametrize("text", ["１２.０", "١٢.٠", "sm_１２０", "12.０", "१२"])
def test_non_ascii_digits_are_refused(capsys, text):
    with pytest.raises(ValueError, match="invalid compute capability"):
        parse_capability(text)
    one_line_2(capsys, "explain", text, expect="ASCII digits")
    one_line_2(capsys, "explain", "12.0", "--world-size", "８", expect="invalid value")


# --- concurrency ------------------------------------------------------------------------

def test_runtime_current_is_single_flight(monkeypatch):
    calls = []
    real = runtime.detect

    def slow_detect(**kwargs):
        calls.append(1)
        time.sleep(0.05)
        return real(**kwargs)

    monkeypatch.setattr(runtime, "detect", slow_detect)
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "12.0")
    monkeypatch.setenv("SGLANG_ARCH_CUDA", "13.0")  # no torch import inside the timed threads
    runtime.reset()
    barrier = threading.Barrier(8)
    results = []

    def worker():
        barrier.wait()
        results.append(runtime.current())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(calls) == 1 and len(results) == 8 and all(r is results[0] for r in results)
    runtime.reset()
    assert runtime.current() is not results[0] and len(calls) == 2  # reset() still forgets


# --- small inconsistencies ------------------------------------------------------------

def test_toml_suffix_is_case_insensitive(tmp_path):
    path = tmp_path / "X.TOML"
    path.write_text('[architectures."12.0"]\nname = "Tuned"\n')
    assert load_override_file(str(path)) == {"12.0": {"name": "Tuned"}}


@pytest.mark.parametrize("value,expected", [("1", True), (" On ", True), ("", False), ("off", False)])
def test_one_boolean_parser(monkeypatch, value, expected):
    monkeypatch.setenv("SGLANG_ARCH_STRICT", value)
    assert env_flag("SGLANG_ARCH_STRICT") is expected


def test_invalid_booleans(monkeypatch, capsys, plugin_log):
    monkeypatch.setenv("SGLANG_ARCH_STRICT", "maybe")
    one_line_2(capsys, "explain", "12.0", expect="SGLANG_ARCH_STRICT='maybe' is not a boolean")
    monkeypatch.delenv("SGLANG_ARCH_STRICT")
    # The kill switch: an invalid value keeps the plugin out (the safe side), in one line.
    from sglang_arch.integrations import sglang as plugin

    monkeypatch.setattr(plugin, "_state", {"registered": False, "routed": []})
    monkeypatch.setenv("SGLANG_ARCH_DISABLE", "maybe")
    plugin.register()
    lines = plugin_log
    assert len(lines) == 1 and "SGLANG_ARCH_DISABLE='maybe': not a decision: maybe; accepted:" in lines[0]
    assert "symm_mem, custom_all_reduce, pcie_ipc, fusion, attention" in lines[0]
    assert not plugin._state["registered"]


def test_show_simulation_flags_need_a_capability(capsys):
    one_line_2(capsys, "show", "--gpus", "4", expect="need --capability")
    one_line_2(capsys, "show", "--topology", "pcie", expect="need --capability")


@pytest.mark.parametrize("value,named", [
    ("nonexist.json", "SGLANG_ARCH_CONFIG='nonexist.json': cannot read override file: No such file or directory"),
    ("\n", "SGLANG_ARCH_CONFIG='\\n': cannot read override file"),
    ("/tmp/\x1b[31mred.json", "SGLANG_ARCH_CONFIG='/tmp/\\x1b[31mred.json': cannot read override file"),
])
@pytest.mark.parametrize("command", [["show"], ["explain", "12.0"]])
def test_config_errors_name_the_variable_and_escape_the_path(monkeypatch, capsys, value, named, command):
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", value)
    err = one_line_2(capsys, *command, expect=named)
    assert "\x1b" not in err and err.count("\n") == 1


@pytest.mark.parametrize("content,message", [
    ("{not json", "not valid JSON"),
    ('{"12.0": {"colour": "green"}}', "entry 12.0: unknown field(s) ['colour']"),
    ('{"twelve": {"name": "x"}}', "invalid compute capability 'twelve'"),
    ('{"13.0": {"inherits": "14.0", "name": "x"}}', "field 'inherits' names '14.0'"),
    ("[1]", "expected a table of capability -> fields"),
])
def test_every_config_file_error_names_the_variable(tmp_path, monkeypatch, capsys, content, message):
    path = tmp_path / "arch.json"
    path.write_text(content)
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    err = one_line_2(capsys, "explain", "12.0", expect=message)
    assert f"SGLANG_ARCH_CONFIG='{path}'" in err


def test_config_reason_names_the_variable(tmp_path, monkeypatch):
    from sglang_arch.arch import resolve
    from sglang_arch.arch.registry import reset_default_registry

    path = tmp_path / "arch.json"
    path.write_text('{"12.0": {"name": "Mine"}}')
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    reset_default_registry()
    try:
        assert resolve("12.0").reason == f"12.0 is defined by the override file SGLANG_ARCH_CONFIG='{path}'"
    finally:
        reset_default_registry()


def test_a_long_config_path_is_cut_in_errors(monkeypatch, capsys):
    from sglang_arch.arch.validate import MAX_SHOWN_PATH

    monkeypatch.setenv("SGLANG_ARCH_CONFIG", "/" + "d/" * 2000 + "x.json")
    err = one_line_2(capsys, "show", expect="SGLANG_ARCH_CONFIG='/d/d/")
    assert len(err) < MAX_SHOWN_PATH + 200


def test_load_override_file_escapes_an_unprintable_path(tmp_path):
    with pytest.raises(TableError) as e:
        load_override_file(str(tmp_path / "a\x1bb.json"))
    assert "\x1b" not in str(e.value) and "a\\x1bb.json" in str(e.value)


def test_show_without_gpu_still_checks_the_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(tmp_path / "missing.json"))
    one_line_2(capsys, "show", expect="cannot read override file")
    monkeypatch.delenv("SGLANG_ARCH_CONFIG")
    monkeypatch.setenv("SGLANG_ARCH_CUDA", "twelve")
    one_line_2(capsys, "show", expect="SGLANG_ARCH_CUDA")


@pytest.mark.parametrize("topology,nnodes,enabled", [
    ("pcie", 16, False), ("pcie-p2p", 2, False), ("pcie-p2p", 1, False), ("nvlink", 1, False), ("nvlink", 2, False),
    ("nvswitch", 1, True), ("nvswitch", 2, True),
])
def test_mnnvl_needs_nvlink_multicast(topology, nnodes, enabled):
    """D9: `explain 10.0 --nnodes 16 --topology pcie` enabled mnnvl; on `nvlink` (no multicast)
    FlashInfer's MNNVL workspace, a multicast buffer, cannot be made."""
    from sglang_arch.arch import TOPOLOGIES, resolve
    from sglang_arch.arch.policies.collectives import allreduce_fusion

    d = allreduce_fusion(resolve("10.0"), TOPOLOGIES[topology], 16, nnodes=nnodes, requested="mnnvl")
    assert d.enabled is enabled
    if not enabled:
        assert d.reason == (f"mnnvl fusion needs NVLink multicast (its workspace is a multicast buffer); "
                            f"{topology} has none")


# --- strings, integers and versions of an override file --------------------

STRING_FIELDS = ["name", "examples", "attention_mha", "attention_mla", "lead", "sources"]


def _entry(field, text):
    return {"12.0": {field: text if field == "name" else [text]}}


@pytest.mark.parametrize("field", STRING_FIELDS)
@given(prefix=st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Zl", "Zp")), max_size=5),
       surrogate=st.integers(0xD800, 0xDFFF))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_lone_surrogate_in_any_string_is_named_with_file_and_field(tmp_path, monkeypatch, capsys, field,
                                                                     prefix, surrogate):
    # A JSON "\ud800" escape is a lone surrogate: it used to pass the schema and fail when
    # printed ("'utf-8' codec can't encode character"), without the file or the field.
    path = tmp_path / "arch.json"
    text = prefix + chr(surrogate) + "x"
    path.write_text(json.dumps(_entry(field, text)))  # ensure_ascii: written as the escape
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    runtime.reset()
    err = one_line_2(capsys, "explain", "12.0",
                     expect=f"SGLANG_ARCH_CONFIG='{path}': entry 12.0: field '{field}': a lone surrogate "
                            f"U+{surrogate:04X} at position {len(prefix)} of ")
    assert "accepted: a string of 1-1000 characters" in err


@given(prefix=st.text(alphabet="abc XYZ-()", max_size=8),
       bad=st.characters(whitelist_categories=("Cc", "Cf", "Zl", "Zp")))
@settings(max_examples=40, deadline=None)
def test_a_control_format_or_separator_character_in_a_name_is_refused(prefix, bad):
    with pytest.raises(TableError) as e:
        build_registry({"12.0": {"name": prefix + bad + "z"}}, override_source="o.json")
    import unicodedata
    assert str(e.value).startswith(f"o.json: entry 12.0: field 'name': a {unicodedata.category(bad)} character "
                                   f"U+{ord(bad):04X} at position {len(prefix)} of "), str(e.value)
    assert "accepted: a string of 1-1000 characters, no character of Unicode categories Cc, Cf, Cs, Zl, Zp" \
        in str(e.value)


def test_a_printable_name_with_any_script_is_kept():
    name = "Blackwell (RTX) — ラボ 😀 é"
    assert build_registry({"12.0": {"name": name}}).resolve("12.0").profile.name == name


INT_FIELDS = [
    ({"smem_per_sm_kib": "X"}, "smem_per_sm_kib"),
    ({"smem_per_block_kib": "X"}, "smem_per_block_kib"),
    ({"torch_symm_mem": {"8": "X"}}, "torch_symm_mem.8"),
    ({"symm_mem_multimem_world_sizes": ["X"]}, "symm_mem_multimem_world_sizes"),
    ({"custom_ar_v2_world_sizes": ["X"]}, "custom_ar_v2_world_sizes"),
]


@pytest.mark.parametrize("suffix", [".json", ".toml"])
@pytest.mark.parametrize("entry,field", INT_FIELDS)
@pytest.mark.parametrize("number", ["1e3", "2.0", "8e0", "1E1"])
def test_a_float_where_an_integer_is_required_is_refused(tmp_path, entry, field, number, suffix):
    # 1e3 and 2.0 are floats in JSON and TOML; they used to be read as the integers 1000 and 2.
    path = tmp_path / f"arch{suffix}"
    text = json.dumps({"12.0": entry})
    if suffix == ".toml":
        key, value = next(iter(entry.items()))
        value = ('{ "8" = X }' if isinstance(value, dict) else "[X]" if isinstance(value, list) else "X")
        text = f'[architectures."12.0"]\n{key} = {value}\n'
    path.write_text(text.replace('"X"', number).replace("X", number))
    with pytest.raises(TableError) as e:
        build_registry(load_override_file(str(path)), override_source=str(path))
    assert str(e.value).startswith(f"{path}: entry 12.0: field '{field}"), str(e.value)
    assert f"got {float(number)!r}" in str(e.value)


@pytest.mark.parametrize("low,high", [("13.0", "12.8"), ("12.9", "12.8"), ("12.8.1", "12")])
def test_min_cuda_above_max_cuda_is_refused_naming_both(low, high):
    with pytest.raises(TableError) as e:
        build_registry({"12.0": {"min_cuda": low, "max_cuda": high}}, override_source="o.json")
    lo, hi = low.split("."), (high.split(".") + ["0"])
    assert str(e.value) == (f"o.json: entry 12.0: field 'min_cuda' {lo[0]}.{lo[1]} is above field 'max_cuda' "
                            f"{hi[0]}.{hi[1]}; accepted: min_cuda <= max_cuda")


def test_min_cuda_equal_to_max_cuda_is_accepted():
    profile = build_registry({"12.0": {"min_cuda": "13.0", "max_cuda": "13.0"}}).resolve("12.0").profile
    assert profile.min_cuda == profile.max_cuda == (13, 0)


from sglang_arch.arch.profile import _KNOWN_FIELDS  # noqa: E402


@pytest.mark.parametrize("field", sorted(_KNOWN_FIELDS))
def test_null_is_a_value_only_where_the_schema_gives_it_one(field):
    """`{"12.0": {"features": null}}` was read as
    no features (and `torch_symm_mem: null` as no sizes); only `inherits` (none),
    `max_cuda` (no bound) and `custom_ar_v2_table` (SGLang's default) give null a meaning."""
    from sglang_arch.arch.profile import TableError
    from sglang_arch.arch.registry import NULLABLE_FIELDS, build_registry

    if field in NULLABLE_FIELDS:
        build_registry({"12.0": {field: None}}, override_source="o.json")
    else:
        with pytest.raises(TableError, match=f"o.json: entry 12.0: field '{field}' is null; accepted: a value"):
            build_registry({"12.0": {field: None}}, override_source="o.json")


@pytest.mark.parametrize("field, value", [("attention_mha", ["\x1b[2Jfa3"]), ("examples", ["\x1b[31mRED"]),
                                          ("sources", ["line\nbreak"]), ("attention_mla", ["flash\u202emla"])])
def test_every_string_field_refuses_what_would_drive_the_terminal(field, value):
    """Only `name` refused control characters once;
    `explain` printed an attention list's ESC sequence raw, `matrix` an example's."""
    from sglang_arch.arch.profile import TableError
    from sglang_arch.arch.registry import build_registry

    with pytest.raises(TableError, match=f"field '{field}'.* at position .*; accepted: a string of 1-"):
        build_registry({"12.0": {field: value}}, override_source="o.json")


# --- integers past Python's digit limit, blank names, unknown lead fields ------------------

@pytest.mark.parametrize("suffix,text", [
    (".toml", '[architectures."12.0"]\nsmem_per_sm_kib = ' + "9" * 5000 + "\n"),
    (".toml", '[architectures."12.0"]\ntorch_symm_mem = { "2" = 64, "4" = ' + "9_" * 4400 + "9 }\n"),
    (".toml", '["12.0"]\nsymm_mem_multimem_world_sizes = [4,\n  ' + "1" * 4400 + "]\n"),
    (".json", '{"12.0": {"smem_per_sm_kib": ' + "9" * 5000 + "}}"),
    (".json", '{"12.0": {"custom_ar_v2_world_sizes": [2, -' + "9" * 5000 + "]}}"),
])
def test_an_integer_of_thousands_of_digits_names_the_file_and_the_field(tmp_path, monkeypatch, capsys, suffix, text):
    """Before: Python's integer-conversion limit (4,300 digits) escaped as 'Exceeds the limit
    ... for integer string conversion', naming neither the file nor the field."""
    path = tmp_path / f"arch{suffix}"
    path.write_text(text)
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    err = one_line_2(capsys, "show", "--capability", "12.0")
    assert f"SGLANG_ARCH_CONFIG='{path}': entry 12.0: field '" in err
    assert "got <an integer of " in err and " digits>" in err
    assert "set_int_max_str_digits" not in err


def test_a_long_digit_run_inside_a_string_is_left_alone(tmp_path):
    path = tmp_path / "arch.toml"
    path.write_text('["12.0"]\nsources = ["' + "1" * 900 + '"]\n')
    assert load_override_file(str(path))["12.0"]["sources"] == ["1" * 900]


@pytest.mark.parametrize("name", [" ", "   ", "\u3000", " \u00a0 "])
def test_a_blank_name_is_refused(tmp_path, monkeypatch, capsys, name):
    """Before: a name of blanks was accepted and every report showed an empty tier name."""
    path = tmp_path / "arch.json"
    path.write_text(json.dumps({"12.7": {"inherits": "12.0", "name": name}}))
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    err = one_line_2(capsys, "explain", "12.7", expect="entry 12.7: field 'name'")
    assert "accepted: a string of 1-1000 characters with at least one that is not white space" in err


@pytest.mark.parametrize("lead", [["bogus"], ["name", "smem_per_sm_kb"], ["lead"], ["sources"], ["inherits"]])
def test_lead_names_only_fields_of_the_entry(tmp_path, monkeypatch, capsys, lead):
    """Before: ``lead = ["bogus"]`` was accepted; lead marks fields whose value has one source."""
    path = tmp_path / "arch.json"
    path.write_text(json.dumps({"12.0": {"lead": lead}}))
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    err = one_line_2(capsys, "show", "--capability", "12.0", expect="entry 12.0: field 'lead': unknown field(s)")
    assert "accepted: names of this entry's fields (" in err and "smem_per_sm_kib" in err


def test_lead_of_real_fields_is_accepted():
    registry = build_registry(overrides={"12.0": {"lead": ["name", "torch_symm_mem"]}})
    assert registry.resolve(parse_capability("12.0")).profile.lead == ("name", "torch_symm_mem")


# --- names and output streams --------------------------------------------------------------

@pytest.mark.parametrize("src", ["", " ", "\t"])
def test_upstream_refuses_an_empty_src_instead_of_the_current_folder(tmp_path, monkeypatch, capsys, src):
    (tmp_path / "srt").mkdir()
    (tmp_path / "__init__.py").write_text("")
    monkeypatch.chdir(tmp_path)  # an installed package's layout: '' would have been this folder
    one_line_2(capsys, "upstream", src, expect="SRC: an empty path")
    assert sorted(os.listdir(tmp_path)) == ["__init__.py", "srt"] and os.listdir(tmp_path / "srt") == []


def test_explain_reads_the_cuda_version_show_and_the_plugin_read(monkeypatch, capsys):
    """``SGLANG_ARCH_CUDA`` is one setting for every reader: explain's --json says so, and
    ``--cuda`` still overrides it for the one command."""
    monkeypatch.setenv("SGLANG_ARCH_CUDA", "12.4")
    code, out, _ = run(capsys, "explain", "9.0", "--json")
    assert code == 0
    read = json.loads(out)
    code, out, _ = run(capsys, "explain", "9.0", "--json", "--cuda", "12.4")
    assert read == json.loads(out)
    code, out, _ = run(capsys, "explain", "9.0", "--json", "--cuda", "13.0")
    assert read != json.loads(out)
    monkeypatch.setenv("SGLANG_ARCH_CUDA", "nope")
    one_line_2(capsys, "explain", "9.0", expect="SGLANG_ARCH_CUDA")


def test_output_a_narrow_encoding_cannot_hold_is_escaped_not_a_codec_error(tmp_path, monkeypatch):
    """Under ``PYTHONIOENCODING=ascii`` a path with a non-ASCII name is printed escaped, and
    the command's status is its own (the file was written: it says so)."""
    import subprocess

    out = tmp_path / "r\u00e9sultat.toml"
    env = dict(os.environ, PYTHONIOENCODING="ascii", SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="2")
    proc = subprocess.run([sys.executable, "-m", "sglang_arch", "tune", "fusion", "--world-size", "2", "--without",
                           "1,2,3", "--with", "4,5,6", "--out", str(out)], capture_output=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert b"r\\xe9sultat.toml" in proc.stdout and b"codec" not in proc.stderr
    assert out.exists()
