import unittest

from sglang.kernels import backend_windows
from sglang.kernels.spec import CapabilityRequirement, DeviceType
from sglang.srt.platforms import cuda_arch
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=2, suite="stage-a-cpu-only")


class TestCudaArchTable(CustomTestCase):
    def test_a_listed_capability_reads_its_own_entry(self):
        for capability, config in cuda_arch.CUDA_ARCH_CONFIGS.items():
            self.assertIs(cuda_arch.get_cuda_arch_config(capability), config)

    def test_an_unlisted_minor_reads_the_nearest_listed_below_it(self):
        configs = cuda_arch.CUDA_ARCH_CONFIGS
        self.assertIs(cuda_arch.get_cuda_arch_config((9, 5)), configs[(9, 0)])
        self.assertIs(cuda_arch.get_cuda_arch_config((10, 3)), configs[(10, 0)])
        self.assertIs(cuda_arch.get_cuda_arch_config((10, 6)), configs[(10, 0)])
        self.assertIs(cuda_arch.get_cuda_arch_config((10, 9)), configs[(10, 7)])

    def test_an_unlisted_major_has_no_entry(self):
        for capability in ((7, 5), (8, 0), (8, 9), (11, 0), (13, 0)):
            self.assertIsNone(cuda_arch.get_cuda_arch_config(capability))


class TestKernelWindows(CustomTestCase):
    def _windows(self):
        for table in (
            backend_windows.ALLREDUCE_FUSION,
            backend_windows.ALLREDUCE_FUSION_MULTI_NODE,
            backend_windows.ATTENTION,
        ):
            yield from table.items()

    def test_windows_are_bounded_cuda_requirements(self):
        for name, window in self._windows():
            self.assertTrue(window, name)
            for requirement in window:
                self.assertIsInstance(requirement, CapabilityRequirement)
                self.assertEqual(requirement.device, DeviceType.CUDA)
                self.assertEqual(
                    requirement.min_cuda_arch[0], requirement.max_cuda_arch[0], name
                )

    def test_sm12x_windows_name_their_minors(self):
        for name, window in self._windows():
            for requirement in window:
                if requirement.min_cuda_arch[0] == 12:
                    self.assertLessEqual(requirement.max_cuda_arch, (12, 1), name)

    def test_windows_admit_what_the_kernels_are_built_for(self):
        admitted = {
            "fa3 mha": [(8, 0), (8, 6), (8, 9), (9, 0)],
            "fa3 mla": [(9, 0)],
            "trtllm_mha mha": [(9, 0), (10, 0), (10, 3), (12, 0), (12, 1)],
        }
        refused = {
            "fa3 mha": [(7, 5), (10, 0), (12, 0)],
            "fa3 mla": [(8, 0), (10, 0)],
            "trtllm_mha mha": [(8, 9), (11, 0), (12, 2), (13, 0)],
        }
        for key, capabilities in admitted.items():
            backend, kind = key.split()
            for capability in capabilities:
                self.assertTrue(
                    cuda_arch.attention_backend_runs(
                        backend, kind == "mla", capability
                    ),
                    (key, capability),
                )
        for key, capabilities in refused.items():
            backend, kind = key.split()
            for capability in capabilities:
                self.assertFalse(
                    cuda_arch.attention_backend_runs(
                        backend, kind == "mla", capability
                    ),
                    (key, capability),
                )

    def test_entries_prefer_backends_whose_windows_admit_them(self):
        for capability, config in cuda_arch.CUDA_ARCH_CONFIGS.items():
            for backend, windows in (
                (config.allreduce_fusion_backend, backend_windows.ALLREDUCE_FUSION),
                (
                    config.allreduce_fusion_multi_node_backend,
                    backend_windows.ALLREDUCE_FUSION_MULTI_NODE,
                ),
            ):
                if backend is not None:
                    self.assertTrue(
                        cuda_arch._window_admits(windows[backend], capability)
                    )
            for use_mla, backend in (
                (False, config.mha_attention_backend),
                (True, config.mla_attention_backend),
            ):
                if backend is not None:
                    self.assertTrue(
                        cuda_arch.attention_backend_runs(backend, use_mla, capability)
                    )


if __name__ == "__main__":
    unittest.main()
