"""Quantization decisions taken at weight loading that follow a GEMM decision.

Dense block-FP8 weights and DeepGEMM's UE8M0 scales
---------------------------------------------------
SGLang 0.5.23's ``should_deepgemm_weight_requant_ue8m0`` (``srt/model_loader/utils.py:265``)
decides, per weight at load time, whether block-FP8 scales are requantized into DeepGEMM's
UE8M0 layout.  Its docstring says why the answer must follow the GEMM that will read the
weight: "scales would be converted to UE8M0 but the GEMM would fall back to triton which
expects float32 scales, causing wrong results".  Its SM12x rule (``:282-284``): "SM120
routes dense block-FP8 GEMMs to CUTLASS/Triton (fp32 scales); only the grouped MoE GEMM
consumes DeepGEMM layouts there", written ``get_device_sm() == 120 and not grouped_moe``.
The dense GEMM it refers to is ``initialize_fp8_gemm_config``'s ``is_sm120`` arm
(``fp8_utils.py:1212``: ``auto`` becomes ``cutlass`` on every major 12, 12.1 included), and
the configurer turns UE8M0 scales on for both (``deep_gemm_wrapper/configurer.py``:
``get_device_sm() in (120, 121)``, sgl-project/sglang#39482).  On 12.1 callers that ask the
check alone (LongCat-Flash's ``_weight_requant_ue8m0``, ``models/longcat_flash.py:865``)
requantize dense weights for a CUTLASS GEMM that reads FP32 scales (docs/differences.md D26);
``Fp8LinearMethod`` asks only when its runner is DeepGEMM.

The registry answers from its own FP8 block GEMM decision (``policies/moe.fp8_gemm`` for
``auto`` with DeepGEMM on, the only case the check is reached in: its first condition is
``ENABLE_JIT_DEEPGEMM and DEEPGEMM_SCALE_UE8M0``, which the DeepGEMM target leaves on only
where the registry's DeepGEMM is): dense weights take UE8M0 scales where that GEMM is
DeepGEMM, and keep FP32 scales elsewhere; where the registry's DeepGEMM is off the check is
not reached and the device's own SM stands.  Grouped MoE weights, the output
dtype and the shape checks stay SGLang's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .. import catalog
from ..registry import Resolution
from . import moe
from .platform import runs_here, tier_fact, tier_where

# What SGLang's dense check compares ``get_device_sm()`` with: the SM it keeps FP32 scales on.
SM12X_DENSE_SM = 120


@dataclass(frozen=True)
class RequantDecision:
    dense: Optional[bool]  # dense block-FP8 weights take DeepGEMM's UE8M0 scales (None: DeepGEMM is off)
    check_sm: int  # what ``get_device_sm()`` answers at SGLang's dense check
    reason: str


def dense_ue8m0_requant(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> RequantDecision:
    """Whether dense block-FP8 weights are requantized into DeepGEMM's UE8M0 scales here."""
    where = tier_where(res)
    if moe.deep_gemm(res, cuda).choice != "on":
        return RequantDecision(None, res.requested.sm,
                               f"{where}: DeepGEMM is off here, so nothing is requantized for it (SGLang's check "
                               "is not reached; its own SM stands)")
    gemm = moe.fp8_gemm(res, cuda, deep_gemm_on=True)
    if gemm.choice == "deep_gemm":
        return RequantDecision(True, res.requested.sm,
                               f"{where}: the dense block-FP8 GEMM is DeepGEMM, which reads UE8M0 scales")
    return RequantDecision(False, SM12X_DENSE_SM,
                           f"{where}: the dense block-FP8 GEMM is {gemm.choice} ({gemm.reason}), which reads "
                           "FP32 block scales: dense weights keep them (only DeepGEMM's grouped MoE GEMM takes "
                           "UE8M0 scales here)")


# --- load-time rules SGLang writes as one platform fact read inside a larger function ---
#
# Each is a decision SGLang takes from one ``get_platform().<fact>`` (or a probe of its
# module) and nothing else of the device: the registry takes it on the tier (the fact as
# SGLang's rule asks it, of the tier's major: ``platform.tier_fact``), and, where the rule
# picks a kernel, only where the catalog runs that kernel on the device.  ``value`` None:
# the rule is not reached here (what it would enable is off in the registry), so SGLang's
# own probe stands.  Every rule equals SGLang's on the exact tiers
# (test/integration/test_quant_decisions.py).


@dataclass(frozen=True)
class FactDecision:
    fact: str  # the platform fact (or probe) SGLang's rule reads
    value: Optional[bool]  # what it answers for the call; None: SGLang's own probe
    reason: str


def hopper_bf16_weight_cache(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``Fp8LinearMethod.process_weights_after_loading_block_quant`` (``fp8.py:861-881``):
    under ``SGLANG_OPT_HOPPER_BLOCK_FP8_BF16``, block-32 FP8 linears Triton serves (not
    DeepGEMM) keep a BF16 expansion of the weight for large GEMMs ("Hopper group32 FP8
    accumulates each 32-wide block separately"), on ``is_sm90``.  A memory-for-speed trade
    measured on Hopper; cuBLAS BF16 runs everywhere, so the tier's rule decides."""
    on = tier_fact(res, "is_sm90", cuda)
    return FactDecision("is_sm90", on, f"{tier_where(res)}: {'Hopper' if on else 'not Hopper'}: the BF16 weight cache "
                                       f"for block-32 FP8 on Triton is {'kept (opt-in)' if on else 'off'}")


def _deep_gemm_sm100(res: Resolution, cuda: Optional[Tuple[int, int]], what: str) -> FactDecision:
    if moe.deep_gemm(res, cuda).choice != "on":
        return FactDecision("is_sm100", None, f"{tier_where(res)}: DeepGEMM is off here, so {what} is not reached "
                                              "(SGLang's own probe stands)")
    on = tier_fact(res, "is_sm100", cuda)
    return FactDecision("is_sm100", on, f"{tier_where(res)}: DeepGEMM on, {'its SM100 kernels' if on else 'not SM100'}: "
                                        f"{what} {'on' if on else 'off'}")


def deep_gemm_sm100_block32(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``dispatch_w8a8_block_fp8_linear``'s SM100 arm (``fp8_utils.py:723``): block-32 FP8
    linears go to DeepGEMM on request with UE8M0 activation scales ("SM100 DeepGEMM casts the
    weight scales to UE8M0, so it takes only UE8M0 checkpoints, on request"), on
    ``is_sm100``.  The arm needs ``ENABLE_JIT_DEEPGEMM``: where the registry's DeepGEMM is
    off (no build) it is not reached; elsewhere the tier's SM100 rule."""
    return _deep_gemm_sm100(res, cuda, "block-32 FP8 on DeepGEMM's SM100 kernel")


def deep_gemm_sm100_fused_activation(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``DenseSiluAndMulQuant`` (``fp8_activation.py:32``): SiLU-and-mul fused with the FP8
    quantization of ``down_proj``'s input, in the column-major UE8M0 layout DeepGEMM's SM100
    dense GEMM reads, on ``is_sm100`` with TP 1.  It is enabled only for DeepGEMM's dense
    GEMM (``deepgemm_w8a8_block_fp8_linear_with_fallback``): where the registry's DeepGEMM is
    off it is not reached; elsewhere the tier's SM100 rule."""
    return _deep_gemm_sm100(res, cuda, "the fused SiLU-and-mul FP8 quantization for DeepGEMM")


def triton_mxfp4_persistent(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``_swizzle_mxfp4`` (``mxfp4.py:257``): the MXFP4 MoE weights for triton_kernels'
    matmul ask for its persistent kernel with epilogue subtile 1 on ``is_sm100``; other
    Blackwell majors take triton_kernels' own flags.  Triton compiles either for the device,
    so the tier's rule decides."""
    on = tier_fact(res, "is_sm100", cuda)
    return FactDecision("is_sm100", on, f"{tier_where(res)}: triton_kernels' persistent MXFP4 matmul "
                                        f"{'asked for (SM100)' if on else 'not asked for'}")


def marlin_mxfp4_hopper_widths(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``Mxfp4MarlinMoEMethod.create_weights`` (``mxfp4_marlin_moe.py:86``): on ``is_sm90``
    the experts keep their logical intermediate width until Marlin's preparation pads it
    ("early padding to 128 turns a TP8 width of 288 into 384 instead of 320"); elsewhere it
    is padded to 128 at creation.  The same Marlin kernel reads either (its preparation
    pads to its own tile), so the tier's rule decides."""
    on = tier_fact(res, "is_sm90", cuda)
    return FactDecision("is_sm90", on, f"{tier_where(res)}: MXFP4 Marlin experts "
                                       f"{'keep their logical width (Hopper)' if on else 'padded to 128 at creation'}")


NVFP4_NATIVE_PREFILL = "trtllm_mha"  # kv_cache_hook._NVFP4_PREFILL_BACKEND["nvfp4"]


def nvfp4_native_prefill(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``handle_nvfp4_prefill_kv_dequant_dtype`` (``kv_cache_hook.py:57``): with an NVFP4 KV
    cache and no backend named, prefill reads native NVFP4 through ``trtllm_mha`` on
    ``is_sm100``, else an FP8 E4M3 workspace through ``flashinfer``.  The registry keeps the
    native arm on the tier's SM100 rule where the catalog runs ``trtllm_mha`` prefill here."""
    from . import attention

    if not tier_fact(res, "is_sm100", cuda):
        return FactDecision("is_sm100", False, f"{tier_where(res)}: not SM100: NVFP4 prefill through an FP8 E4M3 "
                                               "workspace (flashinfer)")
    check = attention.check_backend(res, NVFP4_NATIVE_PREFILL, "mha", "prefill", cuda)
    if check.valid is False:
        return FactDecision("is_sm100", False, f"{tier_where(res)}: SM100, but {check.reason}: NVFP4 prefill through an "
                                               "FP8 E4M3 workspace (flashinfer)")
    return FactDecision("is_sm100", True, f"{tier_where(res)}: SM100: native NVFP4 prefill ({check.reason})")


SM107 = (10, 7)


def mxfp8_moe_quantizer_sm107(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``_prepare_flashinfer_mxfp8_activations`` (``mxfp4.py:97-100``): on SM107
    (``_is_sm107_supported``, capability 10.7 exactly) non-FP32 MoE activations are
    quantized by FlashInfer's MXFP8 quantizer ("FlashInfer handles SM107 inputs"), elsewhere
    by SGLang's per-token-group kernel.  Both run on every GPU this path serves; the tier's
    rule decides."""
    on = res.resolved.as_tuple() == SM107
    return FactDecision("_is_sm107_supported", on, f"{tier_where(res)}: MoE activations quantized by "
                                                   f"{'FlashInfer (the SM107 rule)' if on else 'SGLang'}")


SM90 = (9, 0)
LORA_FP8_FAST_DIV_FACT = "torch.cuda.get_device_capability() == (9, 0)"


def lora_fp8_whole_row_fast_div(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``_WHOLE_ROW_FAST_DIV`` (``kernels/ops/lora/moe/fp8_quant.py:13``): the LoRA MoE's FP8
    group quantizer divides whole rows with fast math "only on SM90" and rounds them
    (``libdevice.div_rn``) elsewhere, to "match upstream FP8 scale arithmetic" (the module's
    docstring), written ``torch.cuda.get_device_capability() == (9, 0)``.  Both are Triton
    arithmetic compiled for the device, so either runs everywhere: which one is a decision,
    and the tier's rule takes it (an unknown 9.x divides as 9.0 does)."""
    on = res.resolved.as_tuple() == SM90
    return FactDecision(LORA_FP8_FAST_DIV_FACT, on, f"{tier_where(res)}: the LoRA MoE's FP8 quantizer divides whole "
                                                    f"rows {'with fast math (the SM90 rule)' if on else 'rounded'}")


def minimax_fp8_index_hopper(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """``get_minimax_sparse_index_dtype`` (``mem_cache/memory_pool.py:5839``): with an
    ``fp8_e4m3`` KV cache, MiniMax's sparse index K is stored in FP8 on ``is_sm90`` "for the
    fp16-widened Triton decode", in the model dtype elsewhere; the pool's cell-size estimate
    reads the same answer.  The Triton decode that reads it picks its Hopper path from the
    device's ``is_sm90`` (``kernels/ops/attention/minimax_sparse/decode/topk_sparse.py:456``);
    a device's tier has the device's major wherever that major is 9 (every 9.x resolves to
    9.0, no other major does), so the tier's rule and the kernel's path agree."""
    on = tier_fact(res, "is_sm90", cuda)
    return FactDecision("is_sm90", on, f"{tier_where(res)}: MiniMax's sparse index K with an FP8 KV cache stored "
                                       f"{'in FP8 (the Hopper Triton decode)' if on else 'in the model dtype'}")


# --- the NVFP4 KV cache's dequantize ------------------------------------------------------------
#
# ``NVFP4KVQuantizeUtil.dequantize`` (``kvfp4_tensor.py:257``) dequantizes an NVFP4 KV
# cache with FlashInfer's ``nvfp4_kv_dequantize`` on ``is_sm100 or is_sm120``, else with a pure
# PyTorch fallback, asserting ``is_sm90`` first ("NVFP4 KV cache dequantize requires SM100/SM120
# or SM90 fallback GPU").  FlashInfer's kernel builds from SM80 (its check accepts 8.0 8.6 8.9
# 9.0 10.0 10.3 10.7 11.0 12.0 12.1), so on SM90 both run and the facts pick one: a decision.
# The registry asks SGLang's two facts of the tier and keeps them only where FlashInfer's kernel
# builds for the device; elsewhere both are False and SGLang's own ``is_sm90`` assert decides
# whether the fallback may run.
KV_DEQUANT = "nvfp4_kv_dequant"  # the kernel catalog's name for this decision


@dataclass(frozen=True)
class KvDequant:
    sm100: bool  # what ``get_platform().is_sm100`` answers in the dequantize
    sm120: bool  # ``get_platform().is_sm120``
    reason: str

    @property
    def flashinfer(self) -> bool:
        return self.sm100 or self.sm120


def nvfp4_kv_dequant(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> KvDequant:
    """The NVFP4 KV cache dequantize's two facts on this device."""
    sm100, sm120 = tier_fact(res, "is_sm100", cuda), tier_fact(res, "is_sm120", cuda)
    if not (sm100 or sm120):
        return KvDequant(False, False, f"{tier_where(res)}: neither SM100 nor SM120: SGLang's PyTorch fallback "
                                       "(on SM90; elsewhere SGLang's assert)")
    kept, why = runs_here(res, KV_DEQUANT, "flashinfer", cuda, f"{'SM100' if sm100 else 'SM120'} takes FlashInfer's "
                                                                "dequantize")
    if not kept:
        return KvDequant(False, False, f"{tier_where(res)}: {why}: not FlashInfer's")
    return KvDequant(sm100, sm120, f"{tier_where(res)}: {why}")


# --- FlashInfer's FP4 / MXFP8 activation quantize backend ----------------------------------------
#
# ``fp4_utils._flashinfer_fp4_quantize_impl`` (``fp4_utils.py:48``) and
# ``FlashInferMxfp4TrtllmMoEMethod.quantize_routed_input`` (``mxfp4_flashinfer_trtllm_moe.py:369``)
# pass FlashInfer a quantize backend bound at import: ``"cute-dsl" if get_platform().is_sm100 else
# "cuda"``.  Both backends quantize the same format (FlashInfer's CuTe DSL kernels, "SM100+", and
# its CUDA ones); the SM100 fact picks one: a decision.  The registry asks the rule of the tier
# and keeps the CuTe DSL kernels only where CuTe DSL builds them for the device, else the CUDA
# ones where they build; where neither builds, no pick: SGLang's own import-time value stays
# (nothing of FlashInfer's quantize runs here either way, and the registry picks no kernel
# the catalog says cannot run).
QUANTIZE_DECISIONS = {"fp4": "flashinfer_fp4_quantize", "mxfp8": "flashinfer_mxfp8_quantize"}
CUTE_DSL, CUDA = "cute-dsl", "cuda"


@dataclass(frozen=True)
class QuantizeBackend:
    backend: Optional[str]  # FlashInfer's ``backend=`` value: "cute-dsl" or "cuda"; None: SGLang's own stays
    reason: str


def flashinfer_quantize_backend(res: Resolution, which: str,
                                cuda: Optional[Tuple[int, int]] = (13, 0)) -> QuantizeBackend:
    """FlashInfer's ``fp4_quantize`` (``which="fp4"``) or ``mxfp8_quantize`` (``"mxfp8"``)
    backend as SGLang binds it at import, on this device."""
    if which not in QUANTIZE_DECISIONS:
        raise ValueError(f"invalid FlashInfer quantize {which!r}; accepted: {', '.join(QUANTIZE_DECISIONS)}")
    decision = QUANTIZE_DECISIONS[which]
    pick = CUTE_DSL if tier_fact(res, "is_sm100", cuda) else CUDA
    other = CUDA if pick == CUTE_DSL else CUTE_DSL
    rule = f"{tier_where(res)}: {'SM100: CuTe DSL' if pick == CUTE_DSL else 'not SM100: CUDA'}"
    verdict = catalog.choice_runs(decision, pick, res.identities, cuda)
    if verdict is not None and not verdict.runs:
        alternative = catalog.choice_runs(decision, other, res.identities, cuda)
        if pick == CUTE_DSL and alternative is not None and alternative.runs:
            return QuantizeBackend(other, f"{rule}, but on {res.requested} {verdict.reason}: {other} "
                                          f"({alternative.reason})")
        why = f"; {alternative.reason}" if alternative is not None else ""
        return QuantizeBackend(None, f"{rule}; on {res.requested} {verdict.reason}{why}: neither of FlashInfer's "
                                     "quantize kernels builds here, so the registry picks none (SGLang's own "
                                     "import-time value stays)")
    return QuantizeBackend(pick, f"{rule} ({verdict.reason if verdict else pick})")


FACT_RULES = {rule.__name__: rule for rule in (
    hopper_bf16_weight_cache, deep_gemm_sm100_block32, deep_gemm_sm100_fused_activation, triton_mxfp4_persistent,
    marlin_mxfp4_hopper_widths, nvfp4_native_prefill, mxfp8_moe_quantizer_sm107, minimax_fp8_index_hopper,
    lora_fp8_whole_row_fast_div)}


def fact_rule(res: Resolution, rule: str, cuda: Optional[Tuple[int, int]] = (13, 0)) -> FactDecision:
    """The decision of one of ``FACT_RULES`` for this device."""
    if rule not in FACT_RULES:
        raise ValueError(f"invalid quantization rule {rule!r}; accepted: {', '.join(FACT_RULES)}")
    return FACT_RULES[rule](res, cuda)
