"""The upstream rewriter on small synthetic sources, and the series on a synthetic tree.

No sglang needed: every source here is written by the test.  The real SGLang tree is
covered by test/integration/test_upstream_series.py.
"""

import os
import shutil
import subprocess
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("libcst", reason="the upstream rewriter needs libcst: pip install -e 'python[test]'")

from sglang_arch import __version__  # noqa: E402
from sglang_arch.cli import main  # noqa: E402
from sglang_arch.integrations.sglang.targets import all_targets  # noqa: E402
from sglang_arch.upstream import glue, series, texts  # noqa: E402
from sglang_arch.upstream.rewriter import (  # noqa: E402
    ALREADY,
    MARKER,
    REWRITTEN,
    UNTOUCHED,
    UPDATED,
    FunctionSite,
    ModulePlan,
    Mismatch,
    count_changes,
    find_function,
    guard_code,
    replace_function,
    rewrite_source,
)
from sglang_arch.upstream.sites import STEPS, glue_files  # noqa: E402

pytestmark = pytest.mark.usefixtures("memo_rewrites")  # test/conftest.py: one parse per (source, plan)

ROOT = Path(__file__).resolve().parents[2]

FUSION = ModulePlan("srt/layers/fusion.py", "fusion", (
    FunctionSite("_resolve_backend", ("backend", "is_multi_node"), "resolve_backend", ("backend", "is_multi_node")),
))

FUSION_SOURCE = '''\
"""Fusion helpers."""

import logging

import torch

from sglang.srt.runtime_context import get_platform
from sglang.srt.utils import is_flashinfer_available

logger = logging.getLogger(__name__)


def _resolve_backend(backend: str, is_multi_node: bool = False) -> str:
    """Resolve the requested backend."""
    if not (get_platform().is_sm90 or get_platform().is_sm100):  # keep this comment
        raise ValueError(
            "needs SM90 or SM10X"
        )
    return   backend    # odd spacing stays
'''


def _dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def _only_additions(old: str, new: str) -> bool:
    return count_changes(old, new)[1] == 0


# --- function sites -------------------------------------------------------------------

def test_a_matching_function_gets_the_guard_after_its_docstring():
    result = rewrite_source(FUSION_SOURCE, FUSION)
    assert [o.status for o in result.outcomes] == [REWRITTEN]
    assert result.changed and _only_additions(FUSION_SOURCE, result.new)
    body = result.new.split('"""Resolve the requested backend."""\n', 1)[1]
    assert body.startswith(
        f"    {MARKER}\n"
        "    if (arch_answer := arch_fusion.resolve_backend(backend, is_multi_node)) is not None:\n"
        "        return arch_answer\n"
        "    if not (get_platform()")
    compile(result.new, "fusion.py", "exec")


def test_formatting_and_comments_survive():
    new = rewrite_source(FUSION_SOURCE, FUSION).new
    for line in FUSION_SOURCE.splitlines():
        assert line in new.splitlines()
    assert "# keep this comment" in new and "return   backend    # odd spacing stays" in new
    assert count_changes(FUSION_SOURCE, new) == (5, 0)  # guard (3) + marker and import (2)


def test_the_glue_import_goes_where_isort_puts_it():
    new = rewrite_source(FUSION_SOURCE, FUSION).new
    assert (
        "import torch\n\n"
        f"{MARKER}\n"
        "from sglang.srt.arch.glue import fusion as arch_fusion\n"
        "from sglang.srt.runtime_context import get_platform\n"
    ) in new


def test_a_second_glue_import_joins_the_first_under_one_marker():
    attention = ModulePlan("srt/layers/fusion.py", "attention", (
        FunctionSite("_resolve_backend", ("backend", "is_multi_node"), "check_explicit_backends", ("backend",),
                     form="check"),
    ))
    other = ModulePlan(FUSION.path, "fusion", (FunctionSite("helper", (), "auto_enable"),))
    source = FUSION_SOURCE + "\n\ndef helper():\n    return {}\n"
    first = rewrite_source(source, other).new
    both = rewrite_source(first, attention).new
    assert both.count(MARKER) == 3  # one import marker, two guards
    assert ("from sglang.srt.arch.glue import attention as arch_attention\n"
            "from sglang.srt.arch.glue import fusion as arch_fusion\n") in both
    assert f"{MARKER}\nfrom sglang.srt.arch.glue import attention" in both


