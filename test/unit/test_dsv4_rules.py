"""DeepSeek-V4's attention default (``--dsv4-attn-backend auto``) and DSpark's commit-KV
views: the catalog entry of FlashMLA's MegaAttention, the two policies, the hook forms
that route them (``scoped`` over a probe of another module, ``scoped_fact``)."""

import sys
import types
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch import catalog, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import dsa
from sglang_arch.arch.table import ARCHITECTURES
from sglang_arch.integrations.sglang import hooks
from unit.sglang_probes import upstream_fact

EXACT = sorted(ARCHITECTURES)
CUDAS = ((12, 4), (12, 8), (12, 9), (13, 0))
MEGA_BUILDS = {"10.0", "10.3", "10.7"}  # sgl-flash-mla 1.0.0: sm_100a sm_103a sm_107a


@given(st.integers(0, 30), st.integers(0, 9))
def test_megaattention_runs_exactly_where_its_sass_is(major, minor):
    verdict = catalog.choice_runs("dsv4_attention", "flashmla_mega", Capability(major, minor), (13, 0))
    assert verdict.runs is (f"{major}.{minor}" in MEGA_BUILDS), verdict.reason


def test_dsv4_choices_are_flashmla_and_megaattention():
    assert catalog.known_choices("dsv4_attention") == ("flashmla", "flashmla_mega")
    assert catalog.CATALOG["flashmla_mega"].binary == "flash_mla/cuda.abi3.so"


@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_mega_default_on_every_exact_tier_is_upstreams_is_sm100(tier, cuda):
    res = resolve(tier)
    assert res.match == "exact"
    assert dsa.dsv4_mega_default(res, cuda).allowed is upstream_fact("is_sm100", res.requested, cuda)


@given(st.integers(5, 20), st.integers(0, 9), st.sampled_from(CUDAS))
def test_mega_default_only_where_megaattention_has_a_build_for_the_device(major, minor, cuda):
    res = resolve(f"{major}.{minor}")
    decision = dsa.dsv4_mega_default(res, cuda)
    if decision.allowed:
        assert catalog.choice_runs("dsv4_attention", "flashmla_mega", res.requested, cuda).runs
        assert upstream_fact("is_sm100", res.requested, cuda)


def test_on_10_5_megaattention_has_no_build_and_auto_stays_flashmla():
    res = resolve("10.5")
    assert res.match != "exact" and res.resolved.major == 10
    decision = dsa.dsv4_mega_default(res, (13, 0))
    assert decision.allowed is False and upstream_fact("is_sm100", res.requested, (13, 0))
    assert "flashmla_mega has no build for 10.5" in decision.reason


@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_commit_kv_views_on_every_exact_tier_are_upstreams_is_blackwell(tier, cuda):
    res = resolve(tier)
    assert dsa.dspark_commit_kv_views(res, cuda).strided is upstream_fact("is_blackwell", res.requested, cuda)


@pytest.mark.parametrize("cap, strided", [("10.5", True), ("11.5", True), ("12.3", True), ("9.5", False)])
def test_commit_kv_views_on_unknown_gpus_follow_the_tier(cap, strided):
    res = resolve(cap)
    assert res.match != "exact"
    assert dsa.dspark_commit_kv_views(res, (13, 0)).strided is strided


# --- hook forms -----------------------------------------------------------------------------

@pytest.fixture
def modules(monkeypatch):
    """A module holding a probe (``holder``) and one whose function imports it when it runs."""
    holder = types.ModuleType("h23_holder")
    holder.probe = lambda: True
    user = types.ModuleType("h23_user")
    exec("def decide():\n    from h23_holder import probe\n    return 'mega' if probe() else 'flashmla'\n",
         user.__dict__)
    monkeypatch.setitem(sys.modules, "h23_holder", holder)
    monkeypatch.setitem(sys.modules, "h23_user", user)
    return holder, user


def test_scoped_with_a_module_answers_a_locally_imported_probe(modules):
    holder, user = modules
    own = holder.probe
    answers = iter([False, None])
    hook = hooks.scoped(lambda: next(answers), "probe", module="h23_holder")
    assert hook(user.decide) == "flashmla"  # the registry's answer during the call
    assert holder.probe is own  # put back
    assert hook(user.decide) == "mega"  # None: SGLang's own probe
    user.fails = lambda: (_ for _ in ()).throw(RuntimeError("in the call"))
    exec("def failing():\n    from h23_holder import probe\n    probe()\n    fails()\n", user.__dict__)
    with pytest.raises(RuntimeError, match="in the call"):
        hooks.scoped(lambda: False, "probe", module="h23_holder")(user.failing)
    assert holder.probe is own  # put back when the call raises too


