"""Find the capability-dependent sites of an SGLang tree (CPython's ``ast``, no import of SGLang).

A *site* is one source line whose behaviour depends on the GPU's compute capability or
architecture.  What the line holds is recorded as ``Expr``s (one line may hold several):

``read``      a direct read: ``torch.cuda.get_device_capability()``,
              ``get_device_properties(...).major/.minor``, ``X.device_capability``,
              ``X.get_device_capability()`` of something that is not a probe helper,
              ``get_jit_cuda_arch()`` (the JIT's device architecture), ``get_device_name()``
              (the device's identity by name), a helper named for what it returns
              (``get_compute_capability(dev)``, ``_sm_ver()``, ``_get_device_arch()``:
              ``CAPABILITY_HELPER_CALL``), a CuTe DSL kernel's target (``get_arch_enum()``)
``probe``     a call of a probe helper (``is_sm90_supported()``, ``is_blackwell()``,
              ``get_device_sm()``, ``get_device_capability()``, ``_is_sm10x()``...)
``platform``  ``get_platform().is_sm100`` / ``current_platform.device_capability``...
``table``     a dict keyed by capability majors, ``(major, minor)``, SM numbers, tuples
              holding those (``{((10, 3), 4): ...}``), or GPU names (``{"H100": ...}``)
``window``    ``CapabilityRequirement.cuda(min_sm=..., max_sm=...)`` and calls with
              ``min_sm=`` / ``max_sm=`` / ``device_capability_majors=`` literals
``compare``   ``major == 10``, ``cap >= (9, 0)``, ``sm in (100, 103)`` of a value that
              comes from one of the above (traced through local assignments) or is
              named like one (``sm_version``, ``device_capability``...)
``flag``      a use of a module-level value computed at import from one of the above
              (``_is_sm90_supported = is_sm90_supported()``), in this module or imported

A value computed from those is followed: through local names (``major, minor = ...``;
``use_fa3 = major == 9``), ``self.`` attributes of the class that sets them, and
module-level names (*cached flags*, whose site's kind is ``cached_flag``); each use is
a site of its own.  Each site also records what it decides (``Context``): the code the
check controls, the names it binds, the function it returns from (``classify.py``
reads it).  Comments and strings are never sites (only code nodes are visited); a
tree's own ``srt/arch/`` (a patched tree's copy of the registry) and tests are skipped.

Every step is linear in the file's size: one bounded read, a prefilter whose patterns
cannot backtrack across a line (``[ \\t]`` instead of ``\\s``, no two adjacent optional
runs), one ``ast.parse``, one visit.  A file CPython cannot parse is listed
(``FileScan.problem``), never counted as 0 sites silently.
"""

from __future__ import annotations

import ast
import bisect
import itertools
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

from ..arch.validate import shown, shown_path
from ..bounds import MAX_FOLDER_DEPTH
from ..files import MAX_SOURCE_FILES, SourceError, python_tree, read_source

SCANNED = ("srt", "kernels")
SKIP_DIRS = {"__pycache__", "test", "tests", "testing"}
SKIP_PREFIXES = ("srt/arch/",)  # sglang-arch's own registry, copied into a patched tree

PROBE_NAME = re.compile(r"^_?(is_sm\d+\w*|is_blackwell\w*|is_hopper\w*|get_device_sm|get_device_capability|"
                        r"is_sm\d+x\w*)$")
IDENTITY_CALLS = ("get_jit_cuda_arch", "get_device_name")  # identity read without a probe helper
# A helper whose name says it returns the device's capability or architecture
# (``get_compute_capability(dev)``, ``convrot_int8_local_capability()``, ``_sm_ver()``,
# ``_get_sm_version(dev)``, ``_get_device_arch()``): its value is the identity, read through
# that helper, and is followed to its uses like a direct read.  Not a requirement
# (``get_min_capability()``: what a scheme needs, checked where it is compared).
CAPABILITY_HELPER_CALL = re.compile(r"^_?(get_)?(compute_|device_|cuda_|\w+_local_)?capability$|^_?(get_)?device_capacity$"
                                    r"|^_?(get_)?sm_ver(sion)?$|^_?(get_)?device_arch$")
# The architecture a CuTe DSL kernel is being compiled for (``BaseDSL._get_dsl().get_arch_enum()``):
# what the compiled code targets, so its checks are gates (``classify.kind_for``).
COMPILE_ARCH_CALL = "get_arch_enum"
CAP_NAME = re.compile(r"^_*(device_)?(capability|compute_capability|cuda_capability|cap|cc|sm|sm_version|"
                      r"device_sm|sm_arch|arch_major|cc_major|sm_major|major_cap|capability_major|gpu_arch|"
                      r"sm_count_arch|cuda_arch|arch)$")
WINDOW_KEYWORDS = {"min_sm", "max_sm", "device_capability_majors", "min_capability", "max_capability"}
MAJORS = set(range(7, 14))
SM_NUMBERS = {70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121}
GPU_NAME = re.compile(r"^(NVIDIA[ _])?(A10|A100|A30|A40|A800|B100|B200|B300|GB200|GB300|GH200|H100|H20|H200|H800|"
                      r"L4|L20|L40|L40S|RTX|V100|T4|DGX|Jetson|Thor|Spark)\b", re.IGNORECASE)

# Cheap prefilter before the visit: ``STRONG`` finds the lines that can hold a site
# (every detector below needs one of these tokens on its line, or the name of a cached
# flag); a file without one is not visited, and of a file with one only the module-level
# statements and the functions and methods that hold such a line are.  Every run of
# blanks is ``[ \t]*`` (a pattern never crosses a line) and no two such runs are
# adjacent, so a search is linear in the text (``test_audit.py`` times it).
_B = r"[ \t]*"
STRONG = (r"get_device_capability|get_device_properties|device_capability|is_sm\d|is_blackwell|is_hopper|"
          r"get_device_sm|get_jit_cuda_arch|get_device_name|get_platform|_capability\(|device_capacity\(|_sm_ver|"
          r"device_arch\(|get_arch_enum\(|"
          r"CapabilityRequirement\.cuda\(|min_sm|max_sm|min_capability|max_capability|sm_version|device_sm"
          rf"|(?:^|\{{){_B}(?:\({_B})?(?:7|8|9|1[0-3])(?:{_B},{_B}\d{_B}\))?{_B}:(?!=)"
          rf"|(?:^|\{{){_B}\({_B}\({_B}(?:7|8|9|1[0-3]){_B},"
          rf"|(?:^|\{{){_B}(?:70|75|80|86|89|90|100|103|110|120|121){_B}:(?!=)"
          rf"|(?:^|[{{,]){_B}['\"](?:NVIDIA[ _])?(?:A100|B200|B300|GB200|GB300|H100|H20|H200|H800|L20|L40)"
          r"|\b(?:_*(?:device_)?(?:capability|compute_capability|cuda_capability|cap|cc|sm|sm_version|device_sm|"
          r"sm_arch|arch_major|cc_major|sm_major|major_cap|capability_major|gpu_arch|cuda_arch|arch|major|minor))"
          rf"{_B}(?://{_B}\d+{_B})?(?:==|!=|>=|<=|<|>|\bin\b|\bnot[ \t]+in\b){_B}[\d(\[{{]"
          r"|\.major\b|\.minor\b")
