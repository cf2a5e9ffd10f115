"""``sglang-arch audit SRC``: every capability-dependent site of an SGLang tree.

``audit(src)`` finds the package root, scans ``srt/`` and ``kernels/`` (``scan.py``),
gives each site its concern (``classify.py``) and its status for the plugin and for the
patched tree (``routing.py``, derived from the plugin's targets and the series' steps),
and returns a ``Report`` (``report.py`` renders it).

Status of a site, per routing:

``routed``    inside a function the routing hooks or guards (or a module-level name it
              defines, a table its glue reads, or state its routed ``__init__`` sets)
``probe``     every capability value on the line comes from a platform probe (identity) at the time
              it is evaluated (a probe call, a ``get_platform()`` fact that reads one, or a
              value cached at import from them, when probes are routed before import)
``device``    otherwise unrouted, but inside a kernel gate (``gates.py``): a check that picks
              the compiled kernel the device can run, identity by the fallback rule
``unrouted``  anything else: a direct read, an unrouted helper, a capability table or
              window, a comparison of a value not traced to a routed probe
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

from . import classify, gates, routing
from .routing import EXTRA_ROUTED, Routed, Routing, patched_routing, plugin_routing  # noqa: F401
from .scan import KIND_ORDER, Expr, FileScan, RawSite, scan_tree

STATUSES = ("routed", "probe", "device", "unrouted")


class AuditError(ValueError):
    """SRC is not an SGLang tree (one line)."""


@dataclass
class Site:
    file: str
    line: int
    code: str
    kind: str
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
class Report:
    sglang: str
    root: str
    sites: List[Site]
    files_read: int
    seconds: float
    early_routing: bool = True
    summary: Dict[str, Dict[str, Dict[str, int]]] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, object]:
        return {"sglang": self.sglang, "early_routing": self.early_routing,
                "sites": [s.to_dict() for s in self.sites], "summary": self.summary}


def find_root(src: str) -> str:
    """The sglang package directory of SRC: SRC itself, SRC/sglang, or SRC/python/sglang."""
    for cand in (src, os.path.join(src, "sglang"), os.path.join(src, "python", "sglang")):
        if os.path.isdir(os.path.join(cand, "srt")) and os.path.isfile(os.path.join(cand, "__init__.py")):
            return os.path.abspath(cand)
    if not os.path.exists(src):
        raise AuditError(f"{src}: no such directory; expected an sglang package dir, a dir containing "
                         "sglang/, or an SGLang git clone (python/sglang)")
    raise AuditError(f"{src}: not an SGLang tree (no sglang/srt in it, in sglang/ or in python/sglang/)")


def tree_version(root: str) -> str:
    for name in ("_version.py", "version.py"):
        path = os.path.join(root, name)
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                m = re.search(r"""^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", fh.read(), re.MULTILINE)
            if m:
                return m.group(1)
    return "unknown"


def audit(src: str, *, early_routing: bool = True, extra: Sequence[Routed] = (), targets=None, steps=None,
          prefilter: bool = True) -> Report:
    """Scan SRC and classify every site.

    ``early_routing``: the plugin's probes answer before SGLang's modules are imported
    (the plugin's early import hook); when False, values a module computes at import
    from a probe count as ``unrouted`` for the plugin.  ``extra``: more functions routed
    on purpose (``Routed``), added to ``EXTRA_ROUTED``.  ``targets`` / ``steps``: the
    plugin's targets and the series' steps (default: the installed sglang-arch's)."""
    started = time.perf_counter()
    root = find_root(src)
    scans, files_read = scan_tree(root, prefilter=prefilter)
    plugin = plugin_routing(targets, extra, early_routing)
    patched = patched_routing(steps, extra)
    facts = routing.platform_facts(root)
    resolver = _Resolver(scans, facts)
    sites = []
    for scan in scans:
        for line in sorted(scan.sites):
            raw = scan.sites[line]
            if not raw.exprs:
                continue
            p_status, p_reason = resolver.status(scan, raw, plugin)
            s_status, s_reason = resolver.status(scan, raw, patched)
            kinds = ["cached_flag"] if raw.cached_flag else []
            kinds += [e.kind for e in raw.exprs]
            kind = min(kinds, key=lambda k: KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER))
            sites.append(Site(raw.file, raw.line, raw.code, kind, classify.concern_for(raw.file, raw.scope, raw.code),
                              classify.evaluated(raw.scope if raw.function else None), raw.scope,
                              p_status, p_reason, s_status, s_reason))
    report = Report(tree_version(root), root, sites, files_read, time.perf_counter() - started, early_routing)
    report.summary = summarize(sites)
    return report


