"""``upstream --into-git`` refuses to start while git waits for the user.

Inside a merge, a cherry-pick, a revert, a rebase (both back-ends), ``git am`` or a bisect,
the series' first commit would conclude the operation (a merge commit without the merged
files, MERGE_HEAD or CHERRY_PICK_HEAD consumed).  Each state is made with real git
commands; the command must refuse with one line naming the operation (exit 2) before it
writes anything, and the operation must still be there to finish.
"""

import subprocess

import pytest

from sglang_arch.cli import main
from sglang_arch.upstream import series

from .test_upstream_signals import commit_all, git, plan, small_repo, state


@pytest.fixture(autouse=True)
def _no_user_git_config(tmp_path_factory, monkeypatch):
    empty = tmp_path_factory.getbasetemp() / "gitconfig"
    empty.write_text("[user]\n\tname = t\n\temail = t@t\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_EDITOR", "true")


def _conflicting_branches(root):
    """main and other both change notes.txt; main is checked out."""
    git(root, "reset", "-q", "--hard")
    git(root, "checkout", "-q", "-b", "other")
    (root / "notes.txt").write_text("theirs\n")
    commit_all(root, "theirs")
    git(root, "checkout", "-q", "main")
    (root / "notes.txt").write_text("ours\n")
    commit_all(root, "ours")


def merge(root):
    _conflicting_branches(root)
    git(root, "merge", "other", check=False)


def cherry_pick(root):
    _conflicting_branches(root)
    git(root, "cherry-pick", "other", check=False)


def revert(root):
    git(root, "reset", "-q", "--hard")
    (root / "notes.txt").write_text("one\n")
    commit_all(root, "one")
    (root / "notes.txt").write_text("two\n")
    commit_all(root, "two")
    git(root, "revert", "--no-edit", "HEAD~1", check=False)


def rebase(root):
    _conflicting_branches(root)
    git(root, "rebase", "other", check=False)


def rebase_apply(root):
    _conflicting_branches(root)
    git(root, "rebase", "--apply", "other", check=False)


def am(root):
    _conflicting_branches(root)
    patch = subprocess.run(["git", "-C", str(root), "format-patch", "-1", "--stdout", "other"], capture_output=True,
                           text=True, check=True).stdout
    subprocess.run(["git", "-C", str(root), "am"], input=patch, capture_output=True, text=True)


def bisect(root):
    git(root, "reset", "-q", "--hard")
    for i in range(3):
        (root / "notes.txt").write_text(f"{i}\n")
        commit_all(root, f"c{i}")
    git(root, "bisect", "start", "HEAD", "HEAD~3")


def squash(root):
    git(root, "reset", "-q", "--hard")
    git(root, "checkout", "-q", "-b", "other")
    (root / "other.txt").write_text("theirs\n")
    commit_all(root, "theirs")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "--squash", "other")


@pytest.mark.parametrize("make, marker, named", [
    (squash, "SQUASH_MSG", "a squash merge (its prepared message) is in progress"),
    (merge, "MERGE_HEAD", "a merge is in progress"),
    (cherry_pick, "CHERRY_PICK_HEAD", "a cherry-pick is in progress"),
    (revert, "REVERT_HEAD", "a revert is in progress"),
    (rebase, "rebase-merge", "a rebase is in progress"),
    (rebase_apply, "rebase-apply", "a rebase (or git am) is in progress"),
    (am, "rebase-apply", "git am is in progress"),
    (bisect, "BISECT_LOG", "a bisect is in progress"),
])
def test_into_git_refuses_while_an_operation_is_in_progress(tmp_path, monkeypatch, capsys, make, marker, named):
    root = small_repo(tmp_path / "repo")
    make(root)
    assert (root / ".git" / marker).exists(), f"the {marker} state was not made"
    before = state(root)
    monkeypatch.setattr(series, "plan_series", plan)
    code = main(["upstream", str(root), "--into-git"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert named in err and f"({marker})" in err and "accepted:" in err, err
    assert state(root) == before and (root / ".git" / marker).exists()


def test_the_operation_checked_is_the_work_trees_own(tmp_path, monkeypatch, capsys):
    """A linked work tree (git worktree) keeps its MERGE_HEAD in its own git folder."""
    root = small_repo(tmp_path / "repo")
    git(root, "reset", "-q", "--hard")
    linked = tmp_path / "linked"
    git(root, "worktree", "add", "-q", "-b", "side", str(linked))
    (linked / "notes.txt").write_text("side\n")
    commit_all(linked, "side")
    (root / "notes.txt").write_text("main\n")
    commit_all(root, "main")
    git(linked, "merge", "main", check=False)
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(linked), "--into-git"]) == 2
    assert "a merge is in progress" in capsys.readouterr().err
    assert main(["upstream", str(root), "--into-git"]) == 0  # the main work tree has none


@pytest.mark.parametrize("mark", ["--assume-unchanged", "--skip-worktree"])
def test_into_git_refuses_a_written_file_git_hides(tmp_path, monkeypatch, capsys, mark):
    """An edit of a file marked assume-unchanged or skip-worktree is invisible to ``git status``:
    the series would commit it unseen (and clear the mark).  Refused, naming the file."""
    root = small_repo(tmp_path / "repo")
    target = root / "python" / "sglang" / "srt" / "m1.py"
    target.write_text("M1 = 1\n# a local tweak\n")
    git(root, "update-index", mark, "python/sglang/srt/m1.py")
    before = state(root)
    monkeypatch.setattr(series, "plan_series", plan)
    code = main(["upstream", str(root), "--into-git"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "assume-unchanged or skip-worktree" in err and "m1.py" in err and "accepted:" in err, err
    assert state(root) == before and "a local tweak" in target.read_text()
    assert git(root, "ls-files", "-v", "python/sglang/srt/m1.py")[:1] in ("h", "S")
