"""detect's NVML and torch probes, over fakes of pynvml and torch (no GPU needed).

What a probe must make of what the driver says: names, capabilities, memory, the
visible devices, the topology rules, and a failure turned into a note, never an error.
"""

import sys
from types import SimpleNamespace

import pytest
from sglang_arch.arch import Capability, detect
from sglang_arch.arch.detect import (
    Gpu,
    _has_nvswitch,
    _nvml_node,
    _nvml_topology,
    _torch_node,
    _visible,
)

OK, NOT_OK = 0, 1


class FakeNvml:
    """pynvml as nvidia-ml-py 12/13 presents it, for a node described by arguments."""

    NVML_P2P_STATUS_OK = OK
    NVML_P2P_CAPS_INDEX_READ = (0,)  # nvidia-ml-py 13 defines it with a stray comma
    NVML_P2P_CAPS_INDEX_NVLINK = 2

    class NVMLError(Exception):
        pass

    def __init__(self, gpus=(), p2p=None, nvlink=None, switch_links=(), broken_links=(), max_links=None,
                 init_error=False, bytes_names=False):
        self.gpus = list(gpus)  # (name, (major, minor), memory)
        self.p2p = p2p or (lambda a, b: True)
        self.nvlink = nvlink or (lambda a, b: False)
        self.switch_links, self.broken_links = set(switch_links), set(broken_links)
        if max_links is not None:
            self.NVML_NVLINK_MAX_LINKS = max_links
        self.init_error, self.bytes_names = init_error, bytes_names
        self.calls = []

    def nvmlInit(self):
        self.calls.append("init")
        if self.init_error:
            raise self.NVMLError("driver not loaded")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        return f"h{i}"

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return self.gpus[int(h[1:])][1]

    def nvmlDeviceGetName(self, h):
        name = self.gpus[int(h[1:])][0]
        return name.encode() if self.bytes_names else name

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(total=self.gpus[int(h[1:])][2], free=0, used=0)

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        assert isinstance(index, int), "ctypes refuses anything but an int here"
        assert a is not None and b is not None and a != b, (a, b)
        self.calls.append(("p2p", a, b, index))
        ok = self.nvlink(a, b) if index == self.NVML_P2P_CAPS_INDEX_NVLINK else self.p2p(a, b)
        return OK if ok else NOT_OK

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
        assert handle is not None
        self.calls.append(("link", handle, link))
        if link in self.broken_links:
            raise self.NVMLError("link down")
        return 2 if link in self.switch_links else 0


H200 = ("NVIDIA H200", (9, 0), 141 << 30)
PRO6000 = ("NVIDIA RTX PRO 6000 Blackwell", (12, 0), 96 << 30)


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def install(fake):
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return install


def test_nvml_node_reads_every_gpu_and_shuts_down(nvml):
    fake = nvml(FakeNvml([H200, H200], nvlink=lambda a, b: True, switch_links={0}))
    node = _nvml_node()
    assert node.source == "nvml" and node.notes == ()
    assert node.gpus == (Gpu(0, "NVIDIA H200", Capability(9, 0), 141 << 30),
                         Gpu(1, "NVIDIA H200", Capability(9, 0), 141 << 30))
    assert node.topology.name == "nvswitch"
    assert fake.calls[0] == "init" and fake.calls[-1] == "shutdown"


def test_nvml_names_given_as_bytes_are_decoded(nvml):
    nvml(FakeNvml([PRO6000], bytes_names=True))
    node = _nvml_node()
    assert node.gpus[0].name == "NVIDIA RTX PRO 6000 Blackwell" and node.topology.name == "single"


def test_nvml_without_gpus_is_no_node_and_still_shuts_down(nvml):
    fake = nvml(FakeNvml([]))
    assert _nvml_node() is None
    assert fake.calls == ["init", "shutdown"]


def test_nvml_that_cannot_start_is_an_error_with_the_reason(nvml):
    nvml(FakeNvml([H200], init_error=True))
    with pytest.raises(RuntimeError, match=r"^NVML unavailable \(driver not loaded\)$"):
        _nvml_node()


def test_missing_nvml_package_is_an_error_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with pytest.raises(RuntimeError, match=r"^nvidia-ml-py is not installed$"):
        _nvml_node()


def test_detect_turns_a_broken_probe_into_a_note_and_asks_the_next(nvml):
    nvml(FakeNvml([H200], init_error=True))

    def torch_probe():
        from sglang_arch.arch.detect import Node
        from sglang_arch.arch.topology import TOPOLOGIES

        return Node((Gpu(0, "t", Capability(9, 0)),), TOPOLOGIES["single"], "torch", ("from torch",))

    node = detect(probes=[_nvml_node, torch_probe])
    assert node.source == "torch"
    assert node.notes == ("nvml_node: RuntimeError: NVML unavailable (driver not loaded)", "from torch")


