"""SGLang 0.5.23's own ``BeamModel._all_reduce_limits`` and ``_flashinfer_ar_band``
against the routed ones, in this process: upstream's is the original the plugin's hook
wraps, both reading the same simulated device (torch's capability stood in) and the same
stand-in parallel layout."""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from helpers import routed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KNOWN = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
_LIMITS = "sglang.srt.models.beam.BeamModel._all_reduce_limits"
_BAND = "sglang.srt.models.beam.BeamModel._flashinfer_ar_band"


@pytest.fixture(scope="module")
def beam():
    from sglang.srt.models import beam

    with routed(_LIMITS, _BAND):
        yield beam


class Hidden:
    """Stands in for a [rows, 5120] BF16 CUDA tensor."""

    def __init__(self, rows):
        import torch

        self.is_cuda, self.dtype, self.shape, self.device = True, torch.bfloat16, (rows, 5120), "cuda:0"

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return 0


@pytest.fixture
def device(monkeypatch, beam):
    import torch
    from sglang.srt import utils
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue
    from sglang_arch.integrations.sglang.glue import collectives as gc

    monkeypatch.setattr(gc, "_beam_decided", {})

    def use(cap, tp, ep=1, skip=False):
        major, minor = (int(x) for x in cap.split("."))
        ctx = runtime.machine(capability=cap, gpu_count=8, cuda=(13, 0))
        monkeypatch.setattr(glue, "current", lambda: ctx)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (major, minor))
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(utils, "is_flashinfer_available", lambda: True)
        parallel = SimpleNamespace(tp_size=tp, moe_ep_size=ep, moe_tp_size=tp)
        comm = SimpleNamespace(flashinfer_allreduce_fusion_backend=None, enforce_disable_flashinfer_allreduce_fusion=False)
        monkeypatch.setattr(beam, "get_parallel", lambda: parallel)
        monkeypatch.setattr(beam, "get_forward", lambda: SimpleNamespace(sp_active=False))
        monkeypatch.setattr(beam, "get_exec", lambda: SimpleNamespace(comm=comm))
        monkeypatch.setattr(beam, "_beam_owns_tp_boundaries", lambda: True)
        monkeypatch.setattr(beam, "should_skip_post_experts_all_reduce", lambda **kw: skip)

    return use


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.sampled_from(KNOWN), tp=st.sampled_from([1, 2, 4, 8, 16]), rows=st.sampled_from([1, 16, 32, 33, 64, 65]),
       fuse=st.booleans(), ep=st.sampled_from([1, 2]), skip=st.booleans())
def test_on_exact_tiers_the_limits_and_band_are_upstreams(beam, device, cap, tp, rows, fuse, ep, skip):
    device(cap, tp, ep, skip)
    model = SimpleNamespace(fuse_moe_all_reduce=fuse)
    routed = beam.BeamModel._all_reduce_limits
    assert routed(model, Hidden(rows)) == routed.__wrapped__(model, Hidden(rows))
    band = beam.BeamModel._flashinfer_ar_band
    assert band() == band.__wrapped__()
    assert beam._FLASHINFER_AR_TOKEN_BAND == {((10, 3), 4): (96, 640)}  # put back after the call


def test_an_unknown_blackwell_takes_its_tiers_cap_and_band(beam, device):
    device("10.5", 4)  # tier 10.3: upstream keys the TP 4 cap and the band on (10, 3) only
    model = SimpleNamespace(fuse_moe_all_reduce=True)
    routed = beam.BeamModel._all_reduce_limits
    assert (routed.__wrapped__(model, Hidden(48)), routed(model, Hidden(48))) == ((64, 64), None)
    assert routed(model, Hidden(32)) == (32, 32)
    band = beam.BeamModel._flashinfer_ar_band
    assert (band.__wrapped__(), band()) == (None, (96, 640))
