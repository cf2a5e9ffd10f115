"""Rewrite SGLang call sites so they ask the registry first, with libcst.

The rewrite is additive and keeps the file's own formatting and comments: a routed
function gets one guard statement at the top of its body (after the docstring), marked
by ``MARKER``, that asks a glue function in ``sglang.srt.arch.glue`` and returns its
answer unless the answer is ``None``; upstream's body stays below it, untouched, as the
fallback (the ``check`` form of the explicit attention-backend check); the replace-form
edits of ``replace.py`` delete what they replace.  Each rewritten module gains one import
of its glue module.

Every site is checked against the shape it was written for (present once, the expected
parameters, the module names the glue reads) before anything is rewritten; when one
site of a module does not match, the module comes back unchanged, never half-rewritten.
Running the rewrite on its own output changes nothing.

This module knows nothing about SGLang's paths or the registry's policies: the sites
are data (``sites.py``), and the inserted code only calls the glue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple, Union, cast

import libcst as cst

from ..files import syntax_problem
from . import replace

# A planned rewrite: the function that replaces the site's (None: nothing to do), and the status.
Planned = Tuple[Optional[cst.FunctionDef], str]

MARKER = "# sglang-arch: routed through sglang.srt.arch"
GLUE_PACKAGE = "sglang.srt.arch.glue"
ANSWER = "arch_answer"  # the local the guard binds; must not clash with the function's own names

REWRITTEN = "rewritten"
UPDATED = "updated"
ALREADY = "already routed"
UNTOUCHED = "left untouched"
GUARD_FORMS = ("answer", "done", "check")
LINE_LENGTH = 88  # SGLang formats with black's default


@dataclass(frozen=True)
class FunctionSite:
    """A function (``name``) or method (``Class.name``) that asks the glue first.

    The guard inserted at the top of its body calls ``<glue alias>.<call>(<args>)``;
    ``form`` says what it does with the answer: ``answer`` returns it unless it is None,
    ``done`` returns when it is true (the glue did the work), ``check`` only calls (the
    glue raises or does nothing).  ``uses`` are module-level names the glue reads from
    the module at run time (checked to still exist).
    """

    qualname: str
    params: Tuple[str, ...]
    call: str
    args: Tuple[str, ...] = ()
    form: str = "answer"
    uses: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.form not in GUARD_FORMS:
            raise ValueError(f"invalid guard form {self.form!r}; accepted: {', '.join(GUARD_FORMS)}")

    @property
    def label(self) -> str:
        return self.qualname


Site = FunctionSite


@dataclass(frozen=True)
class ModulePlan:
    """The sites of one source file and the glue module they call."""

    path: str  # relative to the sglang package directory, e.g. "srt/layers/flashinfer_comm_fusion.py"
    glue: str  # glue module name in GLUE_PACKAGE, e.g. "fusion"
    sites: Tuple[Site, ...]

    @property
    def alias(self) -> str:
        return f"arch_{self.glue}"


@dataclass(frozen=True)
class SiteOutcome:
    path: str
    site: str
    status: str  # REWRITTEN | UPDATED | ALREADY | UNTOUCHED
    reason: str = ""

    def describe(self) -> str:
        return f"{self.status}: {self.reason}" if self.reason else self.status


@dataclass
class ModuleResult:
    path: str
    original: str
    new: str
    outcomes: List[SiteOutcome] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.status != UNTOUCHED for o in self.outcomes)

    @property
    def changed(self) -> bool:
        return self.new != self.original


class _Mismatch(Exception):
    """A site does not have the shape it was written for (the message says how)."""


def rewrite_source(source: str, plan: ModulePlan) -> ModuleResult:
    """Route every site of ``plan`` in ``source``; unchanged source when any site does not match."""
    problem = syntax_problem(source)  # CPython first: libcst's parser can crash where CPython refuses
    if problem is None:
        try:
            return _rewrite(cst.parse_module(source), source, plan)
        except cst.ParserSyntaxError as exc:
            problem = str(exc).splitlines()[0]
        except RecursionError:  # libcst's visitors recurse per nesting level
            problem = "nested too deeply to rewrite"
    reason = f"{plan.path} does not parse ({problem})"
    return ModuleResult(plan.path, source, source, [SiteOutcome(plan.path, s.label, UNTOUCHED, reason)
                                                    for s in plan.sites])


def _rewrite(module: cst.Module, source: str, plan: ModulePlan) -> ModuleResult:
    bound = module_bindings(module)
    import_node = _find_glue_import(module, plan)
    problems: Dict[str, str] = {}
    if import_node is None and plan.alias in bound:
        problems = {s.label: f"the module already defines {plan.alias}" for s in plan.sites}
    replacements: List[Tuple[str, cst.FunctionDef]] = []
    statuses: Dict[str, str] = {}
    for site in plan.sites:
        if site.label in problems or isinstance(site, replace.EDITS):
            continue
        try:
            missing = [name for name in site.uses if name not in bound]
            if missing:
                raise _Mismatch(f"the module no longer defines {', '.join(missing)} (the routed code reads it)")
            new, status = _route_function(module, site, plan.alias)
        except _Mismatch as exc:
            problems[site.label] = str(exc)
            continue
        statuses[site.label] = status
        if new is not None:
            replacements.append((site.qualname, new))
    updated = module
    if not problems:
        for qualname, new in replacements:
            updated = replace_function(updated, qualname, new)
    for site in plan.sites:
        if not isinstance(site, replace.EDITS) or site.label in problems:
            continue
        try:
            updated, already = replace.apply(updated, site, plan.alias)
        except replace.Mismatch as exc:
            problems[site.label] = str(exc)
            continue
        statuses[site.label] = ALREADY if already else REWRITTEN
    if problems:
        outcomes = [SiteOutcome(plan.path, s.label, UNTOUCHED, problems.get(s.label)
                                or "not rewritten: another site of this module does not match")
                    for s in plan.sites]
        return ModuleResult(plan.path, source, source, outcomes)
    needs_glue = any(not isinstance(s, replace.EDITS) or replace.calls_glue(s) for s in plan.sites)
    if import_node is None and needs_glue:
        updated = _insert_glue_import(updated, updated, plan)
    if replace.is_empty(updated):
        outcomes = [SiteOutcome(plan.path, s.label, statuses[s.label],
                                "" if statuses[s.label] == ALREADY else "nothing is left: the module is removed")
                    for s in plan.sites]
        return ModuleResult(plan.path, source, "", outcomes)
    outcomes = [SiteOutcome(plan.path, s.label, statuses[s.label]) for s in plan.sites]
    return ModuleResult(plan.path, source, updated.code, outcomes)


# --- function sites -------------------------------------------------------------------

def _route_function(module: cst.Module, site: FunctionSite, alias: str) -> Planned:
    fn = find_function(module, site.qualname)
    params = param_names(fn)
    if params != site.params:
        raise _Mismatch(f"parameters are ({', '.join(params)}), expected ({', '.join(site.params)})")
    if not isinstance(fn.body, cst.IndentedBlock):
        raise _Mismatch("its body is on the def line")
    depth = site.qualname.count(".") + 1
    guard = _guard_statement(site, alias, depth * len(module.default_indent.expandtabs()))
    body = list(fn.body.body)
    marked = [i for i, stmt in enumerate(body) if _has_marker(stmt)]
    if len(marked) > 1:
        raise _Mismatch(f"the sglang-arch marker appears {len(marked)} times in it")
    rest = [stmt for i, stmt in enumerate(body) if i not in marked]
    clash = _names_in(rest) & {ANSWER, alias}
    if clash:
        raise _Mismatch(f"it already uses the name {', '.join(sorted(clash))}")
    if marked:
        i = marked[0]
        if _code(body[i].with_changes(leading_lines=())) == _code(guard.with_changes(leading_lines=())):
            return None, ALREADY
        body[i] = guard.with_changes(leading_lines=cast(cst.SimpleStatementLine, body[i]).leading_lines)
        return fn.with_changes(body=fn.body.with_changes(body=body)), UPDATED
    at = 1 if body and _is_docstring(body[0]) else 0
    body.insert(at, guard)
    return fn.with_changes(body=fn.body.with_changes(body=body)), REWRITTEN


def _guard_statement(site: FunctionSite, alias: str, indent: int) -> cst.BaseStatement:
    stmt = cst.parse_statement(guard_code(site, alias, indent))
    return stmt.with_changes(leading_lines=[cst.EmptyLine(comment=cst.Comment(MARKER))])


def guard_code(site: FunctionSite, alias: str, indent: int) -> str:
    """The guard's source at column 0, laid out as black lays it out at ``indent``."""
    call = f"{alias}.{site.call}"
    one = f"{call}({', '.join(site.args)})"
    if site.form == "check":
        return _call_lines("", call, site.args, indent) + "\n"
    if site.form == "done":
        head = f"if {one}:"
        if indent + len(head) > LINE_LENGTH:
            head = "if " + _call_lines("", call, site.args, indent) + ":"
        return head + "\n    return\n"
    head = f"if ({ANSWER} := {one}) is not None:"
    if indent + len(head) > LINE_LENGTH:
        inner = _call_lines(f"{ANSWER} := ", call, site.args, indent + 4)
        head = "if (\n" + _indent(inner) + "\n) is not None:"
    return head + f"\n    return {ANSWER}\n"


