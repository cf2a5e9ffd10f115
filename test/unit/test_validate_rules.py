"""The input readers and limits of validate.py, case by case (found by mutation testing:
docs/mutation.md): ``shown`` (how a refused value is quoted in every error line),
``parse_int``, ``env_bool``, ``check_machine`` (README "Limits"), and
``read_regular_file``'s promises (its docstring and the README's "Limits": a regular
file, at most ``limit`` bytes, never more than ``limit + 1`` bytes read, never blocking).  Files that change between the checks are
simulated through the module's ``os``."""

import errno
import os
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch import validate as v


class Repr:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text


class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


# --- shown -----------------------------------------------------------------------------


def test_shown_is_the_repr():
    assert v.shown("x") == "'x'"
    assert v.shown(5) == "5"


def test_shown_keeps_one_line():
    assert v.shown(Repr("a\nb\rc")) == "a\\nb\\rc"


def test_shown_of_a_failing_repr_names_the_type():
    assert v.shown(BadRepr()) == "<BadRepr>"


def test_shown_cuts_at_60_characters():
    # validate.MAX_SHOWN (60): longer texts keep 57 characters and "..."
    assert v.shown(Repr("a" * 60)) == "a" * 60
    assert v.shown(Repr("b" * 61)) == "b" * 57 + "..."
    assert v.shown("c" * 100) == "'" + "c" * 56 + "..."


def test_shown_path_is_the_path_while_printable_and_at_most_240_characters():
    # validate.MAX_SHOWN_PATH (240): a path is shown as it is up to that length; longer,
    # unprintable or padded paths are quoted, escaped and cut (shown with limit 240)
    at_limit = "/" + "p" * 239
    assert v.shown_path(at_limit) == at_limit
    assert v.shown_path(at_limit + "q") == "'" + at_limit[:236] + "..."
    assert v.shown_path("/tmp/a\x1bb") == "'/tmp/a\\x1bb'"
    assert v.shown_path(" /tmp/x") == "' /tmp/x'"
    assert v.shown_path("") == "''"


# --- parse_int / env_bool --------------------------------------------------------------


def test_parse_int_refuses_booleans():
    for value in (True, False):
        with pytest.raises(ValueError) as e:
            v.parse_int(value, "count", 0, 5)
        assert str(e.value) == f"count: expected an integer >= 0 and <= 5, got {value}"


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_parse_int_refuses_every_float(value):
    # 1e3 and 2.0 in an override file are floats (JSON and TOML keep them apart from
    # integers): a field that holds an integer takes its digits only.
    with pytest.raises(ValueError) as e:
        v.parse_int(value, "count", 0, 10 ** 9)
    assert str(e.value).startswith("count: expected an integer >= 0 and <= 1000000000, got ")
    assert "floating-point" in str(e.value)


def test_env_bool_reads_the_mapping_given(monkeypatch):
    monkeypatch.delenv("SGLANG_ARCH_TEST_FLAG", raising=False)
    assert v.env_bool("SGLANG_ARCH_TEST_FLAG", {"SGLANG_ARCH_TEST_FLAG": "on"}) is True
    monkeypatch.setenv("SGLANG_ARCH_TEST_FLAG", "1")
    assert v.env_bool("SGLANG_ARCH_TEST_FLAG", {"SGLANG_ARCH_TEST_FLAG": "off"}) is False
    assert v.env_bool("SGLANG_ARCH_TEST_FLAG", {}) is False


# --- read_regular_file -------------------------------------------------------------------


def fake_os(monkeypatch, **over):
    """validate's ``os`` with some functions replaced."""
    ns = types.SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
    for k, f in over.items():
        setattr(ns, k, f)
    monkeypatch.setattr(v, "os", ns)


def grown(monkeypatch, size, reads):
    """The file grew after ``os.stat``: stat reports ``size`` bytes; ``reads`` collects
    the length of every chunk read."""
    real_stat, real_read = os.stat, os.read

    def stat(path):
        st = real_stat(path)
        return types.SimpleNamespace(st_mode=st.st_mode, st_size=size)

    def read(fd, n):
        chunk = real_read(fd, n)
        reads.append(len(chunk))
        return chunk

    fake_os(monkeypatch, stat=stat, read=read)


