"""The bounds of every input, and the readers that enforce them.

One place for what the registry accepts from outside (override files, environment
variables, command-line arguments): the limits (documented in the README's "Limits"
table), the one boolean parser for environment flags, strict ASCII integers, and a file
reader that never blocks and never reads past its cap, and the writer of output files
(never into a FIFO or device, never half a file).  Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import re
import secrets
import stat
from typing import Any, Mapping, Optional, Sequence, Tuple

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

_ASCII_INT = re.compile(r"[0-9]{1,9}")
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("", "0", "false", "no", "off")


def shown(value: Any) -> str:
    """``repr(value)``, cut short: an error line stays one short line whatever came in."""
    try:
        text = repr(value)
    except Exception:  # pragma: no cover - a repr that fails
        text = f"<{type(value).__name__}>"
    text = text.replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def parse_int(value: Any, what: str, minimum: int, maximum: int) -> int:
    """An integer in ``[minimum, maximum]``: an int, an integral finite float, or ASCII
    digits (at most 9).  Anything else is a ValueError naming ``what`` and the range."""
    accepted = f"expected an integer >= {minimum} and <= {maximum}"
    number: Optional[int] = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            number = int(value)
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
    per_node = -(-world_size // nnodes)
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


def check_output_path(path: str, what: str) -> None:
    """An output target that may be written: absent, or an existing regular file (a
    symlink to one is replaced by the new file, its target left alone).  FIFOs, devices
    (``/dev/full``), sockets and folders are refused before anything is opened: writing
    to them would block, fail half-way or land outside the file named."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ValueError(f"{what} {path}: cannot write: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
        raise ValueError(f"{what} {path}: cannot write: it is {kind}; accepted: a new file or an existing "
                         f"regular file (replaced)")


def write_files(outputs: Sequence[Tuple[str, str, str]]) -> None:
    """Write each ``(what, path, text)`` (UTF-8) so that a failure leaves no half-written
    file and, where the system allows, none of them written: every target is checked
    (``check_output_path``) and every text written to a temporary file beside its target
    before the first ``os.replace``.  Errors are ValueErrors naming ``what`` and the path."""
    if len({os.path.realpath(path) for _, path, _ in outputs}) < len(outputs):
        names = " and ".join(f"{what} {path}" for what, path, _ in outputs)
        raise ValueError(f"{names} name the same file; accepted: a different file for each")
    encoded = []
    for what, path, text in outputs:
        check_output_path(path, what)
        try:
            encoded.append(text.encode("utf-8"))
        except UnicodeEncodeError as exc:  # pragma: no cover - inputs are checked before
            raise ValueError(f"{what} {path}: cannot write: text is not UTF-8 encodable ({exc.reason})") from None
    staged: list = []
    try:
        for (what, path, _), data in zip(outputs, encoded):
            staged.append((what, path, _stage(what, path, data)))
        while staged:
            what, path, tmp = staged[0]
            try:
                os.replace(tmp, path)
            except OSError as exc:
                raise ValueError(f"{what} {path}: cannot write: {exc.strerror or exc}") from None
            staged.pop(0)
    finally:  # whatever was not moved into place
        for _, _, tmp in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _stage(what: str, path: str, data: bytes) -> str:
    """``data`` in a new temporary file in ``path``'s folder (the permissions a new file
    gets under the umask, or the replaced file's); returns its name."""
    folder = os.path.dirname(path) or "."
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    except OSError as exc:
        raise ValueError(f"{what} {path}: cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ValueError(f"{what} {path}: cannot write: {exc.strerror or exc}") from None
    return tmp