def test_a_module_without_sglang_imports_gets_a_new_section():
    plan = ModulePlan("srt/x.py", "collectives", (FunctionSite("_get_all_reduce_configs", (), "all_reduce_configs"),))
    source = _dedent('''
        """Configs."""

        from functools import cache

        import torch

        KB = 1024


        @cache
        def _get_all_reduce_configs() -> dict:
            return {}
    ''')
    new = rewrite_source(source, plan).new
    assert ("import torch\n\n" + MARKER + "\nfrom sglang.srt.arch.glue import collectives as arch_collectives\n\n"
            "KB = 1024") in new
    assert "@cache\ndef _get_all_reduce_configs() -> dict:\n    " + MARKER in new


def test_a_method_is_found_in_its_class_and_the_done_form_returns():
    plan = ModulePlan("srt/symm.py", "collectives", (
        FunctionSite("Comm.__init__", ("self", "group", "device"), "init_torch_symm_mem", ("self", "group", "device"),
                     form="done", uses=("torch_symm_mem",)),
    ))
    source = _dedent('''
        try:
            import torch.distributed._symmetric_memory as torch_symm_mem
        except ImportError:
            pass


        class Comm:
            def __init__(self, group, device):
                self.disabled = True
    ''')
    new = rewrite_source(source, plan).new
    assert (f"    def __init__(self, group, device):\n        {MARKER}\n"
            "        if arch_collectives.init_torch_symm_mem(self, group, device):\n            return\n"
            "        self.disabled = True") in new


def test_a_long_guard_is_laid_out_as_black_does():
    site = FunctionSite("get_default_attn_backend", ("server_args", "use_mla_backend", "model_config"),
                        "default_backend", ("server_args", "use_mla_backend", "model_config"))
    assert guard_code(site, "arch_attention", 4) == (
        "if (\n"
        "    arch_answer := arch_attention.default_backend(\n"
        "        server_args, use_mla_backend, model_config\n"
        "    )\n"
        ") is not None:\n"
        "    return arch_answer\n")
    short = FunctionSite("f", ("a",), "resolve", ("a",))
    assert guard_code(short, "arch_fusion", 4) == (
        "if (arch_answer := arch_fusion.resolve(a)) is not None:\n    return arch_answer\n")


# --- mismatches -----------------------------------------------------------------------

@pytest.mark.parametrize("source, reason", [
    (FUSION_SOURCE.replace("is_multi_node: bool = False", "is_multi_node: bool = False, world_size: int = 1"),
     "parameters are (backend, is_multi_node, world_size), expected (backend, is_multi_node)"),
    (FUSION_SOURCE.replace("def _resolve_backend", "def _resolve_fusion_backend"), "_resolve_backend is missing"),
    (FUSION_SOURCE + "\n\ndef _resolve_backend(backend, is_multi_node):\n    return backend\n",
     "_resolve_backend is defined 2 times"),
    (FUSION_SOURCE.replace("    return   backend", "    arch_answer = backend\n    return   backend"),
     "it already uses the name arch_answer"),
    (FUSION_SOURCE.replace("logger = ", "arch_fusion = None\nlogger = "), "the module already defines arch_fusion"),
])
def test_a_site_of_another_shape_is_reported_and_the_file_left_alone(source, reason):
    result = rewrite_source(source, FUSION)
    assert [o.status for o in result.outcomes] == [UNTOUCHED]
    assert reason in result.outcomes[0].reason
    assert result.new == source and not result.changed


def test_a_missing_module_name_the_glue_reads_is_a_mismatch():
    plan = ModulePlan(FUSION.path, "fusion", (
        FunctionSite("_resolve_backend", ("backend", "is_multi_node"), "resolve_backend", ("backend",),
                     uses=("get_platform", "_mnnvl_supported")),
    ))
    result = rewrite_source(FUSION_SOURCE, plan)
    assert result.outcomes[0].status == UNTOUCHED
    assert "no longer defines _mnnvl_supported" in result.outcomes[0].reason


def test_one_mismatch_leaves_the_whole_module_unrewritten():
    plan = ModulePlan(FUSION.path, "fusion", FUSION.sites + (FunctionSite("auto_enable_pass", ("view",), "auto_enable",
                                                                          ("view",)),))
    result = rewrite_source(FUSION_SOURCE, plan)
    assert [o.status for o in result.outcomes] == [UNTOUCHED, UNTOUCHED]
    assert "another site of this module does not match" in result.outcomes[0].reason
    assert "auto_enable_pass is missing" in result.outcomes[1].reason
    assert result.new == FUSION_SOURCE


# --- idempotency and updates ----------------------------------------------------------

