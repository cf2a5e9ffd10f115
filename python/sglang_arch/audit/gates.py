"""Kernel gates, site by site: capability checks that decide which compiled kernel can run.

The fallback rule (docs/fallback.md) splits capability uses in two.  Decisions (sizes,
backends, on/off) take the registry's tier and are routed.  Identity, what SGLang
compiles, selects or loads kernels for, stays the device's own.  A *kernel gate* asks
"which compiled kernel can run here?" (a kernel built for ``sm_90a``, ``sm_100a`` /
``sm_103a``, CuTe DSL or PTX that uses tcgen05) or checks a hardware requirement of the
kernel the device will load.  Routed to a tier, it would load a kernel for the tier's
architecture on a device that cannot run it.

Each entry names one check: the file, the function (its qualified name, "" at module
level), the check (text of the site's line), and the reason, with SGLang 0.5.23's own
words.  Only the sites of that function whose line holds the check are gates; any other
capability site beside them, added later or not, is classified by what it decides
(``classify.py``), so a decision never hides behind a gate.  Structural gates need no
entry: a kernel's capability window, an ``assert``, a check whose only branch raises
(``classify.kind_for``).  A check that picks among backends or sizes by a range of
capabilities is a decision, even inside a backend class (DSA's trtllm-gen vs FA3, the
linear-attention backends' "validated" defaults).  ``test_audit.py`` checks that every
entry still matches a site of the installed release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

_ATT = "srt/layers/attention"
_LIN = f"{_ATT}/linear"


@dataclass(frozen=True)
class KernelGate:
    file: str  # relative to the sglang package: srt/...
    function: str  # qualified name of the enclosing function ("" at module level)
    check: str  # text of the site's line that holds the check
    reason: str  # the kernels it gates, in SGLang's words

    def matches(self, file: str, scope: str, code: str) -> bool:
        return file == self.file and scope == self.function and self.check in code


_DSA = f"{_ATT}/dsa_backend.py"
_V4 = f"{_ATT}/deepseek_v4_backend.py"
_FA4 = "kernels/ops/attention/flash_attn/cute/interface.py"
_EXTEND = "kernels/ops/attention/extend_attention.py"
_SMEM = ("Triton tile sizes the device's shared memory and registers hold ('sm120 ... has a much smaller shared "
         "memory size (100K)', 'Hopper block sizes cause PTX register exhaustion' on sm_100a)")

KERNEL_GATES: Sequence[KernelGate] = (
    # DSA / NSA (DeepSeek V3.2, V4.x)
    KernelGate(_DSA, "DeepseekSparseAttnBackend._forward_flashmla_sparse", "required_padding = 128 if",
               "FlashMLA sparse kernel head padding: 'num_heads to be a multiple of 64 (Hopper) or 128 (Blackwell)'"),
    KernelGate(_DSA, "DeepseekSparseAttnBackend.__init__", "self.device_sm_major >= 10 or self.dsa_decode_impl",
               "workspace of the TRT-LLM kernels: 'ragged attention on SM100/B200, or trtllm decode'"),
    KernelGate(f"{_ATT}/dsa/dsa_backend_kpool.py",
               "DeepseekSparseAttnBackendKPoolMixin._build_kpool_paged_mqa_schedule_metadata",
               "if self.device_sm_major == 9:", "DeepGEMM's paged-MQA schedule metadata, built for its SM90 kernel"),
    KernelGate(f"{_ATT}/dsa/dsa_indexer_kpool.py", "IndexerKPool._should_use_tilelang_paged_mqa_logits",
               "return arch_major == 9", "DeepGEMM paged MQA logits on SM90 exist for 32 or 64 heads; TileLang else"),
    KernelGate(f"{_ATT}/dsv4/v41_indexer/__init__.py", "_use_deep_gemm_prefill", "is_sm100_or_newer()",
               "'DeepGEMM's fp8_fp4 mqa-logits kernels need SM100+'"),
    KernelGate(f"{_ATT}/dsv4/v41_indexer/__init__.py", "make_candidate_indexer", "is_sm100_or_newer()",
               "'DeepGEMM's fp8_fp4 mqa-logits kernels need SM100+' (the candidate indexer runs on them)"),
    KernelGate(f"{_ATT}/dsv4/v41_indexer/__init__.py", "make_full_topk_indexer", "is_sm100_or_newer()",
               "'DeepGEMM's fp8_fp4 mqa-logits kernels need SM100+' (decode on them)"),
    KernelGate(_V4, "DeepseekV4AttnBackend._low_ratio_compress_decode", "is_sm100_or_newer()",
               "fused c1/c2/index-K decode kernels: fp4 packing with cvt.rn.satfinite.e2m1x2 (SM100+)"),
    KernelGate(_V4, "_create_flashmla_metadata", "get_platform().is_sm120",
               "FlashMLA ships no SM120 kernels: no metadata to build there"),
    KernelGate(_V4, "_fast_flashmla_sched_shape", "get_platform().is_blackwell",
               "'FlashMLA's head64 sm100 decode scheduling constants'"),
    KernelGate(_V4, "DeepseekV4AttnBackend.init_forward_metadata_indexer",
               "self.enable_deepseek_v4_fp4_indexer and get_platform().is_sm120",
               "the metadata the indexer kernel that runs reads: 'The SM120 FP4 kernel schedules split_kv=128, while "
               "the generic JIT metadata planner encodes split_kv=256'"),
    KernelGate(_V4, "DeepseekV4AttnBackend._use_sparse_prefill", "and not get_platform().is_sm120",
               "sparse prefill runs FlashMLA's flash_mla_sparse_fwd (_forward_prefill_sparse); FlashMLA ships no "
               "SM120 kernels"),
    KernelGate(f"{_ATT}/dsv4/metadata.py", "PagedIndexerMetadata.__post_init__",
               "sm120_row_cap=_SM120_INDEXER_M_CHUNK if _IS_SM120 else None",
               "'DeepGEMM's paged-MQA metadata kernel cannot schedule more rows than this on SM120 (shared-memory "
               "cap)'"),
    KernelGate(f"{_ATT}/qwen_sparse_attn_backend.py", "_resolve_trtllm_sparse_decode",
               "if not (is_sm100_supported() or is_sm120()):",
               "FlashInfer's TRT-LLM paged decode is 'numerically validated on SM100 and SM120 ... it silently "
               "corrupts long-context decode on SM121/GB10': where its compiled kernels compute correctly"),
    KernelGate(f"{_ATT}/qwen_sparse_attn_backend.py", "QwenSparseAttnBackend._forward_trtllm_sparse",
               "if k_buffer.dtype == torch.float8_e4m3fn and is_sm100_supported()",
               "the KV dtype the decode kernel that runs takes: 'TRTLLM-gen takes BF16 q with FP8-E4M3 KV ... "
               "validated on SM10x only, SM120 keeps the BF16 scratch'"),
    # MHA / MLA
    KernelGate(f"{_ATT}/flashinfer_mla_backend.py", "FlashInferMLAAttnBackend.__init__", "get_platform().is_sm100",
               "FlashInfer's CUTLASS ragged prefill kernels are built for SM100"),
    KernelGate(f"{_ATT}/flashinfer_backend.py", "FlashInferAttnBackend.__init__", "get_platform().is_sm100",
               "FlashInfer's SM100 CUTLASS FMHA dispatch ('only instantiates 64x64, 128x128, and 192x128 head "
               "dimensions', TMA descriptors under piecewise CUDA graphs): FA2 kernels there"),
    KernelGate(f"{_ATT}/trtllm_mha_backend.py", "TRTLLMHAAttnBackend.__init__", "self.is_xqa_impl",
               "'XQA (SM90/SM120) consumes the legacy linear NVFP4 scale layout ... TRT-LLM GenMHA (SM100) consumes "
               "physical HND scales': which compiled kernel runs"),
    KernelGate(f"{_ATT}/trtllm_mha_backend.py", "TRTLLMHAAttnBackend.__init__", "self.uses_trtllm_gen_native_fp4",
               "TRT-LLM GenMHA's native FP4 path (SM100 kernels), not XQA"),
    KernelGate("srt/layers/quantization/fp4_kv_cache_quant_method.py", "NVFP4KVCacheMethod.__init__",
               "get_platform().is_sm100", "the NVFP4 KV cache's scale layout the compiled attention kernel reads "
               "(trtllm_mha_backend.py: 'XQA (SM90/SM120) consumes the legacy linear NVFP4 scale layout ... TRT-LLM "
               "GenMHA (SM100) consumes physical HND scales')"),
    KernelGate(_FA4, "_flash_attn_fwd", "arch // 10",
               "FA4 (CuTe DSL): the forward kernel class and its compile-time parameters for the device's "
               "architecture (Sm80 / Sm90 / Sm100 kernels)"),
    KernelGate(_FA4, "_validate_head_dims", "compute_capability",
               "FA4's head dims per architecture's kernels"),
    KernelGate(_EXTEND, "_get_block_sizes_for_extend_attention", "CUDA_CAPABILITY", _SMEM),
    # requirements of the kernel that runs, set from the model's hooks
    KernelGate("srt/models/deepseek_common/attention_backend_handler.py", "handle_attention_fa4",
               "if not get_platform().is_sm100_or_sm110:",
               "'FA4 absorbed MLA feeds q_nope through the qv argument, which flash_attn.cute only implements on "
               "SM100/SM110 (not SM120)' (the catalog's fa4_cute_mla): the forward path the kernel offers"),
    KernelGate("srt/arg_groups/model_hook.py", "handle_model_specific_adjustments", "if get_platform().is_sm120:",
               "DeepSeek V4's kernel switches on SM120: 'only recent DeepGEMM builds ship the SM120 kernels', 'the "
               "default top-k v2 path still requires unsupported resources', the indexer 'runs the TileLang kernel "
               "(works on stock DeepGEMM)'"),
    KernelGate("srt/arg_groups/model_hook.py", "handle_model_capability_adjustments",
               "and (get_platform().is_sm90 or get_platform().is_sm100)",
               "'Hopper/Blackwell's default FA backend can consume raw K/V tensors for a single embedding prefill': "
               "a feature of the FA3 (sm_90a) and FA4 kernels, for a backend already chosen"),
    KernelGate("srt/server_args.py", "m3_fp8_attn_gemm_enabled", "and get_platform().is_sm100",
               "'SM100 (MSA fp8 variants and trtllm-gen fp8 dense kernels are sm100-only)': the fp8 kernels of the "
               "trtllm_mha backend already chosen"),
    KernelGate("srt/arg_groups/model_overrides/minimax_m3.py", "_minimax_m3_overrides", "and get_platform().is_sm100",
               "logs whether m3_fp8_attn_gemm_enabled's sm100-only fp8 kernels are active (its branches only log)"),
    # all-reduce fusion
    KernelGate("srt/models/minimax_m3.py", "_uses_push_plane_fusion", "get_platform().device_sm >= 90",
               "the push-plane all-reduce fusion kernel is a cluster launch ('cluster launch: SM90+'): thread block "
               "clusters exist from SM90 on"),
    KernelGate("kernels/kda_kernels/flux2_token_cat_fp8_triton.py", "try_flux2_token_cat_fp8",
               "get_device_capability(attention.device)[0] < 10", "the FP8 token-cat Triton kernel needs SM100+ "
               "(falls back to torch otherwise); 'attention' is a tensor's name, not a backend"),
    KernelGate("kernels/ops/diffusion/layout/flux2_token_cat_nvfp4_jit.py", "try_flux2_token_cat_nvfp4",
               "get_device_capability(attention.device) != (10, 3)", "the NVFP4 token-cat JIT kernel is built for "
               "sm_103a; 'attention' is a tensor's name"),
)


def gate_for(file: str, scope: str, code: str) -> Optional[KernelGate]:
    """The listed kernel gate of a site, if any."""
    for gate in KERNEL_GATES:
        if gate.matches(file, scope, code):
            return gate
    return None