PREFILTER = re.compile(STRONG, re.MULTILINE)
_IDENT = re.compile(r"[^\W\d]\w*")

# How deep a syntax tree the visit follows: about ``VISIT_DEPTH`` levels of nested
# expressions (3 frames each) under a recursion limit of ``VISIT_RECURSION`` during the visit.
VISIT_DEPTH = 4000
VISIT_RECURSION = 3 * VISIT_DEPTH + 1000
KIND_ORDER = ("table", "window", "cached_flag", "read", "probe", "platform", "flag", "compare")
CONTEXT_WORDS = 400  # words of the controlled code kept per site (bounded, first ones)
VISITS_PER_WORD = 2  # syntax nodes read per word kept, at most: a site's context costs a constant


class LineFilter:
    """Which lines can hold a site: ``PREFILTER``, or an identifier among ``names`` (the
    cached flags of the tree).  A set lookup per identifier, so linear in the text
    however many names there are."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        self.names = frozenset(names)

    def search(self, text: str) -> bool:
        if PREFILTER.search(text):
            return True
        return bool(self.names) and any(m.group() in self.names for m in _IDENT.finditer(text))

    def hits(self, text: str) -> List[int]:
        """The 1-based numbers of the lines of ``text`` that can hold a site."""
        return [i for i, line in enumerate(source_lines(text), 1) if self.search(line)]


_NEWLINE = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> List[str]:
    """The lines of ``text`` as Python numbers them (``\\n``, ``\\r\\n`` or ``\\r``; not
    ``str.splitlines``, which also splits at form feeds and other separators)."""
    lines = _NEWLINE.split(text)
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


@dataclass(frozen=True)
class Expr:
    kind: str  # read, probe, platform, table, window, compare, flag, untraced
    name: str  # what it reads: the call, the helper, the fact, the table's name, the flag
    module: Optional[str] = None  # probe: where the helper comes from; flag: its module


@dataclass
class Context:
    """What a site's line decides, as the scanner saw it (``classify.py`` reads it).

    ``role``: ``test`` (the condition of an ``if`` / ``while`` / conditional expression),
    ``bind`` (the value bound to ``binds``), ``return``, ``assert``, ``call`` (a call
    statement), ``pass`` (the value passed on as a call's argument), ``log`` (in an error
    message, a log call or an f-string) or ``other``.  ``words``: identifiers and short strings of the
    code the check controls (the branches of its ``if``, the statement it is in),
    bounded.  ``raises``: a test whose only branch raises.  ``logs``: a test whose branches
    only log (a log or warning call each).  ``conditional``: a bound value
    chosen by a conditional expression or a table (a size or a backend, not a fact).
    ``log``: the value only reaches a log or warning call or an f-string."""

    role: str = "other"
    words: str = ""
    binds: Tuple[str, ...] = ()
    raises: bool = False
    logs: bool = False
    conditional: bool = False
    log: bool = False
    controls: str = ""  # words of the code the check controls, without the probes' names
    # What the controlled code selects, read from its structure (``_selects``): the settings
    # it writes (``field:<name>``: an assigned attribute or name, a keyword, a string key)
    # and the strings it picks (``value:<text>``); ``classify.py`` files a decision by them
    # before it reads any words.
    selects: Tuple[str, ...] = ()
    exits: bool = False  # a test whose only branch leaves early: it decides whether the function's work runs


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
    context: Context = field(default_factory=Context)
    launcher: bool = False  # in a function that launches a Triton kernel (``kernel[grid](...)``)


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
    problem: Optional[str] = None  # why the file was not scanned (it is listed in the report)
    problem_line: int = 0
    launchers: Set[str] = field(default_factory=set)  # scopes of the functions that launch a Triton kernel


def package_module(file: str) -> str:
    parts = file[:-3].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["sglang"] + parts)


def link_problem(root: str, path: str) -> Optional[str]:
    """Why the ``.py`` symlink ``path`` is not read, or None (not a link, or a link to a
    regular file inside ``root``): a dangling link (or a loop), one whose target is outside
    the tree (not followed: the audit reads only the tree it was given), or one to something
    that is not a regular file."""
    if not os.path.islink(path):
        return None
    try:
        target = os.readlink(path)
    except OSError as exc:  # pragma: no cover - gone between the walk and here
        return f"a symlink that cannot be read ({exc.strerror or exc})"
    real = os.path.realpath(path)
    if not os.path.exists(real):
        return f"a dangling symlink (to {shown(target)}, which resolves to no file: missing, or a loop of links)"
    top = os.path.realpath(root)
    if os.path.commonpath([top, real]) != top:
        return f"a symlink to {shown(real, 200)}, outside the tree: not followed"
    if not os.path.isfile(real):
        return f"a symlink to {shown(target)}, which is not a regular file"
    return None


def _walk(base: str) -> Iterator[Tuple[str, List[str], List[str]]]:
    """``os.walk(base)`` top-down without recursion (Python 3.11's recursed once per level and
    raised RecursionError about 1,000 folders deep), refusing in one line a folder it cannot
    list (it was skipped silently: a tree read in part looked complete) and a folder more than
    ``bounds.MAX_FOLDER_DEPTH`` levels below ``base``.  The caller may prune ``dirnames``."""
    if not os.path.isdir(base):
        return
    todo = [(base, 0)]
    while todo:
        folder, depth = todo.pop()
        try:
            with os.scandir(folder) as entries:
                listed = list(entries)
        except OSError as exc:
            raise SourceError(f"{shown_path(folder)}: cannot list this folder ({exc.strerror or exc}); "
                              f"accepted: a tree whose every folder under {', '.join(SCANNED)} can be read") from None
        dirnames, filenames = [], []
        for entry in listed:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            (dirnames if is_dir else filenames).append(entry.name)
        yield folder, dirnames, filenames
        if dirnames and depth >= MAX_FOLDER_DEPTH:
            deeper = os.path.join(folder, sorted(dirnames)[0])
            raise SourceError(f"{shown_path(deeper)}: more than {MAX_FOLDER_DEPTH} folders below "
                              f"{shown_path(base)}; accepted: at most {MAX_FOLDER_DEPTH} levels")
        todo.extend((os.path.join(folder, d), depth + 1) for d in reversed(dirnames))


def iter_files(root: str, skipped: Optional[Dict[str, str]] = None) -> Iterator[str]:
    """Every .py file under root/srt and root/kernels, relative to root, sorted (at most
    ``MAX_SOURCE_FILES``; a symlinked srt/ or kernels/ is refused, symlinked folders below
    them are not followed).  A ``.py`` symlink that is dangling, leaves the tree or names
    no regular file is not read: it goes into ``skipped`` (file -> why) instead, and counts
    toward ``MAX_SOURCE_FILES`` as a file read does."""
    out = []
    left_out: Dict[str, str] = {}
    for top in SCANNED:
        base = os.path.join(root, top)
        if os.path.islink(base):
            raise SourceError(f"{shown_path(base)}: is a symlink; accepted: a real folder inside the tree")
        for dirpath, dirnames, filenames in _walk(base):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in filenames:
                if not name.endswith(".py") or name.startswith("test_") or name.endswith("_test.py"):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                if not rel.startswith(SKIP_PREFIXES):
                    why = link_problem(root, os.path.join(dirpath, name))
                    if why is None:
                        out.append(rel)
                    else:
                        left_out[rel] = why
                    if len(out) + len(left_out) > MAX_SOURCE_FILES:
                        raise SourceError(f"{shown_path(root)}: more than {MAX_SOURCE_FILES} Python files under "
                                          f"{', '.join(SCANNED)}; accepted: at most {MAX_SOURCE_FILES}")
    if skipped is not None:
        skipped.update(left_out)
    return iter(sorted(out))


# --- literals ------------------------------------------------------------------------

def dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    if isinstance(node, ast.Call):
        base = dotted(node.func)
        return f"{base}()" if base else ""
    return ""


def _int(node: Optional[ast.AST]) -> Optional[int]:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def _int_tuple(node: Optional[ast.AST]) -> Optional[Tuple[int, ...]]:
    if isinstance(node, ast.Tuple) and node.elts:
        vals = [_int(e) for e in node.elts]
        if all(v is not None for v in vals):
            return tuple(vals)  # type: ignore[arg-type]
    return None


def _literal_ints(node: ast.AST) -> bool:
    """An int, a tuple of ints, or a list/set/tuple of those."""
    if _int(node) is not None or _int_tuple(node) is not None:
        return True
    if isinstance(node, (ast.List, ast.Set, ast.Tuple)):
        return bool(node.elts) and all(_literal_ints(e) for e in node.elts)
    return False


def _cap_literal(node: ast.AST) -> bool:
    """A literal a capability is compared with: a major, an SM number, ``(major, minor)``,
    or a list / set / tuple of those (not ``0``, ``-1`` or a count)."""
    v = _int(node)
    if v is not None:
        return v in MAJORS or v in SM_NUMBERS
    t = _int_tuple(node)
    if t is not None and len(t) == 2 and t[0] in MAJORS:
        return True
    if isinstance(node, (ast.List, ast.Set, ast.Tuple)):
        return bool(node.elts) and all(_cap_literal(e) for e in node.elts)
    return False


def _cap_key(node: Optional[ast.AST], depth: int = 0) -> bool:
    """A capability as a dict key: ``(major, minor)``, or a tuple holding one
    (``((10, 3), 4)``: capability and world size)."""
    t = _int_tuple(node)
    if t is not None:
        return len(t) == 2 and t[0] in MAJORS and 0 <= t[1] <= 9
    if isinstance(node, ast.Tuple) and depth < 3:
        return any(_cap_key(e, depth + 1) for e in node.elts)
    return False


def _is_cap_table(node: ast.Dict) -> bool:
    keys = node.keys
    if not keys or any(k is None for k in keys):
        return False
    ints = [_int(k) for k in keys]
    if all(v is not None for v in ints):
        vals = set(ints)  # type: ignore[arg-type]
        return vals <= MAJORS and bool(vals & {9, 10, 12}) or (len(vals) >= 2 and vals <= SM_NUMBERS
                                                                and bool(vals & {90, 100, 120}))
    if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
        return any(GPU_NAME.match(k.value) for k in keys)  # type: ignore[union-attr]
    return all(_cap_key(k) for k in keys)


def _resolve_relative(module: str, is_package: bool, level: int, name: str) -> str:
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def _span(node: ast.stmt) -> Tuple[int, int]:
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start, node.end_lineno or node.lineno


def _words(nodes: Sequence[ast.AST], limit: int = CONTEXT_WORDS, probes: bool = True) -> List[str]:
    """Identifiers, attribute names, keywords and short strings of ``nodes``, in order,
    at most ``limit`` (bounded: a huge branch costs no more than a small one); without
    ``probes``, leaving out the probes' own names (``is_sm100_supported``...)."""
    out: List[str] = []
    todo = list(reversed(nodes))
    visits = VISITS_PER_WORD * limit  # nodes read, not only words kept, are bounded
    while todo and len(out) < limit and visits > 0:
        visits -= 1
        node = todo.pop()
        if not probes and isinstance(node, (ast.Name, ast.Attribute)) and PROBE_NAME.match(
                node.id if isinstance(node, ast.Name) else node.attr):
            continue
        if isinstance(node, ast.Name):
            out.append(node.id)
        elif isinstance(node, ast.Attribute):
            out.append(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            out.append(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module.rsplit(".", 1)[-1])  # the module a branch loads its kernel from
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) <= 60:
            out.append(node.value)
        todo.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


