"""Tuned GEMM / GEMV paths: shape windows and kernel paths SGLang keys to one architecture.

Several of SGLang's GEMM helpers take a path measured on one GPU (a split-K table tuned on
SM 10.7, a GEMV window tuned on the H200 and another on the RTX PRO 6000, a router GEMV
swept on the GB300, a Nemotron-H prefill schedule measured on SM 12.0, DeepGEMM's
combine-signal down GEMM off Blackwell) by reading the device's identity inline, per call.
Which of those paths applies is a decision of the machine, not of the call: the registry
answers it once per machine (the glue caches it), and each call site reads that answer.

The rule for every path here: the tier's rule as SGLang writes it (so on the registry's
exact tiers the answer is SGLang's), and on a GPU outside the table a path whose kernel
the catalog says has no build for the device's own capability is not taken (the tuning of
a neighbour's chip holds only where its kernel runs).  A path with no kernel of its own
(a window or schedule over kernels every candidate runs) follows the tier alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import catalog
from ..capability import Capability
from ..registry import Resolution
from .platform import runs_here, tier_fact, tier_where

GEMM_PATH = "gemm_path"  # the kernel catalog's decision for these paths (arch/kernels.py CHOICES)
Cuda = tuple

# sglang 0.5.23 kernels/ops/gemm/cutedsl_bf16_gemm.py: _K3_FRONT_WARP_SPLITK, read where
# get_device_sm() == 107 (use_cutedsl_bf16_gemm:1391, _tgv_bf16_gemm_out_run:1466).
K3_FRONT_SPLITK_SM = 107
# sglang 0.5.23 srt/utils/common.py is_sm120: capability == (12, 0) exactly
# (nemotron_h.NemotronHMoE._forward_core:374).
NEMOTRON_PREFILL_OVERLAP = Capability(12, 0)
# sglang 0.5.23 kernels/ops/gemm/hopper_bf16_gemv.py _is_sm12x: get_jit_cuda_arch().major >= 12
HOPPER_GEMV_SM12X_MAJOR = 12
# sglang 0.5.23 kernels/ops/gemm/muse_spark_router_gemv_cutedsl.py _is_sm100_family: major == 10
ROUTER_GEMV_MAJOR = 10


@dataclass(frozen=True)
class Path:
    """Whether one tuned path is taken on this machine, and why."""

    on: bool
    reason: str


@dataclass(frozen=True)
class GemmPaths:
    """Every tuned GEMM / GEMV path of this module, decided once per machine."""

    k3_front_splitk: Path
    hopper_gemv_sm12x: Path
    router_gemv: Path
    nemotron_prefill_overlap: Path
    sbo_deep_gemm_down_overlap: Path
    qwen4_decode_fusion: Path
    marlin_lora_b200_decode: Path
    lora_cutedsl_wide_tiles: Path
    muse_spark_gemm_ag: Path
    muse_spark_finalize_ar: Path

    def to_dict(self) -> dict:
        return {name: {"on": path.on, "reason": path.reason} for name, path in vars(self).items()}


def _with_builds(res: Resolution, choice: str, cuda: Cuda, tuned: str) -> Path:
    """The tier's rule says ``choice``'s path: taken where its kernels build for the device."""
    kept, why = runs_here(res, GEMM_PATH, choice, cuda, tuned)
    return Path(kept, f"{tier_where(res)}: {why}" + ("" if kept else ": not taken"))


def k3_front_splitk(res: Resolution, cuda: Cuda = (13, 0)) -> Path:
    """SGLang's K3 front-projection split-K table (``_K3_FRONT_WARP_SPLITK``: TGV for the
    listed batch sizes of the 6016x7168 projection, FlashInfer's warp split-K kernel for its
    FP32 output), tuned on SM 10.7: taken where the tier is SM 10.7 and both kernels build."""
    tier = res.resolved
    if tier.sm != K3_FRONT_SPLITK_SM:
        return Path(False, f"{tier_where(res)}: not SM 10.7, which the K3 split-K table was tuned on")
    return _with_builds(res, "k3_front_splitk", cuda, "the K3 split-K table tuned on SM 10.7")


def hopper_gemv_sm12x(res: Resolution) -> Path:
    """The window and unroll of SGLang's BF16 GEMV (``--bf16-gemm-backend gemv``): SM12x's
    (kUnroll 1, K a multiple of 128, measured on the RTX PRO 6000) where the tier's major is
    12 or more, else the H200's (K a multiple of 512).  One kernel either way, JIT-compiled
    for the device; SGLang's backend check admits it on majors 9 and 12 only."""
    tier = res.resolved
    if tier.major >= HOPPER_GEMV_SM12X_MAJOR:
        return Path(True, f"{tier_where(res)}: major {tier.major}, the SM12x GEMV window (kUnroll 1)")
    return Path(False, f"{tier_where(res)}: major {tier.major}, the H200 GEMV window")


