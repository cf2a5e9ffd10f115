"""Glue between SGLang's call sites and the GPU architecture registry.

The sglang-arch plugin's hooks (``integrations/sglang/hooks.py``) ask one function
of this package before running SGLang's code and get either the registry's answer
or ``None``.  ``None`` means "SGLang's own code decides": that is the answer
without an NVIDIA GPU (no resolution), off CUDA, and, logged once, when the glue itself
fails unexpectedly, so routing is never the reason a server fails.
``ArchDecisionError`` is the one error raised on purpose: a user choice the registry
knows cannot run on this GPU.

These modules import nothing from sglang-arch but the registry (``....arch``) and each
other, and SGLang or torch only inside functions or through ``sys.modules``: the plugin
imports them before SGLang is loaded, and its hooks run while SGLang's own modules still
load.  ``test_glue.py`` checks the imports.
"""

from __future__ import annotations

import functools
import logging
import sys
import types
from typing import Any, Callable, Dict, Optional, Set, Tuple, TypeVar

from ....arch.capability import Capability
from ....arch import runtime as _runtime
from ....arch.runtime import MachineContext, current, described

logger = logging.getLogger(__name__)

# The registry this glue asks, as messages name it.
REGISTRY = current.__module__.rpartition(".")[0]

F = TypeVar("F", bound=Callable[..., Any])


class ArchDecisionError(ValueError):
    """A user choice the registry knows cannot run here; raised on purpose."""


def routed_context() -> Optional[MachineContext]:
    """The machine the registry decides for; ``None`` when SGLang should.

    Inside SGLang the machine is what SGLang's platform context says it is: this
    process's device (``current()``), unless an ``override_platform`` scope describes
    another GPU (SGLang's unit tests simulate GPUs this way), in which case it is the
    described one (``platform_capability``), so SGLang's own decisions and the
    registry's answer for the same machine.
    """
    ctx = current()
    overrides = platform_overrides()
    if overrides:
        ctx = _described_context(ctx, overrides)
    return None if ctx.resolution is None else ctx


def device_context() -> Optional[MachineContext]:
    """This process's device alone, whatever SGLang's platform context says; ``None``
    without an NVIDIA GPU.  For the platform probes themselves (identity) and the
    runtime gates SGLang computes at import time, which no override reaches either."""
    ctx = current()
    return None if ctx.resolution is None else ctx


_RUNTIME_CONTEXT = "sglang.srt.runtime_context"

# The platform facts that name a GPU's major (SGLang's ``is_sm*`` probes), and those
# that say the device is not an NVIDIA GPU at all.
MAJOR_FACTS: Dict[str, int] = {
    "is_sm90": 9,
    "is_sm100": 10,
    "is_sm110": 11,
    "is_sm120": 12,
}
NOT_NVIDIA: Dict[str, bool] = {
    "is_cuda": False,
    "is_hip": True,
    "is_npu": True,
    "is_xpu": True,
    "is_musa": True,
    "is_mps": True,
}


def platform_overrides() -> Dict[str, Any]:
    """The facts SGLang's platform context answers from ``override_platform`` scopes
    now (empty outside them, and before SGLang's ``runtime_context`` is loaded).

    Read from the context's override table, so no probe runs (a probe may create a
    CUDA context, and through the plugin it is routed back here).
    """
    module = sys.modules.get(_RUNTIME_CONTEXT)
    if module is None:
        return {}
    try:
        table = object.__getattribute__(module.get_platform(), "_overrides")
    except AttributeError:  # an SGLang without override_platform
        return {}
    return dict(table) if table else {}


def platform_capability(
    device: MachineContext, overrides: Dict[str, Any]
) -> Tuple[bool, Optional[str]]:
    """The GPU SGLang's platform context describes, given the device's own facts and
    the overridden ones: ``(changed, capability)``, ``capability`` None for no NVIDIA
    GPU (or none the facts identify).

    1. a fact saying the device is not NVIDIA (``is_cuda=False``, ``is_hip=True``,
       ...): no NVIDIA GPU;
    2. ``is_sm*`` facts set true name a major (two different majors: none identified);
       the capability is the device's own, or the overridden ``device_capability``,
       where either has that major, else the major's first tier ``M.0``;
    3. else an overridden ``device_capability`` (or ``device_sm``) names it exactly;
    4. else, where an override turned the device's own ``is_sm*`` fact false, the
       facts identify no GPU;
    5. else nothing that names a GPU changed: the device itself (``changed`` false,
       as when the described GPU is the device's own capability).
    """
    own = device.resolution.requested if device.resolution is not None else None
    capability = _described_capability(own, overrides)
    if capability == "unchanged" or (own is not None and capability == str(own)):
        return False, None
    return True, capability


