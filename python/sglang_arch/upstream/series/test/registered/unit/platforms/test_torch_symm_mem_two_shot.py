"""Torch symmetric memory without multicast, and the consumers of its multicast fact."""

import types
import unittest
from unittest.mock import MagicMock, patch

import msgspec
import torch

from sglang.srt.models.inkling_common.kernels import comm as inkling_comm
from sglang.srt.platforms import cuda_arch
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=5, suite="stage-a-cpu-only")

MiB = 1024 * 1024


def _build(*args, **kwargs):
    from test_cuda_arch_consumers import build_communicator

    return build_communicator(*args, **kwargs)


class TestTwoShotWithoutMulticast(CustomTestCase):
    def test_two_shot_where_measured(self):
        # 2x H200, NVLink with multicast off: two-shot below 16 MiB.
        comm, _ = _build((9, 0), 2, multicast_ptr=0)
        self.assertFalse(comm.disabled)
        self.assertFalse(comm.multicast)
        self.assertFalse(comm.use_multimem)
        self.assertEqual(comm.max_size, 16 * MiB)
        self.assertEqual(
            cuda_arch.get_cuda_arch_config((9, 0)).torch_symm_mem_two_shot_max_sizes,
            {2: 16 * MiB},
        )

    def test_off_where_not_measured(self):
        for capability, world_size in (
            ((9, 0), 4),
            ((9, 0), 8),
            ((10, 0), 2),
            ((10, 3), 4),
        ):
            with self.subTest(capability=capability, world_size=world_size):
                comm, _ = _build(capability, world_size, multicast_ptr=0)
                self.assertTrue(comm.disabled)
                self.assertIsNone(comm.buffer)
                self.assertFalse(comm.multicast)

    def test_never_across_nodes(self):
        comm, _ = _build((9, 0), 2, multicast_ptr=0, single_node=False)
        self.assertTrue(comm.disabled)
        # With multicast (multi-node NVLink) the communicator runs as before.
        comm, _ = _build((10, 0), 4, multicast_ptr=1, single_node=False)
        self.assertFalse(comm.disabled)
        self.assertTrue(comm.multicast and comm.use_multimem)

    def test_peers_without_p2p_never_rendezvous(self):
        comm, symm_mem = _build((9, 0), 2, multicast_ptr=0, peer_access=False)
        self.assertTrue(comm.disabled)
        symm_mem.rendezvous.assert_not_called()
        symm_mem.empty.assert_not_called()

    def test_a_failed_rendezvous_disables_cleanly(self):
        comm, symm_mem = _build(
            (9, 0), 4, rendezvous_error=RuntimeError("CUDA error: peer access")
        )
        symm_mem.rendezvous.assert_called_once()
        self.assertTrue(comm.disabled)
        self.assertIsNone(comm.buffer)
        self.assertFalse(comm.multicast)

    def test_without_multicast_a_multimem_world_size_runs_two_shot(self):
        config = msgspec.structs.replace(
            cuda_arch.CUDA_ARCH_CONFIGS[(9, 0)],
            torch_symm_mem_two_shot_max_sizes={4: 8 * MiB},
        )
        cuda_arch.get_cuda_arch_config.cache_clear()
        try:
            with patch.dict(cuda_arch.CUDA_ARCH_CONFIGS, {(9, 0): config}):
                comm, _ = _build((9, 0), 4, multicast_ptr=0)
        finally:
            cuda_arch.get_cuda_arch_config.cache_clear()
        self.assertFalse(comm.disabled)
        self.assertFalse(comm.use_multimem)
        self.assertEqual(comm.max_size, 8 * MiB)

    def test_multicast_keeps_multimem(self):
        comm, _ = _build((9, 0), 4, multicast_ptr=1)
        self.assertTrue(comm.multicast)
        self.assertTrue(comm.use_multimem)
        self.assertEqual(comm.max_size, 64 * MiB)


def _group(comm, world_size=4):
    group = types.SimpleNamespace(
        torch_symm_mem_comm=comm, world_size=world_size, all_reduce=MagicMock()
    )
    group.all_reduce.side_effect = lambda x: x
    return group


