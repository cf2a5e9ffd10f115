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
from typing import Dict, List, Optional, Sequence, Set, Tuple, cast

import libcst as cst

from ..files import SourceError, syntax_problem
from . import replace
from .nodes import (
    LINE_LENGTH,
    Mismatch,
    call_lines,
    dotted_name,
    find_function,
    is_docstring,
    param_names,
    replace_function,
)

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


def rewrite_source(source: str, plan: ModulePlan, where: Optional[str] = None) -> ModuleResult:
    """Route every site of ``plan`` in ``source``; unchanged source when any site does not match.

    A source that cannot be parsed, or that libcst fails on in any way (its parser's
    errors, but also its bugs on valid Python: ``return(lambda: 1)`` raises TypeError,
    libcst issue #1061), is a SourceError naming the file (``where``, default the plan's
    path) and the construct: one line, nothing rewritten."""
    where = where or plan.path
    problem = syntax_problem(source)  # CPython first: libcst's parser can crash where CPython refuses
    if problem is not None:
        raise SourceError(f"{where}: does not parse ({problem}); nothing was written; accepted: Python source "
                          f"nested no deeper than CPython's parser takes")
    try:
        module = cst.parse_module(source)
    except Exception as exc:  # noqa: BLE001 - any failure of libcst's, named with its construct
        raise SourceError(f"{where}: libcst cannot parse {_failing_construct(source, exc)} "
                          f"({_one_line(exc)}); nothing was written; accepted: Python source libcst parses "
                          f"(rewrite that statement, e.g. with a space after a keyword)") from None
    try:
        return _rewrite(module, source, plan)
    except Exception as exc:  # noqa: BLE001 - libcst failing while the sites are rewritten
        labels = ", ".join(site.label for site in plan.sites)
        raise SourceError(f"{where}: libcst failed while rewriting {labels} ({_one_line(exc)}); nothing was "
                          f"written") from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _failing_construct(source: str, failure: Exception) -> str:
    """``line N: `<statement>```: where libcst's syntax error points, or else the innermost
    statement libcst fails on alone the same way it fails on the file (each statement's
    lines, dedented, parsed on their own); "it" when no single statement does."""
    import ast
    import textwrap

    lines = source.splitlines()
    if isinstance(failure, cst.ParserSyntaxError) and 0 < failure.raw_line <= len(lines):
        return _line(lines, failure.raw_line)
    kind = type(failure)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "it"

    def fails(node: ast.stmt) -> bool:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        text = textwrap.dedent("\n".join(lines[first - 1:node.end_lineno])) + "\n"
        try:
            cst.parse_module(text)
        except Exception as exc:  # noqa: BLE001
            return isinstance(exc, kind)
        return False

    found = None
    body: list = tree.body
    while True:
        culprit = next((node for node in body if fails(node)), None)
        if culprit is None:
            break
        found = culprit
        body = [n for field in ("body", "orelse", "finalbody") for n in getattr(culprit, field, [])
                if isinstance(n, ast.stmt)]
        body += [n for holder in getattr(culprit, "handlers", []) + getattr(culprit, "cases", []) for n in holder.body]
    return "it" if found is None else _line(lines, found.lineno)


def _line(lines: Sequence[str], number: int) -> str:
    text = lines[number - 1].strip()
    return f"line {number}: `{text if len(text) <= 80 else text[:77] + '...'}`"


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
                raise Mismatch(f"the module no longer defines {', '.join(missing)} (the routed code reads it)")
            new, status = _route_function(module, site, plan.alias)
        except Mismatch as exc:
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
        except Mismatch as exc:
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
        raise Mismatch(f"parameters are ({', '.join(params)}), expected ({', '.join(site.params)})")
    if not isinstance(fn.body, cst.IndentedBlock):
        raise Mismatch("its body is on the def line")
    depth = site.qualname.count(".") + 1
    guard = _guard_statement(site, alias, depth * len(module.default_indent.expandtabs()))
    body = list(fn.body.body)
    marked = [i for i, stmt in enumerate(body) if _has_marker(stmt)]
    if len(marked) > 1:
        raise Mismatch(f"the sglang-arch marker appears {len(marked)} times in it")
    rest = [stmt for i, stmt in enumerate(body) if i not in marked]
    clash = _names_in(rest) & {ANSWER, alias}
    if clash:
        raise Mismatch(f"it already uses the name {', '.join(sorted(clash))}")
    if marked:
        i = marked[0]
        if _code(body[i].with_changes(leading_lines=())) == _code(guard.with_changes(leading_lines=())):
            return None, ALREADY
        body[i] = guard.with_changes(leading_lines=cast(cst.SimpleStatementLine, body[i]).leading_lines)
        return fn.with_changes(body=fn.body.with_changes(body=body)), UPDATED
    at = 1 if body and is_docstring(body[0]) else 0
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
        return call_lines("", call, site.args, indent) + "\n"
    if site.form == "done":
        head = f"if {one}:"
        if indent + len(head) > LINE_LENGTH:
            head = "if " + call_lines("", call, site.args, indent) + ":"
        return head + "\n    return\n"
    head = f"if ({ANSWER} := {one}) is not None:"
    if indent + len(head) > LINE_LENGTH:
        inner = call_lines(f"{ANSWER} := ", call, site.args, indent + 4)
        head = "if (\n" + _indent(inner) + "\n) is not None:"
    return head + f"\n    return {ANSWER}\n"


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else line for line in text.splitlines())


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
                    and dotted_name(small.module) == GLUE_PACKAGE and not isinstance(small.names, cst.ImportStar)):
                for alias in small.names:
                    if (dotted_name(alias.name) == plan.glue and alias.asname is not None
                            and isinstance(alias.asname.name, cst.Name) and alias.asname.name.value == plan.alias):
                        return stmt
    return None


def _import_key(stmt: cst.CSTNode) -> Optional[Tuple[str, str]]:
    """(module, first imported name) of a top-level absolute import line, as isort orders them."""
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None
    small = stmt.body[0]
    if isinstance(small, cst.ImportFrom) and not small.relative and small.module is not None:
        first = "*" if isinstance(small.names, cst.ImportStar) else (dotted_name(small.names[0].name) or "")
        return dotted_name(small.module) or "", first
    if isinstance(small, cst.Import):
        return dotted_name(small.names[0].name) or "", ""
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
        at = 1 if body and is_docstring(body[0]) else 0
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
    full = dotted_name(alias.name) or ""
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
