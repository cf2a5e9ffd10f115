"""``sglang-arch upstream --into-git`` and ``files.Transaction`` under signals.

Whatever the moment a SIGINT, SIGTERM or SIGHUP arrives (every named step of a run: the
staging, each put, each git add and commit, the final ``git reset``, the point of no
return; and a second signal in the middle of the roll back it starts), the command ends
within a few seconds with the signal's status, and leaves the tree, the index and HEAD as
they were: no ``.git/index.lock``, no temporary file beside the targets or in the
temporary folder, no process of its own.  The moments come from the run itself
(``interrupts.checkpoint`` names them), so a step added later is covered too.

Two drivers: in-process (the checkpoint patched to signal this process; every moment x
every signal), and from outside (``SGLANG_ARCH_PAUSE_AT`` pauses a real CLI process at the
moment, the test signals it, as ``timeout`` or a terminal would).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sglang_arch import files, interrupts
from sglang_arch.cli import main
from sglang_arch.upstream import series

# How soon a signalled run must be gone: at once on an idle machine (well under a second), this
# bound on a loaded 2-core runner where the other test worker starts interpreters too.
PROMPT_S = 20.0


def git(root, *args, check=True):
    out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {out.stderr}")
    return out.stdout


def commit_all(root, message="base"):
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def state(root):
    """What an interrupted run must leave as it was: every file (bytes), the index and HEAD."""
    tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            tree[path.relative_to(root).as_posix()] = None if path.is_dir() else path.read_bytes()
    return {"tree": tree, "status": git(root, "status", "--porcelain", "--untracked-files=all"),
            "cached": git(root, "diff", "--cached"),
            "head": git(root, "rev-parse", "--verify", "-q", "HEAD", check=False)}


SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")
STATUS = {"SIGINT": 130, "SIGTERM": 128 + signal.SIGTERM, "SIGHUP": 128 + signal.SIGHUP}


@pytest.fixture(autouse=True)
def _no_user_git_config(tmp_path_factory, monkeypatch):
    empty = tmp_path_factory.getbasetemp() / "gitconfig"
    empty.touch()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")


def small_repo(root):
    package = root / "python" / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "srt" / "m1.py").write_text("M1 = 1\n")
    (package / "srt" / "m2.py").write_text("M2 = 2\n")
    (root / "notes.txt").write_text("mine\n")
    git(root, "init", "-q", "-b", "main")
    commit_all(root)
    (root / "notes.txt").write_text("mine, staged\n")  # the user's staged work stays staged
    git(root, "add", "notes.txt")
    return root


# The plan both drivers give the command (``plan_series`` replaced): three steps with new
# files in new folders, a changed file, a removed one and a test file.  Source text, so that
# the outside driver (a plain ``python -c``) runs the same plan.
PLAN = textwrap.dedent("""
    def plan(tree=None, registry_source=None):
        from sglang_arch.upstream import series
        from sglang_arch.upstream.steps import STEPS

        change = series.FileChange
        steps = [
            [change("srt/arch/__init__.py", None, "A = 1\\n", "package"),
             change("srt/m1.py", "M1 = 1\\n", "M1 = 2\\n", "package")],
            [change("srt/m2.py", "M2 = 2\\n", None, "package"), change("srt/sub/m3.py", None, "M3 = 3\\n", "package")],
            [change("test/registered/unit/arch/test_x.py", None, "T = 1\\n", "src")],
        ]
        return [series.StepResult(STEPS[i], changes=c, owned=[(x.path, x.base) for x in c])
                for i, c in enumerate(steps)]
