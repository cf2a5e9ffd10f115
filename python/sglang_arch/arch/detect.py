"""Where capabilities and topology come from: simulation, NVML, torch, in that order.

An explicit simulation (``SGLANG_ARCH_CAPABILITY`` / ``SGLANG_ARCH_TOPOLOGY`` /
``SGLANG_ARCH_GPU_COUNT``, or arguments) wins, because someone asked for it.  NVML
comes next: it creates no CUDA context, so it is safe before SGLang spawns workers.
torch is the last resort (it does create a context).  Nothing is imported until asked.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from .capability import Capability, parse_capability
from .registry import MATCH_KINDS, Resolution, resolve
from .topology import TOPOLOGIES, Topology, check_machine_topology, default_topology, parse_topology
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
    check_environment()
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


def check_environment() -> None:
    """Every detection variable is checked whether or not a GPU is there, and whether or not
    it is used (SGLANG_ARCH_GPU_COUNT without SGLANG_ARCH_CAPABILITY): a bad value is an
    error naming the variable (docs/configuration.md)."""
    for name, parser in ((ENV_CAPABILITY, parse_capability), (ENV_TOPOLOGY, parse_topology),
                         (ENV_GPU_COUNT, _parse_count)):
        text = os.environ.get(name)
        if text:
            _parse_env(parser, text, name)


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
        topo = default_topology(resolve(cap).profile.topology, count)
    where = "" if topology is not None or topo_text is None else f"{ENV_TOPOLOGY}: "
    try:
        check_machine_topology(topo, count)
    except ValueError as exc:
        raise ValueError(f"{where}{exc}") from None
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
        topology = _parse_env(parse_topology, forced, ENV_TOPOLOGY)
        _parse_env(lambda t: check_machine_topology(t, len(node.gpus)), topology, ENV_TOPOLOGY)
        node = replace(node, topology=topology, notes=node.notes + (f"topology set by {ENV_TOPOLOGY}",))
    return _apply_multicast_env(node)


def _apply_multicast_env(node: Node) -> Node:
    """On a real node, multicast turned off in the environment wins over the topology,
    detected or forced by SGLANG_ARCH_TOPOLOGY: with it off, symmetric memory must not
    choose multimem.  A simulated machine (SGLANG_ARCH_CAPABILITY) is what was asked for."""
    off = multicast_off_settings()
    if node.topology.multicast and off:
        return replace(node, topology=TOPOLOGIES["nvlink"],
                       notes=node.notes + (f"multicast turned off by {', '.join(off)}",))
    return node


# --- the multicast-off settings, each read as its owner reads it -------------------------

def multicast_off_settings(environ: Optional[Mapping[str, str]] = None, nccl_files: Optional[Sequence[str]] = None
                           ) -> List[str]:
    """``NAME=value`` for each multicast-off setting in force, read as torch, NCCL and
    NVSHMEM read it (docs/configuration.md)."""
    env = os.environ if environ is None else environ
    off = []
    # torch: c10/util/env.cpp ``check_env`` (used by symm_mem's device_has_multicast_support):
    # exactly "1" is true, "0" false; any other value is warned about and ignored.
    torch_value = env.get("TORCH_SYMM_MEM_DISABLE_MULTICAST")
    if torch_value == "1":
        off.append("TORCH_SYMM_MEM_DISABLE_MULTICAST=1")
    # NCCL: src/misc/param.cc ``ncclLoadParam`` reads NCCL_NVLS_ENABLE (default 2) with
    # ``strtoll(str, NULL, 0)``, a value out of range keeping the default; transport/nvls.cc
    # turns NVLS off where it is 0.  ``ncclGetEnv`` also reads NCCL's configuration files.
    nccl_value = nccl_env("NCCL_NVLS_ENABLE", env, nccl_files)
    if nccl_value and c_strtoll(nccl_value) == 0:
        off.append(f"NCCL_NVLS_ENABLE={nccl_value}")
    # NVSHMEM: env_defs_internal.h ``nvshmemi_getenv_bool``: a variable that is set is true
    # (even empty) unless its first character is 0, N, n, F or f.
    nvshmem_value = env.get("NVSHMEM_DISABLE_NVLS")
    if nvshmem_value is not None and nvshmem_value[:1] not in ("0", "N", "n", "F", "f"):
        off.append(f"NVSHMEM_DISABLE_NVLS={nvshmem_value}")
    return off


_C_SPACE = " \t\n\v\f\r"
_INT64 = 1 << 63


def c_strtoll(text: str) -> Optional[int]:
    """C's ``strtoll(text, NULL, 0)``: leading white space, a sign, then 0x (hex), 0 (octal)
    or decimal digits, as far as they go; no digits is 0.  None where C reports ERANGE."""
    rest = text.lstrip(_C_SPACE)
    sign = -1 if rest[:1] == "-" else 1
    if rest[:1] in ("-", "+"):
        rest = rest[1:]
    base, digits = 10, "0123456789"
    if rest[:2].lower() == "0x" and rest[2:3].lower() in tuple("0123456789abcdef"):
        base, digits, rest = 16, "0123456789abcdef", rest[2:]
    elif rest[:1] == "0":
        base, digits = 8, "01234567"
    end = 0
    while end < len(rest) and rest[end].lower() in digits:
        end += 1
    value = sign * int(rest[:end], base) if end else 0
    return value if -_INT64 <= value < _INT64 else None


NCCL_CONF_ETC = "/etc/nccl.conf"
# NCCL copies a configuration file's path into ``char confFilePath[1024]`` with snprintf, and a
# line's name and value into 1024-byte buffers (so at most 1023 bytes of each are kept).
NCCL_PATH_BYTES = 1023
NCCL_FIELD_BYTES = 1023


def nccl_user_conf(environ: Mapping[str, str]) -> Optional[str]:
    """The user's configuration file as NCCL's ``initEnvFunc`` names it: NCCL_CONF_FILE where
    it is set and not empty, else ``$HOME/.nccl.conf`` (``snprintf("%s/.nccl.conf", home)``);
    HOME unset, no user file.  The libnccl torch installs (2.30.7) takes the home directory
    from ``getenv("HOME")`` and links no ``getpwuid``: there is no password-database fallback
    as Python's ``expanduser`` has, and an empty HOME names ``/.nccl.conf``."""
    user = environ.get("NCCL_CONF_FILE")
    if not user:
        home = environ.get("HOME")
        if home is None:
            return None
        user = f"{home}/.nccl.conf"
    return os.fsdecode(os.fsencode(user)[:NCCL_PATH_BYTES])


