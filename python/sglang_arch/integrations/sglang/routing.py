"""Applying the plugin's targets: early (as each module loads) or late (SGLang's hooks).

Early: ``_sglang_arch_early``'s finder calls :func:`module_loaded` right after a module
that holds targets has run its own code, before any other module imports from it, so a
routed function is the only version anybody sees, and module-level values computed
later from it see the registry.  Late: the entry point (``register``) hands whatever is
not routed yet to SGLang's ``HookRegistry`` (its AROUND hooks, which also replace the
names other modules imported), as without the early finder.

Both apply the same hook with the same guard: a target is routed only when it still has
the shape and the body it was written against (``targets.check_target``); otherwise
SGLang's own function stays, and the entry point counts it in its one warning.  Both read
``SGLANG_ARCH_DISABLE`` and ``SGLANG_PLUGINS`` when they run: a decision turned off is
never routed, whenever it was turned off before its module loaded.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from . import glue, switches
from .specialize import KEEP, copy_function
from .targets import ROUTED_MARK, Target, all_targets, check_target, file_problem, forget_files

logger = logging.getLogger("sglang_arch")

_problems: Dict[str, str] = {}  # target path -> why it was left to SGLang (early)
_early_routed: Set[str] = set()
_values: Dict[str, Tuple[Any, Any]] = {}  # value target path -> (SGLang's value, the value bound)
_announced: Dict[str, Any] = {"paths": None}  # targets the entry point's warning counted (None: before it)


@functools.lru_cache(maxsize=1)
def _targets() -> List[Target]:
    return all_targets()


def all_routed_targets() -> List[Target]:
    """Every target, built once per process (the hooks are the same objects everywhere)."""
    return list(_targets())


def target_modules() -> Set[str]:
    """The modules that hold targets (what the early finder watches)."""
    return {t.module for t in _targets()}


def module_loaded(module: Any, imported_meanwhile: Iterable[str] = ()) -> None:
    """Route every target of ``module``; called once its own code has run.

    ``imported_meanwhile``: modules first imported while ``module`` ran (circular
    imports); a name they bound to a target's original is replaced as well.
    """
    name = getattr(module, "__name__", None)
    off = off_now()
    if off >= switches.ALL:
        return
    replaced: Dict[int, Any] = {}  # id(original) -> routed, for one pass over the modules
    for target in _targets():
        if target.module != name or switches.decision_of(target.concern) in off:
            continue
        problem = check_target(target, early=True)
        if problem:
            _problems[target.path] = problem
            counted = _announced["paths"]
            # Before the entry point ran, its one warning counts it; after, one not counted there
            # (its file read differently from its module) is said on its own.
            logger.log(logging.WARNING if counted is not None and target.path not in counted else logging.DEBUG,
                       "sglang-arch: left to SGLang: %s", problem)
            continue
        original = current_function(target)
        if route(target):
            _early_routed.add(target.path)
            if target.value is None:  # a value is read by its module alone (a Triton global)
                replaced[id(original)] = current_function(target)
    if replaced:
        _rebind(replaced, imported_meanwhile)


def off_now() -> frozenset:
    """The decisions left to SGLang now: every one where the plugin is out (``SGLANG_PLUGINS``
    without it, ``SGLANG_ARCH_DISABLE=1`` or a value that cannot be read), else those named."""
    import _sglang_arch_early as _early

    return switches.ALL if not _early.allowed_by_sglang() else switches.off()


def predicted_problem(target: Target) -> Optional[str]:
    """For a target whose module is not imported yet: why it will keep SGLang's code when it is,
    read from its file (the early finder checks it again on import)."""
    return file_problem(target)


def announce(paths: Iterable[str]) -> None:
    """The targets the entry point's warning counted; the module files it read are dropped."""
    _announced["paths"] = set(paths)
    forget_files()


def _rebind(replaced: Dict[int, Any], module_names: Iterable[str]) -> None:
    """Every name bound to an original in ``module_names`` now holds its routed function."""
    for module_name in module_names:
        namespace = getattr(sys.modules.get(module_name), "__dict__", None) or {}
        for attr, value in list(namespace.items()):
            routed = replaced.get(id(value))
            if routed is not None and routed is not value:
                namespace[attr] = routed


def _owner_and_attr(target: Target) -> tuple:
    owner: Any = sys.modules[target.module]
    parts = target.attr.split(".")
    for part in parts[:-1]:
        owner = getattr(owner, part)
    return owner, parts[-1]