def _comm(multicast):
    return types.SimpleNamespace(
        disabled=False,
        multicast=multicast,
        dtype=torch.bfloat16,
        max_size=64 * MiB,
        buffer=torch.zeros(1024, dtype=torch.bfloat16),
        world_size=4,
        group=types.SimpleNamespace(group_name="tp"),
        should_torch_symm_mem_allreduce=lambda inp: True,
    )


class TestInklingReadsMulticast(CustomTestCase):
    """Each consumer takes its NCCL path on an enabled communicator without
    multicast, and gets past the check with multicast."""

    def setUp(self):
        envs = MagicMock()
        envs.SGLANG_OPT_USE_INKLING_CUSTOM_AR.get.return_value = True
        envs.SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV.get.return_value = True
        envs.SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV_NORM.get.return_value = True
        self.resources = MagicMock(
            return_value=types.SimpleNamespace(ssconv_out=1 << 30)
        )
        self.exec_comm = types.SimpleNamespace(enable_scattered_sconv=False)
        jit = types.SimpleNamespace(
            MAX_BARRIER_BLOCKS=1024, select_ar_config=lambda n, w: ("mm",)
        )
        for patcher in (
            patch.object(inkling_comm, "envs", envs),
            patch.object(inkling_comm, "is_cuda", return_value=True),
            patch.object(inkling_comm, "_get_inkling_ar_resources", self.resources),
            patch.object(inkling_comm, "_ar_jit", return_value=jit),
            patch.object(
                inkling_comm,
                "get_exec",
                return_value=types.SimpleNamespace(comm=self.exec_comm),
            ),
        ):
            patcher.start()
            self.addCleanup(patcher.stop)

    def _batch(self, mode):
        fm = MagicMock()
        for name in (
            "is_decode",
            "is_target_verify",
            "is_extend",
            "is_draft_extend_v2",
        ):
            getattr(fm, name).return_value = name == mode
        return types.SimpleNamespace(forward_mode=fm)

    def test_ensure_inkling_ar_resources(self):
        inkling_comm.ensure_inkling_ar_resources(_group(_comm(False)))
        self.resources.assert_not_called()
        inkling_comm.ensure_inkling_ar_resources(_group(_comm(True)))
        self.resources.assert_called_once()

    def test_ar_sconv_norm_fusable(self):
        batch = self._batch("is_decode")
        for multicast in (False, True):
            got = inkling_comm.ar_sconv_norm_fusable(
                _group(_comm(multicast)), batch, 4, 64, torch.bfloat16
            )
            self.assertEqual(got, multicast)

    def test_get_ar_buffer(self):
        self.assertIsNone(
            inkling_comm.get_ar_buffer(_group(_comm(False)), 2, 8, torch.bfloat16)
        )
        self.exec_comm.enable_scattered_sconv = True
        buf = inkling_comm.get_ar_buffer(_group(_comm(True)), 2, 8, torch.bfloat16)
        self.assertEqual(tuple(buf.shape), (2, 8))

    def test_symm_mem_all_reduce_takes_nccl_without_multicast(self):
        group = _group(_comm(False))
        inp = torch.ones(2, 8, dtype=torch.bfloat16)
        inkling_comm.symm_mem_all_reduce(inp, group)
        group.all_reduce.assert_called_once()

    def test_symm_mem_comm(self):
        inp = types.SimpleNamespace(
            is_cuda=True, dtype=torch.bfloat16, element_size=lambda: 2
        )
        self.assertIsNone(inkling_comm._symm_mem_comm(_group(_comm(False)), inp, 64))
        comm = _comm(True)
        self.assertIs(inkling_comm._symm_mem_comm(_group(comm), inp, 64), comm)

    def test_scattered_and_fullwidth_sconv_fusable(self):
        batch = self._batch("is_extend")
        for multicast in (False, True):
            self.exec_comm.enable_scattered_sconv = True
            self.assertEqual(
                inkling_comm.scattered_ar_sconv_fusable(
                    _group(_comm(multicast)), batch, 64, 256, torch.bfloat16
                ),
                multicast,
            )
            self.exec_comm.enable_scattered_sconv = False
            self.assertEqual(
                inkling_comm.fullwidth_ar_sconv_fusable(
                    _group(_comm(multicast)), batch, 4096, 256, torch.bfloat16
                ),
                multicast,
            )


if __name__ == "__main__":
    unittest.main()
