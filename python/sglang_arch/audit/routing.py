"""What is routed, derived from the plugin's targets and the patch series' steps.

Nothing here names a site: a site's status follows from

- the functions routed (``Routing.functions``): the plugin's ``all_targets()`` paths,
  the series' ``FunctionSite``s, and ``EXTRA_ROUTED`` (functions routed on purpose by
  other means).  A site inside one of them (or a nested function, or the module-level
  assignment that defines it) is ``routed``;
- the probe helpers routed (``Routing.helpers``, in ``Routing.helper_modules``): the
  plugin's ``FACT_HELPERS`` and its targets in ``sglang.srt.utils.common``; in a patched
  tree SGLang's own probes, which answer the same identity.  A call of one,
  or a ``get_platform()`` fact that reads one (SGLang's ``runtime_context`` maps facts
  to helpers; read from the scanned tree), is ``probe``;
- the sites a target or a step *covers* besides its own function (``covers``: a target
  that overrules, where SGLang builds what it runs, whatever an upstream decision site
  picked): ``Target.covers`` / ``Step.covers``, each entry ``"module.qualname"`` (every
  site of that function, class or module-level name) or ``"module.qualname:check"``
  (only its sites whose line holds ``check``).  A covered site is ``routed``;
- ``import_time_probes``: whether a probe called while a module is imported already
  answers from the registry.  The patched tree's probes are rewritten in the source, so
  always; the plugin's only with early routing (``early_routing=True``, the default:
  the plugin installs its probes before SGLang's modules compute values from them).
  Without it, a module-level value computed from a probe is ``unrouted``.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, Optional, Sequence, Set, Tuple

from ..files import SourceError, python_tree, read_source
from .scan import link_problem, package_module

COMMON = "sglang.srt.utils.common"
# Modules that re-export the probe helpers of ``COMMON`` (``from ...common import *``).
REEXPORTS = {COMMON: ("sglang.srt.utils",)}


@dataclass(frozen=True)
class Routed:
    """A function routed on purpose by other means than a target or a series site.

    ``path`` is "module.attr" or "module.Class.method"; ``plugin`` / ``patched`` say
    which of the two it counts for."""

    path: str
    reason: str
    plugin: bool = True
    patched: bool = True


# Declarative additions, for hooks that are not (yet) a Target in targets.py.
EXTRA_ROUTED: Sequence[Routed] = ()


@dataclass
class Routing:
    name: str
    functions: Dict[str, str] = field(default_factory=dict)  # path -> reason
    helpers: Set[str] = field(default_factory=set)
    helper_modules: Set[str] = field(default_factory=set)
    uses: Dict[str, str] = field(default_factory=dict)  # module-level name the glue reads -> target
    covers: Dict[str, str] = field(default_factory=dict)  # "module.qualname[:check]" -> reason
    import_time_probes: bool = True
    # "module.name" of module values the plugin's value targets bind at import: a decision
    # reading one in the same module reads the registry's decision (the plugin binds the
    # module's name only: a Triton constexpr is read by its own module's kernels, so modules
    # that import the value by name keep SGLang's)
    values: Set[str] = field(default_factory=set)
    # Routed functions whose own body still runs (the plugin's check and scoped hooks, the
    # series' edits of some lines): path -> the names answered inside it (none for a check).
    # A gate or fact there that reads none of them is the device's, not routed.
    answers: Dict[str, FrozenSet[str]] = field(default_factory=dict)
    replaced: Set[str] = field(default_factory=set)  # routed functions whose body a hook or guard replaces
    # Routed functions the series edits in part: path -> its edits of that module's file; what
    # is answered there are the lines they replace (``changed_lines`` on the scanned source;
    # where they do not apply, the series would leave the site out: nothing is answered).
    by_lines: Dict[str, object] = field(default_factory=dict)

    def answer_more(self, path: str, names: Optional[Iterable[str]]) -> None:
        """``names`` answered inside ``path``'s running body; ``None``: the body is replaced
        (which wins over any edit beside it)."""
        if names is None:
            self.replaced.add(path)
            self.answers.pop(path, None)
        elif path not in self.replaced:
            self.answers[path] = self.answers.get(path, frozenset()) | {answered_name(n) for n in names}
        if path in self.replaced:
            self.by_lines.pop(path, None)

    def add_covers(self, selectors: Iterable[str], owner: str) -> None:
        """Record ``owner`` for each selector; a selector several owners list names them all."""
        for sel in selectors:
            reason = self.covers.get(sel)
            if reason is None:
                self.covers[sel] = f"covered by {owner}"
            elif owner not in reason:
                self.covers[sel] = f"{reason} and {owner}"

    def covered(self, module: str, scope: str, assigned: Iterable[str], code: str) -> Optional[str]:
        """The reason a site is covered by a target or step other than its own function."""
        if not self.covers:
            return None
        paths = [f"{module}.{scope}"] if scope else [f"{module}.{n}" for n in assigned]
        for sel, reason in self.covers.items():
            path, _, check = sel.partition(":")
            if check and check not in code:
                continue
            if any(full == path or full.startswith(path + ".") for full in paths):
                return f"{reason} ({sel})"
        return None

    def function_for(self, module: str, scope: str, assigned: Iterable[str] = ()) -> Optional[str]:
        paths = [f"{module}.{scope}"] if scope else [f"{module}.{n}" for n in assigned]
        for full in paths:
            parts = full.split(".")
            for i in range(len(parts), 0, -1):
                prefix = ".".join(parts[:i])
                if prefix in self.functions:
                    return prefix
        return None


def answered_name(name: str) -> str:
    """What a read is matched by: its last dotted part, without a call's parentheses and
    leading underscores (``self._get_device_sm`` and the probe ``get_device_sm`` alike)."""
    return name.rsplit(".", 1)[-1].split("(", 1)[0].lstrip("_")


def _add_helpers(routing: Routing, module: str, names: Iterable[str]) -> None:
    routing.helpers.update(names)
    routing.helper_modules.add(module)
    routing.helper_modules.update(REEXPORTS.get(module, ()))


def plugin_routing(targets=None, extra: Sequence[Routed] = (), early_routing: bool = True) -> Routing:
    """What the plugin routes, read from ``targets.all_targets()`` (or ``targets``)."""
    from ..integrations.sglang import targets as targets_mod

    if targets is None:
        targets = targets_mod.all_targets()
    routing = Routing("plugin", import_time_probes=early_routing)
    for t in targets:
        routing.functions[t.path] = f"the plugin hooks {t.path} ({t.concern})"
        routing.answer_more(t.path, getattr(getattr(t, "hook", None), "answers", None))
        if getattr(t, "value", None) is not None:
            routing.values.add(t.path)
        routing.add_covers(getattr(t, "covers", ()), f"the plugin's target {t.path}")
        for name in t.uses:
            routing.uses.setdefault(name, t.path)
        module, attr = t.path.rsplit(".", 1)
        if module == COMMON:
            _add_helpers(routing, module, [attr])
    _add_helpers(routing, COMMON, targets_mod.FACT_HELPERS.values())
    for r in tuple(EXTRA_ROUTED) + tuple(extra):
        if r.plugin:
            routing.functions[r.path] = r.reason
    return routing


def patched_routing(steps=None, extra: Sequence[Routed] = ()) -> Routing:
    """What a tree patched by ``sglang-arch upstream`` routes, read from the series' sites
    (``upstream/steps.py``): a function a site edits in part answers the lines its edits
    rewrite; a name it replaces or deletes whole is routed."""
    from ..integrations.sglang.targets import FACT_HELPERS
    from ..upstream import steps as steps_mod

    routing = Routing("patched", import_time_probes=True)
    # The series leaves SGLang's platform probes in place: they answer the device's own
    # identity, which is what the plugin's routed probes answer too (docs/fallback.md), so
    # a read of them is `probe` in both columns.
    _add_helpers(routing, COMMON, list(FACT_HELPERS.values()) + ["is_blackwell"])
    for step in steps if steps is not None else steps_mod.STEPS:
        for site in step.sites:
            reason = f"series step {step.number} ({step.key}): {site.name}"
            for route in site.replaces + site.routes:
                path = route.replace(":", ".")
                earlier = routing.functions.get(path)
                routing.functions[path] = reason if earlier is None else f"{earlier}; {reason}"
            for route in site.replaces:
                routing.answer_more(route.replace(":", "."), None)
            for route in site.routes:
                module, _ = route.split(":")
                path = route.replace(":", ".")
                routing.answer_more(path, ())
                edits = tuple(e for e in site.edits if package_module(e.path) == module and not _rewrites_no_decision(e))
                routing.by_lines[path] = tuple(routing.by_lines.get(path, ())) + edits
    for r in tuple(EXTRA_ROUTED) + tuple(extra):
        if r.patched:
            routing.functions[r.path] = r.reason
    return routing


def _rewrites_no_decision(edit) -> bool:
    """An edit that changes nothing (a later step's anchor on an earlier one's text) or only
    imports: it rewrites no line a decision sits on, and its text may exist only in a tree an
    earlier step of the series has already patched."""
    if edit.new is None or edit.old == edit.new:
        return edit.new is not None
    try:
        trees = [ast.parse(edit.old), ast.parse(edit.new)]
    except SyntaxError:
        return False
    return all(tree.body and all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body) for tree in trees)


def platform_facts(root: str) -> Tuple[Dict[str, str], Optional[str]]:
    """SGLang's ``get_platform()`` fact -> probe helper map, read from the scanned tree's
    ``srt/runtime_context.py`` (``_PLATFORM_PROBES``, ``_PLATFORM_VALUES``: dicts of
    strings), and a note when the file could not be read that way (it is then the
    plugin's ``FACT_HELPERS``, as for a tree without the file).  The read is bounded
    like every source read (``read_source``); a file that is not Python 3, a table that is
    not a literal dict of strings, or one nested past the parser's limits is a note."""
    from ..integrations.sglang.targets import FACT_HELPERS

    path = os.path.join(root, "srt", "runtime_context.py")
    if not os.path.lexists(path):
        return dict(FACT_HELPERS), None
    rel = "srt/runtime_context.py"
    why_not = link_problem(root, path)  # a link out of the tree (or dangling) is not followed
    if why_not is not None:
        return dict(FACT_HELPERS), f"{rel}: {why_not}; platform facts taken as sglang-arch's FACT_HELPERS"
    try:
        tree, why = python_tree(read_source(path, errors="replace"))
    except SourceError as exc:
        return dict(FACT_HELPERS), f"{exc}; platform facts taken as sglang-arch's FACT_HELPERS"
    if tree is None:
        return dict(FACT_HELPERS), (f"{rel}: not Python 3 this parser reads ({why or 'a syntax error'}); "
                                    "platform facts taken as sglang-arch's FACT_HELPERS")
    facts: Dict[str, str] = {}
    odd = []
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if not (isinstance(target, ast.Name) and target.id in ("_PLATFORM_PROBES", "_PLATFORM_VALUES")):
            continue
        table = _string_dict(getattr(node, "value", None))
        if table is None:
            odd.append(f"{target.id} (line {node.lineno})")
        else:
            facts.update(table)
    if not facts:
        why = f"{', '.join(odd)} not a dict of strings" if odd else "no _PLATFORM_PROBES / _PLATFORM_VALUES"
        return dict(FACT_HELPERS), f"{rel}: {why}; platform facts taken as sglang-arch's FACT_HELPERS"
    return facts, (f"{rel}: {', '.join(odd)} not a dict of strings, left out" if odd else None)


def _string_dict(node: Optional[ast.AST]) -> Optional[Dict[str, str]]:
    """A literal ``{"fact": "helper", ...}``; None for anything else (read from the
    syntax tree: nothing is evaluated)."""
    if not isinstance(node, ast.Dict) or any(k is None for k in node.keys):
        return None
    out = {}
    for k, v in zip(node.keys, node.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)
                and isinstance(v, ast.Constant) and isinstance(v.value, str)):
            return None
        out[k.value] = v.value
    return out


def changed_lines(text: str, edits) -> Optional[Set[int]]:
    """The lines of ``text`` (1-based) that the series' ``edits`` of its file replace; None
    where one of them does not apply to it (``sglang-arch upstream`` reports why)."""
    changed: Set[int] = set()
    for edit in edits:
        if edit.new is None:
            continue
        at = text.find(edit.old)
        if at < 0 or text.count(edit.old) != 1:
            return None
        first = text.count("\n", 0, at) + 1
        changed.update(range(first, first + max(1, edit.old.count("\n"))))
    return changed
