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
    whole: bool = False  # the check is the site's whole line (a fact read its function reads elsewhere too)

    def matches(self, file: str, scope: str, code: str) -> bool:
        if file != self.file or scope != self.function:
            return False
        return code.strip() == self.check if self.whole else self.check in code


_DSA = f"{_ATT}/dsa_backend.py"
_V4 = f"{_ATT}/deepseek_v4_backend.py"
_FA4 = "kernels/ops/attention/flash_attn/cute/interface.py"
_EXTEND = "kernels/ops/attention/extend_attention.py"
_SMEM = ("Triton tile sizes the device's shared memory and registers hold ('sm120 ... has a much smaller shared "
         "memory size (100K)', 'Hopper block sizes cause PTX register exhaustion' on sm_100a)")

_DG_SCALES = ("the scale layout DeepGEMM's kernel for the device reads: packed UE8M0 on SM100 and SM120 "
              "(configurer.py's DEEPGEMM_SCALE_UE8M0; 'SM100 DeepGEMM casts the weight scales to UE8M0'), "
              "TMA-aligned FP32 otherwise")
_GENMHA_SCALES = ("the KV scale convention of the kernel that reads the NVFP4 KV cache: 'SM100 uses TRT-LLM GenMHA "
                  "kernels that expect KV scales as amax / 448 ... SM120 uses a different kernel path where scales "
                  "already include this factor'")
_SHARED_FUSION = ("a capability floor whose only branch returns why the shared-expert fusion cannot be used: "
                  "'Only ... on NV-platform with capability >= 80 or AMD-platform with capability >= gfx942(MI30x) "
                  "can use shared experts fusion optimization' (MUSA from 3.1; under expert parallelism AMD only)")

