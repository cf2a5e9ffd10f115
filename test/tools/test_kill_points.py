"""SIGKILL at every moment of ``upstream`` and ``tune``, then the same command again.

A kill cannot be caught: the run leaves what it had done.  Generated from the moments the
runs name themselves (``interrupts.checkpoint``, paused there with
``SGLANG_ARCH_PAUSE_AT``), so a moment added later is covered too: for each, the command
is killed there, and then run again.  The second run must end in the state of a completed
run (the same files, the same index, the same commits: subjects and trees), with nothing
of the killed run left (no staged or kept file, no journal, no private index), and must
say that it undid the killed run first.  The tree after the kill alone never misleads:
``upstream --check`` refuses it, naming the way out, instead of planning over half a run.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sglang_arch import interrupts
from sglang_arch.files import JOURNAL

from .test_tune_hostile import valid_results
from .test_upstream_signals import _read_until, git, small_repo

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture(autouse=True)
def _no_user_git_config(tmp_path_factory, monkeypatch):
    empty = tmp_path_factory.getbasetemp() / "gitconfig-kill"
    empty.touch()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


# The plan of test_upstream_signals (three steps: new files in new folders, a changed file,
# a removed one, a test file), with srt/m1.py edited again by step 3 (as steps 2 and 5 of
# the series both edit torch_symm_mem.py), read against the tree as a real plan is: a file
# already as the series leaves it is no change (a second run after a whole one writes nothing).
READ_PLAN = textwrap.dedent("""
    def plan(tree=None, registry_source=None):
        from sglang_arch.upstream import series
        from sglang_arch.upstream.steps import STEPS

        wanted = [[("srt/arch/__init__.py", "A = 1\\n", "package"), ("srt/m1.py", "M1 = 2\\n", "package")],
                  [("srt/m2.py", None, "package"), ("srt/sub/m3.py", "M3 = 3\\n", "package")],
                  [("test/registered/unit/arch/test_x.py", "T = 1\\n", "src"), ("srt/m1.py", "M1 = 3\\n", "package")]]
        final = {(rel, base): new for step in wanted for rel, new, base in step}  # each file as the series leaves it
        planned = {}  # a file a later step edits again: read as the earlier step leaves it

        def read(rel, base):
            return planned[(rel, base)] if (rel, base) in planned else series._read(tree, rel, base)

        results = []
        for i, step in enumerate(wanted):
            changes = [series.FileChange(rel, read(rel, base), new, base) for rel, new, base in step
                       if read(rel, base) != new and series._read(tree, rel, base) != final[(rel, base)]]
            for change in changes:
                planned[(change.path, change.base)] = change.new
            results.append(series.StepResult(STEPS[i], changes=changes, owned=[(rel, base) for rel, _, base in step]))
        return results
""")

UPSTREAM = READ_PLAN + textwrap.dedent("""
    import sys
    from sglang_arch.upstream import series
    from sglang_arch.cli import main
    series.plan_series = plan
    sys.exit(main(["upstream", *sys.argv[1:]]))
""")


def files_of(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            out[path.relative_to(root).as_posix()] = None if path.is_dir() else path.read_bytes()
    return out


def upstream_state(root):
    """A tree's state, commits by subject and tree (their hashes carry the time)."""
    state = {"files": files_of(root)}
    if (root / ".git").exists():
        state.update(status=git(root, "status", "--porcelain", "--untracked-files=all"),
                     cached=git(root, "diff", "--cached"), log=git(root, "log", "--format=%s %T"))
    return state


def run(argv, tmp, pause=None, script=UPSTREAM, cwd=None):
    env = dict(os.environ, TMPDIR=str(tmp), SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="2")
    if pause:
        env[interrupts.ENV_PAUSE_AT] = pause
    cmd = [sys.executable, "-c", script, *argv] if script else [sys.executable, "-m", "sglang_arch", *argv]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True)


