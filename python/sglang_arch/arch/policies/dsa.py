"""DeepSeek sparse attention (DSA): the KV-cache dtype default and the split backends.

SGLang 0.5.23 decides both from the device's major during argument resolution
(``srt/arg_groups/overrides.py``: ``_dsa_kv_cache_dtype_default`` and
``_dsa_split_backend_resolution``, the CUDA arms):

- KV cache ``auto``: ``fp8_e4m3`` on SM100 and newer (major >= 10) unless the model has
  learnable attention sinks, else ``bfloat16``;
- GLM-5 (``GlmMoeDsaForCausalLM``) with an FP8 KV cache on SM12x: ``flashinfer_sparse_mla``
  for both phases;
- FP8 KV cache: ``trtllm`` for both phases on major >= 10, else ``flashmla_kv``;
- bfloat16 KV cache: prefill ``flashmla_sparse``; decode ``trtllm`` on major >= 10, else ``fa3``.

The registry applies the same rule to the resolved tier, then keeps each phase's backend
only where the kernel catalog (``kernels.py``) has a build of its kernels for the device
itself: FlashMLA ships sm_90a/sm_100a/sm_103a/sm_107a, FA3 sm_90a, trtllm-gen's cubins
sm_100f/sm_103a/sm_107a, FlashInfer's sparse MLA is generated for SM12x only.  A phase
whose backend has no build for the device moves both phases to ``tilelang``, which compiles its kernels
for the device it runs on (docs/differences.md D10, D11): on a GPU the table does not
list, and on the known tiers where upstream's major-based rule names kernels that were
never built for them (trtllm on SM11x and SM12x).  Below SM80 TileLang does not compile
either: no DSA kernel has a build there, and the decision has no backend (both phases
None) with that reason; the glue refuses the DSA model with it.  The KV-cache default needs no such
care: it is a data layout, and its rule gives the same answer from the tier as from the
device on every capability.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .. import catalog
from ..registry import Resolution

KV_CACHE_DTYPES = ("bfloat16", "fp8_e4m3")
GLM_DSA_ARCH = "GlmMoeDsaForCausalLM"
PORTABLE = "tilelang"
DECISION = "dsa"  # the kernel catalog's name for this decision


@dataclass(frozen=True)
class KvCacheDecision:
    dtype: str
    reason: str


@dataclass(frozen=True)
class DsaDecision:
    prefill: Optional[str]  # None (both phases): no DSA kernel has a build for this device
    decode: Optional[str]
    reason: str
    glm_sm12: bool = False  # upstream's GLM-5 arm (its own log line, no constraint check)
    dropped: Tuple[Tuple[str, str], ...] = ()  # (phase backend, why not)


def kv_cache_dtype_default(res: Resolution, attention_sinks: bool = False) -> KvCacheDecision:
    """The KV-cache dtype a DSA model gets when ``--kv-cache-dtype`` is ``auto``."""
    if attention_sinks:
        return KvCacheDecision("bfloat16", "learnable attention sinks need a bfloat16 KV cache")
    if res.resolved.major >= 10:
        return KvCacheDecision("fp8_e4m3", f"tier {res.resolved} ({res.match}): FP8 KV cache on SM100 and newer")
    return KvCacheDecision("bfloat16", f"tier {res.resolved} ({res.match}): bfloat16 KV cache before SM100")


def split_backends(res: Resolution, kv_cache_dtype: str, model_arch: str = "",
                   cuda: Optional[Tuple[int, int]] = None) -> DsaDecision:
    """The DSA prefill and decode backends for a KV cache of ``kv_cache_dtype``."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"invalid DSA KV-cache dtype {kv_cache_dtype!r}; accepted: {', '.join(KV_CACHE_DTYPES)}")
    prefill, decode, why, glm_sm12 = _upstream_rule(res, kv_cache_dtype == "fp8_e4m3", model_arch)
    dropped = []
    for phase, backend in (("prefill", prefill), ("decode", decode)):
        verdict = catalog.choice_runs(DECISION, backend, res.identities, cuda)
        if verdict is not None and not verdict.runs:
            dropped.append((phase, backend, verdict.reason))
    if not dropped:
        return DsaDecision(prefill, decode, why, glm_sm12=glm_sm12)
    # Both phases move together: SGLang validates the pair (_check_dsa_backend_constraints),
    # and TileLang for both is a pair it accepts wherever TileLang runs.
    lost = "; ".join(f"{phase} {backend}: {reason}" for phase, backend, reason in dropped)
    lost_pairs = tuple((f"{phase} {backend}", reason) for phase, backend, reason in dropped)
    portable = catalog.choice_runs(DECISION, PORTABLE, res.identities, cuda)
    if not portable.runs:
        # Nothing compiles for this device either (TileLang needs SM80): no DSA kernel has a
        # build here, and the decision says so instead of naming one that cannot load.
        return DsaDecision(None, None,
                           f"{why}, but on {res.requested} {lost}; {PORTABLE}: {portable.reason}: "
                           f"no DSA kernel has a build for {res.requested}",
                           dropped=lost_pairs + ((PORTABLE, portable.reason),))
    return DsaDecision(PORTABLE, PORTABLE,
                       f"{why}, but on {res.requested} {lost}; {PORTABLE} for both phases compiles for the device",
                       dropped=lost_pairs)


