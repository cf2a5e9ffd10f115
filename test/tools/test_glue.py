"""The glue: one implementation for the plugin's hooks and for a patched SGLang tree.

The package's ``integrations/sglang/glue/`` must be able to move into
``sglang/srt/arch/glue/`` with only its registry imports translated; the plugin's hooks
must be nothing but the patched tree's guard forms over it.  No sglang needed.
"""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sglang_arch.integrations.sglang import hooks
from sglang_arch.integrations.sglang.glue import ArchDecisionError
from sglang_arch.upstream import glue as copier
from sglang_arch.upstream.sites import glue_files

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
            assert top != "sglang_arch", (name, node.lineno)  # the copy could not import it
            if at_import:
                assert top in STDLIB, (name, node.lineno, module)  # sglang and torch only inside functions
            else:
                assert top in STDLIB | {"sglang", "torch"}, (name, node.lineno, module)
    assert copier.import_problems((GLUE / f"{name}.py").read_text()) == []


def test_importing_the_plugin_and_its_glue_loads_neither_sglang_nor_torch():
    code = ("import sys, sglang_arch.integrations.sglang.targets, sglang_arch.upstream.glue; "
            "print(sorted(m for m in ('torch', 'sglang', 'libcst') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_series_copies_every_glue_module():
    # platform.py routes the probes, which are identity: the series has no probe step.
    assert {f"glue/{name}.py" for name in MODULES if name != "platform"} == set(glue_files())


# --- the import translation -----------------------------------------------------------

SOURCE = textwrap.dedent('''\
    """A glue module."""

    from __future__ import annotations

    import logging

    from ....arch.policies.collectives import (
        CUSTOM_AR_DEFAULT_ONE_SHOT_BYTES,
        CUSTOM_AR_DEFAULT_TWO_SHOT_BYTES,
    )
    from ....arch.runtime import current
    from ....arch import runtime
    from . import fail_open, routed_context


    def f():
        from ....arch.policies.attention import ModelTraits
        from sglang.srt.runtime_context import get_platform

        return "from ....arch.runtime import current"  # text, not an import
''')


def test_registry_imports_move_two_levels_and_nothing_else_changes():
    new = copier.translate_imports(SOURCE)
    assert new == (SOURCE.replace("from ....arch.policies.collectives import (", "from ..policies.collectives import (")
                   .replace("from ....arch.runtime import current\n", "from ..runtime import current\n")
                   .replace("from ....arch import runtime", "from .. import runtime")
                   .replace("from ....arch.policies.attention", "from ..policies.attention"))
    assert 'return "from ....arch.runtime import current"' in new
    assert copier.translate_imports(new) == new  # nothing left to translate


def test_an_oddly_spelled_registry_import_is_refused_rather_than_mistranslated():
    with pytest.raises(ValueError, match="changed more than the registry imports"):
        copier.translate_imports("from ....arch .runtime import current\n")
    with pytest.raises(ValueError, match="spell the registry import on one line"):
        copier.translate_imports("from \\\n    ....arch.runtime import current\n")


@pytest.mark.parametrize("code, problem", [
    ("import sglang_arch.arch\n", "imports sglang_arch.arch"),
    ("from sglang_arch.arch import runtime\n", "imports sglang_arch.arch"),
    ("def f():\n    from sglang_arch.cli import main\n", "imports sglang_arch.cli"),
    ("from ..hooks import KILL_SWITCH\n", "is neither a glue module"),
    ("from ...plan import worker\n", "is neither a glue module"),
    ("from ....cli import main\n", "is neither a glue module"),
    ("import torch\n", "imports torch at module level"),
    ("from sglang.srt.runtime_context import get_platform\n", "imports sglang.srt.runtime_context at module level"),
    ("try:\n    import torch\nexcept ImportError:\n    pass\n", "imports torch at module level"),
    ("def f():\n    import numpy\n", "imports numpy"),
])
def test_a_glue_module_that_cannot_move_is_refused(code, problem, tmp_path):
    assert any(problem in p for p in copier.import_problems(code)), copier.import_problems(code)
    (tmp_path / "fusion.py").write_text(code)
    with pytest.raises(ValueError, match="cannot move into SGLang"):
        copier.tree_module("fusion", tmp_path)


def test_allowed_glue_imports_are_not_problems():
    code = ("from __future__ import annotations\nimport sys\nfrom ....arch.runtime import current\n"
            "from . import fail_open\ndef f():\n    import torch\n    from sglang.srt.x import y\n")
    assert copier.import_problems(code) == []


@pytest.mark.parametrize("name", MODULES)
def test_the_tree_module_is_the_note_and_the_translated_source(name):
    text = copier.tree_module(name)
    note, rest = text.split("\n", 2)[:2], text.split("\n", 2)[2]
    assert note == [f"# Generated by sglang-arch from sglang_arch/integrations/sglang/glue/{name}.py;",
                    "# edit it there and rerun `sglang-arch upstream`, not here."]
    assert rest == copier.translate_imports((GLUE / f"{name}.py").read_text())
    assert "....arch" not in "".join(ast.unparse(n) for n in ast.walk(ast.parse(rest))
                                     if isinstance(n, ast.ImportFrom))


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