def _call_lines(prefix: str, call: str, args: Sequence[str], indent: int) -> str:
    """``prefix + call(args)``: on one line when it fits, else black's exploded forms."""
    one = f"{prefix}{call}({', '.join(args)})"
    if indent + len(one) <= LINE_LENGTH or not args:
        return one
    joined = ", ".join(args)
    if indent + 4 + len(joined) <= LINE_LENGTH:
        return f"{prefix}{call}(\n    {joined}\n)"
    return f"{prefix}{call}(\n" + "".join(f"    {a},\n" for a in args) + ")"


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else line for line in text.splitlines())


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


def _statements_of(owner: Union[cst.Module, cst.ClassDef]) -> Sequence[cst.CSTNode]:
    return owner.body if isinstance(owner, cst.Module) else cst.ensure_type(owner.body, cst.IndentedBlock).body


def _path_to(module: cst.Module, qualname: str) -> List[Tuple[Union[cst.Module, cst.ClassDef], int]]:
    """[(the module or class holding each step of ``qualname``, the step's index in it)]."""
    path: List[Tuple[Union[cst.Module, cst.ClassDef], int]] = []
    owner: Union[cst.Module, cst.ClassDef] = module
    parts = qualname.split(".")
    for part in parts[:-1]:
        classes = [i for i, n in enumerate(_statements_of(owner)) if isinstance(n, cst.ClassDef) and n.name.value == part]
        if len(classes) != 1:
            raise _Mismatch(f"class {part} is {'missing' if not classes else f'defined {len(classes)} times'}")
        path.append((owner, classes[0]))
        owner = cast(cst.ClassDef, _statements_of(owner)[classes[0]])
        if not isinstance(owner.body, cst.IndentedBlock):
            raise _Mismatch(f"class {part} has no block body")
    fns = [i for i, n in enumerate(_statements_of(owner)) if isinstance(n, cst.FunctionDef) and n.name.value == parts[-1]]
    if len(fns) != 1:
        raise _Mismatch(f"{qualname} is {'missing' if not fns else f'defined {len(fns)} times'}")
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


