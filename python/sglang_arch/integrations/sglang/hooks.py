"""The plugin's hooks: each asks one glue function.

The glue (``glue/``) applies the registry's decisions.  A hook here only connects one glue
function to SGLang's HookRegistry: an AROUND hook that asks the glue and, when the glue
answers ``None`` (no NVIDIA GPU, not CUDA, or an unexpected error inside the glue, logged
once), calls upstream's original.  The shapes:

- ``answer``: the glue's answer unless it is ``None``, else the original's;
- ``done``: a true answer means the glue did the work (``TorchSymmMemCommunicator.__init__``);
- ``check``: the glue raises or does nothing, then the original runs;
- ``fact``: a platform probe, answered with the device's identity (docs/fallback.md);
- ``scoped``: for the original's call, one name of its module (a probe it reads inside a
  larger function, or a table) answers the glue's decision;
  (``module``: a probe the function imports locally answers in the module it is imported
  from);
- ``scoped_fact``: the same for one platform fact a method reads inline
  (``get_platform().is_blackwell``), or several read for one decision (a tuple of names,
  the glue answering a tuple of values): for the original's call, its module's
  ``get_platform()`` answers SGLang's platform with those facts the glue's;
- ``scoped_capability``: the same for a torch read written inline
  (``torch.cuda.get_device_capability(...)``): for the original's call, its module's
  ``torch`` answers torch with that one function answering the glue's capability (every
  other attribute torch's own); a per-process target, once decided, is SGLang's body
  reading that function under a name of its own set on ``torch.cuda``
  (``_sglang_arch_get_device_capability_<major>_<minor>``);
- ``scoped_self``: the same for probes a method reads from its instance (bound at init,
  ``self._get_device_sm``): for the original's call, each named attribute of ``self``
  answers the glue's value;
- ``decides``: the glue answers ``(answer,)`` (the answer may be ``None``), or ``None``
  for the original's;
- ``viewed``: the original runs with one of its arguments (a group, a driver binding) seen
  through the glue's view of it, or as passed where the glue answers ``None``.

``ArchDecisionError`` is the one error the glue raises on purpose (a user choice that
cannot run on this GPU); through the plugin its message also names the kill switch.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any, Callable, Dict, Optional, Tuple, Union

from . import specialize as _specialize
from .glue import ArchDecisionError, fail_open, failed, platform
from .specialize import KEEP

KILL_SWITCH = "SGLANG_ARCH_DISABLE"


def _kill_switch_named(exc: ArchDecisionError) -> ArchDecisionError:
    """``exc``'s message with the kill switch that turns the plugin off."""
    return ArchDecisionError(f"{exc}; {KILL_SWITCH}=1 turns sglang-arch off")


def _naming_the_kill_switch(ask: Callable) -> Callable:
    """``ask``, with the kill switch added to the message of an ``ArchDecisionError``.

    A fail-open glue function (``glue.fail_open``) is called unwrapped inside this one
    ``try``, which also answers for its guard (``glue.failed``): SGLang calls some hooks per
    layer or per collective, so each is one Python call less."""
    raw = getattr(ask, "__fail_open__", None)
    if raw is None:
        @functools.wraps(ask)
        def asking(*args: Any, **kwargs: Any) -> Any:
            try:
                return ask(*args, **kwargs)
            except ArchDecisionError as exc:
                raise _kill_switch_named(exc) from None

        return asking

    @functools.wraps(ask)
    def asking_guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return raw(*args, **kwargs)
        except ArchDecisionError as exc:
            raise _kill_switch_named(exc) from None
        except Exception as exc:  # routing must never break the server
            return failed(raw, exc)

    return asking_guarded


def _hook(form: str, ask: Callable, around: Callable, answers: Optional[Tuple[str, ...]] = None) -> Callable:
    """Name the AROUND hook after its glue function; ``form`` and ``glue`` say what it asks.

    ``answers``: for a form that runs SGLang's body (``check``, the ``scoped`` forms), the
    names the hook answers inside it (none for ``check``); ``None`` where the glue's answer
    replaces the body.  The audit reads it: a gate in that body reads the device unless it
    reads one of these names."""
    around.__name__ = around.__qualname__ = f"{form}_{ask.__name__}"
    around.__doc__ = f"AROUND hook ({form} form) over {ask.__module__}.{ask.__qualname__}."
    around.form, around.glue, around.answers = form, ask, answers  # type: ignore[attr-defined]
    return around


