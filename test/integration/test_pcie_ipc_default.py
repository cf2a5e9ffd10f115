"""SGLang's PCIe-IPC all-reduce, on by default where the evidence ledger measured it.

SGLang 0.5.23 builds its FlashInfer PCIe-IPC all-reduce for a group only where
``pcie_ipc_ar.eligible_group`` says so: ``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE`` set, the ``tp``
group, not deterministic.  The plugin's hook answers on for SM 12.0 at TP 8 on one node over
PCIe with peer-to-peer access (ledger entry ``pcie-ipc-tp8-sm120``: TPOT 21.14 -> 13.62 ms),
keeps every other condition of SGLang's, and leaves every other machine, and any value the
user set, to SGLang's own function.  Both are called here: SGLang's original and the hook over it.
"""

import importlib.util
import logging

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from sglang_arch.arch import runtime  # noqa: E402
from helpers import upstream_and_hook  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402

MODULE = "sglang.srt.distributed.device_communicators.pcie_ipc_ar"
PATH = f"{MODULE}.eligible_group"
VARIABLE = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"


@pytest.fixture(scope="module")
def sides():
    return upstream_and_hook(PATH)


@pytest.fixture
def machine(monkeypatch):
    """``machine(cap, topology, gpus)``: this process as a GPU of that node for the plugin."""
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.setattr(glue, "_warned", set())

    def simulate(cap, topology="pcie-p2p", gpus=8):
        ctx = runtime.machine(capability=cap, topology=topology, gpu_count=gpus, cuda=(13, 0))
        monkeypatch.setattr(glue, "current", lambda: ctx)

    yield simulate
    runtime.reset()


def both(sides, **kwargs):
    own, hook = sides
    return own(**kwargs), hook(own, **kwargs)


TP8 = dict(group_name="tp", world_size=8, deterministic=False)


def test_eligible_group_on_by_default_at_tp8_on_sm120(sides, machine, caplog):
    machine("12.0")
    with caplog.at_level(logging.INFO):
        assert both(sides, **TP8) == (False, True)
    assert "PCIe-IPC all-reduce on by default" in caplog.text and "decode-sized workspace" in caplog.text
    # SGLang's other conditions stand
    assert both(sides, group_name="attn_tp", world_size=8, deterministic=False) == (False, False)
    assert both(sides, group_name="tp", world_size=1, deterministic=False) == (False, False)
    with caplog.at_level(logging.WARNING):
        assert both(sides, group_name="tp", world_size=8, deterministic=True) == (False, False)
    assert "Deterministic inference is on" in caplog.text


@pytest.mark.parametrize("ws", [2, 4])
def test_unmeasured_tp_sizes_keep_sglangs_opt_in(sides, machine, ws):
    machine("12.0")
    assert both(sides, group_name="tp", world_size=ws, deterministic=False) == (False, False)


@pytest.mark.parametrize("cap, topology, gpus", [
    ("12.0", "pcie", 8),  # no peer-to-peer access
    ("12.0", "pcie-p2p", 4),  # a TP 8 group larger than the node spans nodes
    ("9.0", "nvswitch", 8),  # NVLink: custom all-reduce's node, nothing measured there
    ("10.0", "nvswitch", 8),
    ("13.0", "pcie-p2p", 8),  # an unknown GPU: a fallback never turns a path on
    ("12.1", "pcie-p2p", 8),  # measured on SM120 boards, not GB10
])
def test_everywhere_else_stock_sglangs_answer(sides, machine, cap, topology, gpus):
    machine(cap, topology, gpus)
    assert both(sides, **TP8) == (False, False)


@pytest.mark.parametrize("value, expected", [("1", True), ("0", False), ("false", False)])
def test_the_users_variable_wins_either_way(sides, machine, monkeypatch, value, expected):
    machine("12.0")
    monkeypatch.setenv(VARIABLE, value)
    assert both(sides, **TP8) == (expected, expected)


def test_without_a_gpu_sglang_decides(sides, monkeypatch):
    no_gpu = runtime.MachineContext(runtime.Node((), runtime.TOPOLOGIES["single"], "none"), None, (13, 0), {})
    monkeypatch.setattr(glue, "current", lambda: no_gpu)
    monkeypatch.setenv(VARIABLE, "1")
    assert both(sides, **TP8) == (True, True)  # SGLang's own rule answered
    monkeypatch.delenv(VARIABLE)
    assert both(sides, **TP8) == (False, False)
