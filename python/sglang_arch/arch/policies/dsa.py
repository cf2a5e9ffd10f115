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
from .platform import runs_here, tier_fact, tier_where

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
        return KvCacheDecision("fp8_e4m3", f"{tier_where(res)}: FP8 KV cache on SM100 and newer")
    return KvCacheDecision("bfloat16", f"{tier_where(res)}: bfloat16 KV cache before SM100")


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


# --- the prefill path of a batch: the MHA one-shot band and the FlashMLA variant ---------
#
# ``DeepseekSparseAttnBackend.set_dsa_prefill_impl`` (``srt/layers/attention/dsa_backend.py``)
# decides, per batch, from two probes it reads on the device (bound at the backend's init):
#
# - ``get_device_sm()``: a short extend batch takes the dense MHA one-shot path ("H200/B200")
#   only on SM 9.0 and SM 10.x (``device_sm == 90 or 100 <= device_sm < 110``), else MLA.
#   ``_forward_standard_mha`` runs that path on the device's major: trtllm-gen's ragged
#   attention on major >= 10, FA3 below;
# - ``is_blackwell()`` (majors 10-12, CUDA >= 12.8: ``platform.tier_fact``): with ``flashmla_auto`` and an FP8 KV
#   cache, an extend batch with fewer than 512 KV tokens per query token takes
#   ``flashmla_sparse`` (after dequantizing the cache), else ``flashmla_kv``: a heuristic
#   "based on benchmarking", between two kernels of the same FlashMLA build.
#
# Both are ranges of capabilities picking among runnable paths: decisions.  The registry
# applies them to the resolved tier; the MHA band is kept only where the catalog has a build
# of the kernel the device would run it with (FA3 is sm_90a only: a 9.x device that resolves
# to 9.0 keeps MLA).  Both FlashMLA variants use one build (``kernels.py``), so the catalog
# never separates them: where FlashMLA has no build, neither variant runs, whatever the band.
MHA_BAND_SMS = (90,) + tuple(range(100, 110))


@dataclass(frozen=True)
class PrefillBands:
    mha_one_shot: bool  # a short extend batch may take the dense MHA one-shot path
    mha_kernel: Optional[str]  # the catalog choice that path runs on the device (None: not CUDA-decidable)
    flashmla_sparse_band: bool  # flashmla_auto may pick flashmla_sparse (FP8 KV, short KV per query)
    band_sm: int  # the SM set_dsa_prefill_impl's band test reads: the tier's, 0 where the band is dropped
    reason: str


def prefill_bands(res: Resolution, cuda: Optional[Tuple[int, int]] = None) -> PrefillBands:
    """The MHA one-shot band and the FlashMLA variant band of DSA's per-batch prefill pick."""
    tier = res.resolved
    where = f"tier {tier} ({res.match})"
    sm = tier.sm
    # _forward_standard_mha picks its kernel from the device's own major (identity).
    kernel = "trtllm" if res.requested.major >= 10 else "fa3"
    if sm in MHA_BAND_SMS:
        verdict = catalog.choice_runs(DECISION, kernel, res.identities, cuda)
        mha = verdict is None or verdict.runs
        mha_why = (f"SM {sm} is in the MHA one-shot band ({kernel})" if mha else
                   f"SM {sm} is in the MHA one-shot band, but on {res.requested} {kernel}: {verdict.reason}; MLA")
    else:
        mha, mha_why = False, f"SM {sm} is outside the MHA one-shot band (SM 9.0, 10.x): MLA"
    blackwell = tier_fact(res, "is_blackwell", cuda)
    fm_why = ("flashmla_auto may take flashmla_sparse (Blackwell)" if blackwell
              else "flashmla_auto takes flashmla_kv (not Blackwell)")
    # The tier's SM, except where its band's kernel has no build for the device: 0 there, as
    # SGLang's probe answers without a GPU (outside every band).
    band_sm = sm if mha or sm not in MHA_BAND_SMS else 0
    return PrefillBands(mha, kernel, blackwell, band_sm, f"{where}: {mha_why}; {fm_why}")


# --- DeepSeek-V4: the attention backend default and the commit-KV views -------------------
#
# ``_default_dsv4_attention_backend`` (``srt/arg_groups/deepseek_v4_hook.py``) picks what
# ``--dsv4-attn-backend auto`` becomes: ``flashmla_mega`` (FlashMLA's MegaAttention kernel,
# ``deepseek_v4_mega_backend.py``) for DeepSeek-V4.1 with an FP8 KV cache, no attention TP
# outside PD and a V4.1 KV layout, on ``is_sm100_supported()`` (major 10, CUDA >= 12.8);
# ``flashmla`` otherwise.  The model, device, dtype, parallelism and layout conditions stay
# SGLang's; the registry answers the capability one: the same rule on the resolved tier,
# kept only where the catalog has a build of MegaAttention for the device (sm_100a, sm_103a,
# sm_107a: every exact tier of major 10, so the registry equals upstream on every exact tier;
# a 10.x the table does not list, e.g. 10.5, keeps ``flashmla``).
DSV4_DECISION = "dsv4_attention"  # the kernel catalog's name for --dsv4-attn-backend
DSV4_MEGA = "flashmla_mega"


@dataclass(frozen=True)
class Dsv4MegaDecision:
    allowed: bool  # ``auto`` may become flashmla_mega here (SGLang's other conditions still apply)
    reason: str


