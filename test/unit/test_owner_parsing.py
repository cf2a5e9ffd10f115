"""Inputs read exactly as their owners read them: the multicast-off
variables as NCCL, torch and NVSHMEM read them, CUDA_VISIBLE_DEVICES as CUDA reads it,
and every documented variable checked with or without a GPU.  Each owner's parser (C's
``strtoll`` through ctypes, torch's ``_parse_visible_devices``) or its documented rule is
compared with ours over generated values."""

import ctypes
import ctypes.util
import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
import importlib

from sglang_arch.arch.detect import c_strtoll, multicast_off_settings, nccl_env, visible_indices

d = importlib.import_module("sglang_arch.arch.detect")  # the module (the package exports the function)
NO_FILES = ()  # NCCL's configuration files left out unless a test names them

LIBC = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
LIBC.strtoll.restype = ctypes.c_longlong
LIBC.strtoll.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]

numeric_text = st.text(alphabet=" \t\n+-0123456789xXabcdefABCDEFgz.", max_size=24)


def libc_strtoll(text):
    ctypes.set_errno(0)
    value = LIBC.strtoll(text.encode(), None, 0)
    return None if ctypes.get_errno() else value


@settings(deadline=None)
@given(text=st.one_of(numeric_text, st.sampled_from(["0", "00", "0x0", " 0", "-0", "+0", "0x", "1", "2",
                                                     "off", "false", "9" * 30, "-" + "9" * 30, "0b1"])))
def test_strtoll_is_cs_strtoll(text):
    assert c_strtoll(text) == libc_strtoll(text)


@settings(max_examples=300, deadline=None)
@given(value=st.one_of(numeric_text, st.text(max_size=6)).filter(lambda v: "\x00" not in v))
def test_nccl_nvls_enable_is_off_exactly_where_nccl_reads_zero(value):
    """ncclLoadParam: an empty value keeps the default (2, on); strtoll base 0; ERANGE keeps
    the default; NVLS is off where the result is 0 (so "off", "abc", "0x0" turn it off)."""
    ncclsays_off = value != "" and libc_strtoll(value) == 0
    off = multicast_off_settings({"NCCL_NVLS_ENABLE": value}, nccl_files=NO_FILES)
    assert (f"NCCL_NVLS_ENABLE={value}" in off) is ncclsays_off


@settings(deadline=None)
@given(value=st.one_of(st.sampled_from(["1", " 1", "1 ", "01", "true", "yes", "0", ""]), st.text(max_size=4)))
def test_torch_multicast_switch_is_exactly_1(value):
    """c10::utils::check_env: "1" is true, "0" false, anything else ignored with a warning."""
    assume("\x00" not in value)
    off = multicast_off_settings({"TORCH_SYMM_MEM_DISABLE_MULTICAST": value}, nccl_files=NO_FILES)
    assert bool(off) is (value == "1")


@settings(deadline=None)
@given(value=st.one_of(st.sampled_from(["", "1", "0", "no", "No", "false", "F", "yes", "off", " 0"]),
                       st.text(max_size=4)))
def test_nvshmem_disable_nvls_is_true_when_set_unless_it_starts_with_0_n_or_f(value):
    """nvshmemi_getenv_bool: set is true (empty too) unless the first character is one of 0NnFf."""
    assume("\x00" not in value)
    off = multicast_off_settings({"NVSHMEM_DISABLE_NVLS": value}, nccl_files=NO_FILES)
    assert bool(off) is not (value != "" and value[0] in "0NnFf")
    assert multicast_off_settings({}, nccl_files=NO_FILES) == []


