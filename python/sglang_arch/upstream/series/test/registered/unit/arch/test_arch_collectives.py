import unittest
from unittest.mock import patch

from sglang.srt.arch import registry
from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=5, suite="stage-a-cpu-only")

MiB = 1024 * 1024


class TestTorchSymmMemSizes(CustomTestCase):
    def test_hopper_and_blackwell_keep_their_sizes(self):
        sizes = {2: 64 * MiB, 4: 64 * MiB, 6: 128 * MiB, 8: 128 * MiB}
        for capability in ((9, 0), (10, 0), (10, 3), (10, 7)):
            for world_size in (1, 2, 3, 4, 5, 6, 7, 8, 16):
                self.assertEqual(
                    registry.symm_mem_max_size(world_size, capability),
                    sizes.get(world_size, 0),
                )
                self.assertEqual(
                    registry.symm_mem_uses_multimem(world_size, capability),
                    world_size in (4, 6, 8),
                )

    def test_sm12x_uses_two_shot(self):
        for capability in ((12, 0), (12, 1)):
            self.assertEqual(registry.symm_mem_max_size(8, capability), 128 * MiB)
            self.assertFalse(registry.symm_mem_uses_multimem(8, capability))

    def test_untuned_architectures_stay_off(self):
        for capability in ((8, 0), (8, 9), (11, 0)):
            self.assertEqual(registry.symm_mem_max_size(8, capability), 0)


class TestCustomAllReduceV2Tables(CustomTestCase):
    def _table(self, capability):
        custom_all_reduce_v2._get_all_reduce_configs.cache_clear()
        props = type("Props", (), {"multi_processor_count": 132})()
        with (
            patch("torch.cuda.get_device_capability", return_value=capability),
            patch("torch.cuda.get_device_properties", return_value=props),
        ):
            try:
                return custom_all_reduce_v2._get_all_reduce_configs()
            finally:
                custom_all_reduce_v2._get_all_reduce_configs.cache_clear()

    def test_tables_by_capability(self):
        expected = {
            (9, 0): custom_all_reduce_v2._sm90_configs(132),
            (10, 0): custom_all_reduce_v2._sm100_configs(132),
            (10, 3): custom_all_reduce_v2._sm100_configs(132),
            (10, 5): custom_all_reduce_v2._sm100_configs(132),
            (10, 7): custom_all_reduce_v2._sm107_configs(132),
            (10, 9): custom_all_reduce_v2._sm107_configs(132),
        }
        for capability, table in expected.items():
            self.assertEqual(self._table(capability), table)
        for capability in ((8, 0), (11, 0), (12, 0), (13, 0)):
            table = self._table(capability)
            self.assertEqual(sorted(table), list(range(2, 17)))
            self.assertEqual(table[8].graph.one_shot_push_threshold, 1 * MiB)


if __name__ == "__main__":
    unittest.main()
