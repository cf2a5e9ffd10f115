"""The DFLASH / DSPARK draft worker's attention backend (``policies/speculative.py``
``draft_worker_backend``), as rules over capabilities.

Upstream's rule, written here as data from sglang 0.5.23
``speculative/draft_worker_common.py`` ``resolve_draft_worker_attention_backend`` and
``arg_groups/choices.py`` ``DRAFT_ATTENTION_BACKEND_CHOICES``: the draft flag, else the
process's prefill backend, when the draft worker supports it, else ``flashinfer`` (CUDA).
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_arch.arch import catalog, resolve
from sglang_arch.arch.policies import speculative
from sglang_arch.arch.policies.attention import ModelTraits

from .strategies import capabilities, known_capabilities, traits

CHOICES = ("flashinfer", "fa3", "fa4", "triton", "ascend", "trtllm_mha", "intel_xpu")
NAMED = st.sampled_from([None, "flashinfer", "fa3", "fa4", "triton", "trtllm_mha", "torch_native", "flashmla",
                         "trtllm_mla", "cutedsl_mla"])


def upstream(named):
    return named if named is not None and named in CHOICES else "flashinfer"


def runs(res, name, t):
    """The catalog's verdict for both phases (None: not in the catalog, not judged)."""
    verdicts = [catalog.choice_runs("attention", name, res.identities, t.cuda, t.kind, p) for p in ("prefill", "decode")]
    return None if verdicts[0] is None else all(v.runs for v in verdicts)


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, named=NAMED, t=traits, user=st.booleans())
def test_the_draft_worker_backend_is_supported_and_runs_or_a_flag_the_user_passed_is_refused(cap, named, t, user):
    res = resolve(cap)
    d = speculative.draft_worker_backend(res, named, CHOICES, t, user)
    if d.backend is not None:
        assert d.refused is None
        assert d.backend in CHOICES
        assert runs(res, d.backend, t) is not False, d
    else:
        assert d.refused in (speculative.DRAFT_FLAG, speculative.SPECULATIVE_FLAG), d
        if d.refused == speculative.DRAFT_FLAG:  # only a draft flag the user passed is refused
            assert user and named == upstream(named) and runs(res, named, t) is False
        else:  # no backend the draft worker supports runs here at all
            assert not any(runs(res, c, t) for c in CHOICES if runs(res, c, t) is not None
                           and c in ("flashinfer", "triton", *res.profile.attention_mha, *res.profile.attention_mla))


@settings(max_examples=300, deadline=None)
@given(cap=known_capabilities, named=NAMED, t=traits, user=st.booleans())
def test_on_exact_tiers_upstreams_pick_where_it_runs(cap, named, t, user):
    res = resolve(cap)
    assert res.match == "exact"
    pick = upstream(named)
    d = speculative.draft_worker_backend(res, named, CHOICES, t, user)
    if runs(res, pick, t) is not False:
        assert (d.backend, d.refused, d.dropped) == (pick, None, ())


def test_d19_on_7_0_flashinfer_becomes_triton():
    """D19: FlashInfer has no 7.0 build (D5); the draft worker's fallback is Triton there."""
    d = speculative.draft_worker_backend(resolve("7.0"), None, CHOICES, ModelTraits())
    assert d.backend == "triton"
    assert d.dropped[0][0] == "flashinfer"
    assert "SGLang's rule picks flashinfer, but flashinfer cannot run MHA prefill on 7.0" in d.reason


@pytest.mark.parametrize("named", [None, "torch_native", "flashinfer", "triton"])
def test_d19_below_sm70_speculation_is_refused_with_why(named):
    d = speculative.draft_worker_backend(resolve("6.1"), named, CHOICES, ModelTraits())
    assert (d.backend, d.refused) == (None, "--speculative-algorithm")
    assert d.reason.startswith("--speculative-algorithm: no attention backend the draft worker supports runs on 6.1")
    assert "triton: triton cannot run MHA prefill on 6.1" in d.reason


def test_a_draft_backend_the_user_passed_that_cannot_run_refuses_that_flag_only():
    res, t = resolve("8.0"), ModelTraits()
    mine = speculative.draft_worker_backend(res, "trtllm_mha", CHOICES, t, user_named=True)
    assert (mine.backend, mine.refused) == (None, "--speculative-draft-attention-backend")
    assert mine.reason.startswith("--speculative-draft-attention-backend trtllm_mha: trtllm_mha cannot run MHA")
    # Declared by a model override, not by the user: replaced, never refused.
    declared = speculative.draft_worker_backend(res, "trtllm_mha", CHOICES, t, user_named=False)
    assert declared.refused is None and declared.backend is not None and declared.backend != "trtllm_mha"
    assert runs(res, declared.backend, t)
