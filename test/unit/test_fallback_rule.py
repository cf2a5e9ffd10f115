"""The safe fallback rule (docs/fallback.md): identity is the device's own, decisions the tier's.

Expected identity facts are SGLang 0.5.23's own probe rule, written as data from its
source in ``sglang_probes.py``, not imported from the registry.
"""

from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_arch.arch import Capability, resolve
from sglang_arch.arch.policies.platform import platform_facts
from unit.sglang_probes import upstream_facts

# Every known tier, its neighbours and the next majors weigh more than the rest.
TIERS = [(7, 0), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (10, 7), (11, 0), (12, 0), (12, 1)]
NEAR = sorted({(ma, mi + d) for ma, mi in TIERS for d in (-1, 1) if 0 <= mi + d <= 9} | {(ma + 1, 0) for ma, _ in TIERS})
capabilities = st.one_of(st.sampled_from(TIERS + NEAR), st.tuples(st.integers(1, 20), st.integers(0, 9)))
cudas = st.sampled_from([(11, 8), (12, 2), (12, 3), (12, 7), (12, 8), (12, 9), (13, 0)])


@settings(max_examples=400, deadline=None)
@given(capabilities, cudas)
def test_identity_facts_are_upstreams_for_the_device_itself(cap, cuda):
    res = resolve(Capability(*cap))
    assert platform_facts(res, cuda) == upstream_facts(cap, cuda)


@settings(max_examples=200, deadline=None)
@given(capabilities, cudas)
def test_a_fallback_never_claims_the_tiers_identity(cap, cuda):
    res = resolve(Capability(*cap))
    facts = platform_facts(res, cuda)
    assert facts["device_capability"] == cap
    if res.match in ("family", "generation"):  # a tier other than the device
        assert res.resolved.as_tuple() != cap
    if cap[0] == 13:  # generation fallback to 12.1: no sm_120 claim, whatever the CUDA
        assert res.resolved.as_tuple() == (12, 1) and facts["is_sm120"] is False and facts["is_blackwell"] is False


def test_examples_from_the_issue():
    # 13.0 on CUDA 13.0: the first plugin said (12, 1), 121 and is_sm120; the device is 13.0.
    facts = platform_facts(resolve("13.0"), (13, 0))
    assert (facts["device_capability"], facts["device_sm"], facts["is_sm120"]) == ((13, 0), 130, False)
    # 12.3 resolves in 12.1's family; its identity is 12.3 (an sm_121a kernel does not run there).
    res = resolve("12.3")
    assert res.match == "family" and str(res.resolved) == "12.1"
    assert platform_facts(res, (13, 0))["device_capability"] == (12, 3)
    # The is_sm120 probe's CUDA minimum is 12.8 (not 12.9): a planted-bug regression.
    assert platform_facts(resolve("12.0"), (12, 8))["is_sm120"] is True
    assert platform_facts(resolve("12.0"), (12, 7))["is_sm120"] is False


def test_no_gpu_has_no_identity():
    facts = platform_facts(None, (13, 0))
    assert "device_capability" not in facts and not any(facts.values())
