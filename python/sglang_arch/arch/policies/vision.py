"""The vision (multimodal encoder) attention backend.

SGLang 0.5.23 (``srt/layers/attention/vision.py``, ``VisionAttention._determine_attention_backend``)
takes ``--mm-attention-backend`` when given, else the backend the model's code passes,
else on CUDA by the device's major: ``fa3`` on 9, ``fa4`` on 10, ``triton_attn``
otherwise; ``fa3`` on a Blackwell GPU is an error.  On 9.5 or 10.5 that names FA3's
sm_90a build or FA4's CuTe kernels, which compile for 10.0, 10.3 and 10.7 only.

The registry applies upstream's rule to the tier, then keeps the first choice the kernel
catalog runs on the device itself: upstream's pick, ``triton_attn`` (Triton compiles for
the device, SM70 and newer), ``sdpa`` (PyTorch's own).  A backend the model's code
passes is kept where it runs and replaced by that default where it does not.  The user's
``--mm-attention-backend`` is not decided here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from .. import catalog
from ..registry import Resolution
from .platform import tier_where

DECISION = "vision"  # the kernel catalog's name for this decision (kernels.py CHOICES)
PORTABLE = ("triton_attn", "sdpa")


@dataclass(frozen=True)
class VisionDecision:
    backend: str
    reason: str
    dropped: Tuple[Tuple[str, str], ...] = ()


def upstream_pick(res: Resolution) -> str:
    """SGLang 0.5.23's CUDA rule, asked of the tier's major."""
    return {9: "fa3", 10: "fa4"}.get(res.resolved.major, "triton_attn")


def backend(res: Resolution, passed: Optional[str] = None,
            cuda: Optional[Tuple[int, int]] = (13, 0)) -> VisionDecision:
    """The vision attention backend; ``passed``: the one the model's code asks for."""
    dropped = []
    if passed is not None:
        verdict = catalog.choice_runs(DECISION, passed, res.identities, cuda)
        if verdict is None or verdict.runs:
            return VisionDecision(passed, f"the model's code passes {passed}"
                                          + (f" ({verdict.reason})" if verdict else " (not in the catalog)"))
        dropped.append((passed, f"passed by the model's code: {verdict.reason}"))
    pick = upstream_pick(res)
    for name in (pick,) + tuple(p for p in PORTABLE if p != pick):
        verdict = catalog.choice_runs(DECISION, name, res.identities, cuda)
        if verdict is not None and verdict.runs:
            where = tier_where(res)
            if name == pick and not dropped:
                return VisionDecision(name, f"{where}: SGLang's rule picks {name}")
            lost = "; ".join(f"{n}: {why}" for n, why in dropped)
            return VisionDecision(name, f"{where}: SGLang's rule picks {pick}; dropped {lost}; {name} runs on "
                                        f"{res.requested}", tuple(dropped))
        dropped.append((name, verdict.reason if verdict else "not in the catalog"))
    raise AssertionError("sdpa (PyTorch's own kernels) runs wherever torch runs")


def _first_runnable(res: Resolution, pick: str, rule: str, cuda: Optional[Tuple[int, int]],
                    fallbacks: Tuple[str, ...] = PORTABLE) -> VisionDecision:
    """``pick`` where the kernel catalog runs it on the device, else the first of
    ``fallbacks`` that runs (sdpa, PyTorch's own, runs wherever torch does)."""
    where = tier_where(res)
    dropped = []
    for name in (pick,) + tuple(f for f in fallbacks if f != pick):
        verdict = catalog.choice_runs(DECISION, name, res.identities, cuda)
        if verdict is None or verdict.runs:
            if name == pick:
                return VisionDecision(name, f"{where}: {rule} picks {name}")
            lost = "; ".join(f"{n}: {why}" for n, why in dropped)
            return VisionDecision(name, f"{where}: {rule} picks {pick}; dropped {lost}; {name} runs on "
                                        f"{res.requested}", tuple(dropped))
        dropped.append((name, verdict.reason))
    raise AssertionError("sdpa (PyTorch's own kernels) runs wherever torch runs")


# SGLang 0.5.23 srt/models/gemma4_vision.py ``Gemma4VisionAttention._select_backend`` on CUDA
# (no --mm-attention-backend): fa3 on major 9 (triton_attn if also Blackwell, which no
# major-9 GPU is), triton_attn on every other major.
def gemma4_upstream_pick(res: Resolution) -> str:
    return "fa3" if res.resolved.major == 9 else "triton_attn"


def gemma4_backend(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> VisionDecision:
    """Gemma 4's vision encoder attention: SGLang's rule on the tier, catalog-filtered."""
    return _first_runnable(res, gemma4_upstream_pick(res), "Gemma 4's vision rule", cuda)


# SGLang 0.5.23 srt/models/kimi_k3_vl.py ``_resolve_mm_attention_backend`` ("auto", CUDA):
# sdpa except on capability (10, 3) exactly, whose measured split (_SM103_TRITON_MAX_SEQLEN,
# _SM103_FA4_MIN_ATTENTION_WORK) picks fa4 for long or large work (sdpa without FA4) and
# triton_attn below.  The registry keys the split on the tier: 10.3 and the capabilities
# that fall back to it.
KIMI_K3_SPLIT_TIERS = ((10, 3),)


def kimi_k3_backend(res: Resolution, max_seqlen: int, total_tokens: int, fa4_available: Callable[[], bool],
                    triton_max_seqlen: int, fa4_min_work: int,
                    cuda: Optional[Tuple[int, int]] = (13, 0)) -> VisionDecision:
    """Kimi K3's MoonViT attention for one batch: SGLang's rule on the tier, catalog-filtered.

    ``fa4_available`` is asked only where the rule would pick FA4 (it imports FA4)."""
    tier = (res.resolved.major, res.resolved.minor)
    if tier not in KIMI_K3_SPLIT_TIERS:
        pick = "sdpa"
    elif max_seqlen > triton_max_seqlen or max_seqlen * total_tokens >= fa4_min_work:
        pick = "fa4" if fa4_available() else "sdpa"
    else:
        pick = "triton_attn"
    return _first_runnable(res, pick, "Kimi K3's vision rule", cuda, ("triton_attn", "sdpa"))


# SGLang 0.5.23 srt/models/mimo_audio.py ``AudioEncoderMixin.build_audio_encoder``: MiMo's
# input-local audio transformer (groups of at most 4 tokens, head_dim 16) runs its own
# Triton attention (kernels/ops/attention/mimo_local_attention.py) where
# ``is_sm90_supported()`` (major 9, torch CUDA >= 12.3: platform.FACT_RULES), else SDPA.
# The registry asks the same of the tier; the kernel is Triton, judged as triton_attn is.
MIMO_LOCAL_FACT = "is_sm90"


@dataclass(frozen=True)
class AudioLocalDecision:
    enabled: bool
    reason: str


def mimo_local_attention(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> AudioLocalDecision:
    """Whether MiMo's audio encoder takes its local Triton attention (else SDPA)."""
    from .platform import tier_fact

    where = tier_where(res)
    if not tier_fact(res, MIMO_LOCAL_FACT, cuda):
        return AudioLocalDecision(False, f"{where}: SGLang's rule ({MIMO_LOCAL_FACT}) is false: SDPA")
    verdict = catalog.choice_runs(DECISION, "triton_attn", res.identities, cuda)
    if not verdict.runs:
        return AudioLocalDecision(False, f"{where}: SGLang's rule picks the local Triton attention, but "
                                         f"{verdict.reason}: SDPA")
    return AudioLocalDecision(True, f"{where}: SGLang's rule picks the local Triton attention")
