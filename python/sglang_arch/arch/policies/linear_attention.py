"""Linear attention (hybrid GDN / KDA models): the kernel backend each phase defaults to.

SGLang 0.5.23 decides these with capability checks at five sites:

- ``arg_groups/attention_hook.py`` ``handle_linear_attn_backend``: decode defaults to
  ``flashinfer`` where ``is_sm100`` (major 10, CUDA >= 12.8) and the SSM state is bf16
  (the user gave no decode backend and the base backend is not helion);
- ``arg_groups/kimi_k3_hook.py`` ``apply_kimi_k3_linear_attn_defaults``: Kimi's KDA
  models pin decode to ``triton`` on the same machines (it preempts the rule above);
- ``arg_groups/glm5_next_hook.py`` ``apply_glm5_next_spec_backend_defaults``: the
  speculative verify defaults to ``nv_cutedsl`` where ``is_sm100``;
- ``layers/attention/linear/gdn_backend.py`` ``flashinfer_gdn_prefill_default``: GDN
  prefill defaults to ``flashinfer`` on capability major 9 (fp32 state, chunks up to
  32768) and major 10 with CUDA >= 13 (bf16 state, chunks up to 8192);
- ``layers/attention/linear/kda_backend.py`` ``flashinfer_kda_prefill_default``: KDA
  prefill defaults to ``flashinfer`` on capability 10.0 and 10.3.

The registry applies each rule to the tier (a GPU the table does not know gets its
nearest tier's rule) and keeps the pick only where the kernel catalog runs it on the
device itself (``arch/kernels.py`` choice ``linear_attention``, per kernel family and
phase); otherwise nothing is defaulted and the phase keeps the base backend (Triton).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .. import catalog
from ..capability import Capability
from ..registry import Resolution
from .platform import tier_fact, tier_where

DECISION = "linear_attention"  # the kernel catalog's name for this decision
FAMILIES = ("gdn", "kda")
PORTABLE = "triton"
Cuda = Optional[Tuple[int, int]]

# GDN prefill's validated domains per tier major (gdn_backend.py): the largest chunk and
# the SSM state dtype FlashInfer's kernel of that major expects, and its CUDA minimum.
GDN_PREFILL_DOMAINS = {9: (32768, "float32", None), 10: (8192, "bfloat16", (13, 0))}
# KDA prefill: the capabilities kda_backend.py names.
KDA_PREFILL_TIERS = (Capability(10, 0), Capability(10, 3))


@dataclass(frozen=True)
class LinearDecision:
    backend: Optional[str]  # None: nothing defaulted (the phase keeps the base backend)
    reason: str
    max_chunk: Optional[int] = None  # GDN prefill: the largest chunked-prefill size it takes
    state_dtype: Optional[str] = None  # GDN prefill: the SSM state dtype it takes ("float32", ...)
    dropped: Tuple[Tuple[str, str], ...] = ()  # (candidate, why not)


def _keep(res: Resolution, pick: str, families: Tuple[str, ...], phase: str, cuda: Cuda,
          rule: str, **domain) -> LinearDecision:
    """``pick`` where the catalog runs it on the device for every family, else nothing."""
    for family in families:
        verdict = catalog.choice_runs(DECISION, pick, res.identities, cuda, family, phase)
        if verdict is None or not verdict.runs:
            why = verdict.reason if verdict is not None else f"{pick} is not in the kernel catalog"
            return LinearDecision(None, f"{tier_where(res)}: {rule}, but {why}; {phase} keeps the base backend",
                                  dropped=((pick, why),))
    return LinearDecision(pick, f"{tier_where(res)}: {rule}", **domain)


def decode_default(res: Resolution, cuda: Cuda = (13, 0)) -> LinearDecision:
    """The decode backend for a bf16 SSM state when the user gave none (any family)."""
    if not tier_fact(res, "is_sm100", cuda):
        return LinearDecision(None, f"{tier_where(res)}: no decode default (SGLang's is_sm100 rule)")
    return _keep(res, "flashinfer", FAMILIES, "decode", cuda, "FlashInfer decode for a bf16 SSM state")


def kda_decode_default(res: Resolution, cuda: Cuda = (13, 0)) -> LinearDecision:
    """Kimi's KDA models: ``triton`` decode on the tiers where the generic rule picks
    FlashInfer (the Triton packed decode is the faster one on KDA shapes)."""
    if not tier_fact(res, "is_sm100", cuda):
        return LinearDecision(None, f"{tier_where(res)}: no KDA decode default (SGLang's is_sm100 rule)")
    return _keep(res, PORTABLE, ("kda",), "decode", cuda, "Triton packed decode for KDA with a bf16 SSM state")


def verify_default(res: Resolution, cuda: Cuda = (13, 0)) -> LinearDecision:
    """GLM-5-Next with speculative decoding: the verify backend when the user gave none."""
    if not tier_fact(res, "is_sm100", cuda):
        return LinearDecision(None, f"{tier_where(res)}: no verify default (SGLang's is_sm100 rule)")
    return _keep(res, "nv_cutedsl", ("kda",), "verify", cuda, "the fused CuTe DSL verify")


def prefill_default(res: Resolution, family: str, cuda: Cuda = (13, 0)) -> LinearDecision:
    """The prefill backend of a ``family`` model on the Triton base backend."""
    if family not in FAMILIES:
        raise ValueError(f"invalid linear-attention family {family!r}; accepted: {', '.join(FAMILIES)}")
    if family == "kda":
        if res.resolved not in KDA_PREFILL_TIERS:
            return LinearDecision(None, f"{tier_where(res)}: no KDA prefill default (SGLang's 10.0/10.3 rule)")
        return _keep(res, "flashinfer", ("kda",), "prefill", cuda, "FlashInfer KDA prefill")
    domain = GDN_PREFILL_DOMAINS.get(res.resolved.major)
    if domain is None:
        return LinearDecision(None, f"{tier_where(res)}: no GDN prefill default (SGLang's major 9/10 rule)")
    max_chunk, state_dtype, min_cuda = domain
    if min_cuda is not None and cuda is not None and cuda < min_cuda:
        return LinearDecision(None, f"{tier_where(res)}: FlashInfer GDN prefill needs CUDA >= "
                                    f"{min_cuda[0]}.{min_cuda[1]} here (torch has {cuda[0]}.{cuda[1]})")
    return _keep(res, "flashinfer", ("gdn",), "prefill", cuda,
                 f"FlashInfer GDN prefill (chunks up to {max_chunk}, {state_dtype} state)",
                 max_chunk=max_chunk, state_dtype=state_dtype)