def _is_docstring(stmt: cst.CSTNode) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _has_marker(stmt: cst.CSTNode) -> bool:
    lines = getattr(stmt, "leading_lines", ())
    return any(line.comment is not None and line.comment.value.strip() == MARKER for line in lines)


class _NameCollector(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: Set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)


def _names_in(nodes: Sequence[cst.CSTNode]) -> Set[str]:
    collector = _NameCollector()
    for node in nodes:
        node.visit(collector)
    return collector.names


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def _assigns(stmt: cst.CSTNode) -> Optional[Tuple[str, ...]]:
    """The target names of a plain ``a = b = value`` statement, else None."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    names = [t.target.value for t in stmt.body[0].targets if isinstance(t.target, cst.Name)]
    return tuple(names) if len(names) == len(stmt.body[0].targets) else None


def _marker_line() -> cst.EmptyLine:
    return cst.EmptyLine(comment=cst.Comment(MARKER))


# --- the glue import ------------------------------------------------------------------

def _find_glue_import(module: cst.Module, plan: ModulePlan) -> Optional[cst.SimpleStatementLine]:
    for stmt in module.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            continue
        for small in stmt.body:
            if (isinstance(small, cst.ImportFrom) and small.relative == () and small.module is not None
                    and replace.dotted_name(small.module) == GLUE_PACKAGE and not isinstance(small.names, cst.ImportStar)):
                for alias in small.names:
                    if (replace.dotted_name(alias.name) == plan.glue and alias.asname is not None
                            and isinstance(alias.asname.name, cst.Name) and alias.asname.name.value == plan.alias):
                        return stmt
    return None


def _import_key(stmt: cst.CSTNode) -> Optional[Tuple[str, str]]:
    """(module, first imported name) of a top-level absolute import line, as isort orders them."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        first = "*" if isinstance(small.names, cst.ImportStar) else (replace.dotted_name(small.names[0].name) or "")
        return replace.dotted_name(small.module) or "", first
    if isinstance(small, cst.Import):
        return replace.dotted_name(small.names[0].name) or "", ""
    return None


