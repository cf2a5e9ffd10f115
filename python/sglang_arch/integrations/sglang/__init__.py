"""The SGLang plugin: routes SGLang's per-GPU decisions through the registry.

Registered in SGLang's own entry-point group ``sglang.srt.plugins``, so SGLang's
``load_plugins()`` runs :func:`register` in the launcher and in every scheduler,
detokenizer and data-parallel process it spawns.  ``SGLANG_PLUGINS`` (SGLang's
allow-list, read as SGLang reads it: ``_sglang_arch_early.allowed_by_sglang``) or
``SGLANG_ARCH_DISABLE=1`` keep it out.
"""

from __future__ import annotations

import logging
import sys
from typing import List

logger = logging.getLogger("sglang_arch")

_state = {"registered": False, "routed": []}


def register() -> None:
    """Entry point.  Never raises: any problem leaves SGLang's own behaviour in place."""
    try:
        _register()
    except Exception as exc:  # the plugin must never be the reason a server fails to start
        logger.warning("sglang-arch: plugin not active, SGLang decides on its own (%s: %s)", type(exc).__name__, exc)


def routed_concerns() -> List[str]:
    return list(_state["routed"])


def _register() -> None:
    from ...arch.validate import env_bool
    from .hooks import KILL_SWITCH

    _ensure_visible_logging()
    try:
        disabled = env_bool(KILL_SWITCH)
    except ValueError as exc:
        # Someone reached for the kill switch: an unreadable value keeps the plugin out (the
        # safe side, SGLang's own behaviour), said in one line.
        logger.warning("sglang-arch: plugin not active, SGLang decides on its own (%s; read as disabled)", exc)
        return
    if disabled:
        logger.info("sglang-arch: disabled by %s", KILL_SWITCH)
        return
    import _sglang_arch_early as _early

    if not _early.allowed_by_sglang():
        # SGLang's loader never calls this then; a direct call agrees with it (and with the
        # early router, which routed nothing).
        logger.info("sglang-arch: not in SGLANG_PLUGINS, SGLang decides on its own")
        return
    if _state["registered"]:
        return
    from importlib.metadata import version

    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    from ...arch.runtime import current
    from . import routing
    from .targets import TESTED_SGLANG_VERSIONS, check_target

    ctx = current()  # validates SGLANG_ARCH_* before anything is patched
    sglang_version = version("sglang")
    if sglang_version not in TESTED_SGLANG_VERSIONS:
        logger.warning("sglang-arch: tested with sglang %s, found %s; each hook is checked before use",
                       ", ".join(TESTED_SGLANG_VERSIONS), sglang_version)
    routed: List[str] = []
    skipped: List[str] = []
    late = 0
    on_import = _early.installed() and not _early.error()
    for target in routing.all_routed_targets():
        late_value = routing.late_value_problem(target)
        if late_value:
            skipped.append(late_value)
            continue
        if on_import and target.module not in sys.modules:
            # Not imported yet: the early finder routes it (or reports it) when it is, so
            # start-up imports nothing SGLang would not import itself.
            if target.concern not in routed:
                routed.append(target.concern)
            continue
        problem = routing.early_state()["problems"].get(target.path) or check_target(target)
        if problem:
            routing.unroute(target)
            if target.path not in routing.early_state()["problems"]:
                skipped.append(problem)
            continue
        if not routing.is_routed(target):
            if target.provider or target.value is not None:
                # SGLang's registry holds the function, or a module value (no function to
                # hook): rebound where it is routed
                routing.route(target)
            else:
                HookRegistry.register(target.path, target.hook, HookType.AROUND)
            late += 1
        if target.concern not in routed:
            routed.append(target.concern)
    _state["registered"] = True
    _state["routed"] = routed
    for problem in skipped:
        logger.warning("sglang-arch: left to SGLang: %s", problem)
    if _early.error():
        logger.warning("sglang-arch: early routing failed (%s); hooks applied when plugins load", _early.error())
    how = "early" if late == 0 else (f"{late} late" if not _early.installed() else f"early, {late} late")
    logger.info("sglang-arch: %s; routed: %s (hooks applied %s)", _describe(ctx), ", ".join(routed) or "nothing", how)


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
