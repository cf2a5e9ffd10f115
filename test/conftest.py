"""Shared test setup: a clean registry environment for every test."""

import os

import pytest
from sglang_arch.arch import reset_default_registry

_ARCH_ENV = ("SGLANG_ARCH_CONFIG", "SGLANG_ARCH_RESOLVE_AS", "SGLANG_ARCH_STRICT", "SGLANG_ARCH_CAPABILITY",
             "SGLANG_ARCH_TOPOLOGY", "SGLANG_ARCH_GPU_COUNT", "SGLANG_ARCH_DISABLE", "SGLANG_ARCH_CUDA")


@pytest.fixture(autouse=True)
def clean_arch_env(monkeypatch):
    for name in _ARCH_ENV:
        monkeypatch.delenv(name, raising=False)
    reset_default_registry()
    yield
    reset_default_registry()


def pytest_report_header(config):
    return f"sglang-arch tests; SGLANG_ARCH_* cleared per test (was: {[n for n in _ARCH_ENV if n in os.environ]})"
