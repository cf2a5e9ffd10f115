import unittest

from sglang.srt.arch import registry
from sglang.srt.layers import flashinfer_comm_fusion as fusion
from sglang.test.arch_utils import simulate_gpu
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=5, suite="stage-a-cpu-only")


def _resolve(backend, nnodes):
    return fusion._resolve_backend(backend, is_multi_node=nnodes > 1)


class TestAllReduceFusionBackend(CustomTestCase):
    def _resolved(self, backend, nnodes):
        try:
            return _resolve(backend, nnodes)
        except ValueError:
            return None

    def test_hopper(self):
        with simulate_gpu((9, 0)):
            self.assertEqual(self._resolved("auto", 1), "trtllm")
            self.assertIsNone(self._resolved("auto", 2))
            self.assertEqual(self._resolved("mnnvl", 1), "mnnvl")
            self.assertIsNone(self._resolved("mnnvl", 2))
            self.assertIsNone(self._resolved("trtllm", 2))
            self.assertIsNone(self._resolved("cutedsl", 1))

    def test_blackwell(self):
        for capability in ((10, 0), (10, 3)):
            with simulate_gpu(capability):
                self.assertEqual(self._resolved("auto", 1), "mnnvl")
                self.assertEqual(self._resolved("auto", 2), "mnnvl")
                self.assertEqual(self._resolved("cutedsl", 2), "cutedsl")
                self.assertEqual(self._resolved("trtllm", 1), "trtllm")
                self.assertIsNone(self._resolved("trtllm", 2))

    def test_sm12x_explicit_trtllm_single_node(self):
        for capability in ((12, 0), (12, 1)):
            with simulate_gpu(capability):
                self.assertEqual(self._resolved("auto", 1), "trtllm")
                self.assertEqual(self._resolved("trtllm", 1), "trtllm")
                self.assertIsNone(self._resolved("mnnvl", 1))
                self.assertIsNone(self._resolved("auto", 2))
                # Enabled only when asked for (#32330: TP4 over PCIe regressed).
                self.assertFalse(registry.allreduce_fusion_auto_enable())

    def test_unlisted_gpus_are_refused(self):
        for capability in ((8, 0), (10, 5), (11, 0), (13, 0)):
            with simulate_gpu(capability):
                with self.assertRaises(ValueError):
                    _resolve("auto", 1)
                self.assertFalse(registry.allreduce_fusion_auto_enable())

    def test_auto_enable(self):
        with simulate_gpu((9, 0)):
            self.assertTrue(registry.allreduce_fusion_auto_enable(False))
            self.assertFalse(registry.allreduce_fusion_auto_enable(True))
        with simulate_gpu((10, 0)):
            self.assertTrue(registry.allreduce_fusion_auto_enable(True))


if __name__ == "__main__":
    unittest.main()