def test_nccl_reads_its_configuration_files_after_the_environment(tmp_path):
    user, etc = tmp_path / "user.conf", tmp_path / "etc.conf"
    user.write_text("# NCCL_NVLS_ENABLE=1\nNCCL_DEBUG=WARN\nNCCL_NVLS_ENABLE=0\nNCCL_NVLS_ENABLE=1\n")
    etc.write_text("NCCL_NVLS_ENABLE=1\n")
    files = (str(user), str(etc))
    assert nccl_env("NCCL_NVLS_ENABLE", {}, files) == "0"  # the first definition wins
    assert nccl_env("NCCL_NVLS_ENABLE", {"NCCL_NVLS_ENABLE": "2"}, files) == "2"  # the environment first
    assert nccl_env("NCCL_NVLS_ENABLE", {}, (str(tmp_path / "missing"), str(etc))) == "1"
    assert multicast_off_settings({}, nccl_files=files) == ["NCCL_NVLS_ENABLE=0"]
    # NCCL_CONF_FILE replaces ~/.nccl.conf (param.cc initEnvFunc)
    assert nccl_env("NCCL_NVLS_ENABLE", {"NCCL_CONF_FILE": str(user)}) == "0"


# --- NCCL's configuration files, against NCCL itself ---------------------------------------

# A process that loads the libnccl torch ships and, for each request, forks a child that lets
# NCCL read its configuration (``ncclGetUniqueId`` runs ``initEnv`` once, with no GPU) and
# reports what ``getenv`` then answers for the names asked.
NCCL_CHILD = r"""
import ctypes, json, os, sys
lib = ctypes.CDLL(sys.argv[1])
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
class Id(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]
for request in sys.stdin:
    ask = json.loads(request)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        for key in ("NCCL_CONF_FILE", "HOME"):
            os.environ.pop(key, None)
        os.environ.update(ask["env"])
        lib.ncclGetUniqueId(ctypes.byref(Id()))
        said = [libc.getenv(n.encode("latin-1")) for n in ask["names"]]
        os.write(w, json.dumps([None if v is None else v.decode("latin-1") for v in said]).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    print(data.decode(), flush=True)
"""


def _libnccl():
    try:
        import nvidia.nccl
    except ImportError:
        return None
    for folder in nvidia.nccl.__path__:
        path = os.path.join(folder, "lib", "libnccl.so.2")
        if os.path.exists(path):
            return path
    return None


@pytest.fixture(scope="module")
def real_nccl():
    """Ask NCCL itself: ``ask(env, names)`` -> the values NCCL's getenv returns after reading
    its configuration files (latin-1 text, so every byte survives)."""
    lib = _libnccl()
    if lib is None:
        pytest.skip("no libnccl (the nvidia-nccl wheel torch installs) to compare with")
    if os.path.exists(d.NCCL_CONF_ETC):
        pytest.skip(f"{d.NCCL_CONF_ETC} exists here and NCCL would read it too")
    proc = subprocess.Popen([sys.executable, "-c", NCCL_CHILD, lib], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)

    def ask(env, names):
        proc.stdin.write(json.dumps({"env": env, "names": names}) + "\n")
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())

    yield ask
    proc.stdin.close()
    proc.wait(timeout=30)


def _ours(name, conf):
    value = nccl_env(name, {"NCCL_CONF_FILE": conf})
    return None if value is None else value.encode("utf-8", "surrogateescape").decode("latin-1")


NAMES = ["NCCL_X", "NCCL_Y", "N" * 1023]
line_names = st.sampled_from(["NCCL_X", "NCCL_Y", "#NCCL_X", " NCCL_X", "NCCL_X ", "NCCL_X\0", "NCCL_\0X",
                              "\0NCCL_X", "", "nccl_x", "N" * 1023, "N" * 1024, "N" * 1500])
line_values = st.one_of(st.sampled_from(["0", "1", "", "\0", "0\0junk", "\0" + "0", "a=b", " 0", "0\r",
                                         "V" * 1500, "\xff\xfe"]),
                        st.text(alphabet="01 =#\0\r\tab\xe9", max_size=8))
