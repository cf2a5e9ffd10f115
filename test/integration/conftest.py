"""Fixtures of the integration tests (each module skips itself when sglang is missing)."""

import pytest
from helpers import clean_env, run_suite


@pytest.fixture(scope="session")
def suites():
    """Both decision suites, computed once per session (about 15 s each, in parallel)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        upstream = pool.submit(run_suite, "upstream", env=clean_env(SGLANG_ARCH_DISABLE="1"))
        routed = pool.submit(run_suite, "routed")
        return {"upstream": upstream.result(), "routed": routed.result()}
