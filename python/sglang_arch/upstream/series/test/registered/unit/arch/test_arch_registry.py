import unittest

from sglang.srt.arch import registry
from sglang.srt.runtime_context import override_platform
from sglang.test.arch_utils import simulate_gpu
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=5, suite="stage-a-cpu-only")


class TestResolution(CustomTestCase):
    def test_known_capabilities_resolve_exactly(self):
        for capability, tier in registry.ARCH_TIERS.items():
            resolution = registry.resolve(capability)
            self.assertEqual(resolution.match, "exact")
            self.assertIs(resolution.tier, tier)

    def test_fallback_is_the_nearest_tier_below(self):
        cases = {
            (10, 5): ((10, 3), "family"),
            (12, 9): ((12, 1), "family"),
            (13, 0): ((12, 1), "generation"),
            (9, 5): ((9, 0), "family"),
            (11, 2): ((11, 0), "family"),
        }
        for capability, (matched, match) in cases.items():
            resolution = registry.resolve(capability)
            self.assertEqual((resolution.matched, resolution.match), (matched, match))
            self.assertLessEqual(resolution.matched, capability)

    def test_below_the_oldest_tier_nothing_is_tuned(self):
        resolution = registry.resolve((6, 1))
        self.assertEqual(resolution.match, "none")
        self.assertEqual(registry.symm_mem_max_size(8, (6, 1)), 0)
        self.assertIsNone(registry.custom_all_reduce_v2_table((6, 1)))

    def test_bad_capabilities_are_refused(self):
        for bad in (
            (12,),
            "12.0",
            (12, -1),
            (12.0, 0),
            [9, 0],
            (9, 0, 0),
            (100, 0),
            (True, 0),
        ):
            with self.assertRaises(ValueError):
                registry.resolve(bad)

    def test_fallback_never_lends_a_kernel(self):
        # 10.5 takes 10.3's sizes and preferences, but no kernel list names it.
        with simulate_gpu((10, 5)):
            self.assertEqual(registry.symm_mem_max_size(8), 128 * registry.MiB)
            self.assertEqual(registry.allreduce_fusion_backends(), ())
            self.assertIsNone(registry.attention_backend(use_mla=False))
        for kernels in (
            registry.ALLREDUCE_FUSION_KERNELS,
            registry.ALLREDUCE_FUSION_MULTI_NODE_KERNELS,
            registry.ATTENTION_KERNELS,
        ):
            for capabilities in kernels.values():
                for capability in capabilities:
                    self.assertIn(capability, registry.ARCH_TIERS)

    def test_a_gpu_described_by_its_family_facts_alone(self):
        # SGLang's tests describe a GPU by its facts (override_platform(is_sm100=True)).
        with override_platform(is_sm100=True):
            self.assertEqual(registry.device_capability(), (10, 0))
            self.assertEqual(registry.allreduce_fusion_auto_backend(True), "mnnvl")
        with override_platform(is_sm90=True, is_sm100=False):
            self.assertEqual(registry.device_capability()[0], 9)
            self.assertEqual(registry.attention_backend(use_mla=False), "fa3")

    def test_off_cuda_nothing_is_tuned(self):
        # ROCm reports a CUDA-like capability (9.4 on MI300); it must not read as Hopper.
        with simulate_gpu((9, 4), cuda=False):
            self.assertIsNone(registry.device_capability())
            self.assertEqual(registry.symm_mem_max_size(8), 0)
            self.assertEqual(registry.allreduce_fusion_backends(), ())
            self.assertIsNone(registry.attention_backend(use_mla=True))
            self.assertTrue(registry.attention_backend_runs("trtllm_mha", False))


if __name__ == "__main__":
    unittest.main()
