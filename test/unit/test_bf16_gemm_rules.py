"""The BF16 GEMM's auto pick (policies/moe.py ``bf16_gemm``), without SGLang.

SGLang 0.5.23's ``initialize_bf16_gemm_config`` picks its CuTe DSL kernel for
``--bf16-gemm-backend auto`` on any major-10 GPU (CUDA >= 12.8); the registry keeps that
wherever the kernel has a build for the device, and stays ``auto`` (cuBLAS through torch)
elsewhere.
"""

import pytest
from sglang_arch.arch import catalog, parse_capability, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import moe

ALL_CAPS = [Capability(major, minor) for major in range(6, 16) for minor in range(10)]
KNOWN = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
CUDAS = [(12, 4), (12, 8), (13, 0)]


def _res(cap):
    return resolve(parse_capability(cap) if isinstance(cap, str) else cap)


@pytest.mark.parametrize("cuda", CUDAS)
@pytest.mark.parametrize("cap", ALL_CAPS, ids=str)
def test_cutedsl_only_where_the_catalog_builds_it_for_the_device(cap, cuda):
    d = moe.bf16_gemm(_res(cap), cuda)
    assert d.choice in ("cutedsl", "auto")
    runs = catalog.choice_runs(moe.BF16_GEMM, "cutedsl", cap, cuda).runs
    assert (d.choice == "cutedsl") == (runs and d.upstream == "cutedsl"), (str(cap), cuda, d.reason)


@pytest.mark.parametrize("cuda", CUDAS)
@pytest.mark.parametrize("cap", KNOWN)
def test_exact_tiers_equal_upstream(cap, cuda):
    res = _res(cap)
    assert res.match == "exact"
    d = moe.bf16_gemm(res, cuda)
    assert d.choice == d.upstream and not d.changed, (cap, cuda, d.reason)


def test_upstream_rule_is_sglangs_0_5_23_rule():
    # get_platform().is_sm100: major 10 and CUDA >= 12.8
    assert moe.upstream_bf16_gemm(_res("10.0"), (12, 8)) == "cutedsl"
    assert moe.upstream_bf16_gemm(_res("10.7"), (13, 0)) == "cutedsl"
    assert moe.upstream_bf16_gemm(_res("10.0"), (12, 4)) == "auto"
    for cap in ("9.0", "11.0", "12.0", "12.1", "8.9"):
        assert moe.upstream_bf16_gemm(_res(cap), (13, 0)) == "auto", cap


def test_an_unknown_major_10_stays_on_torch():
    d = moe.bf16_gemm(_res("10.5"), (13, 0))
    assert d.upstream == "cutedsl" and d.choice == "auto" and d.changed
    assert "cannot run on 10.5" in d.reason and "sglang_cutedsl_bf16_gemm" in d.reason


def test_sm110_keeps_torch_though_cute_dsl_admits_its_mma():
    """11.0 is in the tcgen05 MMA's arch family, but SGLang's kernel raises off major 10."""
    assert not catalog.choice_runs(moe.BF16_GEMM, "cutedsl", Capability(11, 0), (13, 0)).runs
    assert moe.bf16_gemm(_res("11.0"), (13, 0)).choice == "auto"
