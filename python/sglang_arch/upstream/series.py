"""Plan and apply the upstream patch series on an SGLang source tree.

Planning reads the tree and computes every step's file changes in memory, each step on
top of the previous ones (steps 2 and 5 both edit ``torch_symm_mem.py``); a site whose
release text is not in the tree is left out whole (``steps.plan_sites``) and the rest of
its step lands; a step whose registry is missing is skipped.
Applying is one transaction (``files.Transaction``): every planned file is checked and
staged beside its target, then each step's files are put in place and, with
``into_git``, committed on their own with the PR text of ``templates/pr/`` as the
message.  Any failure (a file that cannot be written, git refusing a commit) undoes the
whole run: the files, the index and HEAD are as they were.  Nothing is written before
every step has been planned, and nothing at all with ``check``.
"""

from __future__ import annotations

import difflib
import functools
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .. import interrupts
from ..arch.validate import shown_path
from ..files import JOURNAL, Transaction, Write, folder_lock, read_source, recover, stale_journal
from . import texts
from .steps import (ALREADY, LEFT_OUT, REWRITTEN, STEPS, SiteOutcome, Step, as_later_steps_leave, plan_sites,
                    series_file)

# The architecture table every step reads (step 1 adds it).
REGISTRY = "srt/platforms/cuda_arch.py"
# SGLang's registered-test layout (git clone only): the series' own tests, relative to SRC.
TESTS_DIR = "test/registered/unit/platforms"
NO_TEST_TREE = "no tests written: an installed package has no test tree (SGLang's tests live in a git clone)"
WRITTEN = "written"
# The SGLang releases whose code the call-site edits replace (the series is tested on each).
SGLANG_TESTED = ("0.5.21", "0.5.22", "0.5.23")
# The identity a commit takes where the repository's configuration has none (each key on its own).
GIT_IDENTITY = {"user.name": "sglang-arch", "user.email": "sglang-arch@localhost"}
# Every git command of --into-git names paths exactly as the series spells them:
# core.ignoreCase=true would file a new ``srt/arch/`` under a tracked ``srt/Arch/``, which a
# clone on a case-sensitive file system cannot import.
GIT_EXACT = ("-c", "core.ignoreCase=false")
# Seconds a roll back keeps trying to put HEAD back while another git holds the branch's lock.
ROLLBACK_WAIT = 10.0
# Seconds an interrupted git child has to stop after SIGTERM (git removes its lock files
# then) before it is killed (and the locks it took are removed here).
GIT_STOP_S = 3.0
# What git leaves in its directory while an operation waits for the user: (file or folder,
# what is in progress, how to end it).  ``upstream --into-git`` refuses to start over it: its
# first commit would conclude the operation (a merge commit without the merged files).
IN_PROGRESS = (
    ("MERGE_HEAD", "a merge", "git merge --continue, or git merge --abort"),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue, or git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue, or git revert --abort"),
    ("rebase-merge", "a rebase", "git rebase --continue, or git rebase --abort"),
    ("rebase-apply", "a rebase (or git am)", "git rebase --continue / git am --continue, or --abort"),
    ("sequencer", "a cherry-pick or revert sequence", "git cherry-pick --continue, or --quit"),
    ("BISECT_LOG", "a bisect", "git bisect reset"),
    ("SQUASH_MSG", "a squash merge (its prepared message)", "git commit, or git reset --merge"),
)


@dataclass(frozen=True)
class Tree:
    """Where the ``sglang`` package of SRC lives, and which layout SRC has."""

    src: Path
    package: Path
    layout: str  # "git clone" | "installed package"

    def describe(self) -> str:
        if self.layout == "git clone":
            return f"SGLang git clone {shown_path(self.src)} (package {self.package.relative_to(self.src)})"
        return f"installed sglang package {shown_path(self.package)}"


@dataclass(frozen=True)
class FileChange:
    path: str  # relative to the package directory, or to SRC when base is "src"
    old: Optional[str]  # None: the file is new
    new: Optional[str]  # None: the file is removed
    base: str = "package"  # "package" | "src" (the series' test files)

    @property
    def is_test(self) -> bool:
        return self.base == "src"

    @property
    def counts(self) -> Tuple[int, int]:
        return count_changes(self.old or "", self.new or "")

    @property
    def is_python_source(self) -> bool:
        """Counted in a PR's budget: a Python file of SGLang's package, not a test."""
        return not self.is_test and self.path.endswith(".py")


@dataclass
class StepResult:
    step: Step
    outcomes: List[SiteOutcome] = field(default_factory=list)
    changes: List[FileChange] = field(default_factory=list)
    skipped: Optional[str] = None  # why nothing of this step is written
    commit: Optional[str] = None
    tests_note: Optional[str] = None  # why this step's test file is not written
    owned: List[Tuple[str, str]] = field(default_factory=list)  # (path, base) of every file it writes, changed or not

    @property
    def test_counts(self) -> Tuple[int, int]:
        """(added, removed) in the series' test files (SRC/test/...)."""
        added = removed = 0
        for change in self.changes:
            if change.is_test:
                a, r = change.counts
                added, removed = added + a, removed + r
        return added, removed

    @property
    def counts(self) -> Tuple[int, int]:
        added = removed = 0
        for change in self.changes:
            a, r = change.counts
            added, removed = added + a, removed + r
        return added, removed

    @property
    def call_site_counts(self) -> Tuple[int, int]:
        """(added, removed) in SGLang's own files: everything the series does not add."""
        added = removed = 0
        for change in self.changes:
            if not change.is_test and not any(change.path == rel for rel in self.step.adds):
                a, r = change.counts
                added, removed = added + a, removed + r
        return added, removed



