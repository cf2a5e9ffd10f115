"""Signals while the tools write: deferred where a step must not stop half-way.

A writer (``files.Transaction``, ``upstream --into-git``) can be interrupted anywhere
(SIGINT, SIGTERM, SIGHUP) and then rolls back.  A few stretches must run whole: the
roll back itself (HEAD, the index and the files restored together), a rename and the
record that undoes it, the last check before a run is final.  ``deferred()`` holds the
three signals there and delivers them when the stretch ends, as if they had just
arrived, to whatever handler was in place (the CLI's, Python's KeyboardInterrupt, or the
default one that ends the process).

``checkpoint(name)`` marks a named moment of a write.  It does nothing unless
``SGLANG_ARCH_PAUSE_AT`` lists the name (comma-separated): then it says
``sglang-arch: paused at NAME`` on stderr and waits (at most PAUSE_S seconds) for a
signal, so that a test can deliver one at exactly that moment from outside.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from typing import Iterator, List

ENV_PAUSE_AT = "SGLANG_ARCH_PAUSE_AT"
PAUSE_S = 30.0
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

_depth = 0  # nesting of deferred() in the main thread
_completed = False  # a writer's run passed its point of no return (the CLI's last word says so)
_pending: List[int] = []  # signals held by deferred(), in arrival order


def _hold(signum, _frame) -> None:
    _pending.append(signum)


def mark_completed() -> None:
    """A writer's run is whole: a signal delivered after this undoes nothing."""
    global _completed
    _completed = True


def completed(reset: bool = False) -> bool:
    """Whether a run passed its point of no return since the last reset."""
    global _completed
    done = _completed
    if reset:
        _completed = False
    return done


def pending() -> bool:
    """Whether a signal arrived inside the current ``deferred()`` stretch."""
    return bool(_pending)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held while the block runs (main thread only; nested
    blocks hold until the outermost ends), then delivered to the handlers in place before."""
    global _depth
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    if _depth:
        _depth += 1
        try:
            yield
        finally:
            _depth -= 1
        return
    saved = {}
    for signum in SIGNALS:
        previous = signal.getsignal(signum)
        if previous is None or previous == signal.SIG_IGN:  # not Python's to hold, or ignored anyway
            continue
        signal.signal(signum, _hold)
        saved[signum] = previous
    _depth = 1
    try:
        yield
    finally:
        _depth = 0
        for signum, previous in saved.items():
            signal.signal(signum, previous)
        held = list(dict.fromkeys(_pending))
        _pending.clear()
        for signum in held:  # the first one's handler usually raises: the rest go with it
            signal.raise_signal(signum)


def checkpoint(name: str) -> None:
    """A named moment of a write; pauses there for a test's signal (see the module)."""
    wanted = os.environ.get(ENV_PAUSE_AT)
    if not wanted or name not in wanted.split(","):
        return
    print(f"sglang-arch: paused at {name}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + PAUSE_S
    while time.monotonic() < deadline and not _pending:
        time.sleep(0.02)  # a signal's handler raises out of the sleep, unless it is held
