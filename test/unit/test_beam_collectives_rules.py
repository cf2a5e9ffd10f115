"""Beam's fused all-reduce + norm token limits and FlashInfer band
(``policies/collectives.py``), as rules over capabilities.

Upstream's rule, written here as data from sglang 0.5.23 ``models/beam.py``:
``BeamModel._all_reduce_limits`` (TP 2/4/8 on majors 9 and 10; major 9: TP 2 (32, 32),
TP 4 (32, 64), TP 8 (1, 16); major 10: (64, 64), capped at (32, 32) on capability (10, 3)
with TP 4) and ``_FLASHINFER_AR_TOKEN_BAND = {((10, 3), 4): (96, 640)}``.
"""

from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_arch.arch import catalog, resolve
from sglang_arch.arch.policies import collectives

from .strategies import capabilities, known_capabilities

tp_sizes = st.sampled_from([1, 2, 3, 4, 6, 8, 16])


def limits_upstream(cap, tp):
    if tp not in (2, 4, 8) or cap.major not in (9, 10):
        return None
    limits = {2: (32, 32), 4: (32, 64), 8: (1, 16)}[tp] if cap.major == 9 else (64, 64)
    if (cap.major, cap.minor) == (10, 3) and tp == 4:
        limits = (min(limits[0], 32), min(limits[1], 32))
    return limits


def band_upstream(cap, tp):
    return {((10, 3), 4): (96, 640)}.get(((cap.major, cap.minor), tp))


@settings(max_examples=300, deadline=None)
@given(cap=known_capabilities, tp=tp_sizes)
def test_on_exact_tiers_the_limits_and_band_are_upstreams(cap, tp):
    res = resolve(cap)
    assert collectives.beam_all_reduce_limits(res, tp).value == limits_upstream(cap, tp)
    assert collectives.beam_flashinfer_band(res, tp).value == band_upstream(cap, tp)


@settings(max_examples=300, deadline=None)
@given(cap=capabilities, tp=tp_sizes)
def test_elsewhere_the_tiers_values_where_the_kernels_run(cap, tp):
    res = resolve(cap)
    limits = collectives.beam_all_reduce_limits(res, tp)
    band = collectives.beam_flashinfer_band(res, tp)
    tier = res.resolved
    ar_runs = catalog.choice_runs("custom_ar", "jit_v2", res.identities).runs
    mnnvl_runs = catalog.choice_runs("fusion", "mnnvl", res.identities).runs
    assert limits.value == (limits_upstream(tier, tp) if ar_runs and res.match != "portable" else None), limits
    assert band.value == (band_upstream(tier, tp) if mnnvl_runs and res.match != "portable" else None), band
    assert limits.reason and band.reason


def test_an_unknown_blackwell_takes_10_3s_values():
    # 10.5 -> tier 10.3: the GB300 TP 4 cap and band (upstream keys them on (10, 3) only).
    res = resolve("10.5")
    assert str(res.resolved) == "10.3"
    assert collectives.beam_all_reduce_limits(res, 4).value == (32, 32)
    assert collectives.beam_flashinfer_band(res, 4).value == (96, 640)
    assert collectives.beam_all_reduce_limits(resolve("9.5"), 8).value == (1, 16)
    assert collectives.beam_all_reduce_limits(resolve("12.0"), 4).value is None


def test_the_decides_hook_takes_a_boxed_none_as_the_answer():
    from sglang_arch.integrations.sglang.hooks import decides

    def original(*args):
        return ("original", args)

    answers = iter([(None,), ((32, 32),), None])
    hook = decides(lambda model, hidden: next(answers))
    assert hook(original, "model", "hidden") is None  # the registry: the fused path does not apply
    assert hook(original, "model", "hidden") == (32, 32)
    assert hook(original, "model", "hidden") == ("original", ("model", "hidden"))  # None: SGLang decides
    assert hook.form == "decides"