config_lines = st.one_of(st.tuples(line_names, st.sampled_from(["=", "", "\0="]), line_values).map("".join),
                         st.text(alphabet="NCL_X=#\0\r 01", max_size=12))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(config_lines, max_size=6), end=st.sampled_from(["", "\n"]), crlf=st.booleans())
def test_nccl_conf_is_read_as_nccl_reads_it(real_nccl, tmp_path, lines, end, crlf):
    """Generated configuration files (NUL bytes, '#', long names and values, CR, no final
    newline, bytes that are not UTF-8): what ``nccl_env`` answers for each name is what NCCL's
    own ``getenv`` answers after NCCL has read the file."""
    conf = tmp_path / "nccl.conf"
    conf.write_bytes(("\r\n" if crlf else "\n").join(lines).encode("latin-1") + end.encode())
    theirs = real_nccl({"NCCL_CONF_FILE": str(conf)}, NAMES)
    assert [_ours(n, str(conf)) for n in NAMES] == theirs


def test_a_large_nccl_conf_is_read_as_nccl_reads_it(real_nccl, tmp_path):
    """Before: a file over 1 MiB was skipped; NCCL reads any size."""
    conf = tmp_path / "nccl.conf"
    conf.write_bytes(b"#" + b"x" * (3 << 20) + b"\n" + b"NCCL_Y=" + b"y" * (2 << 20) + b"\nNCCL_X=0\n")
    assert real_nccl({"NCCL_CONF_FILE": str(conf)}, ["NCCL_X"]) == ["0"]
    assert _ours("NCCL_X", str(conf)) == "0"
    assert multicast_off_settings({"NCCL_CONF_FILE": str(conf), "NCCL_NVLS_ENABLE": "1"}) == []
    assert nccl_env("NCCL_NVLS_ENABLE", {"NCCL_CONF_FILE": str(conf)}) is None


def test_an_embedded_nul_ends_the_value_as_in_nccl(real_nccl, tmp_path):
    """Before: ``NCCL_NVLS_ENABLE=\\0`` was read as a value of one NUL, so multicast counted as
    off; NCCL reads an empty value and keeps its default (on)."""
    conf = tmp_path / "nccl.conf"
    conf.write_bytes(b"NCCL_NVLS_ENABLE=\x00junk\n")
    assert real_nccl({"NCCL_CONF_FILE": str(conf)}, ["NCCL_NVLS_ENABLE"]) == [""]
    assert multicast_off_settings({"NCCL_CONF_FILE": str(conf)}) == []


def test_the_users_file_is_found_as_nccl_finds_it(real_nccl, tmp_path, monkeypatch):
    """The libnccl torch installs reads ``$HOME/.nccl.conf`` (measured here: it follows HOME)
    and, with HOME unset, no user file at all.  Before: HOME unset fell back to the password
    database (Python's ``expanduser``), reading a file NCCL never reads."""
    import pwd

    fake_home = tmp_path / "home"
    fake_home.mkdir()
    (fake_home / ".nccl.conf").write_text("NCCL_NVLS_ENABLE=0\n")
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    if os.path.exists(os.path.join(real_home, ".nccl.conf")):
        pytest.skip("this user has a ~/.nccl.conf of their own")
    assert real_nccl({"HOME": str(fake_home)}, ["NCCL_NVLS_ENABLE"]) == ["0"]
    assert multicast_off_settings({"HOME": str(fake_home)}) == ["NCCL_NVLS_ENABLE=0"]
    assert real_nccl({}, ["NCCL_NVLS_ENABLE"]) == [None]
    entry = pwd.getpwuid(os.getuid())
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: type(entry)(entry[:5] + (str(fake_home),) + entry[6:]))
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.delenv("NCCL_CONF_FILE", raising=False)
    assert d.nccl_user_conf(os.environ) is None
    assert multicast_off_settings({}) == []
    # an empty NCCL_CONF_FILE counts as unset (``strlen(userFile) > 0``); an empty HOME is "/"
    assert d.nccl_user_conf({"NCCL_CONF_FILE": "", "HOME": str(fake_home)}) == f"{fake_home}/.nccl.conf"
    assert d.nccl_user_conf({"HOME": ""}) == "/.nccl.conf"


