"""The bounds of every input, and the readers that enforce them.

One place for what the registry accepts from outside (override files, environment
variables, command-line arguments): the limits (documented in the README's "Limits"
table), the one boolean parser for environment flags, strict ASCII integers, and a file
reader that never blocks and never reads past its cap.  Standard library only.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Any, Dict, Mapping, Optional

# --- limits (README "Limits"; test/unit/test_hostile.py checks each) -------------------

MIB = 1024 * 1024
# The largest NVLink domain that exists (GB200/GB300 NVL72): GPUs of one node that can
# form one all-reduce group, and the largest world size any per-node table may list.
MAX_GPUS_PER_NODE = 72
MAX_NODES = 1024
MAX_WORLD_SIZE = MAX_GPUS_PER_NODE * MAX_NODES
# The symmetric-memory buffer is allocated once per group: no table or override may ask
# for more than this per all-reduce (far above any tuned value, far below any GPU's memory).
SYMM_MEM_MAX_MIB = 1024
SMEM_MAX_KIB = 1024
CUDA_MAX_MAJOR = 99
CUDA_MAX_MINOR = 99
MAX_TEXT = 1000  # characters of one string field (names, backends, sources)
MAX_ITEMS = 64  # items of one list field
MAX_FILE_BYTES = 1 * MIB  # override files and saved measurements
MAX_SHOWN = 60  # characters of a rejected value quoted in an error message
MAX_SHOWN_PATH = 240  # characters of a file path quoted in an error message
# Digits of an integer literal an override file may hold: far above any field's bound (9
# digits), far below Python's conversion limit (4,300), past which JSON and TOML parsers
# fail with an error that names neither the file nor the field.
MAX_INT_DIGITS = 100

_ASCII_INT = re.compile(r"[0-9]{1,9}")
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("", "0", "false", "no", "off")


def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)``, cut short: an error line stays one short line whatever came in."""
    try:
        text = repr(value)
    except Exception:  # pragma: no cover - a repr that fails
        text = f"<{type(value).__name__}>"
    text = text.replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def printable(text: Any, limit: int = MAX_TEXT) -> str:
    """Text from a file the user gave, for a report line: every character Python does not
    print (ESC and the other controls, format and separator characters) escaped as
    ``repr`` writes it, so a file can neither clear the terminal nor forge a line."""
    text = str(text)
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shown_path(path: Any) -> str:
    """A file path for an error line: as it is when it is printable and short, else
    ``shown`` (quoted, control characters such as ESC escaped, cut at MAX_SHOWN_PATH)."""
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if isinstance(path, str) and path and path.isprintable() and path.strip() == path \
            and len(path) <= MAX_SHOWN_PATH:
        return path
    return shown(path, MAX_SHOWN_PATH)


class LongInteger:
    """An integer literal of more than MAX_INT_DIGITS digits, read from an override file
    without converting it: every field refuses it, by name, as it refuses any other value
    out of its bounds."""

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"<an integer of {self.digits} digits>"


def json_int(literal: str) -> Any:
    """``json.loads``'s ``parse_int``: an int, or a LongInteger past MAX_INT_DIGITS."""
    digits = len(literal.lstrip("+-"))
    return LongInteger(digits) if digits > MAX_INT_DIGITS else int(literal)


_TOML_LONG_INT = re.compile(r"(?P<before>[=\[,{][ \t\r\n]*)(?P<number>[+-]?[0-9][0-9_]{%d,})" % MAX_INT_DIGITS)
_LONG_MARK = re.compile(r"<an integer of ([0-9]+) digits>")


def toml_long_integers(text: str) -> Optional[str]:
    """The TOML text with each integer value of more than MAX_INT_DIGITS digits written as a
    marker string, or None where it holds none (tomllib converts every integer as it parses,
    so such a literal fails the whole document before any field is known)."""
    found = False

    def mark(match: "re.Match[str]") -> str:
        nonlocal found
        digits = sum(c.isdigit() for c in match.group("number"))
        if digits <= MAX_INT_DIGITS:
            return match.group(0)
        found = True
        return f'{match.group("before")}"<an integer of {digits} digits>"'

    marked = _TOML_LONG_INT.sub(mark, text)
    return marked if found else None


