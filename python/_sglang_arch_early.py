"""Early routing: the plugin's hooks in place before SGLang computes anything from them.

SGLang loads general plugins with ``load_plugins()``, but its spawned scheduler imports
``sglang.srt.managers.scheduler`` (thousands of modules) before it calls it, and many of
those modules compute values at import (``_is_sm90_supported = ...``) or bind the
functions they import.  A hook applied afterwards cannot reach any of that.

So the installed wheel ships ``sglang_arch_early.pth``, which Python's ``site`` runs at
every interpreter start (the launcher and every process SGLang spawns): it calls
:func:`install`, which only puts a small finder at the front of ``sys.meta_path``.  The
finder watches one name, ``sglang``; when SGLang is first imported it learns the modules
that hold the plugin's targets, and each of those is routed the moment its own code has
run, before any other module can import from it.  ``load_plugins()`` later calls the
entry point as before, which finds the targets already routed (and routes, late, any
that were not, e.g. where the ``.pth`` file is missing).

Cost outside SGLang: one dictionary look-up per first import of a module.  Cost in an
SGLang process: importing the plugin's glue once, and one wrap per target.  Opting out is
read when it is used, not when the interpreter starts: at SGLang's first import, again as
each module that holds targets loads, and by the entry point.  So ``SGLANG_ARCH_DISABLE``
(``1``: all off; ``fusion,symm_mem``: those decisions) and ``SGLANG_PLUGINS`` without
``sglang_arch`` (read exactly as SGLang's loader reads it: ``allowed_by_sglang``) hold
however they are set, the environment or ``os.environ`` in-process, as long as it is
before SGLang loads the code they concern.  Nothing here may raise: a failure leaves
SGLang as it is (the entry point then logs why).
"""

from __future__ import annotations

import os
import sys

PLUGIN_NAME = "sglang_arch"  # the entry point's name in ``sglang.srt.plugins``
KILL_SWITCH = "SGLANG_ARCH_DISABLE"
# As ``arch.validate.env_bool``: these words leave every decision routed.
FALSE_WORDS = ("", "0", "false", "no", "off")

_state = {"installed": False, "error": None, "opted_out": False}


def opted_out(environ=None) -> bool:
    """Whether the user keeps the whole plugin out of this process (as SGLang's loader does):
    ``SGLANG_PLUGINS`` without it, or ``SGLANG_ARCH_DISABLE`` turning every decision off (``1``,
    or a value that cannot be read: the safe side; the entry point says so).  Read when SGLang
    is first imported, so the plugin's switch parser can be imported then."""
    environ = os.environ if environ is None else environ
    if not allowed_by_sglang(environ):
        return True
    value = environ.get(KILL_SWITCH, "")
    if value.strip().lower() in FALSE_WORDS:
        return False
    try:
        from sglang_arch.integrations.sglang import switches

        return switches.off(environ) >= switches.ALL
    except Exception:  # the parser cannot be read: the whole plugin out, as the value asks
        return True


def allowed_by_sglang(environ=os.environ) -> bool:
    """Whether SGLang 0.5.23's loader calls the entry point under ``SGLANG_PLUGINS``.

    Its rule (``sglang/srt/plugins/__init__.py`` ``load_plugins_by_group``): unset or empty,
    every plugin loads; any other value, even blanks or commas alone, is an allow-list of
    the comma-separated names, each with surrounding whitespace dropped, compared exactly
    (case kept).  ``SGLANG_PLATFORM`` only skips distributions that ship a platform plugin,
    and sglang-arch ships none.  test/integration/test_plugin_allow_list.py compares this
    with SGLang's own function over generated values.
    """
    value = environ.get("SGLANG_PLUGINS")
    if not value:
        return True
    return any(part.strip() == PLUGIN_NAME for part in value.split(","))


class _RoutingLoader:
    """Runs a module with its own loader, then routes the targets it defines."""

    def __init__(self, inner, router: "_Router") -> None:
        self._inner = inner
        self._router = router

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:
        # The module keeps its real loader (inspect, importlib.resources, reloads).
        module.__loader__ = self._inner
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._inner
        before = set(sys.modules)
        self._inner.exec_module(module)
        # Modules first imported while this one ran (a circular import) may have bound
        # its functions already: routing replaces those names too.
        self._router.loaded(module, set(sys.modules) - before)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _Router:
    """A meta-path finder that only wraps the loaders of watched modules."""

    def __init__(self) -> None:
        self.watched = {"sglang"}
        self._on_loaded = None  # routing.module_loaded, imported with SGLang
        self._finding = set()  # names being looked up: other finders may ask back

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.watched or fullname in self._finding:
            return None
        if self._on_loaded is None and (self._stays_out() or not self._learn_targets()):
            return None
        self._finding.add(fullname)
        try:
            spec = self._find_elsewhere(fullname, path, target)
        finally:
            self._finding.discard(fullname)
        if spec is None:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _RoutingLoader(spec.loader, self)
        return spec

    def _find_elsewhere(self, fullname, path, target):
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _stays_out(self) -> bool:
        """On the first import of SGLang: the user keeps the plugin out (read now, not at start)."""
        try:
            out = opted_out()
        except Exception as exc:  # never break an import
            _state["error"] = f"{type(exc).__name__}: {exc}"
            out = True
        if out:
            _state["opted_out"] = True
            self.watched.clear()
        return out

    def _learn_targets(self) -> bool:
        """On the first import of SGLang: which modules hold the plugin's targets."""
        try:
            from sglang_arch.integrations.sglang import routing

            self.watched.update(routing.target_modules())
            self._on_loaded = routing.module_loaded
            return True
        except Exception as exc:  # never break an import; the entry point reports it
            _state["error"] = f"{type(exc).__name__}: {exc}"
            self.watched.clear()
            return False

    def loaded(self, module, imported_meanwhile) -> None:
        try:
            self._on_loaded(module, imported_meanwhile)
        except Exception as exc:  # never break an import; the entry point reports it
            _state["error"] = f"{type(exc).__name__}: {exc}"

    def invalidate_caches(self) -> None:
        pass


def install() -> None:
    """Put the router in front of ``sys.meta_path`` (whether to route is read when SGLang is
    first imported)."""
    try:
        if _state["installed"]:
            return
        if "sglang" in sys.modules:  # too late to be early; the entry point routes
            return
        sys.meta_path.insert(0, _Router())
        _state["installed"] = True
    except Exception as exc:
        _state["error"] = f"{type(exc).__name__}: {exc}"


def installed() -> bool:
    """Whether the router is in place and routes (not kept out when SGLang was imported)."""
    return bool(_state["installed"]) and not _state["opted_out"]


def error():
    return _state["error"]