def router_gemv(res: Resolution, cuda: Cuda = (13, 0)) -> Path:
    """Muse Spark's CuTe DSL FP32 router GEMV (swept on the GB300), which SGLang takes for
    decode-sized router logits on the SM100 family: where the tier's major is 10 and CuTe
    DSL compiles the kernel for the device."""
    tier = res.resolved
    if tier.major != ROUTER_GEMV_MAJOR:
        return Path(False, f"{tier_where(res)}: major {tier.major}, not the SM100 family: cuBLAS")
    return _with_builds(res, "router_gemv", cuda, "the CuTe DSL router GEMV of the SM100 family")


def nemotron_prefill_overlap(res: Resolution) -> Path:
    """Nemotron-H's prefill overlap of shared and routed experts for one shape (1024 x 4096,
    512 experts, inside a breakable CUDA graph), which SGLang takes on SM 12.0 exactly
    (``is_sm120``): where the tier is 12.0.  It runs the kernels the normal path runs, on
    two streams, so no build decides it."""
    tier = res.resolved
    if tier == NEMOTRON_PREFILL_OVERLAP:
        return Path(True, f"{tier_where(res)}: SM 12.0, where Nemotron-H's prefill overlap was measured")
    return Path(False, f"{tier_where(res)}: not SM 12.0: Nemotron-H's shared/routed overlap")


def sbo_deep_gemm_down_overlap(res: Resolution, cuda: Cuda = (13, 0)) -> Path:
    """Single-batch overlap of the combine with DeepGEMM's down GEMM (the masked GEMM that
    signals the combine per 64-row block), which SGLang allows off Blackwell only
    (``not is_blackwell()``): the tier's rule; outside the table, only where DeepGEMM builds
    for the device (on the table's tiers SGLang's MoE guard keeps DeepGEMM off where it has
    no build, so the rule is SGLang's there)."""
    blackwell = tier_fact(res, "is_blackwell", cuda)
    if blackwell:
        return Path(False, f"{tier_where(res)}: Blackwell, whose DeepGEMM down GEMM takes no combine signal")
    if res.match == "exact":
        return Path(True, f"{tier_where(res)}: not Blackwell, DeepGEMM's down GEMM signals the combine")
    verdict = catalog.choice_runs("deep_gemm", "jit", res.identities, cuda)
    if verdict.runs:
        return Path(True, f"{tier_where(res)}: not Blackwell, DeepGEMM's down GEMM signals the combine "
                          f"({verdict.reason})")
    return Path(False, f"{tier_where(res)}: not Blackwell, but on {res.requested} {verdict.reason}: no overlap")


# Paths SGLang keys to a torch read inline (``torch.cuda.get_device_capability()``), in
# larger functions: the capability the check compares is answered for the call.

# sglang 0.5.23 srt/layers/moe/qwen4_decode.py prepare_qwen4_decode_comm:60: major != 10 -> None
QWEN4_DECODE_MAJOR = 10
# sglang 0.5.23 srt/lora/marlin_lora_temp/moe_runner.py:98: "the B200 direct-decode factorization", == (10, 0)
MARLIN_LORA_B200 = Capability(10, 0)
# sglang 0.5.23 srt/lora/moe/base_gemm_provider/cutedsl_bf16.py:302: "Hopper prefill uses wide tiles", < (10, 0)
LORA_WIDE_TILES_BELOW = Capability(10, 0)
# sglang 0.5.23 srt/models/muse_spark.py:550, 814: gemm_ag and its workspace on == (10, 3) (GB300)
MUSE_SPARK_GEMM_AG = Capability(10, 3)
# sglang 0.5.23 srt/models/muse_spark.py:1122: finalize AR fusion "requires Blackwell", major != 10 -> off
MUSE_SPARK_FINALIZE_AR_MAJOR = 10


