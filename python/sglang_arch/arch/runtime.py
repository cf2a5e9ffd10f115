"""This process's machine, resolved once: what every consumer of the registry reads.

SGLang's call sites (through the plugin's hooks, or directly in the upstream patch
series) read this instead of probing the device themselves, so all decisions in one
process agree with each other and with ``sglang-arch show``.  torch is imported only
when asked for its CUDA version.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, replace
from typing import Callable, Dict, Optional, Tuple

from .decisions import Decisions, decide
from .detect import Node, detect, node_resolution
from .policies import (attention, collectives, deepseek, deterministic, dsa, gemm, linear_attention, minicpm, minimax_m3,
                       moe, platform, quant, speculative, vision)
from .profile import parse_version
from .registry import Resolution, default_registry, reset_default_registry
from .topology import TOPOLOGIES, Topology

logger = logging.getLogger("sglang_arch")

ENV_CUDA = "SGLANG_ARCH_CUDA"
# torch's CUDA version assumed for a simulated GPU when torch itself has none (a CPU build).
SIMULATED_CUDA_DEFAULT = (13, 0)
# GPUs of the node a described GPU stands on when the host has none or one (an HGX-size
# node, as the decision suite and `sglang-arch plan` assume).
DESCRIBED_GPU_COUNT = 8


@dataclass(frozen=True)
class MachineContext:
    node: Node
    resolution: Optional[Resolution]  # None: no NVIDIA GPU, upstream decides everything
    cuda: Optional[Tuple[int, int]]
    facts: Dict[str, object]

    @property
    def topology(self) -> Topology:
        return self.node.topology

    @property
    def world(self) -> int:
        """The largest all-reduce group this node can form (at least 2 for table look-ups)."""
        return max(2, len(self.node.gpus))

    def symm_mem(self, world_size: int, multicast: Optional[bool] = None,
                 nnodes: int = 1) -> collectives.SymmMemDecision:
        """``multicast``: as a rendezvous found it, where that differs from the node's topology."""
        topology = self.topology
        if multicast is not None and multicast != topology.multicast:
            topology = replace(topology, multicast=multicast)
        return collectives.torch_symm_mem(self._res(), topology, world_size, nnodes)

    def pcie_ipc(self, world_size: int, nnodes: int = 1) -> collectives.PcieIpcDecision:
        return collectives.pcie_ipc(self._res(), self.topology, world_size, nnodes)

    def symm_mem_table(self) -> Dict[int, Dict[int, int]]:
        """SGLang's ``TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES`` as the registry decides it.

        Keyed, like upstream's, by the devices' real majors; only world sizes the policy
        enables on this topology are listed, so upstream's own look-up does the rest.
        """
        if self.resolution is None:
            return {}
        row = {}
        profile = self.resolution.profile
        for ws in sorted(set(profile.torch_symm_mem) | set(profile.symm_mem_two_shot)):
            d = self.symm_mem(ws)
            if d.enabled:
                row[ws] = d.max_bytes
        return {major: dict(row) for major in {c.major for c in self.node.capabilities}}

    def fusion(self, nnodes: int, requested: str = "auto", explicit: bool = False,
               world_size: Optional[int] = None) -> collectives.FusionDecision:
        """``explicit``: fusion was asked for (SGLang's gate and backend resolution); else
        whether SGLang's auto-enable pass turns it on, at ``world_size`` (its TP size;
        default: the node's GPUs)."""
        return collectives.allreduce_fusion(self._res(), self.topology, world_size or self.world, nnodes, requested,
                                            self.cuda, explicit=explicit)

    def dsv41_custom_plane(self) -> collectives.PlanePreference:
        return collectives.dsv41_custom_plane(self._res(), self.cuda)

    def beam_all_reduce_limits(self, tp_size: int) -> collectives.TokenLimits:
        return collectives.beam_all_reduce_limits(self._res(), tp_size)

    def k3_sp_collective(self) -> collectives.K3SpDecision:
        return collectives.k3_sp_collective(self._res())

    def k3_ar_fusion(self) -> collectives.K3SpDecision:
        return collectives.k3_ar_fusion(self._res())

    def beam_flashinfer_band(self, tp_size: int) -> collectives.TokenLimits:
        return collectives.beam_flashinfer_band(self._res(), tp_size)

    def custom_ar_table(self) -> Optional[str]:
        return self._res().profile.custom_ar_v2_table

    def attention_default(self, traits: attention.ModelTraits) -> attention.AttentionDecision:
        return attention.default_backend(self._res(), traits)

    def check_backend(self, name: str, kind: str, phase: str) -> attention.Validity:
        return attention.check_backend(self._res(), name, kind, phase, self.cuda)

    def backend_replacement(self, name: str, phases: Tuple[str, ...],
                            traits: attention.ModelTraits) -> Optional[attention.Replacement]:
        return attention.replacement(self._res(), name, phases, traits)

    def draft_replacement(self, name: str, phase: str, traits: attention.ModelTraits,
                          buildable: Tuple[str, ...]) -> Optional[attention.Replacement]:
        return attention.draft_replacement(self._res(), name, phase, traits, buildable)

    def deterministic_backend(self, capable: Tuple[str, ...], kind: str,
                              deepseek: bool) -> deterministic.DeterministicDecision:
        return deterministic.default_backend(self._res(), capable, kind, deepseek, self.cuda)

    def vision_backend(self, passed: Optional[str]) -> vision.VisionDecision:
        return vision.backend(self._res(), passed, self.cuda)

    def gemma4_vision_backend(self) -> vision.VisionDecision:
        return vision.gemma4_backend(self._res(), self.cuda)

    def mimo_local_attention(self) -> vision.AudioLocalDecision:
        return vision.mimo_local_attention(self._res(), self.cuda)

    def kimi_k3_vision_backend(self, max_seqlen: int, total_tokens: int, fa4_available: Callable[[], bool],
                               triton_max_seqlen: int, fa4_min_work: int) -> vision.VisionDecision:
        return vision.kimi_k3_backend(self._res(), max_seqlen, total_tokens, fa4_available, triton_max_seqlen,
                                      fa4_min_work, self.cuda)

    def hybrid_linear_draft_backend(self, phase: str) -> speculative.DraftDecision:
        return speculative.hybrid_linear_draft_backend(self._res(), phase, self.cuda)

    def linear_decode_default(self) -> linear_attention.LinearDecision:
        return linear_attention.decode_default(self._res(), self.cuda)

    def linear_kda_decode_default(self) -> linear_attention.LinearDecision:
        return linear_attention.kda_decode_default(self._res(), self.cuda)

    def linear_verify_default(self) -> linear_attention.LinearDecision:
        return linear_attention.verify_default(self._res(), self.cuda)

    def linear_prefill_default(self, family: str) -> linear_attention.LinearDecision:
        return linear_attention.prefill_default(self._res(), family, self.cuda)

    def draft_worker_backend(self, named: Optional[str], choices: Tuple[str, ...], kind: str = "mha",
                             user_named: bool = False) -> speculative.DraftWorkerDecision:
        traits = attention.ModelTraits(kind=kind, cuda=self.cuda)
        return speculative.draft_worker_backend(self._res(), named, choices, traits, user_named)

    def fa4_page_size(self, kind: str = "mha", eagle_topk: int = 0,
                      diffusion: bool = False) -> attention.PageSizeDecision:
        return attention.fa4_page_size(self._res(), kind, eagle_topk, diffusion, self.cuda)

    def dsa_kv_cache_dtype(self, attention_sinks: bool = False) -> dsa.KvCacheDecision:
        return dsa.kv_cache_dtype_default(self._res(), attention_sinks)

    def dsa_backends(self, kv_cache_dtype: str, model_arch: str = "") -> dsa.DsaDecision:
        return dsa.split_backends(self._res(), kv_cache_dtype, model_arch, self.cuda)

    def dsa_kpool_tail_backend(self, dsa_impl: str) -> dsa.TailDecision:
        return dsa.kpool_tail_backend(self._res(), dsa_impl, self.cuda)

    def dsa_prefill_bands(self) -> dsa.PrefillBands:
        return dsa.prefill_bands(self._res(), self.cuda)

    def dsv4_mega_default(self) -> dsa.Dsv4MegaDecision:
        return dsa.dsv4_mega_default(self._res(), self.cuda)

    def dsv4_explicit_mega(self) -> Optional[str]:
        return dsa.dsv4_explicit_mega(self._res(), self.cuda)

    def dspark_commit_kv_views(self) -> dsa.CommitKvViews:
        return dsa.dspark_commit_kv_views(self._res(), self.cuda)

    def dsa_dg_native_verify(self) -> dsa.VerifyLayout:
        return dsa.dg_native_verify(self._res(), self.cuda)

    def dsv4_kernel_paths(self) -> deepseek.Dsv4Paths:
        return deepseek.dsv4_kernel_paths(self._res(), self.cuda)

    def tiny_router_gemm(self) -> deepseek.RouterGemm:
        return deepseek.tiny_router_gemm(self._res(), self.cuda)

    def fused_a_gemm_auto(self) -> deepseek.FusedAGemm:
        return deepseek.fused_a_gemm_auto(self._res(), self.cuda)

    def shared_experts_hopper_marlin_hold(self) -> deepseek.SharedExpertsHold:
        return deepseek.shared_experts_hopper_marlin_hold(self._res(), self.cuda)

    def nvfp4_swiglu_fusion(self) -> deepseek.SwigluFusion:
        return deepseek.nvfp4_swiglu_fusion(self._res(), self.cuda)

    def dsv41_bf16_index_logits(self) -> deepseek.IndexLogits:
        return deepseek.dsv41_bf16_index_logits(self._res(), self.cuda)

    def minicpm_sparse_backend(self, fuse_topk: bool = False) -> minicpm.SparseDecision:
        return minicpm.sparse_backend(self._res(), self.cuda, fuse_topk)

    def minicpm_replacement(self, name: str, fuse_topk: bool = False) -> Optional[Tuple[str, str]]:
        return minicpm.replacement(self._res(), name, self.cuda, fuse_topk)

    def check_minicpm_backend(self, name: str, fuse_topk: bool = False) -> minicpm.SparseCheck:
        return minicpm.check(self._res(), name, self.cuda, fuse_topk)

    def minimax_m3_nvfp4_arm(self, trtllm_routed: bool = False) -> minimax_m3.ArmDecision:
        return minimax_m3.nvfp4_arm(self._res(), self.cuda, trtllm_routed)

    def moe_runner(self, quant: str, model_arch: str = "", explicit_quantization: bool = False) -> moe.Choice:
        return moe.moe_runner(self._res(), quant, self.cuda, model_arch, explicit_quantization)

    def check_moe_runner(self, name: str, quant: str) -> moe.Validity:
        return moe.check_moe_runner(self._res(), name, quant, self.cuda)

    def deep_gemm(self) -> moe.Choice:
        return moe.deep_gemm(self._res(), self.cuda)

    def fp8_gemm(self, deep_gemm_on: Optional[bool] = None, flashinfer: bool = True) -> moe.Choice:
        return moe.fp8_gemm(self._res(), self.cuda, deep_gemm_on, flashinfer)

    def fp4_gemm(self) -> moe.Choice:
        return moe.fp4_gemm(self._res(), self.cuda)

    def bf16_gemm(self) -> moe.Choice:
        return moe.bf16_gemm(self._res(), self.cuda)

    def gemm_paths(self) -> gemm.GemmPaths:
        return gemm.gemm_paths(self._res(), self.cuda)

    def check_gemm(self, decision: str, name: str) -> moe.Validity:
        return moe.check_gemm(self._res(), decision, name, self.cuda)

    def dense_ue8m0_requant(self) -> quant.RequantDecision:
        return quant.dense_ue8m0_requant(self._res(), self.cuda)

    def quant_fact(self, rule: str) -> quant.FactDecision:
        return quant.fact_rule(self._res(), rule, self.cuda)

    def nvfp4_kv_dequant(self) -> quant.KvDequant:
        return quant.nvfp4_kv_dequant(self._res(), self.cuda)

    def flashinfer_quantize_backend(self, which: str) -> quant.QuantizeBackend:
        return quant.flashinfer_quantize_backend(self._res(), which, self.cuda)

    def decisions(self, nnodes: int = 1) -> Decisions:
        """Every decision for this node's own GPU count, topology and CUDA: what ``show`` prints."""
        return decide(self._res(), self.topology, len(self.node.gpus), nnodes,
                      attention.ModelTraits(cuda=self.cuda))

    def _res(self) -> Resolution:
        if self.resolution is None:
            raise RuntimeError("no NVIDIA GPU: the registry has nothing to decide")
        return self.resolution


