"""Kernel gates: capability checks that decide which compiled kernel can run on the device.

The fallback rule (docs/fallback.md) splits capability uses in two.  Decisions (sizes,
backends, on/off) take the registry's tier and are routed.  Identity, what SGLang
compiles, selects or loads kernels for, stays the device's own: its platform probes
answer the device's capability through the plugin and in a patched tree alike.  A
*kernel gate* is identity read without a probe: a function whose capability branches pick
between kernels built for particular architectures (``sm_90a``, ``sm_100a``/``sm_103a``,
CuTe DSL or PTX that uses tcgen05), or check a hardware requirement of the kernel the
device will load.  Routing one to the tier would make it load a kernel for the tier's
architecture on a device that cannot run it; left to the device it gives the answer the
registry's identity facts give on every capability (``test_fallback_rule.py``).

Each entry names the function (or class, or module: every site inside it), the kernels it
gates, and the evidence in SGLang 0.5.23 (the site's own comment or message).  The audit
counts a site inside a gate as ``device`` instead of ``unrouted``; a site that is a
backend *decision* never belongs here (DSA's ``major >= 10`` defaults are routed, D10).
``test_audit.py`` checks that every entry still matches sites of the installed release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

_ATT = "sglang.srt.layers.attention"
_LIN = f"{_ATT}.linear"


@dataclass(frozen=True)
class KernelGate:
    path: str  # module, module.function, module.Class or module.Class.method
    kernels: str  # what the capability check selects or requires
    evidence: str  # where SGLang says so


KERNEL_GATES: Sequence[KernelGate] = (
    # DSA / NSA (DeepSeek V3.2, V4.x, GLM-5, MiniMax, Qwen sparse)
    KernelGate("sglang.srt.arg_groups.overrides._check_dsa_backend_constraints",
               "TileLang FP8 KV cache: FP8 tensor cores", "'CUDA TileLang FP8 KV requires SM89 or newer'"),
    KernelGate(f"{_ATT}.dsa_backend._validate_triton_sparse_mla_backend",
               "Triton sparse MLA prefill kernels", "'triton_sparse_mla requires SM90 (Hopper) or newer'"),
    KernelGate(f"{_ATT}.dsa_backend._validate_flashmla_sparse_q8_backend",
               "FlashMLA sparse Q8 prefill (sm_90a)", "'--dsa-prefill-backend flashmla_sparse_q8 is SM90-only'"),
    KernelGate(f"{_ATT}.dsa_backend.DeepseekSparseAttnBackend",
               "FlashMLA sparse padding (64 on SM90, 128 on SM100), FlashInfer trtllm ragged / decode "
               "workspace (SM100 kernels)", "comments at its device_sm_major checks ('TRT-LLM kernels ... on SM100')"),
    KernelGate(f"{_ATT}.dsa.dsa_backend_kpool.DeepseekSparseAttnBackendKPoolMixin",
               "k-pool tail kernel (trtllm on SM100, FA3 on SM90) and DeepGEMM paged-MQA schedule on SM90",
               "_resolve_kpool_tail_backend / _build_kpool_paged_mqa_schedule_metadata"),
    KernelGate(f"{_ATT}.dsa.dsa_indexer_kpool.IndexerKPool._should_use_tilelang_paged_mqa_logits",
               "DeepGEMM paged MQA logits on SM90 (32 or 64 heads), else TileLang", "its head-count check"),
    KernelGate(f"{_ATT}.dsv4.v41_indexer",
               "DeepGEMM fp8/fp4 MQA-logits indexer kernels (SM100+)",
               "'DeepGEMM's fp8_fp4 mqa-logits kernels need SM100+'"),
    KernelGate(f"{_ATT}.dsv4.dsv41_sparse.fused_low_ratio_compress_supported",
               "fused c1/c2/index-K decode kernels (fp4 packing with cvt.rn.satfinite.e2m1x2, SM100+)",
               "its docstring"),
    KernelGate(f"{_ATT}.deepseek_v4_backend.DeepseekV4AttnBackend._low_ratio_compress_decode",
               "the same fused compress kernels", "is_sm100_or_newer() of dsv4.v41_indexer"),
    KernelGate(f"{_ATT}.graph_variants.create_dsv41_candidate_graph_variants",
               "CUDA-graph variants for the DSv4.1 candidate indexer kernels (SM100+)", "its capability condition"),
    KernelGate(f"{_ATT}.minimax_sparse_ops",
               "fmha_sm100 sparse kernels (sm_100a and sm_103a)",
               "'fmha_sm100/jit.py emits both sm_100a and sm_103a'"),
    KernelGate(f"{_ATT}.qwen_sparse_attn_backend",
               "FlashInfer trtllm paged decode (validated on SM100 and SM120, corrupts on SM121) and the "
               "SM121 varlen kernel", "'numerically validated on SM100 and SM120'"),
    # MHA
    KernelGate(f"{_ATT}.hpc_ops_backend.HPCOpsAttnBackend.__init__",
               "HPC-Ops attention kernels (sm_90a)", "'the HPC-Ops kernels ship sm90a only'"),
    # Linear attention (GDN, KDA)
    KernelGate("sglang.srt.arg_groups.attention_hook.handle_linear_attn_backend",
               "FlashInfer GDN on SM100+: bfloat16 SSM state and CUDA 13 (CuTe DSL)",
               "'--linear-attn-decode-backend flashinfer on SM100+ requires --mamba-ssm-dtype bfloat16'"),
    KernelGate(f"{_LIN}.gdn_backend.flashinfer_gdn_prefill_default",
               "FlashInfer GDN prefill where validated: the fused Hopper kernel (SM90), CuTe DSL on SM100",
               "'FlashInfer for the narrow SM90/SM100 GDN prefill domains we validated'"),
    KernelGate(f"{_LIN}.kda_backend",
               "FlashInfer KDA prefill and the CuTe DSL MTP kernel (SM100 / SM103)",
               "flashinfer_kda_prefill_default, KDAAttnBackend._can_run_dspark_cutedsl_mtp"),
    KernelGate(f"{_LIN}.kernels",
               "GDN/KDA kernel wrappers: CuTe DSL (SM10x), FlashInfer (SM90 / SM100 state pools), "
               "PTX tcgen05 + TMEM (SM100 / SM103)", "'tcgen05 + TMEM: B200 / GB200 (SM100) and B300 / GB300 (SM103)'"),
)


def gate_for(module: str, scope: str) -> Optional[KernelGate]:
    """The kernel gate a site at ``module`` / ``scope`` is inside, if any."""
    full = f"{module}.{scope}" if scope else module
    for gate in KERNEL_GATES:
        if full == gate.path or full.startswith(gate.path + "."):
            return gate
    return None