# --- CUDA_VISIBLE_DEVICES -----------------------------------------------------------------

UUIDS = ["GPU-1a2b3c", "GPU-8f6e1d", "GPU-8f00aa", "GPU-77cafe"]
entries = st.one_of(
    st.sampled_from(["0", "1", "2", "3", "4", "7", "-1", "-0", "+2", " 1", "1 ", "1gpu", "", "x", "01"]),
    st.sampled_from(["GPU-1a", "GPU-8f", "GPU-8f6", "GPU-8f00aa", "GPU-77cafe", "GPU-", "GPU-zz", "MIG-1",
                     "GPU-8F00AA", "GPU-77cafe/0", "GPU-1a2b3cx", "MIG-77", "4294967296", "-4294967295"]),
    st.text(alphabet="0123456789 ,-+GPU", max_size=4),
)
specs = st.lists(entries, max_size=6).map(",".join)


def documented_rule(spec, count, uuids):
    """CUDA's rule as documented and as the driver was measured to read it (the probe's table,
    ``test/fixtures/cuda_visible_devices_h100.json``), stated as a prefix: the longest run of
    valid entries from the start (an index read as C's ``strtol`` whose low 32 bits are below
    the device count; or, for a list that starts with GPU- / MIG-, an entry with at least one
    character after that prefix which, in either case, is the prefix of exactly one device's
    UUID or holds a whole one: "enough digits from the beginning"); a device named twice in
    that run empties it; a MIG list enumerates its first device only."""
    head = spec[:4] if spec[:4] in ("GPU-", "MIG-") else ""

    def device(entry):
        if head:
            text = entry[4:].lower()
            hits = [i for i, u in enumerate(uuids) if entry.startswith(head) and text
                    and (u[4:].lower().startswith(text) or text.startswith(u[4:].lower()))]
            return hits[0] if len(hits) == 1 else None
        m = re.match(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)", entry)
        if m is None:
            return None
        value = max(-(1 << 63), min((1 << 63) - 1, int(m.group(1) + m.group(2)))) & 0xFFFFFFFF
        return value if value < count else None

    run = []
    for entry in spec.split(","):
        if device(entry) is None:
            break
        run.append(device(entry))
    if len(set(run)) != len(run):
        return []
    return run[:1] if head == "MIG-" else run


@settings(max_examples=500, deadline=None)
@given(spec=specs, count=st.integers(0, 4))
def test_visible_devices_follow_cudas_documented_rule(spec, count):
    assert visible_indices(spec, count, UUIDS[:count]) == documented_rule(spec, count, UUIDS[:count])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.lists(st.sampled_from(["0", "1x", " 2", "+3", "5", "-1", ""]), max_size=5, unique=True)
       .map(",".join), count=st.integers(1, 4))
def test_visible_devices_agree_with_torchs_model(monkeypatch, spec, count):
    """torch.cuda._parse_visible_devices, trimmed at the device count as torch's NVML count
    does, where torch's model and the documented rule meet: no device named twice (torch
    empties the list for a repeat even after an invalid entry; the documented rule has
    stopped there)."""
    torch_cuda = pytest.importorskip("torch.cuda")
    parse = getattr(torch_cuda, "_parse_visible_devices", None)
    if parse is None:
        pytest.skip("this torch has no _parse_visible_devices")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", spec)
    theirs = parse()
    for at, index in enumerate(theirs):
        if index >= count:
            theirs = theirs[:at]
            break
    ours = visible_indices(spec, count)
    assert ours == theirs


