"""SGLang 0.5.23's own ``resolve_draft_worker_attention_backend`` against the routed one.

Both run in this process on the same stand-in bags (the draft flag, the process's
backends, the user's raw input): upstream's is the original the plugin's hook wraps.
On every exact tier where upstream's pick has a build for both phases the two agree;
elsewhere (D19) the routed one is the registry's runnable choice or refuses a flag the
user passed.
"""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from helpers import routed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KNOWN = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
NAMED = [None, "flashinfer", "fa3", "fa4", "triton", "trtllm_mha", "torch_native", "flashmla"]
_PATH = "sglang.srt.speculative.draft_worker_common.resolve_draft_worker_attention_backend"


@pytest.fixture(scope="module")
def sides():
    from sglang.srt.speculative import draft_worker_common as dwc

    with routed(_PATH):
        yield dwc, dwc.resolve_draft_worker_attention_backend, dwc.resolve_draft_worker_attention_backend.__wrapped__


@pytest.fixture
def bags(monkeypatch, sides):
    """``use(cap, flag, prefill, user)``: the machine and the bags both sides read."""
    from sglang.srt import runtime_context
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue

    dwc = sides[0]
    platform = SimpleNamespace(is_cuda=True, is_hip=False, is_xpu=False)

    def use(cap, flag, prefill, user):
        ctx = runtime.machine(capability=cap, gpu_count=8, cuda=(13, 0))
        monkeypatch.setattr(glue, "current", lambda: ctx)
        spec = SimpleNamespace(speculative_draft_attention_backend=flag)
        raw = {"speculative_draft_attention_backend": flag if user else None}
        for mod in (runtime_context, dwc):
            monkeypatch.setattr(mod, "get_spec", lambda: spec)
            monkeypatch.setattr(mod, "attention_backends", lambda: (prefill, prefill))
            monkeypatch.setattr(mod, "get_platform", lambda: platform)
        monkeypatch.setattr(runtime_context, "get_server_args", lambda: SimpleNamespace(_raw_input=raw))
        return ctx

    return use


def _runs_both(cap, name):
    from sglang_arch.arch import catalog, parse_capability

    verdicts = [catalog.choice_runs("attention", name, parse_capability(cap), (13, 0), "mha", p)
                for p in ("prefill", "decode")]
    return None if verdicts[0] is None else all(v.runs for v in verdicts)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.sampled_from(KNOWN), flag=st.sampled_from(NAMED), prefill=st.sampled_from(NAMED),
       user=st.booleans())
def test_on_exact_tiers_the_routed_resolution_is_upstreams_where_its_pick_runs(sides, bags, cap, flag, prefill, user):
    from sglang_arch.integrations.sglang.glue import ArchDecisionError

    _, routed, original = sides
    bags(cap, flag, prefill, user)
    theirs = original(algo_label="EAGLE")
    if _runs_both(cap, theirs) is not False:
        assert routed(algo_label="EAGLE") == theirs
        return
    # D19: upstream's pick has no build here.
    try:
        mine = routed(algo_label="EAGLE")
    except ArchDecisionError as exc:  # only a draft flag the user passed
        assert user and flag == theirs, exc
        assert str(exc).startswith(f"--speculative-draft-attention-backend {flag}: ")
        return
    assert mine != theirs and _runs_both(cap, mine)


def test_d18_on_6_1_the_users_speculation_is_refused_and_on_7_0_triton_replaces_flashinfer(sides, bags):
    from sglang_arch.integrations.sglang.glue import ArchDecisionError

    _, routed, original = sides
    bags("6.1", None, "torch_native", False)
    assert original(algo_label="EAGLE") == "flashinfer"  # upstream: FlashInfer, which has no 6.1 build
    with pytest.raises(ArchDecisionError) as e:
        routed(algo_label="EAGLE")
    assert str(e.value).startswith("--speculative-algorithm: no attention backend the draft worker supports runs "
                                   "on 6.1")
    bags("7.0", None, "torch_native", False)
    assert (original(algo_label="EAGLE"), routed(algo_label="EAGLE")) == ("flashinfer", "triton")