def answer(ask: Callable, runs_body_answering: Optional[Tuple[str, ...]] = None,
           specialize: Optional[Callable] = None) -> Callable:
    """``answer`` form: the glue's answer unless it is ``None``, else upstream's original.
    ``runs_body_answering``: the glue answers by running SGLang's own function under an
    override of these platform facts (``fusion.auto_enable``), so the body still runs with
    them answered (what the audit reads)."""
    asking = _naming_the_kill_switch(ask)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        arch_answer = asking(*args, **kwargs)
        return original(*args, **kwargs) if arch_answer is None else arch_answer

    around.specialize = _specialize.glue_specialize(specialize)  # type: ignore[attr-defined]
    return _hook("answer", ask, around, runs_body_answering)


def done(ask: Callable) -> Callable:
    """``done`` form: nothing more when the glue did the work, else upstream's original."""
    asking = _naming_the_kill_switch(ask)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        return None if asking(*args, **kwargs) else original(*args, **kwargs)

    return _hook("done", ask, around)


def check(ask: Callable) -> Callable:
    """``check`` form: the glue raises or does nothing; then upstream's original runs."""
    asking = _naming_the_kill_switch(ask)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        asking(*args, **kwargs)
        return original(*args, **kwargs)

    return _hook("check", ask, around, ())


def fact(name: str) -> Callable:
    """A platform probe (``is_sm90_supported`` answers fact ``is_sm90``): the device's identity.

    The probe's own arguments (``device_id`` of ``get_device_capability``) only reach
    upstream's original: the registry answers for this process's machine.
    """
    ask = functools.partial(platform.fact, name)
    raw = platform.fact.__fail_open__  # (the guard inline: a probe is read on every platform-fact access)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        try:
            arch_answer = raw(name)
        except Exception as exc:  # routing must never break the server
            arch_answer = failed(raw, exc)
        return original(*args, **kwargs) if arch_answer is None else arch_answer

    def specialize(original: Callable) -> Any:
        """Once decided: a cached probe answering the registry's fact (a C-level call, as
        SGLang's own cached probe); the hook stays where the glue answers ``None``."""
        arch_answer = raw(name)
        if arch_answer is None:
            return KEEP
        return _specialize.constant_probe(arch_answer, cached=hasattr(original, "cache_clear"))

    around.specialize = specialize  # type: ignore[attr-defined]
    around.__name__ = around.__qualname__ = f"fact_{name}"
    around.__doc__ = f"AROUND hook over {platform.fact.__module__}.fact({name!r})."
    around.form, around.glue = "fact", ask  # type: ignore[attr-defined]
    return around


def scoped(ask: Callable, name: str, value: bool = False, module: Optional[str] = None) -> Callable:
    """``scoped`` form: while the original runs, its module's ``name`` (a probe it calls
    inside a larger function; ``value``: a table it reads) answers ``ask()``, or stays
    SGLang's where ``ask`` answers ``None``.  ``module``: the module that holds ``name``
    when it is not the original's (a probe the original imports inside its body, from
    that module, when it runs); SGLang's own where that module lacks it."""
    asking = _naming_the_kill_switch(ask)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        arch_answer = asking()
        if arch_answer is None:
            return original(*args, **kwargs)
        holder = sys.modules.get(module or original.__module__)
        probe = getattr(holder, name, _MISSING)
        if probe is _MISSING:  # not there (a release that moved it): SGLang's own probe answers
            return original(*args, **kwargs)
        setattr(holder, name, arch_answer if value else _answering(arch_answer))
        try:
            return original(*args, **kwargs)
        finally:
            setattr(holder, name, probe)

    def specialize(original: Callable) -> Any:
        """Once decided: SGLang's function where its probe (or table) answers as the glue,
        else its body reading the glue's answer in place of ``name``."""
        if module is not None:  # a probe imported inside the body: no global to answer
            return KEEP
        arch_answer = asking()
        if arch_answer is None:
            return original
        probe = getattr(sys.modules.get(original.__module__), name, _MISSING)
        if probe is _MISSING:
            return original
        if _same(lambda: probe if value else probe(), arch_answer):
            return original
        found = _specialize.with_global(original, name, arch_answer if value else
                                        _specialize.constant_probe(arch_answer, cached=False))
        return KEEP if found is None else found

    around.specialize = specialize  # type: ignore[attr-defined]
    return _hook("scoped", ask, around, (name,))


