"""Shared test setup: a clean registry environment for every test."""

import os

import pytest
from hypothesis import settings
from sglang_arch.arch import reset_default_registry

# "mutation" (scripts/mutation): the same draws for every mutant, no deadline on a busy
# machine, no example database shared between mutants.
settings.register_profile("mutation", derandomize=True, deadline=None, database=None)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])

_ARCH_ENV = ("SGLANG_ARCH_CONFIG", "SGLANG_ARCH_RESOLVE_AS", "SGLANG_ARCH_STRICT", "SGLANG_ARCH_CAPABILITY",
             "SGLANG_ARCH_TOPOLOGY", "SGLANG_ARCH_GPU_COUNT", "SGLANG_ARCH_DISABLE", "SGLANG_ARCH_CUDA")


@pytest.fixture(autouse=True)
def clean_arch_env(monkeypatch):
    for name in _ARCH_ENV:
        monkeypatch.delenv(name, raising=False)
    reset_default_registry()
    yield
    reset_default_registry()


# Variables a test module could set at import and leak into every later test of a run.
WATCHED_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


# What the shell gave this run, taken when this file is imported: before any other
# conftest (test/gpu/conftest.py is loaded after this one, even when named on the
# command line) and before any test module.
ENV_AT_START = {name: os.environ.get(name) for name in WATCHED_ENV}


def pytest_configure(config):
    config.env_at_start = dict(ENV_AT_START)


def pytest_report_header(config):
    return f"sglang-arch tests; SGLANG_ARCH_* cleared per test (was: {[n for n in _ARCH_ENV if n in os.environ]})"
