"""MiniMax-M3.1 NVFP4 (``--quantization minimax_m3_nvfp4``): which of its two stacks a GPU runs.

SGLang 0.5.23's ``_minimax_m3_overrides`` (``srt/arg_groups/model_overrides/minimax_m3.py:94``)
picks one of two arms by ``get_platform().is_blackwell``:

- Blackwell: MegaMoE all-to-all with the DeepGEMM runner (``flashinfer_trtllm_routed`` where
  the user names it), an ``fp8_e4m3`` KV cache (the packed NVFP4 KV pool), ``trtllm_mha``;
- elsewhere: Marlin W4A16 experts, ``fa3``, the KV cache in the model dtype;

both with page size 128.  The arm is one answer several sites must share, and the others
read the device's own ``is_blackwell`` (identity): ``model_config.py:436-443`` ("The
attention backend, the KV pool class and the KV cell-size budget must all agree on this
answer"), the experts' method (``layers/quantization/minimax_m3_nvfp4.py:126``,
``use_marlin = not is_blackwell``: on a Blackwell device it refuses the Marlin arm's runner,
"M3.1 NVFP4 experts require --moe-a2a-backend megamoe or --moe-runner-backend
flashinfer_trtllm_routed") and the MXFP8 projections (``:71``, block FP8 off Blackwell).  So
the registry's arm is the one the device's stack is built for: the Blackwell arm exactly
where the device is Blackwell (on a tier that is not, e.g. 13.0 resolving to 12.1, the other
arm, as upstream).  The kernel catalog says whether that arm's kernels run
(MegaMoE's ``deep_gemm_mega``, or trtllm-gen MoE for ``flashinfer_trtllm_routed``, and
``trtllm_mha``; Marlin and ``fa3`` for the other): where they do not (10.7, 11.x, 12.x:
MegaMoE is SM100/SM103-only) no arm runs here, since switching arms at this site alone
would split the shared answer (the experts' method then refuses Marlin's runner); the
decision says so, and SGLang's own checks and the attention guards act on what it sets.

The MoE guard (``glue/moe.py`` ``moe_runner_backend``) does not judge this arm's runners:
the arguments' quantization is ``minimax_m3_nvfp4`` (the override declares it from the
checkpoint's mxfp8 + NVFP4 packed experts), whose experts no kind of the catalog models
(``kind_of`` answers None), and MegaMoE is the all-to-all backend, not a runner.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .. import catalog
from ..registry import Resolution
from .platform import platform_facts

BLACKWELL, OTHER = "blackwell", "other"
# (decision, choice, kind, phase) of the kernels each arm picks
ARM_KERNELS = {
    BLACKWELL: (("moe_runner", "megamoe", "nvfp4", None), ("attention", "trtllm_mha", "mha", "prefill")),
    OTHER: (("moe_runner", "marlin", "nvfp4", None), ("attention", "fa3", "mha", "prefill")),
}
# The user's ``--moe-runner-backend flashinfer_trtllm_routed`` keeps the Blackwell arm off MegaMoE.
TRTLLM_ROUTED = ("moe_runner", "flashinfer_trtllm_routed", "nvfp4", None)


@dataclass(frozen=True)
class ArmDecision:
    blackwell: bool  # the Blackwell arm (what ``is_blackwell`` answers at the site)
    runs: bool  # every kernel the arm picks has a build for the device
    reason: str


def nvfp4_arm(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0),
              trtllm_routed: bool = False) -> ArmDecision:
    """The arm of M3.1 NVFP4 for this device (``trtllm_routed``: the user named
    ``flashinfer_trtllm_routed`` as the MoE runner)."""
    blackwell = bool(platform_facts(res, cuda)["is_blackwell"])
    arm = BLACKWELL if blackwell else OTHER
    uses = ARM_KERNELS[arm]
    if blackwell and trtllm_routed:
        uses = (TRTLLM_ROUTED,) + uses[1:]
    refused = []
    for decision, choice, kind, phase in uses:
        verdict = catalog.choice_runs(decision, choice, res.identities, cuda, kind, phase)
        if verdict is not None and not verdict.runs:
            refused.append(f"{choice}: {verdict.reason}")
    where = f"{res.requested} (tier {res.resolved}, {res.match})"
    kernels = ", ".join(choice for _, choice, _, _ in uses)
    arm_name = "Blackwell arm" if blackwell else "arm for other GPUs"
    why = (f"{where} is {'' if blackwell else 'not '}Blackwell, as the experts' method, the projections and the "
           f"KV pool read it: the {arm_name} ({kernels})")
    if not refused:
        return ArmDecision(blackwell, True, f"{why}; its kernels run here")
    return ArmDecision(blackwell, False, f"{why}; it cannot run here ({'; '.join(refused)}), and the other arm "
                                         "would split the answer those sites share: SGLang's arm stays")
