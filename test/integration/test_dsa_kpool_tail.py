"""The DSA K-pool tail backend: the plugin's hook against SGLang 0.5.23's own function.

``DeepseekSparseAttnBackendKPoolMixin._resolve_kpool_tail_backend``
(``srt/layers/attention/dsa/dsa_backend_kpool.py``) reads ``self.device_sm_major``, the
device's own major (``torch.cuda.get_device_capability()`` at the backend's init).  Here
upstream is called with the major of each known tier, and the plugin's AROUND hook (the
callable the plugin installs, over that same original) with the registry routed to the
tier.  They are equal except where upstream's pick has no build for the tier (D11:
trtllm-gen on 11.0 / 12.x), which takes tilelang.  Over every capability, where the hook
changes the phase's backend, the kernel catalog runs it on the device.
"""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.glue import attention as ga  # noqa: E402

PATH = "sglang.srt.layers.attention.dsa.dsa_backend_kpool.DeepseekSparseAttnBackendKPoolMixin._resolve_kpool_tail_backend"
IMPLS = ("flashmla_sparse", "flashmla_kv", "fa3", "tilelang", "trtllm", "flashinfer_sparse_mla",
         "flashmla_sparse_q8")


@pytest.fixture(scope="module")
def sides():
    return upstream_and_hook(PATH)


def _routed(monkeypatch, cap):
    monkeypatch.setattr(glue, "_warned", set())
    monkeypatch.setattr(ga, "_tail", {})
    ctx = runtime.machine(capability=cap)
    monkeypatch.setattr(glue, "current", lambda: ctx)


def _both(sides, major, kpool, indices, impl):
    own, hook = sides
    this = SimpleNamespace(device_sm_major=major, dsa_index_kpool=kpool)
    return own(this, indices, impl), hook(own, this, indices, impl)


@pytest.mark.parametrize("tier", TIERS)
def test_on_every_known_tier_the_hook_is_upstreams_function(sides, monkeypatch, tier):
    assert resolve(tier).match == "exact"
    _routed(monkeypatch, tier)
    cap = Capability(*map(int, tier.split(".")))
    for impl in IMPLS:
        for kpool in (1, 2, 4):
            for indices in (None, object()):
                upstream, routed = _both(sides, cap.major, kpool, indices, impl)
                runs = catalog.choice_runs("dsa", upstream, cap)
                if upstream != impl and runs is not None and not runs.runs:
                    assert tier in ("11.0", "12.0", "12.1") and routed == "tilelang", (impl, upstream, routed)
                else:
                    assert routed == upstream, (impl, kpool, upstream, routed)


@settings(max_examples=200, deadline=None)
@given(major=st.integers(0, 30), minor=st.integers(0, 9), impl=st.sampled_from(IMPLS))
def test_where_the_hook_moves_the_tail_the_backend_runs_on_the_device(sides, major, minor, impl):
    mp = pytest.MonkeyPatch()
    try:
        _routed(mp, f"{major}.{minor}")
        own, hook = sides
        this = SimpleNamespace(device_sm_major=major, dsa_index_kpool=2)
        routed = hook(own, this, object(), impl)
    finally:
        mp.undo()
        runtime.reset()
    if routed != impl:
        assert impl == "flashmla_sparse" and routed in ("trtllm", "fa3", "tilelang")
        assert catalog.choice_runs("dsa", routed, Capability(major, minor)).runs, routed
