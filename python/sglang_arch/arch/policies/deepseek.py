"""DeepSeek-V4's per-architecture kernel paths: one decision for the model's inline
``get_platform().is_blackwell`` / ``is_sm90`` reads.

SGLang 0.5.23's DeepSeek-V4 / V4.1 model code reads two platform facts inline, per layer,
to choose between tuned paths and a generic one, all of which run on any CUDA GPU:

- ``is_blackwell`` (majors 10-12, CUDA >= 12.8), "the Blackwell path":
  ``deepseek_v4._apply_wo_a_bf16_matmul`` takes the token-major wo_a fast paths for target
  verify (up to 384 rows, and DSpark's longer blocks) and prefill (4096-65536 rows);
  ``MqaAttentionBase._normalize_q_lora`` (V4.1) fuses the q RMSNorm with its MXFP8 quant
  (``rmsnorm_mxfp8``); ``deepseek_v4_mhc._mix_stats_impl`` fuses the mHC mix stats with
  Sinkhorn and ``_combine`` the combine with the norm (``hc_combine_norm``, MXFP8 variant);
- ``is_sm90`` (major 9, CUDA >= 12.3), "the Hopper path": the wo_a single-token decode GEMV,
  the mHC fused stats / BF16x3 projection / fused combine bands measured on Hopper, and the
  V4.1 indexer's paged decode scoring (``v41_indexer/scoring.decode_scores``:
  ``fp4_index_logits_paged`` instead of gathering slots for ``fp4_index_logits_decode``).

Every one of those kernels is a Triton kernel in SGLang (``kernels/ops/gemm/dsv4_wo_a.py``,
``kernels/ops/layernorm/rmsnorm_mxfp8.py``, ``hc_combine_norm.py``, ``mhc.py``,
``kernels/ops/attention/dsv4/fp4_indexer.py``), compiled by Triton for the device it runs
on; the Blackwell paths' MXFP8 epilogues cast to ``tl.float8e4nv``, which Triton compiles
from capability 8.9 (the catalog's ``sglang_triton_fp8``).  The facts pick no build: they
pick paths tuned on those architectures.  Decisions, then: the registry answers both with
SGLang's rule asked of the resolved tier (equal to upstream on every exact tier), each path
kept only where the catalog builds its kernels for the device itself.  One answer serves every
site, so the wo_a GEMM, the q norm, the mHC stats and combine and the indexer scoring agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from ..registry import Resolution
from .platform import runs_here, tier_fact, tier_where

Cuda = Optional[Tuple[int, int]]
DSV4_PATHS = "dsv4_paths"  # the kernel catalog's name for this decision
BLACKWELL, HOPPER = "blackwell", "hopper"


@dataclass(frozen=True)
class Dsv4Paths:
    blackwell: bool  # the model's get_platform().is_blackwell reads
    hopper: bool  # its get_platform().is_sm90 reads
    reason: str


def _kept(res: Resolution, path: str, rule: bool, cuda: Cuda) -> Tuple[bool, str]:
    if not rule:
        return False, f"not the tier's {path} path"
    return runs_here(res, DSV4_PATHS, path, cuda, f"the tier's {path} path")


def dsv4_kernel_paths(res: Resolution, cuda: Cuda = None) -> Dsv4Paths:
    """DeepSeek-V4's Blackwell and Hopper kernel paths on this device."""
    where = tier_where(res)
    blackwell, why_b = _kept(res, BLACKWELL, tier_fact(res, "is_blackwell", cuda), cuda)
    hopper, why_h = _kept(res, HOPPER, tier_fact(res, "is_sm90", cuda), cuda)
    return Dsv4Paths(blackwell, hopper, f"{where}: Blackwell: {why_b}; Hopper: {why_h}")


# --- the DeepSeek family's router GEMM: SGLang's tiny BF16 GEMM or cuBLAS ---------------------
#
# ``deepseek_common/utils.tiny_router_gemm_max_tokens`` (DeepSeek-V2/V3, MiniMax-M3, dots3)
# gives the rows up to which the router takes SGLang's tiny BF16 GEMM (``tiny_gemm_bf16``)
# rather than cuBLAS: -1 off CUDA, below SM90 (``_device_sm < 90``) or for a shape the kernel
# does not serve, else 16 -- "Rows up to which the tiny GEMM beats cuBLAS for the router".
# The kernel is plain CUDA C++ compiled for the device (``csrc/gemm/tiny_gemm.cuh``: vector
# loads of the architecture's width, PDL only where ``is_arch_support_pdl``), so the SM90
# floor is where it was measured to win, not where it builds: a decision.  The registry asks
# the rule of the resolved tier and keeps the kernel only where the catalog builds it.
TINY_ROUTER = "tiny_router_gemm"  # the kernel catalog's name for this decision
TINY = "tiny"


@dataclass(frozen=True)
class RouterGemm:
    tiny: bool  # the router may take the tiny GEMM (SGLang's shape checks still apply)
    reason: str


