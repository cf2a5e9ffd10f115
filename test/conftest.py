"""Shared test setup: a clean registry environment for every test."""

import os
import signal
import threading

import pytest
from hypothesis import settings
from sglang_arch.arch import reset_default_registry

# "mutation" (scripts/mutation): the same draws for every mutant, no deadline on a busy
# machine, no example database shared between mutants.
settings.register_profile("mutation", derandomize=True, deadline=None, database=None)
# Otherwise no per-example deadline either: on the 2-core CI machine with every worker busy a
# first example (the one that imports what the test needs) took 450 ms against hypothesis'
# 200 ms default, a failure of the machine's load, not of the code.  Time bounds are the
# fast tier's and CI's (docs/development.md).
settings.register_profile("project", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "project")

# Set by the run itself, not settings of sglang-arch's that a test could inherit from the
# shell: where GPU tests write what they measured (scripts/gpu-test), and the flag
# test_test_environment.py starts an inner run with to check what leaks into it.
_RUN_ENV = ("SGLANG_ARCH_GPU_OUT", "SGLANG_ARCH_TEST_LEAK_CHECK")


@pytest.fixture(autouse=True)
def clean_arch_env(monkeypatch):
    """Every test starts with no SGLANG_ARCH_* setting (the shell's, or a leak), so no test
    file clears them itself."""
    for name in [k for k in os.environ if k.startswith("SGLANG_ARCH_") and k not in _RUN_ENV]:
        monkeypatch.delenv(name)
    reset_default_registry()
    yield
    reset_default_registry()


# The signals the commands handle, as a Python interpreter starts with them.
_SIGNALS_AT_START = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL,
                     signal.SIGHUP: signal.SIG_DFL}


@pytest.fixture(autouse=True)
def signals_as_at_start():
    """Every test starts with SIGINT, SIGTERM and SIGHUP handled as an interpreter starts and
    unblocked: a library an earlier test ran in this worker can leave one ignored, and an
    ignored signal is inherited by every process a test starts (a signalled command then
    never ends)."""
    if threading.current_thread() is threading.main_thread():
        for signum, handler in _SIGNALS_AT_START.items():
            if signal.getsignal(signum) is not handler:
                signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, list(_SIGNALS_AT_START))
    yield


# Variables a test module could set at import and leak into every later test of a run.
WATCHED_ENV = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


# What the shell gave this run, taken when this file is imported: before any other
# conftest (test/gpu/conftest.py is loaded after this one, even when named on the
# command line) and before any test module.
ENV_AT_START = {name: os.environ.get(name) for name in WATCHED_ENV}


def pytest_configure(config):
    config.env_at_start = dict(ENV_AT_START)
    if config.pluginmanager.hasplugin("xdist"):  # not without pytest-xdist, nor with -p no:xdist
        config.pluginmanager.register(_Scheduling(), "sglang-arch-scheduling")


# Under pytest-xdist (scripts/test runs ``-n N --dist loadfile``) each test file goes whole
# to one worker, in order: a fixture its tests share (module or session scope) is computed
# once.  These files' tests are each independent (checked below) and slow: they spread over
# the workers test by test.
SPREAD = {"test/integration/test_plugin.py", "test/integration/test_tune_harness.py", "test/tools/test_cli.py",
          "test/tools/test_fuzz.py", "test/tools/test_test_environment.py"}


def _shares_a_fixture(item) -> bool:
    """Whether the test asks for a value of the project's that outlives one test (a module
    or session fixture; autouse set-up, such as the fuzz module's, may run in each worker)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope != "function" and d.baseid for name in info.argnames for d in info.name2fixturedefs.get(name, ()))


# The longest files (minutes of SGLang processes each) start first, each on its own
# worker, while the others fill the rest.
FIRST = ("test/integration/test_final_backends.py", "test/integration/test_runtime_truth.py", "test/integration/test_upstream_series.py",
         "test/integration/test_audit.py")


def pytest_collection_modifyitems(config, items):
    shared = sorted({item.nodeid for item in items if item.nodeid.split("::")[0] in SPREAD and _shares_a_fixture(item)})
    if shared:
        raise pytest.UsageError(f"test/conftest.py SPREAD: these tests share a fixture with other tests of their "
                                f"file, so it cannot be spread test by test: {shared}")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker orders alike (xdist checks)
        rank = {path: i for i, path in enumerate(FIRST)}
        items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(FIRST)))


class _Scheduling:
    """pytest-xdist's scheduler for ``--dist loadfile`` (registered where xdist is active)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        if config.getvalue("dist") != "loadfile":
            return None
        from xdist.scheduler import LoadScopeScheduling

        class FileOrTest(LoadScopeScheduling):
            """``--dist loadfile``, except that the tests of a SPREAD file go one by one;
            the files keep their collection order (FIRST, then as collected)."""

            def _split_scope(self, nodeid):
                path = nodeid.split("::", 1)[0]
                return nodeid if path in SPREAD else path

        config.option.loadscopereorder = False
        return FileOrTest(config, log)


def pytest_report_header(config):
    was = sorted(k for k in os.environ if k.startswith("SGLANG_ARCH_") and k not in _RUN_ENV)
    return f"sglang-arch tests; SGLANG_ARCH_* cleared per test (was: {was})"


