"""The start-up line states this launch: its TP size (not the node's GPU count) and only the
decisions in effect for it.  Read in SGLang's own launcher process (its command line) and
in a process that holds SGLang's server arguments (as a scheduler does)."""

import importlib.util
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

from sglang_arch.arch import TOPOLOGIES, resolve
from sglang_arch.arch.decisions import decide
from sglang_arch.arch.policies.attention import ModelTraits
from sglang_arch.integrations.sglang import startup

HAS_SGLANG = importlib.util.find_spec("sglang") is not None


def line_for(argv, gpus=8, topology="pcie-p2p", cap="12.0"):
    launch = startup.launch_from_argv(argv)
    d = decide(resolve(cap), TOPOLOGIES[topology], launch.tp, launch.nnodes, ModelTraits(cuda=(13, 0)))
    return startup.line(f"{gpus}x sm_{cap.replace('.', '')} {topology}", d, frozenset(), 0, launch)


@pytest.mark.parametrize("argv, tp, symm", [
    (["--model-path", "m", "--tp", "4"], 4, "symm-mem off (no --enable-torch-symm-mem)"),
    (["--model-path", "m", "--tp-size=4", "--enable-torch-symm-mem"], 4, "symm-mem 64 MiB multimem"),
    (["--model-path", "m", "--tensor-parallel-size", "8", "--enable-torch-symm-mem"], 8, "symm-mem 128 MiB multimem"),
    (["--model-path", "m", "--enable-torch-symm-mem"], 1, "symm-mem no"),
])
def test_the_line_states_the_launchs_tp_size_and_the_symm_mem_it_uses(argv, tp, symm):
    text = line_for(argv, topology="nvswitch", cap="9.0")  # 8x H100: SGLang's sizes, multimem
    assert text.startswith(f"sglang-arch: tp {tp} on 8x sm_90 nvswitch -> tier 9.0 [exact]; {symm};"), text
    assert len(text) <= startup.MAX_LENGTH


@pytest.mark.parametrize("argv, tp, pcie_ipc", [
    (["--model-path", "m", "--tp", "8"], 8, True),  # measured at TP 8 (ledger: pcie-ipc-tp8-sm120)
    (["--model-path", "m", "--tp", "4", "--enable-torch-symm-mem"], 4, False),
])
def test_on_8x_rtx_pro_6000_the_line_names_pcie_ipc_where_the_plugin_turns_it_on(argv, tp, pcie_ipc):
    text = line_for(argv)
    head = f"sglang-arch: tp {tp} on 8x sm_120 pcie-p2p -> tier 12.0 [exact]; symm-mem no; "
    assert text.startswith(head + ("pcie-ipc on (decode-sized); " if pcie_ipc else "custom-AR ")), text


def test_flags_that_turn_a_decision_off_or_name_the_backend_are_shown():
    text = line_for(["--model-path", "m", "--tp", "2", "--disable-custom-all-reduce"])
    assert "custom-AR off (--disable-custom-all-reduce)" in text
    text = line_for(["--model-path", "m", "--tp", "2", "--enforce-disable-flashinfer-allreduce-fusion",
                     "--enable-torch-symm-mem"])
    assert "fusion off (--enforce-disable-flashinfer-allreduce-fusion)" in text
    text = line_for(["--model-path", "m", "--tp", "2", "--attention-backend", "triton"])
    assert text.endswith("attn triton (--attention-backend)") and len(text) <= startup.MAX_LENGTH
    # with every flag at once and decisions off, the flags become the word "flag", nothing is cut
    many = ["--model-path", "m", "--tp", "2", "--disable-custom-all-reduce", "--enforce-disable-flashinfer-allreduce-fusion",
            "--attention-backend", "triton"]
    launch = startup.launch_from_argv(many)
    d = decide(resolve("12.0"), TOPOLOGIES["pcie-p2p"], 2, 1, ModelTraits(cuda=(13, 0)))
    text = startup.line("8x sm_120+sm_121 pcie-p2p", d, frozenset({"moe", "gemm"}), 12, launch)
    assert len(text) <= startup.MAX_LENGTH and not text.endswith("...")
    assert "custom-AR off (flag); fusion off (flag); attn triton (flag)" in text


def test_without_a_launch_the_node_stands_in_and_the_flag_is_named():
    d = decide(resolve("9.0"), TOPOLOGIES["nvswitch"], 8, 1, ModelTraits(cuda=(13, 0)))
    text = startup.line("8x sm_90 nvswitch", d)
    assert text.startswith("sglang-arch: 8x sm_90 nvswitch -> tier 9.0 [exact]; "
                           "symm-mem 128 MiB multimem with --enable-torch-symm-mem;")


def test_the_launch_is_read_from_server_args_a_caller_holds_before_the_command_line():
    class Code:
        co_name = "run_scheduler_process"

    held = SimpleNamespace(tp_size=2, nnodes=1, enable_torch_symm_mem=True, disable_custom_all_reduce=False,
                           enforce_disable_flashinfer_allreduce_fusion=False, attention_backend=None)
    frame = SimpleNamespace(f_code=Code(), f_locals={"server_args": held})
    launch = startup.this_launch([frame], argv=["--model-path", "m", "--tp", "8"])
    assert (launch.tp, launch.symm_mem_flag, launch.source) == (2, True, "server arguments")
    engine = SimpleNamespace(f_code=SimpleNamespace(co_name="__init__"),
                             f_locals={"kwargs": {"model_path": "m", "tp_size": 4}})
    assert startup.this_launch([engine], argv=[]).tp == 4
    assert startup.this_launch([], argv=["--model-path", "m", "--tp", "8"]).tp == 8
    assert startup.this_launch([], argv=["--help"]) is None  # no launch: the node stands in
    assert startup.launch_from_argv(["--tp", "x"]) is None


LAUNCHER = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s|%(message)s")
    sys.argv = ["sglang.launch_server"] + sys.argv[1:]
    from sglang.srt.plugins import load_plugins
    load_plugins()
""")


@pytest.mark.skipif(not HAS_SGLANG, reason="needs the installed sglang 0.5.23")
@pytest.mark.parametrize("flags, symm", [([], "symm-mem off (no --enable-torch-symm-mem)"),
                                         (["--enable-torch-symm-mem"], "symm-mem 64 MiB multimem")])
def test_sglangs_launcher_logs_the_launchs_line(flags, symm):
    from helpers import clean_env

    argv = ["--model-path", "some/model", "--tp", "4", *flags]
    out = subprocess.run([sys.executable, "-c", LAUNCHER, *argv], capture_output=True, text=True, timeout=600,
                         env=clean_env(SGLANG_ARCH_CAPABILITY="9.0", SGLANG_ARCH_GPU_COUNT="8",
                                       SGLANG_ARCH_TOPOLOGY="nvswitch"))
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line.split("|", 1)[1] for line in out.stderr.splitlines() if line.startswith("sglang_arch|sglang-arch: tp")]
    assert len(lines) == 1, out.stderr[-2000:]
    assert lines[0].startswith(f"sglang-arch: tp 4 on 8x sm_90 nvswitch -> tier 9.0 [exact]; {symm};")
