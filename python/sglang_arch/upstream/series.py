"""Plan and apply the upstream patch series on an SGLang source tree.

Planning reads the tree and computes every step's file changes in memory, each step on
top of the previous ones (steps 3 and 4 both touch ``arg_groups/overrides.py``); a step
whose call sites do not all match is dropped whole, so no concern is ever half routed.
Applying is one transaction (``files.Transaction``): every planned file is checked and
staged beside its target, then each step's files are put in place and, with
``into_git``, committed on their own with the PR text of ``templates/pr/`` as the
message.  Any failure (a file that cannot be written, git refusing a commit) undoes the
whole run: the files, the index and HEAD are as they were.  Nothing is written before
every step has been planned, and nothing at all with ``check``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .. import __version__, interrupts
from ..arch.validate import shown_path
from ..files import MAX_SOURCE_BYTES, MAX_SOURCE_FILES, Transaction, Write, folder_lock, read_source
from . import glue, replace, texts
from .imports import imports, module_name
from .rewriter import (
    ALREADY,
    UNTOUCHED,
    UPDATED,
    ModuleResult,
    SiteOutcome,
    count_changes,
    rewrite_source,
)
from .sites import SGLANG_TESTED, STEPS, Step, glue_files

ARCH_DIR = "srt/arch"
# SGLang's registered-test layout (git clone only): the series' own tests, relative to SRC.
TESTS_DIR = "test/registered/unit/arch"
# The step that writes each test file (templates/tests/<name>); the call-site test
# exercises every concern step, so it is written with the last one.
TEST_FILES = {1: "test_arch_registry.py", 4: "test_arch_call_sites.py"}
NO_TEST_TREE = "no tests written: an installed package has no test tree (SGLang's tests live in a git clone)"
WRITTEN = "written"
UP_TO_DATE = "up to date"
# Absolute imports the registry may make besides the standard library: optional
# detection back-ends it imports inside functions, both already SGLang dependencies.
REGISTRY_THIRD_PARTY = frozenset({"torch", "pynvml"})
GIT_IDENTITY = ("-c", "user.name=sglang-arch", "-c", "user.email=sglang-arch@localhost")
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
)


@dataclass(frozen=True)
class Tree:
    """Where the ``sglang`` package of SRC lives, and which layout SRC has."""

    src: Path
    package: Path
    layout: str  # "git clone" | "installed package"

    def describe(self) -> str:
        if self.layout == "git clone":
            return f"SGLang git clone {self.src} (package {self.package.relative_to(self.src)})"
        return f"installed sglang package {self.package}"


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


@dataclass
class StepResult:
    step: Step
    outcomes: List[SiteOutcome] = field(default_factory=list)
    changes: List[FileChange] = field(default_factory=list)
    skipped: Optional[str] = None  # why nothing of this step is written
    commit: Optional[str] = None
    tests_note: Optional[str] = None  # why this step's test file is not written
    owned: List[Tuple[str, str]] = field(default_factory=list)  # (path, base) of every file it writes, changed or not
    kept: List[str] = field(default_factory=list)  # files under srt/arch/ sglang-arch did not write: left alone

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
        """(added, removed) in SGLang's own files: everything outside ``srt/arch/``."""
        added = removed = 0
        for change in self.changes:
            if not change.is_test and not change.path.startswith(ARCH_DIR + "/"):
                a, r = change.counts
                added, removed = added + a, removed + r
        return added, removed

    @property
    def is_update(self) -> bool:
        """Only refreshes what an earlier run wrote (no new site, no new registry)."""
        return all(o.status in (ALREADY, UPDATED, UP_TO_DATE) for o in self.outcomes)


@dataclass
class SeriesResult:
    tree: Tree
    steps: List[StepResult]
    check: bool
    into_git: bool

    @property
    def changed(self) -> bool:
        return any(s.changes for s in self.steps)

    @property
    def untouched(self) -> bool:
        return any(s.skipped for s in self.steps)