def moments(argv, tmp, script=UPSTREAM, prepare=None, cwd=None):
    """Every moment a completed run names, in order (every checkpoint paused at once would
    wait at each: instead the names are read from a run with all of them listed and a
    driver that records them)."""
    recorder = textwrap.dedent("""
        import sys
        from sglang_arch import interrupts
        seen = []
        real = interrupts.checkpoint
        def record(name):
            seen.append(name)
        interrupts.checkpoint = record
        import atexit
        atexit.register(lambda: sys.stderr.write("MOMENTS " + ",".join(seen) + "\\n"))
    """)
    if prepare:
        prepare()
    body = (recorder + script) if script else (recorder + "from sglang_arch.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    proc = run(argv, tmp, script=body, cwd=cwd)
    _, err = proc.communicate(timeout=60)
    line = next(x for x in err.splitlines() if x.startswith("MOMENTS "))
    return [m for m in line[len("MOMENTS "):].split(",") if m]


def kill_at(argv, tmp, at, script=UPSTREAM, cwd=None):
    proc = run(argv, tmp, pause=at, script=script, cwd=cwd)
    try:
        _read_until(proc, f"paused at {at}")
        os.kill(proc.pid, signal.SIGKILL)  # the process alone: as the OOM killer or kill -9 would
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    _wait_for_git_children(proc.pid)
    return proc.returncode


def _wait_for_git_children(pgid, within=10.0):
    """A git child of the killed run finishes on its own (it runs in a process group of its own)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        out = subprocess.run(["pgrep", "-f", "git --literal-pathspecs"], capture_output=True, text=True).stdout
        if not out.strip():
            return
        time.sleep(0.05)


def leftovers(root, tmp):
    found = [p for p in Path(root).rglob(".*") if p.is_file() and p.name.endswith((".tmp", ".bak", ".probe"))]
    found += list(Path(root).rglob(JOURNAL))
    if (Path(root) / ".git").exists():
        found += list((Path(root) / ".git").rglob("*.lock"))
    found += [p for p in Path(tmp).iterdir()]
    return found


UPSTREAM_CASES = [("git", ["--into-git"]), ("files", [])]


@pytest.mark.parametrize("kind, flags", UPSTREAM_CASES, ids=[c[0] for c in UPSTREAM_CASES])
def test_upstream_killed_at_any_moment_then_run_again_is_a_completed_run(tmp_path, kind, flags):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = small_repo(tmp_path / "done")
    names = moments([str(done), *flags], tmp)
    completed = upstream_state(done)
    names = [n for n in names if n != "done"] + ["done"]
    assert {"staged", "put:1", "commit"} <= set(names) and (kind != "git" or "git:commit:2" in names)
    killed = 0
    for i, at in enumerate(names):
        root = small_repo(tmp_path / f"k{i}")
        before = upstream_state(root)
        assert kill_at([str(root), *flags], tmp, at) == -signal.SIGKILL, at
        killed += 1
        after_kill = upstream_state(root)
        if after_kill not in (before, completed):  # half a run: --check refuses to read it
            check = run([str(root), "--check"], tmp)
            _, err = check.communicate(timeout=60)
            assert check.returncode == 2 and "killed" in err and "accepted:" in err, (at, err)
        again = run([str(root), *flags], tmp)
        out, err = again.communicate(timeout=60)
        assert again.returncode == 0, (at, out, err)
        assert upstream_state(root) == completed, at
        assert leftovers(root, tmp) == [], at
        if at not in ("done",) and after_kill != before:
            assert "was undone first" in out or after_kill == completed, (at, out)
    assert killed == len(names) >= 8


def test_upstream_killed_while_it_rolls_back_then_run_again_is_a_completed_run(tmp_path):
    """A run rolling back (git refused its second commit) killed at each step of the roll back."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = small_repo(tmp_path / "done")
    assert run([str(done), "--into-git"], tmp).wait(timeout=60) == 0
    completed = upstream_state(done)
    hook = "#!/bin/sh\nn=$(git log --oneline | wc -l); [ $n -lt 2 ] || { echo refused >&2; exit 1; }\n"
    for k in range(1, 7):
        root = small_repo(tmp_path / f"k{k}")
        (root / ".git" / "hooks" / "pre-commit").write_text(hook)
        (root / ".git" / "hooks" / "pre-commit").chmod(0o755)
        assert kill_at([str(root), "--into-git"], tmp, f"rollback:{k}") == -signal.SIGKILL, k
        (root / ".git" / "hooks" / "pre-commit").unlink()
        again = run([str(root), "--into-git"], tmp)
        out, err = again.communicate(timeout=60)
        assert again.returncode == 0, (k, out, err)
        assert upstream_state(root) == completed, k
        assert leftovers(root, tmp) == [], k


def _tune_files(folder):
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir()) if p.is_file()}


