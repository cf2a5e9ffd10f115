import unittest

from sglang.srt.arch import registry
from sglang.test.arch_utils import simulate_gpu
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=5, suite="stage-a-cpu-only")


class TestAttentionPreference(CustomTestCase):
    def test_preferences(self):
        expected = {
            (9, 0): ("fa3", "fa3"),
            (10, 0): ("trtllm_mha", "flashinfer"),
            (10, 3): ("trtllm_mha", "flashinfer"),
            (8, 0): (None, None),
            (12, 0): (None, None),
            (12, 1): (None, None),
            (10, 5): (None, "flashinfer"),
        }
        for capability, (mha, mla) in expected.items():
            with simulate_gpu(capability):
                self.assertEqual(registry.attention_backend(use_mla=False), mha)
                self.assertEqual(registry.attention_backend(use_mla=True), mla)


class TestExplicitBackendCheck(CustomTestCase):
    def test_refused_where_not_built(self):
        refused = [
            ((12, 0), "fa3", False),
            ((10, 0), "fa3", False),
            ((8, 0), "fa3", True),
            ((12, 0), "trtllm_mla", True),
            ((9, 0), "trtllm_mla", True),
            ((8, 9), "trtllm_mha", False),
        ]
        for capability, backend, use_mla in refused:
            with simulate_gpu(capability):
                with self.assertRaisesRegex(ValueError, backend):
                    registry.check_attention_backend(backend, use_mla)

    def test_accepted_where_built(self):
        accepted = [
            ((8, 6), "fa3", False),
            ((9, 0), "fa3", True),
            ((10, 3), "trtllm_mla", True),
            ((12, 0), "trtllm_mha", False),
            ((12, 0), "flashinfer", True),
            ((13, 0), "triton", False),
        ]
        for capability, backend, use_mla in accepted:
            with simulate_gpu(capability):
                registry.check_attention_backend(backend, use_mla)


if __name__ == "__main__":
    unittest.main()
