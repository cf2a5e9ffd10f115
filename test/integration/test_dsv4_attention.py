"""DeepSeek-V4: the plugin's hooks against SGLang 0.5.23's own functions.

- ``_default_dsv4_attention_backend`` (``--dsv4-attn-backend auto``): upstream's side is the
  function as SGLang defines it with its ``is_sm100_supported`` probe answering what SGLang's
  probe computes for the simulated GPU; the routed side is the plugin's hook over the same
  function with the registry routed to that GPU, and SGLang's probe made to fail if asked.
- ``DeepseekV4ForCausalLMDSpark.project_commit_kv``: the ``allow_strided_output`` it hands
  the commit-KV projection, upstream's under SGLang's own ``override_platform`` with the facts
  its probes compute for the GPU, routed through the hook.

On every exact tier the two answer alike for every drawn setting (no difference from
upstream); on the unknown capabilities the registry's tier decides, and MegaAttention is the
default only where its SASS exists (the catalog, read from the installed wheel).
"""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

DEFAULT = "sglang.srt.arg_groups.deepseek_v4_hook._default_dsv4_attention_backend"
COMMIT = "sglang.srt.models.deepseek_v4_dspark.DeepseekV4ForCausalLMDSpark.project_commit_kv"
UNKNOWN = ("10.5", "11.5", "12.3", "13.0")
MIN_CUDA = {"7.0": (9, 0), "7.5": (10, 0), "8.0": (11, 0), "8.6": (11, 1), "8.7": (11, 4), "8.9": (11, 8),
            "9.0": (11, 8), "10.0": (12, 8), "10.3": (12, 9), "10.7": (13, 0), "11.0": (13, 0), "12.0": (12, 8),
            "12.1": (12, 9), "10.5": (13, 0), "11.5": (13, 0), "12.3": (13, 0), "13.0": (13, 0)}
CUDAS = ((11, 8), (12, 3), (12, 8), (12, 9), (13, 0))

default_settings = st.fixed_dictionaries({
    "model_type": st.sampled_from(("deepseek_v41", "deepseek_v4")),
    "device": st.sampled_from(("cuda", "cuda", "npu")),
    "kv_cache_dtype": st.sampled_from(("fp8_e4m3", "fp8_e4m3", "bfloat16")),
    "disaggregation_mode": st.sampled_from(("null", "prefill", "decode")),
    "enable_prefill_cp": st.booleans(),
    "tp_size": st.sampled_from((1, 2, 8)),
    "attn_dp_size": st.sampled_from((1, 2, 8)),
    "layout": st.sampled_from((None, "auto", "v41", "v41_new", "v4")),
})


def _server_args(s):
    model_config = SimpleNamespace(hf_config=SimpleNamespace(model_type=s["model_type"]))
    return SimpleNamespace(model_path="/dsv4", _model_config=model_config, attn_cp_size=1,
                           **{k: v for k, v in s.items() if k not in ("model_type", "layout")})


@pytest.fixture(scope="module")
def default_sides():
    return upstream_and_hook(DEFAULT)


@pytest.fixture(scope="module")
def commit_sides():
    return upstream_and_hook(COMMIT)


_machines = {}


def _machine(cap, cuda):
    return _machines.get((cap, cuda)) or _machines.setdefault((cap, cuda), runtime.machine(capability=cap, cuda=cuda))


def _layout(mp, layout):
    if layout is None:
        mp.delenv("SGLANG_DSV4_KV_LAYOUT", raising=False)
    else:
        mp.setenv("SGLANG_DSV4_KV_LAYOUT", layout)


def _upstream_default(own, cap, cuda, s):
    from sglang.srt.utils import common

    facts = upstream_platform_facts(resolve(cap).requested, cuda)
    mp = pytest.MonkeyPatch()
    try:
        _layout(mp, s["layout"])
        mp.setattr(common, "is_sm100_supported", lambda: facts["is_sm100"])
        return own(_server_args(s))
    finally:
        mp.undo()


def _not_asked():
    raise AssertionError("SGLang's is_sm100_supported was asked where the registry answers")


def _routed_default(hook, own, cap, cuda, s):
    from sglang.srt.utils import common

    mp = pytest.MonkeyPatch()
    try:
        _layout(mp, s["layout"])
        ctx = _machine(cap, cuda)
        mp.setattr(glue, "current", lambda: ctx)
        mp.setattr(common, "is_sm100_supported", _not_asked)
        return hook(own, _server_args(s))
    finally:
        mp.undo()


