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
``get_device_sm() in (120, 121)``, sgl-project/sglang#39482).  On 12.1 the dense weights
are requantized for a CUTLASS GEMM that reads FP32 scales (docs/differences.md D26).

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

from ..registry import Resolution
from . import moe

# What SGLang's dense check compares ``get_device_sm()`` with: the SM it keeps FP32 scales on.
SM12X_DENSE_SM = 120


@dataclass(frozen=True)
class RequantDecision:
    dense: Optional[bool]  # dense block-FP8 weights take DeepGEMM's UE8M0 scales (None: DeepGEMM is off)
    check_sm: int  # what ``get_device_sm()`` answers at SGLang's dense check
    reason: str


def dense_ue8m0_requant(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> RequantDecision:
    """Whether dense block-FP8 weights are requantized into DeepGEMM's UE8M0 scales here."""
    where = f"tier {res.resolved} ({res.match})"
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
