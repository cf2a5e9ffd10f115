"""The early finder (``_sglang_arch_early``): opt-outs, loader hand-off, no recursion, no failure."""

import importlib
import importlib.abc
import os
import sys
import textwrap
from unittest import mock

import _sglang_arch_early as _early
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch import validate


@pytest.mark.parametrize("env,out", [
    ({}, False),
    ({"SGLANG_ARCH_DISABLE": "0"}, False),
    ({"SGLANG_ARCH_DISABLE": "off"}, False),
    ({"SGLANG_ARCH_DISABLE": "1"}, True),
    ({"SGLANG_ARCH_DISABLE": " TRUE "}, True),
    ({"SGLANG_ARCH_DISABLE": "maybe"}, True),  # unreadable: the safe side, as the entry point
    ({"SGLANG_ARCH_DISABLE": "all"}, True),
    ({"SGLANG_ARCH_DISABLE": "fusion,symm_mem"}, False),  # some decisions: the rest is routed
    ({"SGLANG_ARCH_DISABLE": "fusion,nonsense"}, True),
    ({"SGLANG_PLUGINS": "other"}, True),
    ({"SGLANG_PLUGINS": "other, sglang_arch"}, False),
    ({"SGLANG_PLUGINS": " "}, True),  # SGLang reads blanks as an allow-list naming nothing
    ({"SGLANG_PLUGINS": ""}, False),  # empty: every plugin loads
    ({"SGLANG_PLUGINS": " sglang_arch\t,"}, False),
    ({"SGLANG_PLUGINS": "SGLANG_ARCH"}, True),  # names compare exactly
])
def test_opt_outs_match_the_entry_point(env, out):
    assert _early.opted_out(env) is out


@given(value=st.lists(st.sampled_from(["sglang_arch", "other", " ", ",", "\t", "SGLANG_ARCH", ""]), max_size=6)
       .map("".join))
def test_the_entry_point_stays_out_where_sglangs_loader_would(value):
    """A direct call of the entry point agrees with the allow-list SGLang's loader reads
    (test/integration/test_plugin_allow_list.py compares that with SGLang's own function)."""
    from sglang_arch.integrations import sglang as plugin

    saved = os.environ.get("SGLANG_PLUGINS")
    os.environ["SGLANG_PLUGINS"] = value
    try:
        if _early.allowed_by_sglang():
            return  # registering needs SGLang: the integration tests cover that side
        # a fresh plugin state: another test of this worker may have registered it
        with mock.patch.object(plugin.logger, "info") as info, mock.patch.object(plugin, "_ensure_visible_logging"), \
                mock.patch.dict(plugin._state, {"registered": False, "routed": []}):
            plugin.register()
            registered = plugin._state["registered"]
        assert not registered
        info.assert_called_once_with("sglang-arch: not in SGLANG_PLUGINS, SGLang decides on its own")
    finally:
        if saved is None:
            os.environ.pop("SGLANG_PLUGINS", None)
        else:
            os.environ["SGLANG_PLUGINS"] = saved


def test_false_words_are_the_validation_layers():
    # _early cannot import arch.validate (it runs at every interpreter start); they must agree.
    assert set(_early.FALSE_WORDS) == set(validate.FALSE_WORDS)