def _selects(nodes: Sequence[ast.AST], limit: int = CONTEXT_WORDS) -> Tuple[str, ...]:
    """What ``nodes`` select, from their structure, at most ``limit`` entries: the settings
    they write (an assigned name or attribute, a subscript's string key, a keyword of a
    call, a dict's string key: ``field:<name>``) and the short strings they hold
    (``value:<text>``).  A log call's arguments are not read (a message selects nothing)."""
    out: List[str] = []
    todo = list(reversed(nodes))
    visits = VISITS_PER_WORD * limit
    while todo and len(out) < limit and visits > 0:
        visits -= 1
        node = todo.pop()
        if isinstance(node, ast.Expr) and _is_log_call(node.value) or isinstance(node, ast.Raise):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in _assign_targets(node):
                for sub in ast.walk(t):
                    if isinstance(sub, ast.Name):
                        out.append(f"field:{sub.id}")
                    elif isinstance(sub, ast.Attribute):
                        out.append(f"field:{sub.attr}")
                    elif isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) and isinstance(
                            sub.slice.value, str):
                        out.append(f"field:{sub.slice.value}")
            value = getattr(node, "value", None)
            if value is not None:
                todo.append(value)
            continue
        if isinstance(node, ast.keyword) and node.arg:
            out.append(f"field:{node.arg}")
        elif isinstance(node, ast.Dict):
            out.extend(f"field:{k.value}" for k in node.keys
                       if isinstance(k, ast.Constant) and isinstance(k.value, str) and len(k.value) <= 60)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) <= 60:
            out.append(f"value:{node.value}")
        todo.extend(reversed(list(ast.iter_child_nodes(node))))
    return tuple(dict.fromkeys(out[:limit]))