""")
exec(PLAN)
plan = globals()["plan"]  # (defined by the text above, which the outside driver runs too)


def leftovers(root, tmp):
    """What an ended run must not leave: lock files, staged or kept files, private indexes."""
    found = [p for p in (root / ".git").rglob("*.lock")]
    found += [p for p in root.rglob(".*") if p.is_file() and p.name.endswith((".tmp", ".bak", ".probe"))]
    found += list(root.rglob(files.JOURNAL))  # the run's journal goes with it, whole or rolled back
    found += list(Path(tmp).iterdir())
    return found


def moments(monkeypatch, tmp_path):
    """Every checkpoint of a whole run, in order (a run that completes)."""
    root = small_repo(tmp_path / "names")
    seen = []
    real = interrupts.checkpoint
    monkeypatch.setattr(interrupts, "checkpoint", lambda name: seen.append(name) or real(name))
    monkeypatch.setattr(series, "plan_series", plan)
    assert main(["upstream", str(root), "--into-git"]) == 0
    monkeypatch.undo()
    return seen


def test_the_run_names_its_moments(monkeypatch, tmp_path):
    names = moments(monkeypatch, tmp_path)
    assert names[:2] == ["staged", "git:begin"] and names[-3:] == ["git:reset", "commit", "done"]
    assert {"git:add:1", "git:commit:1", "git:commit:3", "put:5"} <= set(names)


def test_a_signal_at_any_moment_or_in_the_roll_back_leaves_everything_as_it_was(monkeypatch, tmp_path, capsys):
    """In-process: each moment x each signal, and for each moment a second signal at each
    step of the roll back the first one starts."""
    for name in SIGNALS:
        if signal.getsignal(getattr(signal, name)) not in (signal.SIG_DFL, signal.default_int_handler):
            pytest.skip(f"{name} has a handler in this test process; the CLI keeps an embedding program's own")
    # "done" is past the point of no return: the run is whole there (the test after this one)
    names = [name for name in moments(monkeypatch, tmp_path) if name != "done"]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(series.tempfile, "tempdir", str(tmp))
    cases = [(at, sig, None) for at in names for sig in SIGNALS]
    # a second signal while the first one's roll back runs (it has at most 4 + 2 undo steps here)
    cases += [(at, "SIGTERM", (f"rollback:{k}", second)) for at in names for k in (1, 2, 4)
              for second in ("SIGINT", "SIGHUP")]
    runs = 0
    for at, sig, then in cases:
        root = small_repo(tmp_path / f"r{runs}")
        runs += 1
        before = state(root)
        plan_now = {at: sig, **({then[0]: then[1]} if then else {})}
        hit = []
        real = interrupts.checkpoint

        def checkpoint(name, plan_now=plan_now, hit=hit, real=real):
            if name in plan_now:
                hit.append(name)
                os.kill(os.getpid(), getattr(signal, plan_now.pop(name)))
            real(name)

        monkeypatch.setattr(interrupts, "checkpoint", checkpoint)
        monkeypatch.setattr(series, "plan_series", plan)
        code = main(["upstream", str(root), "--into-git"])
        monkeypatch.undo()
        monkeypatch.setenv("TMPDIR", str(tmp))
        monkeypatch.setattr(series.tempfile, "tempdir", str(tmp))
        err = capsys.readouterr().err
        where = f"signal {sig} at {at}" + (f", then {then[1]} at {then[0]}" if then else "")
        assert hit and hit[0] == at, where
        # a second signal held through the roll back is delivered after it: either may end the run
        assert code in {STATUS[sig], STATUS[then[1] if then else sig]}, (where, code, err)
        assert state(root) == before, where
        assert leftovers(root, tmp) == [], where
        for name in SIGNALS:  # the command's handlers are gone with it
            assert signal.getsignal(getattr(signal, name)) in (signal.SIG_DFL, signal.default_int_handler)
    assert runs == len(names) * 3 + len(names) * 6


DRIVER = PLAN + textwrap.dedent("""
    import sys
    from sglang_arch.upstream import series
    from sglang_arch.cli import main
    series.plan_series = plan
    sys.exit(main(["upstream", sys.argv[1], "--into-git"]))
""")


def _read_until(proc, text, timeout=20.0):
    deadline = time.monotonic() + timeout
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"never saw {text!r}: {lines}")


def _gone(pgid):
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("at, sig, then", [
    ("git:begin", "SIGTERM", None),
    ("git:add:2", "SIGHUP", None),
    ("git:commit:2", "SIGTERM", None),
    ("git:reset", "SIGTERM", None),  # the series was staged, in the user's index
    ("commit", "SIGTERM", None),  # the point of no return, held: still undone
    ("put:3", "SIGINT", None),
    ("git:commit:3", "SIGTERM", ("rollback:2", "SIGTERM")),  # a second signal mid-roll-back
    ("git:reset", "SIGHUP", ("rollback:1", "SIGINT")),
])
def test_a_signal_from_outside_at_a_paused_moment(tmp_path, at, sig, then):
    root = small_repo(tmp_path / "repo")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    before = state(root)
    env = dict(os.environ, TMPDIR=str(tmp), **{interrupts.ENV_PAUSE_AT: ",".join([at] + ([then[0]] if then else []))})
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        _read_until(proc, f"paused at {at}")
        sent = time.monotonic()
        proc.send_signal(getattr(signal, sig))
        if then:
            _read_until(proc, f"paused at {then[0]}")
            proc.send_signal(getattr(signal, then[1]))
        proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = proc.stderr.read()
    assert proc.returncode in {STATUS[sig], STATUS[then[1] if then else sig]}, (proc.returncode, err)
    assert took < PROMPT_S  # at once: well under this on an idle machine, bounded on a loaded runner
    assert state(root) == before
    assert leftovers(root, tmp) == []
    assert _gone(proc.pid)  # nothing of its process group runs on


def test_a_git_that_ignores_sigterm_is_killed_and_its_index_lock_removed(tmp_path, monkeypatch):
    """git asked to stop removes its locks itself; one that does not stop within
    GIT_STOP_S is killed, and the lock files it took (not those there before) go."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / ".git" / "refs" / "heads" / "other.lock").write_text("someone else's\n")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text(f"#!/bin/sh\ntrap '' TERM\ntouch {root}/.git/index.lock {root}/.git/refs/heads/main.lock\n"
                              f"sleep 30\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    monkeypatch.setattr(series, "GIT_STOP_S", 1.0)
    import threading

    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        series._git(root, "commit")
    assert time.monotonic() - started < 4.0
    assert not (root / ".git" / "index.lock").exists() and not (root / ".git" / "refs/heads/main.lock").exists()
    assert (root / ".git" / "refs" / "heads" / "other.lock").exists()  # not ours: kept