def _package(tmp_path, monkeypatch, name, files):
    """A package ``name`` of ``files`` (module name -> source) importable for one test; its
    modules are forgotten afterwards (the generator's second step)."""
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for module, source in files.items():
        (pkg / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for loaded in [n for n in sys.modules if n.startswith(name)]:
        del sys.modules[loaded]


@pytest.fixture
def fake_tree(tmp_path, monkeypatch):
    yield from _package(tmp_path, monkeypatch, "earlyfake", {
        "target": """
            import earlyfake.user  # a circular import: user binds gate before target finished
            def gate(x):
                return "original"
            FLAG = gate(1)
        """,
        "user": "from earlyfake import target\n",
        "late": "from earlyfake.target import gate\nCACHED = gate(2)\n"})


def _router(loaded):
    router = _early._Router()
    router.watched = {"earlyfake.target"}

    def on_loaded(module, meanwhile):
        loaded.append((module.__name__, sorted(meanwhile)))
        original = module.gate

        def routed(x):
            return "routed"

        routed.__wrapped__ = original
        module.gate = routed

    router._on_loaded = on_loaded
    return router


def test_a_watched_module_is_routed_before_anyone_imports_from_it(fake_tree):
    loaded = []
    router = _router(loaded)
    sys.meta_path.insert(0, router)
    try:
        target = importlib.import_module("earlyfake.target")
        late = importlib.import_module("earlyfake.late")
    finally:
        sys.meta_path.remove(router)
    assert loaded == [("earlyfake.target", ["earlyfake.user"])]
    assert late.CACHED == "routed" and target.gate(0) == "routed"
    assert target.FLAG == "original"  # its own module-level use ran before routing
    # The module keeps its real loader (inspect, importlib.resources).
    assert not isinstance(target.__loader__, _early._RoutingLoader)
    assert not isinstance(target.__spec__.loader, _early._RoutingLoader)


class _AskingFinder(importlib.abc.MetaPathFinder):
    """Another finder that, like ours, asks the rest of sys.meta_path (a recursion trap)."""

    def find_spec(self, name, path=None, target=None):
        if not name.startswith("earlyfake"):
            return None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    return spec
        return None


def test_two_asking_finders_do_not_recurse(fake_tree):
    loaded = []
    router, other = _router(loaded), _AskingFinder()
    sys.meta_path[:0] = [other, router]
    try:
        importlib.import_module("earlyfake.target")
    finally:
        sys.meta_path.remove(router)
        sys.meta_path.remove(other)
    assert [name for name, _ in loaded] == ["earlyfake.target"]


def test_a_failing_hook_never_breaks_the_import(fake_tree, monkeypatch):
    router = _early._Router()
    router.watched = {"earlyfake.target"}

    def broken(module, meanwhile):
        raise RuntimeError("boom")

    router._on_loaded = broken
    monkeypatch.setitem(_early._state, "error", None)
    sys.meta_path.insert(0, router)
    try:
        target = importlib.import_module("earlyfake.target")
    finally:
        sys.meta_path.remove(router)
    assert target.gate(0) == "original"
    assert _early.error() == "RuntimeError: boom"


def test_the_kill_switch_is_read_when_sglang_is_first_imported(monkeypatch):
    """Installed at interpreter start whatever the switch says then; the switch set before
    SGLang's first import (in-process too) keeps every module unwatched."""
    router = _early._Router()
    monkeypatch.setitem(_early._state, "opted_out", False)
    monkeypatch.setenv("SGLANG_ARCH_DISABLE", "1")
    assert router.find_spec("sglang") is None
    assert router.watched == set() and _early._state["opted_out"] and not _early.installed()


def test_install_puts_the_router_first_whatever_the_switch(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_DISABLE", "1")
    monkeypatch.setitem(_early._state, "installed", False)
    saved = list(sys.meta_path)
    monkeypatch.delitem(sys.modules, "sglang", raising=False)
    try:
        _early.install()
        assert isinstance(sys.meta_path[0], _early._Router) and _early._state["installed"]
    finally:
        sys.meta_path[:] = saved


# --- a module value as a target (a Triton constexpr SGLang binds at import) ---


@pytest.fixture
def value_module(tmp_path, monkeypatch):
    for _ in _package(tmp_path, monkeypatch, "valuefake", {
        "quant": """
            class constexpr:  # Triton's type, by name
                def __init__(self, value):
                    self.value = value
                def __call__(self):  # Triton's constexpr is callable too
                    return self.value
            FAST = constexpr(True)
        """,
        "reader": "from valuefake.quant import FAST\n"}):
        yield "valuefake.quant"


@pytest.fixture(autouse=True)
def _recorded_fake_bodies(monkeypatch):
    """The fake value target's definition counts as a recorded release's (as scripts/fingerprints
    records SGLang's), so the guard checks its type and routing alone."""
    from sglang_arch.integrations.sglang import fingerprint, known_bodies

    bodies = {release: dict(paths) for release, paths in known_bodies.BODIES.items()}
    release = known_bodies.SUPPORTED[0]
    bodies[release]["valuefake.quant.FAST"] = fingerprint.of_module_source("FAST = constexpr(True)\n", "FAST")
    monkeypatch.setattr(known_bodies, "BODIES", bodies)


def _value_target(answer):
    from sglang_arch.integrations.sglang.hooks import answer as answer_form
    from sglang_arch.integrations.sglang.targets import Target

    def lora_fast():
        return answer

    return Target("LoRA", "valuefake.quant.FAST", answer_form(lora_fast), (), value="constexpr")


def test_a_value_target_whose_assignment_changed_keeps_sglangs_value(value_module, monkeypatch):
    from sglang_arch.integrations.sglang import known_bodies, targets

    importlib.import_module(value_module)
    target = _value_target(False)
    assert targets.check_target(target) is None
    bodies = {release: dict(paths) for release, paths in known_bodies.BODIES.items()}
    bodies[known_bodies.SUPPORTED[0]]["valuefake.quant.FAST"] = "0" * 16
    monkeypatch.setattr(known_bodies, "BODIES", bodies)
    assert "SGLang's code differs from sglang" in targets.check_target(target)


@pytest.mark.parametrize("answer", [False, True, None])
def test_a_value_target_binds_the_answer_in_the_values_type_and_unroutes(value_module, monkeypatch, answer):
    from sglang_arch.integrations.sglang import routing, targets

    target = _value_target(answer)
    monkeypatch.setattr(routing, "_targets", lambda: [target])
    module = importlib.import_module(value_module)
    reader = importlib.import_module("valuefake.reader")
    own = module.FAST
    assert targets.check_target(target) is None and not routing.is_routed(target)
    routing.module_loaded(module, ["valuefake.reader"])
    assert routing.is_routed(target) and not routing.route(target)  # idempotent
    bound = module.FAST
    assert type(bound).__name__ == "constexpr"
    assert bound.value is (True if answer is None else answer)  # None: SGLang's own value
    assert (bound is own) is (answer is None)
    assert reader.FAST is own  # a value is read by its module alone: nothing else is rebound
    routing.unroute(target)
    assert module.FAST is own and not routing.is_routed(target)


def test_a_value_target_checks_the_values_type(value_module):
    from sglang_arch.integrations.sglang import targets

    module = importlib.import_module(value_module)
    target = _value_target(False)
    module.FAST = True
    assert targets.check_target(target).endswith("changed: a bool, expected a module value of type constexpr")
    del module.FAST
    assert "changed: missing" in targets.check_target(target)


def test_the_entry_point_binds_a_value_only_before_anything_could_compile_with_it(value_module, monkeypatch):
    """Late (no early finder): a value whose module SGLang imported before the plugin loaded is
    left to SGLang with the reason; one not imported yet (the entry point imports it) or already
    bound early is not refused; a function target never is."""
    from sglang_arch.integrations.sglang import routing

    target = _value_target(False)
    assert routing.late_value_problem(target) is None  # not imported: the entry point imports and binds it
    importlib.import_module(value_module)
    assert "imported before sglang-arch loaded" in routing.late_value_problem(target)
    monkeypatch.setattr(routing, "_targets", lambda: [target])
    routing.module_loaded(sys.modules[value_module])  # what the early finder does on import
    assert routing.late_value_problem(target) is None
    routing.unroute(target)
    monkeypatch.setitem(routing._problems, target.path, "changed: a bool")  # reported by the early finder already
    assert routing.late_value_problem(target) is None
    from sglang_arch.integrations.sglang.targets import all_targets

    assert all(routing.late_value_problem(t) is None for t in all_targets() if t.value is None)


def test_a_failing_value_answer_keeps_sglangs_value(value_module, monkeypatch):
    from sglang_arch.integrations.sglang import routing
    from sglang_arch.integrations.sglang.targets import Target

    def broken(original):
        raise RuntimeError("boom")

    target = Target("LoRA", "valuefake.quant.FAST", broken, (), value="constexpr")
    module = importlib.import_module(value_module)
    own = module.FAST
    assert routing.route(target) and module.FAST is own
    routing.unroute(target)