# Relative paths, run in the case's folder (the results file names the override file).
TUNE_CASES = {
    "collectives --out --results": ["tune", "collectives", "--from-results", "in.json", "--out", "arch.toml",
                                    "--results", "out/r.json"],
    "fusion --out": ["tune", "fusion", "--world-size", "2", "--without", "1,2,3", "--with", "4,5,6", "--out",
                     "arch.toml"],
}
OVERRIDE = '# my override file\n[architectures."12.0"]\n# a hand-written field\nmax_cuda = "13.9"\n'


def _tune_folder(path):
    path.mkdir()
    (path / "out").mkdir()
    (path / "in.json").write_text(json.dumps(dict(valid_results(), run=dict(valid_results()["run"], capability="12.0"))))
    (path / "arch.toml").write_text(OVERRIDE)
    (path / "out" / "r.json").write_text("{}\n")
    return path


@pytest.mark.parametrize("case", sorted(TUNE_CASES))
def test_tune_killed_at_any_moment_then_run_again_is_a_completed_run(tmp_path, case):
    """The two outputs are never left one new and one old once the command has run again,
    and the override file keeps the user's own lines."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = _tune_folder(tmp_path / "done")
    names = moments(TUNE_CASES[case], tmp, script=None, cwd=done)
    completed = {**{f"out/{k}": v for k, v in _tune_files(done / "out").items()}, **_tune_files(done)}
    assert b"# a hand-written field" in completed["arch.toml"]
    assert {"staged", "put:1", "commit"} <= set(names)
    for i, at in enumerate(names):
        folder = _tune_folder(tmp_path / f"k{i}")
        assert kill_at(TUNE_CASES[case], tmp, at, script=None, cwd=folder) == -signal.SIGKILL, at
        again = run(TUNE_CASES[case], tmp, script=None, cwd=folder)
        out, err = again.communicate(timeout=60)
        assert again.returncode == 0, (at, out, err)
        now = {**{f"out/{k}": v for k, v in _tune_files(folder / "out").items()}, **_tune_files(folder)}
        assert now == completed, at
        assert leftovers(folder, tmp) == [], at


def test_a_commit_made_after_the_kill_is_never_dropped_by_the_rerun(tmp_path):
    """Killed at each moment of --into-git, then the user commits a file of their own before
    running again: the rerun keeps that commit (it completes over it, or refuses in one line,
    changing nothing, with advice that keeps it: never "git reset" past it)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    done = small_repo(tmp_path / "done")
    names = [n for n in moments([str(done), "--into-git"], tmp) if n != "done"]
    outcomes = {}
    for i, at in enumerate(names):
        root = small_repo(tmp_path / f"k{i}")
        assert kill_at([str(root), "--into-git"], tmp, at) == -signal.SIGKILL, at
        (root / "mine.txt").write_text("mine\n")
        git(root, "add", "mine.txt")
        git(root, "-c", "user.name=u", "-c", "user.email=u@u", "commit", "-qm", "mine")
        mine = git(root, "rev-parse", "HEAD").strip()
        before = upstream_state(root)
        again = run([str(root), "--into-git"], tmp)
        out, err = again.communicate(timeout=60)
        assert git(root, "merge-base", "--is-ancestor", mine, "HEAD", check=False) == "" or again.returncode == 2, at
        if again.returncode == 2:
            assert len(err.strip().splitlines()) == 1 and "nothing was changed" in err and "reset" not in err, (at, err)
            assert upstream_state(root) == before, at
        else:
            assert again.returncode == 0, (at, out, err)
            assert git(root, "show", "HEAD:mine.txt") == "mine\n", at
            assert git(root, "log", "--format=%s").count("\n") == 5, at  # base, mine and the three steps
        outcomes[at] = again.returncode
    assert 0 in outcomes.values() and len(outcomes) == len(names)