def test_reads_a_file_of_exactly_the_limit(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"0123456789")
    assert v.read_regular_file(str(p), limit=10) == b"0123456789"


def test_reads_a_file_of_several_chunks_whole(tmp_path):
    data = bytes(range(256)) * 300  # 76800 bytes: two reads of at most 64 KiB
    p = tmp_path / "f"
    p.write_bytes(data)
    assert v.read_regular_file(str(p)) == data


@pytest.mark.parametrize("limit", [10, 65536])
def test_a_grown_file_is_refused_after_limit_plus_one_bytes(tmp_path, monkeypatch, limit):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 200000)
    reads = []
    grown(monkeypatch, limit, reads)
    with pytest.raises(v.FileTooLarge) as e:
        v.read_regular_file(str(p), limit=limit)
    assert str(e.value) == f"larger than {limit} bytes"
    assert sum(reads) == limit + 1


def test_a_path_swapped_for_a_fifo_after_stat_is_refused(tmp_path, monkeypatch):
    regular = tmp_path / "regular"
    regular.write_bytes(b"{}")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    real_stat = os.stat
    fake_os(monkeypatch, stat=lambda path: real_stat(regular))  # the check saw a regular file
    with pytest.raises(ValueError) as e:
        v.read_regular_file(str(fifo))
    assert str(e.value) == "not a regular file"


def test_a_read_that_would_block_ends_the_file(tmp_path, monkeypatch):
    p = tmp_path / "f"
    p.write_bytes(b"abcdef")
    calls = []

    def read(fd, n):
        calls.append(n)
        if len(calls) == 1:
            return b"abc"
        raise OSError(errno.EAGAIN, "would block")

    fake_os(monkeypatch, read=read)
    assert v.read_regular_file(str(p)) == b"abc"


def test_other_read_errors_are_raised(tmp_path, monkeypatch):
    p = tmp_path / "f"
    p.write_bytes(b"abcdef")

    def read(fd, n):
        raise OSError(errno.EIO, "input/output error")

    fake_os(monkeypatch, read=read)
    with pytest.raises(OSError) as e:
        v.read_regular_file(str(p))
    assert e.value.errno == errno.EIO


# --- check_machine, and read_regular_file's kind and flags ---------------------------------


@pytest.mark.parametrize("world_size, nnodes, message", [
    (8, 0, "node count: expected an integer >= 1 and <= 1024, got 0"),
    (0, 1, "world size: expected an integer >= 1 and <= 73728, got 0"),
    (146, 2, "world size 146 on 2 node(s) is 73 GPUs per node; accepted: at most 72 GPUs per node (NVL72)"),
    (145, 2, "world size 145 is not divisible by the node count 2; accepted: the same number of GPUs on every "
             "node (world size a multiple of --nnodes)"),
    (8, 3, "world size 8 is not divisible by the node count 3; accepted: the same number of GPUs on every "
           "node (world size a multiple of --nnodes)"),
])
def test_check_machine_messages(world_size, nnodes, message):
    with pytest.raises(ValueError) as e:
        v.check_machine(world_size, nnodes)
    assert str(e.value) == message


def test_check_machine_accepts_72_per_node():
    v.check_machine(144, 2)


def test_read_regular_file_refuses_a_directory(tmp_path):
    with pytest.raises(ValueError) as e:
        v.read_regular_file(str(tmp_path))
    assert str(e.value) == "not a regular file"


def test_read_regular_file_opens_read_only_non_blocking_without_a_terminal(tmp_path, monkeypatch):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    seen = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, flags, *a: seen.append(flags) or real_open(path, flags, *a))
    assert v.read_regular_file(str(p)) == b"abc"
    (flags,) = seen
    assert flags & os.O_NONBLOCK and flags & os.O_NOCTTY
    assert flags & (os.O_WRONLY | os.O_RDWR) == 0
