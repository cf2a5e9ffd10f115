"""``sglang-arch upstream`` under faults: all of it, or nothing.

A run that fails anywhere (git refusing the k-th commit: a pre-commit hook, signing with
a ``gpg.program`` that fails, ``index.lock`` or the branch's lock held by another git; a
rename failing between two others; a staged file vanishing; a folder git ignores; a
second sglang-arch holding SRC's lock) leaves the tree, the index (``git status
--porcelain``, ``git diff --cached``) and HEAD exactly as they were; a run that does not
fail commits every step.  hypothesis drives the plan and the fault's kind and place on a
small synthetic tree (the apply phase alone, fast); the named cases below run the whole
command on SGLang's own target files (``synthetic_tree``), and
test/integration/test_upstream_series.py runs one on the installed SGLang 0.5.23.
"""

import copy
import errno
import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

pytest.importorskip("libcst", reason="the upstream rewriter needs libcst: pip install -e 'python[test]'")

from sglang_arch import files  # noqa: E402
from sglang_arch.cli import main  # noqa: E402
from sglang_arch.upstream import series  # noqa: E402
from sglang_arch.upstream.sites import STEPS  # noqa: E402

from .test_upstream_rewriter import make_synthetic_tree  # noqa: E402


def git(root, *args, check=True):
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {out.stderr}")
    return out.stdout


def state(root):
    """What a failed run must leave as it was: every file (bytes), the index and HEAD."""
    tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            tree[path.relative_to(root).as_posix()] = None if path.is_dir() else path.read_bytes()
    return {"tree": tree, "status": git(root, "status", "--porcelain", "--untracked-files=all"),
            "cached": git(root, "diff", "--cached"), "head": git(root, "rev-parse", "--verify", "-q", "HEAD",
                                                                    check=False)}


@pytest.fixture(autouse=True)
def _no_user_git_config(tmp_path_factory, monkeypatch):
    empty = tmp_path_factory.getbasetemp() / "gitconfig"
    empty.touch()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def commit_all(root, message="base"):
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def fail_at_commit(root, hooks, k, action="exit 1"):
    """A pre-commit hook that runs ``action`` at the k-th commit (0: never)."""
    hooks.mkdir(exist_ok=True)
    hook = hooks / "pre-commit"
    hook.write_text(f'#!/bin/sh\nn=$(( $(cat "{hooks}/count" 2>/dev/null || echo 0) + 1 ))\necho $n > "{hooks}/count"\n'
                    f'if [ $n -eq {k} ]; then {action}; fi\nexit 0\n')
    hook.chmod(0o755)
    git(root, "config", "core.hooksPath", str(hooks))


# --- the property: generated plans, generated faults -----------------------------------------

POOL = [("srt/arch/__init__.py", "package"), ("srt/arch/table.py", "package"), ("srt/arch/glue/x.py", "package"),
        ("srt/m1.py", "package"), ("srt/m2.py", "package"), ("srt/sub/m3.py", "package"),
        ("test/registered/unit/arch/test_x.py", "src")]
GIT_FAULTS = ["none", "hook", "gpg", "index.lock", "ref.lock", "replace", "vanish", "ignored"]


@st.composite
def plans(draw):
    """1-4 steps of 1-3 file changes each (the series' test file, relative to SRC, among
    them), consistent with the tree they start from (srt/m1.py and srt/m2.py exist): add
    what is absent, change or remove what is there; never a change that changes nothing."""
    present = {("srt/m1.py", "package"): "M1 = 1\n", ("srt/m2.py", "package"): "M2 = 2\n"}
    steps = []
    for number in range(1, draw(st.integers(1, 4)) + 1):
        changes = []
        for rel, base in draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=3, unique=True)):
            old = present.get((rel, base))
            remove = old is not None and draw(st.booleans())
            new = None if remove else draw(st.text("abc =\n", min_size=1, max_size=12)) + "\n"
            if new == old:
                continue
            changes.append(series.FileChange(rel, old, new, base))
            if new is None:
                present.pop((rel, base))
            else:
                present[(rel, base)] = new
        steps.append(series.StepResult(STEPS[number - 1], changes=changes, owned=[(c.path, c.base) for c in changes]))
    return steps