def nccl_env(name: str, environ: Mapping[str, str], files: Optional[Sequence[str]] = None) -> Optional[str]:
    """A variable as NCCL's ``ncclGetEnv`` sees it: the environment, else the first definition
    in the user's configuration file (``nccl_user_conf``), then in /etc/nccl.conf.

    Each file is read as param.cc ``setEnvFile`` reads it, up to its first
    ``NCCL_CONF_MAX_BYTES`` (64 MiB; NCCL reads on): lines split at
    newline bytes, a line starting with '#' skipped, one trailing newline and then one
    carriage return dropped; the name
    runs to the first '=' or NUL byte (a NUL first skips the line) and keeps at most 1023
    bytes; the value runs from after the '=' to the first NUL byte, at most 1023 bytes;
    ``setenv(..., 0)`` keeps an earlier definition.  A path that is not a regular file (a
    FIFO, a device) is left unread: opening it could block where NCCL would.
    """
    if name in environ:
        return environ[name]
    if files is None:
        user = nccl_user_conf(environ)
        files = (user, NCCL_CONF_ETC) if user else (NCCL_CONF_ETC,)
    wanted = name.encode()
    for path in files:
        value = _nccl_file_value(path, wanted)
        if value is not None:
            return value.decode("utf-8", "surrogateescape")
    return None


# The most of an NCCL configuration file read (``nccl_env``): its first 64 MiB.  A definition
# past it is not seen (NCCL reads on); no real configuration comes near it, and a huge file
# must not stall every start-up.
NCCL_CONF_MAX_BYTES = 64 << 20
_NCCL_CHUNK = 1 << 20
# Of a line only this much of its name (the bytes before its first '=') and of its value can
# matter: NCCL keeps 1023 bytes of each; one more byte of the name tells a longer name apart,
# one more of the value keeps a carriage return that ends it.
_NCCL_LINE_KEPT = NCCL_FIELD_BYTES + 2


def _bounded_lines(f) -> Iterator[bytes]:
    """The lines of ``f`` from its first ``NCCL_CONF_MAX_BYTES``, each as ``_nccl_file_value``
    reads it but compact: cut at its first NUL byte (C reads no further), its name and its
    value each cut to ``_NCCL_LINE_KEPT`` bytes, a newline after.  Memory and time are bounded
    whatever the file holds (a 6 GB line with no newline included), and each line reads as
    the whole line would."""
    keep = _NCCL_LINE_KEPT
    name, value, eq, nul, seen = bytearray(), bytearray(), False, False, False
    left = NCCL_CONF_MAX_BYTES
    while left > 0:
        chunk = f.read(min(_NCCL_CHUNK, left))
        if not chunk:
            break
        left -= len(chunk)
        pos = 0
        while pos <= len(chunk):
            nl = chunk.find(b"\n", pos)
            seg = chunk[pos:len(chunk) if nl == -1 else nl]
            seen = seen or bool(seg) or nl != -1
            if not nul:
                z = seg.find(b"\0")
                if z != -1:
                    seg, nul = seg[:z], True
                if not eq:
                    e = seg.find(b"=")
                    name += seg[:max(0, min(len(seg) if e == -1 else e, keep - len(name)))]
                    if e != -1:
                        eq, seg = True, seg[e + 1:]
                if eq:
                    value += seg[:max(0, keep - len(value))]
            if nl == -1:
                break
            yield bytes(name) + (b"=" + bytes(value) if eq else b"") + b"\n"
            name, value, eq, nul, seen = bytearray(), bytearray(), False, False, False
            pos = nl + 1
    if seen:
        yield bytes(name) + (b"=" + bytes(value) if eq else b"")


