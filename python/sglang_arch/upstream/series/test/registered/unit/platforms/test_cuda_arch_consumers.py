"""The call sites that read the CUDA architecture table, on simulated GPUs."""

import importlib
import types
import unittest
from unittest.mock import MagicMock, patch

import torch

from sglang.srt.arg_groups import model_override_base, overrides
from sglang.srt.distributed.device_communicators import torch_symm_mem
from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2
from sglang.srt.layers import flashinfer_comm_fusion as fusion
from sglang.srt.layers.layer_boundary.residual import add_norm
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.platform_utils import simulate_cuda_gpu
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(est_time=5, suite="stage-a-cpu-only")

MiB = 1024 * 1024
OLD_CUDA = (12, 2)  # below every CUDA floor (12.3 on SM90, 12.8 on Blackwell)


def _default_attn(use_mla, topk=None, asymmetric_kv=False):
    server_args = types.SimpleNamespace(
        speculative_algorithm="EAGLE" if topk else None,
        speculative_eagle_topk=topk,
        page_size=1,
        tp_size=1,
    )
    model_config = types.SimpleNamespace(
        hf_config=types.SimpleNamespace(architectures=["LlamaForCausalLM"]),
        has_asymmetric_kv=asymmetric_kv,
        has_attention_sinks=False,
    )
    return model_override_base.get_default_attn_backend(
        server_args, use_mla, model_config
    )


def _fusion_applies(batch_size):
    # Named apply_flashinfer_allreduce_fusion before 0.5.22.
    applies = getattr(add_norm, "flashinfer_ar_fusion_applies", None)
    return (applies or add_norm.apply_flashinfer_allreduce_fusion)(batch_size)


def _resolved(backend, is_multi_node):
    try:
        return fusion._resolve_backend(backend, is_multi_node)
    except ValueError:
        return None


class TestFusionHotPath(CustomTestCase):
    def test_backend_resolved_when_the_workspace_is_built_only(self):
        manager = fusion.FlashInferWorkspaceManager()
        manager.initialized, manager.world_size, manager.rank = True, 4, 0
        group = types.SimpleNamespace(device_group="d", cpu_group="c")
        manager.group = ("d", "c")
        manager.is_buffer_size_sufficient = lambda **kwargs: True
        resolve = MagicMock(return_value="trtllm")
        with (
            patch.object(fusion, "_flashinfer_allreduce_unavailable", False),
            patch.object(fusion, "_flashinfer_comm", object()),
            patch.object(fusion, "is_flashinfer_available", return_value=True),
            patch.object(fusion, "uses_cutedsl_ar_fusion", return_value=False),
            patch.object(fusion, "resolve_fusion_group", return_value=(4, 0, group)),
            patch.object(fusion, "_get_workspace_manager", return_value=manager),
            patch.object(
                fusion, "resolve_flashinfer_allreduce_fusion_backend", resolve
            ),
        ):
            for _ in range(3):
                self.assertTrue(fusion.ensure_workspace_initialized())
            resolve.assert_not_called()
            manager.initialized = False
            manager.initialize = MagicMock()
            fusion.ensure_workspace_initialized()
            resolve.assert_called_once()
            self.assertEqual(manager.initialize.call_args.kwargs["backend"], "trtllm")


class TestDefaultAttentionBackend(CustomTestCase):
    def test_defaults_by_gpu(self):
        cases = {
            ((9, 0), (12, 9)): ("fa3", "fa3"),
            ((9, 0), OLD_CUDA): ("flashinfer", "triton"),
            ((10, 0), (12, 9)): ("trtllm_mha", "flashinfer"),
            ((10, 3), (12, 9)): ("trtllm_mha", "flashinfer"),
            ((10, 0), (12, 4)): ("flashinfer", "triton"),
            ((8, 9), (12, 9)): ("flashinfer", "triton"),
            ((12, 0), (12, 9)): ("flashinfer", "triton"),
            ((11, 0), (13, 0)): ("flashinfer", "triton"),
        }
        for (capability, cuda), (mha, mla) in cases.items():
            with self.subTest(capability=capability, cuda=cuda):
                with simulate_cuda_gpu(capability, cuda=cuda):
                    self.assertEqual(_default_attn(use_mla=False), mha)
                    self.assertEqual(_default_attn(use_mla=True), mla)

    def test_speculative_topk_and_asymmetric_kv_on_blackwell(self):
        with simulate_cuda_gpu((10, 0)):
            self.assertEqual(_default_attn(False, topk=4), "flashinfer")
            self.assertEqual(_default_attn(False, asymmetric_kv=True), "fa4")
        with simulate_cuda_gpu((9, 0)):
            self.assertEqual(_default_attn(False, topk=4), "flashinfer")


