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

The registry applies the same rule to the resolved tier, so an exact (or configured)
match is upstream's answer.  Every one of those backends runs prebuilt kernels compiled
per architecture (FlashMLA for sm_90a/sm_100a, FA3 for sm_90a, trtllm-gen cubins,
FlashInfer's sparse MLA for SM12x); an ``a`` target runs on exactly one capability
(CUDA C++ Programming Guide, "Feature Availability").  So on any other match (a GPU the
table does not list) the registry picks ``tilelang`` for both phases: TileLang compiles
its kernels for the device it runs on (docs/differences.md D10).  The KV-cache default
needs no such care: it is a data layout, and its rule gives the same answer from the
tier as from the device on every capability.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..registry import Resolution

KV_CACHE_DTYPES = ("bfloat16", "fp8_e4m3")
GLM_DSA_ARCH = "GlmMoeDsaForCausalLM"
PORTABLE = "tilelang"
_PREBUILT_MATCHES = ("exact", "override")  # where the tier's prebuilt DSA kernels are the device's


@dataclass(frozen=True)
class KvCacheDecision:
    dtype: str
    reason: str


@dataclass(frozen=True)
class DsaDecision:
    prefill: str
    decode: str
    reason: str
    glm_sm12: bool = False  # upstream's GLM-5 arm (its own log line, no constraint check)


def kv_cache_dtype_default(res: Resolution, attention_sinks: bool = False) -> KvCacheDecision:
    """The KV-cache dtype a DSA model gets when ``--kv-cache-dtype`` is ``auto``."""
    if attention_sinks:
        return KvCacheDecision("bfloat16", "learnable attention sinks need a bfloat16 KV cache")
    if res.resolved.major >= 10:
        return KvCacheDecision("fp8_e4m3", f"tier {res.resolved} ({res.match}): FP8 KV cache on SM100 and newer")
    return KvCacheDecision("bfloat16", f"tier {res.resolved} ({res.match}): bfloat16 KV cache before SM100")


def split_backends(res: Resolution, kv_cache_dtype: str, model_arch: str = "") -> DsaDecision:
    """The DSA prefill and decode backends for a KV cache of ``kv_cache_dtype``."""
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise ValueError(f"invalid DSA KV-cache dtype {kv_cache_dtype!r}; accepted: {', '.join(KV_CACHE_DTYPES)}")
    tier, fp8 = res.resolved, kv_cache_dtype == "fp8_e4m3"
    if res.match not in _PREBUILT_MATCHES:
        return DsaDecision(PORTABLE, PORTABLE,
                           f"{res.requested} is not a known tier ({res.match} match of {tier}): the prebuilt "
                           f"DSA kernels have no build for it; {PORTABLE} compiles for the device")
    if model_arch == GLM_DSA_ARCH and fp8 and tier.major == 12:
        return DsaDecision("flashinfer_sparse_mla", "flashinfer_sparse_mla",
                           f"tier {tier}: GLM-5 with an FP8 KV cache on SM12x", glm_sm12=True)
    blackwell = tier.major >= 10
    if fp8:
        backend = "trtllm" if blackwell else "flashmla_kv"
        return DsaDecision(backend, backend, f"tier {tier}: FP8 KV cache -> {backend}")
    decode = "trtllm" if blackwell else "fa3"
    return DsaDecision("flashmla_sparse", decode, f"tier {tier}: bfloat16 KV cache -> flashmla_sparse / {decode}")