def _nccl_find(f, wanted: bytes) -> Optional[bytes]:
    """``_nccl_file_value`` for a plain name (shorter than NCCL keeps, no '#' first, no '=',
    newline or NUL in it): its first definition is the first line that starts with
    ``<name>=``, so the file's first ``NCCL_CONF_MAX_BYTES`` are searched in pieces at C
    speed, never walked line by line (64 MiB of newlines read in well under a second)."""
    key = b"\n" + wanted + b"="
    buf, left = b"\n", NCCL_CONF_MAX_BYTES  # a newline before the first line: it starts one too
    while left > 0:
        chunk = f.read(min(_NCCL_CHUNK, left))
        if not chunk:
            return None
        left -= len(chunk)
        buf = buf[-(len(key) - 1):] + chunk  # a name split between two pieces is still found
        pos = buf.find(key)
        if pos == -1:
            continue
        tail = buf[pos + len(key):]
        while b"\n" not in tail[:_NCCL_LINE_KEPT] and len(tail) < _NCCL_LINE_KEPT and left > 0:
            more = f.read(min(_NCCL_CHUNK, left))
            if not more:
                break
            left -= len(more)
            tail += more
        value = tail.split(b"\n", 1)[0][:_NCCL_LINE_KEPT].split(b"\0", 1)[0]
        if value[-1:] == b"\r":  # NCCL 2.30 also drops one carriage return (measured, 2.30.7)
            value = value[:-1]
        return value[:NCCL_FIELD_BYTES]
    return None


