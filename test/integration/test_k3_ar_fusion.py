"""Kimi K3's fused all-reduce auto-probe: the plugin's hook against SGLang 0.5.23's own ``_get_state``.

``srt/layers/communication/k3_ar_fusion.py:_get_state``, with ``SGLANG_K3_AR_FUSION`` unset,
auto-enables the fusion only where ``get_device_sm()`` (imported from ``utils.common`` inside
its body) is 100 or 103, then only without symm-mem or an EP all-to-all and with
CustomAllReduceV2 multicast.  Driven here without a GPU: the device is simulated through
SGLang's own probe, every other requirement is met (TP 8, CustomAllReduceV2 with multicast),
so only the SM band decides.  SGLang's own function and the plugin's hook (over the same
original) enable it, and log why not, alike on every known tier; on unknown GPUs the tier's
band decides where the fusion's kernels have a build for the device.  Set explicitly, the
variable decides and the probe is not read.
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

MODULE = "sglang.srt.layers.communication.k3_ar_fusion"
PATH = f"{MODULE}._get_state"
UNKNOWN = ("9.5", "10.5", "11.5", "12.3", "13.0")


@pytest.fixture(scope="module")
def sides():
    import inspect

    own, hook = upstream_and_hook(PATH)
    own = inspect.unwrap(own)  # past SGLang's cache_once: each call decides afresh
    source = inspect.getsource(own)  # the hook's premise: the probe is imported in the body and read
    assert "from sglang.srt.utils.common import get_device_sm" in source and "get_device_sm()" in source
    return own, hook


@pytest.fixture
def device(monkeypatch):
    """Simulate a GPU with every other requirement met: ``device(cap)``."""
    import sglang.srt.runtime_context as rc
    from sglang.kernels.ops.communication import all_reduce_residual
    from sglang.srt.distributed.device_communicators.custom_all_reduce_v2 import CustomAllReduceV2
    from sglang.srt.utils import common

    monkeypatch.delenv("SGLANG_K3_AR_FUSION", raising=False)
    monkeypatch.setattr(glue, "_warned", set())

    class Comm(CustomAllReduceV2):  # the instance check passes; no workspace to open or close
        def __init__(self):
            self.disabled, self.has_multicast, self.obj, self.world_size = False, True, object(), 8

        def __del__(self):
            pass

    group = SimpleNamespace(ca_comm=Comm(), cpu_group=SimpleNamespace(group_name="tp"))
    exec_ = SimpleNamespace(comm=SimpleNamespace(enable_symm_mem=False), moe=SimpleNamespace(moe_a2a_backend="none"))
    monkeypatch.setattr(rc, "get_exec", lambda: exec_)
    monkeypatch.setattr(rc, "get_parallel", lambda: SimpleNamespace(tp_size=8, tp_group=group))
    monkeypatch.setattr(all_reduce_residual, "register_comm", lambda obj: None)
    yield simulator(monkeypatch, common)
    runtime.reset()


def _both(sides, caplog):
    """(enabled, SGLang's messages) for SGLang's own _get_state and for the hook over it."""
    from sglang.srt.utils import common

    own, hook = sides
    probe = common.get_device_sm
    out = []
    for call in (own, lambda: hook(own)):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=MODULE):
            state = call()
        assert common.get_device_sm is probe  # the scoped probe is put back
        out.append((state is not None, tuple(r.getMessage() for r in caplog.records if r.name == MODULE)))
    return tuple(out)


@pytest.mark.parametrize("tier", TIERS)
def test_on_every_known_tier_the_hook_is_upstreams_function(sides, device, caplog, tier):
    assert resolve(tier).match == "exact"
    device(tier)
    upstream, routed = _both(sides, caplog)
    assert routed == upstream
    assert upstream[0] == (tier in ("10.0", "10.3"))


@pytest.mark.parametrize("cap", UNKNOWN)
def test_on_unknown_gpus_the_tiers_band_decides_where_the_kernels_build(sides, device, caplog, cap):
    c = device(cap)
    (upstream, _), (routed, _) = _both(sides, caplog)
    assert not upstream  # SGLang's band names 100 and 103 only
    tier = resolve(cap).resolved
    assert routed == (tier.sm in (100, 103) and catalog.choice_runs("k3_ar_fusion", "fused", c).runs)


def test_a_10_5_takes_tier_10_3s_band(sides, device, caplog):
    device("10.5")
    (upstream, _), (routed, _) = _both(sides, caplog)
    assert (upstream, routed) == (False, True)


def test_set_explicitly_the_variable_decides(sides, device, caplog, monkeypatch):
    device("9.0")
    monkeypatch.setenv("SGLANG_K3_AR_FUSION", "1")
    upstream, routed = _both(sides, caplog)
    assert upstream == routed and upstream[0]  # tried anywhere: the probe is not read
    monkeypatch.setenv("SGLANG_K3_AR_FUSION", "0")
    device("10.0")
    upstream, routed = _both(sides, caplog)
    assert upstream == routed and not upstream[0]


def test_without_a_registry_answer_the_hook_is_sglangs(sides, device, caplog, monkeypatch):
    device("10.0")
    monkeypatch.setattr(glue, "current", lambda: SimpleNamespace(resolution=None))
    upstream, routed = _both(sides, caplog)
    assert routed == upstream and upstream[0]
