"""Hypothesis strategies shared by the property tests.

Weighted toward what decides something: every known tier, its neighbours (X.Y-1,
X.Y+1, the next major), the world sizes SGLang's tables list (1, 2, 3, 4, 6, 8, 16),
every topology, and CUDA versions around each minimum; uniform draws over the whole
input space stay in the mix so that nothing is left out entirely.  The tiers are
written here as data (docs/support-matrix.md), not read from the registry under test;
test_sources.py checks that the registry knows exactly these.
"""

from hypothesis import strategies as st
from sglang_arch.arch import TOPOLOGIES, Capability
from sglang_arch.arch.policies.attention import ModelTraits

KNOWN_TIERS = [(7, 0), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (10, 7), (11, 0),
               (12, 0), (12, 1)]


def _neighbours():
    out = set()
    for major, minor in KNOWN_TIERS:
        out |= {(major, minor - 1), (major, minor + 1), (major + 1, 0), (major - 1, 9)}
    return sorted((ma, mi) for ma, mi in out if 0 <= mi <= 9 and 0 <= ma and (ma, mi) not in KNOWN_TIERS)


NEIGHBOURS = _neighbours()
known_capabilities = st.sampled_from([Capability(*t) for t in KNOWN_TIERS])
neighbour_capabilities = st.sampled_from([Capability(*t) for t in NEIGHBOURS])
any_capability = st.builds(Capability, st.integers(0, 99), st.integers(0, 9))


def weighted(*pairs):
    """Draw from each strategy with its weight (one_of would give each branch alike)."""
    branches = [strategy for weight, strategy in pairs for _ in range(weight)]
    return st.integers(0, len(branches) - 1).flatmap(lambda i: branches[i])


capabilities = weighted((6, known_capabilities), (2, neighbour_capabilities), (2, any_capability))

TABLE_WORLD_SIZES = [1, 2, 3, 4, 6, 8, 16]
world_sizes = weighted((4, st.sampled_from(TABLE_WORLD_SIZES)), (1, st.integers(1, 64)))
topologies = st.sampled_from(sorted(TOPOLOGIES.values(), key=lambda t: t.name))

# The minimum torch CUDA of each rule (SGLang's fact rules 12.3 and 12.8; the tiers'
# toolkits 11.0, 11.8, 12.0, 12.9, 13.0) and one minor on either side.
CUDA_MINIMUMS = [(11, 0), (11, 8), (12, 0), (12, 3), (12, 8), (12, 9), (13, 0)]
CUDA_VERSIONS = sorted({(ma, mi + d) for ma, mi in CUDA_MINIMUMS for d in (-1, 0, 1) if mi + d >= 0}
                       | {(10, 2), (11, 9)})
cuda_versions = st.sampled_from(CUDA_VERSIONS)

traits = st.builds(
    ModelTraits,
    kind=st.sampled_from(["mha", "mla"]),
    asymmetric_kv=st.booleans(),
    attention_sinks=st.booleans(),
    speculative_multi_branch=st.booleans(),
    speculative_topk_pending=st.booleans(),
    cross_attention_needs_flashinfer=st.booleans(),
    flashinfer_available=st.booleans(),
    cuda=cuda_versions,
)

# Collective decisions have tables only on some tiers (SGLang's symm-mem and fusion tables:
# majors 9 and 10; docs/differences.md D1/D3: 12.x) and world sizes (2, 4, 6, 8; multimem at
# 4, 6, 8): half of the collective properties' draws go there, with fallbacks onto them.
COLLECTIVE_TIERS = [(9, 0), (10, 0), (10, 3), (10, 7), (12, 0), (12, 1), (9, 5), (10, 5), (12, 5), (13, 0)]
collective_capabilities = weighted((1, capabilities), (1, st.sampled_from([Capability(*t) for t in COLLECTIVE_TIERS])))
collective_world_sizes = weighted((1, world_sizes), (1, st.sampled_from([2, 4, 6, 8])))
