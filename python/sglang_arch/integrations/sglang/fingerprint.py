"""What a plugin target replaces, as a fingerprint of SGLang's own code.

A hook is written against one body of SGLang's function (or one assignment of a module
value).  The plugin replaces that code only where the installed SGLang still has the same
body: a release that changed the function (fixed a decision, read another flag, returned
another type) keeps its own code, said once at start-up and listed by ``sglang-arch show``.

The fingerprint is the SHA-256 (first 16 hex digits) of the definition's AST as
``ast.dump`` writes it without positions, after dropping docstrings.  So comments,
docstrings, blank lines, line breaks, quoting style and the definition's position in its
file are ignored; names, decorators, parameters, defaults, annotations and every statement
count.  A module value's fingerprint is that of the module-level assignment that binds it.

Two readers give the same fingerprint: :func:`of_object` from a live function (the
plugin, at routing: ``inspect.getsource``, so only the function's lines are read), and
:func:`of_module_source` from a module's text (``scripts/fingerprints``, which records the
supported releases' fingerprints in ``known_bodies.py``, and ``sglang-arch show``, which
reads the installed SGLang's files without importing it).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import inspect
import linecache
import os
import textwrap
import tokenize
from typing import Any, Dict, Iterable, List, Optional, Tuple

# What reading or parsing a module's code may raise where Python could not read it either
# (a bad coding declaration, bytes not in its encoding, a syntax error) or where it is
# nested past what the parser takes.
_UNREADABLE = (OSError, ValueError, SyntaxError, RecursionError, MemoryError)

_DOC_OWNERS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _drop_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, _DOC_OWNERS) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return tree


def of_node(node: ast.AST, owned: bool = False) -> Optional[str]:
    """The fingerprint of one definition or assignment (docstrings dropped, positions ignored).
    ``owned``: the node was parsed for this call alone, so its docstrings are dropped in place
    (copying a tree is most of the cost of a fingerprint).  None where the tree is too deep
    to be written out even with room to spare (``_deep``)."""

    def dump() -> str:
        return ast.dump(_drop_docstrings(node if owned else copy.deepcopy(node)), annotate_fields=True,
                        include_attributes=False)

    dumped = _deep(dump)
    return None if dumped is None else hashlib.sha256(dumped.encode()).hexdigest()[:16]


# Room for a tree deeper than Python's recursion limit allows (ast.dump and deepcopy recurse
# once per level: a valid 2,000-term sum is 2,000 levels deep), in a thread of its own.
DEEP_RECURSION = 200_000
DEEP_STACK_BYTES = 512 * 1024 * 1024


def _deep(work):
    """``work()``; where it runs out of recursion, again in a thread with a large stack and
    recursion limit; None where even that does not suffice (the caller treats the code as
    unreadable: the hook keeps SGLang's own)."""
    try:
        return work()
    except RecursionError:
        pass
    import sys
    import threading

    box: Dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except (RecursionError, MemoryError):
            box["value"] = None

    limit = sys.getrecursionlimit()
    try:
        previous = threading.stack_size(DEEP_STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform that sets no thread stack size
        return None
    try:
        sys.setrecursionlimit(max(limit, DEEP_RECURSION))
        thread = threading.Thread(target=run, name="sglang-arch-fingerprint")
        thread.start()
        thread.join()
    finally:
        sys.setrecursionlimit(limit)
        threading.stack_size(previous)
    return box.get("value")


def of_object(function: Any) -> Optional[str]:
    """The fingerprint of a live function's definition, or None where its source cannot be read
    (a builtin, a function made at run time, a missing file).  A function's lines are found
    from its code object (``inspect.getsource`` looks its module up among every loaded one,
    most of the plugin's start-up cost); anything else goes through ``inspect``."""
    quick = _of_code(function)
    if quick is not None:
        return quick
    try:
        source = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(source)
    except (TypeError, *_UNREADABLE):
        return None
    if not tree.body or not isinstance(tree.body[0], _DEFS):
        return None
    return of_node(tree.body[0], owned=True)


def _of_code(function: Any) -> Optional[str]:
    """:func:`of_object` for a plain function, from its file's lines (None: use ``inspect``)."""
    code = getattr(function, "__code__", None)
    name = getattr(function, "__name__", None)
    if code is None or not name:
        return None
    lines = linecache.getlines(code.co_filename)
    first = code.co_firstlineno - 1  # the first decorator's line, or the def's
    if not 0 <= first < len(lines):
        return None
    found = _def_lines(lines, name, first, min(len(lines), first + 50), _indent(lines[first]))
    if not found:
        return None
    start = found[0]
    try:
        tree = ast.parse(textwrap.dedent("".join(lines[_decorated_start(lines, start):_block_end(lines, start)])))
    except _UNREADABLE:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return of_node(tree.body[0], owned=True)


def _statements(body: Iterable[ast.stmt]) -> List[ast.stmt]:
    """A block's statements, those under ``if`` / ``try`` / ``with`` at the same level included
    (SGLang defines some functions per platform under an ``if``), in source order."""
    out: List[ast.stmt] = []
    for stmt in body:
        out.append(stmt)
        if isinstance(stmt, ast.If):
            out += _statements(stmt.body) + _statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            out += _statements(stmt.body)
            for handler in stmt.handlers:
                out += _statements(handler.body)
            out += _statements(stmt.orelse) + _statements(stmt.finalbody)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            out += _statements(stmt.body)
    return out


def _binds(stmt: ast.stmt, name: str) -> bool:
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name and stmt.value is not None
    return False


def find_definition(tree: ast.Module, qualname: str) -> Optional[ast.stmt]:
    """The statement that binds ``qualname`` (``f``, ``Class.method``) in a module: a ``def`` or
    ``class``, or an assignment (``is_sm90_supported = lru_cache(...)(...)``, a module value),
    the last one where several do (the one that holds when the module has run)."""
    body: Iterable[ast.stmt] = tree.body
    parts = qualname.split(".")
    found: Optional[ast.stmt] = None
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        found = None
        for stmt in _statements(body):
            if isinstance(stmt, (_DEFS if last else (ast.ClassDef,))) and stmt.name == part:
                found = stmt
            elif last and _binds(stmt, part):
                found = stmt
        if found is None:
            return None
        body = getattr(found, "body", [])
    return found


def of_module_source(source: str, qualname: str) -> Optional[str]:
    """The fingerprint of ``qualname`` as a module's text defines it; None where it does not."""
    try:
        tree = ast.parse(source)
    except _UNREADABLE:
        return None
    node = find_definition(tree, qualname)
    return None if node is None else of_node(node)


def source_lines(path: str) -> List[str]:
    """A module file's lines as Python reads the file: its encoding from a byte-order mark or
    a coding declaration (PEP 263: a latin-1 module is SGLang's module too), UTF-8 else.
    OSError, SyntaxError (a bad declaration) or ValueError (UnicodeDecodeError, an unknown
    codec) where Python could not read it either."""
    try:
        with tokenize.open(path) as fh:
            return fh.readlines()
    except LookupError as exc:  # an unknown codec named in the coding declaration
        raise ValueError(str(exc)) from None


def _module_tree(path: str, cache: Dict[Any, Any]) -> Optional[ast.Module]:
    tree = cache.get(("tree", path))
    if tree is None:
        try:
            lines = cache.get(("lines", path))
            if lines is None:
                lines = cache[("lines", path)] = source_lines(path)
            tree = cache[("tree", path)] = ast.parse("".join(lines))
        except _UNREADABLE:
            return None
    return tree


def _binding(tree: ast.Module, name: str) -> Optional[ast.stmt]:
    """The module-level statement that last binds ``name``: an assignment, an import, a def."""
    found = None
    for stmt in _statements(tree.body):
        if _binds(stmt, name) or (isinstance(stmt, _DEFS) and stmt.name == name):
            found = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)) and any(
                (a.asname or a.name.split(".")[0]) == name for a in stmt.names):
            found = stmt
    return found