def tiny_router_gemm(res: Resolution, cuda: Cuda = None) -> RouterGemm:
    """Whether the DeepSeek family's router takes SGLang's tiny BF16 GEMM on this device."""
    where = tier_where(res)
    if res.resolved.sm < 90:
        return RouterGemm(False, f"{where}: below SM90, where the tiny GEMM was not measured to beat cuBLAS: cuBLAS")
    kept, why = runs_here(res, TINY_ROUTER, TINY, cuda, "SM90 and newer take the tiny GEMM for up to 16 rows")
    return RouterGemm(kept, f"{where}: {why}" + ("" if kept else ": cuBLAS"))


# --- the DeepSeek-V3 fused QKV-A GEMM's automatic backend --------------------------------------
#
# ``kernels/ops/gemm/fused_a_gemm.dsv3_fused_a_gemm`` (DeepSeek-V2/V3's q/kv-a projection for
# 1-16 tokens, and Nemotron-H's) turns ``backend="auto"`` into ``_AUTO_BACKEND``, bound at
# import: the CuTe DSL kernel where ``is_sm120_supported()`` (major 12, CUDA >= 12.8), else the
# JIT CUDA C++ kernel.  Both are SM90+ kernels of the same GEMM (cp.async, mbarrier and
# mma.sync; the JIT one "for SM90+ (Hopper) GPUs", the CuTe DSL one "sm90+"), both run on
# SM120: the major picks which, a decision.  The CuTe DSL one compiles only for the
# architectures CuTe DSL targets (up to 12.1), so on a newer SM12x SGLang's major rule would
# pick a kernel with no build; the registry asks the rule of the tier and keeps the CuTe DSL
# kernel only where it builds, else the JIT one.
FUSED_A = "fused_a_gemm"  # the kernel catalog's name for this decision
FUSED_A_CUTEDSL, FUSED_A_JIT = "cutedsl", "jit"


@dataclass(frozen=True)
class FusedAGemm:
    backend: str  # "cutedsl" or "jit" (SGLang's FusedAGemmBackend values)
    reason: str


def fused_a_gemm_auto(res: Resolution, cuda: Cuda = None) -> FusedAGemm:
    """The fused QKV-A GEMM's ``auto`` backend on this device."""
    where = tier_where(res)
    if not tier_fact(res, "is_sm120", cuda):
        return FusedAGemm(FUSED_A_JIT, f"{where}: not SM120 (major 12, CUDA >= 12.8): the JIT kernel")
    kept, why = runs_here(res, FUSED_A, FUSED_A_CUTEDSL, cuda, "SM120 takes the CuTe DSL kernel")
    if not kept:
        return FusedAGemm(FUSED_A_JIT, f"{where}: {why}: the JIT kernel")
    return FusedAGemm(FUSED_A_CUTEDSL, f"{where}: {why}")


# --- DeepSeek's shared-expert fusion under Hopper NVFP4 + Marlin --------------------------------
#
# ``DeepseekV2ForCausalLM.shared_experts_fusion_disable_reason`` (once per runner, before the
# layers are built) keeps the shared expert out of the routed experts' kernel for a
# ``modelopt_fp4`` checkpoint on the Marlin MoE runner where ``is_sm90_supported()``:
# "fusion off by default until the shared-expert fused load path is validated".  Marlin's
# kernels run on every GPU from SM80 and the fused and unfused paths both run there: the
# architecture names where the fused load path was not validated, a decision.  The registry
# asks the rule of the tier (a rule that only turns the fusion off picks no kernel).
@dataclass(frozen=True)
class SharedExpertsHold:
    hold: bool  # NVFP4 + Marlin keeps the shared expert unfused by default
    reason: str


def shared_experts_hopper_marlin_hold(res: Resolution, cuda: Cuda = None) -> SharedExpertsHold:
    """Whether an NVFP4 checkpoint on the Marlin MoE runner keeps its shared expert unfused."""
    where = tier_where(res)
    if tier_fact(res, "is_sm90", cuda):
        return SharedExpertsHold(True, f"{where}: Hopper (major 9, CUDA >= 12.3): the shared-expert fused load "
                                       "path under NVFP4 + Marlin is not validated there: unfused by default")
    return SharedExpertsHold(False, f"{where}: not Hopper: SGLang's other fusion conditions decide")


# --- DeepSeek's shared expert: the fused NVFP4 GEMM + SwiGLU + NVFP4 quant -----------------------
#
# ``DeepseekV2MoE.__init__`` (once per MoE layer) lets a W4A4 NVFP4 shared expert run its
# gate/up GEMM, SwiGLU and the down projection's input quant as one kernel
# (``kernels/ops/gemm/nvfp4_gemm_swiglu_nvfp4_quant.py``) where ``get_platform().is_sm100``
# (major 10, CUDA >= 12.8), with SGLang's LoRA, quantization, FP4 GEMM backend, shape and
# CUDA-graph conditions; elsewhere the NVFP4 GEMM, SwiGLU and quant run apart.  The fused kernel
# is CuTe DSL with tcgen05 block-scaled MMA, which CuTe DSL builds for 10.0, 10.3, 10.7 and
# 11.0: the major picks where the fusion is used, not where it builds (11.0 builds it and is
# left out), a decision.  The registry asks the rule of the tier and keeps the fusion only
# where the catalog builds the kernel for the device (not on a 10.x the table does not list).
NVFP4_SWIGLU = "nvfp4_swiglu_fusion"  # the kernel catalog's name for this decision
FUSED = "fused"