def test_replace_function_swaps_the_named_function_and_nothing_else():
    import libcst as cst

    source = _dedent('''
        class A:
            def f(self):
                return 1

            def g(self):
                return 2


        def g():
            return 3
        ''')
    module = cst.parse_module(source)
    old = find_function(module, "A.g")
    new = old.with_changes(body=old.body.with_changes(body=[cst.parse_statement("return 20")]))
    out = replace_function(module, "A.g", new)
    assert out.code == source.replace("return 2\n", "return 20\n")
    assert out.body[1] is module.body[1]  # the top-level g: the same node, not rebuilt
    top = find_function(module, "g")
    out = replace_function(module, "g", top.with_changes(body=top.body.with_changes(body=[cst.parse_statement("pass")])))
    assert out.code == source.replace("    return 3\n", "    pass\n") and out.body[0] is module.body[0]
    for missing in ("A.h", "B.g", "h"):
        with pytest.raises(Mismatch):
            replace_function(module, missing, new)


def test_rewriting_twice_changes_nothing():
    once = rewrite_source(FUSION_SOURCE, FUSION)
    twice = rewrite_source(once.new, FUSION)
    assert [o.status for o in twice.outcomes] == [ALREADY]
    assert twice.new == once.new and not twice.changed


def test_a_guard_from_an_older_version_is_replaced_in_place():
    once = rewrite_source(FUSION_SOURCE, FUSION).new
    old = once.replace("arch_fusion.resolve_backend(backend, is_multi_node)", "arch_fusion.resolve(backend)")
    result = rewrite_source(old, FUSION)
    assert [o.status for o in result.outcomes] == [UPDATED]
    assert result.new == once


# --- probe sites ----------------------------------------------------------------------

# --- the site table is the plugin's spec ----------------------------------------------

def _upstream_path(plan, site):
    module = "sglang." + plan.path[:-3].replace("/", ".")
    return f"{module}.{site.label}"


def _site_functions():
    """upstream path -> (glue module, edit) for every site of the series that names a function."""
    out = {}
    for step in STEPS:
        for plan in step.modules:
            for site in plan.sites:
                qualname = getattr(site, "qualname", None)
                if qualname:
                    out.setdefault(_upstream_path(plan, SimpleNamespace(label=qualname)), []).append((plan.glue, site))
    return out


def _covering_targets(targets):
    """function path -> the plugin target whose ``covers`` names a check in it: a function the
    plugin cannot hook (a custom op SGLang registers with the function itself) is routed from
    the one Python entry that calls it, while the series edits the function itself."""
    return {cover.split(":", 1)[0]: target for target in targets.values() for cover in target.covers}


def test_the_sites_are_the_plugin_targets_with_the_same_parameters():
    """Every function the series edits is a plugin target (the spec), with the same parameters,
    or a function whose check a target covers from its caller (then that target is the site's);
    every decision target is edited by the series (the probes are identity: no step)."""
    sites = _site_functions()
    targets = {t.path: t for t in all_targets() if t.concern != "platform facts"}
    covering = _covering_targets(targets)
    assert {path if path in targets else covering[path].path for path in sites} == set(targets)
    for path, edits in sites.items():
        for _, site in edits:
            if path in targets:  # a series site writes ``**kwargs`` as the source does
                assert tuple(p.lstrip("*") for p in site.params) == targets[path].params, path
            else:  # edited where the plugin covers it: the covered function's own parameters
                import inspect
                import pkgutil

                owner, attr = path.rsplit(".", 1)
                function = getattr(pkgutil.resolve_name(owner), attr)
                function = getattr(function, "__wrapped__", function)
                assert tuple(p.lstrip("*") for p in site.params) == tuple(inspect.signature(function).parameters), path


def test_each_step_covers_what_its_targets_cover():
    """The audit sites a step takes besides its own functions (``Step.covers``) are those its
    functions' plugin targets take (``Target.covers``), less the checks in functions the step
    edits itself where the plugin covers them from a caller: the two columns route alike."""
    targets = {t.path: t for t in all_targets()}
    covering = _covering_targets(targets)
    for step in STEPS:
        paths = {_upstream_path(plan, SimpleNamespace(label=site.qualname))
                 for plan in step.modules for site in plan.sites if getattr(site, "qualname", None)}
        owners = {path if path in targets else covering[path].path for path in paths}
        edited_for = paths - set(targets)  # edited here where the plugin covers them from a caller
        expected = {sel for path in owners for sel in targets[path].covers if sel.split(":", 1)[0] not in edited_for}
        assert set(step.covers) == expected, step.key
        assert len(step.covers) == len(set(step.covers)), step.key


