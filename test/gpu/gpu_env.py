"""What this machine has, for the GPU tests (imported by conftest and the test modules)."""

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

for _name, _value in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
    os.environ.setdefault(_name, _value)  # multicast stays off on shared machines


def _gpu_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


GPUS = _gpu_count()
