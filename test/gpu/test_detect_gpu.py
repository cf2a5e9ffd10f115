"""Detection on the real GPU: NVML, torch and the registry agree; the table's numbers hold."""

import pytest
from gpu_env import GPUS
from sglang_arch.arch import detect, node_resolution, resolve
from sglang_arch.arch.detect import _nvml_node, _torch_node


def test_nvml_and_torch_agree_with_the_registry(report):
    import torch

    nvml = _nvml_node()
    torch_view = _torch_node()
    assert nvml is not None and torch_view is not None
    assert nvml.capabilities == torch_view.capabilities
    assert [g.name for g in nvml.gpus] == [g.name for g in torch_view.gpus]
    node = detect()
    assert node.source == "nvml"
    for i, gpu in enumerate(node.gpus):
        assert gpu.capability.as_tuple() == torch.cuda.get_device_capability(i)
    res = node_resolution(node.capabilities)
    report("gpus", ", ".join(f"{g.name} sm_{g.capability.sm}" for g in node.gpus))
    report("resolution", f"{res.resolved} [{res.match}]")
    report("topology", node.topology.name)
    assert res.match == "exact", res.reason


def test_device_properties_match_the_table(report):
    import torch

    props = torch.cuda.get_device_properties(0)
    cap = "{}.{}".format(*torch.cuda.get_device_capability(0))
    profile = resolve(cap).profile
    report("sm_count", props.multi_processor_count)
    report("l2_bytes", getattr(props, "L2_cache_size", None))
    report("smem_per_block_optin", props.shared_memory_per_block_optin)
    report("smem_per_sm", props.shared_memory_per_multiprocessor)
    assert props.shared_memory_per_block_optin == profile.smem_per_block_kib * 1024
    assert props.shared_memory_per_multiprocessor == profile.smem_per_sm_kib * 1024


def test_multicast_off_means_no_nvswitch_topology():
    node = detect()
    if len(node.gpus) == 1:
        assert node.topology.name == "single"
    else:
        assert not node.topology.multicast  # NCCL_NVLS_ENABLE=0 etc. are set on these machines
        assert node.topology.p2p


@pytest.mark.skipif(GPUS < 2, reason="needs 2 GPUs")
def test_decisions_for_this_node_are_runnable():
    node = detect()
    res = node_resolution(node.capabilities)
    from sglang_arch.arch import decide

    d = decide(res, node.topology, len(node.gpus))
    assert d.symm_mem.enabled and d.symm_mem.algorithm == "two_shot"
