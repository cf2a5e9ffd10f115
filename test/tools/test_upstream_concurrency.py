"""``upstream`` beside other writers: nothing another process writes during a run is lost.

* Every spelling of one tree (the clone, its ``python/sglang`` package folder, a symlink
  to either, a path through ``..`` or ``.``) takes one lock: a second run is refused,
  whichever spellings the two use (generated: every pair).
* A commit made while ``--into-git`` runs (by the user, an editor, a hook), at any moment
  of the run (generated: every moment the run names), is never deleted: the series stops
  before its next commit and its roll back leaves that commit (and what is under it).
* git's configuration and hooks (``commit.cleanup``, ``core.ignoreCase``, a
  ``user.email`` without ``user.name``, hooks that move HEAD or commit on their own) do
  not change what is committed, or are refused in one line.
"""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from sglang_arch import interrupts
from sglang_arch.cli import main
from sglang_arch.upstream import series

from .test_upstream_signals import PLAN, _read_until, commit_all, git, leftovers, moments, plan, small_repo, state


@pytest.fixture(autouse=True)
def _no_user_git_config(tmp_path_factory, monkeypatch):
    empty = tmp_path_factory.getbasetemp() / "gitconfig-concurrency"
    empty.touch()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


# --- one tree, one lock ------------------------------------------------------------------------

def spellings(tmp_path, root):
    """Every way to name one tree: (label, path)."""
    (tmp_path / "to-clone").symlink_to(root)
    (tmp_path / "to-package").symlink_to(root / "python" / "sglang")
    return [("clone", root), ("package", root / "python" / "sglang"), ("symlink to the clone", tmp_path / "to-clone"),
            ("symlink to the package", tmp_path / "to-package"),
            ("package through the symlink", tmp_path / "to-clone" / "python" / "sglang"),
            ("dot-dot", root / "python" / ".." / "python" / "sglang"), ("dot", root / "." / "python" / "sglang" / "."),
            ("srt/..", root / "python" / "sglang" / "srt" / "..")]


HOLDER = PLAN + textwrap.dedent("""
    import sys
    from sglang_arch.upstream import series
    from sglang_arch.cli import main
    series.plan_series = plan
    sys.exit(main(["upstream", sys.argv[1]]))
""")


def test_every_spelling_of_one_tree_is_one_lock(tmp_path, monkeypatch, capsys):
    """A run paused while it holds the tree (through each spelling in turn) makes a second
    run through every spelling fail at once, before it writes anything."""
    root = small_repo(tmp_path / "repo")
    names = spellings(tmp_path, root)
    monkeypatch.setattr(series, "plan_series", plan)
    pairs = 0
    for label, holder in names:
        before = state(root)
        env = dict(os.environ, **{interrupts.ENV_PAUSE_AT: "staged"})
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(holder)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        try:
            _read_until(proc, "paused at staged")
            for other_label, other in names:
                code = main(["upstream", str(other)])
                err = capsys.readouterr().err
                assert code == 2 and "another sglang-arch run is writing here" in err, (label, other_label, err)
                pairs += 1
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        assert state(root) == before, label  # the holder rolled back; the refused runs wrote nothing
    assert pairs == len(names) ** 2 == 64


# --- a commit by another process during --into-git ----------------------------------------------



def _their_commit(root):
    """What a user (or an editor) does while the series runs: a commit of their own file."""
    (root / "theirs.txt").write_text("their work\n")
    git(root, "add", "theirs.txt")
    git(root, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "their work")
    return git(root, "rev-parse", "HEAD").strip()