def test_detect_with_no_gpu_anywhere_says_so():
    def none_probe():
        return None

    node = detect(probes=[none_probe, none_probe])
    assert node.gpus == () and node.topology.name == "single" and node.source == "none"
    assert node.notes == ("no NVIDIA GPU found (NVML and torch report none)",)


@pytest.mark.parametrize("spec,expected", [
    (None, [0, 1, 2, 3]), ("", []), ("2", [2]), ("3,1", [3, 1]), ("0, 2", [0, 2]), ("1,7", [1]),
    ("-1", []), ("GPU-8f6e1d2c,GPU-1a2b", [1, 0]), ("0,,1", [0]), ("GPU-8f,GPU-1a", []), ("GPU-8f6,GPU-ff", [1]), ("+1,-0", [1, 0]), ("GPU-,0", []),
])
def test_visible_devices(monkeypatch, spec, expected):
    """CUDA's rule: in order; an invalid entry (an empty one too) hides every one after it."""
    gpus = [Gpu(i, f"g{i}", Capability(9, 0)) for i in range(4)]
    uuids = ["GPU-1a2b3c", "GPU-8f6e1d2c00", "GPU-8f00", "GPU-77"]
    if spec is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", spec)
    assert [g.index for g in _visible(gpus, uuids)] == expected


def test_nvml_node_honours_visible_devices_for_gpus_and_topology(nvml, monkeypatch):
    fake = nvml(FakeNvml([H200, PRO6000, H200], p2p=lambda a, b: {a, b} != {"h0", "h1"}))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    node = _nvml_node()
    assert [(g.index, g.capability) for g in node.gpus] == [(2, Capability(9, 0)), (0, Capability(9, 0))]
    assert node.topology.name == "pcie-p2p"  # h0-h1 lacks P2P, but h1 is not visible
    assert {c[1:3] for c in fake.calls if c[0] == "p2p"} <= {("h2", "h0")}


@pytest.mark.parametrize("count", [2, 3, 4])
def test_topology_checks_every_pair_once(count):
    """A missing link between any two GPUs (the first two, the last two, the ends)
    makes the node pcie; each unordered pair is asked once per capability."""
    handles = [f"h{i}" for i in range(count)]
    pairs = [(handles[i], handles[j]) for i in range(count) for j in range(i + 1, count)]
    fake = FakeNvml()
    assert _nvml_topology(fake, handles).name == "pcie-p2p"
    asked = [c[1:3] for c in fake.calls if c[0] == "p2p" and c[3] == 0]
    assert asked == pairs
    for missing in pairs:
        fake = FakeNvml(p2p=lambda a, b, m=missing: {a, b} != set(m))
        assert _nvml_topology(fake, handles).name == "pcie", missing


def test_topology_of_one_gpu_is_single_without_asking():
    fake = FakeNvml()
    assert _nvml_topology(fake, ["h0"]).name == "single" and fake.calls == []
    assert _nvml_topology(fake, []).name == "single"


@pytest.mark.parametrize("nvlink_pairs,switch,expected", [
    ("all", True, "nvswitch"), ("all", False, "nvlink"), ("some", True, "pcie-p2p"), ("none", True, "pcie-p2p"),
])
def test_topology_needs_nvlink_on_every_pair(nvlink_pairs, switch, expected):
    nvlink = {"all": lambda a, b: True, "some": lambda a, b: {a, b} != {"h1", "h2"},
              "none": lambda a, b: False}[nvlink_pairs]
    fake = FakeNvml(nvlink=nvlink, switch_links={0} if switch else set())
    assert _nvml_topology(fake, ["h0", "h1", "h2"]).name == expected


def test_nvswitch_is_found_on_any_link_and_broken_links_are_skipped():
    assert _has_nvswitch(FakeNvml(switch_links={5}, broken_links={0, 1}), "h0") is True
    assert _has_nvswitch(FakeNvml(switch_links=set(), broken_links={0}), "h0") is False
    # Only the links NVML says exist are asked (17 is the last of the default 18).
    assert _has_nvswitch(FakeNvml(switch_links={17}), "h0") is True
    assert _has_nvswitch(FakeNvml(switch_links={18}), "h0") is False
    assert _has_nvswitch(FakeNvml(switch_links={3}, max_links=4), "h0") is True
    assert _has_nvswitch(FakeNvml(switch_links={4}, max_links=4), "h0") is False
    fake = FakeNvml(switch_links={2}, max_links=4)
    _has_nvswitch(fake, "h0")
    assert [c[2] for c in fake.calls] == [0, 1, 2]  # stops at the first switch


class FakeTorch:
    def __init__(self, caps=(), available=True, cuda="12.8", peer=lambda i, j: True):
        self.caps, self.peer = list(caps), peer
        self.version = SimpleNamespace(cuda=cuda)
        self.cuda = SimpleNamespace(
            is_available=lambda: available,
            device_count=lambda: len(self.caps),
            get_device_name=lambda i: f"gpu{i}",
            get_device_capability=lambda i: self.caps[i],
            get_device_properties=lambda i: SimpleNamespace(total_memory=(i + 1) << 30),
            can_device_access_peer=lambda i, j: self.peer(i, j),
        )


