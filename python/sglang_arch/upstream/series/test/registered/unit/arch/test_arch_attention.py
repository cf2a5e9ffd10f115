import unittest

from sglang.srt.arch import registry
from sglang.srt.runtime_context import override_platform
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=5, suite="stage-a-cpu-only")


def _gpu(capability, cuda=True):
    """Simulate a CUDA GPU of ``capability`` whose toolkit meets every floor."""
    major = capability[0]
    return override_platform(
        is_cuda=cuda,
        device_capability=capability,
        is_sm90=cuda and major == 9,
        is_sm100=cuda and major == 10,
        is_sm120=cuda and major == 12,
    )


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
            with _gpu(capability):
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
            with _gpu(capability):
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
            with _gpu(capability):
                registry.check_attention_backend(backend, use_mla)


if __name__ == "__main__":
    unittest.main()