@dataclass
class SeriesResult:
    tree: Tree
    steps: List[StepResult]
    check: bool
    into_git: bool
    recovered: Optional[str] = None  # what an earlier run, killed while it wrote, left and this one undid

    @property
    def changed(self) -> bool:
        return any(s.changes for s in self.steps)

    @property
    def untouched(self) -> bool:
        return any(s.skipped or any(o.status == LEFT_OUT for o in s.outcomes) for s in self.steps)


def locate(src: str) -> Tree:
    """SRC as a git clone (``python/sglang/srt/``) or an installed package (``srt/``)."""
    expected = ("expected an SGLang git clone (with python/sglang/srt/) or an installed sglang package "
                "directory (with __init__.py and srt/)")
    if not src.strip():  # Path("") is the current folder: never written into unasked
        raise ValueError(f"SRC: an empty path; {expected}")
    try:
        path = Path(src).expanduser()
    except RuntimeError:  # ~user of a user this system does not know
        raise ValueError(f"{shown_path(src)}: no such user's home folder; {expected}") from None
    if not path.is_dir():
        raise ValueError(f"{shown_path(src)}: not a directory; {expected}")
    path = path.resolve()
    if (path / "python" / "sglang" / "srt").is_dir():
        tree = Tree(path, path / "python" / "sglang", "git clone")
    elif (path / "srt").is_dir() and (path / "__init__.py").is_file():
        tree = Tree(path, path, "installed package")
    else:
        raise ValueError(f"{shown_path(src)}: {expected}")
    confine(tree, "srt")
    return tree


def confine(tree: Tree, rel: str, base: str = "package") -> Path:
    """``package/rel`` (``SRC/rel`` with ``base="src"``) when neither it nor any folder on
    the way down from SRC is a symlink and it resolves inside SRC; else ValueError.  Every
    path the series reads, writes or deletes goes through this first, so nothing outside
    SRC is ever touched."""
    if base not in ("package", "src"):
        raise ValueError(f"unknown base {base!r}")
    path = (tree.package if base == "package" else tree.src) / rel
    try:
        parts = path.relative_to(tree.src).parts
    except ValueError:
        raise ValueError(f"{path}: outside {tree.src}; refused") from None
    current = tree.src
    for i, part in enumerate(parts):
        if part in ("..", ".", ""):
            raise ValueError(f"{path}: path with '{part}' refused")
        current = current / part
        if current.is_symlink():
            kind = "file" if i == len(parts) - 1 else "folder"
            raise ValueError(f"{current}: is a symlink; accepted: a real {kind} there (upstream writes only real "
                             f"files and folders inside {tree.src}: replace the link with the {kind} it points "
                             f"to, or remove it)")
    resolved = path.resolve()
    if resolved != tree.src and tree.src not in resolved.parents:
        raise ValueError(f"{path}: resolves outside {tree.src} ({resolved}); refused")
    return path


def count_changes(old: str, new: str) -> Tuple[int, int]:
    """(lines added, lines removed) between two texts, as ``git diff --numstat`` counts them
    (the PR texts quote these numbers); a plain line diff where git is not there."""
    if old == new:
        return 0, 0
    return _numstat(old, new)


@functools.lru_cache(maxsize=256)
def _numstat(old: str, new: str) -> Tuple[int, int]:
    with tempfile.TemporaryDirectory(prefix="sglang-arch-numstat-") as folder:
        a, b = Path(folder, "a"), Path(folder, "b")
        a.write_text(old, encoding="utf-8")
        b.write_text(new, encoding="utf-8")
        try:
            out = subprocess.run(["git", "diff", "--no-index", "--numstat", "--", str(a), str(b)],
                                 capture_output=True, text=True, timeout=60)
            added, removed = out.stdout.split("\t")[:2]
            return int(added), int(removed)
        except (OSError, ValueError, subprocess.SubprocessError):
            pass
    added = removed = 0
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += i2 - i1
            added += j2 - j1
    return added, removed


# --- planning -------------------------------------------------------------------------

def _read(tree: Tree, rel: str, base: str) -> Optional[str]:
    """The text of a file of SRC (None: not there); a folder or an unreadable file is refused."""
    path = confine(tree, rel, base)
    if not path.exists():
        return None
    return read_source(path)