class TestAllReduceFusionBackend(CustomTestCase):
    def test_resolution_by_gpu(self):
        # (backend, multi-node) -> resolved, or None for a ValueError
        hopper = {
            ("auto", False): "trtllm",
            ("auto", True): None,
            ("trtllm", False): "trtllm",
            ("trtllm", True): None,
            ("mnnvl", False): "mnnvl",
            ("mnnvl", True): None,
            ("cutedsl", False): None,
        }
        blackwell = {
            ("auto", False): "mnnvl",
            ("auto", True): "mnnvl",
            ("trtllm", False): "trtllm",
            ("trtllm", True): None,
            ("mnnvl", True): "mnnvl",
            ("cutedsl", False): "cutedsl",
            ("cutedsl", True): "cutedsl",
        }
        cases = {((9, 0), (12, 9)): hopper, ((10, 0), (12, 9)): blackwell}
        cases[((10, 3), (12, 9))] = blackwell
        cases[((10, 7), (13, 0))] = blackwell
        for capability, cuda in (
            ((9, 0), OLD_CUDA),
            ((10, 0), (12, 4)),
            ((8, 0), (12, 9)),
        ):
            cases[(capability, cuda)] = {key: None for key in hopper}
        for (capability, cuda), expected in cases.items():
            with simulate_cuda_gpu(capability, cuda=cuda):
                for (backend, multi_node), resolved in expected.items():
                    with self.subTest(
                        capability=capability, cuda=cuda, backend=backend
                    ):
                        self.assertEqual(_resolved(backend, multi_node), resolved)

    def test_add_norm_gate(self):
        cases = {
            ((9, 0), (12, 9)): True,
            ((10, 0), (12, 9)): True,
            ((10, 0), (12, 4)): False,
            ((9, 0), OLD_CUDA): False,
            ((8, 9), (12, 9)): False,
            ((11, 0), (13, 0)): False,
        }
        try:
            for (capability, cuda), gate in cases.items():
                with simulate_cuda_gpu(capability, cuda=cuda), patch(
                    "sglang.srt.utils.is_cuda", return_value=True
                ):
                    importlib.reload(add_norm)
                    self.assertEqual(add_norm._has_allreduce_fusion, gate, capability)
        finally:
            importlib.reload(add_norm)

    def test_add_norm_gate_off_cuda(self):
        try:
            with simulate_cuda_gpu((9, 0)), patch(
                "sglang.srt.utils.is_cuda", return_value=False
            ):
                importlib.reload(add_norm)
                self.assertFalse(add_norm._has_allreduce_fusion)
        finally:
            importlib.reload(add_norm)

    def test_flashinfer_ar_fusion_applies_reads_the_gate(self):
        exec_ = types.SimpleNamespace(
            comm=types.SimpleNamespace(flashinfer_allreduce_fusion_backend="auto")
        )
        for gate in (False, True):
            with (
                patch.object(add_norm, "_has_allreduce_fusion", gate),
                patch.object(add_norm, "_is_flashinfer_available", True),
                patch.object(add_norm, "is_dp_attention_enabled", return_value=False),
                patch.object(add_norm, "get_exec", return_value=exec_),
                patch.object(add_norm, "uses_cutedsl_ar_fusion", return_value=False),
                patch.object(
                    add_norm, "is_flashinfer_allreduce_unavailable", return_value=False
                ),
            ):
                self.assertEqual(_fusion_applies(16), gate)

    def _auto_enable(self, tp_size, nnodes):
        hf_config = types.SimpleNamespace(
            architectures=["Qwen3MoeForCausalLM"],
            model_type="qwen3_moe",
            hidden_size=2048,
        )
        view = types.SimpleNamespace(
            flashinfer_allreduce_fusion_backend=None,
            tp_size=tp_size,
            nnodes=nnodes,
            moe_a2a_backend="none",
            disable_custom_all_reduce=False,
            attn_dp_size=1,
            dp_size=1,
            attn_cp_size=1,
            ep_join_mode=None,
            encoder_only=False,
            enable_pdmux=False,
            enable_dp_attention=False,
            _model_config=types.SimpleNamespace(hf_config=hf_config),
            model_path="/models/qwen3-moe",
        )
        result = overrides._flashinfer_allreduce_fusion_auto_enable(view)
        return result.get("flashinfer_allreduce_fusion_backend")

    def test_auto_enable_pass(self):
        cases = {
            ((9, 0), (12, 9), 1): "auto",
            ((9, 0), (12, 9), 2): None,
            ((9, 0), OLD_CUDA, 1): None,
            ((10, 0), (12, 9), 1): "auto",
            ((10, 0), (12, 9), 2): "auto",
            ((12, 0), (12, 9), 1): None,
            ((8, 0), (12, 9), 1): None,
        }
        for (capability, cuda, nnodes), expected in cases.items():
            with simulate_cuda_gpu(capability, cuda=cuda):
                with self.subTest(capability=capability, cuda=cuda, nnodes=nnodes):
                    self.assertEqual(self._auto_enable(4, nnodes), expected)
                    self.assertIsNone(self._auto_enable(1, nnodes))


