"""The call sites routed through sglang.srt.arch: their decisions on simulated machines.

Written by ``sglang-arch upstream`` (step 4, the last call-site step). CPU only: the
machine is simulated with SGLANG_ARCH_CAPABILITY / SGLANG_ARCH_GPU_COUNT /
SGLANG_ARCH_TOPOLOGY / SGLANG_ARCH_CUDA, and each test asks SGLang's own patched
function where it can run without a GPU, else the glue function the call site calls.

Run: python -m pytest test/registered/unit/arch/test_arch_call_sites.py
"""

import os
import unittest
from types import SimpleNamespace
from unittest import mock

from sglang.srt.arch import runtime
from sglang.srt.arch.glue import collectives as arch_collectives
from sglang.srt.arch.glue import fusion as arch_fusion
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(10, "base-a-test-cpu")

MIB = 1 << 20
ARCH_ENV = (
    "SGLANG_ARCH_CAPABILITY",
    "SGLANG_ARCH_GPU_COUNT",
    "SGLANG_ARCH_TOPOLOGY",
    "SGLANG_ARCH_CUDA",
    "SGLANG_ARCH_CONFIG",
    "SGLANG_ARCH_RESOLVE_AS",
    "SGLANG_ARCH_STRICT",
)


class ArchMachineTestCase(CustomTestCase):
    """Simulates ``GPUS`` x ``CAPABILITY`` on ``TOPOLOGY`` (torch CUDA 13.0)."""

    class UnsetArgs(SimpleNamespace):
        """Server arguments mid-resolution: a field the test does not set reads as unset."""

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return None

    CAPABILITY = None
    GPUS = 8
    TOPOLOGY = "pcie-p2p"

    def setUp(self):
        self._saved = {name: os.environ.get(name) for name in ARCH_ENV}
        for name in ARCH_ENV:
            os.environ.pop(name, None)
        os.environ.update(
            SGLANG_ARCH_CAPABILITY=self.CAPABILITY,
            SGLANG_ARCH_GPU_COUNT=str(self.GPUS),
            SGLANG_ARCH_TOPOLOGY=self.TOPOLOGY,
            SGLANG_ARCH_CUDA="13.0",
        )
        runtime.reset()

    def tearDown(self):
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        runtime.reset()

    def symm_mem(self, world_size):
        """(max bytes, multimem?) as ``TorchSymmMemCommunicator.__init__`` gets them."""
        major = int(self.CAPABILITY.split(".")[0])
        comm = SimpleNamespace(world_size=world_size, device_capability=major)
        size = arch_collectives.symm_mem_max_size(comm)
        return size, arch_collectives.uses_multimem(comm)

    def explicit_backend(self, backend):
        """``_attention_backend_default`` for ``--attention-backend backend`` (MHA model)."""
        from sglang.srt.arg_groups import overrides
        from sglang.srt.runtime_context import override_platform

        view = SimpleNamespace(
            attention_backend=backend,
            prefill_attention_backend=None,
            decode_attention_backend=None,
        )
        with mock.patch.object(overrides, "use_mla_backend", lambda view: False):
            with override_platform(is_cuda=True, is_hip=False):
                try:
                    overrides._attention_backend_default(view)
                except ValueError as exc:
                    return str(exc)
        return None

    def linear_attention_defaults(self):
        """(verify, decode) as GLM-5-Next's and the generic linear-attention defaults
        declare them, speculative decoding on, a bf16 SSM state, no backend given."""
        from sglang.srt.arg_groups.attention_hook import handle_linear_attn_backend
        from sglang.srt.arg_groups.glm5_next_hook import (
            apply_glm5_next_spec_backend_defaults,
        )
        from sglang.srt.runtime_context import override_platform

        glm5 = SimpleNamespace(
            speculative_algorithm="EAGLE", linear_attn_verify_backend=None
        )
        args = self.UnsetArgs(
            linear_attn_decode_backend=None,
            linear_attn_backend="triton",
            mamba_ssm_dtype="bfloat16",
        )
        with override_platform(is_cuda=True, is_hip=False):
            apply_glm5_next_spec_backend_defaults(glm5)
            handle_linear_attn_backend(args)

        def declared(record, field):
            value = None
            for _source, fields in getattr(record, "_resolved_overrides", None) or ():
                value = fields.get(field, value)
            return value

        return (
            declared(glm5, "linear_attn_verify_backend"),
            declared(args, "linear_attn_decode_backend"),
        )


