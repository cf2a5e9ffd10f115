"""Growth-rate checks that hold on a loaded machine.

A wall-clock ratio of two single runs is noise on a 2-core machine shared with pytest-xdist
workers: CI once saw 0.07 s then 1.45 s for 4x the input of a linear pass (a pause of the
other worker, not the code; alone the same pair took 0.05 s and 0.11 s).  So: the garbage
collector off, small and large measured alternately, the best of several runs of each, and a
failing ratio measured again before it counts.  A quadratic pass still fails every round:
4x the input is 16x the time, twice the bound.
"""

from __future__ import annotations

import gc
import time
from typing import Callable, Tuple


def best_pair(small: Callable[[], object], large: Callable[[], object], repeat: int = 3) -> Tuple[float, float]:
    """The best seconds of ``small()`` and of ``large()`` over ``repeat`` alternating runs."""
    best_small = best_large = float("inf")
    enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeat):
            for fn, which in ((small, 0), (large, 1)):
                started = time.perf_counter()
                fn()
                took = time.perf_counter() - started
                if which == 0:
                    best_small = min(best_small, took)
                else:
                    best_large = min(best_large, took)
    finally:
        if enabled:
            gc.enable()
    return best_small, best_large


def grows_at_most(small: Callable[[], object], large: Callable[[], object], factor: float,
                  slack: float = 0.05, rounds: int = 3, repeat: int = 3) -> Tuple[bool, list]:
    """Whether ``large`` took at most ``factor`` x ``small`` (+ ``slack`` seconds) in any of
    ``rounds`` rounds; the measured pairs, for the failure message."""
    seen = []
    for _ in range(rounds):
        t_small, t_large = best_pair(small, large, repeat)
        seen.append((round(t_small, 4), round(t_large, 4)))
        if t_large <= factor * t_small + slack:
            return True, seen
    return False, seen