def build_communicator(
    capability,
    world_size,
    multicast_ptr=1,
    peer_access=True,
    single_node=True,
    rendezvous_error=None,
):
    """The torch symm-mem communicator on a simulated GPU, without CUDA; returns
    (communicator, the mocked torch symmetric memory module)."""
    symm_mem = MagicMock()
    symm_mem.rendezvous.return_value = types.SimpleNamespace(
        multicast_ptr=multicast_ptr
    )
    symm_mem.rendezvous.side_effect = rendezvous_error
    envs = MagicMock()
    envs.SGLANG_OPT_USE_INKLING_CUSTOM_AR.get.return_value = False

    def gather(ranks, _obj, group=None):
        ranks[:] = [(i, [peer_access] * world_size) for i in range(world_size)]

    with (
        simulate_cuda_gpu(capability),
        patch.object(torch_symm_mem, "torch_symm_mem_available", True),
        patch.object(torch_symm_mem, "torch_symm_mem", symm_mem, create=True),
        patch.object(torch_symm_mem, "envs", envs),
        patch("torch.cuda.set_device"),
        patch("torch.cuda.get_device_capability", return_value=capability),
        patch("torch.cuda.device_count", return_value=world_size),
        patch("torch.cuda.can_device_access_peer", return_value=peer_access),
        patch("torch.distributed.get_world_size", return_value=world_size),
        patch("torch.distributed.all_gather_object", gather),
        patch(
            "sglang.srt.distributed.parallel_state.in_the_same_node_as",
            lambda group, source_rank=0: [single_node] * world_size,
        ),
    ):
        group = types.SimpleNamespace(group_name="tp")
        return torch_symm_mem.TorchSymmMemCommunicator(group, 0), symm_mem


class TestTorchSymmMemCommunicator(CustomTestCase):
    def test_sizes_and_kernel_with_multicast(self):
        sizes = {2: 64 * MiB, 4: 64 * MiB, 6: 128 * MiB, 8: 128 * MiB}
        for capability in ((9, 0), (10, 0), (10, 3), (10, 7)):
            for world_size in range(2, 9):
                with self.subTest(capability=capability, world_size=world_size):
                    comm, _ = build_communicator(capability, world_size)
                    self.assertEqual(comm.disabled, world_size not in sizes)
                    self.assertEqual(comm.max_size, sizes.get(world_size, 0))
                    if not comm.disabled:
                        self.assertEqual(comm.use_multimem, world_size in (4, 6, 8))

    def test_all_reduce_runs_the_kernel_picked_at_construction(self):
        for world_size, kernel in (
            (2, "two_shot_all_reduce_"),
            (4, "multimem_all_reduce_"),
        ):
            comm, _ = build_communicator((9, 0), world_size)
            comm.buffer = torch.zeros(64, dtype=torch.bfloat16)
            comm.should_torch_symm_mem_allreduce = lambda inp: True
            ops = MagicMock()
            with patch.object(torch.ops, "symm_mem", ops, create=True):
                comm.all_reduce(torch.ones(8, dtype=torch.bfloat16))
            self.assertTrue(getattr(ops, kernel).called, world_size)
            other = {"two_shot_all_reduce_", "multimem_all_reduce_"} - {kernel}
            self.assertFalse(getattr(ops, other.pop()).called, world_size)

    def test_untuned_gpus_stay_off_before_allocating(self):
        for capability in ((8, 0), (11, 0), (12, 0), (12, 1), (13, 0)):
            with self.assertLogs(torch_symm_mem.logger, "WARNING") as logs:
                comm, symm_mem = build_communicator(capability, 8)
            self.assertTrue(comm.disabled)
            symm_mem.empty.assert_not_called()
            self.assertIn("Device capability", logs.output[0])


class TestCustomAllReduceV2Tables(CustomTestCase):
    def _table(self, capability):
        custom_all_reduce_v2._get_all_reduce_configs.cache_clear()
        props = types.SimpleNamespace(multi_processor_count=132)
        with (
            patch("torch.cuda.get_device_capability", return_value=capability),
            patch("torch.cuda.get_device_properties", return_value=props),
        ):
            try:
                return custom_all_reduce_v2._get_all_reduce_configs()
            finally:
                custom_all_reduce_v2._get_all_reduce_configs.cache_clear()

    def test_tables_by_capability(self):
        tuned = {
            (9, 0): custom_all_reduce_v2._sm90_configs(132),
            (10, 0): custom_all_reduce_v2._sm100_configs(132),
            (10, 3): custom_all_reduce_v2._sm100_configs(132),
            (10, 6): custom_all_reduce_v2._sm100_configs(132),
            (10, 7): custom_all_reduce_v2._sm107_configs(132),
            (10, 9): custom_all_reduce_v2._sm107_configs(132),
        }
        for capability, table in tuned.items():
            self.assertEqual(self._table(capability), table, capability)
        for capability in ((8, 0), (11, 0), (12, 0), (13, 0)):
            table = self._table(capability)
            self.assertNotIn(table, tuned.values())
            self.assertEqual(sorted(table), list(range(2, 17)))


if __name__ == "__main__":
    unittest.main()
