"""Kimi K3's SP collective band: the plugin's hook against SGLang 0.5.23's own ``_init_state``.

``srt/layers/communication/k3_sp_collective.py:_init_state`` enables the sequence-parallel
reduce-scatter / all-gather only where ``get_device_sm()`` (imported from ``utils.common``
inside its body) is 100 or 103, then only where a checked-in dispatch table names the
device.  Driven here without a GPU: the device is simulated through SGLang's own probe
(``utils.common.get_device_sm``), every other requirement is met (TP 8, DeepEP,
CustomAllReduceV2 with multicast, and GB300's checked-in table, whatever the GPU), so only
the SM band decides.  SGLang's own function and the plugin's hook (over the same original)
enable it, and log why not, alike on every known tier; on unknown GPUs the tier's band
decides where the collective's kernel has a build for the device.
"""

import importlib.util
import logging
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from helpers import TIERS, simulator, upstream_and_hook  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402

MODULE = "sglang.srt.layers.communication.k3_sp_collective"
PATH = f"{MODULE}._init_state"
UNKNOWN = ("9.5", "10.5", "11.5", "12.3", "13.0")
TABLED_DEVICE = "NVIDIA_GB300"  # a device SGLang has checked-in dispatch tables for (TP 4 / 8 / 16)


@pytest.fixture(scope="module")
def sides():
    import inspect

    own, hook = upstream_and_hook(PATH)
    # The hook's premise: the function imports SGLang's probe in its body and reads it.
    source = inspect.getsource(own)
    assert "from sglang.srt.utils.common import get_device_sm" in source and "get_device_sm()" in source
    return own, hook


@pytest.fixture
def device(monkeypatch):
    """Simulate a GPU with every other requirement met: ``device(cap)``."""
    import importlib

    from sglang.kernels.ops.communication import attn_res_collective, sp_collective
    from sglang.srt.distributed.device_communicators.custom_all_reduce_v2 import CustomAllReduceV2
    from sglang.srt.utils import common

    k3 = importlib.import_module(MODULE)
    monkeypatch.setenv("SGLANG_K3_SP_COLLECTIVE", "1")
    monkeypatch.setattr(glue, "_warned", set())
    class Comm(CustomAllReduceV2):  # the instance check passes; no workspace to open or close
        def __init__(self):
            self.disabled, self.has_multicast, self.obj = False, True, SimpleNamespace(world_size=8)

        def __del__(self):
            pass

    comm = Comm()
    group = SimpleNamespace(world_size=8, ca_comm=comm)
    monkeypatch.setattr(k3, "get_exec", lambda: SimpleNamespace(moe=SimpleNamespace(moe_a2a_backend="deepep")))
    monkeypatch.setattr(k3, "get_parallel", lambda: SimpleNamespace(attn_tp_group=group))
    monkeypatch.setattr(sp_collective, "_device_name", lambda device: TABLED_DEVICE)
    registered = []
    monkeypatch.setattr(sp_collective, "register_comm", registered.append)
    monkeypatch.setattr(attn_res_collective, "register_comm", registered.append)

    simulate = simulator(monkeypatch, common)
    def fresh():  # _init_state decides once per process
        monkeypatch.setattr(k3, "_STATE", None)
        monkeypatch.setattr(k3, "_INITIALIZED", False)

    simulate.fresh = fresh
    yield simulate
    runtime.reset()


def _both(sides, device, caplog):
    """(enabled, SGLang's message) for SGLang's own _init_state and for the hook over it."""
    from sglang.srt.utils import common

    own, hook = sides
    probe = common.get_device_sm
    out = []
    for call in (own, lambda: hook(own)):
        device.fresh()
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=MODULE):
            state = call()
        assert common.get_device_sm is probe  # the scoped probe is put back
        out.append((state is not None, tuple(r.getMessage() for r in caplog.records)))
    return tuple(out)


@pytest.mark.parametrize("tier", TIERS)
def test_on_every_known_tier_the_hook_is_upstreams_function(sides, device, caplog, tier):
    assert resolve(tier).match == "exact"
    device(tier)
    upstream, routed = _both(sides, device, caplog)
    assert routed == upstream
    assert upstream[0] == (tier in ("10.0", "10.3"))  # the band reached: enabled, else NCCL with SGLang's words


@pytest.mark.parametrize("cap", UNKNOWN)
def test_on_unknown_gpus_the_tiers_band_decides_where_the_kernel_builds(sides, device, caplog, cap):
    c = device(cap)
    (upstream, _), (routed, message) = _both(sides, device, caplog)
    assert not upstream  # SGLang's band names 100 and 103 only
    tier = resolve(cap).resolved
    assert routed == (tier.sm in (100, 103) and catalog.choice_runs("k3_sp_collective", "sp", c).runs)
    if not routed:  # SGLang's message names the device's own SM
        assert any(f"sm={c.major * 10 + c.minor}," in m for m in message), message


def test_a_10_5_takes_tier_10_3s_band(sides, device, caplog):
    """10.5 resolves to 10.3, and the collective's kernel is JIT-compiled for the device (SM90+):
    the band holds; SGLang's per-device table check still follows (passed here by GB300's)."""
    device("10.5")
    (upstream, _), (routed, _) = _both(sides, device, caplog)
    assert (upstream, routed) == (False, True)


def test_without_a_registry_answer_the_hook_is_sglangs(sides, device, caplog, monkeypatch):
    device("10.0")
    monkeypatch.setattr(glue, "current", lambda: SimpleNamespace(resolution=None))
    upstream, routed = _both(sides, device, caplog)
    assert routed == upstream and upstream[0]