def locate(src: str) -> Tree:
    """SRC as a git clone (``python/sglang/srt/``) or an installed package (``srt/``)."""
    expected = ("expected an SGLang git clone (with python/sglang/srt/) or an installed sglang package "
                "directory (with __init__.py and srt/)")
    path = Path(src).expanduser()
    if not path.is_dir():
        raise ValueError(f"{src}: not a directory; {expected}")
    path = path.resolve()
    if (path / "python" / "sglang" / "srt").is_dir():
        tree = Tree(path, path / "python" / "sglang", "git clone")
    elif (path / "srt").is_dir() and (path / "__init__.py").is_file():
        tree = Tree(path, path, "installed package")
    else:
        raise ValueError(f"{src}: {expected}")
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
    for part in parts:
        if part in ("..", ".", ""):
            raise ValueError(f"{path}: path with '{part}' refused")
        current = current / part
        if current.is_symlink():
            raise ValueError(f"{current}: is a symlink; upstream writes only real files and folders inside "
                             f"{tree.src} (replace the link with a folder, or remove it)")
    resolved = path.resolve()
    if resolved != tree.src and tree.src not in resolved.parents:
        raise ValueError(f"{path}: resolves outside {tree.src} ({resolved}); refused")
    return path


def _confine_arch_dir(tree: Tree) -> None:
    """``srt/arch`` and everything below it: no symlink anywhere (checked before anything is read or written)."""
    arch_dir = confine(tree, ARCH_DIR)
    if not arch_dir.exists():
        return
    if not arch_dir.is_dir():
        raise ValueError(f"{arch_dir}: not a folder; refused")
    for dirpath, dirnames, filenames in os.walk(arch_dir, followlinks=False):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            if full.is_symlink():
                raise ValueError(f"{full}: is a symlink; upstream writes only real files and folders inside "
                                 f"{tree.src} (replace the link, or remove it)")


# --- the registry (step 1) ------------------------------------------------------------

def registry_source_dir() -> Path:
    from .. import arch

    return Path(arch.__file__).resolve().parent


def registry_files(source: Optional[Path] = None) -> Dict[str, str]:
    """``srt/arch/...`` -> content: the registry byte for byte, its README (which lists every
    file sglang-arch writes in ``srt/arch/``), the shared glue.

    Refuses (ValueError) a registry that imports anything but itself, the standard
    library and the optional detection back-ends: inside SGLang it must work unchanged.
    The glue's ``__init__`` (what every step's glue module imports) is copied from the
    plugin's ``glue`` package with its registry imports translated (``glue.py``).
    """
    source = source or registry_source_dir()
    files: Dict[str, str] = {}
    problems: List[str] = []
    for path in sorted(source.rglob("*.py")):
        rel = path.relative_to(source)
        if "__pycache__" in rel.parts:
            continue
        if rel.parts[0] == "glue":
            problems.append(f"{rel.as_posix()}: glue/ is reserved for the generated glue modules")
        text = path.read_text(encoding="utf-8")
        problems += [f"{rel.as_posix()}: {p}" for p in portability_problems(text, len(rel.parts) - 1)]
        files[f"{ARCH_DIR}/{rel.as_posix()}"] = text
    if problems:
        raise ValueError("the registry cannot move into SGLang unchanged: " + "; ".join(problems))
    files[f"{ARCH_DIR}/glue/__init__.py"] = glue.tree_module("__init__")
    names = [rel[len(ARCH_DIR) + 1:] for rel in files] + ["README.md", *glue_files()]
    files[f"{ARCH_DIR}/README.md"] = texts.registry_readme(names)
    return files


