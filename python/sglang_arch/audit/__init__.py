"""``sglang-arch audit SRC``: every capability-dependent site of an SGLang tree.

``audit(src)`` finds the package root, scans ``srt/`` and ``kernels/`` (``scan.py``),
gives each site its kind and its concern from what it decides (``classify.py``,
``gates.py``) and its status for the plugin and for the patched tree (``routing.py``,
derived from the plugin's targets and the series' steps), and returns a ``Report``
(``report.py`` renders it).

Kind of a site: ``decision`` (picks a backend, a size, on/off), ``gate`` (which compiled
kernel can run here, a requirement check) or ``fact`` (the identity itself, used by
other sites).  Status of a site, per routing:

``routed``    the registry takes it: inside a function the routing hooks or replaces (or a
              module-level name it defines or deletes, a table its glue reads, state its
              routed ``__init__`` sets), or covered by a target (``covers``); in a routed
              function whose own body still runs (``Routing.answers``: scoped hooks;
              ``Routing.by_lines``: the series' edits of some of its lines, by the lines
              they replace) a site only where it reads what is answered there or sits on
              an edited line, under a check hook (which declares first) its decisions;
              else its own reads give its status
``probe``     a gate or fact whose capability values all come from a platform probe at the
              time it is evaluated (the device's identity, the same through the plugin and
              in a patched tree)
``device``    a gate or fact that reads the device's identity directly
``unrouted``  a decision the registry does not take, whatever it reads (a probe, torch, a
              table): SGLang decides it by itself
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..files import read_source
from . import classify, gates, routing
from .routing import (  # noqa: F401
    EXTRA_ROUTED, Routed, Routing, answered_name, changed_lines, patched_routing, plugin_routing)
from .scan import KIND_ORDER, Expr, FileScan, RawSite, scan_tree

STATUSES = ("routed", "probe", "device", "unrouted")


class AuditError(ValueError):
    """SRC is not an SGLang tree (one line)."""


@dataclass
class Site:
    file: str
    line: int
    code: str
    kind: str  # decision, gate, fact
    kind_reason: str
    source: str  # what the line reads: table, window, cached_flag, read, probe, platform, flag, compare
    concern: str
    evaluated: str
    scope: str
    plugin: str
    plugin_reason: str
    patched: str
    patched_reason: str

    def to_dict(self) -> Dict[str, object]:
        return dict(self.__dict__)


@dataclass
class Unparsed:
    """A file that may hold sites but could not be parsed: listed, never counted as 0."""

    file: str
    line: int
    problem: str

    def to_dict(self) -> Dict[str, object]:
        return dict(self.__dict__)


@dataclass
class Report:
    sglang: str
    root: str
    sites: List[Site]
    files_read: int
    seconds: float
    early_routing: bool = True
    summary: Dict[str, Dict[str, object]] = field(default_factory=dict)
    unparsed: List[Unparsed] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, object]:
        return {"sglang": self.sglang, "early_routing": self.early_routing,
                "sites": [s.to_dict() for s in self.sites], "summary": self.summary,
                "unparsed": [u.to_dict() for u in self.unparsed], "notes": list(self.notes)}

    def unrouted_decisions(self, who: str = "plugin", three: bool = True) -> List[Site]:
        """The decisions the registry does not take (in the three concerns by default)."""
        return [s for s in self.sites if s.kind == "decision" and getattr(s, who) == "unrouted"
                and (classify.in_three(s.concern) or not three)]


def find_root(src: str) -> str:
    """The sglang package directory of SRC: SRC itself, SRC/sglang, or SRC/python/sglang."""
    for cand in (src, os.path.join(src, "sglang"), os.path.join(src, "python", "sglang")):
        if os.path.isdir(os.path.join(cand, "srt")) and os.path.isfile(os.path.join(cand, "__init__.py")):
            return os.path.abspath(cand)
    if not os.path.exists(src):
        raise AuditError(f"{src}: no such directory; expected an sglang package dir, a dir containing "
                         "sglang/, or an SGLang git clone (python/sglang)")
    raise AuditError(f"{src}: not an SGLang tree (no sglang/srt in it, in sglang/ or in python/sglang/)")


_VERSION = re.compile(r"""^__version__[ \t]*=[ \t]*(?:version[ \t]*=[ \t]*)?['"]([^'"\n]{1,100})['"]""", re.MULTILINE)


def tree_version(root: str) -> str:
    """``__version__`` of ``_version.py`` (or ``version.py``); "unknown" without one.  Read
    as every source file is (``read_source``: a regular file of bounded size; the error
    names it)."""
    for name in ("_version.py", "version.py"):
        path = os.path.join(root, name)
        if os.path.lexists(path):
            m = _VERSION.search(read_source(path, errors="replace"))
            if m:
                return m.group(1)
    return "unknown"


def audit(src: str, *, early_routing: bool = True, extra: Sequence[Routed] = (), targets=None, steps=None,
          prefilter: bool = True) -> Report:
    """Scan SRC and classify every site.

    ``early_routing``: the plugin's probes answer before SGLang's modules are imported
    (the plugin's early import hook); when False, values a module computes at import
    from a probe count as not routed for the plugin.  ``extra``: more functions routed
    on purpose (``Routed``), added to ``EXTRA_ROUTED``.  ``targets`` / ``steps``: the
    plugin's targets and the series' steps (default: the installed sglang-arch's)."""
    started = time.perf_counter()
    root = find_root(src)
    version = tree_version(root)
    scans, files_read = scan_tree(root, prefilter=prefilter)
    plugin = plugin_routing(targets, extra, early_routing)
    patched = patched_routing(steps, extra)
    facts, note = routing.platform_facts(root)
    resolver = _Resolver(scans, facts)
    sites = []
    unparsed = [Unparsed(s.file, s.problem_line, s.problem) for s in scans if s.problem]
    for scan in scans:
        for line in sorted(scan.sites):
            raw = scan.sites[line]
            if not raw.exprs:
                continue
            gate = gates.gate_for(raw.file, raw.scope, raw.code)
            kind, why = classify.kind_for(raw, gate.reason if gate else None)
            concern = classify.concern_for(raw, kind)
            sources = ["cached_flag"] if raw.cached_flag else []
            sources += [e.kind for e in raw.exprs]
            source = min(sources, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER))
            p_status, p_reason = resolver.status(scan, raw, plugin, kind)
            s_status, s_reason = resolver.status(scan, raw, patched, kind)
            sites.append(Site(raw.file, raw.line, raw.code, kind, why, source, concern,
                              classify.evaluated(raw.scope if raw.function else None), raw.scope,
                              p_status, p_reason, s_status, s_reason))
    report = Report(version, root, sites, files_read, time.perf_counter() - started, early_routing,
                    unparsed=unparsed, notes=[note] if note else [])
    report.summary = summarize(sites)
    return report


def summarize(sites: Sequence[Site]) -> Dict[str, Dict[str, object]]:
    """{concern: {"sites": n, "decision": n, "gate": n, "fact": n, "plugin": {"routed": n,
    "unrouted": n}, "patched": {...}}}: the decisions the registry takes (``routed``) and
    does not (``unrouted``) per column; concerns in CONCERNS order, then "total"."""
    out: Dict[str, Dict[str, object]] = {}
    for concern in classify.CONCERNS + ("total",):
        chosen = [s for s in sites if concern == "total" or s.concern == concern]
        if not chosen:
            continue
        entry: Dict[str, object] = {"sites": len(chosen)}
        for kind in classify.KINDS:
            entry[kind] = sum(s.kind == kind for s in chosen)
        decisions = [s for s in chosen if s.kind == "decision"]
        for who in ("plugin", "patched"):
            entry[who] = {st: sum(getattr(s, who) == st for s in decisions) for st in ("routed", "unrouted")}
        out[concern] = entry
    return out


class _Resolver:
    def __init__(self, scans: List[FileScan], facts: Dict[str, str]) -> None:
        self.by_module = {s.module: s for s in scans}
        self.facts = facts
        self._memo: Dict[Tuple[str, str, int], Tuple[str, str]] = {}
        self._changed: Dict[Tuple[str, int], Optional[Set[int]]] = {}  # (file, plan) -> lines it rewrites

    def status(self, scan: FileScan, raw: RawSite, r: Routing, kind: str) -> Tuple[str, str]:
        """The site's status for routing ``r``, given its kind (module docstring)."""
        body = self._in_running_body(scan, raw, r, kind)
        if body is not None:  # SGLang's own code in a routed function: what it reads decides
            status, reason = self._reads(scan, raw, r, 0)
            if kind == "decision":
                return ("routed", f"{reason} (in {body})") if status == "routed" else (
                    "unrouted", f"SGLang decides by itself: {reason} (in {body})")
            return ("probe" if status == "probe" else "routed" if status == "routed" else "device"), (
                f"{reason} (in {body})")
        status, reason = self.source(scan, raw, r)
        if status == "routed":
            return status, reason
        if kind == "decision":
            return "unrouted", f"SGLang decides by itself: {reason}"
        return ("probe" if status == "probe" else "device"), reason

    def source(self, scan: FileScan, raw: RawSite, r: Routing, depth: int = 0) -> Tuple[str, str]:
        """routed / probe / unrouted: where the site's capability values come from."""
        key = (r.name, scan.file, raw.line)
        if key not in self._memo:
            self._memo[key] = ("unrouted", "cycle")  # guards recursion through flags
            self._memo[key] = self._routing_status(scan, raw, r, depth)
        return self._memo[key]

    def _routing_status(self, scan: FileScan, raw: RawSite, r: Routing, depth: int) -> Tuple[str, str]:
        covered = r.covered(scan.module, raw.scope, raw.assigned, raw.code)
        if covered is not None:
            return "routed", covered
        fn = r.function_for(scan.module, raw.scope, raw.assigned)
        if fn is not None:
            return "routed", r.functions[fn]
        if raw.cls is not None:
            init = f"{scan.module}.{raw.cls}.__init__"
            self_state = all(e.kind == "read" and e.name.startswith("self.") for e in raw.exprs)
            if init in r.functions and (not raw.function or self_state):
                return "routed", f"state of {raw.cls} set by the routed {raw.cls}.__init__ ({r.functions[init]})"
        tables = [e for e in raw.exprs if e.kind == "table"]
        if tables and all(n in r.uses for e in tables for n in e.name.split(",")):
            target = r.uses[tables[0].name.split(",")[0]]
            return "routed", f"{tables[0].name} is read by the glue of the routed {target}"
        return self._reads(scan, raw, r, depth)

    def _in_running_body(self, scan: FileScan, raw: RawSite, r: Routing, kind: str) -> Optional[str]:
        """Where a site sits in a routed function whose body still runs and reads none of the
        names its hook or edit answers: that function, said so; else None.  A decision there
        counts only where something is answered inside the body: a hook or guard that answers
        nothing there (``check``) declares the function's decision before its body runs."""
        fn = r.function_for(scan.module, raw.scope, raw.assigned)
        if fn is None or fn not in r.answers or r.covered(scan.module, raw.scope, raw.assigned, raw.code):
            return None
        answered = r.answers[fn]
        plan = r.by_lines.get(fn)
        if kind == "decision" and not answered and plan is None:
            return None
        if plan is not None:
            lines = self._changed_lines(scan, plan)  # None: the edits do not apply to this tree
            if lines is not None and raw.line in lines:
                return None
        if any(answered_name(e.name) in answered for e in raw.exprs):
            return None
        said = ", ".join(sorted(answered)) or "nothing inside it"
        return f"{fn.rsplit('.', 1)[-1]}, whose body still runs: {r.name} answers {said}"

    def _changed_lines(self, scan: FileScan, plan) -> Optional[Set[int]]:
        key = (scan.file, id(plan))
        if key not in self._changed:
            self._changed[key] = changed_lines("\n".join(scan.lines) + "\n", plan)
        return self._changed[key]

    def _reads(self, scan: FileScan, raw: RawSite, r: Routing, depth: int) -> Tuple[str, str]:
        """routed / probe / unrouted from what the site reads alone."""
        first_probe = None
        statuses = set()
        for e in raw.exprs:
            st, reason = self._expr(scan, raw, e, r, depth)
            if st == "unrouted":
                return st, reason
            statuses.add(st)
            first_probe = first_probe or reason
        # Only flags the registry binds (their assignment is routed): the registry's decision.
        return ("routed" if statuses == {"routed"} else "probe"), first_probe or ""

    def _timing(self, raw: RawSite, r: Routing, what: str) -> Tuple[str, str]:
        if not raw.function and not r.import_time_probes:
            return "unrouted", f"{what} is evaluated at import, before the plugin's probes are in place"
        when = "at import (probes routed before import)" if not raw.function else "at call time"
        return "probe", f"{what} is routed {when}"

    def _expr(self, scan: FileScan, raw: RawSite, e: Expr, r: Routing, depth: int) -> Tuple[str, str]:
        if e.kind == "read":
            return "unrouted", f"reads the device ({e.name})"
        if e.kind == "probe":
            mod = e.module or ""
            if e.name in r.helpers and (mod in r.helper_modules or mod.rsplit(".", 1)[0] in r.helper_modules
                                        and mod.endswith("." + e.name)):
                return self._timing(raw, r, f"{e.name}()")
            if e.name in r.helpers and mod == scan.module and scan.module in r.helper_modules:
                return self._timing(raw, r, f"{e.name}()")
            where = "defined here" if mod == scan.module else f"from {mod}"
            return "unrouted", f"{e.name}() ({where}) is not a routed probe"
        if e.kind == "platform":
            helper = self.facts.get(e.name)
            if helper is not None and helper in r.helpers:
                return self._timing(raw, r, f"platform fact {e.name} ({helper})")
            return "unrouted", f"platform fact {e.name} does not read a routed probe"
        if e.kind == "table":
            return "unrouted", f"capability-keyed table {e.name}"
        if e.kind == "window":
            return "unrouted", f"capability window {e.name}"
        if e.kind == "compare":
            return "unrouted", f"compares {e.name}, not traced to a routed probe"
        if e.kind == "flag":
            other = self.by_module.get(e.module or "")
            line = other.flags.get(e.name) if other else None
            site = other.sites.get(line) if other and line else None
            if site is None or depth > 8:
                return "unrouted", f"uses {e.name}, cached at import (not traced)"
            st, reason = self.source(other, site, r, depth + 1)
            here = "" if other is scan else f" in {other.file}"
            if st == "unrouted":
                return "unrouted", f"uses {e.name}{here}, cached at import: {reason}"
            bound = f"{other.module}.{e.name}" in r.values and other is scan
            if st == "routed" and bound:
                return "routed", f"uses {e.name}{here}, bound at import by the registry: {reason}"
            return "probe", f"uses {e.name}{here}, cached at import: {reason}"
        return "unrouted", f"{e.kind} {e.name}"
