"""``tune collectives`` under signals: the measuring workers end with the command.

A SIGTERM, SIGINT or SIGHUP while the workers measure (``SGLANG_ARCH_PAUSE_AT`` holds the
command at the moment they have started) ends the command within seconds, with the
signal's status, and no process of its group (the workers, spawned) runs on; nothing is
written.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

# How soon a signalled run must be gone: at once on an idle machine (well under a second), this
# bound on a loaded 2-core runner where the other test worker starts interpreters too.
PROMPT_S = 20.0


pytest.importorskip("torch", reason="the harness measures with torch (gloo on CPUs)")

STATUS = {"SIGINT": 130, "SIGTERM": 128 + signal.SIGTERM, "SIGHUP": 128 + signal.SIGHUP}


def _group_gone(pgid, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("sig", sorted(STATUS))
def test_a_signal_while_workers_measure_ends_them_all(tmp_path, sig):
    results = tmp_path / "r.json"
    env = dict(os.environ, SGLANG_ARCH_PAUSE_AT="tune:measuring", TMPDIR=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "sglang_arch", "tune", "collectives", "--backend", "gloo",
                             "--world-sizes", "2", "--sizes", "4096", "--iters", "100000", "--trials", "1000",
                             "--results", str(results)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
                            start_new_session=True)
    try:
        line = proc.stderr.readline()
        assert "paused at tune:measuring" in line, line + proc.stderr.read()
        sent = time.monotonic()
        proc.send_signal(getattr(signal, sig))
        proc.wait(timeout=60)
        took = time.monotonic() - sent
        gone = _group_gone(proc.pid, 5.0)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    err = proc.stderr.read()
    assert proc.returncode == STATUS[sig], (proc.returncode, err)
    assert took < PROMPT_S and gone
    assert not results.exists() and os.listdir(tmp_path) == []