def dsv4_mega_default(res: Resolution, cuda: Optional[Tuple[int, int]] = None) -> Dsv4MegaDecision:
    """Whether DeepSeek-V4's ``--dsv4-attn-backend auto`` may become ``flashmla_mega`` here."""
    where = tier_where(res)
    if not tier_fact(res, "is_sm100", cuda):
        return Dsv4MegaDecision(False, f"{where}: MegaAttention is the SM100 family's default (major 10, "
                                       "CUDA >= 12.8), not this tier's: flashmla")
    kept, why = runs_here(res, DSV4_DECISION, DSV4_MEGA, cuda, "the SM100 family's default")
    return Dsv4MegaDecision(kept, f"{where}: {why}" + ("" if kept else ": flashmla"))


# ``DeepseekV4ForCausalLMDSpark.project_commit_kv`` (``srt/models/deepseek_v4_dspark.py``)
# lets the fused commit-KV projection hand its per-stage slices to the KV writer as strided
# views (``allow_strided_output``) instead of contiguous copies, on ``is_blackwell`` (majors
# 10-12, CUDA >= 12.8) with the FlashMLA-layout pool (not unified KV, not uniform FP8).  That
# writer (``fused_k_norm_rope_flashmla``: SGLang's JIT ``FusedKNormRopeFlashMLAKernel``,
# ``main_norm_rope.cuh``) is the same on every CUDA GPU and reads the row stride on every one
# (``with_strides({-1, 1})``, ``kv_stride_batch``, for the V4 and V4.1 layouts alike): the
# probe picks no kernel, only whether the copies are skipped.  A decision, made by the
# registry with the same rule on the resolved tier (equal to upstream on every exact tier).
@dataclass(frozen=True)
class CommitKvViews:
    strided: bool  # the commit-KV slices may reach the writer as strided views (no copies)
    reason: str


def dspark_commit_kv_views(res: Resolution, cuda: Optional[Tuple[int, int]] = None) -> CommitKvViews:
    """Whether DSpark's commit-KV projection may pass strided views to the FlashMLA-layout writer."""
    where = tier_where(res)
    if tier_fact(res, "is_blackwell", cuda):
        return CommitKvViews(True, f"{where}: Blackwell (majors 10-12, CUDA >= 12.8): strided views, no copies "
                                   "(the writer reads the row stride)")
    return CommitKvViews(False, f"{where}: not Blackwell: contiguous copies")


def dsv4_explicit_mega(res: Resolution, cuda: Optional[Tuple[int, int]] = None) -> Optional[str]:
    """An explicit ``--dsv4-attn-backend flashmla_mega`` judged where SGLang's own assertion
    lets it through (``is_sm100_supported``: the device's major 10, CUDA >= 12.8): the reason
    it cannot run (MegaAttention has no SASS for the device, e.g. a 10.x the table does not
    list), else None.  Where SGLang's assertion refuses it, SGLang's refusal stands."""
    device = res.requested
    if device.major != 10 or (cuda is not None and cuda < (12, 8)):
        return None
    verdict = catalog.choice_runs(DSV4_DECISION, DSV4_MEGA, res.identities, cuda)
    if verdict is None or verdict.runs:
        return None
    return verdict.reason


# --- the MTP verify layout of the indexer's paged MQA logits ------------------------------
#
# In target_verify with ``next_n >= 2`` draft tokens, DSA's indexer calls DeepGEMM's paged
# MQA logits either natively (``q = [B, next_n, H, D]`` with a ``[B, next_n]`` context-length
# schedule) or per token (``[B * next_n, 1, H, D]``, a ``[B * next_n, 1]`` schedule): both
# run, and ``dsa_indexer.py`` takes the native call iff the metadata carries the 2-D
# schedule.  ``DeepseekSparseAttnBackend._build_paged_mqa_schedule_2d_ctx_lens`` builds it
# and ``_apply_cuda_graph_metadata`` replays it only where ``get_platform().is_sm100``:
# "SM90 supports DG-native next_n in {1,2} too -- enable once validated; for now DG-native
# is SM100+ only".  A choice between two runnable layouts, made where upstream validated
# one: a decision.  The registry applies the same rule to the tier and keeps the native
# layout only where the catalog has a build of DeepGEMM's SM100 paged-MQA kernel for the
# device (``deep_gemm_paged_mqa_sm100``: 10.0 and 10.3); elsewhere the per-token layout,
# which is what SGLang itself does on every other GPU.
DSA_INDEXER = "dsa_indexer"  # the kernel catalog's name for the indexer's layouts
DG_NATIVE = "dg_native"


@dataclass(frozen=True)
class VerifyLayout:
    native: bool  # the [B, next_n] schedule (SGLang's get_platform().is_sm100 at both sites)
    reason: str
    dropped: Tuple[Tuple[str, str], ...] = ()  # (layout, why not)


def dg_native_verify(res: Resolution, cuda: Optional[Tuple[int, int]] = None) -> VerifyLayout:
    """Whether DSA's MTP verify uses DeepGEMM's native ``[B, next_n]`` paged-MQA schedule."""
    where = tier_where(res)
    if not tier_fact(res, "is_sm100", cuda):
        return VerifyLayout(False, f"{where}: DeepGEMM-native MTP verify is validated on SM100 only "
                                   "(upstream's is_sm100): per-token schedule")
    verdict = catalog.choice_runs(DSA_INDEXER, DG_NATIVE, res.identities, cuda)
    if verdict is not None and not verdict.runs:
        return VerifyLayout(False, f"{where}: SM100 takes the DeepGEMM-native [B, next_n] schedule, but on "
                                   f"{res.requested} {verdict.reason}: per-token schedule",
                            ((DG_NATIVE, verdict.reason),))
    return VerifyLayout(True, f"{where}: SM100 takes the DeepGEMM-native [B, next_n] schedule")