def portability_problems(text: str, depth: int) -> List[str]:
    """Imports that would break once the file lives in ``sglang/srt/arch`` (``depth``: sub-package level)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return [f"does not parse ({exc.msg}, line {exc.lineno})"]
    allowed = set(sys.stdlib_module_names) | REGISTRY_THIRD_PARTY
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        elif isinstance(node, ast.ImportFrom):
            if node.level > depth + 1:
                problems.append(f"line {node.lineno}: relative import leaves the package ({'.' * node.level}"
                                f"{node.module or ''})")
            continue
        else:
            continue
        for name in names:
            if name.split(".")[0] not in allowed:
                problems.append(f"line {node.lineno}: imports {name} (only relative imports, the standard "
                                f"library and {', '.join(sorted(REGISTRY_THIRD_PARTY))} are allowed)")
    return problems


def _plan_registry(step: Step, tree: Tree, files: Dict[str, str], overlay: "_Overlay") -> StepResult:
    result = StepResult(step)
    arch_dir = tree.package / ARCH_DIR
    label = f"sglang.srt.arch ({len(files)} files)"
    readme = overlay.read(f"{ARCH_DIR}/README.md")
    present = arch_dir.is_dir() and any(p.is_file() and "__pycache__" not in p.parts for p in arch_dir.rglob("*"))
    if present and (readme is None or not readme.startswith(texts.README_FIRST_LINE)):
        why = f"{ARCH_DIR}/ exists and was not written by sglang-arch (no README.md of ours); left as it is"
        result.outcomes.append(SiteOutcome(f"{ARCH_DIR}/", label, UNTOUCHED, why))
        result.skipped = why
        return result
    known = set(files) | {f"{ARCH_DIR}/{rel}" for rel in glue_files()}
    ours = {f"{ARCH_DIR}/{name}" for name in texts.manifest(readme or "")}  # what an earlier run wrote
    for rel, text in files.items():
        old = overlay.read(rel)
        if old != text:
            result.changes.append(FileChange(rel, old, text))
    if arch_dir.is_dir():
        for path in sorted(p for p in arch_dir.rglob("*") if p.is_file()):
            rel = path.relative_to(tree.package).as_posix()
            if "__pycache__" in rel.split("/") or rel in known:
                continue
            if rel in ours:  # written by an earlier sglang-arch, gone from the registry since
                result.changes.append(FileChange(rel, overlay.read(rel), None))
            else:
                result.kept.append(rel)
    result.owned = [(rel, "package") for rel in files] + [(c.path, c.base) for c in result.changes if c.new is None]
    status = WRITTEN if not present else (UPDATED if result.changes else UP_TO_DATE)
    result.outcomes.append(SiteOutcome(f"{ARCH_DIR}/", label, status))
    return result


# --- the call sites (steps 2-5) -------------------------------------------------------

def _plan_sites(step: Step, overlay: "_Overlay", registry_ok: bool) -> StepResult:
    result = StepResult(step)
    local: Dict[str, str] = {}
    overlay.watch(_removable_words([step]))  # already watched when plan_series named them first
    for plan in step.modules:
        source = local[plan.path] if plan.path in local else overlay.read(plan.path)
        if source is None and all(isinstance(s, replace.Delete) for s in plan.sites):
            result.outcomes += [SiteOutcome(plan.path, s.label, ALREADY, "the module is removed")
                                for s in plan.sites]
            continue
        if source is None:
            result.outcomes += [SiteOutcome(plan.path, s.label, UNTOUCHED, f"{plan.path} is missing")
                                for s in plan.sites]
            continue
        module = rewrite_source(source, plan, where=shown_path(overlay.package / plan.path))
        if module.new == "" and module.changed:
            user = _importer_of(overlay, plan.path, local)
            if user:
                module = ModuleResult(plan.path, source, source, [
                    SiteOutcome(plan.path, s.label, UNTOUCHED, f"{user} still imports the module this removes")
                    for s in plan.sites])
        result.outcomes += module.outcomes
        local[plan.path] = module.new
    bad = [o for o in result.outcomes if o.status == UNTOUCHED]
    if not registry_ok:
        result.skipped = "needs the registry (step 1), which is not written"
    elif bad:
        result.skipped = f"{bad[0].path}: {bad[0].site} {bad[0].reason}"
    if result.skipped:
        result.outcomes = [o if o.status == UNTOUCHED else
                           SiteOutcome(o.path, o.site, UNTOUCHED, f"step skipped: {result.skipped}")
                           for o in result.outcomes]
        return result
    for path, text in local.items():
        old = overlay.read(path)
        if old != text and text is not None:
            result.changes.append(FileChange(path, old, text or None))  # "": nothing left, removed
    assert step.glue is not None  # only the registry step has no glue
    glue_path = f"{ARCH_DIR}/glue/{step.glue}.py"
    module = glue.tree_module(step.glue)
    old = overlay.read(glue_path)
    if old != module:
        result.changes.append(FileChange(glue_path, old, module))
    result.outcomes.append(SiteOutcome(glue_path, "glue module", WRITTEN if old is None else
                                       (UPDATED if old != module else UP_TO_DATE)))
    result.owned = [(plan.path, "package") for plan in step.modules] + [(glue_path, "package")]
    return result


def _importer_of(overlay: "_Overlay", rel: str, local: Dict[str, Optional[str]]) -> Optional[str]:
    """A module of the package (as planned so far) that still imports the module ``rel``
    (``imports.py``: import statements and attribute uses, not words), with how; else None.
    Only files that name the module's last part at all are parsed: for the files on disk
    that is the overlay's index (``_Overlay.files_naming``), made in one pass over the
    package for every module the series may remove, not one walk per removed module."""
    import re

    target = module_name(rel, overlay.package.name)
    last = target.rpartition(".")[2]
    word = re.compile(r"(?<![\w])%s(?![\w])" % re.escape(last))
    naming = overlay.files_naming(last)
    changed = {key for key in list(overlay.planned) + list(local) if ":" not in key and key.endswith(".py")}
    for other in sorted((naming | changed) - {rel}):
        text = local[other] if other in local else overlay.read(other)
        if text and word.search(text):
            how = imports(text, other, target, overlay.package.name)
            if how:
                return f"{other} ({how})"
    return None


def _removable_words(steps: Iterable[Step]) -> List[str]:
    """The last part of every module a step may remove (a plan that deletes names)."""
    return [module_name(plan.path).rpartition(".")[2] for step in steps for plan in step.modules
            if any(isinstance(s, replace.Delete) for s in plan.sites)]


# Up to this many words a file's bytes are searched for each (a fast scan: 6 words over
# SGLang 0.5.23's 68 MB of Python take about 0.5 s); beyond it the file is split into its
# ASCII words once and those looked up, in time that does not grow with the words asked.
SCAN_WORDS_EACH = 8
_ASCII_WORD = re.compile(rb"[A-Za-z0-9_]+")


def names_in(data: bytes, words: Sequence[str]) -> List[str]:
    """The ``words`` that ``data`` may name as a whole word: every word that a search
    bounded by non-word characters (``(?<!\\w)word(?!\\w)`` on the decoded text) finds
    is among them (a superset: the caller searches the text itself after)."""
    if len(words) <= SCAN_WORDS_EACH:
        return [w for w in words if w.encode() in data]
    found = [w for w in words if not _ASCII_WORD.fullmatch(w.encode()) and w.encode() in data]
    tokens = set(_ASCII_WORD.findall(data))
    return found + [w for w in words if _ASCII_WORD.fullmatch(w.encode()) and w.encode() in tokens]


def _raw_source(path: Path) -> Optional[bytes]:
    """A cheap first look (one read of the bytes, no decoding): the bytes of a regular file
    of at most MAX_SOURCE_BYTES; None for anything else (a link, a folder, a large or odd
    file), which goes to the checked read, which names what is wrong."""
    import stat

    try:  # never follows a link, never waits on a FIFO swapped in after the walk
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(MAX_SOURCE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


class _Overlay:
    """The tree's files as the steps planned so far leave them."""

    def __init__(self, package: Path, tree: Optional[Tree] = None) -> None:
        self.package = package
        self.tree = tree
        self.planned: Dict[str, Optional[str]] = {}
        self._disk: Optional[List[str]] = None  # the package's .py files on disk (one walk)
        self._naming: Dict[str, set] = {}  # word -> files on disk whose bytes contain it
        self._odd: set = set()  # files the cheap read could not judge: always looked at
        self._pending: set = set()  # words to index at the first ask (watch)

    def disk_files(self) -> List[str]:
        """The package's ``.py`` files on disk, relative, walked once (at most MAX_SOURCE_FILES)."""
        if self._disk is None:
            paths: List[str] = []
            for dirpath, dirnames, filenames in os.walk(self.package, followlinks=False):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                paths += [Path(dirpath, f).relative_to(self.package).as_posix() for f in filenames
                          if f.endswith(".py")]
                if len(paths) > MAX_SOURCE_FILES:
                    raise ValueError(f"{shown_path(self.package)}: more than {MAX_SOURCE_FILES} Python files; "
                                     f"accepted: at most {MAX_SOURCE_FILES}")
            self._disk = sorted(paths)
        return self._disk

    def watch(self, words: Iterable[str]) -> None:
        """Words ``files_naming`` may be asked for: the first ask indexes them all in one read
        of each file (the series names every module it may remove before it starts)."""
        self._pending.update(words)

    def _index(self) -> None:
        new = sorted(self._pending - set(self._naming))
        if not new:
            return
        for w in new:
            self._naming[w] = set()
        for rel in self.disk_files():
            data = _raw_source(self.package / rel)
            if data is None:
                self._odd.add(rel)
                continue
            for w in names_in(data, new):
                self._naming[w].add(rel)

    def files_naming(self, word: str) -> set:
        """Files on disk that may name ``word``: those whose bytes hold it, and every file the
        cheap read could not judge."""
        self._pending.add(word)
        if word not in self._naming:
            self._index()
        return self._naming[word] | self._odd

    def read(self, rel: str, base: str = "package") -> Optional[str]:
        key = rel if base == "package" else f"{base}:{rel}"
        if key in self.planned:
            return self.planned[key]
        if base != "package" and self.tree is None:
            raise ValueError("a path relative to SRC needs the tree")
        path = confine(self.tree, rel, base) if self.tree is not None else self.package / rel
        if not path.exists():
            return None
        if not path.is_file():
            raise ValueError(f"{shown_path(path)}: exists and is not a regular file; accepted: a regular file "
                             f"(or nothing) where the series reads or writes")
        return read_source(path)

    def apply(self, changes: Sequence[FileChange]) -> None:
        for change in changes:
            self.planned[change.path if change.base == "package" else f"{change.base}:{change.path}"] = change.new