def _same(read: Callable[[], Any], arch_answer: Any) -> bool:
    """Whether SGLang's own probe, read now, answers ``arch_answer`` (same type and value);
    False where reading it fails."""
    try:
        own = read()
    except Exception:
        return False
    return type(own) is type(arch_answer) and own == arch_answer


def scoped_fact(ask: Callable, fact_name: Union[str, Tuple[str, ...]]) -> Callable:
    """``scoped_fact`` form: while the original runs, its module's ``get_platform()``
    answers SGLang's platform with fact ``fact_name`` set to ``ask()`` (every other
    attribute SGLang's), or stays SGLang's where ``ask`` answers ``None``.  ``fact_name``
    a tuple: the facts of one decision, ``ask()`` a tuple of their values in that order.
    Only code of the original's module sees it, so the kernels it calls keep reading the
    device.  Per call: the glue's (cached) answer and one module attribute swapped; the
    replacement getter is built once per (module, facts, answer)."""
    asking = _naming_the_kill_switch(ask)
    names = (fact_name,) if isinstance(fact_name, str) else tuple(fact_name)
    single = isinstance(fact_name, str)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        arch_answer = asking()
        if arch_answer is None:
            return original(*args, **kwargs)
        values = (arch_answer,) if single else tuple(arch_answer)
        return _with_module_attr(original, "get_platform", args, kwargs,
                                 lambda holder, getter: _fact_getter(holder.__name__, getter, names, values))

    def specialize(original: Callable) -> Any:
        """Once decided: SGLang's function where its platform answers these facts as the
        glue, else its body reading a platform whose facts are the glue's constants."""
        arch_answer = asking()
        if arch_answer is None:
            return original
        values = (arch_answer,) if single else tuple(arch_answer)
        holder = sys.modules.get(original.__module__)
        if getattr(holder, "get_platform", None) is None:
            return original
        if all(_same(lambda n=n: getattr(holder.get_platform(), n), v) for n, v in zip(names, values)):
            return original
        view = _specialize.PlatformFacts(holder, dict(zip(names, values)))
        found = _specialize.with_global(original, "get_platform", functools.lru_cache(maxsize=None)(lambda: view))
        return KEEP if found is None else found

    around.specialize = specialize  # type: ignore[attr-defined]
    return _hook("scoped_fact", ask, around, names)


def _with_module_attr(original: Callable, name: str, args: tuple, kwargs: dict,
                      view: Callable[[Any, Any], Any]) -> Any:
    """``original(*args, **kwargs)`` with its module's ``name`` answering ``view(module, real)``
    for the call, then SGLang's own put back; SGLang's alone where the module no longer has
    ``name`` (a release that stopped reading it: nothing to answer)."""
    holder = sys.modules.get(original.__module__)
    real = getattr(holder, name, None)
    if real is None:
        return original(*args, **kwargs)
    setattr(holder, name, view(holder, real))
    try:
        return original(*args, **kwargs)
    finally:
        setattr(holder, name, real)


class _PlatformWithFact:
    """SGLang's platform (read anew on each attribute) with some facts answered by the registry."""

    __slots__ = ("_get_platform", "_facts")

    def __init__(self, get_platform: Callable, facts: Dict[str, Any]) -> None:
        self._get_platform, self._facts = get_platform, facts

    def __getattr__(self, name: str) -> Any:
        facts = self._facts
        if name in facts:
            return facts[name]
        return getattr(self._get_platform(), name)


_FACT_GETTERS: dict = {}  # (module, getter, facts, types, values) -> the module's get_platform for the call