_TK_LAYOUT = ("what the MXFP4 weight-scale layout triton_kernels picks from the device's own capability requires "
              "(triton_kernels/tensor_details/layout.py make_default_matmul_mxfp4_w_scale_layout: Blackwell from "
              "10, Hopper from 9, else strided)")

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
    KernelGate(_FA4, "_flash_attn_fwd", "use_dedicated_hd256_kernel",
               "FA4 (CuTe DSL): 'hd=256 2CTA forward uses dedicated kernel (Blackwell family)', the kernel class "
               "compiled for arch // 10 in [10, 11]"),
    KernelGate(_FA4, "flash_attn_varlen_func", "get_forward_host(runtime_arch)",
               "FA4 (CuTe DSL): the forward host compiled for the device's architecture ('get_forward_host'; "
               "None where no kernel of that architecture exists)"),
    KernelGate(_EXTEND, "_get_block_sizes_for_extend_attention", "CUDA_CAPABILITY", _SMEM),
    KernelGate("srt/layers/moe/fused_moe_triton/triton_kernels_moe.py", "", "if get_platform().is_sm120:",
               "triton_kernels' persistent matmul (TMA gather / scatter) off where it has no support: 'use the "
               "regular gather/scatter implementation for unsupported devices'"),
    KernelGate("srt/layers/moe/moe_runner/deep_gemm_sm120.py", "use_swizzle", "return not _is_sm120",
               "the activation layout SM120's DeepGEMM kernel reads: 'SM120's contiguous GEMM consumes "
               "standard-layout activations only'"),
    KernelGate("srt/layers/moe/moe_runner/deep_gemm_sm120.py", "allows_masked_standard_layout",
               "return not _is_sm120",
               "'SM120 cannot serve the masked-standard layout for DSV4 shapes: its varlen activation kernel "
               "requires D // 8 >= num_experts'"),
    KernelGate("srt/layers/moe/moe_runner/deep_gemm_sm120.py", "_eligible", "_is_sm120",
               "whether SM120's own contiguous DeepGEMM MoE kernel serves the batch: it exists for SM120 alone"),
    KernelGate("srt/layers/quantization/fp8_utils.py", "_get_flashinfer_groupwise_backend", "if major >= 12:",
               "the FlashInfer FP8 groupwise GEMM kernel each architecture has: 'SM120/121: CUTLASS only. "
               "SM100/103: TRTLLM only.'"),
    KernelGate("srt/mem_cache/deepseek_v4_memory_pool.py", "select_dsv4_kv_layout",
               'if mode == "auto" and not is_sm100:',
               "the V4.1 KV cache layouts' kernels: 'the V4.1 KV cache layouts need an SM100 / SM103 GPU' "
               "(auto keeps the V4 layout elsewhere)"),
    KernelGate("srt/utils/common.py", "is_mnnvl_fabric_device", 'if any(tag in name for tag in ("GB200", "GB300")):',
               "whether the GPU sits on an NVLink fabric, hardware it has or not: 'The GB200/GB300 superchips are "
               "recognized by device name. Other NVLink fabric parts ... are recognized by NVML'"),
    KernelGate("kernels/kda_kernels/qwen3x_nvfp4_gemm.py", "_has_runtime", "== (12, 0)",
               "whether the Qwen3-X NVFP4 GEMM's runtime exists here: the CuTe DSL kernel built for capability "
               "(12, 0) alone, with cutlass and cuda.bindings installed"),
    KernelGate("kernels/ops/attention/fa4_sm120/dispatch.py", "get_forward_arch", "get_forward_host(arch)",
               "'Return the device arch when it has an architecture-owned forward host': FA4's host compiled for "
               "the device's architecture"),
    KernelGate("kernels/ops/moe/moe_fused_gate.py", "moe_fused_gate", "== (12, 0)",
               "the SM120 MTP router top-22 kernel (SGLANG_OPT_SM120_MTP_ROUTER_TOP22), built for (12, 0) alone"),
    KernelGate("kernels/ops/diffusion/norm/flux2_gated_resnorm_jit.py", "_blackwell_or_newer", "[0] >= 10",
               "the Flux2 gated residual-norm JIT kernel's requirement: a CUDA build on SM100 or newer"),
    KernelGate("kernels/ops/lplb/torch_solver.py", "_init_fused_backend", "if cap[0] < 9:",
               "'LPLB fused solver disabled: GPU SM ... < 9.0 (requires Hopper or newer)'"),
    KernelGate("kernels/kda_kernels/sm120_fp8.py", "try_sm120_fp8_linear", "use_kda_gemm",
               "the SM120 FP8 KDA GEMM runtime, built for capability (12, 0) alone ('capability == (12, 0) and "
               "... _has_kda_runtime()'), else the caller's own GEMM"),
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
    # MoE, quantization and GEMM kernels
    KernelGate("kernels/kda_kernels/sm120_fp8.py", "try_sm120_fp8_linear", "if capability[0] != 12:",
               "'Run the best qualified SM12x FP8 small-M kernel, or return None': the SM12x kernels (the skinny "
               "GEMM module is JIT-built for (12, 0) only and raises elsewhere)"),
    KernelGate("kernels/ops/attention/dsv4/index_logits.py", "index_weights_dtype", "and _is_sm100()",
               "the head-weight dtype DeepGEMM's logits kernel takes: 'DeepGEMM reduces in the head weights' dtype "
               "and takes bf16 weights only on SM100 with bf16 logits'"),
    KernelGate("kernels/ops/gemm/fused_a_gemm.py", "fused_a_gemm_weight_eligible", "and _DEVICE_SM >= 90",
               "the fused QKV-A GEMM kernels: the JIT one is a 'Runtime-compiled CUDA C++ kernel for SM90+ (Hopper) "
               "GPUs' (dsv3_fused_a_gemm.py), the CuTe DSL one serves SM120+"),
    KernelGate("kernels/ops/layernorm/mhc.py", "_mhc_pre_gemm_sqrsum_dispatch", "if not is_sm120_supported():",
               "how the TileLang kernel compiles for the device: 'SM120's TileLang pipeline cannot warp-specialize "
               "this kernel (the role marker fails on tirx.Bind)'"),
    KernelGate("kernels/ops/layernorm/mhc.py", "mhc_pre_gemm_sqrsum_splitk_kernel", "if is_sm120_supported()",
               "how the TileLang kernels compile for the device: 'SM120 cannot compile the warp-specialized form of "
               "these kernels'"),
    KernelGate("kernels/ops/moe/inkling_moe.py", "grouped_gemm_triton", '"num_stages": 3 if is_sm121() else 4,',
               "the pipeline depth the device's shared memory holds: 'sm_121 (GB10 / DGX Spark) caps shared memory "
               "at 99 KB per block and num_stages=4 needs 108 KB'"),
    KernelGate("kernels/ops/quantization/fp8_utils.py", "cuda_capability_uses_fp8_e4b15",
               "return cuda_capability < (8, 9)", "'Triton names E4M3 as fp8e4b15 on CUDA architectures before "
               "SM89': FP8 E4M3 is a native type from SM89 (Ada) on"),
    KernelGate("kernels/ops/quantization/fp8_utils.py", "use_fp8_e4b15_for_e4m3fn",
               "return cuda_capability_uses_fp8_e4b15(cuda_capability)",
               "the device's answer to 'Triton names E4M3 as fp8e4b15 on CUDA architectures before SM89'"),
    KernelGate("srt/arg_groups/kv_cache_hook.py", "handle_kv4_compatibility",
               "if uses_sm100_trtllm_nvfp4 and uses_draft_model:",
               "the only draft backend that reads the SM100 native NVFP4 layout (set when unset, else raises): 'SM100 "
               "native NVFP4 speculative decoding requires --speculative-draft-attention-backend=trtllm_mha so the "
               "draft worker consumes its physical NVFP4 KV layout' (the GenMHA layout: NVFP4KVCacheMethod's gate)"),
    KernelGate("srt/arg_groups/kv_cache_hook.py", "handle_kv4_compatibility", "uses_sm100_mixed_nvfp4",
               "what the SM100 mixed NVFP4 layout's kernels support: 'FlashInfer prefill reads a transient FP8 "
               "dequant workspace. Its host-built page layout cannot be refreshed inside a target-verify CUDA "
               "graph, whereas the decode child consumes the physical NVFP4 cache directly'"),
    # MiMo-V2's arm of the all-reduce fusion auto-enable: the SM100 operand of the check that
    # returns before the MNNVL CuTe DSL fusion ("cutedsl") is enabled for it; the pass's own
    # SM90 / SM100 condition below it is the registry's (step 3).
    KernelGate("srt/arg_groups/overrides.py", "_flashinfer_allreduce_fusion_auto_enable", "get_platform().is_sm100",
               "what FlashInfer's MNNVL CuTe DSL all-reduce fusion, which MiMo-V2 auto-enables as 'cutedsl', "
               "runs on: SM100 with a bf16 model and the TP sizes its kernel takes ('MNNVL CuTe DSL fusion supports "
               "tp_size in (2, 4, 8, 16)', layers/flashinfer_mnnvl_cutedsl.py)", whole=True),
    KernelGate("srt/arg_groups/model_overrides/gpt_oss.py", "_gpt_oss_overrides",
               "if get_platform().is_blackwell and get_nvidia_driver_version() >= (595,):",
               "whether the triton_kernels MoE kernels can run: 'The triton_kernels package segfaults on Blackwell "
               "(B200) with NVIDIA driver >= 595'"),
    KernelGate("srt/batch_overlap/single_batch_overlap.py", "compute_overlap_args", "if is_blackwell():",
               "the combine signal in the form the down GEMM that overlaps reads: one uint32 per expert for the "
               "Blackwell (CuTe DSL) kernel ('ours v2 use uint32 not int32'), one int32 per 64-row block for "
               "DeepGEMM's, which enable_combine_down_gemm_two_stream_overlap allows off Blackwell only"),
    KernelGate("srt/layers/moe/token_dispatcher/deepep.py", "_DeepEPDispatcherImplLowLatency._combine_core",
               "if is_blackwell():", "the overlap arguments DeepEP's low-latency combine takes with the down GEMM's "
               "signal of the device's kernel (src_signals on Blackwell; comp_signal, block_m and packed_recv_count "
               "for DeepGEMM's): compute_overlap_args' gate"),
    KernelGate("srt/layers/moe/mega_moe.py", "_mega_moe_max_num_sms", "if _device_sm < 100:",
               "the launch of the MegaMoE kernel that runs: 'The SM90 MegaMoE implementation does not use the "
               "whole-grid clustered launch that needs a residency margin'"),
    KernelGate("srt/layers/moe/mega_moe.py", "is_mega_moe_experts_ready", "if _device_sm == 90:",
               "which MegaMoE kernel exists: SM90's FP8 kernel (is_sm90_fp8_mega_moe_available), 'The SM100 mega "
               "kernels exist for compute capability 10.x only'"),
    KernelGate("srt/layers/moe/mega_moe.py", "is_mega_moe_experts_ready",
               "return is_sm90_fp8_mega_moe_available(experts)",
               "the SM90 FP8 MegaMoE kernel's availability, on SM90 only"),
    KernelGate("srt/layers/moe/mega_moe.py", "is_mega_moe_experts_ready", "return _device_sm // 10 == 10",
               "'The SM100 mega kernels exist for compute capability 10.x only'"),
    KernelGate("srt/layers/moe/mega_moe.py", "should_fuse_mega_moe_shared_experts", "and is_sm100_supported()",
               "'DeepGEMM's in-kernel shared expert takes FP8 weights on SM100 fp8xfp4 only' (the fusion itself is "
               "SGLANG_OPT_DEEPGEMM_MEGA_MOE_FUSE_SHARED_EXPERTS)"),
    KernelGate("srt/layers/deep_gemm_wrapper/compile_utils.py", "_get_fp8_scale_workspace",
               "if DEEPGEMM_NEED_TMA_ALIGNED_SCALES:", _DG_SCALES),
    KernelGate("srt/layers/deep_gemm_wrapper/compile_utils.py", "_get_fp8_scale_workspace",
               "if DEEPGEMM_SCALE_UE8M0:", _DG_SCALES),
    KernelGate("srt/layers/deep_gemm_wrapper/configurer.py", "",
               "DEEPGEMM_NEED_TMA_ALIGNED_SCALES = not (DEEPGEMM_SCALE_UE8M0 or _is_musa)", _DG_SCALES),
    KernelGate("srt/layers/deep_gemm_wrapper/entrypoint.py", "_sanity_check_input", "if not DEEPGEMM_SCALE_UE8M0:",
               "checks the input scales are the UE8M0 ones DeepGEMM's kernel for the device reads (asserts them); "
               + _DG_SCALES),
    KernelGate("srt/layers/quantization/fp8.py", "Fp8LinearMethod._process_mxfp8_linear_weight_scale",
               "if DEEPGEMM_SCALE_UE8M0:", "'Pre-packed; GEMM must be called with disable_ue8m0_cast=True': "
               + _DG_SCALES),
    KernelGate("srt/layers/quantization/fp8.py", "Fp8MoEMethod._process_mxfp8_moe_weights._pack_moe_scale_for_deepgemm",
               "if DEEPGEMM_SCALE_UE8M0:", "'Blackwell: int32 MN-major TMA-packed. Hopper returns fp32 (FP4 API "
               "converts)': " + _DG_SCALES),
    KernelGate("srt/models/deepseek_v4.py", "", "_FP8_WO_A_UE8M0 = _FP8_WO_A_GEMM and DEEPGEMM_SCALE_UE8M0",
               "the wo_a weight scales in DeepGEMM's format for the device (format_ue8m0): " + _DG_SCALES),
    KernelGate("srt/layers/quantization/fp4_kv_cache_quant_method.py", "NVFP4KVCacheMethod.load_scales_from_model",
               "if get_platform().is_sm100 and k_scale != 1.0:", _GENMHA_SCALES),
    KernelGate("srt/layers/quantization/fp4_kv_cache_quant_method.py", "NVFP4KVCacheMethod.load_scales_from_model",
               "if get_platform().is_sm100 and v_scale != 1.0:", _GENMHA_SCALES),
    KernelGate("srt/layers/quantization/fp8_utils.py", "use_rowwise_torch_scaled_mm",
               "return get_device_capability() >= (9, 4) and torch_release >= (2, 7)",
               "ROCm: 'determine if it is on a platform that supports torch._scaled_mm rowwise feature' (gfx94x on)"),
    KernelGate("srt/layers/quantization/fp8_utils.py", "deepgemm_w8a8_block_fp8_linear_with_fallback",
               "if get_platform().is_sm90 and act_scale_ue8m0:",
               "'SM90 consumes fp32 scales; DeepGEMM aligns their storage for TMA': " + _DG_SCALES),
    KernelGate("srt/layers/quantization/fp8_utils.py", "apply_fp8_linear", "and not native_scalar_a_scale",
               "the A-scale shape the CUTLASS FP8 GEMM built for the device takes: 'Unsupported CUTLASS epilogues "
               "require one A scale per row' (a scalar A scale on SM90, SM100 and SM120); three lines of one check (two tests, static_quant_fp8's repeat_scale)"),
    KernelGate("srt/layers/quantization/fp8_utils.py", "can_auto_enable_marlin_fp8", "return 80 <= sm < 89",
               "FP8 tensor-core MMA (e4m3 / e5m2) exists from SM89 (PTX ISA: mma with .e4m3 / .e5m2 requires "
               "sm_89): below it, on SM8x, only the weight-only FP8 Marlin kernel runs FP8 checkpoints"),
    KernelGate("srt/layers/quantization/fp8.py", "Fp8LinearMethod.prepare_deepgemm_mxfp8_input",
               "and get_platform().is_blackwell",
               "whether the layer's FlashInfer MXFP8 GEMM (its mxfp8_dense_backend, flashinfer_cutedsl or "
               "flashinfer_cutlass, picked by the FP8 GEMM decision) can take the DeepGEMM-packed pair: those "
               "kernels run on Blackwell only (FlashInfer's _cute_dsl_gemm_mxfp8_requirement: 100, 103, 107; "
               "_cutlass_gemm_mxfp8_requirement: 100-121), and the layer's scale processing raises elsewhere "
               "('_process_mxfp8_linear_weight_scale': 'if not (get_platform().is_blackwell and "
               "is_flashinfer_available())')"),
    KernelGate("srt/layers/quantization/mxfp4.py", "_swizzle_mxfp4", "elif get_platform().is_sm90:",
               _TK_LAYOUT + ": on Hopper HopperMXScaleLayout(num_warps), whose scales must be padded "
               "('_pad_hopper_mxfp4_scale') and which takes split_k 1"),
    KernelGate("srt/layers/quantization/mxfp4.py", "_swizzle_mxfp4",
               "elif get_platform().is_cuda and get_platform().device_capability < (9, 0):",
               _TK_LAYOUT + ": below Hopper StridedLayout, which carries no warp count, so the kernel's is pinned "
               "to the swizzle's ('No scale layout carries the warp count below Hopper')"),
    KernelGate("srt/layers/quantization/kvfp4_tensor.py", "NVFP4KVQuantizeUtil.quantize",
               "if get_platform().is_sm100 or get_platform().is_sm120:",
               "FlashInfer's nvfp4_kv_quantize 'Requires SM100+ (Blackwell) for the cvt.rn.satfinite.e2m1x2.f32 "
               "PTX instruction' (SM90 quantizes with fp4_quantize)"),
    KernelGate("srt/layers/quantization/marlin_utils.py", "should_use_atomic_add_reduce",
               "if device_capability[0] < 9 and dtype == torch.bfloat16:",
               "Marlin's atomic-add reduce: 'sm8x doesn't support atomicAdd + bfloat16 natively'"),
    KernelGate("srt/lora/marlin_lora_temp/policy.py", "validate_experimental_sgl_marlin_contract",
               "if device_capability[0] < 9:", "a requirement (its only branch records the error the contract "
               "raises): 'CUDA compute capability 9.0 or newer is required'"),
    KernelGate("srt/model_loader/loader.py", "_get_quantization_config",
               "if major is not None and minor is not None:",
               "guards the quantization method's requirement check: 'The quantization method ... is not supported "
               "for the current GPU. Minimum capability: ...' (raises)"),
    KernelGate("srt/models/gpt_oss.py", "TinyGemmLinear.__init__", "_is_tinygemm_supported",
               "FlashInfer's tinygemm_bf16 can run here: an 'SM90+ optimized small GEMM' that 'Uses TMA' "
               "(_is_tinygemm_supported: SM90 or Blackwell)"),
    # shared-expert fusion: the capability floors SGLang states the fusion can run from
    KernelGate("srt/models/dots3_common/modeling.py",
               "Dots3LanguageModelForCausalLM.shared_experts_fusion_disable_reason",
               'or torch.cuda.get_device_capability("cuda") < (8, 0)',
               "a capability floor (CUDA 8.0) beside the config checks whose only branch returns 'Shared-expert "
               "fusion is unsupported for this Dots3 configuration'"),
    *(KernelGate(file, f"{cls}.shared_experts_fusion_disable_reason", check, _SHARED_FUSION)
      for file, cls, check in (
          ("srt/models/bailing_moe_v3.py", "BailingMoeV3ForCausalLM",
           'if (not _is_cuda or torch.cuda.get_device_capability("cuda") < (8, 0)) and ('),
          ("srt/models/bailing_moe_v3.py", "BailingMoeV3ForCausalLM",
           'not _is_hip or torch.cuda.get_device_capability("cuda") < (9, 4)'),
          ("srt/models/deepseek_v2.py", "DeepseekV2ForCausalLM",
           '(not _is_cuda or torch.cuda.get_device_capability("cuda") < (8, 0))'),
          ("srt/models/deepseek_v2.py", "DeepseekV2ForCausalLM",
           'not _is_hip or torch.cuda.get_device_capability("cuda") < (9, 4)'),
          ("srt/models/deepseek_v2.py", "DeepseekV2ForCausalLM",
           '(not _is_musa or torch.musa.get_device_capability("musa") < (3, 1))'),
          ("srt/models/glm4_moe.py", "Glm4MoeForCausalLM",
           'if (not _is_cuda or torch.cuda.get_device_capability("cuda") < (8, 0)) and ('),
          ("srt/models/glm4_moe.py", "Glm4MoeForCausalLM",
           'not _is_hip or torch.cuda.get_device_capability("cuda") < (9, 4)'),
          ("srt/models/glm4_moe_lite.py", "Glm4MoeLiteForCausalLM",
           'or torch.cuda.get_device_capability("cuda") < (8, 0)'),
      )),
)


def gate_for(file: str, scope: str, code: str) -> Optional[KernelGate]:
    """The listed kernel gate of a site, if any."""
    for gate in KERNEL_GATES:
        if gate.matches(file, scope, code):
            return gate
    return None
