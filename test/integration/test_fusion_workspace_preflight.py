"""SGLang 0.5.23's own FlashInfer workspace preflight (``flashinfer_comm_fusion.
_preflight_check_workspace_memory`` and its size function) on a node without multicast.

The CUDA driver is a stand-in: ``cuMulticastGetGranularity`` fails as it does on SM12x over
PCIe or on an H100 / H200 node with multicast off, ``cuMemCreate`` succeeds and records the
sizes; the vote runs on a gloo process group of world size 1 in this process.  No multicast
object is ever created.  Where the process's fusion backend is trtllm (whose FlashInfer
workspace is made with ``enable_multicast=False``), the preflight proceeds with the sizes
FlashInfer allocates; where the query succeeds, or for mnnvl, SGLang's own result stands."""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import routed  # noqa: E402

_SIZES = "sglang.srt.layers.flashinfer_comm_fusion._flashinfer_trtllm_workspace_allocation_sizes"
_RESOLVE = "sglang.srt.layers.flashinfer_comm_fusion._resolve_backend"
MIB = 1 << 20
SUCCESS, NOT_SUPPORTED = "CUDA_SUCCESS", "CUDA_ERROR_NOT_SUPPORTED"


@pytest.fixture(scope="module")
def fusion():
    from sglang.srt.layers import flashinfer_comm_fusion
    from sglang_arch.integrations.sglang import routing

    known = {target.path for target in routing.all_routed_targets()}
    with routed(*(path for path in (_SIZES, _RESOLVE) if path in known)):
        yield flashinfer_comm_fusion


@pytest.fixture(scope="module")
def cpu_group():
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield dist.group.WORLD
    finally:
        dist.destroy_process_group()


class Driver:
    """Stands in for cuda-python's driver bindings: allocation granularity 2 MiB, the multicast
    granularity query answering ``multicast`` (an error, or a granularity), ``cuMemCreate``
    recording each size."""

    CUresult = SimpleNamespace(CUDA_SUCCESS=SUCCESS)
    CUmemAllocationGranularity_flags = SimpleNamespace(CU_MEM_ALLOC_GRANULARITY_RECOMMENDED="alloc")
    CUmulticastGranularity_flags = SimpleNamespace(CU_MULTICAST_GRANULARITY_RECOMMENDED="mc")
    CUmulticastObjectProp = SimpleNamespace

    def __init__(self, multicast):
        self.multicast, self.created, self.released, self.queries = multicast, [], [], 0

    def cuMemGetAllocationGranularity(self, prop, flag):  # noqa: N802 (the driver's names)
        return SUCCESS, 2 * MIB

    def cuMulticastGetGranularity(self, prop, flag):  # noqa: N802
        self.queries += 1
        return (self.multicast, 0) if isinstance(self.multicast, str) else (SUCCESS, self.multicast)

    def cuMemCreate(self, size, prop, flags):  # noqa: N802
        self.created.append(size)
        return SUCCESS, f"handle{len(self.created)}"

    def cuMemRelease(self, handle):  # noqa: N802
        self.released.append(handle)


@pytest.fixture
def node(monkeypatch, fusion):
    """``node(capability, topology, backend, multicast)``: the machine the plugin decides for,
    the fusion backend asked (SGLang's ``exec.comm``), and the driver's multicast answer."""
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue
    from sglang_arch.integrations.sglang.glue import fusion as glue_fusion

    monkeypatch.setattr(glue_fusion, "_resolved", {}, raising=False)  # (a plugin that decides per call: none)

    def use(capability, topology, backend, multicast):
        ctx = runtime.machine(capability=capability, topology=topology, gpu_count=8, cuda=(13, 0))
        monkeypatch.setattr(glue, "current", lambda: ctx)
        driver = Driver(multicast)
        monkeypatch.setattr(fusion, "get_cuda_driver_bindings", lambda: driver)
        monkeypatch.setattr(fusion, "_make_flashinfer_workspace_allocation_prop",
                            lambda cuda_driver: SimpleNamespace(requestedHandleTypes="posix_fd"))
        monkeypatch.setattr(fusion, "get_exec", lambda: SimpleNamespace(
            comm=SimpleNamespace(flashinfer_allreduce_fusion_backend=backend)))
        monkeypatch.setattr(fusion, "get_parallel", lambda: SimpleNamespace(nnodes=1))
        return driver

    return use


def _preflight(fusion, cpu_group):
    import torch

    return fusion._preflight_check_workspace_memory(world_size=8, max_token_num=2048, hidden_dim=4096,
                                                    dtype=torch.bfloat16, cpu_group=cpu_group)


# FlashInfer's trtllm buffers for world size 8, 2048 tokens, hidden 4096, bf16: 128 MiB, 8 KiB of
# flags and 3 x 128 MiB of Lamport buffers, each rounded to 2 MiB (SGLang's mirror), plus the
# 2048-byte signal pad, rounded to the 2 MiB allocation granularity: no multicast alignment.
FLASHINFER_TRTLLM_SIZES = [130 * MIB, 4 * MIB, 386 * MIB]


@pytest.mark.parametrize("capability, topology, backend", [
    ("12.0", "pcie-p2p", "trtllm"),  # SM12x over PCIe
    ("12.0", "pcie-p2p", "auto"),
    ("9.0", "nvlink", "auto"),  # an H100 / H200 node with multicast off
    ("9.0", "nvlink", "trtllm"),
])
def test_trtllm_preflight_proceeds_without_multicast(fusion, cpu_group, node, capability, topology, backend):
    driver = node(capability, topology, backend, multicast=NOT_SUPPORTED)
    assert fusion.resolve_flashinfer_allreduce_fusion_backend() == "trtllm"
    assert _preflight(fusion, cpu_group) is True
    assert driver.created == FLASHINFER_TRTLLM_SIZES
    assert driver.queries == 3 and driver.released == ["handle3", "handle2", "handle1"]


def test_where_the_multicast_query_succeeds_sglangs_sizes_stand(fusion, cpu_group, node):
    driver = node("9.0", "nvswitch", "trtllm", multicast=512 * MIB)
    assert _preflight(fusion, cpu_group) is True
    assert driver.created == [512 * MIB] * 3  # aligned to the multicast granularity, as SGLang computes


def test_mnnvl_is_refused_at_resolution_without_multicast_and_its_preflight_is_sglangs(fusion, cpu_group, node):
    node("10.0", "nvlink", "mnnvl", multicast=NOT_SUPPORTED)
    with pytest.raises(ValueError, match="mnnvl fusion needs NVLink multicast"):
        fusion.resolve_flashinfer_allreduce_fusion_backend()
    driver = node("10.0", "nvswitch", "mnnvl", multicast=NOT_SUPPORTED)
    assert fusion.resolve_flashinfer_allreduce_fusion_backend() == "mnnvl"
    assert _preflight(fusion, cpu_group) is False  # SGLang's own answer: the query failed, skipped
    assert driver.created == []