def test_every_glue_function_the_series_calls_exists_in_the_plugins_glue():
    """One implementation: the patched tree calls the plugin's own glue modules."""
    import importlib

    for path, edits in _site_functions().items():
        for glue_name, site in edits:
            module = importlib.import_module(f"sglang_arch.integrations.sglang.glue.{glue_name}")
            assert callable(getattr(module, site.call, None)), (path, site.call)


def test_no_step_routes_the_platform_probes():
    """The probes are identity (docs/fallback.md): no step touches utils/common.py."""
    assert not any(plan.path == "srt/utils/common.py" for step in STEPS for plan in step.modules)


# --- templates and generated docs -----------------------------------------------------

def test_the_pr_docs_are_the_templates():
    """docs/upstream/*.md are generated: `python -m sglang_arch.upstream.texts` rewrites them."""
    docs = ROOT / "docs" / "upstream"
    expected = texts.pr_docs()
    assert sorted(p.name for p in docs.glob("PR-*.md")) == sorted(expected)
    for name, text in expected.items():
        assert (docs / name).read_text(encoding="utf-8") == text, f"docs/upstream/{name} drifted from its template"


def test_the_tests_a_pr_text_names_exist():
    """A PR's 'How it was tested' names sglang-arch's own tests: each must be a file of this repository."""
    import re

    named = {path for step in STEPS for path in re.findall(r"`(test/(?:unit|integration)/[\w/]+\.py)`",
                                                          texts.pr_text(step)[1])}
    assert named, "no PR text names a test of this repository"
    assert not [path for path in sorted(named) if not (ROOT / path).is_file()]


def test_every_step_has_a_subject_and_the_four_sections():
    for step in STEPS:
        subject, body = texts.pr_text(step)
        assert subject.startswith("[arch] ") and len(subject) <= 100
        for section in ("## What", "## Why", "## How it falls back", "## How it was tested"):
            assert section in body, (step.pr_name, section)


def test_the_series_writes_the_plugins_glue():
    """The glue modules are the plugin's, with only their registry imports translated."""
    files = series.registry_files()
    assert files["srt/arch/glue/__init__.py"] == glue.tree_module("__init__")
    assert set(glue_files()) == {"glue/__init__.py", "glue/collectives.py", "glue/fusion.py", "glue/attention.py",
                                 "glue/moe.py"}


def test_the_registry_is_portable_and_copied_byte_for_byte():
    files = series.registry_files()
    source = series.registry_source_dir()
    for rel, text in files.items():
        inner = rel[len("srt/arch/"):]
        if inner == "README.md":
            assert text.startswith(texts.README_FIRST_LINE)
        elif inner.startswith("glue/"):
            assert text == glue.tree_module(inner[len("glue/"):-len(".py")])
        else:
            assert (source / inner).read_text(encoding="utf-8") == text


@pytest.mark.parametrize("code, depth, problem", [
    ("import sglang_arch.arch\n", 0, "imports sglang_arch.arch"),
    ("from sglang_arch.arch import runtime\n", 0, "imports sglang_arch.arch"),
    ("from ...cli import main\n", 1, "relative import leaves the package"),
    ("import numpy\n", 0, "imports numpy"),
])
def test_a_registry_that_imports_outside_itself_is_refused(code, depth, problem, tmp_path):
    assert any(problem in p for p in series.portability_problems(code, depth))
    (tmp_path / "bad.py").write_text(code if depth == 0 else "", encoding="utf-8")
    if depth == 0:
        with pytest.raises(ValueError, match="cannot move into SGLang unchanged"):
            series.registry_files(tmp_path)


def test_allowed_imports_are_not_problems():
    code = "from __future__ import annotations\nimport os\nfrom .registry import resolve\nfrom ..profile import MIB\n" \
           "def f():\n    import torch\n    import pynvml\n"
    assert series.portability_problems(code, 1) == []


# --- the series on a synthetic tree ---------------------------------------------------

def _installed_sglang():
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs the sglang package's sources (the series edits its real call sites)")
    return Path(list(spec.submodule_search_locations)[0])


def make_synthetic_tree(root):
    """``root/python/sglang`` with SGLang's own copies of the files the series edits; root."""
    installed = _installed_sglang()
    package = root / "python" / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    for step in STEPS:
        for plan in step.modules:
            (package / plan.path).parent.mkdir(parents=True, exist_ok=True)
            (package / plan.path).write_bytes((installed / plan.path).read_bytes())
    return root


