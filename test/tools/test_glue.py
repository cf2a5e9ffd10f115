"""The glue: what the plugin's hooks call.  It imports the registry and its siblings, and
sglang or torch only inside functions; the hooks are guard forms over it.  No sglang needed.
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from sglang_arch.integrations.sglang import hooks
from sglang_arch.integrations.sglang.glue import ArchDecisionError

GLUE = Path(__file__).resolve().parents[2] / "python" / "sglang_arch" / "integrations" / "sglang" / "glue"
MODULES = sorted(p.stem for p in GLUE.glob("*.py"))
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


# --- the package's glue is self-contained ---------------------------------------------

def _imports(tree):
    """(node, runs at import time) for every import of a module."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside |= {id(sub) for sub in ast.walk(node) if sub is not node}
    return [(n, id(n) not in inside) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize("name", MODULES)
def test_the_glue_imports_only_the_registry_its_siblings_and_sglang_inside_functions(name):
    for node, at_import in _imports(ast.parse((GLUE / f"{name}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            # "." (a glue sibling) or "....arch" (the registry: sglang_arch.arch)
            assert node.level == 1 or (node.level == 4 and (node.module or "").split(".")[0] == "arch"), \
                (name, node.lineno, node.level, node.module)
            continue
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
        for module in modules:
            top = module.split(".")[0]
            assert top != "sglang_arch", (name, node.lineno)  # the registry and siblings: relative
            if at_import:
                assert top in STDLIB, (name, node.lineno, module)  # sglang and torch only inside functions
            else:
                assert top in STDLIB | {"sglang", "torch"}, (name, node.lineno, module)


def test_importing_the_plugin_and_its_glue_loads_neither_sglang_nor_torch():
    code = ("import sys, sglang_arch.integrations.sglang.targets, sglang_arch.integrations.sglang.glue; "
            "print(sorted(m for m in ('torch', 'sglang') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the plugin's hooks: guard forms over the glue ------------------------------------

def _recording(answer):
    calls = []

    def ask(*args, **kwargs):
        calls.append((args, kwargs))
        if isinstance(answer, Exception):
            raise answer
        return answer

    ask.__name__ = ask.__qualname__ = "ask"
    return ask, calls


def _original(*args, **kwargs):
    return ("original", args, kwargs)


def test_answer_form_returns_the_glue_answer_else_the_original():
    ask, calls = _recording("trtllm")
    assert hooks.answer(ask)(_original, "auto", is_multi_node=False) == "trtllm"
    assert calls == [(("auto",), {"is_multi_node": False})]
    ask, _ = _recording(None)
    assert hooks.answer(ask)(_original, "auto", False) == ("original", ("auto", False), {})
    ask, _ = _recording({})  # a falsy answer is still the answer
    assert hooks.answer(ask)(_original, "view") == {}


def test_done_form_skips_the_original_only_when_the_glue_did_the_work():
    ask, _ = _recording(True)
    assert hooks.done(ask)(_original, "self", "group", "device") is None
    ask, _ = _recording(None)
    assert hooks.done(ask)(_original, "self", "group", "device") == ("original", ("self", "group", "device"), {})


def test_check_form_runs_the_original_after_the_glue():
    ask, calls = _recording(None)
    assert hooks.check(ask)(_original, "view") == ("original", ("view",), {})
    assert calls == [(("view",), {})]


def test_viewed_form_passes_the_glue_view_of_one_argument_else_the_arguments_as_given():
    ask, calls = _recording("view")
    hook = hooks.viewed(ask, "group", 1)
    assert hook(_original, "input", "group", output=None) == ("original", ("input", "view"), {"output": None})
    assert hook(_original, "input", group="group") == ("original", ("input",), {"group": "view"})
    assert calls == [(("group",), {}), (("group",), {})]
    assert hook(_original, "input") == ("original", ("input",), {})  # not passed: the original says so
    assert calls == [(("group",), {}), (("group",), {})]
    ask, _ = _recording(None)
    hook = hooks.viewed(ask, "group", 0)
    assert hook(_original, "group", 4) == ("original", ("group", 4), {})
    assert (hook.form, hook.answers) == ("viewed", ("group",))


def test_a_decision_error_through_the_plugin_names_the_kill_switch():
    ask, _ = _recording(ArchDecisionError("--attention-backend fa3: no"))
    with pytest.raises(ValueError, match=r"^--attention-backend fa3: no; SGLANG_ARCH_DISABLE=1 turns sglang-arch off$"):
        hooks.check(ask)(_original, "view")


class _Recorder:
    """Stands in for the glue's logger: keeps what fail_open would have logged."""

    def __init__(self):
        self.records = []

    def warning(self, msg, *args):
        self.records.append(msg % args)

    def __getattr__(self, name):  # info/debug/...: recorded too
        return lambda msg, *args, **kw: self.records.append(f"{name}: {msg % args}")


def _every_hook_with_the_glue_answering(monkeypatch, current):
    """Call every hook over ``_original``; what each returned, and what fail_open logged."""
    from sglang_arch.integrations.sglang import glue
    from sglang_arch.integrations.sglang.targets import all_targets

    recorder = _Recorder()
    monkeypatch.setattr(glue, "current", current)
    monkeypatch.setattr(glue, "logger", recorder)
    monkeypatch.setattr(glue, "_warned", set())  # fail_open warns once per function and run
    results = []
    for target in all_targets():
        args = tuple(f"arg{i}" for i in range(len(target.params)))
        results.append((target.path, args, target.hook(_original, *args)))
    return results, recorder.records


def test_without_a_gpu_every_hook_is_upstreams_original(monkeypatch):
    """No NVIDIA GPU: the glue answers None and each hook is the original, arguments and all.

    fail_open also answers None when the glue crashes, so the test checks that nothing
    was logged: the original ran because there is no GPU, not because the glue broke.
    """
    from types import SimpleNamespace

    before = set(sys.modules)
    results, logged = _every_hook_with_the_glue_answering(monkeypatch, lambda: SimpleNamespace(resolution=None))
    assert results
    for path, args, result in results:
        assert result == ("original", args, {}), path
    assert logged == [], logged
    # Decided before any SGLang module is needed (other tests may have imported some already).
    assert not [m for m in set(sys.modules) - before if m == "sglang" or m.startswith("sglang.")]


def test_a_crashing_glue_is_told_apart_from_no_gpu(monkeypatch):
    """The check above can fail: a glue that crashes still falls back to the original,
    but fail_open's warning names the function and the error."""

    def broken():
        raise RuntimeError("glue on fire")

    results, logged = _every_hook_with_the_glue_answering(monkeypatch, broken)
    for path, args, result in results:
        assert result == ("original", args, {}), path
    assert logged and all("glue on fire" in line and "SGLang's own code decides" in line for line in logged)
