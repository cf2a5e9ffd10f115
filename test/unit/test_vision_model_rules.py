"""Model-specific vision attention (``policies/vision.py``): Gemma 4's ViT and Kimi K3's
MoonViT, as rules over capabilities.

Upstream's rules, written here as data from sglang 0.5.23: ``models/gemma4_vision.py``
``Gemma4VisionAttention._select_backend`` (CUDA: fa3 on major 9, triton_attn otherwise) and
``models/kimi_k3_vl.py`` ``_resolve_mm_attention_backend`` ("auto" on CUDA: sdpa unless the
capability is (10, 3); there fa4 when max_seqlen > 1536 or max_seqlen * total_tokens >=
3,000,000 and FA4 imports, else sdpa; triton_attn below).
"""

from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_arch.arch import catalog, resolve
from sglang_arch.arch.policies import vision

from .strategies import capabilities, cuda_versions, known_capabilities

TRITON_MAX, FA4_WORK = 1536, 3_000_000  # kimi_k3_vl.py _SM103_TRITON_MAX_SEQLEN, _SM103_FA4_MIN_ATTENTION_WORK
seqlens = st.sampled_from([1, 64, 1536, 1537, 4096]) | st.integers(1, 10_000)
tokens = st.sampled_from([1, 1953, 1954, 2000, 100_000]) | st.integers(1, 200_000)


def gemma4_upstream(cap):
    return "fa3" if cap.major == 9 else "triton_attn"


def kimi_upstream(cap, max_seqlen, total_tokens, fa4):
    if (cap.major, cap.minor) != (10, 3):
        return "sdpa"
    if max_seqlen > TRITON_MAX or max_seqlen * total_tokens >= FA4_WORK:
        return "fa4" if fa4 else "sdpa"
    return "triton_attn"


def runs(res, name, cuda):
    verdict = catalog.choice_runs("vision", name, res.identities, cuda)
    return verdict is None or verdict.runs


def kimi(res, s, t, fa4, cuda=(13, 0)):
    return vision.kimi_k3_backend(res, s, t, lambda: fa4, TRITON_MAX, FA4_WORK, cuda)


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, cuda=cuda_versions, s=seqlens, t=tokens, fa4=st.booleans())
def test_model_vision_backends_run_on_the_device(cap, cuda, s, t, fa4):
    res = resolve(cap)
    for d in (vision.gemma4_backend(res, cuda), kimi(res, s, t, fa4, cuda)):
        assert runs(res, d.backend, cuda), d
        assert all(not runs(res, name, cuda) for name, _ in d.dropped), d


@settings(max_examples=300, deadline=None)
@given(cap=known_capabilities, s=seqlens, t=tokens, fa4=st.booleans())
def test_on_exact_tiers_the_rules_are_upstreams(cap, s, t, fa4):
    res = resolve(cap)
    assert vision.gemma4_backend(res).backend == gemma4_upstream(cap)  # CUDA 13.0: every pick has a build
    assert kimi(res, s, t, fa4).backend == kimi_upstream(cap, s, t, fa4)
    assert not vision.gemma4_backend(res).dropped and not kimi(res, s, t, fa4).dropped


def test_fa4_is_asked_only_where_the_rule_would_pick_it():
    asked = []
    vision.kimi_k3_backend(resolve("9.0"), 4096, 4096, lambda: asked.append(1) or True, TRITON_MAX, FA4_WORK)
    vision.kimi_k3_backend(resolve("10.3"), 64, 64, lambda: asked.append(2) or True, TRITON_MAX, FA4_WORK)
    assert asked == []


def test_unknown_capabilities_take_their_tiers_rule_filtered_by_the_catalog():
    # 9.5 -> tier 9.0: Gemma 4's fa3 has no 9.5 build (sm_90a, sm_80/86): triton_attn.
    d = vision.gemma4_backend(resolve("9.5"))
    assert d.backend == "triton_attn" and d.dropped[0][0] == "fa3"
    # 10.5 -> tier 10.3: Kimi K3's split applies; FA4 (CuTe) has no 10.5 target: triton_attn.
    d = kimi(resolve("10.5"), 4096, 4096, True)
    assert d.backend == "triton_attn" and d.dropped[0][0] == "fa4"
    assert kimi(resolve("10.5"), 64, 64, True).backend == "triton_attn"
    # Below SM70 Triton has no build: sdpa.
    assert vision.gemma4_backend(resolve("6.1")).backend == "sdpa"


# sglang 0.5.23 utils/common.py is_sm90_supported: major 9 and torch CUDA >= 12.3.
def mimo_upstream(cap, cuda):
    return cap.major == 9 and cuda >= (12, 3)


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, cuda=cuda_versions)
def test_mimo_local_attention_is_upstreams_rule_on_the_tier_and_runs(cap, cuda):
    res = resolve(cap)
    d = vision.mimo_local_attention(res, cuda)
    assert d.enabled == (mimo_upstream(res.resolved, cuda) and runs(res, "triton_attn", cuda)), d
    if res.match == "exact":
        assert d.enabled == mimo_upstream(cap, cuda)


def test_mimo_local_attention_on_an_unknown_hopper_takes_the_tiers_value():
    assert vision.mimo_local_attention(resolve("9.5")).enabled  # tier 9.0; the kernel is Triton (from SM70)
    assert not vision.mimo_local_attention(resolve("9.0"), (12, 2)).enabled
    assert not vision.mimo_local_attention(resolve("10.0")).enabled


def test_the_scoped_hook_answers_the_probe_only_during_the_call(monkeypatch):
    import sys
    import types

    from sglang_arch.integrations.sglang.hooks import scoped

    mod = types.ModuleType("stand_in_model")
    mod.probe = lambda: "device"

    def build(self, config):
        return mod.probe()

    build.__module__ = "stand_in_model"
    monkeypatch.setitem(sys.modules, "stand_in_model", mod)
    answers = iter([True, None])
    hook = scoped(lambda: next(answers), "probe")
    assert hook(build, None, None) is True  # the glue's answer while it runs
    assert mod.probe() == "device"  # put back
    assert hook(build, None, None) == "device"  # None: SGLang's own probe
    assert hook.form == "scoped"