def qwen4_decode_fusion(res: Resolution, cuda: Cuda = (13, 0)) -> Path:
    """Qwen's TP4 decode MoE with the finalize, shared-expert gate and all-reduce fused
    (``prepare_qwen4_decode_comm``), which SGLang prepares on major 10 only: where the
    tier's major is 10 and the fused kernel builds (SGLang's producer check, FlashInfer's
    TRTLLM MoE with deferred finalize, stays beside it)."""
    tier = res.resolved
    if tier.major != QWEN4_DECODE_MAJOR:
        return Path(False, f"{tier_where(res)}: major {tier.major}, not 10: Qwen's decode MoE unfused")
    return _with_builds(res, "qwen4_decode_fusion", cuda, "Qwen's fused decode finalize + all-reduce (major 10)")


def marlin_lora_b200_decode(res: Resolution) -> Path:
    """The Marlin LoRA MoE runner's direct-decode factorization for two to four adapter
    slots, which SGLang selects on the B200 (10.0) only: where the tier is 10.0.  The
    same Marlin kernels run either factorization."""
    if res.resolved == MARLIN_LORA_B200:
        return Path(True, f"{tier_where(res)}: the B200 direct-decode factorization")
    return Path(False, f"{tier_where(res)}: not 10.0 (B200): the default factorization")


def lora_cutedsl_wide_tiles(res: Resolution) -> Path:
    """The CuTe DSL BF16 LoRA MoE provider's tile set: below 10.0 (Hopper) SGLang drops the
    narrow tile, so prefill takes wide tiles: the tier's rule (one kernel either way)."""
    tier = res.resolved
    if tier < LORA_WIDE_TILES_BELOW:
        return Path(True, f"{tier_where(res)}: below 10.0, wide tiles only (the narrow tile dropped)")
    return Path(False, f"{tier_where(res)}: 10.0 or newer, narrow and wide tiles")


def muse_spark_gemm_ag(res: Resolution, cuda: Cuda = (13, 0)) -> Path:
    """Muse Spark's fused pre-expert GEMM + all-gather (TP 4 / 8) and its projection
    workspace, which SGLang takes on 10.3 (GB300) only: where the tier is 10.3 and the
    kernel builds for the device (its own support check still follows)."""
    if res.resolved != MUSE_SPARK_GEMM_AG:
        return Path(False, f"{tier_where(res)}: not 10.3 (GB300): the BF16 GEMM dispatcher")
    return _with_builds(res, "muse_spark_gemm_ag", cuda, "Muse Spark's GEMM + all-gather (10.3)")


def muse_spark_finalize_ar(res: Resolution, cuda: Cuda = (13, 0)) -> Path:
    """Muse Spark's MoE finalize fused with the all-reduce (SGLANG_ENABLE_MUSE_SPARK_FINALIZE_AR),
    which SGLang allows on major 10 only: where the tier's major is 10 and the kernel builds."""
    tier = res.resolved
    if tier.major != MUSE_SPARK_FINALIZE_AR_MAJOR:
        return Path(False, f"{tier_where(res)}: major {tier.major}, not 10: separate finalize and all-reduce")
    return _with_builds(res, "muse_spark_finalize_ar", cuda, "Muse Spark's fused finalize + all-reduce (major 10)")


def gemm_paths(res: Resolution, cuda: Cuda = (13, 0)) -> GemmPaths:
    return GemmPaths(
        k3_front_splitk=k3_front_splitk(res, cuda),
        hopper_gemv_sm12x=hopper_gemv_sm12x(res),
        router_gemv=router_gemv(res, cuda),
        nemotron_prefill_overlap=nemotron_prefill_overlap(res),
        sbo_deep_gemm_down_overlap=sbo_deep_gemm_down_overlap(res, cuda),
        qwen4_decode_fusion=qwen4_decode_fusion(res, cuda),
        marlin_lora_b200_decode=marlin_lora_b200_decode(res),
        lora_cutedsl_wide_tiles=lora_cutedsl_wide_tiles(res),
        muse_spark_gemm_ag=muse_spark_gemm_ag(res, cuda),
        muse_spark_finalize_ar=muse_spark_finalize_ar(res, cuda),
    )
