"""What this machine has, for the GPU tests (imported by conftest and the test modules).

Nothing here touches ``os.environ``: the multicast-off variables are set per GPU test by
the ``multicast_off`` fixture (test/gpu/conftest.py), so they never reach the unit or
integration tests of the same run (test/unit/test_test_environment.py checks that).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Multicast stays off on shared machines: NCCL (NVLS), torch symmetric memory, NVSHMEM.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


GPUS = _gpu_count()
