"""Whether a module of the tree still imports a module the series removes.

Read from the syntax tree (CPython's ``ast``), not from the words of the text: a string
or a comment that names the module (the registry's own ``sources`` do) is no import.
An importer is a module that

- imports it or something inside it: ``import a.b.m``, ``from a.b.m import x``,
  ``from a.b import m``, and the relative forms ``from .m import x``, ``from . import m``;
- reaches it as an attribute of a package it imported (``import a.b as p`` then ``p.m``);
- names it, whole and dotted, to ``importlib.import_module`` or ``__import__``.
"""

from __future__ import annotations

import ast
from typing import Dict, Optional


def module_name(rel: str, package: str = "sglang") -> str:
    """``srt/x/m.py`` -> ``sglang.srt.x.m`` (a package's ``__init__.py`` is the package)."""
    parts = [package, *rel[:-3].split("/")] if rel.endswith(".py") else [package, *rel.split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(text: str, importer: str, target: str, package: str = "sglang") -> Optional[str]:
    """How the module ``importer`` (a path relative to the package, e.g. ``srt/x/y.py``)
    with source ``text`` imports the module ``target`` (dotted): the statement's line, or
    None when it does not.  A source CPython cannot parse counts as importing it (what it
    does cannot be told): the reason says so."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "it does not parse, so whether it imports the module cannot be told"
    name = module_name(importer, package)
    here = name if importer.endswith("__init__.py") else name.rpartition(".")[0]  # its package
    parent, _, last = target.rpartition(".")
    aliases: Dict[str, str] = {}  # a name the module binds -> the module it stands for

    def inside(dotted: str) -> bool:
        return dotted == target or dotted.startswith(target + ".")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if inside(alias.name):
                    return f"line {node.lineno}: import {alias.name}"
                bound = alias.asname or alias.name.split(".")[0]
                aliases[bound] = alias.name if alias.asname else bound
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, here)
            if base is None:
                continue
            if inside(base):
                return f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import ..."
            for alias in node.names:
                if f"{base}.{alias.name}" == target:
                    return f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}"
                aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == last:
            dotted = _dotted(node.value)
            if dotted is not None:
                head, _, rest = dotted.partition(".")
                full = aliases.get(head, head) + (f".{rest}" if rest else "")
                if full == parent:
                    return f"line {node.lineno}: {dotted}.{last}"
        elif (isinstance(node, ast.Call) and _dotted(node.func) in ("importlib.import_module", "import_module",
                                                                      "__import__")
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and inside(node.args[0].value)):
            return f"line {node.lineno}: {_dotted(node.func)}({node.args[0].value!r})"
    return None


def _absolute(node: ast.ImportFrom, here: str) -> Optional[str]:
    """The module ``from <...> import`` reads, absolute (None: above the top package)."""
    if node.level == 0:
        return node.module or ""
    parts = here.split(".")
    if node.level - 1 >= len(parts):
        return None
    base = ".".join(parts[:len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _dotted(node: ast.expr) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None