def test_a_commit_made_at_any_moment_of_the_run_is_kept(monkeypatch, tmp_path, capsys):
    """Generated: at every moment the run names, another process commits.  The commit is
    never lost: it stays on the branch with its file; the run either completed before it
    (the moment was past its last commit) or stopped in one line and undid its files."""
    names = [n for n in moments(monkeypatch, tmp_path) if not n.startswith("rollback:")]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    outcomes = {}
    for i, at in enumerate(names):
        root = small_repo(tmp_path / f"r{i}")
        made = []
        real = interrupts.checkpoint

        def checkpoint(name, at=at, root=root, made=made, real=real):
            if name == at and not made:
                made.append(_their_commit(root))
            real(name)

        monkeypatch.setattr(interrupts, "checkpoint", checkpoint)
        monkeypatch.setattr(series, "plan_series", plan)
        monkeypatch.setattr(series.tempfile, "tempdir", str(tmp))
        code = main(["upstream", str(root), "--into-git"])
        monkeypatch.undo()
        err = capsys.readouterr().err
        assert made, at
        assert git(root, "merge-base", "--is-ancestor", made[0], "HEAD", check=False) == "", at
        assert git(root, "show", "HEAD:theirs.txt") == "their work\n", (at, err)
        assert (root / "theirs.txt").read_text() == "their work\n"
        if code == 2:
            assert len(err.strip().splitlines()) == 1 and "another process" in err, (at, err)
            assert not (root / "python" / "sglang" / "srt" / "arch").exists(), at  # the series' files undone
        else:
            assert code == 0, (at, err)
        assert leftovers(root, tmp) == [], at
        outcomes[at] = code
    assert 2 in outcomes.values() and len(outcomes) == len(names)


def test_a_commit_between_series_commits_is_not_overwritten_by_the_next(monkeypatch, tmp_path, capsys):
    """The case as a user meets it: their commit lands after the series' first commit."""
    root = small_repo(tmp_path / "repo")
    real = interrupts.checkpoint
    made = []

    def checkpoint(name):
        if name == "git:commit:1":
            made.append(_their_commit(root))
        real(name)

    monkeypatch.setattr(interrupts, "checkpoint", checkpoint)
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 2
    err = capsys.readouterr().err
    assert "another process" in err and "left there" in err, err
    assert git(root, "rev-parse", "HEAD").strip() == made[0]


# --- git's configuration and hooks ----------------------------------------------------------------

def _post_commit(root, script):
    hook = root / ".git" / "hooks" / "post-commit"
    hook.write_text("#!/bin/sh\n" + script)
    hook.chmod(0o755)


@pytest.mark.parametrize("script, kept", [
    ("git reset -q --soft HEAD~1\n", False),  # moves HEAD off the commit just made
    ('[ -n "$IN_HOOK" ] && exit 0\nIN_HOOK=1 git -c user.name=h -c user.email=h@h commit -q --allow-empty -m hook\n',
     True),  # commits on its own, on top
])
def test_a_post_commit_hook_that_moves_head_is_one_line_and_keeps_its_commit(tmp_path, monkeypatch, capsys, script,
                                                                              kept):
    root = small_repo(tmp_path / "repo")
    _post_commit(root, script)
    before = state(root)
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "post-commit" in err and "commit(s) made" not in err, err
    if kept:  # the hook's commit is the hook's: it stays, and the line says where HEAD is
        assert git(root, "log", "-1", "--format=%s").strip() == "hook" and "left there" in err
    else:
        assert state(root) == before


def test_commit_cleanup_strip_keeps_the_pr_headings(tmp_path, monkeypatch):
    root = small_repo(tmp_path / "repo")
    git(root, "config", "commit.cleanup", "strip")
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 0
    body = git(root, "log", "-1", "--format=%B", "HEAD~2")
    assert "\n## " in body, body


@pytest.mark.parametrize("configured, author", [
    ({"user.email": "me@example.org"}, "sglang-arch <me@example.org>"),
    ({"user.name": "Me"}, "Me <sglang-arch@localhost>"),
    ({"user.name": "Me", "user.email": "me@example.org"}, "Me <me@example.org>"),
])
def test_a_configured_identity_key_is_kept_when_the_other_is_missing(tmp_path, monkeypatch, configured, author):
    root = small_repo(tmp_path / "repo")
    for key, value in configured.items():
        git(root, "config", key, value)
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 0
    assert git(root, "log", "-1", "--format=%an <%ae>").strip() == author


def test_ignore_case_does_not_file_the_new_module_under_another_case(tmp_path, monkeypatch):
    """core.ignoreCase=true and a tracked srt/Arch/: the new srt/arch/ is committed as
    spelled, so a clone on a case-sensitive file system imports it."""
    root = small_repo(tmp_path / "repo")
    other = root / "python" / "sglang" / "srt" / "Arch"
    other.mkdir()
    (other / "old.py").write_text("OLD = 1\n")
    commit_all(root, "an Arch folder")
    git(root, "config", "core.ignoreCase", "true")
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 0
    names = git(root, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    assert "python/sglang/srt/arch/__init__.py" in names and "python/sglang/srt/Arch/__init__.py" not in names
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(root), str(clone))
    assert (clone / "python" / "sglang" / "srt" / "arch" / "__init__.py").read_text() == "A = 1\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the repository to another user needs root")