class TestArchCallSitesSM120PCIe(ArchMachineTestCase):
    """8x RTX PRO 6000 (12.0) on PCIe with P2P: the field report (docs/differences.md D1, D3)."""

    CAPABILITY = "12.0"

    def test_torch_symm_mem_two_shot_128_mib(self):
        from sglang.srt.distributed.device_communicators import torch_symm_mem

        self.assertIs(torch_symm_mem.arch_collectives, arch_collectives)
        self.assertFalse(hasattr(torch_symm_mem, "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"))
        self.assertEqual(self.symm_mem(8), (128 * MIB, False))

    def test_fusion_backend_is_trtllm(self):
        from sglang.srt.layers.flashinfer_comm_fusion import _resolve_backend

        self.assertEqual(_resolve_backend("auto", False), "trtllm")
        self.assertTrue(arch_fusion.fusion_enabled_here(1))

    def test_fa3_is_refused_triton_accepted(self):
        self.assertIn("--attention-backend fa3: ", self.explicit_backend("fa3"))
        self.assertIsNone(self.explicit_backend("triton"))


class TestArchCallSitesSM100NVSwitch(ArchMachineTestCase):
    """8x B200 (10.0) on NVSwitch: multicast, so multimem."""

    CAPABILITY = "10.0"
    TOPOLOGY = "nvswitch"

    def test_torch_symm_mem_multimem(self):
        self.assertEqual(self.symm_mem(8), (128 * MIB, True))

    def test_fusion_backend_is_mnnvl(self):
        from sglang.srt.layers.flashinfer_comm_fusion import _resolve_backend

        self.assertEqual(_resolve_backend("auto", False), "mnnvl")
        self.assertTrue(arch_fusion.fusion_enabled_here(1))

    def test_linear_attention_defaults_are_the_sm100_kernels(self):
        self.assertEqual(self.linear_attention_defaults(), ("nv_cutedsl", "flashinfer"))


class TestArchCallSitesSM89PCIe(ArchMachineTestCase):
    """4x L40S (8.9) on PCIe without P2P: no fusion, no symmetric memory."""

    CAPABILITY = "8.9"
    GPUS = 4
    TOPOLOGY = "pcie"

    def test_fusion_is_refused(self):
        from sglang.srt.layers.flashinfer_comm_fusion import _resolve_backend

        with self.assertRaises(ValueError):
            _resolve_backend("auto", False)
        self.assertFalse(arch_fusion.fusion_enabled_here(1))

    def test_torch_symm_mem_is_off(self):
        self.assertEqual(self.symm_mem(4), (0, False))


class TestArchCallSitesSM90(ArchMachineTestCase):
    """2x H100 (9.0) on NVLink: fa3 runs on Hopper."""

    CAPABILITY = "9.0"
    GPUS = 2
    TOPOLOGY = "nvlink"

    def test_fa3_is_accepted(self):
        self.assertIsNone(self.explicit_backend("fa3"))

    def test_linear_attention_defaults_are_left_to_the_base_backend(self):
        self.assertEqual(self.linear_attention_defaults(), (None, None))


class TestArchCallSitesUnknownGPU(ArchMachineTestCase):
    """A future 13.0: decides as the nearest lower tier, keeps its own identity."""

    CAPABILITY = "13.0"

    def test_identity_is_the_device(self):
        ctx = runtime.current()
        self.assertEqual(ctx.facts["device_capability"], (13, 0))
        self.assertEqual(ctx.resolution.match, "generation")
        self.assertFalse(ctx.facts["is_sm120"])


if __name__ == "__main__":
    unittest.main()
