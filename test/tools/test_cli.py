import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_arch.cli import main, matrix_rows, render_matrix_markdown

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_reference_machine_json(capsys):
    code, out, _ = run(capsys, "explain", "12.0", "--world-size", "8", "--topology", "pcie-p2p", "--json")
    assert code == 0
    d = json.loads(out)
    assert d["requested"] == d["resolved"] == "12.0" and d["match"] == "exact"
    assert d["collectives"]["torch_symm_mem"]["enabled"] is False  # nothing measured it over PCIe
    assert d["collectives"]["pcie_ipc"]["enabled"] is True and d["collectives"]["pcie_ipc"]["evidence"] == [
        "pcie-ipc-tp8-sm120"]
    assert d["collectives"]["plan"]["default"]["decode"] == "PCIe-IPC"
    assert d["stock_sglang"]["pcie_ipc"]["value"] == "off"
    # fusion on SM12x PCIe only where a tuned override from the node says it won
    fusion = d["collectives"]["allreduce_fusion"]
    assert (fusion["enabled"], fusion["backend"]) == (False, None) and "tune fusion" in fusion["reason"]


def test_explain_fallbacks(capsys):
    d = json.loads(run(capsys, "explain", "13.0", "--json")[1])
    assert (d["resolved"], d["match"]) == ("12.1", "generation")
    assert d["features"]["tcgen05"] is False and d["features"]["wgmma"] is False
    d = json.loads(run(capsys, "explain", "9.5", "--json")[1])
    assert (d["resolved"], d["match"], d["features"]["wgmma"]) == ("9.0", "family", False)


def test_explain_human_table(capsys):
    code, out, _ = run(capsys, "explain", "sm_90a", "--tp", "8", "--topology", "nvswitch")
    assert code == 0
    assert "tier 9.0 Hopper [exact]" in out
    assert "128 MiB multimem" in out
    lines = out.splitlines()
    mha = next(i for i, line in enumerate(lines) if line.startswith("attention MHA"))
    assert lines[mha].split()[2:] == ["prefill", "fa3", "prefill", "fa3"]
    assert lines[mha + 1].split() == ["decode", "fa3", "decode", "fa3"]