@pytest.fixture()
def synthetic_tree(tmp_path):
    return make_synthetic_tree(tmp_path / "clone")


def _git(root, *args, env=None):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True, env=env).stdout


def test_check_reports_and_writes_nothing_then_apply_and_reapply(synthetic_tree, capsys):
    before = {p: p.read_bytes() for p in synthetic_tree.rglob("*") if p.is_file()}
    code = main(["upstream", str(synthetic_tree), "--check"])
    out = capsys.readouterr().out
    assert code == 1 and "would be rewritten" in out and "nothing written" in out
    assert {p: p.read_bytes() for p in synthetic_tree.rglob("*") if p.is_file()} == before
    assert main(["upstream", str(synthetic_tree)]) == 0
    out = capsys.readouterr().out
    assert out.count(" rewritten") == sum(len(p.sites) for s in STEPS for p in s.modules)
    for name in ("__init__", "collectives", "fusion", "attention"):
        written = (synthetic_tree / f"python/sglang/srt/arch/glue/{name}.py").read_text(encoding="utf-8")
        assert written == glue.tree_module(name)
    assert main(["upstream", str(synthetic_tree), "--check"]) == 0
    assert "nothing to do" in capsys.readouterr().out


def _commit_base(tree, tmp_path, monkeypatch):
    """``tree`` as a git repository with one commit, and no user or system git config."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    _git(tree, "init", "-q")
    _git(tree, "add", ".")
    _git(tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")


def test_into_git_commits_each_step_with_its_pr_text(synthetic_tree, tmp_path, capsys, monkeypatch):
    _commit_base(synthetic_tree, tmp_path, monkeypatch)
    assert main(["upstream", str(synthetic_tree), "--into-git"]) == 0
    n = len(STEPS)
    log = _git(synthetic_tree, "log", "--format=%an|%s", f"-{n + 1}").splitlines()
    subjects = [texts.pr_text(step)[0] for step in reversed(STEPS)]
    assert log[:n] == [f"sglang-arch|{s}" for s in subjects] and log[n] == "t|base"
    body = _git(synthetic_tree, "log", "-1", "--format=%b", f"HEAD~{n - 1}")
    assert texts.pr_text(STEPS[0])[1].splitlines()[0] in body and "Generated-by: sglang-arch" in body
    assert _git(synthetic_tree, "status", "--porcelain") == ""
    capsys.readouterr()
    assert main(["upstream", str(synthetic_tree), "--into-git"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert len(_git(synthetic_tree, "log", "--format=%h").splitlines()) == n + 1
    # A registry file sglang-arch no longer has goes away in a refresh commit of step 1.
    _written_by_an_older_version(synthetic_tree, "old_policy.py")
    _git(synthetic_tree, "add", ".")
    _git(synthetic_tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "stale")
    assert main(["upstream", str(synthetic_tree), "--into-git"]) == 0
    assert _git(synthetic_tree, "log", "-1", "--format=%s") == f"[arch] Refresh step 1 (registry) from sglang-arch {__version__}\n"
    assert _git(synthetic_tree, "show", "--name-status", "--format=", "HEAD").split() == [
        "M", "python/sglang/srt/arch/README.md", "D", "python/sglang/srt/arch/old_policy.py"]


def test_into_git_refuses_uncommitted_edits_of_a_file_it_writes(synthetic_tree, capsys):
    _git(synthetic_tree, "init", "-q")
    _git(synthetic_tree, "add", ".")
    _git(synthetic_tree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    target = synthetic_tree / "python/sglang/srt/layers/flashinfer_comm_fusion.py"
    target.write_text(target.read_text() + "# local edit\n")
    assert main(["upstream", str(synthetic_tree), "--into-git"]) == 2
    err = capsys.readouterr().err
    assert "uncommitted changes" in err and "flashinfer_comm_fusion.py" in err and len(err.splitlines()) == 1
    assert not (synthetic_tree / "python/sglang/srt/arch").exists()


def test_a_foreign_srt_arch_is_left_alone_with_every_step(synthetic_tree, capsys):
    foreign = synthetic_tree / "python/sglang/srt/arch"
    foreign.mkdir()
    (foreign / "__init__.py").write_text("# SGLang's own\n")
    assert main(["upstream", str(synthetic_tree)]) == 1
    out = capsys.readouterr().out
    assert "was not written by sglang-arch" in out and "needs the registry (step 1)" in out
    assert (foreign / "__init__.py").read_text() == "# SGLang's own\n" and len(list(foreign.iterdir())) == 1


def _written_by_an_older_version(tree, name, text="OLD = 1\n"):
    """``srt/arch/<name>``, listed in the README as a file sglang-arch wrote (as an older
    sglang-arch, whose registry had it, would have written it)."""
    (tree / f"python/sglang/srt/arch/{name}").write_text(text)
    readme = tree / "python/sglang/srt/arch/README.md"
    readme.write_text(readme.read_text() + f"- `{name}`\n")


def test_stale_registry_files_are_removed_on_refresh(synthetic_tree, capsys):
    assert main(["upstream", str(synthetic_tree)]) == 0
    _written_by_an_older_version(synthetic_tree, "old_policy.py")
    stale = synthetic_tree / "python/sglang/srt/arch/old_policy.py"
    readme = synthetic_tree / "python/sglang/srt/arch/README.md"
    readme.write_text(readme.read_text() + "edited here\n")
    capsys.readouterr()
    assert main(["upstream", str(synthetic_tree)]) == 0
    out = capsys.readouterr().out
    assert "updated" in out and not stale.exists() and "edited here" not in readme.read_text()
    assert "removed       python/sglang/srt/arch/old_policy.py, +0 -1" in out


def test_into_git_needs_a_work_tree(synthetic_tree, capsys, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(synthetic_tree.parent))
    assert main(["upstream", str(synthetic_tree), "--into-git"]) == 2
    assert "not inside a git work tree" in capsys.readouterr().err


@pytest.mark.parametrize("make", ["missing", "empty", "file"])
def test_src_of_another_kind_is_one_line_exit_2(tmp_path, capsys, make):
    src = tmp_path / "src"
    if make == "empty":
        src.mkdir()
    elif make == "file":
        src.write_text("x")
    assert main(["upstream", str(src)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "expected an SGLang git clone (with python/sglang/srt/) or an installed sglang package" in err


def test_check_and_into_git_exclude_each_other(synthetic_tree, capsys):
    assert main(["upstream", str(synthetic_tree), "--check", "--into-git"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_installed_layout_is_detected(synthetic_tree):
    tree = series.locate(str(synthetic_tree / "python" / "sglang"))
    assert tree.layout == "installed package" and tree.package == (synthetic_tree / "python/sglang").resolve()
    tree = series.locate(str(synthetic_tree))
    assert tree.layout == "git clone"


def test_written_files_keep_their_mode(synthetic_tree):
    target = synthetic_tree / "python/sglang/srt/layers/flashinfer_comm_fusion.py"
    os.chmod(target, 0o640)
    assert main(["upstream", str(synthetic_tree)]) == 0
    assert target.stat().st_mode & 0o777 == 0o640


# --- the series' own tests (SGLang's CPU CI layout, git clone only) ----------------------

TEST_TEMPLATES = sorted(series.TEST_FILES.values())


@pytest.mark.parametrize("name", TEST_TEMPLATES)
def test_the_test_templates_are_sglang_style_python(name):
    import ast
    import sys

    text = texts.template(f"tests/{name}")
    compile(text, name, "exec")
    tree = ast.parse(text)
    calls = [n.value for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    assert [ast.unparse(c.func) for c in calls] == ["register_cpu_ci"]
    assert [a.value for a in calls[0].args][1] == "base-a-test-cpu" and not calls[0].keywords
    imports = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert {"sglang.test.ci.ci_register", "sglang.test.test_utils"} <= imports
    for module in imports | {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}:
        assert module.split(".")[0] in sys.stdlib_module_names or module.startswith(
            ("sglang.srt.arch", "sglang.test.", "sglang.srt.")), module  # no hypothesis, no sglang_arch
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert classes and all(c.name.startswith(("Test", "Arch")) for c in classes)
    assert all(ast.unparse(c.bases[0]) in ("CustomTestCase", "ArchMachineTestCase") for c in classes)
    assert ast.unparse(tree.body[-1]) == "if __name__ == '__main__':\n    unittest.main()"


def test_a_git_clone_gets_the_test_files_counted_apart_from_the_call_sites(synthetic_tree, capsys):
    tree = series.locate(str(synthetic_tree))
    steps = series.plan_series(tree)
    tests = {s.step.number: [c for c in s.changes if c.is_test] for s in steps}
    assert {n: [c.path for c in cs] for n, cs in tests.items() if cs} == {
        1: [f"{series.TESTS_DIR}/test_arch_registry.py"], 4: [f"{series.TESTS_DIR}/test_arch_call_sites.py"]}
    four = steps[3]
    lines = sum(change.counts[0] for change in tests[4])
    assert four.test_counts == (lines, 0)
    assert four.call_site_counts == tuple(map(sum, zip(*[c.counts for c in four.changes if not c.is_test
                                                         and not c.path.startswith("srt/arch/")])))
    assert main(["upstream", str(synthetic_tree)]) == 0
    out = capsys.readouterr().out
    assert f"(call sites +{four.call_site_counts[0]} -{four.call_site_counts[1]}, tests +{lines} -0)" in out
    for name in TEST_TEMPLATES:
        written = synthetic_tree / series.TESTS_DIR / name
        assert written.read_text(encoding="utf-8") == texts.template(f"tests/{name}")
    assert main(["upstream", str(synthetic_tree), "--check"]) == 0  # up to date, tests included


def test_the_commits_include_the_test_files(synthetic_tree, tmp_path, monkeypatch):
    _commit_base(synthetic_tree, tmp_path, monkeypatch)
    assert main(["upstream", str(synthetic_tree), "--into-git"]) == 0
    def commit_of(step: int) -> list:  # HEAD is the last step's commit
        return _git(synthetic_tree, "show", "--name-only", "--format=", f"HEAD~{len(STEPS) - step}").split()

    for step, name in series.TEST_FILES.items():
        assert f"{series.TESTS_DIR}/{name}" in commit_of(step), (step, name)
    assert f"{series.TESTS_DIR}/test_arch_registry.py" in commit_of(1)
    assert _git(synthetic_tree, "status", "--porcelain") == ""


def test_an_installed_package_gets_no_tests_and_one_line_saying_so(synthetic_tree, capsys):
    package = synthetic_tree / "python" / "sglang"
    assert main(["upstream", str(package)]) == 0
    out = capsys.readouterr().out
    assert out.count(series.NO_TEST_TREE) == 1 and "tests +" not in out
    assert not (synthetic_tree / "test").exists() and not (package / "test").exists()


def test_a_left_out_step_leaves_the_call_site_tests_out(synthetic_tree, capsys):
    fusion = synthetic_tree / "python/sglang/srt/layers/flashinfer_comm_fusion.py"
    fusion.write_text(fusion.read_text().replace("is_multi_node: bool = False) -> str:",
                                                 "is_multi_node: bool = False, x: int = 1) -> str:"))
    assert main(["upstream", str(synthetic_tree)]) == 1
    out = capsys.readouterr().out
    assert "test_arch_call_sites.py not written: it tests every step, and step(s) 3 were left out" in out
    assert (synthetic_tree / series.TESTS_DIR / "test_arch_registry.py").is_file()
    assert not (synthetic_tree / series.TESTS_DIR / "test_arch_call_sites.py").exists()


def test_a_symlinked_test_folder_is_refused_before_anything_is_written(synthetic_tree, tmp_path, capsys):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (synthetic_tree / "test").mkdir()
    (synthetic_tree / "test" / "registered").symlink_to(outside, target_is_directory=True)
    before = {p: p.read_bytes() for p in synthetic_tree.rglob("*") if p.is_file()}
    assert main(["upstream", str(synthetic_tree)]) == 2
    err = capsys.readouterr().err
    assert "is a symlink" in err and len(err.strip().splitlines()) == 1
    assert list(outside.iterdir()) == [] and not (synthetic_tree / "python/sglang/srt/arch").exists()
    assert {p: p.read_bytes() for p in synthetic_tree.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("rel", ["../outside.py", "test/../../x.py", "/etc/passwd"])
def test_paths_relative_to_src_stay_inside_it(synthetic_tree, rel):
    tree = series.locate(str(synthetic_tree))
    with pytest.raises(ValueError):
        series.confine(tree, rel, "src")
    assert series.confine(tree, "test/registered/unit/arch/x.py", "src") == tree.src / "test/registered/unit/arch/x.py"


# --- hostile trees: nothing half-written, every file named ------------------------------

def _snapshot(root):
    """Every path under root with its bytes (None for a folder): what a failed run must leave as it was."""
    return {p.relative_to(root).as_posix(): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


def test_a_folder_where_the_series_writes_a_file_is_refused_before_any_write(synthetic_tree, capsys):
    blocker = synthetic_tree / "python/sglang/srt/arch/glue/fusion.py"
    blocker.mkdir(parents=True)
    (synthetic_tree / "python/sglang/srt/arch/README.md").write_text(texts.template("registry-README.md"))
    before = _snapshot(synthetic_tree)
    assert main(["upstream", str(synthetic_tree)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and str(blocker) in err and "not a regular file" in err, err
    assert _snapshot(synthetic_tree) == before


def test_a_write_that_fails_midway_leaves_the_tree_as_it_was(synthetic_tree, capsys, monkeypatch):
    """The series stages every file before replacing any: a failure while staging (a full
    disk, here on the fifth file) removes what it staged, folders included, and names the file."""
    from sglang_arch import files

    real = files._new_file
    calls = []

    def new_file(path, *args, **kwargs):
        calls.append(path)
        if len(calls) == 5:
            raise OSError(28, "No space left on device")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(files, "_new_file", new_file)
    before = _snapshot(synthetic_tree)
    assert main(["upstream", str(synthetic_tree)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "No space left on device" in err and "nothing was written" in err, err
    assert str(calls[4]) in err  # the file that could not be written, by its real path
    assert _snapshot(synthetic_tree) == before


def test_source_nested_deeper_than_python_takes_is_reported_not_parsed(synthetic_tree, capsys):
    """libcst's native parser overflows its stack (a segfault) on such nesting; CPython refuses
    it first, and the file is named in one line (exit 2, nothing written)."""
    target = synthetic_tree / "python/sglang/srt/layers/flashinfer_comm_fusion.py"
    target.write_text(target.read_text() + "x = " + "(" * 2000 + "1" + ")" * 2000 + "\n")
    before = _snapshot(synthetic_tree)
    assert main(["upstream", str(synthetic_tree)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"{target}: does not parse (too many nested parentheses" in err, err
    assert _snapshot(synthetic_tree) == before


@pytest.mark.parametrize("content, problem", [
    (b"\xff\xfe", "not UTF-8 (byte 0)"),
    (None, "larger than"),
])
def test_a_source_that_cannot_be_read_is_named(synthetic_tree, capsys, content, problem):
    target = synthetic_tree / "python/sglang/srt/layers/flashinfer_comm_fusion.py"
    if content is None:
        with open(target, "r+b") as fh:  # sparse: no disk used
            fh.truncate(8 * 1024 * 1024)
    else:
        target.write_bytes(content)
    assert main(["upstream", str(synthetic_tree)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and str(target) in err and problem in err, err


def test_into_git_names_paths_literally_not_as_patterns(synthetic_tree, tmp_path, capsys):
    """SRC "s*" beside "sX" in one repository: an uncommitted edit in sX is not SRC's business."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("s*", "sX"):
        shutil.copytree(synthetic_tree, repo / name)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    other = repo / "sX/python/sglang/srt/layers/flashinfer_comm_fusion.py"
    other.write_text(other.read_text() + "# local edit\n")
    assert main(["upstream", str(repo / "s*"), "--into-git"]) == 0, capsys.readouterr().err
    assert _git(repo, "status", "--porcelain").strip() == "M sX/python/sglang/srt/layers/flashinfer_comm_fusion.py"