@settings(max_examples=400, deadline=None)
@given(tier=st.sampled_from(TIERS), cuda=st.sampled_from(CUDAS), s=default_settings)
def test_dsv4_default_on_every_exact_tier_is_upstreams_function(default_sides, tier, cuda, s):
    assert resolve(tier).match == "exact"
    cuda = max(cuda, MIN_CUDA[tier])
    own, hook = default_sides
    assert _routed_default(hook, own, tier, cuda, s) == _upstream_default(own, tier, cuda, s), (tier, cuda, s)


MEGA = dict(model_type="deepseek_v41", device="cuda", kv_cache_dtype="fp8_e4m3", disaggregation_mode="null",
            enable_prefill_cp=False, tp_size=8, attn_dp_size=8, layout=None)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_dsv4_default_on_unknown_gpus_is_megaattention_only_where_it_has_sass(default_sides, cap):
    own, hook = default_sides
    routed = _routed_default(hook, own, cap, (13, 0), MEGA)
    upstream = _upstream_default(own, cap, (13, 0), MEGA)
    assert upstream == ("flashmla_mega" if cap.startswith("10.") else "flashmla")
    # 10.5: upstream's major-10 rule picks a kernel with no build there (sm_100a/103a/107a only)
    assert routed == "flashmla", (cap, routed)
    assert not catalog.choice_runs("dsv4_attention", "flashmla_mega", Capability(*map(int, cap.split("."))),
                                   (13, 0)).runs


def test_dsv4_default_without_an_nvidia_gpu_is_sglangs_own(default_sides, monkeypatch):
    from sglang.srt.utils import common

    own, hook = default_sides
    monkeypatch.setattr(glue, "current", lambda: SimpleNamespace(resolution=None))
    monkeypatch.setattr(common, "is_sm100_supported", lambda: True)
    monkeypatch.delenv("SGLANG_DSV4_KV_LAYOUT", raising=False)
    assert hook(own, _server_args(MEGA)) == "flashmla_mega"


# --- DSpark's commit-KV views -------------------------------------------------------------


class _Pool:
    def __init__(self, uniform_fp8):
        self.uniform_fp8 = uniform_fp8


def _commit(own, s, call):
    """``allow_strided_output`` of the method's CommitKvProj.execute call, with ``call``
    running the method (SGLang's own, or the hook over it)."""
    import sglang.srt.models.deepseek_v4_dspark as dspark

    seen = []
    model = SimpleNamespace(project_target_hidden=lambda h: h,
                            stages=[SimpleNamespace(self_attn=SimpleNamespace(wkv=object()))])
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(dspark, "is_unified_kv_triton", lambda: s["unified"])
        mp.setattr(dspark, "CommitKvProj", SimpleNamespace(
            execute=lambda **kw: seen.append(kw["allow_strided_output"]) or []))
        call(model, dict(main_hidden=object(), pool=_Pool(s["uniform_fp8"])))
    finally:
        mp.undo()
    (allowed,) = seen
    return bool(allowed)


def _upstream_commit(own, cap, cuda, s):
    from sglang.srt.runtime_context import override_platform

    facts = upstream_platform_facts(resolve(cap).requested, cuda)
    with override_platform(**SIMULATED_MACHINE, **facts):
        return _commit(own, s, lambda model, kw: own(model, **kw))


def _routed_commit(hook, own, cap, cuda, s):
    from sglang.srt.runtime_context import override_platform

    mp = pytest.MonkeyPatch()
    try:
        ctx = _machine(cap, cuda)
        mp.setattr(glue, "current", lambda: ctx)
        mp.setattr(glue.attention, "_commit_kv", {})
        with override_platform(**SIMULATED_MACHINE):
            return _commit(own, s, lambda model, kw: hook(own, model, **kw))
    finally:
        mp.undo()


commit_settings = st.fixed_dictionaries({"unified": st.booleans(), "uniform_fp8": st.booleans()})


@settings(max_examples=200, deadline=None)
@given(tier=st.sampled_from(TIERS), cuda=st.sampled_from(CUDAS), s=commit_settings)
def test_commit_kv_views_on_every_exact_tier_are_upstreams(commit_sides, tier, cuda, s):
    cuda = max(cuda, MIN_CUDA[tier])
    own, hook = commit_sides
    assert _routed_commit(hook, own, tier, cuda, s) == _upstream_commit(own, tier, cuda, s), (tier, cuda, s)