@pytest.mark.parametrize("argv,message", [
    (["explain", "12.x"], "invalid compute capability '12.x'; accepted:"),
    (["explain", "9.0", "--world-size", "0"], "invalid value '0'; accepted: an integer >= 1"),
    (["explain", "9.0", "--world-size=-1"], "invalid value '-1'; accepted: an integer >= 1"),
    (["explain", "9.0", "--topology", "ring"], "invalid topology 'ring'; accepted: single, nvswitch, nvlink, pcie-p2p, pcie"),
    (["explain", "13.0", "--strict"], "strict mode: 13.0 is not a known tier"),
    (["explain", "9.0", "--cuda", "twelve"], "invalid version 'twelve'"),
    (["explain"], "the following arguments are required: CAP"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["matrix", "--format", "html"], "invalid choice: 'html'"),
    (["show", "--capability", "banana"], "invalid compute capability 'banana'"),
    (["gencode", "--capability", "12.0", "--cuda", "12.4"], "sm_120 needs CUDA >= 12.8; toolkit is 12.4"),
    (["gencode", "--capability", "13.0", "--cuda", "13.0"], "no compile target is known for 13.0"),
    (["gencode", "--capability", "7.0", "--cuda", "13.0"], "sm_70 offline compilation was removed after CUDA 12.9"),
])
def test_bad_input_exits_2_with_one_line(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_gencode_capability_count_is_bounded(capsys):
    from sglang_arch.arch.validate import MAX_ITEMS

    # One past the bound (the reported 20,000 repetitions take argparse itself seconds to read).
    code, _, err = run(capsys, "gencode", "--cuda", "12.9", *["--capability", "9.0"] * (MAX_ITEMS + 1))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"--capability is given {MAX_ITEMS + 1} times; accepted: at most {MAX_ITEMS} capabilities" in err
    code, out, _ = run(capsys, "gencode", "--cuda", "12.9", *["--capability", "9.0"] * MAX_ITEMS)
    assert code == 0 and "sm_90a" in out


def test_bad_environment_is_one_line_too(capsys, monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", "/nonexistent/arch.json")
    code, _, err = run(capsys, "explain", "9.0")
    assert code == 2 and "cannot read override file" in err and len(err.strip().splitlines()) == 1


def test_show_without_a_gpu_says_so(capsys, monkeypatch):
    import importlib

    detect_module = importlib.import_module("sglang_arch.arch.detect")
    monkeypatch.setattr(detect_module, "_nvml_node", lambda: None)
    monkeypatch.setattr(detect_module, "_torch_node", lambda: None)
    code, out, _ = run(capsys, "show")
    assert code == 0 and "No NVIDIA GPU found" in out


def test_show_simulated_machine(capsys):
    code, out, _ = run(capsys, "show", "--capability", "12.0", "--gpus", "8", "--topology", "pcie-p2p", "--json")
    d = json.loads(out)
    assert code == 0 and d["source"] == "simulated" and len(d["gpus"]) == 8
    assert d["node"]["collectives"]["pcie_ipc"]["enabled"] is True
    assert d["node"]["collectives"]["plan"]["default"]["prefill"] == "NCCL"


@pytest.mark.parametrize("value, disabled", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_show_says_when_the_kill_switch_keeps_the_plugin_out(capsys, monkeypatch, value, disabled):
    """Show 'prints what the plugin decides', yet
    with SGLANG_ARCH_DISABLE=1 it printed the decisions without a word."""
    monkeypatch.setenv("SGLANG_ARCH_DISABLE", value)
    code, out, _ = run(capsys, "show", "--capability", "12.0")
    said = "The plugin is not loaded here: SGLANG_ARCH_DISABLE turns every decision off"
    assert code == 0 and (said in " ".join(out.split())) == disabled
    code, out, _ = run(capsys, "show", "--capability", "12.0", "--json")
    assert code == 0 and json.loads(out)["plugin_disabled"] is disabled


def test_show_refuses_a_kill_switch_that_is_not_a_boolean(capsys, monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_DISABLE", "maybe")
    code, out, err = run(capsys, "show", "--capability", "12.0")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "SGLANG_ARCH_DISABLE='maybe': not a decision: maybe; accepted: 1 (all off), 0 (none)" in err
    assert "keeps the plugin out" in err


def test_gencode_formats(capsys):
    assert run(capsys, "gencode", "--capability", "9.0", "--capability", "12.0", "--cuda", "12.9")[1].strip() == (
        "-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_120a,code=sm_120a "
        "-gencode=arch=compute_120,code=compute_120")
    assert run(capsys, "gencode", "--capability", "9.0", "--capability", "12.0", "--cuda", "12.9",
               "--format", "torch")[1].strip() == "9.0a;12.0a;12.0+PTX"
    assert run(capsys, "gencode", "--capability", "10.0", "--cuda", "12.9", "--format", "cmake")[1].strip() == (
        "100a-real;100-virtual")
    assert run(capsys, "gencode", "--capability", "8.9", "--capability", "9.0", "--cuda", "12.9",
               "--format", "flashinfer")[1].strip() == "8.9 9.0a"
    assert run(capsys, "gencode", "--capability", "9.0", "--cuda", "12.9", "--no-specific",
               "--format", "torch")[1].strip() == "9.0+PTX"


def test_support_matrix_doc_matches_the_table():
    doc = (ROOT / "docs" / "support-matrix.md").read_text()
    assert doc == render_matrix_markdown(matrix_rows()), (
        "docs/support-matrix.md drifted from the table: regenerate with "
        "`sglang-arch matrix --format markdown > docs/support-matrix.md`")


def test_matrix_json_lists_every_known_tier(capsys):
    rows = json.loads(run(capsys, "matrix", "--format", "json")[1])
    assert [r["capability"] for r in rows][:3] == ["7.0", "7.5", "8.0"]
    assert any(r["capability"] == "12.0" and r["pcie_ipc_world_sizes"] == [8] for r in rows)
    assert any(r["capability"] == "9.0" and r["symm_mem_two_shot"] == {"2": 16 << 20} for r in rows)


def test_module_entry_point_and_help():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    out = subprocess.run([sys.executable, "-m", "sglang_arch", "--help"], capture_output=True, text=True, env=env)
    assert out.returncode == 0
    for command in ("show", "explain", "matrix", "gencode"):
        assert command in out.stdout
    out = subprocess.run([sys.executable, "-m", "sglang_arch", "explain", "--help"], capture_output=True, text=True, env=env)
    assert "--world-size" in out.stdout and "pcie-p2p" in out.stdout


# --- the CUDA version grammar and the node split -------------------------------

@pytest.mark.parametrize("cuda", ["12.08", "012.8", "12.8.01", "12.00", "00.0", "12.", "1.2.3.4", ""])
@pytest.mark.parametrize("command", [["explain", "12.0"], ["gencode", "--capability", "9.0"]])
def test_a_cuda_version_outside_the_grammar_is_refused(capsys, command, cuda):
    # '12.08' used to be read as 12.8: a version with a leading zero is not what anyone prints.
    code, out, err = run(capsys, *command, "--cuda", cuda)
    assert code == 2 and out == ""
    assert f"argument --cuda: invalid version {cuda!r}; accepted: 'M.m' such as '12.8' or '13.0', or 'M' or " \
           f"'M.m.p' (ASCII digits without a leading zero;" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("cuda,shown", [("12.4", "12.4"), ("12", "12.0"), ("12.4.1", "12.4"), (" 12.0 ", "12.0")])
def test_a_cuda_version_of_the_grammar_is_used(capsys, cuda, shown):
    code, out, err = run(capsys, "gencode", "--capability", "12.0", "--cuda", cuda)
    assert code == 2 and f"sm_120 needs CUDA >= 12.8; toolkit is {shown}" in err
    assert run(capsys, "gencode", "--capability", "12.0", "--cuda", "12.10")[0] == 0


@given(nnodes=st.integers(2, 16), world=st.integers(2, 72))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_world_size_not_divisible_by_the_node_count_is_refused(capsys, nnodes, world):
    # --world-size 8 --nnodes 3 used to be accepted (3, 3 and 2 GPUs: no such deployment).
    code, out, err = run(capsys, "explain", "12.0", "--world-size", str(world), "--nnodes", str(nnodes))
    if world >= nnodes and world % nnodes:
        assert code == 2 and out == ""
        assert err.strip() == (f"sglang-arch: error: world size {world} is not divisible by the node count {nnodes}; "
                               f"accepted: the same number of GPUs on every node (world size a multiple of --nnodes)")
    elif world >= nnodes:
        assert code == 0, err


def test_the_markdown_matrix_keeps_one_cell_per_column_whatever_a_name_holds(tmp_path, capsys, monkeypatch):
    """An override named 'Evil | x | y' added
    columns to its row of `matrix --format markdown`."""
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"12.0": {"name": "Evil | x | y", "examples": ["a | c"]}}))
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    code, out, _ = run(capsys, "matrix", "--format", "markdown")
    head = next(line for line in out.splitlines() if line.startswith("| cc "))
    row = next(line for line in out.splitlines() if line.startswith("| 12.0 "))
    cells = [c for c in re.split(r"(?<!\\)\|", row)[1:-1]]
    assert code == 0 and len(cells) == head.count("|") - 1 and "Evil \\| x \\| y" in row