@pytest.fixture
def torch_fake(monkeypatch):
    def install(fake):
        monkeypatch.setitem(sys.modules, "torch", fake)
        return fake

    return install


def test_torch_node_reads_every_gpu(torch_fake):
    torch_fake(FakeTorch([(12, 0), (12, 0), (12, 0)]))
    node = _torch_node()
    assert node.source == "torch" and node.topology.name == "pcie-p2p"
    assert node.gpus == tuple(Gpu(i, f"gpu{i}", Capability(12, 0), (i + 1) << 30) for i in range(3))
    assert node.notes == ("torch cannot see NVLink; topology is P2P-only at best",)


@pytest.mark.parametrize("missing", [(0, 1), (1, 0), (2, 1), (0, 2)])
def test_torch_topology_needs_peer_access_both_ways_on_every_pair(torch_fake, missing):
    torch_fake(FakeTorch([(9, 0)] * 3, peer=lambda i, j: (i, j) != missing))
    assert _torch_node().topology.name == "pcie"


def test_torch_node_of_one_gpu_is_single(torch_fake):
    def never(i, j):
        raise AssertionError("one GPU: no peer to ask")

    torch_fake(FakeTorch([(8, 9)], peer=never))
    node = _torch_node()
    assert node.topology.name == "single" and len(node.gpus) == 1


@pytest.mark.parametrize("fake", [FakeTorch([(9, 0)], available=False), FakeTorch([(9, 0)], cuda=None)])
def test_torch_without_cuda_is_no_node(torch_fake, fake):
    torch_fake(fake)
    assert _torch_node() is None


def test_torch_not_installed_is_no_node(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert _torch_node() is None


# --- simulation and the smaller rules (found by mutation testing: docs/mutation.md) ---

def test_simulation_by_arguments_wins_and_says_so(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_TOPOLOGY", "nvswitch")
    node = detect(capability="12.0", topology="pcie", gpu_count=2)
    assert node.source == "simulated" and node.notes == ("simulated",)
    assert node.topology.name == "pcie"  # the argument, not the environment
    assert node.gpus == (Gpu(0, "simulated sm_120", Capability(12, 0)), Gpu(1, "simulated sm_120", Capability(12, 0)))


def test_simulation_by_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "sm_90")
    node = detect()
    assert node.notes == ("simulated by SGLANG_ARCH_CAPABILITY=9.0",)
    assert node.topology.name == "single" and len(node.gpus) == 1  # one GPU by default
    monkeypatch.setenv("SGLANG_ARCH_GPU_COUNT", "2")
    assert detect().topology.name == "nvswitch"  # 9.0's typical topology from 2 GPUs on


def test_forced_topology_replaces_the_probed_one(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_TOPOLOGY", "pcie")
    node = detect(probes=[lambda: FakeProbeNode()])
    assert node.topology.name == "pcie" and node.notes[-1] == "topology set by SGLANG_ARCH_TOPOLOGY"
    monkeypatch.setenv("SGLANG_ARCH_TOPOLOGY", "mesh")
    with pytest.raises(ValueError, match=r"^SGLANG_ARCH_TOPOLOGY: invalid topology 'mesh'"):
        detect(probes=[lambda: FakeProbeNode()])


def FakeProbeNode():
    from sglang_arch.arch.detect import Node
    from sglang_arch.arch.topology import TOPOLOGIES

    return Node((Gpu(0, "h", Capability(9, 0)), Gpu(1, "h", Capability(9, 0))), TOPOLOGIES["nvswitch"], "nvml")


def test_a_broken_probe_is_named_without_its_underscores():
    def Xprobe_():
        raise OSError("gone")

    node = detect(probes=[Xprobe_, lambda: None])
    assert node.notes[0] == "Xprobe: OSError: gone"


def test_a_visible_index_past_the_end_hides_every_later_one(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,4,3")
    gpus = [Gpu(i, f"g{i}", Capability(9, 0)) for i in range(4)]
    assert [g.index for g in _visible(gpus)] == [0]


def test_nvswitch_is_asked_of_the_first_gpu():
    class Fake(FakeNvml):
        def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle, link):
            return 2 if handle == "h0" else 0

    assert _nvml_topology(Fake(nvlink=lambda a, b: True), ["h0", "h1"]).name == "nvswitch"


def test_two_gpus_through_torch_are_a_pair(torch_fake):
    torch_fake(FakeTorch([(12, 0), (12, 0)]))
    assert _torch_node().topology.name == "pcie-p2p"
    torch_fake(FakeTorch([(12, 0), (12, 0)], peer=lambda i, j: False))
    assert _torch_node().topology.name == "pcie"
