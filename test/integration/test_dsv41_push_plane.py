"""DeepSeek-V4.1's plane at TP 4 in SGLang 0.5.23's all-reduce fusion auto-enable pass.

``_flashinfer_allreduce_fusion_auto_enable`` keeps FlashInfer's fusion off for DeepSeek-V4.1
(hidden 5120) at TP 4 on one node on ``is_blackwell`` ("V4.1 TP4 uses the custom push plane");
the registry takes that rule from the tier (``policies/collectives.dsv41_custom_plane``).  SGLang's
own pass against the plugin's hook, in process, under SGLang's ``override_platform`` with the
facts its probes compute for each GPU; the machine's topology is NVLink-switched (fusion's own
decision is not what is tested here).
"""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import parse_capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

AUTO_ENABLE = "sglang.srt.arg_groups.overrides._flashinfer_allreduce_fusion_auto_enable"
CUDA = (13, 0)


def _view(model_type="deepseek_v41", arch="DeepseekV4ForCausalLM", hidden=5120, tp=4):
    hf_config = SimpleNamespace(architectures=[arch], model_type=model_type, hidden_size=hidden)
    return SimpleNamespace(flashinfer_allreduce_fusion_backend=None, tp_size=tp, nnodes=1, moe_a2a_backend="none",
                           disable_custom_all_reduce=False, attn_dp_size=1, dp_size=1, attn_cp_size=1,
                           ep_join_mode=None, encoder_only=False, enable_pdmux=False,
                           _model_config=SimpleNamespace(hf_config=hf_config, dtype=None), model_path="/v41")


@pytest.fixture(scope="module")
def sides():
    return upstream_and_hook(AUTO_ENABLE)


def _both(sides, cap, view, monkeypatch):
    from sglang.srt.runtime_context import override_platform

    own, hook = sides
    ctx = runtime.machine(capability=cap, gpu_count=8, topology="nvswitch", cuda=CUDA)
    with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(parse_capability(cap), CUDA)):
        upstream = own(view)
        with monkeypatch.context() as mp:
            mp.setattr(glue, "current", lambda: ctx)
            routed = hook(own, view)
    return upstream, routed, ctx


@pytest.mark.parametrize("cap", TIERS)
def test_on_every_exact_tier_v41_is_sglangs(sides, cap, monkeypatch):
    """V4.1 at TP 4 on every exact tier; beside it V4 and V4.1 at TP 8 where SGLang's own gate
    admits the tier (elsewhere the registry's fusion decision differs by design: D3)."""
    assert resolve(cap).match == "exact"
    upstream, routed, _ = _both(sides, cap, _view(), monkeypatch)
    assert routed == upstream, cap
    facts = upstream_platform_facts(parse_capability(cap), CUDA)
    for view in (_view(model_type="deepseek_v4"), _view(tp=8)):
        upstream, routed, _ = _both(sides, cap, view, monkeypatch)
        if facts["is_sm90"] or facts["is_sm100"]:
            assert routed == upstream, (cap, view._model_config.hf_config.model_type, view.tp_size)


@pytest.mark.parametrize("cap", ("10.5", "11.5", "12.3", "13.0"))
def test_outside_the_table_v41_keeps_its_plane_where_the_tier_is_blackwell(sides, cap, monkeypatch):
    upstream, routed, ctx = _both(sides, cap, _view(), monkeypatch)
    plane = ctx.dsv41_custom_plane()
    assert plane.custom_plane is True, plane.reason  # every tier these resolve to is Blackwell
    assert routed == {}, (cap, routed, plane.reason)
    # another model at TP 4 is not held back by V4.1's rule: fusion where the registry enables it
    _, other, _ = _both(sides, cap, _view(model_type="deepseek_v4"), monkeypatch)
    assert bool(other) is bool(ctx.fusion(nnodes=1).enabled), (cap, other)


def test_the_fact_the_registry_answers_is_what_decides_v41s_plane(sides):
    """The premise: under the trtllm gate the glue runs SGLang's pass with, V4.1 at TP 4 takes
    FlashInfer fusion where is_blackwell is False and keeps its plane where it is True."""
    from sglang.srt.runtime_context import override_platform

    own, _ = sides
    with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(parse_capability("12.0"), CUDA)):
        with override_platform(is_sm90=True, is_sm100=False, is_blackwell=False):
            assert own(_view()) == {"flashinfer_allreduce_fusion_backend": "auto"}
        with override_platform(is_sm90=True, is_sm100=False, is_blackwell=True):
            assert own(_view()) == {}