def _fact_getter(module: str, getter: Callable, names: Tuple[str, ...], values: Tuple[Any, ...]) -> Callable:
    key = (module, getter, names, tuple(type(v) for v in values), values)
    found = _FACT_GETTERS.get(key)
    if found is None:
        view = _PlatformWithFact(getter, dict(zip(names, values)))
        found = _FACT_GETTERS.setdefault(key, functools.partial(_constant, view))
    return found


def scoped_capability(ask: Callable) -> Callable:
    """``scoped_capability`` form: while the original runs, its module's ``torch`` answers
    torch with ``torch.cuda.get_device_capability(...)`` returning ``ask()`` (a capability
    tuple, whatever device it is asked for), or stays torch where ``ask`` answers ``None``.
    Only code of the original's module sees it (the kernels it calls read the device), and
    a hooked function nested in another of the same module answers its own.  Per call: the
    glue's (cached) answer and one module attribute swapped; every ``torch.<name>`` the
    module reads during the call goes through one attribute look-up more.  The view is built
    once per (torch, answer)."""
    asking = _naming_the_kill_switch(ask)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        arch_answer = asking()
        if arch_answer is None:
            return original(*args, **kwargs)
        return _with_module_attr(original, "torch", args, kwargs,
                                 lambda holder, real: _torch_answering(real, arch_answer))

    def specialize(original: Callable) -> Any:
        """Once decided: SGLang's function where torch reports the glue's capability, else
        its body reading torch through the view whose capability is the glue's."""
        arch_answer = asking()
        if arch_answer is None:
            return original
        real = getattr(sys.modules.get(original.__module__), "torch", None)
        if isinstance(real, _ModuleView):  # decided inside a hooked call of the same module
            real = real.__dict__["_of"]
        if real is None:
            return original
        capability = tuple(arch_answer)
        if _same(lambda: tuple(real.cuda.get_device_capability()), capability):
            return original
        # ``torch.cuda.get_device_capability`` read as ``torch.cuda.<one name per answer>``:
        # torch and torch.cuda stay themselves; else torch read through the view.
        found = _specialize.with_attribute(
            original, ("torch", "cuda"), "get_device_capability", real.cuda,
            "_sglang_arch_get_device_capability_" + "_".join(str(int(v)) for v in capability),
            _answering(capability))
        if found is None:
            found = _specialize.with_global(original, "torch", _torch_answering(real, capability))
        return KEEP if found is None else found

    around.specialize = specialize  # type: ignore[attr-defined]
    return _hook("scoped_capability", ask, around, ("get_device_capability",))


class _ModuleView(types.ModuleType):
    """A module seen through: the attributes set on the view, every other one the module's
    own.  A module object (not a plain proxy), so tracers that special-case modules (torch
    dynamo) read it as one."""

    def __init__(self, of: Any, answers: dict) -> None:
        super().__init__(getattr(of, "__name__", "view"))
        self.__dict__.update(answers)
        self.__dict__["_of"] = of
        # Every other attribute: the module's own ``__getattr__`` (PEP 562), a C call
        # ``getattr(of, name)``; a class-level ``__getattr__`` costs a Python frame more
        # (a miss: ~0.5 us against ~2 us, Python 3.11).
        self.__dict__["__getattr__"] = functools.partial(getattr, of)


_TORCH_VIEWS: dict = {}  # (torch, answer) -> torch whose cuda.get_device_capability answers it


def _torch_answering(real: Any, capability: Tuple[int, int]) -> Any:
    if isinstance(real, _ModuleView):  # a hooked call inside another of the same module
        real = real.__dict__["_of"]
    key = (id(real), tuple(capability))
    view = _TORCH_VIEWS.get(key)
    if view is None:
        cuda = _ModuleView(real.cuda, {"get_device_capability": _answering(tuple(capability))})
        view = _TORCH_VIEWS.setdefault(key, _ModuleView(real, {"cuda": cuda}))
    return view