@pytest.mark.parametrize("cap, strided", [("10.5", True), ("11.5", True), ("12.3", True), ("13.0", True)])
def test_commit_kv_views_on_unknown_gpus_follow_the_tier(commit_sides, cap, strided):
    """13.0 resolves to the 12.1 tier (Blackwell) where SGLang's major rule says not: the
    writer (SGLang's JIT FusedKNormRopeFlashMLAKernel) reads the row stride on every GPU."""
    own, hook = commit_sides
    s = {"unified": False, "uniform_fp8": False}
    assert _routed_commit(hook, own, cap, (13, 0), s) is strided
    assert _upstream_commit(own, cap, (13, 0), s) is (cap != "13.0")
    assert _routed_commit(hook, own, cap, (13, 0), {"unified": True, "uniform_fp8": False}) is False


def test_the_commit_kv_hook_answers_only_its_own_module(commit_sides):
    """While the method runs, only deepseek_v4_dspark's get_platform answers the registry's
    fact; the platform every other module reads is SGLang's."""
    import sglang.srt.models.deepseek_v4_dspark as dspark
    from sglang.srt import runtime_context
    from sglang.srt.runtime_context import override_platform

    own, hook = commit_sides
    seen = {}

    def run(model, kw):
        def execute(**k):
            seen["module"] = dspark.get_platform().is_blackwell
            seen["sglang"] = runtime_context.get_platform().is_blackwell
            return []

        mp = pytest.MonkeyPatch()
        mp.setattr(dspark, "CommitKvProj", SimpleNamespace(execute=execute))
        mp.setattr(dspark, "is_unified_kv_triton", lambda: False)
        try:
            hook(own, model, **kw)
        finally:
            mp.undo()

    mp = pytest.MonkeyPatch()
    try:
        ctx = _machine("13.0", (13, 0))
        mp.setattr(glue, "current", lambda: ctx)
        mp.setattr(glue.attention, "_commit_kv", {})
        with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(Capability(13, 0), (13, 0))):
            run(SimpleNamespace(project_target_hidden=lambda h: h, stages=[]),
                dict(main_hidden=object(), pool=_Pool(False)))
    finally:
        mp.undo()
    assert seen == {"module": True, "sglang": False}
    assert dspark.get_platform is runtime_context.get_platform


# --- an explicit --dsv4-attn-backend flashmla_mega ---------------------------------------------

APPLY = "sglang.srt.arg_groups.deepseek_v4_hook.apply_deepseek_v4_defaults"


def _sglang_asserts_mega(cap, cuda):
    """Whether SGLang's own assertion (deepseek_v4_hook.py) lets an explicit flashmla_mega
    through on ``cap``: read from its source, with its probe answering for the GPU."""
    import inspect

    import sglang.srt.arg_groups.deepseek_v4_hook as hook_module

    source = inspect.getsource(hook_module.apply_deepseek_v4_defaults)
    assert 'if cfg.dsv4_attn_backend == "flashmla_mega":' in source
    assert "and is_sm100_supported()" in source.split('== "flashmla_mega":')[1].split("if cfg.")[0]
    return upstream_platform_facts(resolve(cap).requested, cuda)["is_sm100"]


@pytest.mark.parametrize("cap", TIERS + UNKNOWN)
def test_an_explicit_megaattention_is_refused_where_sglang_would_run_it_without_a_build(cap):
    from sglang_arch.integrations.sglang.glue import ArchDecisionError

    own, hook = upstream_and_hook(APPLY)
    ran = []
    passed = SimpleNamespace(_raw_input={"dsv4_attn_backend": "flashmla_mega"}, dsv4_attn_backend="flashmla_mega")
    mp = pytest.MonkeyPatch()
    try:
        ctx = _machine(cap, (13, 0))
        mp.setattr(glue, "current", lambda: ctx)
        sglang_lets_it_through = _sglang_asserts_mega(cap, (13, 0))
        runs = catalog.choice_runs("dsv4_attention", "flashmla_mega", resolve(cap).requested, (13, 0)).runs
        if sglang_lets_it_through and not runs:
            with pytest.raises(ArchDecisionError, match="flashmla_mega has no build"):
                hook(lambda *a: ran.append(a), passed, "DeepseekV4ForCausalLM")
            assert cap == "10.5" and not ran
        else:  # SGLang's own code judges it (its assertion, or MegaAttention runs here)
            hook(lambda *a: ran.append(a), passed, "DeepseekV4ForCausalLM")
            assert ran and cap != "10.5"
    finally:
        mp.undo()
