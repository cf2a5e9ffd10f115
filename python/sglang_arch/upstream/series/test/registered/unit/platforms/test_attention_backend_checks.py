"""The trtllm_mla prefill gate at argument resolution, and fa3's window as a ValueError."""

import sys
import types
import unittest
from unittest.mock import patch

from sglang.srt.arg_groups import overrides
from sglang.srt.layers.attention import attention_registry
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.platform_utils import simulate_cuda_gpu
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=3, suite="stage-a-cpu-only")


def _view(attention=None, prefill=None, decode=None):
    return types.SimpleNamespace(
        attention_backend=attention,
        prefill_attention_backend=prefill,
        decode_attention_backend=decode,
        kv_cache_dtype="auto",
    )


class TestTrtllmMlaPrefillGate(CustomTestCase):
    def test_sm12x_decodes_and_refuses_prefill(self):
        for capability in ((12, 0), (12, 1)):
            with simulate_cuda_gpu(capability):
                with self.assertRaisesRegex(ValueError, "prefill"):
                    overrides._mla_kv_cache_dtype_checks(_view("trtllm_mla"))
                with self.assertRaisesRegex(ValueError, "prefill"):
                    overrides._mla_kv_cache_dtype_checks(_view(prefill="trtllm_mla"))
                for view in (
                    _view("trtllm_mla", prefill="flashinfer"),
                    _view(prefill="flashinfer", decode="trtllm_mla"),
                ):
                    self.assertEqual(overrides._mla_kv_cache_dtype_checks(view), {})

    def test_sm10x_runs_both_phases(self):
        for capability in ((10, 0), (10, 3)):
            with simulate_cuda_gpu(capability):
                self.assertEqual(
                    overrides._mla_kv_cache_dtype_checks(_view("trtllm_mla")), {}
                )

    def test_off_blackwell_refused_as_before(self):
        with simulate_cuda_gpu((9, 0)):
            with self.assertRaisesRegex(ValueError, "Blackwell"):
                overrides._mla_kv_cache_dtype_checks(_view("trtllm_mla"))


class TestFa3Window(CustomTestCase):
    def _build(self, capability, use_mla):
        runner = types.SimpleNamespace(use_mla_backend=use_mla)
        with (
            patch.object(attention_registry, "_is_musa", False),
            patch.object(
                attention_registry, "get_device_capability", return_value=capability
            ),
            patch.dict(
                sys.modules,
                {
                    "sglang.srt.layers.attention.flashattention_backend": (
                        types.SimpleNamespace(FlashAttentionBackend=lambda r: "fa3")
                    )
                },
            ),
        ):
            return attention_registry.create_flashattention_v3_backend(runner)

    def test_refused_with_a_value_error(self):
        for capability, use_mla in (
            ((12, 0), False),
            ((10, 0), False),
            ((10, 0), True),
            ((8, 0), True),
            ((8, 9), True),
            ((7, 5), False),
        ):
            with self.subTest(capability=capability, use_mla=use_mla):
                with self.assertRaisesRegex(ValueError, "FlashAttention v3"):
                    self._build(capability, use_mla)

    def test_built_where_its_kernels_run(self):
        for capability, use_mla in (
            ((8, 0), False),
            ((8, 6), False),
            ((8, 9), False),
            ((9, 0), False),
            ((9, 0), True),
        ):
            self.assertEqual(self._build(capability, use_mla), "fa3")


if __name__ == "__main__":
    unittest.main()