# --- replace edits: a nested condition, a probe imported in the body -------------------

NESTED_SOURCE = '''\
from sglang.srt.runtime_context import (
    get_parallel,
    get_platform,
    get_spec,
)


class Backend:
    def replay(self, bs, mode):
        if mode.is_decode():
            pass
        elif mode.is_verify():
            if (
                self.next_n >= 2
                and get_platform().is_sm100
                and bs > 0
            ):
                return True
        return get_parallel(), get_spec()
'''


def test_replace_fact_reaches_a_read_nested_in_an_elif_and_the_import_keeps_its_layout():
    from sglang_arch.upstream.replace import Delete, ReplaceFact

    plan = ModulePlan("srt/backend.py", "attention", (
        ReplaceFact("Backend.replay", ("self", "bs", "mode"), "is_sm100", "native_here", ()),
        Delete((), unused=("get_platform",), what="platform import"),
    ))
    result = rewrite_source(NESTED_SOURCE, plan)
    assert [o.status for o in result.outcomes] == [REWRITTEN, REWRITTEN]
    assert ("                self.next_n >= 2\n"
            "                and arch_attention.native_here()\n"
            "                and bs > 0\n") in result.new
    # the import keeps its layout: one line less, the trailing comma stays
    assert "    get_parallel,\n    get_spec,\n)\n" in result.new and "get_platform" not in result.new
    compile(result.new, "backend.py", "exec")
    again = rewrite_source(result.new, plan)
    assert [o.status for o in again.outcomes][0] == ALREADY and again.new == result.new