def summarize(sites: Sequence[Site]) -> Dict[str, Dict[str, Dict[str, int]]]:
    """{concern: {"total": n, "plugin": {status: n}, "patched": {status: n},
    "routed"/"probe"/"device"/"unrouted": the plugin's counts}}, concerns in CONCERNS order, plus "total"."""
    out: Dict[str, Dict] = {}
    for concern in classify.CONCERNS + ("total",):
        chosen = [s for s in sites if concern == "total" or s.concern == concern]
        if not chosen:
            continue
        entry: Dict = {"total": len(chosen)}
        for st in STATUSES:
            entry[st] = sum(s.plugin == st for s in chosen)
        entry["plugin"] = {st: entry[st] for st in STATUSES}
        entry["patched"] = {st: sum(s.patched == st for s in chosen) for st in STATUSES}
        out[concern] = entry
    return out


class _Resolver:
    def __init__(self, scans: List[FileScan], facts: Dict[str, str]) -> None:
        self.by_module = {s.module: s for s in scans}
        self.facts = facts
        self._memo: Dict[Tuple[str, str, int], Tuple[str, str]] = {}

    def status(self, scan: FileScan, raw: RawSite, r: Routing, depth: int = 0) -> Tuple[str, str]:
        key = (r.name, scan.file, raw.line)
        if key not in self._memo:
            self._memo[key] = ("unrouted", "cycle")  # guards recursion through flags
            self._memo[key] = self._status(scan, raw, r, depth)
        return self._memo[key]

    def _status(self, scan: FileScan, raw: RawSite, r: Routing, depth: int) -> Tuple[str, str]:
        status, reason = self._routing_status(scan, raw, r, depth)
        gate = gates.gate_for(scan.module, raw.scope) if status == "unrouted" else None
        if gate is not None:
            return "device", f"kernel gate ({gate.kernels}): the device's own capability; {reason}"
        return status, reason

    def _routing_status(self, scan: FileScan, raw: RawSite, r: Routing, depth: int) -> Tuple[str, str]:
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
        first_probe = None
        for e in raw.exprs:
            st, reason = self._expr(scan, raw, e, r, depth)
            if st == "unrouted":
                return st, reason
            if st == "routed":
                st = "probe"
            first_probe = first_probe or reason
        return "probe", first_probe or ""

    def _timing(self, raw: RawSite, r: Routing, what: str) -> Tuple[str, str]:
        if not raw.function and not r.import_time_probes:
            return "unrouted", f"{what} is evaluated at import, before the plugin's probes are in place"
        when = "at import (probes routed before import)" if not raw.function else "at call time"
        return "probe", f"{what} is routed {when}"

    def _expr(self, scan: FileScan, raw: RawSite, e: Expr, r: Routing, depth: int) -> Tuple[str, str]:
        if e.kind == "read":
            return "unrouted", f"reads the real capability ({e.name})"
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
            st, reason = self.status(other, site, r, depth + 1)
            here = "" if other is scan else f" in {other.file}"
            if st == "unrouted":
                return "unrouted", f"uses {e.name}{here}, cached at import: {reason}"
            return "probe", f"uses {e.name}{here}, cached at import: {reason}"
        return "unrouted", f"{e.kind} {e.name}"