def test_a_repository_owned_by_another_user_is_named_so(tmp_path, monkeypatch, capsys):
    root = small_repo(tmp_path / "repo")
    subprocess.run(["chown", "-R", "nobody", str(root)], check=True)
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 2
    err = capsys.readouterr().err
    assert "owned by another user" in err and "safe.directory" in err and "git init" not in err, err


# --- an edit by another program while the series is written -------------------------------------

@pytest.mark.parametrize("at", ["staged", "git:begin", "put:1", "git:commit:1", "put:3"])
@pytest.mark.parametrize("flags", [["--into-git"], []], ids=["git", "files"])
def test_an_edit_of_a_file_the_series_writes_is_never_overwritten(monkeypatch, tmp_path, capsys, at, flags):
    """An editor saves srt/m1.py (which step 1 rewrites) at a moment of the run: before the
    series replaced it, the run stops in one line; after, its roll back leaves the saved
    text.  Either way the editor's text is what the file holds at the end."""
    if at.startswith("git:") and not flags:
        pytest.skip("a moment of --into-git only")
    root = small_repo(tmp_path / "repo")
    target = root / "python" / "sglang" / "srt" / "m1.py"
    real = interrupts.checkpoint
    saved = []

    def checkpoint(name):
        if name == at and not saved:
            target.write_text("M1 = 1\n# saved by the editor\n")
            saved.append(name)
            if name in ("git:commit:1", "put:3"):  # m1 is written (put:2): a later failure rolls back over the edit
                raise ValueError("a later failure")
        real(name)

    monkeypatch.setattr(interrupts, "checkpoint", checkpoint)
    monkeypatch.setattr(series, "plan_series", plan)
    code = main(["upstream", str(root), *flags])
    err = capsys.readouterr().err
    assert saved and code == 2 and len(err.strip().splitlines()) == 1, (at, err)
    assert target.read_text() == "M1 = 1\n# saved by the editor\n", (at, err)
    assert "another program" in err, err
    assert not (root / "python" / "sglang" / "srt" / "arch").exists()


def test_a_journal_planted_in_a_tree_names_another_repository_and_is_refused(tmp_path, monkeypatch, capsys):
    """A tree (a clone of someone else's) that carries a journal naming another repository and
    a folder to remove as its private index: refused whole, nothing touched."""
    import json

    from sglang_arch import files

    root = small_repo(tmp_path / "repo")
    other = small_repo(tmp_path / "other")
    keep = tmp_path / "keep-me"
    keep.mkdir()
    (keep / "data").write_text("precious\n")
    journal = {"version": files.JOURNAL_VERSION, "state": "writing", "pid": 1, "made": [], "entries": [],
               "extra": {"git": {"root": str(other), "head": None, "ref": "refs/heads/main", "subjects": [],
                                 "paths": [], "index": str(keep)}}}
    (root / "python" / "sglang" / files.JOURNAL).write_text(json.dumps(journal))
    before = state(other)
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 2
    err = capsys.readouterr().err
    assert "not this tree's" in err and "nothing was changed" in err, err
    assert (keep / "data").read_text() == "precious\n" and state(other) == before


def test_a_pre_commit_hook_that_changes_the_commit_is_named_and_the_commit_removed(tmp_path, monkeypatch, capsys):
    """A formatter in pre-commit rewrites the files it commits: the commit is not the
    series' step; the run stops in one line naming the hook, and its commit goes."""
    root = small_repo(tmp_path / "repo")
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text('#!/bin/sh\nfor f in $(git diff --cached --name-only); do [ -f "$f" ] && echo "# formatted" >> "$f"'
                    ' && git add "$f"; done\n')
    hook.chmod(0o755)
    head = git(root, "rev-parse", "HEAD")
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 2
    err = capsys.readouterr().err
    assert "a hook (pre-commit or commit-msg) changed the files" in err and "HEAD is back at" in err, err
    assert git(root, "rev-parse", "HEAD") == head


def test_src_naming_an_unknown_users_home_is_one_line(capsys):
    assert main(["upstream", "~no-such-user-here/sglang"]) == 2
    err = capsys.readouterr().err
    assert "no such user's home folder" in err and "Traceback" not in err and "internal error" not in err, err
