"""What this machine has, for the GPU tests (imported by conftest and the test modules).

Nothing here touches ``os.environ``: the multicast-off variables are set per GPU test by
the ``multicast_off`` fixture (test/gpu/conftest.py), so they never reach the unit or
integration tests of the same run (test/tools/test_test_environment.py checks that).
"""

import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Multicast stays off on shared machines: NCCL (NVLS), torch symmetric memory, NVSHMEM; the
# same settings the registry's detection reads (``arch.detect``'s name is shadowed by the
# ``detect`` function in ``sglang_arch.arch``, hence import_module).
MULTICAST_OFF = dict(importlib.import_module("sglang_arch.arch.detect").MULTICAST_OFF)


def _gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


GPUS = _gpu_count()


# The modules of this project and of SGLang itself: a probe that cannot import one of them
# is broken, never skipped.
OWN_MODULES = ("sglang", "sglang_arch", "_sglang_arch_early")


def missing_requirement(stderr: str):
    """The third-party module a probe subprocess could not import (its last
    ``ModuleNotFoundError``), or None: what the plain wheels of ``scripts/gpu-wheels`` lack
    and ``scripts/gpu-wheels --server`` carries (setproctitle, uvicorn, ...: section B of
    scripts/gpu-requirements.txt), so the test skips naming it instead of failing."""
    import re

    found = re.findall(r"ModuleNotFoundError: No module named '([^']+)'", stderr)
    if not found or found[-1].split(".")[0] in OWN_MODULES:
        return None
    return found[-1]