def _small_tree(root):
    package = root / "python" / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "srt" / "m1.py").write_text("M1 = 1\n")
    (package / "srt" / "m2.py").write_text("M2 = 2\n")
    (root / "notes.txt").write_text("mine\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root)
    (root / "notes.txt").write_text("mine, staged\n")  # the user's own staged work: it must stay staged
    git(root, "add", "notes.txt")
    return series.Tree(root, package, "git clone")


@settings(max_examples=15, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=plans(), fault=st.sampled_from(GIT_FAULTS), at=st.integers(1, 6))
def test_into_git_commits_every_step_or_leaves_everything_as_it_was(tmp_path_factory, monkeypatch, steps, fault, at):
    root = tmp_path_factory.mktemp("repo")
    tree = _small_tree(root)
    hooks = tmp_path_factory.mktemp("hooks")
    if fault == "hook":
        fail_at_commit(root, hooks, at)
    elif fault == "gpg":
        git(root, "config", "commit.gpgsign", "true")
        git(root, "config", "gpg.program", "false")
    elif fault in ("index.lock", "ref.lock"):  # another git takes a lock while the k-th commit runs
        lock = root / ".git" / ("index.lock" if fault == "index.lock" else "refs/heads/main.lock")
        # ... and gives it back a moment later (index.lock: once the run has ended, below)
        release = "" if fault == "index.lock" else f'; (sleep 0.3; rm -f "{lock}") >/dev/null 2>&1 &'
        fail_at_commit(root, hooks, at, action=f'touch "{lock}"{release}')
    elif fault == "ignored":
        (root / ".gitignore").write_text("python/sglang/srt/arch/\n")
        git(root, "add", ".gitignore")
    before = state(root)
    calls = {"n": 0}
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == at and fault == "replace":
            raise OSError(errno.EIO, "Input/output error")
        if calls["n"] == at and fault == "vanish":
            os.unlink(src)
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(files.os, "replace", replace)
    try:
        series.apply_series(tree, steps, series._Git(tree))
    except ValueError as exc:
        failed = str(exc)
    else:
        failed = None
    finally:
        monkeypatch.undo()
        for lock in (root / ".git" / "index.lock", root / ".git" / "refs/heads/main.lock"):
            lock.unlink(missing_ok=True)  # the other git has finished
    event(f"{fault}: {'rolled back' if failed else 'completed'}")
    if failed is not None:
        assert "\n" not in failed
        assert state(root) == before, failed
        return
    made = [s for s in steps if s.changes]
    assert git(root, "rev-list", "--count", f"{before['head'].strip()}..HEAD").strip() == str(len(made))
    after = state(root)
    assert after["cached"] == before["cached"] and after["status"] == before["status"]  # committed, the rest kept
    for result in made:  # each commit holds its step's files
        names = set(git(root, "show", "--name-only", "--format=", result.commit).split())
        assert names == {series._src_relative(tree, c) for c in result.changes}
    assert fault != "gpg" or not made  # signing with gpg.program false cannot succeed


# --- the whole command on SGLang's own target files ------------------------------------------
#
# Planning the series on them takes seconds (libcst), so it is done once here: ``template``
# is the tree and ``planned`` its plan; each test copies the tree into a new repository and
# the command is given the plan (``plan_series`` patched), except where planning is the
# subject (imports, libcst failures).

@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """SGLang's copies of the files the series edits, in a clone's layout (no repository)."""
    return make_synthetic_tree(tmp_path_factory.mktemp("template"))


@pytest.fixture(scope="module")
def planned(template):
    return series.plan_series(series.locate(str(template)))


@pytest.fixture()
def clone(template, tmp_path):
    root = tmp_path / "clone"
    shutil.copytree(template, root)
    git(root, "init", "-q", "-b", "main")
    commit_all(root)
    return root


@pytest.fixture()
def plan_given(planned, monkeypatch):
    """The command plans nothing: it is given a copy of ``planned`` (this test's own, which
    the test may edit; a fresh copy of it each run)."""
    plan = copy.deepcopy(planned)
    monkeypatch.setattr(series, "plan_series", lambda tree, registry_source=None: copy.deepcopy(plan))
    return plan


def upstream(capsys, *argv):
    code = main(["upstream", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv, expect):
    code, out, err = upstream(capsys, *argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (code, out, err)
    assert expect in err, err
    return err


@pytest.mark.parametrize("fault, expect", [
    ("gpg", "git commit of step 1 failed"),
    ("hook", "git commit of step 3 failed"),
    ("index.lock", "index.lock"),
])
def test_a_failed_commit_leaves_tree_index_and_head_and_a_rerun_commits_every_step(clone, plan_given, tmp_path,
                                                                                      capsys, fault, expect):
    """On main the first run left step 1 written and staged, and the re-run
    committed the later steps over it."""
    if fault == "gpg":
        git(clone, "config", "commit.gpgsign", "true")
        git(clone, "config", "gpg.program", "false")
    elif fault == "hook":
        fail_at_commit(clone, tmp_path / "hooks", 3)
    else:
        (clone / ".git" / "index.lock").touch()  # a second git, at work
    before = state(clone)
    err = refused(capsys, clone, "--into-git", expect=expect)
    (clone / ".git" / "index.lock").unlink(missing_ok=True)
    assert state(clone) == before, err
    assert "everything written was undone" in err
    git(clone, "config", "--unset", "commit.gpgsign", check=False)
    git(clone, "config", "--unset", "core.hooksPath", check=False)
    assert upstream(capsys, clone, "--into-git")[0] == 0
    steps = len(STEPS)  # the registry, then one commit per concern
    subjects = git(clone, "log", "--reverse", "--format=%s", f"HEAD~{steps}..HEAD").splitlines()
    assert subjects[0].startswith("[arch] Add sglang.srt.arch") and len(subjects) == steps
    assert git(clone, "status", "--porcelain") == ""


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP"])
def test_a_termination_while_git_commits_leaves_tree_index_and_head(clone, plan_given, tmp_path, capsys, signame):
    """`timeout -s TERM` during `--into-git`
    left step 1's files untracked and the temporary files beside the call sites, and an
    orphaned `git commit` could move HEAD afterwards (SIGINT already rolled back).  The
    hook of step 3's commit signals this process and waits; the signal must end the run as
    Ctrl-C does: git killed, every write undone, exit 128 + the signal."""
    import signal

    signum = getattr(signal, signame)
    if signal.getsignal(signum) != signal.SIG_DFL:
        pytest.skip(f"{signame} has a handler in this test process; the CLI keeps an embedding program's own")
    fail_at_commit(clone, tmp_path / "hooks", 3, action=f"kill -{signame[3:]} {os.getpid()}; sleep 30")
    before = state(clone)
    code, out, err = upstream(capsys, clone, "--into-git")
    assert code == 128 + signum and err.strip() == f"sglang-arch: terminated (signal {signum}); every write rolled back"
    assert state(clone) == before
    assert signal.getsignal(signum) == signal.SIG_DFL  # the command's handler is gone with it


def test_into_git_never_commits_a_step_over_an_uncommitted_earlier_one(clone, plan_given, capsys):
    """A plain run wrote every step; step 3's files are then put back as they were: a plan
    of step 3 alone (steps 1, 2 and 4 are up to date on disk) must not be committed over
    the uncommitted registry."""
    assert upstream(capsys, clone)[0] == 0
    git(clone, "checkout", "--", *[f"python/sglang/{plan.path}" for plan in STEPS[2].modules])
    for result in plan_given:  # what planning this tree gives: step 3's call sites, nothing else
        result.changes[:] = [c for c in result.changes if result.step.number == 3 and not c.path.startswith("srt/arch/")]
    head = git(clone, "rev-parse", "HEAD")
    refused(capsys, clone, "--into-git", expect="uncommitted changes in files the series writes")
    assert git(clone, "rev-parse", "HEAD") == head


def test_a_second_writer_holding_src_is_refused_before_anything_is_written(clone, plan_given, capsys):
    before = state(clone)
    fd = os.open(clone, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        refused(capsys, clone, "--into-git", expect="another sglang-arch run is writing here")
    finally:
        os.close(fd)
    assert state(clone) == before


def test_step_2_applies_once_srt_arch_exists_without_it(clone, plan_given, capsys, monkeypatch):
    """SGLang merged only PR-1 (the registry), whose `sources` name
    all_reduce_utils in a string, which is no import of it; on main step 2 was refused forever."""
    assert upstream(capsys, clone, "--into-git")[0] == 0
    routed = git(clone, "rev-parse", "HEAD^{tree}").strip()
    git(clone, "reset", "-q", "--hard", "HEAD~3")  # the registry alone
    monkeypatch.undo()  # planned for real from here
    code, out, err = upstream(capsys, clone, "--into-git")
    assert code == 0, out + err
    assert "still imports" not in out and out.count(", commit ") == 3
    assert git(clone, "rev-parse", "HEAD^{tree}").strip() == routed


def test_a_real_import_of_the_removed_module_still_keeps_step_2_out(template):
    overlay = series._Overlay(series.locate(str(template)).package)
    overlay.planned["srt/user.py"] = "from sglang.srt.distributed.device_communicators import all_reduce_utils\n"
    rewritten = {"srt/distributed/device_communicators/torch_symm_mem.py": "x = 1\n"}  # step 2 took its import
    user = series._importer_of(overlay, "srt/distributed/device_communicators/all_reduce_utils.py", rewritten)
    assert user == "srt/user.py (line 1: from sglang.srt.distributed.device_communicators import all_reduce_utils)"


MODULE = "sglang.srt.distributed.device_communicators.all_reduce_utils"
IMPORTER = "srt/distributed/device_communicators/torch_symm_mem.py"


@pytest.mark.parametrize("text, how", [
    (f"from {MODULE} import X\n", "line 1: from"),
    (f"import {MODULE}\n", f"line 1: import {MODULE}"),
    (f"import {MODULE} as m\n", "line 1: import"),
    ("from . import all_reduce_utils\n", "line 1: from . import all_reduce_utils"),
    ("from .all_reduce_utils import X\n", "line 1: from .all_reduce_utils import"),
    ("from .. import x\nfrom .all_reduce_utils.sub import Y\n", "line 2"),
    ("import sglang.srt.distributed.device_communicators as dc\n\nx = dc.all_reduce_utils.X\n", "line 3"),
    ("import sglang.srt.distributed.device_communicators\nsglang.srt.distributed.device_communicators."
     "all_reduce_utils\n", "line 2"),
    (f"import importlib\nimportlib.import_module({MODULE!r})\n", "line 2"),
    ("def f(:\n    all_reduce_utils\n", "does not parse"),
])
def test_what_counts_as_importing_a_module(text, how):
    from sglang_arch.upstream.imports import imports

    assert how in (imports(text, IMPORTER, MODULE) or "")


@pytest.mark.parametrize("text", [
    '_SGLANG = "sglang 0.5.23: srt/distributed/device_communicators/{all_reduce_utils,torch_symm_mem}.py"\n',
    "# all_reduce_utils held only the table\n",
    "from sglang.srt.distributed.device_communicators.custom_all_reduce_utils import X\n",
    "from . import custom_all_reduce_utils\nall_reduce_utils = 1\nself.all_reduce_utils\n",
    "from .other import all_reduce_utils\n",  # a name of another module
    f"import importlib\nimportlib.import_module('{MODULE}_v2')\n",
])
def test_words_are_no_import(text):
    from sglang_arch.upstream.imports import imports

    assert imports(text, IMPORTER, MODULE) is None


@pytest.mark.parametrize("flags", [(), ("--check",), ("--into-git",)])
def test_valid_python_libcst_cannot_parse_is_one_line_naming_file_and_construct(clone, capsys, flags):
    """`return(lambda: 1)` made libcst raise TypeError, which
    was "internal error ..., exit 1"."""
    target = clone / "python/sglang/srt/distributed/device_communicators/torch_symm_mem.py"
    text = target.read_text() + "\n\ndef _odd():\n    if True:\n        return(lambda: 1)\n"
    target.write_text(text)
    commit_all(clone, "odd")
    before = state(clone)
    line = text.count("\n")
    refused(capsys, clone, *flags, expect=f"{target}: libcst cannot parse line {line}: `return(lambda: 1)` "
                                          f"(TypeError: ")
    assert state(clone) == before


@pytest.mark.parametrize("error", [RuntimeError("boom"), AssertionError(), RecursionError("deep"), MemoryError(),
                                   IndexError("list index out of range")])
def test_any_libcst_failure_is_one_line(clone, capsys, monkeypatch, error):
    import libcst

    def parse_module(source, *args, **kwargs):
        raise error

    monkeypatch.setattr(libcst, "parse_module", parse_module)
    before = state(clone)
    err = refused(capsys, clone, expect="libcst cannot parse")
    assert type(error).__name__ in err and str(clone) in err
    assert state(clone) == before


def test_a_failure_while_rewriting_names_the_file_and_its_sites(clone, capsys, monkeypatch):
    from sglang_arch.upstream import replace

    def apply(*args):
        raise TypeError("a libcst bug")

    monkeypatch.setattr(replace, "apply", apply)
    err = refused(capsys, clone, "--check", expect="libcst failed while rewriting")
    assert "TorchSymmMemCommunicator.__init__" in err and "torch_symm_mem.py" in err


def test_a_file_of_the_users_under_srt_arch_is_never_removed(clone, plan_given, capsys):
    """On main the next run deleted srt/arch/mine.py."""
    assert upstream(capsys, clone, "--into-git")[0] == 0
    mine = clone / "python/sglang/srt/arch/mine.py"
    mine.write_text("MINE = 1\n")
    commit_all(clone, "mine")
    tree = series.locate(str(clone))
    overlay = series._Overlay(tree.package, tree)
    result = series._plan_registry(STEPS[0], tree, series.registry_files(), overlay)
    assert result.changes == [] and not result.skipped
    assert getattr(result, "kept", None) == ["srt/arch/mine.py"]
    assert "left as it is: python/sglang/srt/arch/mine.py (not written by sglang-arch)" in series.render(
        series.SeriesResult(tree, [result], True, False))


def test_check_names_every_file_it_would_add_change_or_remove(clone, plan_given, capsys):
    """On main --check said "would change 1 file(s), +0 -1" and no name."""
    tree = series.locate(str(clone))
    code, out, _ = upstream(capsys, clone, "--check")
    assert code == 1
    lines = out.splitlines()
    for change in (c for s in plan_given for c in s.changes):
        verb = "would add" if change.old is None else "would remove" if change.new is None else "would change"
        shown = (tree.package if change.base == "package" else tree.src) / change.path
        shown = shown.relative_to(tree.src).as_posix()
        assert any(line.strip().startswith(verb) and f" {shown}" in line and ", +" in line for line in lines), shown
    assert "would remove  python/sglang/srt/distributed/device_communicators/all_reduce_utils.py" in out


def test_a_run_with_nothing_to_write_leaves_the_users_staged_work_staged(clone, monkeypatch, capsys):
    """An --into-git run with nothing to write (a routed
    tree) ran `git reset --` with no path, unstaging everything the user had staged."""
    monkeypatch.setattr(series, "plan_series", lambda tree, registry_source=None: [
        series.StepResult(step, changes=[], owned=[]) for step in STEPS])
    (clone / "notes.txt").write_text("mine, staged\n")
    git(clone, "add", "notes.txt")
    before = state(clone)
    code, out, err = upstream(capsys, clone, "--into-git")
    assert code in (0, 1) and "Traceback" not in err, (code, out, err)
    assert state(clone) == before


# --- the importers of removed modules, in one pass ---------------------

def _package_with_removals(base, others, removed):
    """A package of ``others`` plain modules and ``removed`` modules a synthetic step empties
    (each holds only ``X``, which the step deletes), and that step."""
    from sglang_arch.upstream import replace
    from sglang_arch.upstream.rewriter import ModulePlan
    from sglang_arch.upstream.sites import Step

    pkg = Path(base) / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for j in range(others):
        (pkg / "srt" / f"other_{j}.py").write_text("y = 2\n" + "# a line of filler text\n" * 80)
    plans = []
    for i in range(removed):
        (pkg / "srt" / f"gone_{i}.py").write_text("X = 1\n")
        plans.append(ModulePlan(f"srt/gone_{i}.py", STEPS[1].glue, (replace.Delete(("X",)),)))
    return pkg, Step(99, "synthetic", "synthetic", STEPS[1].glue, tuple(plans))


def _plan(pkg, step):
    result = series._plan_sites(step, series._Overlay(pkg), True)
    assert result.skipped is None and len(result.changes) == len(step.modules) + 1, result.skipped
    return result


def test_each_file_is_read_once_whatever_the_number_of_removed_modules(tmp_path, monkeypatch):
    # It walked and opened every package file once per removed module.
    pkg, step = _package_with_removals(tmp_path, others=30, removed=12)
    opened = {}
    real_open = os.open

    def counting_open(path, *args, **kwargs):
        name = os.fspath(path)
        if "/srt/other_" in name:
            opened[name] = opened.get(name, 0) + 1
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    _plan(pkg, step)
    assert len(opened) == 30 and set(opened.values()) == {1}, sorted(set(opened.values()))


def test_finding_the_importers_of_removed_modules_grows_linearly():
    # 4x the files and 4x the removed modules: 16x the time when each removal walked the
    # package (0.83 s -> 8.8 s measured on the previous code), about 4x in one pass.
    import tempfile

    from unit.timing import grows_at_most

    with tempfile.TemporaryDirectory() as small_dir, tempfile.TemporaryDirectory() as large_dir:
        small = _package_with_removals(small_dir, others=400, removed=10)
        large = _package_with_removals(large_dir, others=1600, removed=40)
        ok, seen = grows_at_most(lambda: _plan(*small), lambda: _plan(*large), factor=6)
    assert ok, seen


def test_a_remaining_importer_is_still_found_among_many_removals(tmp_path):
    pkg, step = _package_with_removals(tmp_path, others=5, removed=12)
    (pkg / "srt" / "user.py").write_text("import os\nfrom sglang.srt import gone_7\n")
    result = series._plan_sites(step, series._Overlay(pkg), True)
    assert result.skipped == ("srt/gone_7.py: X (deleted) srt/user.py (line 2: from sglang.srt import gone_7) "
                              "still imports the module this removes")


WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=6)


@given(words=st.lists(WORDS, min_size=1, max_size=20, unique=True),
       text=st.lists(st.one_of(WORDS, st.sampled_from([" ", ".", "_", "é", "\n", "0", "a"])), max_size=30))
@settings(max_examples=200, deadline=None)
def test_names_in_misses_no_word_the_bounded_search_finds(words, text):
    """The index may keep a file that does not name a word (the text is searched after), never
    drop one that does: whichever of its two ways (each word, or the file's words once) runs."""
    import re

    text = "".join(text + words[:1])
    data = text.encode()
    found = set(series.names_in(data, words))
    for w in words:
        if re.search(r"(?<![\w])%s(?![\w])" % re.escape(w), data.decode("utf-8", "replace")):
            assert w in found, (w, text, len(words))