def _plan_tests(step: Step, tree: Tree, overlay: _Overlay, results: Sequence[StepResult]) -> None:
    """Add the step's test file (``templates/tests/``) to ``results[-1]`` (a git clone only)."""
    result = results[-1]
    name = TEST_FILES.get(step.number)
    if name is None or result.skipped:
        return
    if tree.layout != "git clone":
        return  # the report says so once (NO_TEST_TREE)
    left_out = [r.step.number for r in results if r.skipped]
    if left_out:
        result.tests_note = (f"{TESTS_DIR}/{name} not written: it tests every step, and step(s) "
                             f"{', '.join(map(str, left_out))} were left out")
        return
    rel = f"{TESTS_DIR}/{name}"
    text = texts.template(f"tests/{name}")
    result.owned.append((rel, "src"))
    old = overlay.read(rel, "src")
    if old != text:
        result.changes.append(FileChange(rel, old, text, base="src"))


def plan_series(tree: Tree, registry_source: Optional[Path] = None) -> List[StepResult]:
    """Every step's outcome and file changes, computed without writing anything."""
    _confine_arch_dir(tree)
    files = registry_files(registry_source)
    overlay = _Overlay(tree.package, tree)
    overlay.watch(_removable_words(STEPS))  # at most one pass over the package, for every step
    results: List[StepResult] = []
    registry_ok = True
    for step in STEPS:
        if step.glue is None:
            result = _plan_registry(step, tree, files, overlay)
            registry_ok = result.skipped is None
        else:
            result = _plan_sites(step, overlay, registry_ok)
        results.append(result)
        _plan_tests(step, tree, overlay, results)
        if not result.skipped:
            overlay.apply(result.changes)
    return results


