import pytest
from sglang_arch.arch import Capability, detect, node_resolution
from sglang_arch.arch.detect import Gpu, Node, _apply_topology_env
from sglang_arch.arch.topology import TOPOLOGIES


def test_simulation_by_environment(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "sm_120")
    monkeypatch.setenv("SGLANG_ARCH_GPU_COUNT", "8")
    node = detect()
    assert node.source == "simulated" and len(node.gpus) == 8
    assert node.topology.name == "pcie-p2p"  # 12.0's typical topology
    monkeypatch.setenv("SGLANG_ARCH_TOPOLOGY", "pcie")
    assert detect().topology.name == "pcie"


@pytest.mark.parametrize("name,value,message", [
    ("SGLANG_ARCH_CAPABILITY", "twelve", "SGLANG_ARCH_CAPABILITY: invalid compute capability 'twelve'"),
    ("SGLANG_ARCH_GPU_COUNT", "zero", "SGLANG_ARCH_GPU_COUNT: invalid GPU count 'zero'"),
    ("SGLANG_ARCH_TOPOLOGY", "mesh", "SGLANG_ARCH_TOPOLOGY: invalid topology 'mesh'"),
])
def test_bad_simulation_env_names_the_variable(monkeypatch, name, value, message):
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "9.0")
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        detect()


def test_probe_order_and_broken_probe_is_a_note():
    def broken():
        raise RuntimeError("driver on fire")

    def torch_like():
        return Node((Gpu(0, "fake", Capability(9, 0)),), TOPOLOGIES["single"], "torch")

    node = detect(probes=[broken, torch_like])
    assert node.source == "torch" and any("driver on fire" in n for n in node.notes)
    none = detect(probes=[lambda: None])
    assert none.source == "none" and not none.gpus and "no NVIDIA GPU found" in none.notes[-1]


def test_multicast_switched_off_by_environment(monkeypatch):
    node = Node((Gpu(0, "h", Capability(9, 0)), Gpu(1, "h", Capability(9, 0))), TOPOLOGIES["nvswitch"], "nvml")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    out = _apply_topology_env(node)
    assert out.topology.name == "nvlink" and "NCCL_NVLS_ENABLE=0" in out.notes[-1]


def test_mixed_node_demotes_the_match():
    same = node_resolution([Capability(12, 0), Capability(12, 0)])
    assert same.match == "exact"
    family = node_resolution([Capability(10, 0), Capability(10, 3)])
    assert family.match == "family" and str(family.resolved) == "10.0" and family.has("tcgen05") is not False
    mixed = node_resolution([Capability(9, 0), Capability(12, 0)])
    assert mixed.match == "generation" and str(mixed.resolved) == "9.0"
    assert not mixed.has("wgmma")  # 12.0 cannot run sm_90a code
    assert "mixed node (9.0, 12.0)" in mixed.reason
    with pytest.raises(ValueError):
        node_resolution([])


class _FakeNvml:
    """Just enough of pynvml for the topology rules."""

    NVML_P2P_STATUS_OK = 0
    NVML_P2P_CAPS_INDEX_READ = (0,)  # as nvidia-ml-py 13 defines it (a stray comma)
    NVML_P2P_CAPS_INDEX_NVLINK = 2
    NVML_NVLINK_MAX_LINKS = 4

    class NVMLError(Exception):
        pass

    def __init__(self, p2p, nvlink, switch):
        self.p2p, self.nvlink, self.switch = p2p, nvlink, switch

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert isinstance(index, int), "ctypes refuses anything but an int here"
        ok = self.nvlink if index == self.NVML_P2P_CAPS_INDEX_NVLINK else self.p2p
        return 0 if ok else 1

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        return 2 if self.switch else 0


@pytest.mark.parametrize("p2p,nvlink,switch,expected", [
    (True, True, True, "nvswitch"), (True, True, False, "nvlink"),
    (True, False, False, "pcie-p2p"), (False, False, False, "pcie"),
])
def test_nvml_topology_rules(p2p, nvlink, switch, expected):
    from sglang_arch.arch.detect import _nvml_topology

    assert _nvml_topology(_FakeNvml(p2p, nvlink, switch), ["a", "b", "c"]).name == expected
    assert _nvml_topology(_FakeNvml(p2p, nvlink, switch), ["a"]).name == "single"