def test_scoped_without_a_module_does_not_reach_a_locally_imported_probe(modules):
    """The explicit module is what routes it: the original's own module has no such name."""
    holder, user = modules
    user.probe = holder.probe
    hook = hooks.scoped(lambda: False, "probe")
    assert hook(user.decide) == "mega"


def test_scoped_where_the_module_lacks_the_probe_runs_sglangs_own(modules):
    holder, user = modules
    del holder.probe
    hook = hooks.scoped(lambda: False, "probe", module="h23_holder")
    with pytest.raises(ImportError):  # SGLang's own function, as it would fail without the plugin
        hook(user.decide)


class _Platform:
    is_blackwell = False
    is_cuda = True


def test_scoped_fact_answers_one_fact_to_the_module_and_puts_its_getter_back(monkeypatch):
    user = types.ModuleType("h23_fact_user")
    platform = _Platform()
    user.get_platform = lambda: platform
    exec("def views():\n    p = get_platform()\n    return p.is_blackwell, p.is_cuda\n", user.__dict__)
    monkeypatch.setitem(sys.modules, "h23_fact_user", user)
    own = user.get_platform
    answers = [True]
    hook = hooks.scoped_fact(lambda: answers[0], "is_blackwell")
    assert hook(user.views) == (True, True)  # the fact answered, every other attribute SGLang's
    assert user.get_platform is own
    used = []
    monkeypatch.setattr(user, "views", lambda: used.append(user.get_platform) or None)
    hook(user.views)
    hook(user.views)
    assert used[0] is used[1]  # one getter per answer: nothing built per call
    answers[0] = None
    assert hook(user.__dict__["views"]) is None and len(used) == 3 and used[2] is own  # None: SGLang's own


# --- an explicit --dsv4-attn-backend flashmla_mega ---------------------------------------------

@pytest.mark.parametrize("cap", ["10.5", "10.1", "10.9"])
def test_explicit_mega_is_refused_only_where_sglangs_assertion_lets_it_through_without_a_build(cap):
    res = resolve(cap)
    assert upstream_fact("is_sm100", res.requested, (13, 0))  # SGLang's assertion passes here
    assert f"flashmla_mega has no build for {cap}" in dsa.dsv4_explicit_mega(res, (13, 0))


@pytest.mark.parametrize("tier", EXACT)
@pytest.mark.parametrize("cuda", CUDAS)
def test_explicit_mega_on_exact_tiers_is_sglangs_to_judge(tier, cuda):
    """Where MegaAttention has a build the registry has nothing to say, and off major 10
    SGLang's own assertion refuses it: the registry adds no refusal on any exact tier."""
    assert dsa.dsv4_explicit_mega(resolve(tier), cuda) is None


@pytest.fixture
def device(monkeypatch):
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue

    def use(cap):
        ctx = SimpleNamespace(resolution=None) if cap is None else runtime.machine(capability=cap, cuda=(13, 0))
        monkeypatch.setattr(glue, "current", lambda: ctx)

    yield use
    runtime.reset()


def test_the_check_judges_only_what_the_user_passed(device):
    from sglang_arch.integrations.sglang.glue import ArchDecisionError, attention

    hook = hooks.check(attention.check_dsv4_attn_backend)

    def original(server_args, model_arch):
        return "sglang ran"

    passed = SimpleNamespace(_raw_input={"dsv4_attn_backend": "flashmla_mega"}, dsv4_attn_backend="flashmla_mega")
    declared = SimpleNamespace(_raw_input={"dsv4_attn_backend": "auto"}, dsv4_attn_backend="flashmla_mega")
    device("10.5")
    with pytest.raises(ArchDecisionError, match=r"flashmla_mega: flashmla_mega has no build for 10\.5.*"
                                                r"SGLANG_ARCH_DISABLE=1"):
        hook(original, passed, "DeepseekV4ForCausalLM")
    assert hook(original, declared, "DeepseekV4ForCausalLM") == "sglang ran"  # not the user's: not judged
    for cap in ("10.0", "10.3", "10.7", "9.0", "12.0", None):
        device(cap)
        assert hook(original, passed, "DeepseekV4ForCausalLM") == "sglang ran", cap