def configured_cuda() -> Optional[Tuple[int, int]]:
    """The CUDA version ``SGLANG_ARCH_CUDA`` sets (None: unset); a bad value is a ValueError."""
    explicit = os.environ.get(ENV_CUDA)
    if not explicit:
        return None
    try:
        return parse_version(explicit)
    except ValueError as exc:
        raise ValueError(f"{ENV_CUDA}: {exc}") from None


def _cuda_version(simulated: bool) -> Optional[Tuple[int, int]]:
    explicit = configured_cuda()
    if explicit:
        return explicit
    cuda = torch_cuda()
    if cuda:
        return parse_version(cuda)
    return SIMULATED_CUDA_DEFAULT if simulated else None


def torch_cuda() -> Optional[str]:
    """torch's CUDA version (``torch.version.cuda``), None for a CPU build or without torch.

    Read from the ``torch/version.py`` its build wrote, without importing torch (1-2 s) where
    torch is not imported yet; imported where that file cannot be read."""
    import sys

    loaded = sys.modules.get("torch")
    if loaded is None:
        found = _torch_version_file()
        if found is not False:
            return found
    try:
        import torch
    except ImportError:
        return None
    return torch.version.cuda or None


def _torch_version_file():
    """``cuda`` of torch's ``version.py`` (None: a CPU build); False where it cannot be read."""
    import ast
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return False
    if spec is None:
        return None  # not installed
    if not spec.submodule_search_locations:
        return False
    path = os.path.join(list(spec.submodule_search_locations)[0], "version.py")
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(64 * 1024))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return False
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "cuda":
            value = node.value
            if isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, str)):
                return value.value or None
            return False
    return False


