"""Fixtures of the integration tests (each module skips itself when sglang is missing)."""

import pytest
from helpers import clean_env, once_per_run, run_suite, run_upstream_oracle


def _both_suites():
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        upstream = pool.submit(run_suite, "upstream", env=clean_env(SGLANG_ARCH_DISABLE="1"))
        routed = pool.submit(run_suite, "routed")
        return {"upstream": upstream.result(), "routed": routed.result()}


@pytest.fixture(scope="session")
def suites(tmp_path_factory):
    """Both decision suites, computed once per run (about 15 s each, in parallel; under
    pytest-xdist the workers share the first result)."""
    return once_per_run(tmp_path_factory, "decision-suites", _both_suites)


@pytest.fixture(scope="session")
def upstream_answers(tmp_path_factory):
    """upstream_oracle.py over its whole domain, once per run: the equivalence properties
    read its answers, test_sources_upstream.py its tables."""
    from upstream_oracle import DOMAIN

    return once_per_run(tmp_path_factory, "upstream-oracle", lambda: run_upstream_oracle(DOMAIN))