def _absolute(module: str, path: str, target: Optional[str], level: int) -> str:
    """The module a ``from target import`` of ``module`` (its file ``path``) names."""
    if not level:
        return target or ""
    package = module if os.path.basename(path) == "__init__.py" else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{target}" if target else package


# Modules followed through ``from X import NAME`` to the assignment that binds a table.
MAX_DATA_HOPS = 4


def data_source(module_path, module: str, name: str,
                cache: Optional[Dict[Any, Any]] = None) -> Optional[Tuple[str, str, str]]:
    """Where the table ``name`` of ``module`` is written: (module, its file, the name there) of
    the module-level assignment that binds it, following ``from X import NAME`` (the table a
    decision reads is often imported); None where it is no table (a function, a class, a
    module, a value made by a call at import) or cannot be read.  ``module_path``: module
    name -> its file (or None)."""
    cache = {} if cache is None else cache
    for _ in range(MAX_DATA_HOPS):
        path = module_path(module)
        tree = None if path is None else _module_tree(path, cache)
        stmt = None if tree is None else _binding(tree, name)
        if stmt is None:
            return None
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            if any(isinstance(node, ast.Call) for node in ast.walk(stmt.value)):  # type: ignore[arg-type]
                return None  # an object made at import (a logger, a flag read from the environment), not a table
            return module, path, name  # type: ignore[return-value]
        if not isinstance(stmt, ast.ImportFrom):
            return None
        alias = next(a for a in stmt.names if (a.asname or a.name) == name)
        module, name = _absolute(module, path, stmt.module, stmt.level), alias.name  # type: ignore[arg-type]
    return None