def _insert_glue_import(original: cst.Module, updated: cst.Module, plan: ModulePlan) -> cst.Module:
    """Insert ``from sglang.srt.arch.glue import <glue> as arch_<glue>`` where isort would.

    Among the module's leading ``sglang.*`` imports, in isort's order; with none, as a
    new section after the last leading import.  Only the leading import block counts
    (the statements before the first def or class).  The marker comment goes above the
    first glue import of the module only.
    """
    new = cst.parse_statement(f"from {GLUE_PACKAGE} import {plan.glue} as {plan.alias}\n")
    leading: List[Tuple[int, Tuple[str, str]]] = []
    for i, stmt in enumerate(original.body):
        if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
            break
        key = _import_key(stmt)
        if key is not None:
            leading.append((i, key))
    body = list(updated.body)
    ours = (GLUE_PACKAGE, plan.glue)
    sglang = [(i, key) for i, key in leading if key[0] == "sglang" or key[0].startswith("sglang.")]
    after = [i for i, key in sglang if key > ours]
    if after:
        at = after[0]
        anchor = cast(cst.SimpleStatementLine, body[at])
        anchor_key = _import_key(anchor)
        if anchor_key is not None and anchor_key[0] == GLUE_PACKAGE:
            # Another glue import: this one goes first and takes over its marker.
            body[at] = anchor.with_changes(leading_lines=())
            body.insert(at, new.with_changes(leading_lines=anchor.leading_lines))
        else:
            blank, rest = _split_leading(anchor.leading_lines)
            body[at] = anchor.with_changes(leading_lines=rest)
            body.insert(at, new.with_changes(leading_lines=[*blank, _marker_line()]))
    elif sglang or leading:
        last, key = (sglang or leading)[-1]
        if key[0] == GLUE_PACKAGE:
            lines: List[cst.EmptyLine] = []
        else:
            lines = [_marker_line()] if sglang else [cst.EmptyLine(), _marker_line()]
        body.insert(last + 1, new.with_changes(leading_lines=lines))
    else:
        at = 1 if body and _is_docstring(body[0]) else 0
        body.insert(at, new.with_changes(leading_lines=[cst.EmptyLine(), _marker_line()] if at else [_marker_line()]))
    return updated.with_changes(body=body)


def _split_leading(lines: Sequence[cst.EmptyLine]) -> Tuple[List[cst.EmptyLine], List[cst.EmptyLine]]:
    """(the blank lines before the first comment, the rest): comments stay with their statement."""
    blank: List[cst.EmptyLine] = []
    for i, line in enumerate(lines):
        if line.comment is not None:
            return blank, list(lines[i:])
        blank.append(line)
    return blank, []


# --- module bindings ------------------------------------------------------------------

def module_bindings(module: cst.Module) -> Set[str]:
    """Names bound at module level (also inside top-level if/try/with blocks)."""
    names: Set[str] = set()

    def targets(node: cst.BaseExpression) -> None:
        if isinstance(node, cst.Name):
            names.add(node.value)
        elif isinstance(node, (cst.Tuple, cst.List)):
            for element in node.elements:
                targets(element.value)
        elif isinstance(node, cst.StarredElement):
            targets(node.value)

    def walk(stmts: Sequence[cst.CSTNode]) -> None:
        for stmt in stmts:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                names.add(stmt.name.value)
            elif isinstance(stmt, cst.SimpleStatementLine):
                for small in stmt.body:
                    if isinstance(small, cst.Assign):
                        for t in small.targets:
                            targets(t.target)
                    elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
                        targets(small.target)
                    elif isinstance(small, cst.Import):
                        for alias in small.names:
                            names.add(_bound_name(alias, dotted_first=True))
                    elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                        for alias in small.names:
                            names.add(_bound_name(alias, dotted_first=False))
            elif isinstance(stmt, cst.If):
                walk(_block(stmt.body))
                orelse = stmt.orelse
                while orelse is not None:
                    walk(_block(orelse.body))
                    orelse = getattr(orelse, "orelse", None)
            elif isinstance(stmt, cst.Try):
                walk(_block(stmt.body))
                for handler in stmt.handlers:
                    walk(_block(handler.body))
                for extra in (stmt.orelse, stmt.finalbody):
                    if extra is not None:
                        walk(_block(extra.body))
            elif isinstance(stmt, cst.With):
                walk(_block(stmt.body))

    walk(module.body)
    return names


def _bound_name(alias: cst.ImportAlias, dotted_first: bool) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    full = replace.dotted_name(alias.name) or ""
    return full.split(".")[0] if dotted_first else full


def _block(body: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return body.body if isinstance(body, cst.IndentedBlock) else ()


def count_changes(old: str, new: str) -> Tuple[int, int]:
    """(lines added, lines removed) between two texts, as a line diff counts them."""
    import difflib

    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed
