"""MoE runners, FP8 block / FP4 GEMM backends and DeepGEMM: the choice for ``auto`` and
the check of an explicit one.

SGLang 0.5.23 decides these in several places, each from the device's major or an
``is_sm*`` probe (``arg_groups/overrides.py`` ``_moe_runner_backend_quant_constraints``,
the model overrides, the quantization methods' ``create_moe_runner``,
``fp8_utils.initialize_fp8_gemm_config`` / ``_dispatch_auto_backend``,
``fp4_utils.initialize_fp4_gemm_config``, ``deep_gemm_wrapper/configurer.py``).
``upstream_*`` below is that rule, written as data over a capability, the one these
functions evaluate on the tier.  The registry keeps upstream's answer wherever the kernel
catalog (``kernels.py``) has a build of its kernels for the device itself
(``Resolution.identities``), and otherwise takes the first choice of the kind's
preference list that has one (docs/differences.md D12-D15).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .. import catalog
from ..capability import Capability
from ..registry import Resolution
from .platform import tier_fact, tier_where

# The experts' quantization as the MoE runner sees it.  ``fp8_mxfp4``: an FP8 checkpoint
# whose routed experts are MXFP4 (``ModelConfig.is_fp4_experts``: DeepSeek-V4, Bailing V3,
# MiMo-V2 mixed checkpoints), served by ``Fp8Config.get_quant_method``'s own MXFP4 wrappers,
# not by the mxfp4 kind's ``Mxfp4MoEMethod``.
QUANT_KINDS = ("unquantized", "fp8_block", "mxfp8", "nvfp4", "mxfp4", "fp8_mxfp4")
MOE, FP8_GEMM, FP4_GEMM, DEEP_GEMM = "moe_runner", "fp8_gemm", "fp4_gemm", "deep_gemm"
BF16_GEMM = "bf16_gemm"  # --bf16-gemm-backend: SGLang's CuTe DSL BF16 GEMM, or cuBLAS through torch

# What runs instead, per kind, when upstream's choice has no build for the device: the
# portable and most tested first (the kernels the catalog builds for the widest range).
MOE_FALLBACKS = {
    "unquantized": ("triton",),
    "fp8_block": ("triton",),
    "mxfp8": ("flashinfer_trtllm", "cutlass", "deep_gemm"),  # SGLang's MXFP8 runner list
    "nvfp4": ("flashinfer_cutlass", "marlin"),
    "mxfp4": ("flashinfer_mxfp4", "triton_kernel", "triton"),
    "fp8_mxfp4": ("flashinfer_mxfp4", "marlin"),  # marlin: MiMo-V2's own pick on SM90 for these experts
}
# The models whose override picks flashinfer_mxfp4 for FP8 checkpoints with MXFP4 experts on
# majors 9, 10 and 12 (model_overrides/deepseek_v4.py, bailing_moe_v3.py: is_sm90 / is_sm100 /
# is_sm120), and MiMo-V2's (model_overrides/mimo_v2.py: flashinfer_mxfp4 on is_sm100, marlin on is_sm90).
FP4_EXPERTS_OVERRIDES = ("DeepseekV4ForCausalLM", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration")
MIMO_V2 = ("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM")
FP8_GEMM_FALLBACKS = ("cutlass", "triton")
FP4_GEMM_FALLBACKS = ("flashinfer_cutlass", "marlin")

Cuda = Optional[Tuple[int, int]]


@dataclass(frozen=True)
class Choice:
    """A decision with upstream's answer beside it."""

    choice: Optional[str]  # None: nothing in the catalog runs here
    upstream: str
    reason: str
    alternatives: Tuple[str, ...] = ()
    judged: bool = True  # False: SGLang's own choice, not checked (FP8 below SM89: SGLang's own fallbacks)

    @property
    def changed(self) -> bool:
        return self.choice != self.upstream


@dataclass(frozen=True)
class Validity:
    valid: Optional[bool]  # None: not judged (unknown to the catalog, or no kernel for this kind)
    reason: str
    alternatives: Tuple[str, ...] = ()


def _kind(quant: str) -> str:
    if quant not in QUANT_KINDS:
        raise ValueError(f"invalid MoE quantization kind {quant!r}; accepted: {', '.join(QUANT_KINDS)}")
    return quant


# --- upstream's rules, on a capability (SGLang 0.5.23, CUDA, no all-to-all backend) ---


def upstream_moe_runner(cap: Capability, quant: str, model_arch: str = "", explicit_quantization: bool = False) -> str:
    """The MoE runner SGLang 0.5.23 ends up with for ``--moe-runner-backend auto``.

    Argument resolution (overrides.py's MoE runner pass, the model overrides) and, where
    that leaves ``auto``, the quantization method's ``create_moe_runner`` at load time.
    """
    quant = _kind(quant)
    if quant == "mxfp8":
        return "flashinfer_trtllm"  # whatever the GPU (overrides.py: mxfp8_default)
    if quant == "nvfp4":
        if cap.major in (11, 12):
            return "flashinfer_cutlass"  # the pass: is_sm120 or is_sm110
        if (8, 0) <= cap.as_tuple() < (10, 0):
            return "marlin"  # ModelOptNvFp4FusedMoEMethod.create_moe_runner
        return "flashinfer_trtllm"  # ">= 10" (sgl-project/sglang #39807)
    if quant == "mxfp4":
        if cap.major in (10, 12) and not explicit_quantization:
            return "flashinfer_mxfp4"  # model_overrides/gpt_oss.py: is_sm100 / is_sm120
        return "triton_kernel"  # gpt_oss.py: ep_size 1, triton_kernels available, no --quantization
    if quant == "unquantized" and model_arch == "GptOssForCausalLM" and not explicit_quantization:
        return "triton_kernel"  # gpt_oss.py: BF16 GPT-OSS too (ep_size 1, triton_kernels available)
    if quant == "fp8_mxfp4":
        if model_arch in FP4_EXPERTS_OVERRIDES and cap.major in (9, 10, 12):
            return "flashinfer_mxfp4"
        if model_arch in MIMO_V2 and cap.major in (9, 10):
            return "flashinfer_mxfp4" if cap.major == 10 else "marlin"
        return "triton"  # Fp8MoEMethod.create_moe_runner's auto (without DeepEP)
    if quant == "fp8_block" and model_arch == "DeepseekV3ForCausalLM" and cap.major == 10:
        return "flashinfer_trtllm"  # _deepseek_moe_quant_resolution on is_sm100
    return "triton"  # Fp8MoEMethod / unquantized auto without DeepEP


def upstream_deep_gemm(cap: Capability) -> bool:
    """``ENABLE_JIT_DEEPGEMM`` (configurer.py) for a device with DeepGEMM installed, its SM120
    APIs present and ``SGLANG_ENABLE_JIT_DEEPGEMM`` on: every SM >= 90."""
    return cap.sm >= 90


def upstream_fp8_gemm(cap: Capability, deep_gemm_on: bool, flashinfer: bool = True) -> str:
    """The FP8 block GEMM ``--fp8-gemm-backend auto`` runs (initialize_fp8_gemm_config, then
    _dispatch_auto_backend)."""
    if cap.major == 12:
        return "cutlass"
    if cap.major == 11:
        return "triton"
    if deep_gemm_on:
        return "deep_gemm"
    if cap.major == 10 and flashinfer:  # is_blackwell (majors 10-12; 11 and 12 handled above)
        return "flashinfer_trtllm"
    return "triton"


def upstream_fp4_gemm(cap: Capability) -> str:
    """``--fp4-gemm-backend auto`` (fp4_utils.initialize_fp4_gemm_config)."""
    if cap.major == 10:
        return "flashinfer_cutedsl"
    if (8, 0) <= cap.as_tuple() < (10, 0):
        return "marlin"
    return "flashinfer_cutlass"


# --- the registry's decisions ---


def _runs(decision: str, choice: str, res: Resolution, cuda: Cuda, kind: Optional[str] = None):
    return catalog.choice_runs(decision, choice, res.identities, cuda, kind)


def _pick(decision: str, upstream: str, prefs: Tuple[str, ...], res: Resolution, cuda: Cuda,
          kind: Optional[str], what: str) -> Choice:
    where = tier_where(res)
    verdict = _runs(decision, upstream, res, cuda, kind)
    if verdict is None or verdict.runs:
        why = verdict.reason if verdict is not None else "not in the kernel catalog"
        return Choice(upstream, upstream, f"{where}: SGLang's rule for the tier picks {what} {upstream} ({why})")
    for alt in prefs:
        if alt == upstream:
            continue
        alt_verdict = _runs(decision, alt, res, cuda, kind)
        if alt_verdict is not None and alt_verdict.runs:
            return Choice(alt, upstream, f"{where}: SGLang's rule for the tier picks {what} {upstream}, which cannot "
                                         f"run on {res.requested} ({verdict.reason}); {alt} runs ({alt_verdict.reason})")
    return Choice(None, upstream, f"{where}: SGLang's rule for the tier picks {what} {upstream}, which cannot run "
                                  f"on {res.requested} ({verdict.reason}), and none of {', '.join(prefs)} has a build "
                                  "for it")


FP8_NATIVE = Capability(8, 9)  # below it SGLang serves FP8 weights through its own fallbacks (Marlin W8A16)


def _below_fp8(res: Resolution) -> bool:
    return any(cap < FP8_NATIVE for cap in res.identities)


def moe_runner(res: Resolution, quant: str, cuda: Cuda = (13, 0), model_arch: str = "",
               explicit_quantization: bool = False) -> Choice:
    """The MoE runner for ``--moe-runner-backend auto`` and experts of kind ``quant``."""
    kind = _kind(quant)
    upstream = upstream_moe_runner(res.resolved, kind, model_arch, explicit_quantization)
    if kind == "fp8_block" and _below_fp8(res):
        return Choice(upstream, upstream, f"not judged on {res.requested}: below SM89 SGLang serves FP8 weights "
                                          f"through its own fallbacks", judged=False)
    if kind == "fp8_mxfp4" and upstream == "triton":
        return Choice(upstream, upstream, f"not judged: no override picks a runner for these MXFP4 experts of "
                                          f"{model_arch or 'this model'} on {res.requested} (DeepSeek-V4 and "
                                          f"Bailing V3 take flashinfer_mxfp4 on majors 9, 10 and 12, MiMo-V2 on "
                                          f"10, marlin on 9), and SGLang's Fp8MoEMethod runs triton for auto, "
                                          f"which reads them only dequantized to FP8 (SGLANG_DSV4_FP4_DEQUANT)",
                      judged=False)
    return _pick(MOE, upstream, MOE_FALLBACKS[kind], res, cuda, kind, f"{kind} MoE runner")


def check_moe_runner(res: Resolution, name: str, quant: str, cuda: Cuda = (13, 0)) -> Validity:
    """Whether an explicit ``--moe-runner-backend`` has a kernel for these experts here."""
    kind = _kind(quant)
    if name in ("auto",) or not catalog.kernels_of(MOE, name):
        return Validity(None, f"{name!r} has no entry in the kernel catalog; not checked")
    if kind == "fp8_block" and _below_fp8(res):
        return Validity(None, f"not checked on {res.requested}: below SM89 SGLang serves FP8 weights through its "
                              f"own fallbacks")
    if not any(use.serves(kind, None) for use in catalog.kernels_of(MOE, name)):
        return Validity(None, f"{name} has no {kind} kernel of its own (SGLang reroutes those experts); not checked")
    verdict = _runs(MOE, name, res, cuda, kind)
    if verdict.runs:
        return Validity(True, f"{name} runs {kind} experts on {res.requested}: {verdict.reason}")
    alternatives = catalog.runnable(MOE, catalog.known_choices(MOE), res.identities, cuda, kind)
    return Validity(False, f"{name} cannot run {kind} MoE experts on {res.requested} (tier {res.resolved}, "
                           f"{res.match}): {verdict.reason}", alternatives)


def deep_gemm(res: Resolution, cuda: Cuda = (13, 0)) -> Choice:
    """DeepGEMM JIT enablement: upstream's rule on the tier, and only where DeepGEMM has a
    build for the device (``on``/``off``)."""
    where = tier_where(res)
    upstream = "on" if upstream_deep_gemm(res.resolved) else "off"
    if upstream == "off":
        return Choice("off", "off", f"{where}: SGLang enables DeepGEMM from SM90")
    verdict = _runs(DEEP_GEMM, "jit", res, cuda)
    if verdict.runs:
        return Choice("on", "on", f"{where}: DeepGEMM on ({verdict.reason})")
    return Choice("off", "on", f"{where}: SGLang's SM >= 90 rule enables DeepGEMM, but {verdict.reason}")


def fp8_gemm(res: Resolution, cuda: Cuda = (13, 0), deep_gemm_on: Optional[bool] = None,
             flashinfer: bool = True) -> Choice:
    """The FP8 block GEMM for ``--fp8-gemm-backend auto``."""
    if deep_gemm_on is None:
        deep_gemm_on = deep_gemm(res, cuda).choice == "on"
    upstream = upstream_fp8_gemm(res.resolved, deep_gemm_on, flashinfer)
    if _below_fp8(res):
        return Choice(upstream, upstream, f"not judged on {res.requested}: below SM89 SGLang serves FP8 weights "
                                          f"through its own fallbacks", judged=False)
    return _pick(FP8_GEMM, upstream, FP8_GEMM_FALLBACKS, res, cuda, None, "FP8 block GEMM")


def fp4_gemm(res: Resolution, cuda: Cuda = (13, 0)) -> Choice:
    """The NVFP4 dense GEMM for ``--fp4-gemm-backend auto``."""
    return _pick(FP4_GEMM, upstream_fp4_gemm(res.resolved), FP4_GEMM_FALLBACKS, res, cuda, None, "FP4 GEMM")


def upstream_bf16_gemm(res: Resolution, cuda: Cuda = (13, 0)) -> str:
    """``--bf16-gemm-backend auto`` (unquant.initialize_bf16_gemm_config): ``cutedsl`` where
    ``get_platform().is_sm100`` (major 10, CUDA >= 12.8), else it stays ``auto`` (cuBLAS
    through torch; under deterministic inference SGLang's SM100 arm names it ``torch``)."""
    return "cutedsl" if tier_fact(res, "is_sm100", cuda) else "auto"


def bf16_gemm(res: Resolution, cuda: Cuda = (13, 0)) -> Choice:
    """The BF16 dense GEMM for ``--bf16-gemm-backend auto``: SGLang's CuTe DSL kernel where
    the tier's rule picks it and it has a build for the device, else ``auto`` (torch)."""
    where = tier_where(res)
    upstream = upstream_bf16_gemm(res, cuda)
    if upstream == "auto":
        return Choice("auto", upstream, f"{where}: not SM100, SGLang's BF16 GEMM stays auto (cuBLAS through torch)")
    verdict = _runs(BF16_GEMM, upstream, res, cuda)
    if verdict.runs:
        return Choice(upstream, upstream, f"{where}: SGLang's BF16 GEMM {upstream} ({verdict.reason})")
    return Choice("auto", upstream, f"{where}: SGLang's BF16 GEMM {upstream} cannot run on {res.requested} "
                                    f"({verdict.reason}); auto (cuBLAS through torch) runs everywhere")


def check_gemm(res: Resolution, decision: str, name: str, cuda: Cuda = (13, 0)) -> Validity:
    """Whether an explicit ``--fp8-gemm-backend`` / ``--fp4-gemm-backend`` runs here."""
    if decision not in (FP8_GEMM, FP4_GEMM):
        raise ValueError(f"invalid GEMM decision {decision!r}; accepted: {FP8_GEMM}, {FP4_GEMM}")
    verdict = _runs(decision, name, res, cuda)
    if verdict is None:
        return Validity(None, f"{name!r} has no entry in the kernel catalog; not checked")
    if verdict.runs:
        return Validity(True, f"{name} runs on {res.requested}: {verdict.reason}")
    alternatives = catalog.runnable(decision, catalog.known_choices(decision), res.identities, cuda)
    return Validity(False, f"{name} cannot run on {res.requested} (tier {res.resolved}, {res.match}): "
                           f"{verdict.reason}", alternatives)