def _names_identity(name: str) -> bool:
    """``name`` is a function that reads the device's identity: a probe, ``get_device_name``,
    ``get_jit_cuda_arch``, a helper named for the capability it returns."""
    return bool(PROBE_NAME.match(name) or name in IDENTITY_CALLS or CAPABILITY_HELPER_CALL.match(name))


def _exits(body: Sequence[ast.stmt]) -> bool:
    """A branch that only leaves (``return`` of nothing, ``None``, ``False`` or an empty container, ``continue``,
    ``break``), after logging at most: an early exit, whose decision is the code after it."""
    stmts = [s for s in body if not (isinstance(s, ast.Expr) and _is_log_call(s.value))]
    if len(stmts) != 1:
        return False
    st = stmts[0]
    if isinstance(st, (ast.Continue, ast.Break)):
        return True
    return isinstance(st, ast.Return) and (st.value is None or isinstance(st.value, ast.Constant) and (
        st.value.value is None or st.value.value is False) or (
        isinstance(st.value, (ast.Dict, ast.Tuple, ast.List)) and not list(ast.iter_child_nodes(st.value))[:1]))


_LOG_CALLS = re.compile(r"(^|\.)(debug|info|warning|warn|error|exception|critical|print|print_warning|"
                        r"warning_once|info_once|print_warning_once|log)$")


def _is_log_call(node: ast.AST) -> bool:
    """``logger.warning(...)``, ``print(...)``, ``(logger.warning if x else logger.info)(...)``."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.IfExp):
        return all(bool(_LOG_CALLS.search(dotted(f))) for f in (func.body, func.orelse))
    return bool(_LOG_CALLS.search(dotted(func)))


def _constant_default(node: ast.AST) -> bool:
    """``None``, ``-1``, ``(0, 0)``: what a guarded capability read falls back to."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_constant_default(e) for e in node.elts)
    return isinstance(node, ast.Constant) and (node.value is None or type(node.value) is int)