@dataclass(frozen=True)
class SwigluFusion:
    fused: bool  # the shared expert may take the fused NVFP4 GEMM + SwiGLU + quant kernel
    reason: str


def nvfp4_swiglu_fusion(res: Resolution, cuda: Cuda = None) -> SwigluFusion:
    """Whether a W4A4 NVFP4 shared expert may take SGLang's fused GEMM + SwiGLU + quant kernel."""
    where = tier_where(res)
    if not tier_fact(res, "is_sm100", cuda):
        return SwigluFusion(False, f"{where}: not SM100 (major 10, CUDA >= 12.8): GEMM, SwiGLU and quant apart")
    kept, why = runs_here(res, NVFP4_SWIGLU, FUSED, cuda, "SM100 fuses the NVFP4 GEMM, SwiGLU and quant")
    return SwigluFusion(kept, f"{where}: {why}" + ("" if kept else ": GEMM, SwiGLU and quant apart"))


# --- DeepSeek-V4.1's index logits dtype ---------------------------------------------------------
#
# ``kernels/ops/attention/dsv4/index_logits.index_logits_dtype`` (cached per process): bf16
# index logits "on SM100, where the reference kernels score in bf16; fp32 elsewhere"
# (``_is_sm100()``: a CUDA torch and the device's major 10), unless
# SGLANG_OPT_DSV41_BF16_INDEX_LOGITS says otherwise.  DeepGEMM's MQA-logits kernels take
# either dtype on every architecture they build for (deep_gemm/_C.so: ``logits_dtype ==
# torch::kFloat32 or logits_dtype == torch::kBFloat16``, no architecture in that check; only
# bf16 head weights are SM100's: ``index_weights_dtype``, a gate), so the major picks the
# numerics the reference uses, not a build: a decision.  The registry asks the rule of the
# tier (a dtype, no kernel to filter).
@dataclass(frozen=True)
class IndexLogits:
    bf16: bool  # the V4.1 index layers score in bf16 (else fp32)
    reason: str


def dsv41_bf16_index_logits(res: Resolution, cuda: Cuda = None) -> IndexLogits:
    """Whether DeepSeek-V4.1's index logits are bf16 on this device (the environment apart)."""
    where = tier_where(res)
    if res.resolved.major == 10:
        return IndexLogits(True, f"{where}: SM100, where the reference kernels score in bf16: bf16 logits")
    return IndexLogits(False, f"{where}: not SM100: fp32 logits")


# --- DeepSeek-V4.1's indexer: DeepGEMM's MQA-logits kernels or torch ----------------------
#
# ``layers/attention/dsv4/v41_indexer.is_sm100_or_newer`` (cached per process): "DeepGEMM's
# fp8_fp4 mqa-logits kernels need SM100+; Hopper and non-CUDA devices take the torch
# indexer" (``major >= 10``).  One answer picks, for every V4.1 index layer, DeepGEMM or torch
# for decode (``make_full_topk_indexer``'s ``use_deep_gemm_decode``), for prefill (with the
# dense FP4 indexer present), the candidate indexer's sparse table and the fused index
# store that feeds it: two runnable implementations, a decision.  ``major >= 10`` also
# takes every newer family, where DeepGEMM has no build (deep_gemm/_C.so: arch_major 9, 10
# and 12 only, JIT-compiled for the catalog's ``deep_gemm`` targets; its FP4 MQA logits on
# arch 10 and 12).  The registry asks the rule of the tier and keeps DeepGEMM only where the
# catalog runs DeepGEMM on the device; elsewhere the torch indexer, as SGLang uses on Hopper.
@dataclass(frozen=True)
class IndexerPath:
    deep_gemm: bool  # DeepGEMM's MQA logits (else the torch indexer)
    reason: str


def dsv41_indexer_deep_gemm(res: Resolution, cuda: Cuda = None) -> IndexerPath:
    """Whether DeepSeek-V4.1's index layers score with DeepGEMM on this device."""
    where = tier_where(res)
    if res.resolved.major < 10:
        return IndexerPath(False, f"{where}: below SM100 SGLang's V4.1 indexer scores with torch")
    kept, why = runs_here(res, "deep_gemm", "jit", cuda, f"{where}: SM100 and newer take DeepGEMM's MQA logits")
    return IndexerPath(kept, why if kept else f"{why}: the torch indexer")
