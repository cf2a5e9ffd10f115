"""The SGLang plugin: routes SGLang's per-GPU decisions through the registry.

Registered in SGLang's own entry-point group ``sglang.srt.plugins``, so SGLang's
``load_plugins()`` runs :func:`register` in the launcher and in every scheduler,
detokenizer and data-parallel process it spawns.  ``SGLANG_PLUGINS`` (SGLang's
allow-list, read as SGLang reads it: ``_sglang_arch_early.allowed_by_sglang``) or
``SGLANG_ARCH_DISABLE=1`` keep it out; ``SGLANG_ARCH_DISABLE=fusion,symm_mem`` leaves
those decisions to SGLang (``switches.py``).  Both are read again here, so a value set
after the early router ran (in-process, before SGLang loads its plugins) still holds:
hooks applied already are taken off.

A target is routed only where SGLang's code is the code its hook was written for
(``fingerprint.py``); the others keep SGLang's code, counted in one warning.
"""

from __future__ import annotations

import logging
import sys
from typing import Dict, List, Tuple

logger = logging.getLogger("sglang_arch")

_state: Dict[str, object] = {"registered": False, "routed": [], "kept": [], "off": frozenset(), "line": None}


def register() -> None:
    """Entry point.  Never raises: any problem leaves SGLang's own behaviour in place."""
    try:
        _register()
    except Exception as exc:  # the plugin must never be the reason a server fails to start
        logger.warning("sglang-arch: plugin not active, SGLang decides on its own (%s: %s)", type(exc).__name__, exc)
        try:
            _take_off_every_hook()
        except Exception:  # pragma: no cover - nothing more can be done safely
            pass


def routed_concerns() -> List[str]:
    return list(_state["routed"])  # type: ignore[arg-type]


def kept_targets() -> List[Tuple[str, str]]:
    """(target, why SGLang's code stays) for each hook left to SGLang in this process."""
    return list(_state["kept"])  # type: ignore[arg-type]


def _take_off_every_hook() -> None:
    """SGLang's own code back wherever the early router applied a hook (the plugin is off)."""
    if "sglang_arch.integrations.sglang.routing" not in sys.modules:
        return
    from . import routing

    for target in routing.all_routed_targets():
        routing.unroute(target)


def _register() -> None:
    from . import switches

    _ensure_visible_logging()
    bad = switches.problem()
    if bad:
        # Someone reached for the switch: a value that cannot be read keeps the plugin out (the
        # safe side, SGLang's own behaviour), said in one line.
        _take_off_every_hook()
        logger.warning("sglang-arch: plugin not active, SGLang decides on its own (%s)", bad)
        return
    off = switches.off()
    if off >= switches.ALL:
        _take_off_every_hook()
        logger.info("sglang-arch: disabled by %s", switches.VARIABLE)
        return
    import _sglang_arch_early as _early

    if not _early.allowed_by_sglang():
        # SGLang's loader never calls this then; a direct call agrees with it (and with the
        # early router, which routes nothing then).
        _take_off_every_hook()
        logger.info("sglang-arch: not in SGLANG_PLUGINS, SGLang decides on its own")
        return
    if _state["registered"]:
        return
    from importlib.metadata import version

    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from ...arch.runtime import current
    from . import routing, startup
    from .fingerprint import supported
    from .targets import TESTED_SGLANG_VERSIONS, check_target

    ctx = current()  # validates SGLANG_ARCH_* before anything is patched
    sglang_version = version("sglang")
    if sglang_version not in TESTED_SGLANG_VERSIONS:
        logger.warning("sglang-arch: written for %s, found sglang %s; a hook routes only where SGLang's code is "
                       "the code it was written for", supported(), sglang_version)
    routed: List[str] = []
    kept: List[Tuple[str, str]] = []
    applied: List[str] = []
    late = 0
    on_import = _early.installed() and not _early.error()
    targets = routing.all_routed_targets()
    for target in targets:
        if switches.decision_of(target.concern) in off:
            routing.unroute(target)
            continue
        late_value = routing.late_value_problem(target)
        if late_value:
            kept.append((target.path, late_value))
            continue
        if on_import and target.module not in sys.modules:
            # Not imported yet: the early finder routes it (or keeps SGLang's) when it is, so
            # start-up imports nothing SGLang would not import itself; its body is compared now,
            # from its file, so that the count below is the whole count.
            problem = routing.predicted_problem(target)
            if problem:
                kept.append((target.path, problem))
            elif target.concern not in routed:
                routed.append(target.concern)
            continue
        problem = routing.early_state()["problems"].get(target.path) or check_target(target)
        if problem:
            routing.unroute(target)
            kept.append((target.path, problem))
            continue
        if not routing.is_routed(target):
            if target.provider or target.value is not None:
                # SGLang's registry holds the function, or a module value (no function to
                # hook): rebound where it is routed
                routing.route(target)
            else:
                HookRegistry.register(target.path, target.hook, HookType.AROUND)
            late += 1
        applied.append(target.path)
        if target.concern not in routed:
            routed.append(target.concern)
    routing.announce(path for path, _ in kept)
    _state.update(registered=True, routed=routed, kept=kept, off=off)
    if kept:
        logger.warning("sglang-arch: %d of %d hooks keep SGLang's own code (it is not the code they were written "
                       "for, %s); `sglang-arch show` lists them", len(kept), len(targets), supported())
    for path, problem in kept:
        logger.debug("sglang-arch: left to SGLang: %s", problem)
    if _early.error():
        logger.warning("sglang-arch: early routing failed (%s); hooks applied when plugins load", _early.error())
    how = "early" if late == 0 else (f"{late} late" if not _early.installed() else f"early, {late} late")
    node = ctx.node
    if node.gpus:
        try:
            launch = startup.this_launch()
        except Exception:  # the line only reports: the node's GPU count stands in, nothing else changes
            launch = None
        if launch is not None:  # the decisions at this launch's TP size, not the node's GPU count
            from ...arch.decisions import decide
            from ...arch.policies.attention import ModelTraits

            d = decide(ctx.resolution, ctx.topology, launch.tp, launch.nnodes, ModelTraits(cuda=ctx.cuda))
        else:
            d = ctx.decisions()
        text = startup.line(startup.machine_words(node, ctx.topology.name), d, off, len(kept), launch)
    else:
        text = f"sglang-arch: no NVIDIA GPU ({node.source}), SGLang decides"
    _state.update(line=text, applied=how)
    logger.log(logging.INFO if startup.is_rank_zero() else logging.DEBUG, "%s", text)
    logger.debug("sglang-arch: %s; routed: %s (hooks applied %s)", _describe(ctx), ", ".join(routed) or "nothing",
                 how)


def _describe(ctx) -> str:
    node = ctx.node
    if not node.gpus:
        return f"no NVIDIA GPU ({node.source}), SGLang decides"
    names = sorted({g.name for g in node.gpus})
    caps = ", ".join(sorted({f"sm_{c.sm}" for c in node.capabilities}))
    res = ctx.resolution
    return (f"{len(node.gpus)}x {' + '.join(names)} ({caps}) -> tier {res.resolved} [{res.match}], "
            f"topology {node.topology.name} ({node.source})")


def _ensure_visible_logging() -> None:
    """SGLang sets up INFO logging only after plugins load; the start-up line must show anyway."""
    if logger.handlers or logger.getEffectiveLevel() <= logging.INFO:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
