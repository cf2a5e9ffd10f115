"""Where capabilities and topology come from: simulation, NVML, torch, in that order.

An explicit simulation (``SGLANG_ARCH_CAPABILITY`` / ``SGLANG_ARCH_TOPOLOGY`` /
``SGLANG_ARCH_GPU_COUNT``, or arguments) wins, because someone asked for it.  NVML
comes next: it creates no CUDA context, so it is safe before SGLang spawns workers.
torch is the last resort (it does create a context).  Nothing is imported until asked.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from typing import Callable, List, Optional, Sequence, Tuple

from .capability import Capability, parse_capability
from .registry import MATCH_KINDS, Resolution, resolve
from .topology import TOPOLOGIES, Topology, parse_topology
from .validate import MAX_GPUS_PER_NODE, parse_int, shown

logger = logging.getLogger("sglang_arch")

ENV_CAPABILITY = "SGLANG_ARCH_CAPABILITY"
ENV_TOPOLOGY = "SGLANG_ARCH_TOPOLOGY"
ENV_GPU_COUNT = "SGLANG_ARCH_GPU_COUNT"
# The settings that turn multicast off (torch symmetric memory, NCCL's NVLS, NVSHMEM): any
# one of them set means the multimem path must not be chosen.  The tuner and the GPU tests
# set all of them (shared machines keep multicast off).
MULTICAST_OFF = {"TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1"}


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    capability: Capability
    memory_bytes: Optional[int] = None


@dataclass(frozen=True)
class Node:
    """The GPUs this process can see, how they connect, and who said so."""

    gpus: Tuple[Gpu, ...]
    topology: Topology
    source: str  # "simulated" | "nvml" | "torch" | "none"
    notes: Tuple[str, ...] = field(default_factory=tuple)

    @property
    def capabilities(self) -> Tuple[Capability, ...]:
        return tuple(g.capability for g in self.gpus)


def detect(*, capability: Optional[str] = None, topology: Optional[str] = None,
           gpu_count: Optional[int] = None, probes: Optional[Sequence[Callable[[], Optional[Node]]]] = None) -> Node:
    """Describe this node.  Arguments (or the environment) simulate a machine."""
    sim = simulated_node(capability, topology, gpu_count)
    if sim is not None:
        return sim
    notes: List[str] = []
    for probe in probes if probes is not None else (_nvml_node, _torch_node):
        try:
            node = probe()
        except Exception as exc:  # a broken driver must not stop anything
            notes.append(f"{probe.__name__.strip('_')}: {type(exc).__name__}: {exc}")
            continue
        if node is not None:
            node = _apply_topology_env(node)
            return replace(node, notes=tuple(notes) + node.notes)
    return Node((), TOPOLOGIES["single"], "none", tuple(notes) + ("no NVIDIA GPU found (NVML and torch report none)",))


def simulated_node(capability: Optional[str] = None, topology: Optional[str] = None,
                   gpu_count: Optional[int] = None) -> Optional[Node]:
    cap_text = capability if capability is not None else os.environ.get(ENV_CAPABILITY) or None
    if cap_text is None:
        return None
    cap = _parse_env(parse_capability, cap_text, ENV_CAPABILITY)
    count = gpu_count if gpu_count is not None else _parse_env(_parse_count, os.environ.get(ENV_GPU_COUNT) or "1", ENV_GPU_COUNT)
    count = _parse_count(count)
    topo_text = topology if topology is not None else os.environ.get(ENV_TOPOLOGY) or None
    if topo_text is not None:
        topo = _parse_env(parse_topology, topo_text, ENV_TOPOLOGY)
    else:
        topo = TOPOLOGIES["single"] if count == 1 else TOPOLOGIES[resolve(cap).profile.topology]
    gpus = tuple(Gpu(i, f"simulated sm_{cap.sm}", cap) for i in range(count))
    return Node(gpus, topo, "simulated", (f"simulated by {ENV_CAPABILITY}={cap}" if capability is None else "simulated",))


def _parse_count(value: object) -> int:
    """A GPU count of one node: 1 to MAX_GPUS_PER_NODE (NVL72), ASCII digits."""
    try:
        return parse_int(value, "GPU count", 1, MAX_GPUS_PER_NODE)
    except ValueError:
        raise ValueError(f"invalid GPU count {shown(value)}; accepted: an integer >= 1 and <= {MAX_GPUS_PER_NODE} "
                         f"(GPUs of one node, ASCII digits)") from None


def _parse_env(parser: Callable, text: str, name: str):
    try:
        return parser(text)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


def _apply_topology_env(node: Node) -> Node:
    forced = os.environ.get(ENV_TOPOLOGY)
    if forced:
        node = replace(node, topology=_parse_env(parse_topology, forced, ENV_TOPOLOGY),
                       notes=node.notes + (f"topology set by {ENV_TOPOLOGY}",))
    return _apply_multicast_env(node)


def _apply_multicast_env(node: Node) -> Node:
    """On a real node, multicast turned off in the environment wins over the topology,
    detected or forced by SGLANG_ARCH_TOPOLOGY: with it off, symmetric memory must not
    choose multimem.  A simulated machine (SGLANG_ARCH_CAPABILITY) is what was asked for."""
    off = [f"{k}={v}" for k, v in MULTICAST_OFF.items() if os.environ.get(k, "").strip() == v]
    if node.topology.multicast and off:
        return replace(node, topology=TOPOLOGIES["nvlink"],
                       notes=node.notes + (f"multicast turned off by {', '.join(off)}",))
    return node


def _nvml_node() -> Optional[Node]:
    try:
        import pynvml
    except ImportError:
        raise RuntimeError("nvidia-ml-py is not installed") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise RuntimeError(f"NVML unavailable ({exc})") from None
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            return None
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        gpus = []
        for i, h in enumerate(handles):
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else name
            mem = pynvml.nvmlDeviceGetMemoryInfo(h).total
            gpus.append(Gpu(i, name, Capability(major, minor), mem))
        gpus = _visible(gpus)
        return Node(tuple(gpus), _nvml_topology(pynvml, [handles[g.index] for g in gpus]), "nvml")
    finally:
        pynvml.nvmlShutdown()


def _visible(gpus: List[Gpu]) -> List[Gpu]:
    """Honour CUDA_VISIBLE_DEVICES when it lists plain indices (NVML ignores it)."""
    spec = os.environ.get("CUDA_VISIBLE_DEVICES")
    if spec is None:
        return gpus
    try:
        picked = [int(x) for x in spec.split(",") if x.strip()]
    except ValueError:  # UUIDs: keep everything, the count may be off
        return gpus
    return [gpus[i] for i in picked if 0 <= i < len(gpus)]


def _nvml_topology(pynvml, handles) -> Topology:
    if len(handles) <= 1:
        return TOPOLOGIES["single"]

    def all_pairs(index) -> bool:
        for i, a in enumerate(handles):
            for b in handles[i + 1:]:
                if pynvml.nvmlDeviceGetP2PStatus(a, b, index) != pynvml.NVML_P2P_STATUS_OK:
                    return False
        return True

    p2p = all_pairs(_nvml_int(pynvml.NVML_P2P_CAPS_INDEX_READ))
    nvlink = all_pairs(_nvml_int(pynvml.NVML_P2P_CAPS_INDEX_NVLINK))
    if nvlink:
        return TOPOLOGIES["nvswitch" if _has_nvswitch(pynvml, handles[0]) else "nvlink"]
    return TOPOLOGIES["pcie-p2p" if p2p else "pcie"]


def _nvml_int(value) -> int:
    """nvidia-ml-py 13 defines NVML_P2P_CAPS_INDEX_READ as ``0,`` (a tuple); ctypes
    refuses that (seen on an H200 node), so constants are normalised here."""
    return int(value[0]) if isinstance(value, tuple) else int(value)


def _has_nvswitch(pynvml, handle) -> bool:
    for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            if pynvml.nvmlDeviceGetNvLinkRemoteDeviceType(handle, link) == 2:  # NVML_NVLINK_DEVICE_TYPE_SWITCH
                return True
        except pynvml.NVMLError:
            continue
    return False


def _torch_node() -> Optional[Node]:
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available() or torch.version.cuda is None:
        return None
    count = torch.cuda.device_count()
    gpus = tuple(Gpu(i, torch.cuda.get_device_name(i), Capability(*torch.cuda.get_device_capability(i)),
                     torch.cuda.get_device_properties(i).total_memory) for i in range(count))
    if count <= 1:
        topo = TOPOLOGIES["single"]
    else:
        p2p = all(torch.cuda.can_device_access_peer(i, j) for i in range(count) for j in range(count) if i != j)
        topo = TOPOLOGIES["pcie-p2p" if p2p else "pcie"]
    return Node(gpus, topo, "torch", ("torch cannot see NVLink; topology is P2P-only at best",))




def node_resolution(capabilities: Sequence[Capability]) -> Resolution:
    """One resolution that every GPU of a (possibly mixed) node can honour.

    The lowest capability's tier; when the GPUs differ, the match is demoted so that
    only features every GPU keeps survive: ``family`` within one major, otherwise
    ``generation``.
    """
    if not capabilities:
        raise ValueError("no GPU to resolve")
    caps = sorted(set(capabilities))
    res = resolve(caps[0])
    if len(caps) == 1:
        return res
    res = replace(res, devices=tuple(caps))  # the kernel catalog judges every GPU of the node
    demoted = "family" if caps[0].major == caps[-1].major else "generation"
    if MATCH_KINDS.index(res.match) >= MATCH_KINDS.index(demoted):
        return res
    listed = ", ".join(str(c) for c in caps)
    return replace(res, match=demoted,
                   reason=f"mixed node ({listed}): tier {res.resolved} as {demoted}, so every GPU can honour it")
