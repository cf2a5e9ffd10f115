"""The attention backend for deterministic inference when none is given.

SGLang 0.5.23 (``srt/arg_groups/overrides.py``, ``_deterministic_attention_backend``)
picks it from the platform probes: on SM100 or SM120 (``is_sm100 or is_sm120``: major 10
or 12 with CUDA >= 12.8) ``triton`` for the DeepSeek family and ``flashinfer`` for the
rest; everywhere else ``fa3``.  On a GPU whose major is neither (7.x, 8.x, 11.0, 13.0)
that names FA3, whose builds are sm_80/sm_86 (MHA) and sm_90a: on 13.0 SGLang would load
an sm_90a kernel the device cannot run, and the plugin's explicit-backend check used to
refuse a flag the user never passed.

The registry applies upstream's rule to the tier (so a fallback lends its neighbour's
preference), then keeps the first choice the kernel catalog says runs on the device
itself, for the model's kind, among the backends SGLang can make deterministic
(``DETERMINISTIC_ATTENTION_BACKEND_CHOICES``, handed in by the caller): upstream's pick,
then ``flashinfer`` (not for the DeepSeek family, which FlashInfer cannot run
deterministically) and ``triton``.  On every exact tier where upstream's pick runs, the
answer is upstream's (docs/differences.md D16 lists the rest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from .. import catalog
from ..registry import Resolution
from .platform import tier_fact, tier_where

DECISION = "attention"  # deterministic backends are attention backends (kernels.py CHOICES)


@dataclass(frozen=True)
class DeterministicDecision:
    backend: Optional[str]  # None: no deterministic backend runs on this device
    reason: str
    upstream: str  # what SGLang's rule names on the tier
    dropped: Tuple[Tuple[str, str], ...] = ()  # (candidate, why not)


def upstream_pick(res: Resolution, deepseek: bool, cuda: Optional[Tuple[int, int]]) -> str:
    """SGLang 0.5.23's rule, asked of the tier's major (is_sm100 or is_sm120)."""
    if tier_fact(res, "is_sm100", cuda) or tier_fact(res, "is_sm120", cuda):
        return "triton" if deepseek else "flashinfer"
    return "fa3"


def default_backend(res: Resolution, capable: Sequence[str], kind: str = "mha", deepseek: bool = False,
                    cuda: Optional[Tuple[int, int]] = (13, 0)) -> DeterministicDecision:
    """The deterministic attention backend for a model of ``kind`` when none is given."""
    pick = upstream_pick(res, deepseek, cuda)
    order = [pick] + [b for b in (("triton",) if deepseek else ("flashinfer", "triton")) if b != pick]
    dropped = []
    for name in order:
        if name not in capable:
            dropped.append((name, "not among SGLang's deterministic backends"))
            continue
        verdict = catalog.choice_runs(DECISION, name, res.identities, cuda, kind, "prefill")
        if verdict is None or not verdict.runs:
            dropped.append((name, verdict.reason if verdict is not None else "not in the kernel catalog"))
            continue
        where = tier_where(res)
        if name == pick:
            return DeterministicDecision(name, f"{where}: SGLang's deterministic rule picks {name}", pick)
        lost = "; ".join(f"{n}: {why}" for n, why in dropped)
        return DeterministicDecision(name, f"{where}: SGLang's rule picks {pick}, but {lost}; {name} runs on "
                                           f"{res.requested}", pick, tuple(dropped))
    lost = "; ".join(f"{n}: {why}" for n, why in dropped)
    return DeterministicDecision(None, f"no deterministic attention backend runs {kind.upper()} on "
                                       f"{res.requested} ({lost})", pick, tuple(dropped))