# --- applying -------------------------------------------------------------------------

def run_series(src: str, into_git: bool = False, check: bool = False,
               registry_source: Optional[Path] = None) -> SeriesResult:
    """Plan the series on SRC, then (unless ``check``) write it, one commit per step with
    ``into_git``: all of it, or (on any failure) nothing.  SRC is locked while it runs."""
    if into_git and check:
        raise ValueError("--into-git and --check exclude each other")
    tree = locate(src)
    if check:
        return SeriesResult(tree, plan_series(tree, registry_source), True, False)
    with folder_lock(tree.src):  # a second run waits for nothing: it is refused
        git = _Git(tree) if into_git else None
        steps = plan_series(tree, registry_source)
        apply_series(tree, steps, git)
    return SeriesResult(tree, steps, False, into_git)


def apply_series(tree: Tree, steps: Sequence[StepResult], git: Optional["_Git"] = None) -> None:
    """Write the planned steps in one ``Transaction`` (every file checked and staged before
    the first is replaced), step by step, committing each with ``git``; on any failure
    everything is undone and a ValueError says what failed."""
    writes = {id(change): Write(str(_target(tree, change)), change.new, make_folders=True)
              for result in steps if not result.skipped for change in result.changes}
    if git is not None:
        git.refuse_uncommitted([_target(tree, FileChange(rel, None, None, base)) for s in steps if not s.skipped
                                for rel, base in s.owned + [(c.path, c.base) for c in s.changes]])
    with Transaction(list(writes.values()), distinct=False) as transaction:
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
    if out.returncode != 0:
        raise ValueError(f"--into-git: {tree.src} is not inside a git work tree (git init it, or drop --into-git)")
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
        self.env: Dict[str, str] = {}
        self.folder: Optional[str] = None
        self.transaction: Optional[Transaction] = None

    def refuse_in_progress(self) -> None:
        """A merge, cherry-pick, revert, rebase, ``git am`` or bisect in progress is refused:
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
            out = _git(self.root, *args, stdin=stdin, env=self.env if private else None)
            if out.returncode == 0 or ".lock': File exists" not in out.stderr or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if out.returncode != 0:
            raise ValueError(f"--into-git: {what} failed: {' '.join((out.stderr or out.stdout).split())[:2000]}")
        return out.stdout.strip()

    def begin(self, transaction: Transaction) -> None:
        self.refuse_in_progress()  # again: one may have started while the series was planned
        head = _git(self.root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
        self.head = head.stdout.strip() if head.returncode == 0 else None  # None: no commit yet
        ref = _git(self.root, "symbolic-ref", "-q", "HEAD")
        self.ref = ref.stdout.strip() if ref.returncode == 0 else None  # None: a detached HEAD
        self.transaction = transaction
        # The undo is in place before what it undoes exists (a signal may come in between).
        transaction.on_rollback("the private index", self._drop_index)
        transaction.on_rollback("HEAD", self._restore_head)
        with interrupts.deferred():
            self.folder = tempfile.mkdtemp(prefix="sglang-arch-index-")
        self.env = {**os.environ, "GIT_INDEX_FILE": os.path.join(self.folder, "index")}
        self._run("git read-tree", "read-tree", *([self.head] if self.head else ["--empty"]))
        interrupts.checkpoint("git:begin")

    def commit(self, result: StepResult, paths: Sequence[str]) -> str:
        number = result.step.number
        self._run(f"git add of step {number}", "add", "-A", "--", *paths)
        interrupts.checkpoint(f"git:add:{number}")
        self._run(f"git commit of step {number}", *self.identity, "commit", "--quiet",
                  "-F", "-", stdin=commit_message(result))
        interrupts.checkpoint(f"git:commit:{number}")
        return self._run("git rev-parse", "rev-parse", "--short", "HEAD")

    def finish(self, paths: Sequence[str]) -> None:
        """The user's index takes the committed files (and only those).  No files: nothing
        to update (``git reset --`` with no path would reset the user's whole index).  A roll
        back after it puts those index entries back as they were (HEAD's before the run: the
        files were clean)."""
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
        now = _git(self.root, "rev-parse", "--verify", "-q", "HEAD^{commit}").stdout.strip() or None
        if now == self.head:
            return None
        old = [now] if now else []
        if self.head is None:  # the branch had no commit: it goes away again
            self._run("git update-ref -d", "update-ref", "-d", self.ref or "HEAD", *old, private=False,
                      wait_for_locks=ROLLBACK_WAIT)
            return "no commit was made"
        where = ["--no-deref", "HEAD"] if self.ref is None else [self.ref]
        self._run("git update-ref", "update-ref", "-m", "sglang-arch upstream: rolled back", *where, self.head,
                  *old, private=False, wait_for_locks=ROLLBACK_WAIT)
        return f"HEAD is back at {self.head[:12]}"


def _identity(root: Path) -> Tuple[str, ...]:
    configured = all(_git(root, "config", key).stdout.strip() for key in ("user.name", "user.email"))
    return () if configured else GIT_IDENTITY


def commit_message(result: StepResult) -> str:
    """The step's PR text; a refresh of an earlier run says so first."""
    subject, body = texts.pr_text(result.step)
    if result.is_update:
        step = result.step
        subject = f"[arch] Refresh step {step.number} ({step.key}) from sglang-arch {__version__}"
        body = (f"Regenerated by `sglang-arch upstream`: brings what an earlier run wrote for this step up to "
                f"date with sglang-arch {__version__}. The step, as first committed:\n\n{body}")
    return f"{subject}\n\n{body}\n\nGenerated-by: sglang-arch {__version__} (sglang-arch upstream)\n"


# --- the report -----------------------------------------------------------------------

_WOULD = {"rewritten": "would be rewritten", WRITTEN: "would be written", UPDATED: "would be updated"}
# Each file of a step in the report: (done, with --check).
_VERBS = {"add": ("added", "would add"), "change": ("changed", "would change"), "remove": ("removed", "would remove")}


def render(series: SeriesResult) -> str:
    """The human report: per step, each call site and what happened to it, and the diff size."""
    mode = " (--check: nothing written)" if series.check else ""
    lines = [f"sglang-arch upstream: {series.tree.describe()}{mode}; call sites as of sglang "
             f"{', '.join(SGLANG_TESTED)}"]
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
        path = None
        for outcome in result.outcomes:
            if outcome.path != path:
                path = outcome.path
                lines.append(f"    {path}")
            status = _WOULD.get(outcome.status, outcome.status) if series.check else outcome.status
            text = f"{status}: {outcome.reason}" if outcome.reason else status
            lines.append(f"        {outcome.site:<45} {text}")
        for change in result.changes:
            verb = "add" if change.old is None else "remove" if change.new is None else "change"
            shown = _src_relative(series.tree, change) + (" (SRC, SGLang's CPU CI)" if change.is_test else "")
            lines.append(f"    {_VERBS[verb][series.check]:<14}{shown}, +%d -%d" % change.counts)
        for rel in result.kept:
            lines.append(f"    left as it is: {_src_relative(series.tree, FileChange(rel, None, None))} "
                         f"(not written by sglang-arch)")
        if result.tests_note and not result.skipped:
            lines.append(f"    {result.tests_note}")
    commits = sum(1 for s in series.steps if s.commit)
    if series.tree.layout != "git clone":
        lines.append(NO_TEST_TREE)
    if series.untouched:
        tail = ("some call sites do not have the shape this sglang-arch was written for; their steps were "
                "left out (see docs/upstreaming.md, 'When a site is left untouched')")
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
    if result.step.glue is not None:
        parts.append("call sites +%d -%d" % result.call_site_counts)
    if any(c.is_test for c in result.changes):
        parts.append("tests +%d -%d" % result.test_counts)
    return f" ({', '.join(parts)})" if parts else ""


def exit_status(series: SeriesResult) -> int:
    """0: routed and up to date (or just made so); 1: --check found work, or a step was left out."""
    if series.untouched:
        return 1
    return 1 if series.check and series.changed else 0