def _upstream_rule(res: Resolution, fp8: bool, model_arch: str) -> Tuple[str, str, str, bool]:
    """SGLang 0.5.23's rule on the tier: (prefill, decode, reason, GLM-5 SM12x arm)."""
    tier = res.resolved
    where = f"tier {tier} ({res.match})"
    if model_arch == GLM_DSA_ARCH and fp8 and tier.major == 12:
        return "flashinfer_sparse_mla", "flashinfer_sparse_mla", f"{where}: GLM-5 with an FP8 KV cache on SM12x", True
    blackwell = tier.major >= 10
    if fp8:
        backend = "trtllm" if blackwell else "flashmla_kv"
        return backend, backend, f"{where}: FP8 KV cache -> {backend}", False
    decode = "trtllm" if blackwell else "fa3"
    return "flashmla_sparse", decode, f"{where}: bfloat16 KV cache -> flashmla_sparse / {decode}", False


# --- the K-pool tail backend -------------------------------------------------------------
#
# With ``--dsa-index-kpool`` > 1 the indexer appends the K-pool's tail tokens to the top-k
# indices, which FlashMLA's sparse kernel does not take.  SGLang 0.5.23 moves a phase whose
# backend is ``flashmla_sparse`` to another one from the device's major
# (``DeepseekSparseAttnBackendKPoolMixin._resolve_kpool_tail_backend``,
# ``srt/layers/attention/dsa/dsa_backend_kpool.py``): ``trtllm`` on major >= 10, ``fa3`` on
# major 9, else it keeps ``flashmla_sparse`` (which ``_check_kpool_tail_backend`` then
# refuses: only FA3, TileLang and TRT-LLM take the tail).  Any other backend is kept.
KPOOL_MOVED = "flashmla_sparse"


@dataclass(frozen=True)
class TailDecision:
    backend: str
    reason: str
    dropped: Tuple[Tuple[str, str], ...] = ()  # (backend, why not)


def kpool_tail_backend(res: Resolution, dsa_impl: str, cuda: Optional[Tuple[int, int]] = None) -> TailDecision:
    """The backend a phase running ``dsa_impl`` uses when the K-pool tail is appended.

    Upstream's rule on the tier, kept where the kernel catalog has a build of the backend's
    kernels for the device; elsewhere ``tilelang``, which takes the tail and compiles for
    the device (docs/differences.md D10, D11).  Where TileLang does not build either (below
    SM80) the phase keeps ``dsa_impl``, as upstream does below SM90: the DSA model was
    refused at argument resolution already, and SGLang's tail check refuses the rest."""
    tier = res.resolved
    where = f"tier {tier} ({res.match})"
    if dsa_impl != KPOOL_MOVED:
        return TailDecision(dsa_impl, f"{dsa_impl} takes the K-pool tail itself (upstream keeps it)")
    if tier.major >= 10:
        backend = "trtllm"
    elif tier.major == 9:
        backend = "fa3"
    else:
        return TailDecision(dsa_impl, f"{where}: below SM90 upstream keeps {dsa_impl}")
    why = f"{where}: the K-pool tail moves {dsa_impl} to {backend}"
    verdict = catalog.choice_runs(DECISION, backend, res.identities, cuda)
    if verdict is None or verdict.runs:
        return TailDecision(backend, why)
    portable = catalog.choice_runs(DECISION, PORTABLE, res.identities, cuda)
    if portable.runs:
        return TailDecision(PORTABLE, f"{why}, but on {res.requested} {backend}: {verdict.reason}; {PORTABLE} "
                                      "takes the tail and compiles for the device", ((backend, verdict.reason),))
    return TailDecision(dsa_impl, f"{why}, but on {res.requested} {backend}: {verdict.reason}; {PORTABLE}: "
                                  f"{portable.reason}: {dsa_impl} kept (SGLang's tail check refuses it)",
                        ((backend, verdict.reason), (PORTABLE, portable.reason)))