def _nccl_file_value(path: str, wanted: bytes) -> Optional[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            if wanted and len(wanted) < NCCL_FIELD_BYTES and not wanted.startswith(b"#") and not any(
                    c in wanted for c in (b"=", b"\n", b"\0")):
                return _nccl_find(f, wanted)  # a plain name: searched for, not read line by line
            for line in _bounded_lines(f):
                line = line.split(b"\0", 1)[0]  # C reads the line up to its first NUL byte
                if line[:1] == b"#":
                    continue
                if line[-1:] == b"\n":
                    line = line[:-1]
                if line[-1:] == b"\r":  # NCCL 2.30 also drops one carriage return (measured, 2.30.7)
                    line = line[:-1]
                stop = line.find(b"=")
                if stop == -1:
                    continue
                if line[:min(NCCL_FIELD_BYTES, stop)] == wanted:
                    return line[stop + 1:][:NCCL_FIELD_BYTES]
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


# --- CUDA_VISIBLE_DEVICES, read as CUDA reads it ------------------------------------------

def visible_indices(spec: Optional[str], count: int, uuids: Sequence[str] = (),
                    mig: Optional[Mapping[str, int]] = None) -> List[int]:
    """The devices (indices into NVML's order) CUDA enumerates under CUDA_VISIBLE_DEVICES.

    CUDA's documented rule (CUDA C Programming Guide, "CUDA Environment Variables"; the MIG
    User Guide, "CUDA Device Enumeration"): entries are taken in order, as indices or as
    (abbreviated) ``GPU-``/``MIG-`` UUIDs; an invalid entry hides itself and every entry after
    it.  An index is read as the driver reads it (``_by_ordinal``: "1gpu" is 1, no digits is
    invalid, a number past 32 bits wraps).  A UUID entry names a device by "enough digits
    from the beginning" of its UUID (``_by_uuid``: at least one character after ``GPU-`` /
    ``MIG-``, either case, the prefix of exactly one device's UUID, or a whole UUID with more
    after it); a list that starts with UUIDs stops at the first entry that does not.  A device named twice makes the whole list empty (as torch's
    ``_parse_visible_devices`` models it).  ``mig``: MIG device name -> its GPU's index, both
    spellings (``MIG-<uuid>``, and ``MIG-GPU-<gpu uuid>/<gpu instance>/<compute instance>``
    of drivers before R470, matched whole); "only single MIG instance enumeration is
    supported": a MIG list makes its first device visible, no more.  Unset: every device.
    """
    if spec is None:
        return list(range(count))
    prefix = spec[:4] if spec[:4] in ("GPU-", "MIG-") else ""
    picked: List[int] = []
    named: List[str] = []
    for entry in spec.split(","):
        if prefix:
            if not entry.startswith(prefix):
                break
            index = _by_uuid(entry, uuids, mig or {})
            key = entry
        else:
            index = _by_ordinal(entry.strip(_C_SPACE), count)
            key = str(index)
        if index is None:
            break
        if key in named or (prefix != "MIG-" and index in picked):
            return []
        named.append(key)
        picked.append(index)
    return picked[:1] if prefix == "MIG-" else picked


def _by_ordinal(entry: str, count: int) -> Optional[int]:
    """An index as the driver reads it (measured, CUDA 13 driver on an H100: the probe
    ``test/gpu/cuda_visible_devices_probe.py``, its table in ``test/fixtures``): C's ``strtol``
    (a sign, decimal digits, clamped to 64 bits), then the low 32 bits as an unsigned index,
    so 4294967296 and -4294967296 name device 0 and -1 names none."""
    sign = -1 if entry[:1] == "-" else 1
    digits = entry[1:] if entry[:1] in ("-", "+") else entry
    end = 0
    while end < len(digits) and digits[end] in "0123456789":
        end += 1
    if not end:
        return None
    value = max(-_INT64, min(_INT64 - 1, sign * int(digits[:end])))
    index = value & 0xFFFFFFFF
    return index if index < count else None


def _by_uuid(entry: str, uuids: Sequence[str], mig: Mapping[str, int]) -> Optional[int]:
    """A UUID entry as the driver reads it (measured as ``_by_ordinal``): hex digits in either
    case; an abbreviation names the one device whose UUID starts with it, and an entry longer
    than a whole UUID names that device (what follows the UUID is not read); ``MIG-`` with a
    GPU's own hex names that GPU too."""
    if len(entry) <= 4:  # "GPU-" or "MIG-" alone names no device
        return None
    if entry.startswith("MIG-GPU-") and "/" in entry:  # the pre-R470 spelling, matched whole
        return mig.get(entry)

    def names(uuid: str, text: str) -> bool:
        uuid, text = uuid.lower(), text.lower()
        return uuid.startswith(text) or text.startswith(uuid)

    hits = []  # one per device named: two MIG devices of one GPU are two
    if entry.startswith("MIG-"):
        hits = [gpu for name, gpu in mig.items() if "/" not in name and names(name[4:], entry[4:])]
    hits = hits or [i for i, uuid in enumerate(uuids) if names(uuid[4:], entry[4:])]
    return hits[0] if len(hits) == 1 else None


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
        uuids, mig = _uuids(pynvml, handles)
        gpus = _visible(gpus, uuids, mig)
        if mig:  # MIG devices: no peer access between them
            return Node(tuple(gpus), TOPOLOGIES["single" if len(gpus) <= 1 else "pcie"], "nvml",
                        ("MIG devices (CUDA_VISIBLE_DEVICES): no peer-to-peer access",))
        return Node(tuple(gpus), _nvml_topology(pynvml, [handles[g.index] for g in gpus]), "nvml")
    finally:
        pynvml.nvmlShutdown()


def _visible(gpus: List[Gpu], uuids: Sequence[str] = (), mig: Optional[Mapping[str, int]] = None) -> List[Gpu]:
    """The GPUs CUDA makes visible under CUDA_VISIBLE_DEVICES (NVML ignores it)."""
    return [gpus[i] for i in visible_indices(os.environ.get("CUDA_VISIBLE_DEVICES"), len(gpus), uuids, mig)]


def _uuids(pynvml, handles) -> Tuple[List[str], Dict[str, int]]:
    """Each GPU's UUID, and MIG device UUID -> its GPU's index, asked of NVML only where
    CUDA_VISIBLE_DEVICES names devices by UUID."""
    spec = os.environ.get("CUDA_VISIBLE_DEVICES") or ""
    if not spec.startswith(("GPU-", "MIG-")):
        return [], {}
    uuids = [_text(pynvml.nvmlDeviceGetUUID(h)) for h in handles]
    mig: Dict[str, int] = {}
    if spec.startswith("MIG-"):
        for i, h in enumerate(handles):
            try:
                slots = pynvml.nvmlDeviceGetMaxMigDeviceCount(h)
            except pynvml.NVMLError:
                continue
            for k in range(slots):
                try:
                    device = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
                    mig[_text(pynvml.nvmlDeviceGetUUID(device))] = i
                    mig[f"MIG-{uuids[i]}/{pynvml.nvmlDeviceGetGpuInstanceId(device)}/"
                        f"{pynvml.nvmlDeviceGetComputeInstanceId(device)}"] = i
                except pynvml.NVMLError:
                    continue
    return uuids, mig


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


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