def _none_check(node: ast.AST) -> bool:
    """``x is None`` / ``x is not None`` (and ``and`` / ``or`` of them): whether a value is
    there, not what it is."""
    if isinstance(node, ast.BoolOp):
        return all(_none_check(v) for v in node.values)
    return (isinstance(node, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
            and all(isinstance(c, ast.Constant) and c.value is None for c in node.comparators))


def _only_logs(*branches: Sequence[ast.stmt]) -> bool:
    """Every statement of ``branches`` is a log or warning call (and there is one)."""
    stmts = [s for b in branches for s in b]
    return bool(stmts) and all(isinstance(s, ast.Expr) and _is_log_call(s.value) for s in stmts)


def _only_raises(body: Sequence[ast.stmt]) -> bool:
    return bool(body) and all(isinstance(s, ast.Raise) or (isinstance(s, ast.Expr) and _is_log_call(s.value))
                              for s in body) and any(isinstance(s, ast.Raise) for s in body)


# --- the visitor ----------------------------------------------------------------------

class _Visitor(ast.NodeVisitor):
    def __init__(self, file: str, module: str, lines: List[str], is_package: bool,
                 hits: Optional[List[int]] = None) -> None:
        self.file, self.module, self.lines, self.is_package = file, module, lines, is_package
        self.hits = hits  # lines that can hold a site (None: visit everything)
        self.imports: Dict[str, Tuple[str, Optional[str]]] = {}
        self.sites: Dict[int, RawSite] = {}
        self.flags: Dict[str, int] = {}
        self.flag_deps: Dict[str, Set[str]] = {}
        self.loads: List[Tuple[str, int, str, bool, Optional[str]]] = []
        self.stack: List[Tuple[str, str]] = []  # (kind: class|function|lambda, name)
        self.vars: List[Dict[str, List[Expr]]] = [{}]  # capability values bound per scope
        self.props: List[Set[str]] = [set()]  # names bound to get_device_properties(...)
        self.platforms: List[Set[str]] = [{"current_platform"}]  # names bound to get_platform()
        self.aliases: List[Dict[str, str]] = [{}]  # local name -> the identity function it names
        self.self_attrs: Dict[str, Dict[str, List[Expr]]] = {}  # class -> self.<attr> bound to capability values
        self.stmts: List[ast.stmt] = []
        self.roles: List[Tuple[str, ast.AST]] = []  # the test being visited: ("test", If/While/IfExp node)
        self.passed: Set[int] = set()  # nodes that are a call's argument as they are (passed on)
        self.stmt_assigned: Tuple[str, ...] = ()
        self.stmt_lines: Set[int] = set()
        self.stmt_loads: Set[str] = set()
        self.launchers: Set[str] = set()
        self.rest: List[Tuple[Sequence[ast.stmt], int]] = []  # (block, index) of the statement being visited

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
        self.aliases.append({})

    def _pop(self) -> None:
        self.stack.pop()
        self.vars.pop()
        self.props.pop()
        self.platforms.pop()
        self.aliases.pop()

    def _has_hit(self, node: ast.stmt) -> bool:
        if self.hits is None:
            return True
        a, b = _span(node)
        i = bisect.bisect_left(self.hits, a)
        return i < len(self.hits) and self.hits[i] <= b

    def _visit_all(self, nodes: Iterable[Optional[ast.AST]]) -> None:
        for n in nodes:
            if n is not None:
                self.visit(n)

    def _function(self, node) -> None:
        if not self._has_hit(node):
            return
        self._visit_all(node.decorator_list)
        self._visit_all(node.args.defaults + [d for d in node.args.kw_defaults if d is not None])
        self._push("function", node.name)
        self._block(node.body)
        self._pop()

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if not self._has_hit(node):
            return
        self._visit_all(node.decorator_list + node.bases + [k.value for k in node.keywords])
        self._push("class", node.name)
        self._block(node.body)
        self._pop()

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_all(node.args.defaults + [d for d in node.args.kw_defaults if d is not None])
        self._push("lambda", "<lambda>")
        self.visit(node.body)
        self._pop()

    def _block(self, body: Sequence[ast.stmt]) -> None:
        for i, st in enumerate(body):
            self.rest.append((body, i))  # the block itself, not a copy of its tail: linear in its size
            try:
                self.visit(st)
            finally:
                self.rest.pop()

    def _after(self) -> List[ast.stmt]:
        """The statements after the one being visited in its block, at most ``CONTEXT_WORDS``
        of them (``_selects`` reads no more than that many entries anyway)."""
        if not self.rest:
            return []
        body, i = self.rest[-1]
        return list(itertools.islice(body, i + 1, i + 1 + CONTEXT_WORDS))

    # -- statements -------------------------------------------------------------------
    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self._statement(node)
        else:
            super().visit(node)

    def _statement(self, node: ast.stmt) -> None:
        simple = not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.While,
                                       ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.Try))
        if simple and not self.stack and not isinstance(node, (ast.Import, ast.ImportFrom)) and not self._has_hit(node):
            return  # a module-level statement that can hold no site (and defines no flag: flags are hits)
        if simple:
            self.stmt_lines, self.stmt_loads = set(), set()
            self.stmt_assigned = tuple(n for t in _assign_targets(node) for n in _target_names(t))
        self.stmts.append(node)
        try:
            super().visit(node)
        finally:
            self.stmts.pop()
        if simple:
            self._leave_simple()

    def _leave_simple(self) -> None:
        if self.stmt_assigned and not self.in_function:
            if not self.stack:
                for name in self.stmt_assigned:
                    self.flag_deps.setdefault(name, set()).update(self.stmt_loads)
            if self.stmt_lines:
                site = self.sites[min(self.stmt_lines)]
                if not any(e.kind in ("table", "window") for e in site.exprs) and not self.stack:
                    site.cached_flag = True
                    for name in self.stmt_assigned:
                        self.flags.setdefault(name, site.line)
        self.stmt_assigned = ()

    def _in_role(self, role: str, owner: ast.AST, visit) -> None:
        """Run ``visit`` with ``role`` (of ``owner``) on top of the roles (``_context`` reads it)."""
        self.roles.append((role, owner))
        try:
            visit()
        finally:
            self.roles.pop()

    def _test(self, owner: ast.AST, test: ast.AST) -> None:
        self._in_role("test", owner, lambda: self.visit(test))

    def visit_If(self, node: ast.If) -> None:
        # An ``elif`` chain is an ``If`` nested in each ``orelse``: walked in a loop, as
        # ``_block`` / ``_statement`` would visit each link, so its length costs no depth.
        pushed = 0
        try:
            while True:
                self._test(node, node.test)
                self._block(node.body)
                link = node.orelse[0] if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If) else None
                if link is None or (self.hits is not None and not self._has_hit(link)):
                    self._block(node.orelse)
                    return
                self.rest.append((node.orelse, 0))
                self.stmts.append(link)
                pushed += 1
                node = link
        finally:
            for _ in range(pushed):
                self.stmts.pop()
                self.rest.pop()

    def visit_While(self, node: ast.While) -> None:
        self._test(node, node.test)
        self._block(node.body)
        self._block(node.orelse)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        if self._guarded_read(node) is not None:
            self.visit(node.test)  # a presence guard decides nothing: the statement's role
        else:
            self._test(node, node.test)
        self.visit(node.body)
        self.visit(node.orelse)

    def _guarded_read(self, node: ast.IfExp) -> Optional[ast.AST]:
        """The capability arm of ``cap() if is_cuda() else None`` / ``-1 if cap is None else
        cap[0] * 10 + cap[1]``: the capability read as it is behind a guard that compares no
        capability (a platform or device-type check, a None check), the other arm a constant
        default.  Such a value is the identity (or nothing), not a pick."""
        for arm, default in ((node.body, node.orelse), (node.orelse, node.body)):
            # a constant, or the value the test checks for None (``read() if x is None else x``)
            if not (_constant_default(default) or isinstance(default, ast.Name) and _none_check(node.test) and any(
                    isinstance(n, ast.Name) and n.id == default.id for n in ast.walk(node.test))):
                continue
            if not [e for e in self._origins(arm) if e.kind != "untraced"]:
                continue
            if _none_check(node.test) or not [e for e in self._origins(node.test) if e.kind != "untraced"]:
                return arm
        return None

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            local = alias.asname or alias.name.split(".")[0]
            self.imports[local] = (alias.name if alias.asname else local, None)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            base = _resolve_relative(self.module, self.is_package, node.level, base)
        for alias in node.names:
            if alias.name != "*":
                self.imports[alias.asname or alias.name] = (base, alias.name)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        self._bind(node.targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        if node.value is not None:
            self._bind([node.target], node.value)

    def _bind(self, targets: List[ast.expr], value: ast.expr) -> None:
        named = dotted(value) if isinstance(value, (ast.Name, ast.Attribute)) else ""
        if (named and "." in named and "(" not in named and not _self_attr(value) and self._attr_expr(value) is None
                and named.split(".", 1)[0] not in self._platform_names()
                and _names_identity(named.rsplit(".", 1)[-1])):
            # a function that reads the identity, bound under a local name: its calls are reads
            for t in targets:
                for n in _target_names(t):
                    self.aliases[-1][n] = named
            self._add(value, Expr("read", f"{named}()"))
            return
        alias = value.id if isinstance(value, ast.Name) else value.attr if _self_attr(value) else ""
        traced = self._lookup(self.vars, alias) if isinstance(value, ast.Name) else self._self_attr_origins(value)
        if alias and not traced and PROBE_NAME.match(alias) and any(
                _self_attr(t) or isinstance(t, ast.Name) for t in targets):
            # the probe itself under another name (``self._is_blackwell = is_blackwell``,
            # ``is_blackwell = self._is_blackwell``): its calls under that name are sites of their own
            self._add(value, Expr("probe", alias, (self.imports.get(alias) or (self.module, None))[0]))
            return
        if isinstance(value, ast.Call) and dotted(value.func).endswith("get_device_properties"):
            for t in targets:
                self.props[-1].update(_target_names(t))
            return
        if isinstance(value, ast.Call) and dotted(value.func) in ("get_platform", "runtime_context.get_platform"):
            for t in targets:
                self.platforms[-1].update(_target_names(t))
            return
        origins = self._origins(value)
        origins = [e for e in origins if e.kind != "untraced"]  # a name that only looks like one is not followed
        if not origins:
            return
        for t in targets:
            for name in _target_names(t):
                self.vars[-1][name] = origins
            attr = _self_attr(t)
            if attr and self.cls:
                self.self_attrs.setdefault(self.cls, {})[attr] = origins

    # -- expressions ------------------------------------------------------------------
    def _add(self, node: ast.AST, expr: Expr) -> None:
        line = getattr(node, "lineno", 0)
        if not 0 < line <= len(self.lines):
            return
        site = self.sites.get(line)
        if site is None:
            site = self.sites[line] = RawSite(
                self.file, line, self.lines[line - 1].strip(), self.scope, self.in_function,
                self.stmt_assigned if not self.stack else (), self.cls, context=self._context(node))
        if expr not in site.exprs:
            site.exprs.append(expr)
        self.stmt_lines.add(line)

    def _context(self, node: ast.AST) -> Context:
        stmt = self.stmts[-1] if self.stmts else None
        scope_words = [n for _, n in self.stack]
        if self.roles and self.roles[-1][0] == "format" or isinstance(stmt, ast.Raise) or (
                isinstance(stmt, ast.Expr) and _is_log_call(stmt.value)):
            return Context("log", _join(_words([stmt] if stmt is not None else []) + scope_words), log=True)
        if self.roles:
            owner = self.roles[-1][1]
            if isinstance(owner, (ast.If, ast.While)):
                branches = list(owner.body) + list(owner.orelse)
                raises = _only_raises(owner.body) and not owner.orelse
                # an early exit (``if not <cap>: return None``) decides what the code after it does
                after = self._after() if isinstance(owner, ast.If) and not owner.orelse and _exits(owner.body) else []
                return Context("test", _join(_words([owner.test] + branches) + scope_words), raises=raises,
                               logs=_only_logs(owner.body, owner.orelse),
                               controls=_join(_words(branches, probes=False)),
                               selects=_selects(branches + after), exits=bool(after))
            return Context("test", _join(_words([stmt] if stmt is not None else [owner]) + scope_words),
                           controls=_join(_words([owner.body, owner.orelse], probes=False)),
                           binds=tuple(n for t in _assign_targets(stmt) for n in _target_names(t) + [_self_attr(t)]
                                       if n) if stmt is not None else (),
                           selects=_selects([stmt] if stmt is not None else [owner.body, owner.orelse]))
        if stmt is None:
            return Context()
        words = _join(_words([stmt]) + scope_words)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = _assign_targets(stmt)
            names = tuple(n for t in targets for n in _target_names(t) + [_self_attr(t)] if n)
            # a binding is followed to its uses in a function (locals, ``self.`` attributes) and
            # at module level (cached flags), not in a class body
            traced = not (self.stack and self.stack[-1][0] == "class")
            plain = traced and bool(targets) and all(isinstance(t, (ast.Name, ast.Tuple, ast.List)) or
                                                     (_self_attr(t) and self.in_function) for t in targets)
            value = getattr(stmt, "value", None)
            # a value picked by a table or a conditional expression (one whose test holds the
            # capability is a ``test`` above); not an unrelated ``x if y else z`` inside a key
            conditional = isinstance(value, (ast.IfExp, ast.Dict, ast.Lambda)) and not (
                isinstance(value, ast.IfExp) and self._guarded_read(value) is not None)
            return Context("bind" if plain else "other", words, binds=names, conditional=conditional,
                           controls=_join(_words([value], probes=False)) if value is not None else "",
                           selects=_selects([stmt]))
        if isinstance(stmt, ast.Return):
            return Context("return", words, controls=_join(_words([stmt], probes=False)), selects=_selects([stmt]))
        if isinstance(stmt, ast.Assert):
            return Context("assert", words)
        if id(node) in self.passed:
            return Context("pass", words)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            return Context("call", words, log=_is_log_call(stmt.value))
        return Context("other", words)

    def _lookup(self, stacks: List, name: str):
        for scope in reversed(stacks):
            if name in scope:
                return scope[name] if isinstance(scope, dict) else True
        return None

    def _call_expr(self, node: ast.Call) -> Optional[Expr]:
        name = dotted(node.func)
        if isinstance(node.func, ast.Name):
            imported = self.imports.get(node.func.id)
            if imported is not None and imported[1] not in (None, node.func.id) and _names_identity(imported[1]):
                # imported under another name (``import is_sm90_supported as hopper``)
                if PROBE_NAME.match(imported[1]):
                    return Expr("probe", imported[1], imported[0])
                return Expr("read", f"{imported[1]}()")
            aliased = self._lookup(self.aliases, node.func.id)
            if aliased:  # a local name bound to one (``cc = torch.cuda.get_device_capability``)
                name = aliased
        last = name.rsplit(".", 1)[-1] if name else ""
        if name.endswith("CapabilityRequirement.cuda") and (node.args or node.keywords):
            return Expr("window", "CapabilityRequirement.cuda")
        if any(k.arg in WINDOW_KEYWORDS and _literal_ints(k.value) for k in node.keywords):
            return Expr("window", f"{name or 'call'}(...)")
        if not last:
            return None
        if last == "get_device_capability" and (name.startswith("torch.") or name.startswith("cuda.")):
            return Expr("read", name.replace("()", ""))
        if last in IDENTITY_CALLS:
            return Expr("read", f"{name.replace('()', '')}()")
        if last == COMPILE_ARCH_CALL or CAPABILITY_HELPER_CALL.match(last) and not PROBE_NAME.match(last):
            return Expr("read", f"{last}()")
        if PROBE_NAME.match(last):
            if "." in name:
                base = name.rsplit(".", 1)[0]
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
                return Expr("read", f"{name.replace('()', '')}()")
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

    def _attr_expr(self, node: ast.Attribute) -> Optional[Expr]:
        attr = node.attr
        base = node.value
        base_dotted = dotted(base)
        if attr in ("major", "minor"):
            if isinstance(base, ast.Call) and dotted(base.func).endswith("get_device_properties"):
                return Expr("read", f"get_device_properties().{attr}")
            if isinstance(base, ast.Name) and self._lookup(self.props, base.id):
                return Expr("read", f"get_device_properties().{attr}")
            return None
        is_platform = base_dotted.replace("()", "") in ("get_platform", "runtime_context.get_platform") or (
            isinstance(base, ast.Name) and base.id in self._platform_names())
        if is_platform and (PROBE_NAME.match(attr) or attr in ("device_capability", "device_sm")):
            return Expr("platform", attr)
        if attr == "device_capability":
            if base_dotted == "self":
                return Expr("read", "self.device_capability")
            return Expr("read", f"{base_dotted or '...'}.device_capability")
        return None

    def _origins(self, node: ast.AST, depth: int = 0) -> List[Expr]:
        """Where a capability value comes from; [] when node is not one.  Followed through
        comparisons, ``and`` / ``or`` / ``not`` and arithmetic (a value computed from the
        capability), not through a conditional expression (the value it picks is a
        decision, taken where it is bound)."""
        if depth > 50:
            return []
        if isinstance(node, ast.Call):
            e = self._call_expr(node)
            if e is None and isinstance(node.func, ast.Attribute):
                # a method of a capability value (``arch.is_family_of(Arch.sm_103f)``, ``cap.to_int()``)
                return [o for o in self._origins(node.func.value, depth + 1) if o.kind != "untraced"]
            return [e] if e is not None and e.kind in ("read", "probe", "platform") else []
        if isinstance(node, ast.Attribute):
            e = self._attr_expr(node)
            if e is not None:
                return [e]
            found = self._self_attr_origins(node)
            if found:
                return found
            inner = self._origins(node.value, depth + 1)
            if inner and node.attr in ("major", "minor"):
                return inner
            return [Expr("untraced", dotted(node) or node.attr)] if CAP_NAME.match(node.attr) else []
        if isinstance(node, ast.Subscript):
            return self._origins(node.value, depth + 1)
        if isinstance(node, ast.IfExp):
            arm = self._guarded_read(node)
            return self._origins(arm, depth + 1) if arm is not None else []
        if isinstance(node, ast.Name):
            found = self._lookup(self.vars, node.id)
            if found:
                return list(found)
            return [Expr("untraced", node.id)] if CAP_NAME.match(node.id) else []
        parts: List[ast.AST] = []
        if isinstance(node, (ast.Tuple, ast.List)):
            # ``(major, minor)`` is a capability; ``(dtype, arch, ...)`` (a cache key) is not
            if not all(_int(e) is not None or self._origins(e, depth + 1) for e in node.elts):
                return []
            parts = list(node.elts)
        elif isinstance(node, ast.BinOp):
            parts = [node.left, node.right]
        elif isinstance(node, ast.BoolOp):
            parts = list(node.values)
        elif isinstance(node, ast.UnaryOp):
            parts = [node.operand]
        elif isinstance(node, ast.Compare):
            parts = [node.left] + list(node.comparators)
        out: List[Expr] = []
        for p in parts:
            for e in self._origins(p, depth + 1):
                if e not in out:
                    out.append(e)
        return out

    def _self_attr_origins(self, node: ast.Attribute) -> List[Expr]:
        attr = _self_attr(node)
        if not attr or not self.cls:
            return []
        return list(self.self_attrs.get(self.cls, {}).get(attr, ()))

    def visit_Call(self, node: ast.Call) -> None:
        if self.in_function and _is_triton_launch(node):
            self.launchers.add(self.scope)
        e = self._call_expr(node)
        if e is not None:
            self._add(node, e)
        for arg in list(node.args) + [k.value for k in node.keywords]:
            if isinstance(arg, (ast.Name, ast.Attribute, ast.Subscript, ast.Starred, ast.Call)):
                self.passed.add(id(arg))
        self.generic_visit(node)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> None:
        self._in_role("format", node, lambda: self.generic_visit(node))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        e = self._attr_expr(node)
        if e is not None:
            self._add(node, e)
        elif isinstance(node.ctx, ast.Load):
            for e in self._self_attr_origins(node):
                self._add(node, e)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        self.stmt_loads.add(node.id)
        self.loads.append((node.id, node.lineno, self.scope, self.in_function, self.cls))
        if self.in_function:  # module-level names are cached flags, their uses found by _add_flag_uses
            for e in self._lookup(self.vars[1:], node.id) or ():
                self._add(node, e)

    def visit_Dict(self, node: ast.Dict) -> None:
        if _is_cap_table(node):
            self._add(node, Expr("table", ",".join(self.stmt_assigned) or "<dict>"))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left] + list(node.comparators)
        plausible = any(_cap_literal(o) for o in operands)
        if any(_literal_ints(o) for o in operands) or any(
                isinstance(o, ast.Constant) and isinstance(o.value, str) and GPU_NAME.match(o.value) for o in operands):
            origins: List[Expr] = []
            for o in operands:
                if not _literal_ints(o):
                    origins.extend(e for e in self._origins(o) if e not in origins)
            for e in origins:
                if e.kind != "untraced":
                    self._add(node, e)
                elif plausible:  # a name that looks like a capability, compared with one
                    self._add(node, Expr("compare", e.name, e.module))
        self.generic_visit(node)


