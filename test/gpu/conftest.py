"""GPU tests run only where torch sees a CUDA GPU; elsewhere they skip with the reason."""

import os

import pytest
from gpu_env import GPUS, MULTICAST_OFF


def pytest_collection_modifyitems(config, items):
    if GPUS:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU visible to torch (these tests run on a GPU machine: scripts/gpu-test)")
    for item in items:
        if "test/gpu" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture
def report(record_property):
    """Values a test measured, kept in the junit XML (scripts/gpu-test collects them)."""
    return record_property


@pytest.fixture(autouse=True)
def multicast_off(monkeypatch):
    """Multicast off for each GPU test (and the processes it starts), unless the shell
    already says otherwise; undone after the test, so nothing leaks into other tests."""
    for name, value in MULTICAST_OFF.items():
        if name not in os.environ:
            monkeypatch.setenv(name, value)
