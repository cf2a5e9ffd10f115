"""Hypothesis strategies shared by the property tests."""

from hypothesis import strategies as st
from sglang_arch.arch import TOPOLOGIES, Capability
from sglang_arch.arch.policies.attention import ModelTraits

capabilities = st.builds(Capability, st.integers(0, 20), st.integers(0, 9))
world_sizes = st.integers(1, 16)
topologies = st.sampled_from(sorted(TOPOLOGIES.values(), key=lambda t: t.name))
cuda_versions = st.sampled_from([(11, 8), (12, 0), (12, 3), (12, 4), (12, 8), (12, 9), (13, 0)])
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
