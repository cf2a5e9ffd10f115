"""The growth-rate check the linear-time tests rest on tells quadratic from linear."""

from unit.timing import grows_at_most


def _quadratic(n):
    return sum(i ^ j for i in range(n) for j in range(n))


def _linear(n):
    return sum(range(n * 400))


def test_quadratic_growth_fails_the_bound():
    ok, seen = grows_at_most(lambda: _quadratic(250), lambda: _quadratic(1000), factor=6, slack=0.0)
    assert not ok and len(seen) == 3, seen


def test_linear_growth_meets_the_bound():
    ok, seen = grows_at_most(lambda: _linear(250), lambda: _linear(1000), factor=6)
    assert ok, seen