def _is_triton_launch(node: ast.Call) -> bool:
    """``kernel[grid](...)`` / ``self._kernel[(b, h)](...)``: a Triton kernel launched over a
    grid (a name, a tuple, a lambda or a call), with arguments; not ``table[key](x)``,
    a lookup by a key that is not a grid."""
    func = node.func
    if not (isinstance(func, ast.Subscript) and isinstance(func.value, (ast.Name, ast.Attribute)) and node.args):
        return False
    grid = func.slice
    if isinstance(grid, ast.Name):
        return "grid" in grid.id.lower()
    return isinstance(grid, (ast.Tuple, ast.Lambda, ast.Call))


def _assign_targets(node: Optional[ast.AST]) -> List[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)) and getattr(node, "value", None) is not None:
        return [node.target]
    return []


def _target_names(node: ast.AST) -> List[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        out: List[str] = []
        for el in node.elts:
            out.extend(_target_names(el))
        return out
    if isinstance(node, ast.Starred):
        return _target_names(node.value)
    return []


def _self_attr(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return ""


def _join(words: List[str]) -> str:
    return " ".join(words)


# --- files and trees -------------------------------------------------------------------

def scan_file(root: str, file: str, text: Optional[str] = None, keep: Optional[LineFilter] = None) -> FileScan:
    """Scan one file; with ``keep``, only the module-level statements and the functions
    holding a line it accepts.  A file CPython cannot parse comes back with ``problem``."""
    if text is None:
        text = read_source(os.path.join(root, file), errors="replace")
    module = package_module(file)
    lines = source_lines(text) or [""]
    tree, why = python_tree(text)
    if tree is None:
        problem, line = why or "not Python 3 syntax", 0
        if why is None:
            try:
                ast.parse(text)
            except SyntaxError as exc:
                problem, line = f"SyntaxError: {exc.msg}", exc.lineno or 0
            except Exception as exc:  # noqa: BLE001 - whatever the parser says, the file is listed
                problem = f"{type(exc).__name__}: {exc}"
        scan = FileScan(file, module, {}, {}, {}, {}, [], lines, problem=problem, problem_line=line)
        return scan
    hits = keep.hits(text) if keep is not None else None
    visitor = _Visitor(file, module, lines, file.endswith("__init__.py"), hits)
    limit = sys.getrecursionlimit()
    try:
        # the visit recurses a few frames per level of the syntax tree (CPython's parser takes
        # left-nested chains such as ``a + 1 + 1 ...`` of any length): ``VISIT_DEPTH`` levels
        sys.setrecursionlimit(max(limit, VISIT_RECURSION))
        visitor._block(tree.body)
    except RecursionError:
        return FileScan(file, module, {}, {}, {}, {}, [], lines,
                        problem=f"nested deeper than the audit visits (about {VISIT_DEPTH} levels)")
    finally:
        sys.setrecursionlimit(limit)
    for site in visitor.sites.values():
        site.launcher = site.scope in visitor.launchers
    return FileScan(file, module, visitor.imports, visitor.sites, visitor.flags, visitor.flag_deps, visitor.loads,
                    lines, launchers=visitor.launchers)


def scan_source(file: str, text: str) -> FileScan:
    """One file on its own, as ``scan_tree`` scans each (prefilter, its cached flags, the
    visit of what can hold a site); what the per-file time bound of the tests measures."""
    keep = LineFilter(module_flags(text))
    if not keep.search(text):
        return FileScan(file, package_module(file), {}, {}, {}, {}, [], source_lines(text))
    return scan_file("", file, text, keep)


def module_flags(text: str, keep: LineFilter = LineFilter()) -> Set[str]:
    """Names assigned at module level from a line that can hold a site, and (transitively)
    from those: the cached flags another module may import (``ast``; a worklist, linear
    in the assignments and the names they load)."""
    tree, _ = python_tree(text)
    if tree is None:
        return set()
    lines = source_lines(text)
    strong: Set[str] = set()
    users: Dict[str, Set[str]] = {}  # name loaded -> names assigned from it
    for node in _module_statements(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            # an identity function imported under another name: lines calling it can hold a site
            strong |= {a.asname for a in node.names
                       if a.asname and a.asname != a.name and _names_identity(a.name.rsplit(".", 1)[-1])}
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            names = {n for n in names if len(n) > 2 and not n.startswith("__")}
            if any(keep.search(lines[i]) for i in range(node.lineno - 1, min(node.end_lineno or node.lineno,
                                                                               len(lines)))):
                strong |= names
            for load in {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}:
                users.setdefault(load, set()).update(names)
    flags: Set[str] = set()
    todo = list(strong)
    while todo:
        name = todo.pop()
        if name not in flags:
            flags.add(name)
            todo.extend(users.get(name, ()))
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
    """Scan every file; returns the scans of files that may hold a site (and of files that
    could not be parsed, with their ``problem``), and the number of files read.  With
    ``prefilter`` (the default), files and functions without a line that can hold a site
    are not visited: a line matches ``STRONG`` or names a module-level value computed from
    such a line anywhere in the tree (a cached flag)."""
    texts: Dict[str, str] = {}
    skipped: Dict[str, str] = {}
    files = list(iter_files(root, skipped))
    for file in files:
        texts[file] = read_source(os.path.join(root, file), errors="replace")
    scans: Dict[str, FileScan] = {}
    if not prefilter:
        for file in files:
            scans[file] = scan_file(root, file, texts[file])
    else:
        strong = LineFilter()
        flag_names: Set[str] = set()
        for f in files:
            if strong.search(texts[f]):
                flag_names |= module_flags(texts[f])
        keep = LineFilter(flag_names)
        for file in files:
            if keep.search(texts[file]):
                scans[file] = scan_file(root, file, texts[file], keep)
    _close_flags(scans)
    _add_flag_uses(scans)
    for file, why in skipped.items():  # listed as not scanned, never counted as 0 sites
        scans[file] = FileScan(file, package_module(file), {}, {}, {}, {}, [], [], problem=why)
    return [scans[f] for f in sorted(scans)], len(files)


def _close_flags(scans: Dict[str, FileScan]) -> None:
    """A module-level value computed from a cached flag is a cached flag too (a worklist)."""
    for scan in scans.values():
        first_load: Dict[str, int] = {}
        for n, ln, _, f, _c in scan.loads:
            if not f and (n not in first_load or ln < first_load[n]):
                first_load[n] = ln
        users: Dict[str, List[str]] = {}
        for name, deps in scan.flag_deps.items():
            for d in deps:
                users.setdefault(d, []).append(name)
        todo = list(scan.flags)
        while todo:
            flag = todo.pop()
            for name in users.get(flag, ()):
                if name in scan.flags:
                    continue
                # its line: the first site-free line is not known; use the line of its first load
                line = min((first_load[d] for d in scan.flag_deps[name] if d in scan.flags and d in first_load),
                           default=None)
                if line is not None:
                    scan.flags[name] = line
                    todo.append(name)


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
                site = scan.sites[line] = RawSite(scan.file, line, text, scope, function, (), cls,
                                                  context=_flag_context(scan, line, scope),
                                                  launcher=scope in scan.launchers)
            e = Expr("flag", origin[1], origin[0])
            if e not in site.exprs and not site.cached_flag:
                site.exprs.append(e)


def _flag_context(scan: FileScan, line: int, scope: str) -> Context:
    """The context of a flag's use, from the line and the lines it controls (the block
    indented under it, bounded), read from the text: the file was visited before the
    tree's flags were known."""
    text = scan.lines[line - 1] if 0 < line <= len(scan.lines) else ""
    indent = len(text) - len(text.lstrip())
    block = [text]
    for nxt in scan.lines[line: line + 60]:
        if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
            break
        block.append(nxt)
    words = _IDENT.findall(" ".join(block))[:CONTEXT_WORDS] + scope.split(".")
    stripped = text.strip()
    role = "test" if re.match(r"(if|elif|while)\b", stripped) or " if " in stripped else (
        "return" if stripped.startswith("return") else "other")
    following = [b.strip() for b in block[1:] if b.strip()]
    raises = role == "test" and bool(following) and following[0].startswith("raise")
    controls = [w for w in _IDENT.findall(" ".join(block[1:]))[:CONTEXT_WORDS] if not PROBE_NAME.match(w)]
    return Context(role, _join(words), raises=raises, controls=_join(controls))


def _line_text(scan: FileScan, line: int) -> str:
    return scan.lines[line - 1].strip() if 0 < line <= len(scan.lines) else ""