def of_data(module_path, module: str, name: str, cache: Optional[Dict[Any, Any]] = None) -> Optional[str]:
    """The fingerprint of the assignment that writes ``module``'s value ``name`` (``data_source``)."""
    cache = {} if cache is None else cache
    found = data_source(module_path, module, name, cache)
    if found is None:
        return None
    tree = _module_tree(found[1], cache)
    node = None if tree is None else find_definition(tree, found[2])
    return None if node is None else of_node(node)


def module_file(root: str, module: str) -> Optional[str]:
    """The file of ``module`` (dotted) in a tree whose top folder holds the ``sglang`` package."""
    base = os.path.join(root, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def installed_root() -> Optional[str]:
    """The folder that holds the installed ``sglang`` package, found without importing it."""
    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0]))


def of_tree(root: str, targets: Iterable[Any]) -> Dict[str, Optional[str]]:
    """Each target's fingerprint in the SGLang tree at ``root`` (None: not defined there), each
    module's file read and parsed once."""
    trees: Dict[str, Optional[ast.Module]] = {}
    out: Dict[str, Optional[str]] = {}
    for target in targets:
        module = target.module
        if module not in trees:
            path = module_file(root, module)
            tree = None
            if path is not None:
                try:
                    tree = ast.parse("".join(source_lines(path)))
                except _UNREADABLE:
                    tree = None
            trees[module] = tree
        tree = trees[module]
        node = None if tree is None else find_definition(tree, target.attr)
        out[target.path] = None if node is None else of_node(node)
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _def_lines(lines: List[str], name: str, lo: int, hi: int, indent: Optional[int]) -> List[int]:
    """Lines in [lo, hi) that open ``def name`` / ``class name`` (at ``indent`` where given)."""
    heads = ("def " + name, "async def " + name, "class " + name)
    out = []
    for i in range(lo, hi):
        text = lines[i].lstrip()
        if not text.startswith(heads):
            continue
        rest = text.split(name, 1)[1][:1]
        if rest in ("(", ":", " ") and (indent is None or _indent(lines[i]) == indent):
            out.append(i)
    return out


def _block_end(lines: List[str], start: int) -> int:
    """The first line after the block opened at ``start`` (its body: deeper lines, blanks, comments)."""
    base = _indent(lines[start])
    i = start + 1
    while i < len(lines):
        text = lines[i].strip()
        if text and not text.startswith("#") and _indent(lines[i]) <= base and not text.startswith(")"):
            if _indent(lines[i]) < base or not text.startswith(("]", "}")):
                break
        i += 1
    return i


