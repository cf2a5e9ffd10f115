"""DeepSeek-V4.1's indexer rule (``policies/deepseek.dsv41_indexer_deep_gemm``) over generated
capabilities: DeepGEMM's MQA logits exactly where SGLang's ``major >= 10`` takes them on the
tier and the catalog runs DeepGEMM on the device; the torch indexer everywhere else."""

from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_arch.arch import catalog, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies.deepseek import dsv41_indexer_deep_gemm

cuda = st.sampled_from([(12, 8), (12, 9), (13, 0)])


@settings(max_examples=300, deadline=None)
@given(major=st.integers(7, 15), minor=st.integers(0, 9), cuda=cuda)
def test_deep_gemm_only_where_the_tier_takes_it_and_it_has_a_build(major, minor, cuda):
    res = resolve(Capability(major, minor))
    path = dsv41_indexer_deep_gemm(res, cuda)
    verdict = catalog.choice_runs("deep_gemm", "jit", res.identities, cuda)
    assert path.deep_gemm == (res.resolved.major >= 10 and verdict is not None and verdict.runs)
    assert path.reason and "\n" not in path.reason
    if not path.deep_gemm and res.resolved.major >= 10:
        assert "no build" in path.reason and path.reason.endswith("the torch indexer")


def test_the_reported_cases():
    for cap in ("10.7", "11.0", "13.0"):
        assert not dsv41_indexer_deep_gemm(resolve(Capability(*map(int, cap.split(".")))), (13, 0)).deep_gemm
    for cap in ("10.0", "10.3", "12.0", "12.1"):  # SGLang's own pick, where DeepGEMM runs
        assert dsv41_indexer_deep_gemm(resolve(Capability(*map(int, cap.split(".")))), (13, 0)).deep_gemm
    assert not dsv41_indexer_deep_gemm(resolve(Capability(9, 0)), (13, 0)).deep_gemm
