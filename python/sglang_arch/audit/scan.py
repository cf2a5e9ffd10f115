"""Find the capability-dependent sites of an SGLang tree (libcst, no import of SGLang).

A *site* is one source line whose behaviour depends on the GPU's compute capability or
architecture.  What the line holds is recorded as ``Expr``s (one line may hold several):

``read``      a direct read: ``torch.cuda.get_device_capability()``,
              ``get_device_properties(...).major/.minor``, ``X.device_capability``,
              ``X.get_device_capability()`` of something that is not a probe helper
``probe``     a call of a probe helper (``is_sm90_supported()``, ``is_blackwell()``,
              ``get_device_sm()``, ``get_device_capability()``, ``_is_sm10x()``...)
``platform``  ``get_platform().is_sm100`` / ``current_platform.device_capability``...
``table``     a dict keyed by capability majors, ``(major, minor)`` or SM numbers
``window``    ``CapabilityRequirement.cuda(min_sm=..., max_sm=...)`` and calls with
              ``min_sm=`` / ``max_sm=`` / ``device_capability_majors=`` literals
``compare``   ``major == 10``, ``cap >= (9, 0)``, ``sm in (100, 103)`` of a value that
              comes from one of the above (traced through local assignments) or is
              named like one (``sm_version``, ``device_capability``...)
``flag``      a use of a module-level value computed at import from one of the above
              (``_is_sm90_supported = is_sm90_supported()``), in this module or imported

A module-level or class-body assignment whose value holds such an expression is a
*cached flag* (its site's kind is ``cached_flag``); its uses are ``flag`` sites.
Comments and strings are never sites (only code nodes are visited); a tree's own
``srt/arch/`` (a patched tree's copy of the registry) and tests are skipped.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper
from libcst.metadata.base_provider import BaseMetadataProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from ..arch.validate import shown_path
from ..files import MAX_SOURCE_FILES, SourceError, python_tree, read_source

SCANNED = ("srt", "kernels")
SKIP_DIRS = {"__pycache__", "test", "tests", "testing"}
SKIP_PREFIXES = ("srt/arch/",)  # sglang-arch's own registry, copied into a patched tree

PROBE_NAME = re.compile(r"^_?(is_sm\d+\w*|is_blackwell\w*|is_hopper\w*|get_device_sm|get_device_capability|"
                        r"is_sm\d+x\w*)$")
CAP_NAME = re.compile(r"^_*(device_)?(capability|compute_capability|cuda_capability|cap|cc|sm|sm_version|"
                      r"device_sm|sm_arch|arch_major|cc_major|sm_major|major_cap|capability_major|gpu_arch|"
                      r"sm_count_arch|cuda_arch|arch)$")
WINDOW_KEYWORDS = {"min_sm", "max_sm", "device_capability_majors", "min_capability", "max_capability"}
MAJORS = set(range(7, 14))
SM_NUMBERS = {70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121}

# Cheap prefilter, in two steps, before libcst sees a file.  ``STRONG`` finds the lines
# that can hold a site (every detector below needs one of these tokens on its line, or
# the name of a cached flag); a file without one is not parsed, and of a file with one
# libcst parses only the module-level statements and the functions and methods that
# hold such a line (the rest is blanked, so line numbers stay).
STRONG = (r"get_device_capability|get_device_properties|device_capability|is_sm\d|is_blackwell|is_hopper|"
          r"get_device_sm|CapabilityRequirement\.cuda\(|min_sm|max_sm|min_capability|max_capability|sm_version|device_sm"
          r"|(?:^|\{)\s*\(?\s*(?:7|8|9|10|11|12|13)\s*(?:,\s*\d\s*\))?\s*:(?!=)"
          r"|(?:^|\{)\s*(?:70|75|80|86|89|90|100|103|110|120|121)\s*:(?!=)"
          r"|\b(?:_*(?:device_)?(?:capability|compute_capability|cuda_capability|cap|cc|sm|sm_version|device_sm|"
          r"sm_arch|arch_major|cc_major|sm_major|major_cap|capability_major|gpu_arch|cuda_arch|arch|major|minor))"
          r"\s*(?://\s*\d+\s*)?(?:==|!=|>=|<=|<|>|\bin\b|\bnot in\b)\s*[\d(\[{]"
          r"|\.major\b|\.minor\b")
PREFILTER = re.compile(STRONG, re.MULTILINE)

KIND_ORDER = ("table", "window", "cached_flag", "read", "probe", "platform", "flag", "compare")


@dataclass(frozen=True)
class Expr:
    kind: str  # read, probe, platform, table, window, compare, flag, untraced
    name: str  # what it reads: the call, the helper, the fact, the table's name, the flag
    module: Optional[str] = None  # probe: where the helper comes from; flag: its module


@dataclass
class RawSite:
    file: str
    line: int
    code: str
    scope: str  # qualified name of the enclosing function/class, "" at module level
    function: bool  # inside a function (call time) or not (import time)
    assigned: Tuple[str, ...]  # module-level assignment targets of the statement
    cls: Optional[str]  # enclosing class's qualified name
    exprs: List[Expr] = field(default_factory=list)
    cached_flag: bool = False


@dataclass
class FileScan:
    file: str
    module: str
    imports: Dict[str, Tuple[str, Optional[str]]]  # local name -> (module, name or None)
    sites: Dict[int, RawSite]
    flags: Dict[str, int]  # cached flag -> line of its definition
    flag_deps: Dict[str, Set[str]]  # module-level name -> names its value loads
    loads: List[Tuple[str, int, str, bool, Optional[str]]]  # (name, line, scope, function, cls)
    lines: List[str] = field(default_factory=list, repr=False)


def package_module(file: str) -> str:
    parts = file[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["sglang"] + parts)


def iter_files(root: str) -> Iterator[str]:
    """Every .py file under root/srt and root/kernels, relative to root, sorted (at most
    ``MAX_SOURCE_FILES``; a symlinked srt/ or kernels/ is refused, symlinked folders below
    them are not followed)."""
    out = []
    for top in SCANNED:
        base = os.path.join(root, top)
        if os.path.islink(base):
            raise SourceError(f"{shown_path(base)}: is a symlink; accepted: a real folder inside the tree")
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in filenames:
                if not name.endswith(".py") or name.startswith("test_") or name.endswith("_test.py"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                if not rel.startswith(SKIP_PREFIXES):
                    out.append(rel)
                    if len(out) > MAX_SOURCE_FILES:
                        raise SourceError(f"{shown_path(root)}: more than {MAX_SOURCE_FILES} Python files under "
                                          f"{', '.join(SCANNED)}; accepted: at most {MAX_SOURCE_FILES}")
    return iter(sorted(out))


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr.value}" if base else ""
    if isinstance(node, cst.Call):
        base = _dotted(node.func)
        return f"{base}()" if base else ""
    return ""


def _int(node: cst.BaseExpression) -> Optional[int]:
    if isinstance(node, cst.Integer):
        try:
            return int(node.value.replace("_", ""), 0)
        except ValueError:
            return None
    return None


def _int_tuple(node: cst.BaseExpression) -> Optional[Tuple[int, ...]]:
    if isinstance(node, cst.Tuple):
        vals = [_int(e.value) for e in node.elements]
        if vals and all(v is not None for v in vals):
            return tuple(vals)  # type: ignore[arg-type]
    return None


def _literal_ints(node: cst.BaseExpression) -> bool:
    """An int, a tuple of ints, or a list/set/tuple of those."""
    if _int(node) is not None or _int_tuple(node) is not None:
        return True
    if isinstance(node, (cst.List, cst.Set, cst.Tuple)):
        return bool(node.elements) and all(_literal_ints(e.value) for e in node.elements)
    return False


def _is_cap_table(node: cst.Dict) -> bool:
    keys = [e.key for e in node.elements if isinstance(e, cst.DictElement)]
    if not keys or len(keys) != len(node.elements):
        return False
    ints = [_int(k) for k in keys]
    if all(v is not None for v in ints):
        vals = set(ints)  # type: ignore[arg-type]
        return vals <= MAJORS and bool(vals & {9, 10, 12}) or (len(vals) >= 2 and vals <= SM_NUMBERS and bool(vals & {90, 100, 120}))
    tuples = [_int_tuple(k) for k in keys]
    return all(t is not None and len(t) == 2 and t[0] in MAJORS and 0 <= t[1] <= 9 for t in tuples)


def _resolve_relative(module: str, is_package: bool, level: int, name: str) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


class _LineState(PositionProvidingCodegenState):
    """libcst's position bookkeeping reduced to the start line (what the audit reads):
    the same code generation and the same rules for where a node starts (its syntactic
    position, else where its code begins), without columns or ranges."""

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)  # indentation holds no newline

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.line += len(_NEWLINE.findall(value)) if "\r" in value else value.count("\n")

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append(self.line)  # type: ignore[arg-type]

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        if node not in self.provider._computed:
            self.provider._computed[node] = start

    @contextlib.contextmanager
    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None,
                                  end_node: Optional[cst.CSTNode] = None) -> Iterator[None]:
        start = self.line
        try:
            yield
        finally:
            self.provider._computed[node] = self.provider._computed[start_node] if start_node is not None else start


_NEWLINE = re.compile(r"\r\n?|\n")


class LineProvider(BaseMetadataProvider[int]):
    """Each node's start line, as ``PositionProvider(...).start.line`` gives it, in about
    half its time (test/unit/test_audit.py compares the two on SGLang's files)."""

    def _gen_impl(self, module: cst.Module) -> None:
        module._codegen(_LineState(default_indent=module.default_indent, default_newline=module.default_newline,
                                   provider=self))


class _Visitor(cst.CSTVisitor):
    METADATA_DEPENDENCIES = (LineProvider,)

    def __init__(self, file: str, module: str, lines: List[str], is_package: bool) -> None:
        super().__init__()
        self.file, self.module, self.lines, self.is_package = file, module, lines, is_package
        self.imports: Dict[str, Tuple[str, Optional[str]]] = {}
        self.sites: Dict[int, RawSite] = {}
        self.flags: Dict[str, int] = {}
        self.flag_deps: Dict[str, Set[str]] = {}
        self.loads: List[Tuple[str, int, str, bool, Optional[str]]] = []
        self.stack: List[Tuple[str, str]] = []  # (kind: class|function|lambda, name)
        self.vars: List[Dict[str, List[Expr]]] = [{}]  # capability values bound per scope
        self.props: List[Set[str]] = [set()]  # names bound to get_device_properties(...)
        self.platforms: List[Set[str]] = [{"current_platform"}]  # names bound to get_platform()
        self.stmt_assigned: Tuple[str, ...] = ()
        self.stmt_lines: Set[int] = set()
        self.stmt_loads: Set[str] = set()
        self.not_loads: Set[int] = set()  # Name nodes that are attributes or keywords, not loads

    # -- scopes -----------------------------------------------------------------------
    @property
    def scope(self) -> str:
        return ".".join(n for k, n in self.stack if k != "lambda")

    @property
    def in_function(self) -> bool:
        return any(k != "class" for k, _ in self.stack)

    @property
    def cls(self) -> Optional[str]:
        names = []
        found = None
        for k, n in self.stack:
            if k != "lambda":
                names.append(n)
            if k == "class":
                found = ".".join(names)
        return found

    def _push(self, kind: str, name: str) -> None:
        self.stack.append((kind, name))
        self.vars.append({})
        self.props.append(set())
        self.platforms.append(set())

    def _pop(self) -> None:
        self.stack.pop()
        self.vars.pop()
        self.props.pop()
        self.platforms.pop()

    def visit_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._push("function", node.name.value)

    def leave_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._pop()

    def visit_ClassDef_body(self, node: cst.ClassDef) -> None:
        self._push("class", node.name.value)

    def leave_ClassDef_body(self, node: cst.ClassDef) -> None:
        self._pop()

    def visit_Lambda_body(self, node: cst.Lambda) -> None:
        self._push("lambda", "<lambda>")

    def leave_Lambda_body(self, node: cst.Lambda) -> None:
        self._pop()

    # -- imports ----------------------------------------------------------------------
    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            full = _dotted(alias.name)
            local = alias.asname.name.value if alias.asname else full.split(".")[0]
            self.imports[local] = (full if alias.asname else local, None)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        base = _dotted(node.module) if node.module else ""
        if node.relative:
            base = _resolve_relative(self.module, self.is_package, len(node.relative), base)
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            name = _dotted(alias.name)
            local = alias.asname.name.value if alias.asname else name
            self.imports[local] = (base, name)

    # -- statements -------------------------------------------------------------------
    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self.stmt_lines = set()
        self.stmt_loads = set()
        names: List[str] = []
        for small in node.body:
            targets = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                targets = [small.target]
            for t in targets:
                names.extend(_target_names(t))
        self.stmt_assigned = tuple(names)

    def leave_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self.stmt_assigned and not self.in_function:
            if not self.stack:
                for name in self.stmt_assigned:
                    self.flag_deps.setdefault(name, set()).update(self.stmt_loads)
            if self.stmt_lines:
                first = min(self.stmt_lines)
                site = self.sites[first]
                if not any(e.kind in ("table", "window") for e in site.exprs) and not self.stack:
                    site.cached_flag = True
                    for name in self.stmt_assigned:
                        self.flags.setdefault(name, first)
        self.stmt_assigned = ()

    def leave_Assign(self, node: cst.Assign) -> None:
        self._bind([t.target for t in node.targets], node.value)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._bind([node.target], node.value)

    def _bind(self, targets: List[cst.BaseExpression], value: cst.BaseExpression) -> None:
        if isinstance(value, cst.Call) and _dotted(value.func).endswith("get_device_properties"):
            for t in targets:
                self.props[-1].update(_target_names(t))
            return
        if isinstance(value, cst.Call) and _dotted(value.func) in ("get_platform", "runtime_context.get_platform"):
            for t in targets:
                self.platforms[-1].update(_target_names(t))
            return
        origins = self._origins(value)
        if origins:
            for t in targets:
                for name in _target_names(t):
                    self.vars[-1][name] = origins

    # -- expressions ------------------------------------------------------------------
    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(LineProvider, node)

    def _add(self, node: cst.CSTNode, expr: Expr) -> None:
        line = self._line(node)
        site = self.sites.get(line)
        if site is None:
            site = self.sites[line] = RawSite(
                self.file, line, self.lines[line - 1].strip(), self.scope, self.in_function,
                self.stmt_assigned if not self.stack else (), self.cls)
        if expr not in site.exprs:
            site.exprs.append(expr)
        self.stmt_lines.add(line)

    def _lookup(self, stacks: List, name: str):
        for scope in reversed(stacks):
            if name in scope:
                return scope[name] if isinstance(scope, dict) else True
        return None

    def _call_expr(self, node: cst.Call) -> Optional[Expr]:
        dotted = _dotted(node.func)
        last = dotted.rsplit(".", 1)[-1] if dotted else ""
        if dotted.endswith("CapabilityRequirement.cuda") and node.args:
            return Expr("window", "CapabilityRequirement.cuda")
        if any(a.keyword is not None and a.keyword.value in WINDOW_KEYWORDS and _literal_ints(a.value)
               for a in node.args):
            return Expr("window", f"{dotted or 'call'}(...)")
        if not last:
            return None
        if last == "get_device_capability" and (dotted.startswith("torch.") or dotted.startswith("cuda.")):
            return Expr("read", dotted.replace("()", ""))
        if PROBE_NAME.match(last):
            if "." in dotted:
                base = dotted.rsplit(".", 1)[0]
                head = base.split(".")[0]
                imported = self.imports.get(head)
                if imported is not None and imported[1] is None:  # module.attr of an imported module
                    return Expr("probe", last, imported[0] + base[len(head):])
                if imported is not None and imported[1] is not None and base == head:
                    return Expr("probe", last, f"{imported[0]}.{imported[1]}")
                if base.replace("()", "") in ("get_platform", "runtime_context.get_platform"):
                    return None
                if base in self._platform_names():
                    return Expr("read", f"{base}.{last}()") if last == "get_device_capability" else Expr("platform", last)
                return Expr("read", f"{dotted.replace('()', '')}()")
            imported = self.imports.get(last)
            if imported is not None and imported[1] is not None:
                return Expr("probe", imported[1], imported[0])
            return Expr("probe", last, self.module)  # defined here (or a star import)
        return None

    def _platform_names(self) -> Set[str]:
        names: Set[str] = set()
        for s in self.platforms:
            names |= s
        return names

    def _attr_expr(self, node: cst.Attribute) -> Optional[Expr]:
        attr = node.attr.value
        base = node.value
        base_dotted = _dotted(base)
        if attr in ("major", "minor"):
            if isinstance(base, cst.Call) and _dotted(base.func).endswith("get_device_properties"):
                return Expr("read", f"get_device_properties().{attr}")
            if isinstance(base, cst.Name) and self._lookup(self.props, base.value):
                return Expr("read", f"get_device_properties().{attr}")
            return None
        is_platform = base_dotted.replace("()", "") in ("get_platform", "runtime_context.get_platform") or (
            isinstance(base, cst.Name) and base.value in self._platform_names())
        if is_platform and (PROBE_NAME.match(attr) or attr in ("device_capability", "device_sm")):
            return Expr("platform", attr)
        if attr == "device_capability":
            if base_dotted == "self":
                return Expr("read", "self.device_capability")
            return Expr("read", f"{base_dotted or '...'}.device_capability")
        return None

    def _origins(self, node: cst.BaseExpression) -> List[Expr]:
        """Where a capability value comes from; [] when node is not one."""
        if isinstance(node, cst.Call):
            e = self._call_expr(node)
            return [e] if e is not None and e.kind in ("read", "probe", "platform") else []
        if isinstance(node, cst.Attribute):
            e = self._attr_expr(node)
            if e is not None:
                return [e]
            inner = self._origins(node.value)
            if inner and node.attr.value in ("major", "minor"):
                return inner
            return [Expr("untraced", _dotted(node) or node.attr.value)] if CAP_NAME.match(node.attr.value) else []
        if isinstance(node, cst.Subscript):
            return self._origins(node.value)
        if isinstance(node, cst.Name):
            found = self._lookup(self.vars, node.value)
            if found:
                return list(found)
            return [Expr("untraced", node.value)] if CAP_NAME.match(node.value) else []
        if isinstance(node, (cst.Tuple, cst.List)):
            out: List[Expr] = []
            for el in node.elements:
                for e in self._origins(el.value):
                    if e not in out:
                        out.append(e)
            return out
        if isinstance(node, cst.BinaryOperation):
            return self._origins(node.left) + self._origins(node.right)
        return []

    def visit_Call(self, node: cst.Call) -> None:
        e = self._call_expr(node)
        if e is not None:
            self._add(node, e)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.not_loads.add(id(node.attr))
        e = self._attr_expr(node)
        if e is not None:
            self._add(node, e)

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.not_loads.add(id(node.keyword))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self.not_loads:
            return
        self.stmt_loads.add(node.value)
        self.loads.append((node.value, self._line(node), self.scope, self.in_function, self.cls))

    def visit_Dict(self, node: cst.Dict) -> None:
        if _is_cap_table(node):
            self._add(node, Expr("table", ",".join(self.stmt_assigned) or "<dict>"))

    def visit_Comparison(self, node: cst.Comparison) -> None:
        operands = [node.left] + [c.comparator for c in node.comparisons]
        if not any(_literal_ints(o) for o in operands):
            return
        origins: List[Expr] = []
        for o in operands:
            if not _literal_ints(o):
                origins.extend(e for e in self._origins(o) if e not in origins)
        if origins:
            # the comparison is a site of its own only when its value is not read on the same line
            for e in origins:
                self._add(node, Expr("compare", e.name, e.module) if e.kind == "untraced" else e)


def _target_names(node: cst.BaseExpression) -> List[str]:
    if isinstance(node, cst.Name):
        return [node.value]
    if isinstance(node, (cst.Tuple, cst.List)):
        out: List[str] = []
        for el in node.elements:
            out.extend(_target_names(el.value))
        return out
    return []


def scan_file(root: str, file: str, text: Optional[str] = None, keep: Optional[re.Pattern] = None) -> FileScan:
    """Scan one file; with ``keep``, only the statements and functions holding a line that
    matches it (``skeleton``)."""
    if text is None:
        text = read_source(os.path.join(root, file), errors="replace")
    module = package_module(file)
    lines = text.splitlines() or [""]
    tree, too_deep = python_tree(text)
    if too_deep:  # Python cannot import it, so no site runs; and libcst could crash on it
        return FileScan(file, module, {}, {}, {}, {}, [], lines)
    source = skeleton(text, keep, tree) if keep is not None and tree is not None else text
    visitor = _Visitor(file, module, lines, file.endswith("__init__.py"))
    try:
        wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
        wrapper.visit(visitor)
    except cst.ParserSyntaxError:
        return FileScan(file, module, {}, {}, {}, {}, [], lines)
    except RecursionError:
        raise SourceError(f"{shown_path(os.path.join(root, file))}: nested too deeply to scan; accepted: "
                          f"source whose nesting libcst can visit") from None
    return FileScan(file, module, visitor.imports, visitor.sites, visitor.flags, visitor.flag_deps, visitor.loads,
                    lines)


def _span(node: ast.stmt) -> Tuple[int, int]:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno or node.lineno


def skeleton(text: str, keep: re.Pattern, tree: Optional[ast.Module] = None) -> str:
    """``text`` with every function or method that holds no line matching ``keep``
    blanked out (module-level statements and class headers stay; line numbers stay).
    ``tree``: ``text`` already parsed by ``ast``."""
    if tree is None:
        tree, _ = python_tree(text)
        if tree is None:
            return text
    lines = text.splitlines(keepends=True)
    hits = sorted(i + 1 for i, ln in enumerate(lines) if keep.search(ln))
    kept = [False] * (len(lines) + 2)

    def hit(a: int, b: int) -> bool:
        i = bisect.bisect_left(hits, a)
        return i < len(hits) and hits[i] <= b

    def mark(a: int, b: int) -> None:
        for i in range(a, b + 1):
            kept[i] = True

    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in tree.body:
        a, b = _span(node)
        if isinstance(node, defs):
            if hit(a, b):
                mark(a, b)
        elif isinstance(node, ast.ClassDef) and hit(a, b):
            body_start = _span(node.body[0])[0]
            mark(a, body_start - 1)
            any_kept = False
            for st in node.body:
                sa, sb = _span(st)
                if not isinstance(st, defs) or hit(sa, sb):
                    mark(sa, sb)
                    any_kept = True
            if not any_kept:
                mark(*_span(node.body[0]))
        elif not isinstance(node, ast.ClassDef):
            mark(a, b)
    return "".join(ln if kept[i + 1] else "\n" for i, ln in enumerate(lines))


def module_flags(text: str) -> Set[str]:
    """Names assigned at module level from a line that can hold a site, and (transitively)
    from those: the cached flags another module may import (``ast``, cheap)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    lines = text.splitlines()
    flags: Set[str] = set()
    assigns = []
    for node in _module_statements(tree.body):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            loads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            seg = "\n".join(lines[node.lineno - 1: (node.end_lineno or node.lineno)])
            assigns.append((names, loads, bool(PREFILTER.search(seg))))
    changed = True
    while changed:
        changed = False
        for names, loads, strong in assigns:
            names = {n for n in names if len(n) > 2 and not n.startswith("__")}
            if not names <= flags and (strong or loads & flags):
                flags |= names
                changed = True
    return flags


def _module_statements(body: List[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(node, block, []) or [])
            for handler in getattr(node, "handlers", []):
                yield from _module_statements(handler.body)


def scan_tree(root: str, prefilter: bool = True) -> Tuple[List[FileScan], int]:
    """Scan every file; returns the scans of files that may hold a site, and the number
    of files read.  With ``prefilter`` (the default), files and functions without a line
    that can hold a site are not parsed by libcst: a line matches ``STRONG`` or names a
    module-level value computed from such a line anywhere in the tree (a cached flag)."""
    texts: Dict[str, str] = {}
    files = list(iter_files(root))
    for file in files:
        texts[file] = read_source(os.path.join(root, file), errors="replace")
    scans: Dict[str, FileScan] = {}
    if not prefilter:
        for file in files:
            scans[file] = scan_file(root, file, texts[file])
    else:
        strong = [f for f in files if PREFILTER.search(texts[f])]
        flag_names: Set[str] = set()
        for f in strong:
            flag_names |= module_flags(texts[f])
        pattern = STRONG
        if flag_names:
            pattern += r"|\b(?:" + "|".join(sorted(map(re.escape, flag_names))) + r")\b"
        keep = re.compile(pattern, re.MULTILINE)
        for file in files:
            if keep.search(texts[file]):
                scans[file] = scan_file(root, file, texts[file], keep)
    _close_flags(scans)
    _add_flag_uses(scans)
    return [scans[f] for f in sorted(scans)], len(files)


def _close_flags(scans: Dict[str, FileScan]) -> None:
    """A module-level value computed from a cached flag is a cached flag too."""
    for scan in scans.values():
        changed = True
        while changed:
            changed = False
            for name, deps in scan.flag_deps.items():
                if name not in scan.flags and deps & set(scan.flags):
                    # its line: the first site-free line is not known; use the line of its first load
                    line = min((ln for n, ln, _, f, _c in scan.loads if n in deps & set(scan.flags) and not f),
                               default=None)
                    if line is not None:
                        scan.flags[name] = line
                        changed = True


def _add_flag_uses(scans: Dict[str, FileScan]) -> None:
    by_module = {s.module: s for s in scans.values()}
    for scan in scans.values():
        for name, line, scope, function, cls in scan.loads:
            origin = None
            if name in scan.flags and line != scan.flags[name]:
                origin = (scan.module, name)
            elif name in scan.imports and scan.imports[name][1] is not None:
                mod, orig = scan.imports[name]
                other = by_module.get(mod)
                if other is not None and orig in other.flags:
                    origin = (mod, orig)
            if origin is None:
                continue
            site = scan.sites.get(line)
            if site is None:
                text = _line_text(scan, line)
                if text.startswith(("from ", "import ")) or text.startswith(("def ", "class ")):
                    continue
                site = scan.sites[line] = RawSite(scan.file, line, text, scope, function, (), cls)
            e = Expr("flag", origin[1], origin[0])
            if e not in site.exprs and not site.cached_flag:
                site.exprs.append(e)


def _line_text(scan: FileScan, line: int) -> str:
    return scan.lines[line - 1].strip() if 0 < line <= len(scan.lines) else ""
