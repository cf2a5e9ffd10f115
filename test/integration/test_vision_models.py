"""SGLang 0.5.23's own model vision selections against the routed ones (Gemma 4's ViT,
Kimi K3's MoonViT), in this process: upstream's is the original the plugin's hook wraps,
both reading the same simulated device (SGLang's probes stood in on the model modules and
on torch.cuda, the registry's machine on the glue)."""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from helpers import routed, routed_target  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KNOWN = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
_GEMMA = "sglang.srt.models.gemma4_vision.Gemma4VisionAttention._select_backend"
_KIMI = "sglang.srt.models.kimi_k3_vl._resolve_mm_attention_backend"


@pytest.fixture(scope="module")
def models():
    from sglang.srt.models import gemma4_vision, kimi_k3_vl

    with routed(_GEMMA, _KIMI):
        yield gemma4_vision, kimi_k3_vl


@pytest.fixture
def device(monkeypatch, models):
    """``use(cap)``: the GPU both sides see."""
    import torch
    from sglang.srt import runtime_context
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue

    gemma4_vision, _ = models
    mm = SimpleNamespace(mm_attention_backend=None)

    def use(cap):
        major, minor = (int(x) for x in cap.split("."))
        ctx = runtime.machine(capability=cap, gpu_count=8, cuda=(13, 0))
        monkeypatch.setattr(glue, "current", lambda: ctx)
        platform = SimpleNamespace(is_cuda=True, is_hip=False, is_blackwell=major in (10, 11, 12))
        for mod in (runtime_context, gemma4_vision):
            monkeypatch.setattr(mod, "get_platform", lambda: platform)
            monkeypatch.setattr(mod, "get_mm", lambda: mm)
        monkeypatch.setattr(gemma4_vision, "is_cuda", lambda: True)
        monkeypatch.setattr(gemma4_vision, "get_device_capability", lambda *a: (major, minor))
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (major, minor))

    return use


@pytest.mark.parametrize("cap", KNOWN)
def test_gemma4_vision_backend_is_upstreams_on_exact_tiers(models, device, cap):
    gemma4_vision, _ = models
    device(cap)
    cls = gemma4_vision.Gemma4VisionAttention
    assert cls._select_backend() == cls._select_backend.__wrapped__()
    # SGLang calls it on the instance (self._select_backend()): still a static method once routed.
    assert object.__new__(cls)._select_backend() == cls._select_backend.__wrapped__()
    assert getattr(cls._select_backend, "__sglang_arch_target__", None) == _GEMMA


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.sampled_from(KNOWN), s=st.sampled_from([1, 64, 1536, 1537, 4096]),
       t=st.sampled_from([1, 1953, 1954, 100_000]), fa4=st.booleans())
def test_kimi_k3_vision_backend_is_upstreams_on_exact_tiers(models, device, cap, s, t, fa4):
    _, kimi = models
    device(cap)
    cuda = SimpleNamespace(type="cuda")
    kw = dict(max_seqlen=s, total_tokens=t, device=cuda, fa4_available=fa4)
    routed = kimi._resolve_mm_attention_backend
    assert routed("auto", **kw) == routed.__wrapped__("auto", **kw)
    assert routed("sdpa", **kw) == "sdpa"  # a configured backend is SGLang's


def test_on_unknown_gpus_the_tiers_rule_with_a_runnable_kernel(models, device):
    gemma4_vision, kimi = models
    device("9.5")  # upstream: fa3 (major 9), which has no 9.5 build
    cls = gemma4_vision.Gemma4VisionAttention
    assert (cls._select_backend.__wrapped__(), cls._select_backend()) == ("fa3", "triton_attn")
    device("10.5")  # tier 10.3's split: long work would be FA4, which has no 10.5 build
    kw = dict(max_seqlen=4096, total_tokens=4096, device=SimpleNamespace(type="cuda"), fa4_available=True)
    assert (kimi._resolve_mm_attention_backend.__wrapped__("auto", **kw),
            kimi._resolve_mm_attention_backend("auto", **kw)) == ("sdpa", "triton_attn")


_MIMO = "sglang.srt.models.mimo_audio.AudioEncoderMixin.build_audio_encoder"


@pytest.mark.parametrize("cap", KNOWN)
@pytest.mark.parametrize("cuda", ["12.2", "12.3", "13.0"])
def test_mimo_local_attention_is_sglangs_is_sm90_supported_on_exact_tiers(monkeypatch, cap, cuda):
    """SGLang's own probe rule (the partial ``is_sm90_supported`` wraps) against the
    registry's answer the routed ``build_audio_encoder`` sees."""
    import inspect

    import torch
    from sglang.srt.utils import common
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue
    from sglang_arch.integrations.sglang.glue import attention as ga

    major, minor = (int(x) for x in cap.split("."))
    monkeypatch.setattr(common, "is_cuda", lambda: True)
    monkeypatch.setattr(common, "get_device_sm", lambda: major * 10 + minor)
    monkeypatch.setattr(torch.version, "cuda", cuda)
    theirs = inspect.unwrap(common.is_sm90_supported)()  # the partial: SGLang's rule, uncached
    ctx = runtime.machine(capability=cap, gpu_count=8, cuda=tuple(int(x) for x in cuda.split(".")))
    monkeypatch.setattr(glue, "current", lambda: ctx)
    monkeypatch.setattr(ga, "_on_cuda", lambda: True)
    assert ga.mimo_local_attention() is theirs


def test_routed_build_audio_encoder_reads_the_registrys_answer(monkeypatch):
    from sglang.srt.models import mimo_audio
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue, routing
    from sglang_arch.integrations.sglang.glue import attention as ga

    target = routed_target(_MIMO)
    was_routed = routing.is_routed(target)
    if was_routed:
        routing.unroute(target)

    def build_audio_encoder(self, config):  # stands in for SGLang's body: what its condition reads
        return mimo_audio.is_sm90_supported()

    build_audio_encoder.__module__ = mimo_audio.__name__
    monkeypatch.setattr(mimo_audio.AudioEncoderMixin, "build_audio_encoder", build_audio_encoder)
    probe = mimo_audio.is_sm90_supported
    ctx = runtime.machine(capability="9.5", gpu_count=8, cuda=(13, 0))  # no probe of SGLang knows 9.5
    monkeypatch.setattr(glue, "current", lambda: ctx)
    monkeypatch.setattr(ga, "_on_cuda", lambda: True)
    try:
        routing.route(target)
        assert mimo_audio.AudioEncoderMixin.build_audio_encoder(None, None) is True
        assert mimo_audio.is_sm90_supported is probe
    finally:
        routing.unroute(target)
    if was_routed:
        monkeypatch.undo()
        routing.route(target)
