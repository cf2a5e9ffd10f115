"""Reading an SGLang source tree safely (``sglang-arch upstream`` and ``sglang-arch audit``).

Both tools read Python files of a tree the user names.  Every file goes through
``read_source``: a regular file (a FIFO, a device or a directory is refused before it is
opened, so nothing blocks), at most ``MAX_SOURCE_BYTES``, UTF-8; the error names the
file and what is accepted.  ``syntax_problem`` asks CPython's own parser first: libcst's
native parser can overflow its stack (a segfault, no message) on nesting CPython refuses
with an error, so libcst never sees source nested deeper than CPython takes.
"""

from __future__ import annotations

import ast
import os
from typing import Optional, Tuple

from .arch.validate import MIB, read_regular_file

# SGLang 0.5.23's largest .py file is under 0.5 MB; 8x that and more.
MAX_SOURCE_BYTES = 4 * MIB
# Python files one tree walk reads (SGLang 0.5.23's package has about 4,700).
MAX_SOURCE_FILES = 50_000


class SourceError(ValueError):
    """A file of the tree that cannot be read as source (the message names it)."""


def path_text(path: "os.PathLike[str] | str") -> str:
    """``path`` for a message: whole, with unprintable characters escaped (an ESC byte in a
    file name must not reach the terminal raw)."""
    text = os.fspath(path)
    return text if text.isprintable() else repr(text)[1:-1]


def read_source(path: "os.PathLike[str] | str", errors: str = "strict") -> str:
    """The text of the Python source file ``path``; SourceError naming it otherwise
    (``errors="replace"``: bytes that are not UTF-8 become U+FFFD instead)."""
    where = path_text(path)
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