def _described_capability(own: Optional[Capability], overrides: Dict[str, Any]) -> Any:
    if any(overrides.get(name, not bad) == bad for name, bad in NOT_NVIDIA.items()):
        return None
    exact = _overridden_capability(overrides)
    majors = {m for name, m in MAJOR_FACTS.items() if overrides.get(name) is True}
    if len(majors) > 1:
        return None
    if majors:
        (major,) = majors
        for candidate in (own, exact):
            if candidate is not None and candidate.major == major:
                return str(candidate)
        return f"{major}.0"
    if exact is not None:
        return str(exact)
    if own is not None:
        own_fact = next((n for n, m in MAJOR_FACTS.items() if m == own.major), None)
        if own_fact is not None and overrides.get(own_fact, True) is False:
            return None
    return "unchanged"


def _overridden_capability(overrides: Dict[str, Any]) -> Optional[Capability]:
    """An overridden ``device_capability`` ``(major, minor)`` or ``device_sm``; None
    where neither is overridden with a capability (SGLang's no-GPU ``(None, None)``)."""
    value = overrides.get("device_capability")
    sm = overrides.get("device_sm")
    if isinstance(value, tuple) and len(value) == 2:
        parts = value
    elif isinstance(sm, int) and not isinstance(sm, bool) and sm > 0:
        parts = divmod(sm, 10)
    else:
        return None
    try:
        return Capability(*parts)
    except ValueError:  # not a capability (None parts, out of range)
        return None


# (device, described capability) -> the described machine, built once per capability.
_described: Dict[Optional[str], Tuple[MachineContext, MachineContext]] = {}


def _described_context(
    device: MachineContext, overrides: Dict[str, Any]
) -> MachineContext:
    changed, capability = platform_capability(device, overrides)
    if not changed:
        return device
    cached = _described.get(capability)
    if cached is None or cached[0] is not device:
        cached = _described[capability] = (device, described(device, capability))
    return cached[1]


_warned: Set[str] = set()


def per_machine(cache: Dict[Any, Tuple[Any, Any]], ctx: Any, key: Any, decide: Callable[[], Any]) -> Any:
    """An answer asked per call (a layer, a batch) and decided once per machine: ``cache``
    maps ``key`` to (the machine context it was decided for, the answer).  A context
    other than that one (after ``runtime.reset()``, even one that reuses the old object's
    id) is decided again."""
    entry = cache.get(key)
    if entry is None or entry[0] is not ctx:
        entry = cache[key] = (ctx, decide())
    return entry[1]


def fail_open(fn: F) -> F:
    """Answer ``None`` (SGLang decides) when ``fn`` fails unexpectedly; warn once.

    The guarded function keeps ``fn`` as ``__fail_open__``: the plugin's hooks, which run
    on SGLang's per-call paths, call ``fn`` inside their own ``try`` with :func:`failed` as
    the handler (the same answer, one Python call fewer per call)."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ArchDecisionError:
            raise
        except Exception as exc:  # routing must never break the server
            return failed(fn, exc)

    guarded.__fail_open__ = fn  # type: ignore[attr-defined]
    return guarded  # type: ignore[return-value]


def failed(fn: Callable, exc: BaseException) -> None:
    """What a fail-open glue function answers when it failed unexpectedly: ``None`` (SGLang's
    own code decides), warned once per function."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    if name not in _warned:
        _warned.add(name)
        logger.warning("%s failed (%s: %s); SGLang's own code decides", name, type(exc).__name__, exc)
    return None


# --- what was decided once per process, decided again when the machine changes ---

# What a target's ``specialize`` answers where its hook must stay (``routing.settle``).
KEEP = object()


class Constants(dict):
    """What a glue ``specialize`` answers for "SGLang's function with these module globals
    read as constants" (name -> value); the hooks build that function (``specialize.py``)."""


class Answers:
    """What a glue ``specialize`` answers for "a function with SGLang's parameters that
    answers ``value``": where SGLang's own function, on every input, answers that in this
    process (``specialize.py`` builds it)."""

    def __init__(self, value: Any) -> None:
        self.value = value


_on_change: list = []  # callables run when the machine the glue answers for may have changed


def on_machine_change(callback: Callable[[], None]) -> None:
    """Run ``callback`` whenever the machine may have changed: ``runtime.reset()``, a new
    ``current`` bound in this package (tests simulate machines so), or :func:`machine_changed`.
    The routing undoes there what it bound once the glue had answered (``routing.settle``)."""
    if callback not in _on_change:
        _on_change.append(callback)


def machine_changed() -> None:
    """Something a settled answer was decided from changed (the machine, or a communicator
    without multicast was made): every settled target decides again on its next call."""
    for callback in list(_on_change):
        callback()


_runtime.on_reset(machine_changed)


class _GlueModule(types.ModuleType):
    """This package as a module whose ``current`` rebound (a test's simulated machine, the
    benchmark's) counts as :func:`machine_changed`; reads are plain module reads."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "current":
            machine_changed()

    def __delattr__(self, name: str) -> None:
        super().__delattr__(name)
        if name == "current":
            machine_changed()


sys.modules[__name__].__class__ = _GlueModule
