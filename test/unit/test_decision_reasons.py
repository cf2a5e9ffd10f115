"""Each collective decision's reason says which rule decided (found by mutation testing:
docs/mutation.md).  ``explain`` shows these to users; a wrong reason misleads as much as
a wrong decision."""

import pytest
from sglang_arch.arch import TOPOLOGIES, resolve
from sglang_arch.arch.policies import collectives as c

T = TOPOLOGIES


def test_symm_mem_reasons():
    h = resolve("9.0")
    assert c.torch_symm_mem(h, T["nvswitch"], 1).reason == "one GPU: nothing to all-reduce"
    d = c.torch_symm_mem(h, T["nvswitch"], 8)
    assert (d.enabled, d.algorithm, d.reason) == (True, "multimem", "tier 9.0, world size 8, nvswitch has multicast: multimem")
    d = c.torch_symm_mem(h, T["nvswitch"], 2)
    assert d.reason == "tier 9.0, world size 2, nvswitch (multimem not tuned for world size 2): two-shot over P2P"
    d = c.torch_symm_mem(h, T["nvlink"], 8)
    assert d.reason == ("no two-shot bound for world size 8 on tier 9.0 without multicast (measured: 2): off, as "
                        "stock SGLang")
    d = c.torch_symm_mem(h, T["nvlink"], 2)
    assert d.reason == ("tier 9.0, world size 2, nvlink (no multicast): two-shot over P2P below 16 MiB, measured "
                        "without multicast; larger reductions stay on NCCL")
    assert d.evidence == ("two-shot-ws2-sm90-no-multicast",)
    assert c.torch_symm_mem(h, T["pcie"], 2).reason == "topology pcie has no peer-to-peer access"
    assert c.torch_symm_mem(h, T["nvlink"], 2, nnodes=2).reason == (
        "2 nodes without NVLink multicast: two-shot needs peer-to-peer access, which does not span nodes")
    assert c.torch_symm_mem(resolve("8.0"), T["nvswitch"], 8).reason == "tier 8.0 has no torch symmetric-memory sizes"
    assert c.torch_symm_mem(resolve("10.0"), T["nvlink"], 2).reason == (
        "nvlink has no NVLink multicast and tier 10.0 has no two-shot bound measured without it: off, as stock "
        "SGLang (`sglang-arch tune collectives` on the node measures one)")
    assert c.torch_symm_mem(h, T["nvswitch"], 3).reason == "world size 3 has no size on tier 9.0 (sizes for 2, 4, 6, 8)"
    assert c.torch_symm_mem(resolve("9.5"), T["nvlink"], 2).reason.endswith(
        "(family fallback from 9.5: the nearest tier's bound, as --enable-torch-symm-mem asks)")


def test_portable_devices_get_no_collectives_with_the_resolution_reason():
    p = resolve("6.1")
    for fn in (c.torch_symm_mem, c.custom_allreduce):
        d = fn(p, T["nvswitch"], 8)
        assert d.enabled is False and d.max_bytes == 0 and d.reason == p.reason
    assert c.custom_allreduce(p, T["nvswitch"], 8).table is None


def test_custom_allreduce_reasons_and_table():
    h = resolve("9.0")
    d = c.custom_allreduce(h, T["nvswitch"], 1)
    assert (d.enabled, d.table, d.reason) == (False, "sm90", "one GPU: nothing to all-reduce")
    assert c.custom_allreduce(h, T["pcie"], 2).reason == "topology pcie has no peer-to-peer access"
    assert c.custom_allreduce(h, T["pcie-p2p"], 4).reason == "4 GPUs on pcie-p2p: above 2 GPUs it needs full NVLink"
    assert c.custom_allreduce(h, T["nvlink"], 16).reason == "world size 16 not in the sm90 table (2, 3, 4, 5, 6, 7, 8)"
    assert c.custom_allreduce(resolve("12.0"), T["nvlink"], 17).reason == (
        "world size 17 not in the default table (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)")
    assert c.custom_allreduce(h, T["nvlink"], 8).reason == "tier 9.0, world size 8 on nvlink: tuned sm90 table"
    assert c.custom_allreduce(resolve("12.0"), T["pcie-p2p"], 2).reason == (
        "tier 12.0, world size 2 on pcie-p2p: conservative default thresholds")


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_fusion_node_count_must_be_an_integer_of_at_least_one(bad):
    with pytest.raises(ValueError, match=rf"^invalid node count {bad!r}; accepted: an integer >= 1$".replace("(", r"\(")):
        c.allreduce_fusion(resolve("10.0"), T["nvswitch"], 8, bad)


def test_fusion_request_must_be_known():
    with pytest.raises(ValueError, match=r"^invalid fusion backend 'nccl'; accepted: auto, trtllm, mnnvl, cutedsl$"):
        c.allreduce_fusion(resolve("10.0"), T["nvswitch"], 8, 1, "nccl")


def test_fusion_defaults_to_one_node_and_auto():
    d = c.allreduce_fusion(resolve("9.0"), T["nvswitch"], 8)
    assert (d.backend, d.reason) == ("trtllm", "tier 9.0, 8 GPUs on nvswitch, one node: trtllm")


def test_fusion_reasons():
    b = resolve("10.0")
    assert c.allreduce_fusion(b, T["nvswitch"], 1).reason == "one GPU: nothing to all-reduce"
    assert c.allreduce_fusion(resolve("8.0"), T["nvlink"], 8).reason == "tier 8.0 has no FlashInfer all-reduce fusion kernels"
    d = c.allreduce_fusion(resolve("13.0"), T["pcie-p2p"], 8)
    assert d.enabled is False and d.reason == "generation match of tier 12.1: flashinfer_trtllm_comm has no build for 13.0 (builds: jit:9.x, jit:10.x, jit:12.x)"
    assert c.allreduce_fusion(b, T["nvswitch"], 8, 2).reason == "tier 10.0, 8 GPUs on nvswitch, 2 nodes: mnnvl"
    assert c.allreduce_fusion(b, T["nvswitch"], 8, 2, "trtllm").reason == (
        "trtllm fusion is not available on tier 10.0 with 2 nodes (available: mnnvl, cutedsl)")
    assert c.allreduce_fusion(b, T["nvswitch"], 8, 1, "mnnvl").reason == "tier 10.0, 8 GPUs on nvswitch, one node: mnnvl"
    assert c.allreduce_fusion(resolve("9.0"), T["nvswitch"], 8, 1, "cutedsl").reason == (
        "cutedsl fusion is not available on tier 9.0 with one node (available: trtllm, mnnvl)")
    assert c.allreduce_fusion(resolve("9.0"), T["nvswitch"], 8, 3).reason == (
        "auto fusion is not available on tier 9.0 with 3 nodes (available: none)")
    assert c.allreduce_fusion(resolve("12.0"), T["pcie"], 8).reason == (
        "trtllm fusion needs peer-to-peer access; pcie has none")