def current_function(target: Target) -> Optional[Callable]:
    """The function the target's name holds now (None: module not imported)."""
    if target.module not in sys.modules:
        return None
    try:
        owner, attr = _owner_and_attr(target)
    except AttributeError:
        return None
    return getattr(owner, attr, None)


def is_routed(target: Target) -> bool:
    if target.value is not None:
        bound = _values.get(target.path)
        return bound is not None and target.module in sys.modules and current_function(target) is bound[1]
    return getattr(current_function(target), ROUTED_MARK, None) == target.path


def route(target: Target) -> bool:
    """Replace the target with its AROUND hook over the original (idempotent)."""
    if is_routed(target):
        return False
    owner, attr = _owner_and_attr(target)
    if target.value is not None:
        _bind_value(target, owner, attr)
        return True
    # A class method is hooked over its function and stays one (the class it is called on,
    # a subclass too, is its first argument).
    class_method = isinstance(inspect.getattr_static(owner, attr, None), classmethod)
    original = inspect.getattr_static(owner, attr).__func__ if class_method else getattr(owner, attr)
    hook = target.hook

    def routed(*args: Any, **kwargs: Any) -> Any:
        return hook(original, *args, **kwargs)

    _marked(routed, original, target.path)
    # A static method stays one (``self._select_backend()`` passes no instance).
    static = isinstance(inspect.getattr_static(owner, attr, None), staticmethod)
    if _settles(target) and not static and not class_method:
        path = target.path

        def settling(*args: Any, **kwargs: Any) -> Any:
            return settle(path)(*args, **kwargs)

        _marked(settling, original, target.path)
        _settling[path] = (target, original, routed, settling)
        routed = settling
    setattr(owner, attr, staticmethod(routed) if static else classmethod(routed) if class_method else routed)
    if target.provider:
        _rebind_provider(original, getattr(owner, attr))
    if target.refresh is not None:  # values the module computed from the original at import
        try:
            target.refresh(sys.modules[target.module])
        except Exception as exc:  # routing must never break the import
            logger.warning("refreshing %s after routing failed (%s: %s)", target.module, type(exc).__name__, exc)
    return True


def _bind_value(target: Target, owner: Any, attr: str) -> None:
    """A value target: its module's value becomes the hook's answer, in the value's own type
    (``tl.constexpr(True)`` for a constexpr), the hook asked over a function that returns
    SGLang's value (the answer when the glue has none).  Bound once the module has run and
    before anything reads it: Triton reads a ``constexpr`` global when it first compiles a
    kernel that uses it, and refuses one changed since."""
    original = getattr(owner, attr)
    try:
        answer = target.hook(lambda: original)
        bound = answer if answer is original or type(answer) is type(original) else type(original)(answer)
    except Exception as exc:  # routing must never break the import: SGLang's own value stays
        logger.warning("binding %s failed (%s: %s); SGLang's value kept", target.path, type(exc).__name__, exc)
        bound = original
    setattr(owner, attr, bound)
    _values[target.path] = (original, bound)


def late_value_problem(target: Target) -> Optional[str]:
    """Why the entry point leaves a value target to SGLang: its module was imported before the
    plugin loaded (and the early finder did not bind it), so a kernel may have compiled with
    SGLang's value, and Triton refuses a global changed since its first compile.  None for
    every other target, and for a value whose module the entry point imports itself."""
    if target.value is None or is_routed(target) or target.module not in sys.modules or target.path in _problems:
        return None  # (a problem the early finder met is reported as that problem)
    return (f"{target.path}: its module was imported before sglang-arch loaded; a value Triton compiles in "
            "is bound only before its kernels compile")


_OVERRIDE_BASE = "sglang.srt.arg_groups.model_override_base"


def _rebind_provider(old: Any, new: Any) -> None:
    """SGLang's model-override registry calls ``new`` wherever it held ``old`` (a provider
    is registered by its decorator while its module runs, before the target is routed)."""
    base = sys.modules.get(_OVERRIDE_BASE)
    for fns in getattr(base, "_MODEL_OVERRIDE_FNS", {}).values():
        fns[:] = [new if fn is old else fn for fn in fns]