def plan_series(tree: Tree) -> List[StepResult]:
    """Every step's outcome and file changes, computed without writing anything: each step
    sees the tree as the steps before it leave it."""
    planned: Dict[Tuple[str, str], Optional[str]] = {}

    def read(rel: str, base: str = "package") -> Optional[str]:
        if (rel, base) not in planned:
            planned[(rel, base)] = _read(tree, rel, base)
        return planned[(rel, base)]

    results: List[StepResult] = []
    foreign: List[str] = []  # modules of the series' own whose path holds another file (left out)
    for step in STEPS:
        result = StepResult(step)
        for rel in step.adds:
            _plan_new_file(result, rel, "package", series_file(f"package/{rel}"), read(rel))
        foreign += [o.site for o in result.outcomes if o.status == LEFT_OUT and o.site in step.adds]
        if read(REGISTRY) is None and not any(rel == REGISTRY for rel, _ in result.owned):
            result.skipped = f"{REGISTRY} is not in this tree (step 1 left out)"
        else:
            plan = plan_sites(step, read)
            if foreign and plan.files:
                _leave_out_callers(plan, foreign)
            result.outcomes.extend(plan.outcomes)
            for rel, new in plan.files.items():
                result.changes.append(FileChange(rel, read(rel), new))
        _plan_tests(result, tree, read)
        for change in result.changes:
            planned[(change.path, change.base)] = change.new
        results.append(result)
    return results



def _leave_out_callers(plan, foreign: List[str]) -> None:
    """A call site the step would rewrite reads the series' own module; where another file
    holds that module's path (left out as it is), the rewritten site would call what is
    not there (an AttributeError when SGLang builds a backend): it is left out with it.
    A site already routed is SGLang's own code and stays as it is."""
    why = (f"it calls {', '.join(foreign)}, which is left out (another file is at that path): left out with it; "
           f"accepted: the series' own {foreign[0]} there (move the other file away), then run again")
    plan.outcomes = [SiteOutcome(o.site, LEFT_OUT, why) if o.status == REWRITTEN else o for o in plan.outcomes]
    plan.files.clear()


def _plan_new_file(result: StepResult, rel: str, base: str, text: str, old: Optional[str]) -> None:
    """A file the series adds: written where absent, left as it is where it differs (it is
    SGLang's to edit once merged; a run never overwrites it)."""
    result.owned.append((rel, base))
    if old is None:
        result.changes.append(FileChange(rel, None, text, base))
        result.outcomes.append(SiteOutcome(rel, WRITTEN))
    elif old == text or (base == "package" and old == as_later_steps_leave(rel, text, result.step.number)):
        result.outcomes.append(SiteOutcome(rel, ALREADY))
    else:
        result.outcomes.append(SiteOutcome(rel, LEFT_OUT, "the file exists with other content: left as it is"))


def _plan_tests(result: StepResult, tree: Tree, read) -> None:
    """The step's SGLang-style CPU tests, in a git clone, where every site of the step is routed."""
    if tree.layout != "git clone" or result.skipped:
        return
    left_out = [o.site for o in result.outcomes if o.status == LEFT_OUT]
    for name in result.step.tests:
        rel = f"{TESTS_DIR}/{name}"
        if left_out:
            result.tests_note = f"{rel} not written: it tests every site of this step, and {len(left_out)} were left out"
            continue
        _plan_new_file(result, rel, "src", series_file(f"{TESTS_DIR}/{name}"), read(rel, "src"))


# --- applying -------------------------------------------------------------------------

def run_series(src: str, into_git: bool = False, check: bool = False) -> SeriesResult:
    """Plan the series on SRC, then (unless ``check``) write it, one commit per step with
    ``into_git``: all of it, or (on any failure) nothing.  SRC is locked while it runs."""
    if into_git and check:
        raise ValueError("--into-git and --check exclude each other")
    tree = locate(src)
    if check:
        journal = stale_journal(str(tree.package))
        if journal is not None:
            raise ValueError(f"--check: {shown_path(journal)}: a run was killed while it wrote this tree, so its "
                             f"files are not what the series would find; accepted: upstream SRC (with or without "
                             f"--into-git), which undoes the killed run first, then --check")
        return SeriesResult(tree, plan_series(tree), True, False)
    # The lock is the package folder's: every spelling of one tree (the clone or its
    # python/sglang, through a symlink or "..") reaches that one folder.
    with folder_lock(tree.package):  # a second run waits for nothing: it is refused
        recovered = recover(str(tree.package), on_extra=lambda extra: _recover_git(tree, extra), within=[str(tree.src)])
        git = _Git(tree) if into_git else None
        steps = plan_series(tree)
        apply_series(tree, steps, git)
    return SeriesResult(tree, steps, False, into_git, recovered)


def apply_series(tree: Tree, steps: Sequence[StepResult], git: Optional["_Git"] = None) -> None:
    """Write the planned steps in one ``Transaction`` (every file checked and staged before
    the first is replaced), step by step, committing each with ``git``; on any failure
    everything is undone and a ValueError says what failed."""
    # expect: each file as the plan read it (or as the step before left it); an edit made
    # since by another program is never overwritten
    writes = {id(change): Write(str(_target(tree, change)), change.new, make_folders=True, expect=change.old)
              for result in steps if not result.skipped for change in result.changes}
    if git is not None:
        git.refuse_uncommitted([_target(tree, FileChange(rel, None, None, base)) for s in steps if not s.skipped
                                for rel, base in s.owned + [(c.path, c.base) for c in s.changes]])
    if not writes:
        return
    extra = None
    if git is not None:
        subjects = [commit_message(r).split("\n", 1)[0] for r in steps if not r.skipped and r.changes]
        extra = git.prepare(subjects, [w.path for w in writes.values()])
    try:
        # the journal (in the locked package folder) lets the next run undo this one if it is killed
        with Transaction(list(writes.values()), distinct=False, journal=str(tree.package),
                         extra=extra) as transaction:
            if git is not None:
                git.begin(transaction)
            for result in steps:
                if result.skipped or not result.changes:
                    continue
                step_writes = [writes[id(change)] for change in result.changes]
                transaction.put(step_writes)
                if git is not None:
                    result.commit = git.commit(result, [w.path for w in step_writes])
            if git is not None:
                git.finish([w.path for w in writes.values()])
    finally:
        if git is not None:
            git._drop_index()


