"""Files the tools read and write: an SGLang source tree (``sglang-arch upstream`` and
``sglang-arch audit``) and output files (``sglang-arch tune``).  Not part of the registry
(which the series copies into SGLang): the registry's own reader is ``arch.validate``.

Both tools read Python files of a tree the user names.  Every file goes through
``read_source``: a regular file (a FIFO, a device or a directory is refused before it is
opened, so nothing blocks), at most ``MAX_SOURCE_BYTES``, UTF-8; the error names the
file and what is accepted.  ``syntax_problem`` asks CPython's own parser first: libcst's
native parser can overflow its stack (a segfault, no message) on nesting CPython refuses
with an error, so libcst never sees source nested deeper than CPython takes.
"""

from __future__ import annotations

import ast
import contextlib
import os
import secrets
import stat
from typing import Optional, Sequence, Tuple

from .arch.validate import MIB, read_regular_file, shown_path

# SGLang 0.5.23's largest .py file is under 0.5 MB; 8x that and more.
MAX_SOURCE_BYTES = 4 * MIB
# Python files one tree walk reads (SGLang 0.5.23's package has about 4,700).
MAX_SOURCE_FILES = 50_000


class SourceError(ValueError):
    """A file of the tree that cannot be read as source (the message names it)."""


def read_source(path: "os.PathLike[str] | str", errors: str = "strict") -> str:
    """The text of the Python source file ``path``; SourceError naming it otherwise
    (``errors="replace"``: bytes that are not UTF-8 become U+FFFD instead)."""
    where = shown_path(path)
    try:
        data = read_regular_file(os.fspath(path), MAX_SOURCE_BYTES)
    except OSError as exc:
        raise SourceError(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise SourceError(f"{where}: {exc}; accepted: a regular file of at most {MAX_SOURCE_BYTES} bytes "
                          f"of UTF-8 Python source") from None
    try:
        return data.decode("utf-8", errors)
    except UnicodeDecodeError as exc:
        raise SourceError(f"{where}: not UTF-8 (byte {exc.start}); accepted: UTF-8 Python source") from None


def python_tree(text: str) -> Tuple[Optional[ast.Module], Optional[str]]:
    """CPython's reading of ``text``: (its syntax tree, None); (None, why) when it is nested
    deeper than CPython's parser takes, which libcst's native parser must not see (it can
    overflow its stack there); (None, None) for any other syntax error, which may be syntax
    newer than this Python's: libcst, whose grammar is newer, decides those."""
    try:
        return ast.parse(text), None
    except SyntaxError as exc:
        if exc.msg.startswith("too many") or "too complex" in exc.msg:  # nested parentheses, indentation levels
            return None, f"{exc.msg}, line {exc.lineno}"
        return None, None
    except (RecursionError, MemoryError):
        return None, "nested too deeply for Python's parser"
    except ValueError as exc:  # a NUL byte
        return None, str(exc)


def syntax_problem(text: str) -> Optional[str]:
    """Why ``text`` must not reach libcst (None: it may)."""
    return python_tree(text)[1]


# --- output files -----------------------------------------------------------------------

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