def unroute(target: Target) -> None:
    """Put SGLang's own function back (a target the entry point's full check refused)."""
    if target.value is not None and is_routed(target):
        owner, attr = _owner_and_attr(target)
        setattr(owner, attr, _values.pop(target.path)[0])
        _early_routed.discard(target.path)
    elif is_routed(target):
        owner, attr = _owner_and_attr(target)
        routed = getattr(owner, attr)
        original = routed.__wrapped__
        static = isinstance(inspect.getattr_static(owner, attr, None), staticmethod)
        class_method = isinstance(inspect.getattr_static(owner, attr, None), classmethod)
        setattr(owner, attr, staticmethod(original) if static else classmethod(original) if class_method else original)
        if target.provider:
            _rebind_provider(routed, original)
        _early_routed.discard(target.path)
        entry = _settling.pop(target.path, None)
        bound = _settled.pop(target.path, None)
        if entry is not None:
            _rebind_everywhere({id(f): original for f in (entry[3], bound) if f is not None})


# --- deciding once per process (the hot per-call targets) -----------------------------------
#
# A target whose hook has a ``specialize`` and whose answer depends on the machine alone is
# routed to ``settling``: its first call asks the hook's ``specialize(original)`` for the
# cheapest function equivalent to the hook on this machine (SGLang's own where the registry
# agrees with it, SGLang's body with the registry's constant where it does not,
# ``specialize.KEEP``: the hook itself), binds it wherever the target's name was bound, and
# calls it.  ``glue.machine_changed()`` (``runtime.reset()``, a simulated machine, a
# communicator without multicast made) puts ``settling`` back, so the next call decides again.

_settling: Dict[str, Tuple[Target, Any, Any, Any]] = {}  # path -> (target, original, hook wrapper, settling)
_settled: Dict[str, Any] = {}  # path -> the function bound after deciding
SETTLED_MODULES = ("sglang", "_sglang_arch")  # where SGLang's modules hold names they imported


def _settles(target: Target) -> bool:
    return (target.per_process and target.value is None and not target.provider
            and getattr(target.hook, "specialize", None) is not None)


def _marked(fn: Any, original: Any, path: str) -> Any:
    """``fn`` as the routed function SGLang's name holds: SGLang's metadata, ``__wrapped__``
    its original, the routing mark (``sglang-arch show``), its cache methods."""
    if fn is not original:
        try:
            functools.update_wrapper(fn, original)
        except AttributeError:  # (a C-level cached probe takes what it can)
            pass
        fn.__wrapped__ = original
    setattr(fn, ROUTED_MARK, path)
    for name in ("cache_clear", "cache_info"):  # SGLang resets its cached probes
        if hasattr(original, name) and not hasattr(type(fn), name):
            setattr(fn, name, getattr(original, name))
    return fn


def settle(path: str) -> Callable:
    """The function the target decides on for this process (bound on its first call)."""
    bound = _settled.get(path)
    if bound is not None:
        return bound
    target, original, routed, settling = _settling[path]
    if glue.platform_overrides():  # inside SGLang's override_platform scope: the hook answers per call
        return routed
    try:
        chosen = target.hook.specialize(original)
    except Exception as exc:  # deciding must never break the server: SGLang's own function
        logger.debug("sglang-arch: %s keeps SGLang's function (%s: %s)", path, type(exc).__name__, exc)
        chosen = original
    if chosen is KEEP:
        bound = routed
    else:
        bound = copy_function(chosen) if chosen is original else chosen
        bound = routed if bound is None else _marked(bound, original, path)
    _settled[path] = bound
    _rebind_everywhere({id(settling): bound}, target)
    return bound


def unsettle() -> None:
    """Every settled target decides again on its next call (the machine may have changed)."""
    if not _settled:
        return
    replaced = {}
    for path, bound in list(_settled.items()):
        replaced[id(bound)] = _settling[path][3]
    _settled.clear()
    _rebind_everywhere(replaced)


def _rebind_everywhere(replaced: Dict[int, Any], target: Optional[Target] = None) -> None:
    """Every name SGLang's modules (and the targets' owners) bound to one of ``replaced``'s
    functions now holds its replacement."""
    owners = [_owner_and_attr(t) for t in ([target] if target is not None else
                                           [entry[0] for entry in _settling.values()])
              if t.module in sys.modules]
    for owner, attr in owners:
        new = replaced.get(id(inspect.getattr_static(owner, attr, None)))
        if new is not None:
            setattr(owner, attr, new)
    modules = [m for n, m in list(sys.modules.items()) if n.startswith(SETTLED_MODULES)]
    for module in modules:
        namespace = getattr(module, "__dict__", None) or {}
        for attr, value in list(namespace.items()):
            new = replaced.get(id(value))
            if new is not None and new is not value:
                namespace[attr] = new


glue.on_machine_change(unsettle)


def early_state() -> Dict[str, Any]:
    """What the early finder did in this process (for the start-up line and tests)."""
    return {"routed": sorted(_early_routed), "problems": dict(_problems)}