def _target(tree: Tree, change: FileChange) -> Path:
    """Where ``change`` is written (through ``confine``: inside SRC, no symlink on the way)."""
    return confine(tree, change.path, change.base)


def _git(root: Path, *args: str, stdin: Optional[str] = None,
         env: Optional[Dict[str, str]] = None) -> subprocess.CompletedProcess:
    """git ``args`` in ``root``.  Interrupted (a signal while it runs), git is asked to stop
    (SIGTERM to its process group: git removes its lock files), killed after GIT_STOP_S, and
    the lock files it took are then removed here; the interrupt goes on."""
    # --literal-pathspecs: a path with *, ? or [ names that file, not a pattern over others.
    cmd = ["git", "--literal-pathspecs", "-C", str(root), *args]
    locks = _lock_files(root)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin)
    except BaseException:
        with interrupts.deferred():
            _stop(proc, root, locks)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _stop(proc: subprocess.Popen, root: Path, locks_before: set) -> None:
    import signal

    for signum, wait in ((signal.SIGTERM, GIT_STOP_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, signum)
        except OSError:
            pass
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    else:  # pragma: no cover - the loop breaks once SIGKILL is waited for
        pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    if proc.returncode == -signal.SIGKILL:  # git could not clean up: its locks go here
        for lock in _lock_files(root) - locks_before:
            try:
                lock.unlink()
            except OSError:
                pass


def _git_dir(root: Path) -> Optional[Path]:
    """The repository's git directory (a work tree's own, for ``git worktree``), without git."""
    dot = root / ".git"
    if dot.is_dir():
        return dot
    try:
        text = dot.read_text(encoding="utf-8", errors="replace") if dot.is_file() else ""
    except OSError:
        return None
    if text.startswith("gitdir:"):
        target = Path(text[len("gitdir:"):].strip())
        return target if target.is_absolute() else root / target
    return None


def _lock_files(root: Path) -> set:
    """The lock files a commit, a reset or a ref update take that exist now."""
    folder = _git_dir(root)
    if folder is None:
        return set()
    found = {folder / name for name in ("index.lock", "HEAD.lock", "packed-refs.lock", "config.lock")}
    found = {p for p in found if p.exists()}
    common = folder
    try:
        text = (folder / "commondir").read_text(encoding="utf-8").strip()
        common = Path(text) if Path(text).is_absolute() else folder / text
    except OSError:
        pass
    found.update((common / "refs").rglob("*.lock"))
    return found


def _git_root(tree: Tree) -> Path:
    out = _git(tree.package, "rev-parse", "--show-toplevel")
    if out.returncode != 0 and "dubious ownership" in out.stderr:
        # git's safe.directory check: the repository is another user's; "git init" is not the answer
        raise ValueError(f"--into-git: git refuses the repository of {shown_path(tree.src)}: it is owned by another "
                         f"user (git's safe.directory check); accepted: a repository you own, or one you mark safe "
                         f"(git config --global --add safe.directory PATH)")
    if out.returncode != 0:
        raise ValueError(f"--into-git: {shown_path(tree.src)} is not inside a git work tree (git init it, or drop "
                         f"--into-git)")
    return Path(out.stdout.strip())


class _Git:
    """``--into-git``: each step committed from a private index (``GIT_INDEX_FILE``) holding
    HEAD plus the step's files, so that the user's index is not touched until every commit
    has been made; then the user's index takes the committed files.  A failure anywhere
    puts HEAD back where it was (``on_rollback``) while the transaction restores the files:
    the tree, the index and HEAD are as before the run.  Hooks and signing run as for any
    ``git commit``."""

    def __init__(self, tree: Tree) -> None:
        self.root = _git_root(tree)
        self.refuse_in_progress()
        self.identity = _identity(self.root)
        self.head: Optional[str] = None
        self.ref: Optional[str] = None
        self.expected: Optional[str] = None  # where HEAD must be: the run's start, then its last commit
        self.ours: List[str] = []  # the commits this run made, in order
        self.pending: Optional[str] = None  # the tree of the commit being made (until it is found)
        self.env: Dict[str, str] = {}
        self.folder: Optional[str] = None
        self.transaction: Optional[Transaction] = None

    def refuse_in_progress(self) -> None:
        """A merge (plain or squash), cherry-pick, revert, rebase, ``git am`` or bisect in progress is refused:
        the series' first commit would conclude it (or land in the middle of it)."""
        names = [name for name, _, _ in IN_PROGRESS]
        out = _git(self.root, "rev-parse", *[arg for name in names for arg in ("--git-path", name)])
        if out.returncode != 0:
            raise ValueError(f"--into-git: git rev-parse failed: {' '.join(out.stderr.split())[:500]}")
        paths = out.stdout.splitlines()
        for (name, what, how), path in zip(IN_PROGRESS, paths):
            found = Path(path) if Path(path).is_absolute() else self.root / path
            if not found.exists():
                continue
            if name == "rebase-apply" and (found / "applying").exists():
                what = "git am"
                how = "git am --continue, or git am --abort"
            raise ValueError(f"--into-git: {what} is in progress in {shown_path(self.root)} ({name}); accepted: "
                             f"a repository with no operation in progress: end it first ({how})")

    def refuse_uncommitted(self, paths: Sequence[Path]) -> None:
        """Every file the series writes (or would have written, had an earlier run not done
        it already) must be committed and clean: never commit a step over an uncommitted
        earlier one, or over the user's own edits."""
        paths = sorted({str(p) for p in paths})
        if not paths:
            return
        out = _git(self.root, "status", "--porcelain", "--untracked-files=all", "--", *paths)
        if out.returncode != 0:
            raise ValueError(f"--into-git: git status failed: {out.stderr.strip()}")
        dirty = [line[3:] for line in out.stdout.splitlines() if line.strip()]
        # git status does not look at files marked assume-unchanged ("h") or skip-worktree ("S"):
        # an edit of them would be committed unseen, and the mark lost
        marks = _git(self.root, "ls-files", "-v", "--", *paths)
        if marks.returncode != 0:
            raise ValueError(f"--into-git: git ls-files failed: {marks.stderr.strip()}")
        hidden = [line[2:] for line in marks.stdout.splitlines() if line[:1] == "S" or line[:1].islower()]
        if hidden:
            shown = ", ".join(hidden[:3]) + (f" and {len(hidden) - 3} more" if len(hidden) > 3 else "")
            raise ValueError(f"--into-git: files the series writes are marked assume-unchanged or skip-worktree "
                             f"({shown}): git hides their edits; accepted: unmarked files (git update-index "
                             f"--no-assume-unchanged --no-skip-worktree), committed or stashed")
        if dirty:
            shown = ", ".join(dirty[:3]) + (f" and {len(dirty) - 3} more" if len(dirty) > 3 else "")
            raise ValueError(f"--into-git: uncommitted changes in files the series writes ({shown}): an earlier "
                             f"run without --into-git, or edits of yours; commit or stash them first")

    def _run(self, what: str, *args: str, stdin: Optional[str] = None, private: bool = True,
             wait_for_locks: float = 0.0) -> str:
        """git ``args`` (with the private index unless not ``private``); ValueError naming ``what``
        when it fails.  ``wait_for_locks``: seconds to keep trying while another git holds a
        lock it needs (a roll back must not give up on the first try)."""
        deadline = time.monotonic() + wait_for_locks
        while True:
            out = _git(self.root, *GIT_EXACT, *args, stdin=stdin, env=self.env if private else None)
            if out.returncode == 0 or ".lock': File exists" not in out.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if out.returncode != 0:
            raise ValueError(f"--into-git: {what} failed: {' '.join((out.stderr or out.stdout).split())[:2000]}")
        return out.stdout.strip()

    def prepare(self, subjects: Sequence[str], paths: Sequence[str]) -> Dict[str, Any]:
        """Where the run starts (HEAD, the branch) and its private index's folder, as the
        journal records them: what ``_recover_git`` needs to undo a run that was killed."""
        self.head = self._head()  # None: no commit yet
        self.expected = self.head
        self.ref = self._branch()  # None: a detached HEAD
        with interrupts.deferred():
            self.folder = tempfile.mkdtemp(prefix="sglang-arch-index-")
        return {"git": {"root": str(self.root), "head": self.head, "ref": self.ref, "subjects": list(subjects),
                        "paths": [str(p) for p in paths], "index": self.folder}}

    def begin(self, transaction: Transaction) -> None:
        self.refuse_in_progress()  # again: one may have started while the series was planned
        self.refuse_moved_head("before the first commit")
        self.transaction = transaction
        # The undo is in place before what it undoes exists (a signal may come in between).
        transaction.on_rollback("the private index", self._drop_index)
        transaction.on_rollback("HEAD", self._restore_head)
        self.env = {**os.environ, "GIT_INDEX_FILE": os.path.join(self.folder, "index")}  # type: ignore[arg-type]
        self._run("git read-tree", "read-tree", *([self.head] if self.head else ["--empty"]))
        interrupts.checkpoint("git:begin")

    def _head(self) -> Optional[str]:
        out = _git(self.root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
        return out.stdout.strip() if out.returncode == 0 else None

    def _branch(self) -> Optional[str]:
        out = _git(self.root, "symbolic-ref", "-q", "HEAD")
        return out.stdout.strip() if out.returncode == 0 else None

    def _parent(self, commit: str) -> Optional[str]:
        out = _git(self.root, "rev-parse", "--verify", "-q", f"{commit}^1")
        return out.stdout.strip() if out.returncode == 0 else None

    def refuse_moved_head(self, what: str) -> None:
        """HEAD must be where the run left it: a commit, checkout or reset by another
        process (the user, an editor, a hook) since would be overwritten by the series'
        next commit (made from a private index of the tree as the series last saw it)."""
        now, branch = self._head(), self._branch()
        if now == self.expected and branch == self.ref:
            return
        moved = (f"the branch changed from {self.ref or 'a detached HEAD'} to {branch or 'a detached HEAD'}"
                 if branch != self.ref else f"HEAD is at {(now or 'no commit')[:12]}, not "
                 f"{(self.expected or 'no commit')[:12]}")
        raise ValueError(f"--into-git: {what}: {moved}: another process (a commit of yours, an editor, a hook) "
                         f"changed the repository while the series ran; it stopped rather than overwrite that; "
                         f"accepted: no other git command in this repository until upstream --into-git ends")

    def commit(self, result: StepResult, paths: Sequence[str]) -> str:
        number = result.step.number
        self._run(f"git add of step {number}", "add", "-A", "--", *paths)
        interrupts.checkpoint(f"git:add:{number}")
        self.pending = tree = self._run("git write-tree", "write-tree")
        self.refuse_moved_head(f"before the commit of step {number}")
        # --cleanup=whitespace: the PR text is the message as written, blank lines tidied as for any
        # -F message (commit.cleanup=strip would drop its "## " headings as comments)
        self._run(f"git commit of step {number}", *self.identity, "commit", "--quiet", "--cleanup=whitespace",
                  "-F", "-", stdin=commit_message(result))
        made = self._find_commit(tree)
        if made is not None:
            self.ours.append(made)
        self.pending = None
        interrupts.checkpoint(f"git:commit:{number}")
        if made is None:
            made = self._find_changed(subject=commit_message(result).split("\n", 1)[0])
            if made is not None:  # ours, with other content: a hook changed what it commits
                self.ours.append(made)
                raise ValueError(f"--into-git: git commit of step {number}: a hook (pre-commit or commit-msg) "
                                 f"changed the files the commit holds (a formatter?), so it is not the series' "
                                 f"step; accepted: hooks that commit the staged files as they are (format after "
                                 f"upstream, in a commit of your own)")
        now = self._head()
        if made is not None and self._parent(made) != self.expected:
            raise ValueError(f"--into-git: git commit of step {number}: another process committed at the same "
                             f"moment (the commit made is not on {(self.expected or 'no commit')[:12]}); accepted: no "
                             f"other git command in this repository until upstream --into-git ends")
        if made is None or now != made or self._branch() != self.ref:
            raise ValueError(f"--into-git: git commit of step {number}: afterwards HEAD is at {(now or 'no commit')[:12]}, "
                             f"not at the commit just made: a hook (post-commit) or another process moved it or "
                             f"committed on top; accepted: hooks that leave HEAD on the commit made")
        self.expected = made
        return self._run("git rev-parse", "rev-parse", "--short", made)

    def _find_changed(self, subject: str) -> Optional[str]:
        """The commit just made where its content is not the private index's: the child of
        ``expected`` on HEAD's first-parent line with the step's subject."""
        for commit, found in _first_parents(self.root, self._head(), self.expected) or []:
            if found == subject and self._parent(commit) == self.expected:
                return commit
        return None

    def _find_commit(self, tree: str) -> Optional[str]:
        """The commit just made: on the first-parent line of HEAD above ``expected`` (a hook
        may have committed on top, another process under it), the lowest with the private
        index's tree (an empty commit on top has the same tree); None where it is not there."""
        commit, found = self._head(), None
        for _ in range(8):
            if commit is None or commit == self.expected:
                break
            if _git(self.root, "rev-parse", f"{commit}^{{tree}}").stdout.strip() == tree:
                found = commit
            commit = self._parent(commit)
        return found

    def finish(self, paths: Sequence[str]) -> None:
        """The user's index takes the committed files (and only those).  No files: nothing
        to update (``git reset --`` with no path would reset the user's whole index).  A roll
        back after it puts those index entries back as they were (HEAD's before the run: the
        files were clean)."""
        self.refuse_moved_head("before updating the index")
        if paths:
            if self.transaction is not None:
                self.transaction.on_rollback("the index", lambda: self._restore_index(paths))
            self._run("updating the index (git reset -- <the files written>)", "reset", "-q", "--", *paths,
                      private=False)
            interrupts.checkpoint("git:reset")
        self._drop_index()

    def _restore_index(self, paths: Sequence[str]) -> None:
        """Nothing where the reset did not happen (another git held the index)."""
        if self.head is None:
            if not _git(self.root, "ls-files", "--", *paths).stdout.strip():
                return
        elif _git(self.root, "diff", "--cached", "--quiet", self.head, "--", *paths).returncode == 0:
            return
        if self.head is None:  # no commit before the run: the files were in no index entry
            self._run("git rm --cached", "rm", "--cached", "-q", "-r", "--ignore-unmatch", "--", *paths,
                      private=False, wait_for_locks=ROLLBACK_WAIT)
        else:
            self._run("git reset", "reset", "-q", self.head, "--", *paths, private=False,
                      wait_for_locks=ROLLBACK_WAIT)

    def _drop_index(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _restore_head(self) -> Optional[str]:
        """The run's own commits off the top of the branch, and nothing else: a commit made
        by another process (on top of the series, or between its commits) stays, and so
        does every commit under it; a branch changed since is left alone."""
        now = self._head()
        if now == self.head and self._branch() == self.ref:
            return None
        if self._branch() != self.ref:
            return (f"HEAD was moved to another branch during the run: left there; the series' commits "
                    f"({len(self.ours)}) stay on {self.ref or 'the detached HEAD'}")
        if self.pending is not None:  # interrupted inside the commit: git may have made it
            made = self._find_commit(self.pending)
            if made is not None:
                self.ours.append(made)
        keep = now
        while keep is not None and keep in self.ours:
            keep = self._parent(keep)
        if keep == now:
            return (f"HEAD is at {(now or 'no commit')[:12]}, a commit made by another process during the run: "
                    f"left there (to drop the series' commits under it as well: git reset --keep "
                    f"{(self.head or 'HEAD')[:12]})")
        old = [now] if now else []
        if keep is None:  # the branch had no commit: it goes away again
            self._run("git update-ref -d", "update-ref", "-d", self.ref or "HEAD", *old, private=False,
                      wait_for_locks=ROLLBACK_WAIT)
            return "no commit was made"
        where = ["--no-deref", "HEAD"] if self.ref is None else [self.ref]
        self._run("git update-ref", "update-ref", "-m", "sglang-arch upstream: rolled back", *where, keep,
                  *old, private=False, wait_for_locks=ROLLBACK_WAIT)
        if keep != self.head:
            return (f"HEAD is back at {keep[:12]}, a commit made by another process during the run (the series' "
                    f"commits under it stay in its history)")
        return f"HEAD is back at {self.head[:12]}"


def _recover_git(tree: Tree, extra: Dict[str, Any]) -> Optional[str]:
    """The git part of a killed ``--into-git`` run, undone: its commits off the branch (each
    one of the series' subjects, down to where the run started; anything else on top is
    refused, with nothing changed) and the index entries of its files as they were.  The
    journal is a file in the tree: it must name this tree's repository, and only a
    private index folder of the run's own name is removed."""
    info = extra.get("git")
    if not isinstance(info, dict):
        return None
    root, head, ref = Path(str(info.get("root"))), info.get("head"), info.get("ref")
    out = _git(tree.package, "rev-parse", "--show-toplevel")
    if out.returncode != 0 or Path(out.stdout.strip()).resolve() != root.resolve():
        raise ValueError(f"{shown_path(tree.package)}/{JOURNAL}: an interrupted --into-git run's journal names the "
                         f"repository {shown_path(root)}, not this tree's; nothing was changed; accepted: a journal "
                         f"sglang-arch wrote for this tree (check its files, then remove it)")
    index = info.get("index")
    if (isinstance(index, str) and os.path.basename(index).startswith("sglang-arch-index-")
            and os.path.realpath(os.path.dirname(index)) == os.path.realpath(tempfile.gettempdir())):
        shutil.rmtree(index, ignore_errors=True)
    subjects = set(info.get("subjects") or [])
    now = _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}").stdout.strip() or None
    branch = _git(root, "symbolic-ref", "-q", "HEAD").stdout.strip() or None
    if branch != ref:
        raise ValueError(f"a killed upstream --into-git run is to be undone on {ref or 'a detached HEAD'}, but HEAD is "
                         f"now on {branch or 'a detached HEAD'}; nothing was changed; accepted: that branch checked "
                         f"out again (git checkout), then the same command")
    chain = _first_parents(root, now, head)
    journal = f"{shown_path(tree.package)}/{JOURNAL}"
    if chain is None:
        raise ValueError(f"a killed upstream --into-git run is to be undone, but HEAD is not above the commit it "
                         f"started from ({(head or 'no commit')[:12]}); nothing was changed; accepted: the branch "
                         f"back on it, or {journal} removed to keep everything as it is")
    ours = [c for c, subject in chain if subject in subjects]
    top = len(ours) and all(subject in subjects for _, subject in chain[:len(ours)])  # the series' alone, on top
    if ours and not top:
        raise ValueError(f"a killed upstream --into-git run is to be undone, but {len(chain) - len(ours)} commit(s) made "
                         f"since lie on top of its {len(ours)}; nothing was changed; accepted: the series' commits "
                         f"dropped from under yours (git rebase -i {(head or '--root')[:12]}, dropping its {len(ours)} "
                         f"commit(s)), then the same command; or {journal} removed to keep the history as it is")
    notes = []
    if ours:  # the series' commits alone on top: the branch goes back to where the run started
        keep = chain[len(ours)][0] if len(chain) > len(ours) else head
        args = ["update-ref", "-d", ref or "HEAD", now] if keep is None else \
            ["update-ref", "-m", "sglang-arch upstream: a killed run undone", *([ref] if ref else ["--no-deref", "HEAD"]),
             keep, now]
        out = _git(root, *args)
        if out.returncode != 0:
            raise ValueError(f"a killed upstream --into-git run: git update-ref failed: {' '.join(out.stderr.split())[:500]}")
        notes.append(f"its {len(ours)} commit(s) removed, HEAD back at {(keep or 'no commit')[:12]}")
    paths = list(info.get("paths") or [])
    base = _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}").stdout.strip() or None
    if paths:  # the index entries of its files as HEAD has them (commits made since included)
        args = (["rm", "--cached", "-q", "-r", "--ignore-unmatch", "--", *paths] if base is None
                else ["reset", "-q", base, "--", *paths])
        out = _git(root, *GIT_EXACT, *args)
        if out.returncode != 0:
            raise ValueError(f"a killed upstream --into-git run: restoring the index failed: "
                             f"{' '.join(out.stderr.split())[:500]}")
    return "; ".join(notes) or None


# Commits walked down from HEAD to where a killed run started (its own and any made since).
MAX_RECOVERY_COMMITS = 1000


def _first_parents(root: Path, top: Optional[str], bottom: Optional[str]) -> Optional[List[Tuple[str, str]]]:
    """(commit, subject) from ``top`` down its first parents to ``bottom`` (not included);
    None where ``bottom`` is not on that line (within MAX_RECOVERY_COMMITS)."""
    if top == bottom:
        return []
    out = _git(root, "log", "--first-parent", f"--max-count={MAX_RECOVERY_COMMITS}", "--format=%H %s", top or "HEAD")
    chain = []
    for line in out.stdout.splitlines():
        commit, _, subject = line.partition(" ")
        if commit == bottom:
            return chain
        chain.append((commit, subject))
    return chain if bottom is None and out.returncode == 0 and len(chain) < MAX_RECOVERY_COMMITS else None


def _identity(root: Path) -> Tuple[str, ...]:
    """``-c key=value`` for each of user.name and user.email the configuration lacks (a
    configured one is kept: the commit is the user's)."""
    out: Tuple[str, ...] = ()
    for key, value in GIT_IDENTITY.items():
        if not _git(root, "config", key).stdout.strip():
            out += ("-c", f"{key}={value}")
    return out


def commit_message(result: StepResult) -> str:
    """The step's PR text, its numbers and what it leaves out filled from this tree's plan."""
    subject, body = texts.pr_text(result.step, result)
    return f"{subject}\n\n{body}\n"


# --- the report -----------------------------------------------------------------------

_WOULD = {REWRITTEN: "would be rewritten", WRITTEN: "would be written"}
# Each file of a step in the report: (done, with --check).
_VERBS = {"add": ("added", "would add"), "change": ("changed", "would change"), "remove": ("removed", "would remove")}


def render(series: SeriesResult) -> str:
    """The human report: per step, each call site and what happened to it, and the diff size."""
    mode = " (--check: nothing written)" if series.check else ""
    lines = [series.recovered] if series.recovered else []
    lines.append(f"sglang-arch upstream: {series.tree.describe()}{mode}; call sites as of sglang "
                 f"{', '.join(SGLANG_TESTED)}")
    total = len(series.steps)
    for result in series.steps:
        added, removed = result.counts
        if result.skipped:
            state = "skipped, nothing written"
        elif not result.changes:
            state = "no change"
        elif series.check:
            state = f"would change {len(result.changes)} file(s), +{added} -{removed}{_split(result)}"
        else:
            state = f"{len(result.changes)} file(s), +{added} -{removed}{_split(result)}"
            if result.commit:
                state += f", commit {result.commit}"
        lines.append(f"[{result.step.number}/{total}] {result.step.title}: {state}")
        if result.skipped:
            lines.append(f"    {result.skipped}")
        for outcome in result.outcomes:
            status = _WOULD.get(outcome.status, outcome.status) if series.check else outcome.status
            lines.append(f"    {outcome.site}: {status}")
            if outcome.detail:
                lines.append(f"        {outcome.detail}")
        for change in result.changes:
            verb = "add" if change.old is None else "remove" if change.new is None else "change"
            shown = _src_relative(series.tree, change) + (" (SRC, SGLang's CPU CI)" if change.is_test else "")
            lines.append(f"    {_VERBS[verb][series.check]:<14}{shown}, +%d -%d" % change.counts)
        if result.tests_note and not result.skipped:
            lines.append(f"    {result.tests_note}")
    commits = sum(1 for s in series.steps if s.commit)
    if series.tree.layout != "git clone":
        lines.append(NO_TEST_TREE)
    if series.untouched:
        tail = ("some sites were left out (their code differs from the releases the series was written for, "
                "or is not in this tree); the rest landed (docs/upstreaming.md, 'Sites left out')")
    elif series.changed:
        tail = "the tree is not routed yet" if series.check else (
            f"{commits} commit(s) made" if series.into_git else "files written (no commits: --into-git not given)")
    else:
        tail = "nothing to do: every step is routed and up to date"
    lines.append(tail)
    return "\n".join(lines)


def _src_relative(tree: Tree, change: FileChange) -> str:
    """A file of the series as a path relative to SRC (``python/sglang/srt/...`` in a clone)."""
    base = tree.package if change.base == "package" else tree.src
    return (base / change.path).relative_to(tree.src).as_posix()


def _split(result: StepResult) -> str:
    """`` (call sites +a -r, tests +t -u)``: the parts of a step's size, where it has them."""
    parts = []
    if result.step.sites:
        parts.append("call sites +%d -%d" % result.call_site_counts)
    if any(c.is_test for c in result.changes):
        parts.append("tests +%d -%d" % result.test_counts)
    return f" ({', '.join(parts)})" if parts else ""


def exit_status(series: SeriesResult) -> int:
    """0: routed and up to date (or just made so); 1: --check found work, or a step was left out."""
    if series.untouched:
        return 1
    return 1 if series.check and series.changed else 0
