"""FlashInfer all-reduce fusion on SM120 / SM121: trtllm on one node, when asked for."""

import importlib
import unittest
from unittest.mock import MagicMock, patch

from sglang.srt.layers import flashinfer_comm_fusion as fusion
from sglang.srt.layers.layer_boundary.residual import add_norm
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.platform_utils import simulate_cuda_gpu
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=3, suite="stage-a-cpu-only")


def _resolved(backend, is_multi_node=False):
    try:
        return fusion._resolve_backend(backend, is_multi_node)
    except ValueError:
        return None


class TestSm12xFusion(CustomTestCase):
    def test_trtllm_on_one_node_when_asked(self):
        for capability in ((12, 0), (12, 1)):
            with simulate_cuda_gpu(capability):
                self.assertEqual(_resolved("trtllm"), "trtllm")
                self.assertEqual(_resolved("auto"), "trtllm")
                self.assertIsNone(_resolved("mnnvl"))
                self.assertIsNone(_resolved("cutedsl"))
                self.assertIsNone(_resolved("auto", True))
                self.assertIsNone(_resolved("trtllm", True))

    def test_refused_below_the_cuda_floor_and_past_the_listed_minors(self):
        for capability, cuda in (
            ((12, 0), (12, 4)),
            ((12, 5), (13, 0)),
            ((13, 0), (13, 0)),
        ):
            with simulate_cuda_gpu(capability, cuda=cuda):
                with self.assertRaisesRegex(ValueError, "SM120 or SM121"):
                    fusion._resolve_backend("trtllm")

    def test_never_enabled_unasked(self):
        from test_cuda_arch_consumers import TestAllReduceFusionBackend

        auto_enable = TestAllReduceFusionBackend._auto_enable
        for capability in ((12, 0), (12, 1)):
            with simulate_cuda_gpu(capability):
                for tp_size in (2, 4, 8):
                    self.assertIsNone(auto_enable(None, tp_size, 1))

    def test_add_norm_gate_opens(self):
        try:
            with simulate_cuda_gpu((12, 0)), patch(
                "sglang.srt.utils.is_cuda", return_value=True
            ):
                importlib.reload(add_norm)
                self.assertTrue(add_norm._has_allreduce_fusion)
        finally:
            importlib.reload(add_norm)


class TestWorkspacePreflight(CustomTestCase):
    def test_sizes_without_multicast_granularity(self):
        # FlashInfer maps the trtllm workspace with enable_multicast=False; on
        # GPUs without multicast the granularity query fails.
        driver = MagicMock()
        driver.CUresult.CUDA_SUCCESS = 0
        driver.cuMemGetAllocationGranularity.return_value = (0, 2 << 20)
        driver.cuMulticastGetGranularity.return_value = (801, 0)
        sizes = fusion._flashinfer_trtllm_workspace_allocation_sizes(
            driver, object(), 8, 2048, 4096, dtype=None
        )
        driver.cuMulticastGetGranularity.assert_not_called()
        self.assertEqual(len(sizes), 3)
        self.assertTrue(all(size % (2 << 20) == 0 for size in sizes))


if __name__ == "__main__":
    unittest.main()