def test_mig_devices_are_named_through_their_gpus():
    """The MIG User Guide: "only single MIG instance enumeration is supported" (a CUDA process
    enumerates one MIG device, whatever the list names), and drivers before R470 name a MIG
    device ``MIG-GPU-<gpu uuid>/<gpu instance>/<compute instance>``.  Before: every MIG entry
    of the list was visible, and the older spelling named nothing."""
    mig = {"MIG-aaaa-1": 0, "MIG-aaaa-2": 0, "MIG-bbbb-1": 1,
           "MIG-GPU-0f0f/1/0": 0, "MIG-GPU-0f0f/2/0": 0, "MIG-GPU-1e1e/1/0": 1}
    assert visible_indices("MIG-aaaa-1,MIG-bbbb", 2, (), mig) == [0]
    assert visible_indices("MIG-bbbb,MIG-aaaa-1", 2, (), mig) == [1]
    assert visible_indices("MIG-aaaa,MIG-bbbb", 2, (), mig) == []  # ambiguous first entry
    assert visible_indices("MIG-aaaa-1,MIG-aaaa-1", 2, (), mig) == []  # named twice
    assert visible_indices("MIG-aaaa-1,MIG-aaaa-2", 2, (), mig) == [0]  # one MIG device enumerated
    assert visible_indices("MIG-GPU-1e1e/1/0", 2, (), mig) == [1]  # the pre-R470 spelling
    assert visible_indices("MIG-GPU-1e1e/1", 2, (), mig) == []  # matched whole, not as a prefix
    assert visible_indices("MIG-", 2, (), mig) == []  # no character of a name
    assert visible_indices("GPU-", 1, ("GPU-1a",)) == []  # likewise for a GPU UUID


# --- every documented variable checked, GPU or not -----------------------------------------

BAD = {
    "SGLANG_ARCH_TOPOLOGY": st.sampled_from(["ring", "nv switch", "nvlink2", "x"]),
    "SGLANG_ARCH_GPU_COUNT": st.sampled_from(["0", "73", "-1", "four", "8.5", "８"]),
    "SGLANG_ARCH_CAPABILITY": st.sampled_from(["banana", "12.x", "100.0", "sm_1000"]),
}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(BAD)), data=st.data(), gpus=st.booleans())
def test_a_bad_detection_variable_is_refused_with_or_without_a_gpu(monkeypatch, name, data, gpus):
    """Before: with no GPU (or a real one and no simulation), SGLANG_ARCH_TOPOLOGY and
    SGLANG_ARCH_GPU_COUNT were never read, so a typo passed silently."""
    value = data.draw(BAD[name])
    for other in BAD:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, value)

    def probe():
        return d.Node((d.Gpu(0, "g", d.Capability(9, 0)),), d.TOPOLOGIES["single"], "nvml") if gpus else None

    with pytest.raises(ValueError) as e:
        d.detect(probes=[probe])
    assert str(e.value).startswith(f"{name}: ") and "accepted" in str(e.value) and "\n" not in str(e.value)


