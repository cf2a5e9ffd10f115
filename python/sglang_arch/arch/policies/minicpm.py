"""MiniCPM's sparse attention backends: which one a sparse-attention MiniCPM gets, and the
check of one chosen elsewhere.

SGLang 0.5.23's ``_minicpm_sala_overrides`` (``srt/arg_groups/model_overrides/minicpm.py``)
gives a MiniCPM with sparse attention and no attention backend set
``minicpm_flashinfer`` where ``get_platform().is_blackwell`` (majors 10-12, CUDA >= 12.8),
else ``minicpm_flashattn``.  Both are MiniCPM's own backends
(``layers/attention/minicpm/backend.py`` ``MiniCPMSparseBackend``): no other backend serves
its sparse layers, so a replacement is always the other MiniCPM backend, never a general
one.  What each runs is the catalog's ``minicpm_sparse`` decision (``kernels.py``), per kind
``"<FlashAttention>+<top-k path>"``, both read from the device's own identity as the
backend reads them:

- FlashAttention 4 where the device is Blackwell (``fa_impl_ver = 4``, backend.py:135-137),
  else 3;
- the fused TileLang top-k (``minicpm_fuse_topk``, backend.py:227-229) for
  ``minicpm_flashinfer`` on Blackwell or whenever ``SGLANG_MINICPM_FUSE_TOPK`` is set, else
  InfLLM-V2's stage-1 kernel (sgl-kernel ``infllm_ops``: sm_80, sm_90, sm_120a).

The registry's decision is upstream's preference for the tier (``is_blackwell`` of the
tier's major) filtered by the catalog on the device: the preferred backend where it runs,
else the other where that runs, else none (SGLang's own pick stays: nothing of MiniCPM's
runs there, and no other backend serves its sparse layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .. import catalog
from ..registry import Resolution
from .platform import platform_facts, tier_fact, tier_where

DECISION = "minicpm_sparse"  # the kernel catalog's name (arch/kernels.py CHOICES)
FLASHATTN = "minicpm_flashattn"
FLASHINFER = "minicpm_flashinfer"
BACKENDS = (FLASHATTN, FLASHINFER)


@dataclass(frozen=True)
class SparseDecision:
    backend: Optional[str]  # None: no MiniCPM sparse backend runs here (SGLang's own pick stays)
    preferred: str  # upstream's rule on the tier
    reason: str


@dataclass(frozen=True)
class SparseCheck:
    runs: Optional[bool]  # None: not a MiniCPM sparse backend (not judged here)
    reason: str


def kind(res: Resolution, backend: str, cuda: Optional[Tuple[int, int]], fuse_topk: bool = False) -> str:
    """The kernels ``backend`` builds on this device: ``"<fa3|fa4>+<stage1|fused_topk>"``.

    ``fuse_topk``: ``SGLANG_MINICPM_FUSE_TOPK`` is set (the fused top-k on any device)."""
    blackwell = bool(platform_facts(res, cuda)["is_blackwell"])  # the backend's own probe: identity
    fused = fuse_topk or (blackwell and backend == FLASHINFER)
    return f"{'fa4' if blackwell else 'fa3'}+{'fused_topk' if fused else 'stage1'}"


def check(res: Resolution, backend: str, cuda: Optional[Tuple[int, int]] = (13, 0),
          fuse_topk: bool = False) -> SparseCheck:
    """Whether MiniCPM sparse backend ``backend`` has its kernels on this device."""
    if backend not in BACKENDS:
        return SparseCheck(None, f"{backend!r} is not a MiniCPM sparse backend; not judged here")
    path = kind(res, backend, cuda, fuse_topk)
    verdict = catalog.choice_runs(DECISION, backend, res.identities, cuda, path)
    if verdict.runs:
        return SparseCheck(True, f"{backend} ({path}) runs on {res.requested}: {verdict.reason}")
    return SparseCheck(False, f"{backend} ({path}) cannot run on {res.requested}: {verdict.reason}")


def sparse_backend(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0),
                   fuse_topk: bool = False) -> SparseDecision:
    """The MiniCPM sparse backend a sparse-attention MiniCPM with no backend set gets."""
    where = tier_where(res)
    preferred = FLASHINFER if tier_fact(res, "is_blackwell", cuda) else FLASHATTN
    rule = f"{where}: {'Blackwell' if preferred == FLASHINFER else 'not Blackwell'}, SGLang's rule prefers {preferred}"
    first = check(res, preferred, cuda, fuse_topk)
    if first.runs:
        return SparseDecision(preferred, preferred, f"{rule}; {first.reason}")
    other = FLASHATTN if preferred == FLASHINFER else FLASHINFER
    second = check(res, other, cuda, fuse_topk)
    if second.runs:
        return SparseDecision(other, preferred, f"{rule}, but {first.reason}; {second.reason}")
    return SparseDecision(None, preferred, f"{rule}, but no MiniCPM sparse backend runs here: {first.reason}; "
                                           f"{second.reason}")


def replacement(res: Resolution, backend: str, cuda: Optional[Tuple[int, int]] = (13, 0),
                fuse_topk: bool = False) -> Optional[Tuple[str, str]]:
    """The build guard for a MiniCPM sparse backend: None where it runs (or is not one), or
    where no MiniCPM sparse backend runs here (nothing else serves its sparse layers); else
    (the runnable MiniCPM sparse backend, why)."""
    verdict = check(res, backend, cuda, fuse_topk)
    if verdict.runs is not False:
        return None
    decision = sparse_backend(res, cuda, fuse_topk)
    if decision.backend is None:
        return None
    return decision.backend, f"{verdict.reason}; the registry's MiniCPM sparse backend {decision.backend} runs here"
