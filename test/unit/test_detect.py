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


# Each library's own switch for NVLS multicast (from its documentation), and values
# that leave it on.  Any one of them set to "off" must keep multimem from being chosen.
MULTICAST_OFF = [
    ("NCCL_NVLS_ENABLE", "0"),  # NCCL environment variables: NVLS (NVLink SHARP) support
    ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"),  # PyTorch symmetric memory
    ("NVSHMEM_DISABLE_NVLS", "1"),  # NVSHMEM environment variables
]
MULTICAST_LEFT_ON = [("NCCL_NVLS_ENABLE", "1"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "0"),
                     ("NVSHMEM_DISABLE_NVLS", "0"), ("NCCL_NVLS_ENABLE", "")]


def _nvswitch_node():
    return Node((Gpu(0, "h", Capability(9, 0)), Gpu(1, "h", Capability(9, 0))), TOPOLOGIES["nvswitch"], "nvml")


@pytest.fixture
def no_multicast_env(monkeypatch):
    for name, _ in MULTICAST_OFF:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("name,value", MULTICAST_OFF)
def test_multicast_switched_off_by_each_variable(no_multicast_env, name, value):
    no_multicast_env.setenv(name, value)
    out = _apply_topology_env(_nvswitch_node())
    assert out.topology.name == "nvlink" and f"multicast turned off by {name}={value}" == out.notes[-1]
    # ... and through detect(), as the plugin sees the node
    node = detect(probes=[_nvswitch_node])
    assert node.topology.name == "nvlink" and not node.topology.multicast


@pytest.mark.parametrize("name,value", MULTICAST_LEFT_ON)
def test_multicast_stays_on_otherwise(no_multicast_env, name, value):
    no_multicast_env.setenv(name, value)
    assert detect(probes=[_nvswitch_node]).topology.name == "nvswitch"
    assert _apply_topology_env(_nvswitch_node()).notes == ()


def test_multicast_off_names_every_variable_that_asked(no_multicast_env):
    for name, value in MULTICAST_OFF:
        no_multicast_env.setenv(name, value)
    out = _apply_topology_env(_nvswitch_node())
    prefix = "multicast turned off by "
    assert out.notes[-1].startswith(prefix)
    assert sorted(out.notes[-1][len(prefix):].split(", ")) == sorted(f"{n}={v}" for n, v in MULTICAST_OFF)


def test_multicast_off_leaves_other_topologies_alone(no_multicast_env):
    no_multicast_env.setenv("NCCL_NVLS_ENABLE", "0")
    for name in ("single", "nvlink", "pcie-p2p", "pcie"):
        node = Node((Gpu(0, "g", Capability(12, 0)),), TOPOLOGIES[name], "nvml")
        assert _apply_topology_env(node) == node


def test_multicast_off_wins_over_a_forced_topology_on_a_real_node(no_multicast_env):
    """A forced nvswitch must not bring multimem back where multicast is kept off."""
    no_multicast_env.setenv("NCCL_NVLS_ENABLE", "0")
    no_multicast_env.setenv("SGLANG_ARCH_TOPOLOGY", "nvswitch")
    out = _apply_topology_env(_nvswitch_node())
    assert out.topology.name == "nvlink"


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
