"""libcst helpers shared by the rewriter (``rewriter.py``) and the replace edits
(``replace.py``): finding a function and swapping it, its parameters, dotted names,
docstrings, black's layout of a call.  Both import this module; neither imports the
other's internals.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union, cast

import libcst as cst

LINE_LENGTH = 88  # SGLang formats with black's default


class Mismatch(Exception):
    """A site does not have the shape it was written for (the message says how)."""


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """The dotted name an expression is spelled with (``lru_cache``, ``functools.lru_cache``), else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def find_function(module: cst.Module, qualname: str) -> cst.FunctionDef:
    """The top-level function or direct method ``qualname``; exactly one definition."""
    owner, i = _path_to(module, qualname)[-1]
    return cast(cst.FunctionDef, _statements_of(owner)[i])


def replace_function(module: cst.Module, qualname: str, new: cst.FunctionDef) -> cst.Module:
    """``module`` with the function ``find_function`` finds there swapped for ``new``.

    Rebuilt along the path to it (the module, its classes), not by visiting every node: a
    libcst traversal of a large file (server_args.py) costs about 0.1 s each time.
    """
    replacement: cst.CSTNode = new
    for owner, i in reversed(_path_to(module, qualname)):
        body = list(_statements_of(owner))
        body[i] = replacement
        if isinstance(owner, cst.Module):
            return owner.with_changes(body=body)
        block = cst.ensure_type(owner.body, cst.IndentedBlock)
        replacement = owner.with_changes(body=block.with_changes(body=body))
    raise AssertionError("a path starts at the module")


def _statements_of(owner: Union[cst.Module, cst.ClassDef, cst.Try]) -> Sequence[cst.CSTNode]:
    return owner.body if isinstance(owner, cst.Module) else cst.ensure_type(owner.body, cst.IndentedBlock).body


def _path_to(module: cst.Module, qualname: str) -> List[Tuple[Union[cst.Module, cst.ClassDef, cst.Try], int]]:
    """[(the module, class or module-level ``try:`` holding each step of ``qualname``, the
    step's index in it)]."""
    path: List[Tuple[Union[cst.Module, cst.ClassDef, cst.Try], int]] = []
    owner: Union[cst.Module, cst.ClassDef, cst.Try] = module
    parts = qualname.split(".")
    for part in parts[:-1]:
        classes = [i for i, n in enumerate(_statements_of(owner)) if isinstance(n, cst.ClassDef) and n.name.value == part]
        if len(classes) != 1:
            raise Mismatch(f"class {part} is {'missing' if not classes else f'defined {len(classes)} times'}")
        path.append((owner, classes[0]))
        owner = cast(cst.ClassDef, _statements_of(owner)[classes[0]])
        if not isinstance(owner.body, cst.IndentedBlock):
            raise Mismatch(f"class {part} has no block body")
    fns = [i for i, n in enumerate(_statements_of(owner)) if isinstance(n, cst.FunctionDef) and n.name.value == parts[-1]]
    if not fns and isinstance(owner, cst.Module):  # a module-level function defined in ``try:`` (an optional import's)
        tries = [(i, n) for i, n in enumerate(owner.body) if isinstance(n, cst.Try)
                 and any(isinstance(f, cst.FunctionDef) and f.name.value == parts[-1] for f in _statements_of(n))]
        if len(tries) == 1:
            path.append((owner, tries[0][0]))
            owner = tries[0][1]
            fns = [i for i, n in enumerate(_statements_of(owner))
                   if isinstance(n, cst.FunctionDef) and n.name.value == parts[-1]]
    if len(fns) != 1:
        raise Mismatch(f"{qualname} is {'missing' if not fns else f'defined {len(fns)} times'}")
    path.append((owner, fns[0]))
    return path


def param_names(fn: cst.FunctionDef) -> Tuple[str, ...]:
    """Parameter names in order; ``*args``/``**kwargs`` keep their stars."""
    p = fn.params
    names = [x.name.value for x in (*p.posonly_params, *p.params)]
    if isinstance(p.star_arg, cst.Param):
        names.append("*" + p.star_arg.name.value)
    names += [x.name.value for x in p.kwonly_params]
    if p.star_kwarg is not None:
        names.append("**" + p.star_kwarg.name.value)
    return tuple(names)


def is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def call_lines(prefix: str, call: str, args: Sequence[str], indent: int) -> str:
    """``prefix + call(args)``: on one line when it fits, else black's exploded forms."""
    one = f"{prefix}{call}({', '.join(args)})"
    if indent + len(one) <= LINE_LENGTH or not args:
        return one
    joined = ", ".join(args)
    if indent + 4 + len(joined) <= LINE_LENGTH:
        return f"{prefix}{call}(\n    {joined}\n)"
    return f"{prefix}{call}(\n" + "".join(f"    {a},\n" for a in args) + ")"
