"""Bounds on the shape of the SGLang source tree the tools read, checked before any parser or
walk that can run out of stack sees it.

CPython's own parser refuses source nested deeper than it takes (``files.python_tree``), but
two shapes pass it and still overflow what comes after:

- one chain of ``and`` / ``or`` operands, or of adjacent string literals: CPython keeps the
  operands in one flat list (and joins adjacent literals into one constant), while libcst
  nests each operand one level below the previous one, so its native parser overflowed its
  stack (a segfault, exit 139, no message) at about 8,000 ``and`` operands of valid Python
  and raised on about 4,000 adjacent literals;
- folders nested about 1,000 deep: ``os.walk`` (Python 3.11) recurses once per level and
  raised RecursionError.

Each is checked with bounds far above anything SGLang holds (its longest ``and`` chain has a
handful of operands; its deepest folder is under 10 levels below ``sglang/``) and far below
what fails; a source or tree past one is refused in one line naming the file and line, or the
folder.  docs/configuration.md ("Bounds") lists them.
"""

from __future__ import annotations

import ast
import io
import tokenize
from typing import Optional, Tuple

# Operands of one ``and`` / ``or`` chain (libcst nests them: depth grows by one per operand).
MAX_BOOL_OPERANDS = 1000
# Adjacent string literals joined into one (libcst nests them as it nests ``and`` operands).
MAX_ADJACENT_STRINGS = 1000
# Folders below a scanned top folder (``srt``, ``kernels``).
MAX_FOLDER_DEPTH = 64


def expression_problem(text: str, tree: Optional[ast.AST] = None) -> Optional[Tuple[int, str]]:
    """``(line, why)`` for the first expression of ``text`` past a bound, or None.

    ``tree`` is CPython's syntax tree of ``text`` where the caller has it (``ast.parse`` is
    asked otherwise; source CPython cannot parse is for the caller's own syntax check, and
    gives None here).  The walk over the tree is iterative, the token scan linear: neither
    recurses, whatever the source holds."""
    if tree is None:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.BoolOp) and len(node.values) > MAX_BOOL_OPERANDS:
            word = "and" if isinstance(node.op, ast.And) else "or"
            return node.lineno, (f"one expression of {len(node.values)} '{word}' operands; accepted: at most "
                                 f"{MAX_BOOL_OPERANDS} operands in one 'and' / 'or' chain")
        todo.extend(ast.iter_child_nodes(node))
    return _adjacent_strings(text)


_FSTRING_START = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+: an f-string is several tokens
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


def _adjacent_strings(text: str) -> Optional[Tuple[int, str]]:
    """The first run of more than MAX_ADJACENT_STRINGS string literals with only line breaks
    and comments between them (one linear pass over the tokens)."""
    if text.count('"') + text.count("'") <= 2 * MAX_ADJACENT_STRINGS:
        return None  # each literal has two quotes at least: no run can be that long
    run, first, inside = 0, 0, 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if inside:  # the tokens of an f-string (3.12+) count as the one literal they form
                inside += (tok.type == _FSTRING_START) - (tok.type == _FSTRING_END)
                continue
            if tok.type in (tokenize.STRING, _FSTRING_START):
                inside = 1 if tok.type == _FSTRING_START else 0
                first = tok.start[0] if run == 0 else first
                run += 1
                if run > MAX_ADJACENT_STRINGS:
                    return first, (f"one expression of more than {MAX_ADJACENT_STRINGS} adjacent string literals; "
                                   f"accepted: at most {MAX_ADJACENT_STRINGS} joined into one")
            elif tok.type not in (tokenize.NL, tokenize.COMMENT):
                run = 0
    except (tokenize.TokenError, SyntaxError):
        return None
    return None


def expression_refusal(label: str, text: str, tree: Optional[ast.AST] = None) -> Optional[str]:
    """The one-line refusal for ``text`` (the file named by ``label``) past a bound, or None:
    ``'<label>:<line>: <why>'``."""
    found = expression_problem(text, tree)
    return None if found is None else f"{label}:{found[0]}: {found[1]}"