def scoped_self(ask: Callable, names: Tuple[str, ...]) -> Callable:
    """``scoped_self`` form: while the original method runs, each probe ``self.<name>`` it
    reads answers the matching value of ``ask(self)``, or all stay SGLang's where ``ask``
    answers ``None``.  Per call: the glue's (cached) answer and one attribute swap per name."""
    asking = _naming_the_kill_switch(ask)

    def around(original: Callable, self: Any, *args: Any, **kwargs: Any) -> Any:
        values = asking(self)
        if values is None:
            return original(self, *args, **kwargs)
        saved = _swap(self, names, values)
        if saved is None:  # the instance cannot take them (warned once): SGLang's own probes answer
            return original(self, *args, **kwargs)
        try:
            return original(self, *args, **kwargs)
        finally:
            _restore(self, names, saved)

    return _hook("scoped_self", ask, around, tuple(names))


_MISSING = object()
_CONSTANTS: dict = {}  # (type, value) -> its constant probe (a few values per machine: no allocation per call)


@fail_open
def _swap(self: Any, names: Tuple[str, ...], values: Tuple[Any, ...]) -> list:
    """Set each probe ``self.<name>`` to answer its value; what was there before (to restore)."""
    saved = [vars(self).get(name, _MISSING) for name in names]
    try:
        for name, value in zip(names, values):
            key = (type(value), value)  # False and 0 are equal keys, but not the same answer
            answer = _CONSTANTS.get(key) or _CONSTANTS.setdefault(key, functools.partial(_constant, value))
            setattr(self, name, answer)
    except Exception:
        _restore(self, names, saved)
        raise
    return saved


def _restore(self: Any, names: Tuple[str, ...], saved: list) -> None:
    for name, probe in zip(names, saved):
        if probe is _MISSING:
            vars(self).pop(name, None)
        else:
            setattr(self, name, probe)


def _constant(value: Any) -> Any:
    return value


_ANSWERING: dict = {}  # (type, value) -> a probe that answers it whatever its arguments (built once)


def _answering(value: Any) -> Callable:
    key = (type(value), value)
    probe = _ANSWERING.get(key)
    if probe is None:
        probe = _ANSWERING.setdefault(key, lambda *args, **kwargs: value)
    return probe


def decides(ask: Callable, specialize: Optional[Callable] = None) -> Callable:
    """``decides`` form: the glue's boxed answer ``(answer,)``, where ``None`` is a real
    answer (the original's contract), else (the glue answered ``None``) upstream's original."""
    asking = _naming_the_kill_switch(ask)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        box = asking(*args, **kwargs)
        return original(*args, **kwargs) if box is None else box[0]

    around.specialize = _specialize.glue_specialize(specialize)  # type: ignore[attr-defined]
    return _hook("decides", ask, around)


def viewed(ask: Callable, name: str, position: int, specialize: Optional[Callable] = None) -> Callable:
    """``viewed`` form: the original runs with its argument ``name`` (the ``position``-th
    positional one, or passed by keyword) replaced by ``ask(value)``, a view of it the glue
    builds (e.g. a process group seen without its symmetric-memory communicator), or as
    passed where ``ask`` answers ``None``.  SGLang's whole body runs, reading the view.

    Asked per forward or per collective, so the per-call work is one index, one glue call
    and, only where a view answers, one tuple rebuilt: no signature binding (``position`` is
    found once, from the target's parameters)."""

    raw = getattr(ask, "__fail_open__", ask)  # (the guard inline, as in _naming_the_kill_switch)

    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        positional = len(args) > position
        value = args[position] if positional else kwargs.get(name, _MISSING)
        try:
            view = None if value is _MISSING else raw(value)
        except ArchDecisionError as exc:
            raise _kill_switch_named(exc) from None
        except Exception as exc:  # routing must never break the server
            if raw is ask:  # not a fail-open glue function: its error is its own
                raise
            view = failed(raw, exc)
        if view is None:
            return original(*args, **kwargs)
        if positional:
            return original(*args[:position], view, *args[position + 1:], **kwargs)
        kwargs[name] = view
        return original(*args, **kwargs)

    around.specialize = _specialize.glue_specialize(specialize)  # type: ignore[attr-defined]
    return _hook("viewed", ask, around, (name,))