def test_nvml_names_each_mig_device_both_ways(monkeypatch):
    """``_uuids`` asks NVML for each MIG device's UUID and its GPU / compute instance ids, so
    that both spellings CUDA accepts name it."""
    import types

    class Error(Exception):
        pass

    migs = {0: [("MIG-aaaa-1", 1, 0), ("MIG-aaaa-2", 2, 0)], 1: [("MIG-bbbb-1", 1, 0)]}
    fake = types.SimpleNamespace(
        NVMLError=Error,
        nvmlDeviceGetUUID=lambda h: h[0] if isinstance(h, tuple) else f"GPU-{'0f0f' if h == 0 else '1e1e'}",
        nvmlDeviceGetMaxMigDeviceCount=lambda h: 3,
        nvmlDeviceGetMigDeviceHandleByIndex=lambda h, k: migs[h][k] if k < len(migs[h]) else (_ for _ in ()).throw(
            Error("no such MIG device")),
        nvmlDeviceGetGpuInstanceId=lambda d: d[1],
        nvmlDeviceGetComputeInstanceId=lambda d: d[2],
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-GPU-1e1e/1/0")
    uuids, mig = d._uuids(fake, [0, 1])
    assert uuids == ["GPU-0f0f", "GPU-1e1e"]
    assert mig == {"MIG-aaaa-1": 0, "MIG-aaaa-2": 0, "MIG-bbbb-1": 1, "MIG-GPU-0f0f/1/0": 0,
                   "MIG-GPU-0f0f/2/0": 0, "MIG-GPU-1e1e/1/0": 1}
    assert visible_indices(os.environ["CUDA_VISIBLE_DEVICES"], 2, uuids, mig) == [1]


def test_a_huge_nccl_config_is_read_in_bounded_memory_and_time(tmp_path):
    """A file past NCCL_CONF_MAX_BYTES is read up to the bound, line by line in bounded
    pieces: a definition past it is not seen, one before it is, and a line of hundreds of MiB
    without a newline keeps no more than its name and value, ``_NCCL_LINE_KEPT`` bytes each."""
    import importlib
    import time

    detect = importlib.import_module("sglang_arch.arch.detect")
    huge = tmp_path / "nccl.conf"
    with open(huge, "wb") as fh:
        fh.write(b"NCCL_EARLY=1\n")
        fh.truncate(detect.NCCL_CONF_MAX_BYTES + (8 << 20))  # zeros: one line with no newline
        fh.seek(0, 2)
        fh.write(b"\nNCCL_LATE=0\n")
    start = time.monotonic()
    assert detect.nccl_env("NCCL_EARLY", {}, [str(huge)]) == "1"
    assert detect.nccl_env("NCCL_LATE", {}, [str(huge)]) is None  # past the bound
    assert time.monotonic() - start < 20
    with open(huge, "rb") as fh:
        assert max(len(line) for line in detect._bounded_lines(fh)) <= 2 * detect._NCCL_LINE_KEPT + 2


def test_a_file_of_many_short_lines_is_searched_not_walked(tmp_path):
    """64 MiB of newlines, or of short definitions, before the one asked for: well under a
    second (a line-by-line walk took over a minute), and the answer is the line-by-line one."""
    import importlib
    import time

    detect = importlib.import_module("sglang_arch.arch.detect")
    many = tmp_path / "nccl.conf"
    many.write_bytes(b"\n" * (detect.NCCL_CONF_MAX_BYTES - 64) + b"NCCL_X=7\r\n")
    start = time.monotonic()
    assert detect.nccl_env("NCCL_X", {}, [str(many)]) == "7"
    assert detect.nccl_env("NCCL_Y", {}, [str(many)]) is None
    assert time.monotonic() - start < 5
    short = tmp_path / "short.conf"
    short.write_bytes(b"A=1\n" * 1000 + b"NCCL_X=a\0b\n#NCCL_X=2\nNCCL_X=3\n")
    with open(short, "rb") as fh:
        walked = [line for line in detect._bounded_lines(fh) if line.startswith(b"NCCL_X=")]
    assert detect.nccl_env("NCCL_X", {}, [str(short)]) == "a" and walked[0].startswith(b"NCCL_X=a")


def test_visible_devices_read_as_the_driver_was_measured_to():
    """The probe's table from a real GPU (``python3 test/gpu/cuda_visible_devices_probe.py``,
    CUDA 13 driver on an H100, 2026-12-06): every one of its 61 values, replayed against that
    GPU's UUID, gives what the driver enumerated."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    table = json.loads((root / "fixtures" / "cuda_visible_devices_h100.json").read_text())
    spec = importlib.util.spec_from_file_location("probe", root / "gpu" / "cuda_visible_devices_probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    uuids = table["devices"]
    assert len(table["rows"]) == 61
    for row in table["rows"]:
        value = probe.render(row["template"], uuids)
        assert visible_indices(value, len(uuids), uuids) == row["visible"], row
