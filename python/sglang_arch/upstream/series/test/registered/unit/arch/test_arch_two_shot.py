import types
import unittest
from unittest.mock import MagicMock, patch

from sglang.srt.distributed.device_communicators import torch_symm_mem
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=5, suite="stage-a-cpu-only")


def _communicator(capability, world_size, multicast_ptr):
    """Build the communicator on a simulated GPU, without CUDA."""
    symm_mem = MagicMock()
    symm_mem.rendezvous.return_value = types.SimpleNamespace(
        multicast_ptr=multicast_ptr
    )
    envs = MagicMock()
    envs.SGLANG_OPT_USE_INKLING_CUSTOM_AR.get.return_value = False
    group = types.SimpleNamespace(group_name="tp")
    with (
        patch.object(torch_symm_mem, "torch_symm_mem_available", True),
        patch.object(torch_symm_mem, "torch_symm_mem", symm_mem, create=True),
        patch.object(torch_symm_mem, "envs", envs),
        patch("torch.cuda.set_device"),
        patch("torch.cuda.get_device_capability", return_value=capability),
        patch("torch.distributed.get_world_size", return_value=world_size),
    ):
        return torch_symm_mem.TorchSymmMemCommunicator(group, 0)


class TestTwoShotWithoutMulticast(CustomTestCase):
    def test_pcie_gpus_run_two_shot(self):
        # RTX PRO 6000 / DGX Spark: no NVLS multicast, peer-to-peer access only.
        for capability in ((12, 0), (12, 1)):
            communicator = _communicator(capability, 8, multicast_ptr=0)
            self.assertFalse(communicator.disabled)
            self.assertFalse(communicator.use_multimem)
            self.assertEqual(communicator.max_size, 128 * 1024 * 1024)

    def test_missing_multicast_drops_multimem_only(self):
        communicator = _communicator((9, 0), 4, multicast_ptr=0)
        self.assertFalse(communicator.disabled)
        self.assertFalse(communicator.use_multimem)
        communicator = _communicator((9, 0), 4, multicast_ptr=1234)
        self.assertTrue(communicator.use_multimem)

    def test_untuned_gpus_stay_disabled(self):
        communicator = _communicator((8, 0), 8, multicast_ptr=0)
        self.assertTrue(communicator.disabled)
        self.assertEqual(communicator.max_size, 0)


if __name__ == "__main__":
    unittest.main()