def test_a_transaction_interrupted_at_its_last_moment_is_undone(tmp_path, monkeypatch):
    """A signal held at the point of no return undoes the run before it goes on."""
    (tmp_path / "a.py").write_text("old\n")
    real = interrupts.checkpoint

    def at_commit(name):
        if name == "commit":
            os.kill(os.getpid(), signal.SIGINT)
        real(name)

    monkeypatch.setattr(interrupts, "checkpoint", at_commit)
    with pytest.raises(KeyboardInterrupt):
        with files.Transaction([files.Write(str(tmp_path / "a.py"), "new\n"), files.Write(str(tmp_path / "n/b.py"), "b\n",
                                                                                             make_folders=True)]):
            pass
    assert sorted(os.listdir(tmp_path)) == ["a.py"] and (tmp_path / "a.py").read_text() == "old\n"


def test_signals_held_are_delivered_once_the_stretch_ends():
    got = []
    previous = signal.signal(signal.SIGHUP, lambda s, f: got.append(s))
    try:
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)
            assert got == [] and interrupts.pending()
        assert got == [signal.SIGHUP] and not interrupts.pending()
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_a_signal_after_the_point_of_no_return_says_the_run_is_whole(tmp_path):
    """Past the point of no return the series stays committed; the last line says so (and
    not that every write was rolled back)."""
    root = small_repo(tmp_path / "repo")
    before = state(root)
    env = dict(os.environ, **{interrupts.ENV_PAUSE_AT: "done"})
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        _read_until(proc, "paused at done")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    err = proc.stderr.read()
    assert proc.returncode == STATUS["SIGTERM"], err
    assert "its writes had completed" in err and "rolled back" not in err, err
    assert state(root) != before


# --- git refusing a commit, at any step: everything undone ----------------------------------

def _fault(root, kind, at):
    """Make git refuse the ``at``-th commit of the run (or everything, for a held lock)."""
    hooks = root / ".git" / "hooks"
    if kind == "hook":  # a pre-commit hook that lets at - 1 commits through
        counter = root / ".git" / "commits-seen"
        (hooks / "pre-commit").write_text(
            f"#!/bin/sh\nn=$(cat {counter} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {counter}\n"
            f"[ $n -lt {at} ] || {{ echo 'refused by the hook' >&2; exit 1; }}\n")
        (hooks / "pre-commit").chmod(0o755)
    elif kind == "gpg":  # signing that always fails
        git(root, "config", "commit.gpgsign", "true")
        git(root, "config", "gpg.program", "false")
    elif kind == "index.lock":  # another git holds the user's index
        (root / ".git" / "index.lock").write_text("")
    elif kind == "ref.lock":  # another git holds the branch
        (root / ".git" / "refs" / "heads" / "main.lock").write_text("")


@pytest.mark.parametrize("kind, at", [("hook", 1), ("hook", 2), ("hook", 3), ("gpg", 1), ("index.lock", 1),
                                      ("ref.lock", 1)])
def test_git_refusing_a_commit_at_any_step_undoes_the_run(tmp_path, monkeypatch, capsys, kind, at):
    root = small_repo(tmp_path / "repo")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(series.tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(series, "plan_series", plan)
    _fault(root, kind, at)
    lock = {"index.lock": root / ".git" / "index.lock",
            "ref.lock": root / ".git" / "refs" / "heads" / "main.lock"}.get(kind)
    before = state(root)
    assert main(["upstream", str(root), "--into-git"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    if lock is not None:  # the other git's lock is its own: left where it was
        assert lock.exists()
        lock.unlink()
    assert state(root) == before
    assert leftovers(root, tmp) == []