def _decorated_start(lines: List[str], start: int) -> int:
    """The first decorator line above the ``def`` at ``start`` (a decorator may span lines)."""
    base, first, j = _indent(lines[start]), start, start - 1
    while j >= 0:
        text = lines[j].strip()
        if not text:
            break
        if _indent(lines[j]) == base and text.startswith("@"):
            first = j
        elif not (_indent(lines[j]) > base or text.startswith(")")):
            break
        j -= 1
    return first


def of_lines(lines: List[str], qualname: str) -> Optional[str]:
    """``of_module_source`` for a ``def`` / ``class`` without parsing the whole module: the lines of
    the one definition of each part of ``qualname`` are located by their indentation, and only
    those are parsed.  None where that is not one clear definition (an assignment, a name defined
    twice): the caller then parses the module."""
    lo, hi, indent = 0, len(lines), 0
    start = -1
    for part in qualname.split("."):
        found = _def_lines(lines, part, lo, hi, indent)
        if len(found) != 1:
            return None
        start = found[0]
        lo, hi = start + 1, _block_end(lines, start)
        body = [i for i in range(lo, hi) if lines[i].strip() and not lines[i].lstrip().startswith("#")]
        if not body:
            return None
        indent = _indent(lines[body[0]])
    try:
        tree = ast.parse(textwrap.dedent("".join(lines[_decorated_start(lines, start):hi])))
    except _UNREADABLE:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], _DEFS):
        return None
    return of_node(tree.body[0], owned=True)


def of_file(path: str, qualname: str, cache: Optional[Dict[str, Any]] = None) -> Optional[str]:
    """The fingerprint of ``qualname`` in the module file ``path``: :func:`of_lines` where it finds
    one clear definition, else the whole module parsed (an assignment, a conditional definition).
    ``cache``: a dict kept by the caller, so that each file is read, and parsed, at most once."""
    cache = {} if cache is None else cache
    try:
        lines = cache.get(("lines", path))
        if lines is None:
            lines = cache[("lines", path)] = source_lines(path)
        quick = of_lines(lines, qualname)
        if quick is not None:
            return quick
        tree = cache.get(("tree", path))
        if tree is None:
            tree = cache[("tree", path)] = ast.parse("".join(lines))
    except _UNREADABLE:
        return None
    node = find_definition(tree, qualname)
    return None if node is None else of_node(node)


_DIGESTS: Dict[Tuple[str, int, int], str] = {}  # (path, mtime_ns, size) -> digest: one hash per file version


def file_digest(path: str) -> Optional[str]:
    """A hash of a module file's bytes (None: unreadable).  A file whose digest is recorded for
    a supported release holds exactly that release's definitions: no need to parse it.  Each
    version of a file (its modification time and size) is hashed once per process."""
    try:
        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        if key in _DIGESTS:
            return _DIGESTS[key]
        with open(path, "rb") as fh:
            digest = _DIGESTS[key] = hashlib.sha256(fh.read()).hexdigest()[:16]
        return digest
    except OSError:
        return None


def recorded_fingerprint(root: str, path: str, target_path: str) -> Optional[str]:
    """The recorded fingerprint of ``target_path`` where the file ``path`` (under ``root``) is
    byte for byte the one a supported release recorded; else None (parse it)."""
    from . import known_bodies

    rel = os.path.relpath(path, root).replace(os.sep, "/")
    digest = None
    for release in known_bodies.SUPPORTED:
        expected = known_bodies.FILES.get(release, {}).get(rel)
        if expected is None:
            continue
        digest = digest or file_digest(path)
        if digest == expected:
            return known_bodies.BODIES.get(release, {}).get(target_path)
    return None


def releases_with(path: str, value: Optional[str]) -> List[str]:
    """The supported releases whose recorded definition of ``path`` has fingerprint ``value``."""
    from . import known_bodies

    return [release for release in known_bodies.SUPPORTED if known_bodies.BODIES.get(release, {}).get(path) == value
            and value is not None]


def supported() -> str:
    """The supported releases, for messages: ``sglang 0.5.23``."""
    from . import known_bodies

    return "sglang " + ", ".join(known_bodies.SUPPORTED) if known_bodies.SUPPORTED else "no recorded release"