def machine(*, capability: Optional[str] = None, topology: Optional[str] = None,
            gpu_count: Optional[int] = None, cuda: Optional[Tuple[int, int]] = None) -> MachineContext:
    """The machine as the plugin sees it; arguments simulate one as the environment would
    (``sglang-arch show`` builds its answer here, so it prints what the plugin decides)."""
    default_registry()  # every SGLANG_ARCH_* setting is checked, GPU or not
    node = detect(capability=capability, topology=topology, gpu_count=gpu_count)
    res = node_resolution(node.capabilities) if node.gpus else None
    cuda_version = cuda or _cuda_version(node.source == "simulated")
    facts = platform.platform_facts(res, cuda_version)
    return MachineContext(node, res, cuda_version, facts)


def described(base: MachineContext, capability: Optional[str]) -> MachineContext:
    """The machine ``base`` would be with GPUs of ``capability`` (None: no NVIDIA GPU).

    For a host that describes its GPU without having it (SGLang's platform context
    inside a ``override_platform`` scope, its unit tests' way of simulating a GPU): a
    node of two or more GPUs keeps its count and topology; otherwise the GPU stands on
    a node of ``DESCRIBED_GPU_COUNT`` of them with its tier's usual topology, as
    ``SGLANG_ARCH_CAPABILITY`` with that many GPUs simulates it.  torch's CUDA version
    is ``base``'s, or the simulated default where torch has none (a CPU build).
    """
    cuda = base.cuda or SIMULATED_CUDA_DEFAULT
    if capability is None:
        node = Node((), TOPOLOGIES["single"], "described", ("no NVIDIA GPU described",))
        return MachineContext(node, None, cuda, platform.platform_facts(None, cuda))
    if len(base.node.gpus) > 1:
        return machine(capability=capability, topology=base.topology.name,
                       gpu_count=len(base.node.gpus), cuda=cuda)
    return machine(capability=capability, gpu_count=DESCRIBED_GPU_COUNT, cuda=cuda)


_lock = threading.Lock()
_machine: list = []  # [MachineContext] once built


def current() -> MachineContext:
    """This process's machine, built once: concurrent first calls wait for one build."""
    if _machine:
        return _machine[0]
    with _lock:
        if not _machine:
            _machine.append(machine())
        return _machine[0]


_on_reset: list = []  # callables run after reset() (what was decided for the old machine is decided again)


def on_reset(callback: Callable[[], None]) -> None:
    """Run ``callback`` after every :func:`reset` (once, however often it is registered)."""
    if callback not in _on_reset:
        _on_reset.append(callback)


def reset() -> None:
    """Forget the machine (tests; after changing SGLANG_ARCH_* in this process)."""
    with _lock:
        reset_default_registry()
        _machine.clear()
    for callback in list(_on_reset):
        callback()


current.cache_clear = reset  # type: ignore[attr-defined]  # the former lru_cache API