def long_integers(value: Any) -> Any:
    """``value`` with every marker string of ``toml_long_integers`` turned into a LongInteger."""
    if isinstance(value, dict):
        return {k: long_integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [long_integers(v) for v in value]
    if isinstance(value, str):
        match = _LONG_MARK.fullmatch(value)
        if match:
            return LongInteger(int(match.group(1)))
    return value


def parse_int(value: Any, what: str, minimum: int, maximum: int) -> int:
    """An integer in ``[minimum, maximum]``: an int or ASCII digits (at most 9).  Anything
    else is a ValueError naming ``what`` and the range; a float too, integral or not (``1e3``
    or ``2.0`` in an override file is a float: JSON and TOML keep integers apart)."""
    accepted = f"expected an integer >= {minimum} and <= {maximum}"
    number: Optional[int] = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        raise ValueError(f"{what}: {accepted}, got {shown(value)} (a floating-point number, as 1e3 or 2.0 "
                         f"are read; write the integer's digits)")
    elif isinstance(value, str):
        text = value.strip()
        if _ASCII_INT.fullmatch(text):
            number = int(text)
    if number is None or not minimum <= number <= maximum:
        raise ValueError(f"{what}: {accepted}, got {shown(value)}")
    return number


def env_bool(name: str, environ: Optional[Mapping[str, str]] = None) -> bool:
    """The one parser for boolean environment variables; unset or empty is false."""
    env = os.environ if environ is None else environ
    raw = env.get(name, "")
    value = raw.strip().lower()
    if value in FALSE_WORDS:
        return False
    if value in TRUE_WORDS:
        return True
    raise ValueError(f"{name}={shown(raw)} is not a boolean; accepted: 1/0, true/false, yes/no, on/off")


def check_machine(world_size: int, nnodes: int) -> None:
    """World size and node count that a real deployment can have (README "Limits")."""
    parse_int(nnodes, "node count", 1, MAX_NODES)
    parse_int(world_size, "world size", 1, MAX_WORLD_SIZE)
    if world_size < nnodes:
        raise ValueError(f"world size {world_size} is smaller than the node count {nnodes}; "
                         f"accepted: at least one GPU per node")
    if world_size % nnodes:
        raise ValueError(f"world size {world_size} is not divisible by the node count {nnodes}; "
                         f"accepted: the same number of GPUs on every node (world size a multiple of "
                         f"--nnodes)")
    per_node = world_size // nnodes
    if per_node > MAX_GPUS_PER_NODE:
        raise ValueError(f"world size {world_size} on {nnodes} node(s) is {per_node} GPUs per node; "
                         f"accepted: at most {MAX_GPUS_PER_NODE} GPUs per node (NVL72)")


class FileTooLarge(ValueError):
    pass


def read_regular_file(path: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, without ever blocking.

    FIFOs, devices (``/dev/zero``), sockets and directories are refused before they are
    opened; the open is non-blocking and the file is checked again through the open
    descriptor (a path swapped in between is refused too); at most ``limit + 1`` bytes
    are read.  OSError for what the system refuses, ValueError for what this refuses.
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file")
    if st.st_size > limit:
        raise FileTooLarge(f"larger than {limit} bytes")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        chunks = []
        total = 0
        while total <= limit:
            try:
                chunk = os.read(fd, min(65536, limit + 1 - total))
            except OSError as exc:
                if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):
                    break
                raise
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise FileTooLarge(f"larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def unique_json_keys(pairs):
    """``json.loads``'s ``object_pairs_hook``: json keeps the last of two equal keys, so a
    document that says two things is refused instead."""
    obj: Dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"key {shown(key)} is given twice in one object (both occurrences would be "
                             f"read as one, the last winning); accepted: each key once")
        obj[key] = value
    return obj
