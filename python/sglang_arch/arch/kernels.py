"""The kernel catalog, as data: which builds exist for each kernel SGLang can pick.

Beside the tier table (``table.py``): the tier says what a GPU would like, this says
what can run on it.  Target spellings and the rule are in ``catalog.py``.  Every entry
names where its targets were read; an entry with ``binary`` was read from the wheel
itself (``cuobjdump --list-elf`` / ``--list-ptx`` on the file that
``sglang==0.5.23`` installs), and one with ``declared_in`` from the code that generates
the kernel (FlashInfer's ``supported_major_versions`` of the named generator, CuTe DSL's
``Arch`` targets): ``test/integration/test_catalog_wheels.py`` reads both again from the
installed packages and fails on any difference.  A fact read from a binary beats one read
from code, which beats a comment or a doc.

``CHOICES`` maps each decision's choices (the names SGLang's flags and passes use) to
the kernels they run, per model kind and phase: a choice runs where one of its kernels
serving that kind and phase runs.  One kernel judged alike everywhere: trtllm-gen's FMHA
cubins decide ``trtllm_mha``, ``trtllm_mla`` and DSA's ``trtllm`` in one place.
"""

from __future__ import annotations

from typing import Any, Dict, List

_FI = "flashinfer-python 0.7.2"
_CUTE_ARCHS = ("nvidia-cutlass-dsl 4.8.0: cutlass/base_dsl/enums.py Arch (the targets CuTe DSL compiles for: "
               "8.0 8.6 8.7 8.9 9.0 10.0 10.3 10.7 11.0 12.0 12.1)")
_CUOBJDUMP = "cuobjdump 13.5 --list-elf/--list-ptx on the installed wheel (2026-12-01)"
_FA4_ARCHS = "flash-attn-4 4.0.0b36 cute/interface.py: arch // 10 in [8, 9, 10, 11, 12]"
_CUTE = "cutlass-dsl"  # declared_in: jit:X.Y targets are among the targets CuTe DSL compiles for

KERNELS: Dict[str, Dict[str, Any]] = {
    # --- attention ---
    "fa3_sm8x": {
        "summary": "FlashAttention 3 (sgl-kernel flash_ops), Ampere/Ada build: MHA only",
        "targets": ["sm_80", "sm_86"],
        "binary": "sgl_kernel/flash_ops.abi3.so",
        "sources": [_CUOBJDUMP + ": sglang-kernel 0.4.10 flash_ops.abi3.so = sm_80 sm_86 sm_90a, no PTX",
                    "sglang 0.5.23 model_override_base.py: fa3 below Hopper only for non-MLA models"],
    },
    "fa3_sm90": {
        "summary": "FlashAttention 3 (sgl-kernel flash_ops), Hopper build (wgmma, TMA)",
        "targets": ["sm_90a"],
        "min_cuda": "12.3",
        "binary": "sgl_kernel/flash_ops.abi3.so",
        "sources": [_CUOBJDUMP + ": sglang-kernel 0.4.10 flash_ops.abi3.so",
                    "sglang 0.5.23 is_hopper_with_cuda_12_3: FA3 on Hopper needs CUDA 12.3"],
    },
    "fa4_cute": {
        "summary": "FlashAttention 4 (flash-attn-4 CuTe DSL) over SGLang's paged KV cache, compiled for the device "
                   "on first use",
        "targets": ["jit:9.0", "jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, _FA4_ARCHS,
                    "flash-attn-4 4.0.0b36 cute/interface.py: 'paged KV not supported on SM 8.0' (SGLang's fa4 "
                    "backend, FlashAttentionBackend(fa_impl_ver=4), reads a page table): no 8.x"],
    },
    "fa4_cute_mla": {
        "summary": "FlashAttention 4 (CuTe DSL) for absorbed MLA: the qv argument",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "flash-attn-4 4.0.0b36 cute/interface.py: 'only support Blackwell arch with qv' "
                    "(arch // 10 in [10, 11])",
                    "sglang 0.5.23 attention_hook.py: fa4 with absorbed MLA requires SM100/SM110"],
    },
    "fa4_cute_varlen": {
        "summary": "FlashAttention 4 (CuTe DSL) over packed variable-length sequences, no KV cache (vision encoders)",
        "targets": ["jit:8.0", "jit:8.6", "jit:8.7", "jit:8.9", "jit:9.0", "jit:10.0", "jit:10.3", "jit:10.7",
                    "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, _FA4_ARCHS,
                    "sglang 0.5.23 layers/attention/vision.py VisionFlash4Attention: cu_seqlens, no page table"],
    },
    "trtllm_gen_fmha": {
        "summary": "TensorRT-LLM-gen FMHA cubins (FlashInfer artifacts): MHA, MLA and sparse MLA",
        "targets": ["sm_100f", "sm_103a", "sm_107a"],
        "min_cuda": "12.8",
        "sources": [_FI + " artifacts.py ArtifactPath: 'one publish carries the Blackwell (sm100f/sm103a) and "
                          "Rubin (sm107a) cubins'",
                    "sgl-project/sglang #24633, #17880, #37105: trtllm MLA/DSA fail on SM120"],
    },
    "xqa": {
        "summary": "FlashInfer XQA decode (trtllm_mha off SM10x), nvcc JIT",
        "targets": ["jit:9.x", "jit:10.x", "jit:12.x"],
        "declared_in": "flashinfer/jit/xqa.py:gen_xqa_module",
        "sources": [_FI + " jit/xqa.py gen_xqa_module: supported_major_versions=[9, 10, 12]"],
    },
    "xqa_mla": {
        "summary": "FlashInfer XQA MLA decode (trtllm_mla's decode off SM10x: q_len 1, bf16 or fp8), nvcc JIT",
        "targets": ["jit:12.x"],
        "declared_in": "flashinfer/jit/xqa.py:gen_xqa_module_mla",
        "sources": [_FI + " jit/xqa.py gen_xqa_module_mla: supported_major_versions=[12]",
                    _FI + " mla/_core.py trtllm_batch_decode_with_kv_cache_mla: backend 'auto' is xqa on every "
                          "major but 10 (sgl-project/sglang#24848 closed to keep SM12x decode)"],
    },
    "cutedsl_mla_decode": {
        "summary": "FlashInfer CuTe DSL MLA decode (SM100 datacenter kernels), compiled for the device",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "sglang 0.5.23: cutedsl_mla needs SM100, decode only"],
    },
    "flashinfer_fa2": {
        "summary": "FlashInfer's FA2 prefill/decode templates, nvcc JIT for the device",
        "targets": ["jit:7.5+"],
        "sources": [_FI + " utils.py: supported compute capabilities from 7.5",
                    _FI + " jit/attention/modules.py: FA2 modules generated for the device's own arch"],
    },
    "flashinfer_sparse_mla_sm12x": {
        "summary": "FlashInfer sparse MLA for SM12x (GLM-5 / DSA with an FP8 KV cache), nvcc JIT",
        "targets": ["jit:12.x"],
        "min_cuda": "12.8",
        "declared_in": "flashinfer/jit/mla.py:gen_sparse_mla_sm120_module",
        "sources": [_FI + " jit/mla.py gen_sparse_mla_sm120_module: supported_major_versions=[12]",
                    "sglang 0.5.23 arg_groups/overrides.py _dsa_split_backend_resolution: GLM-5 FP8 on SM12x"],
    },
    "flashmla": {
        "summary": "FlashMLA (sgl-flash-mla): dense and sparse MLA, prebuilt",
        "targets": ["sm_90a", "sm_100a", "sm_103a", "sm_107a"],
        "binary": "flash_mla/_C_legacy.abi3.so",
        "sources": [_CUOBJDUMP + ": sgl-flash-mla 1.0.0 _C_legacy.abi3.so = sm_90a sm_100a sm_103a sm_107a; "
                                 "cuda.abi3.so = sm_100a sm_103a sm_107a"],
    },
    "flashmla_mega": {
        "summary": "FlashMLA MegaAttention (sgl-flash-mla fused_norm_rope_attn_rope_cast: norm + RoPE + sparse "
                   "attention + output cast in one kernel), DeepSeek-V4.1's --dsv4-attn-backend flashmla_mega",
        "targets": ["sm_100a", "sm_103a", "sm_107a"],
        "binary": "flash_mla/cuda.abi3.so",
        "sources": [_CUOBJDUMP + ": sgl-flash-mla 1.0.0 cuda.abi3.so = sm_100a sm_103a sm_107a; its "
                                 "fused_norm_rope_attn_rope_cast_fwd::core_attn::fwd_kernel has code for those three "
                                 "in both cuda.abi3.so and _C_legacy.abi3.so (the legacy file's sm_90a build of it is "
                                 "a 768-byte stub: 24 registers, no shared memory; cuobjdump -elf / -res-usage)",
                    "sgl-flash-mla 1.0.0 fused_norm_rope_attn_rope_cast.py prefill / decode: 'Only support sm100 / "
                    "sm103 GPU architecture'",
                    "sglang 0.5.23 kernels/ops/attention/flash_mla_interface.py flash_mla_mega_prefill / "
                    "flash_mla_mega_decode (deepseek_v4_mega_backend.py); deepseek_v4_hook.py: 'flashmla_mega "
                    "requires DeepSeek-V4.1 on SM100/SM103'"],
    },
    "infllm_v2": {
        "summary": "InfLLM-V2 stage-1 block scoring and 1-D max pooling (sgl-kernel infllm_ops): the top-k block "
                   "selection of MiniCPM's sparse attention",
        "targets": ["sm_80", "sm_90", "sm_120a"],
        "binary": "sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so",
        "sources": [_CUOBJDUMP + ": sglang-kernel 0.4.10 infllm_ops.cpython-310-x86_64-linux-gnu.so = sm_80 sm_90 "
                                 "sm_120a, no PTX",
                    "sglang 0.5.23 layers/attention/minicpm/sparse_utils.py compressed_attention: "
                    "infllmv2_attn_stage1, max_pooling_1d_varlen"],
    },
    "triton": {
        "summary": "Triton kernels, compiled for the device (sm_XY, 'a' from 9.0) by Triton's own ptxas",
        "targets": ["jit:7.0+"],
        "sources": ["triton 3.8.0 backends/nvidia/compiler.py: sm_arch_from_capability, fp8 paths for "
                    "capability 70 and 80+"],
    },
    "tilelang": {
        "summary": "TileLang kernels (DSA), compiled for the device",
        "targets": ["jit:8.0+"],
        "sources": ["tilelang 0.1.12: CUDA target from the device's compute capability",
                    "sglang 0.5.23 _check_dsa_backend_constraints: TileLang with an FP8 KV cache needs SM89"],
    },
    "torch": {
        "summary": "PyTorch's own kernels (SDPA, symmetric-memory two-shot): wherever the installed torch runs",
        "targets": ["torch:0.0+"],
        "sources": ["torch 2.14.1+cu130 torch._C._cuda_getArchFlags(): sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 "
                    "(a GPU torch does not run on runs none of SGLang; not a decision)"],
    },
    "torch_multimem": {
        "summary": "torch symmetric-memory multimem all-reduce (multimem.ld_reduce: PTX ISA sm_90+)",
        "targets": ["torch:9.0+"],
        "sources": ["PTX ISA: multimem.ld_reduce requires sm_90 or higher",
                    "torch CUDASymmetricMemoryOps.cu: multimem kernels guarded by __CUDA_ARCH__ >= 900"],
    },
    # --- linear attention (hybrid GDN / KDA models) ---
    "flashinfer_gdn_prefill_sm90": {
        "summary": "FlashInfer GDN chunked prefill, Hopper CuTe DSL kernel (chunk_gated_delta_rule_sm90)",
        "targets": ["jit:9.0"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, _FI + " gdn_prefill.py chunk_gated_delta_rule: arch major 9 runs "
                                       "chunk_gated_delta_rule_sm90 (gdn_kernels, CuTe DSL, sm_90a)"],
    },
    "flashinfer_gdn_prefill_sm100": {
        "summary": "FlashInfer GDN chunked prefill, SM100 CuTe DSL kernel (chunk_gated_delta_rule_sm100)",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7"],
        "min_cuda": "13.0",
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, _FI + " gdn_prefill.py chunk_gated_delta_rule: arch major 10 runs "
                                       "chunk_gated_delta_rule_sm100, 'Blackwell GDN prefill is only supported "
                                       "on CUDA 13+'"],
    },
    "flashinfer_gdn_prefill_sm120": {
        "summary": "FlashInfer GDN chunked prefill, SM12x CuTe DSL kernel (chunk_gated_delta_rule_sm120)",
        "targets": ["jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, _FI + " gdn_prefill.py chunk_gated_delta_rule: arch major 12 runs "
                                       "chunk_gated_delta_rule_sm120"],
    },
    "flashinfer_kda_prefill": {
        "summary": "FlashInfer KDA chunked prefill (kda_prefill, compiled for sm100a / sm103a)",
        "targets": ["jit:10.0", "jit:10.3"],
        "sources": [_FI + " kda_prefill.py: _FLASH_KDA_SUPPORTED_COMPUTE_CAPABILITIES = {(10, 0), (10, 3)}, "
                          "target Literal['sm100a', 'sm103a']",
                    "sglang 0.5.23 linear/kernels/kda_flashinfer_prefill.py: refuses capabilities other than "
                    "(10, 0) and (10, 3)"],
    },
    "flashinfer_gdn_decode": {
        "summary": "FlashInfer GDN decode / MTP verify with a bf16 state (gdn_kernels, CuTe DSL)",
        "targets": ["jit:9.0", "jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, _FI + " gdn_kernels/gdn_decode_bf16_state.py: scalar FMA wrappers 'work on all "
                                       "SM90+ architectures'",
                    "sglang 0.5.23 linear/kernels/gdn_flashinfer.py: FlashInfer GDN decode on SM90 and SM100"],
    },
    "flashinfer_kda_decode": {
        "summary": "FlashInfer KDA recurrent decode (kda_decode.recurrent_kda, CuTe DSL)",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "sglang 0.5.23 linear/kernels/kda_flashinfer.py: 'Wraps "
                                 "flashinfer.kda_decode.recurrent_kda (SM100+)'"],
    },
    "kda_verify_cute": {
        "summary": "SGLang's fused Kimi-K3/DSPARK KDA verify (CuTe DSL), Triton below it elsewhere",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "sglang 0.5.23 linear/kda_backend.py: the nv_cutedsl verify contract needs "
                                 "capability major 10, else the Triton verify kernel runs"],
    },
    # --- collectives ---
    "sglang_jit_custom_ar": {
        "summary": "SGLang's JIT custom all-reduce v2 (sglang/jit_kernel), nvcc for the device",
        "targets": ["jit:8.0+"],
        "sources": ["sglang 0.5.23 jit_kernel: compiled for the running device's arch (tvm-ffi + nvcc)",
                    "measured 2026-11-30 on the H200 host: built in 22.5 s with nvcc 13.0 (ARCH-FACTS)"],
    },
    "flashinfer_pcie_ipc": {
        "summary": "FlashInfer PCIe-IPC all-reduce (staged peer pushes over CUDA IPC), nvcc JIT for the device",
        "targets": ["jit:7.5+"],
        "sources": [_FI + " jit/comm.py gen_pcie_ipc_comm_module: no architecture restriction (plain loads and "
                          "stores, CUDA IPC), built for the device's own arch",
                    "sglang 0.5.23 pcie_ipc_ar.py: world sizes 2, 4, 8; bf16; group tp"],
    },
    "sglang_jit_sp_collective": {
        "summary": "Kimi K3's sequence-parallel reduce-scatter / all-gather over CustomAllReduceV2's multicast "
                   "push workspace (sglang/kernels JIT, nvcc for the device)",
        "targets": ["jit:9.0+"],
        "sources": ["sglang 0.5.23 kernels/ops/communication/sp_collective.py _jit_module: load_jit of "
                    "kimi_k3/comm/sp_collective.cuh for the running device's arch (kernels/jit/utils/arch.py "
                    "get_jit_cuda_arch)",
                    "sglang 0.5.23 kernels/jit/include/sgl_kernel/distributed/ptx.cuh: the multimem loads and stores "
                    "it uses need SGL_ARCH_HOPPER_OR_GREATER ('only supported on Hopper or later architecture')"],
    },
    "sglang_jit_k3_ar_fusion": {
        "summary": "Kimi K3's fused all-reduce (+ residual / RMSNorm): 1shot multicast push over CustomAllReduceV2's "
                   "workspace and NVLS 2shot (sglang/kernels JIT, nvcc for the device)",
        "targets": ["jit:9.0+"],
        "sources": ["sglang 0.5.23 kernels/ops/communication/all_reduce_residual.py: load_jit of "
                    "kimi_k3/comm/ar_fusion.cuh for the running device's arch (get_jit_cuda_arch)",
                    "sglang 0.5.23 kernels/jit/csrc/kimi_k3/comm/ar_fusion.cuh: multimem.ld_reduce / multimem.st, "
                    "which need SGL_ARCH_HOPPER_OR_GREATER (sgl_kernel/distributed/ptx.cuh)"],
    },
    "sglang_jit_attn_res_tma": {
        "summary": "Kimi K3's attention-residual aggregation fused with the SP collective (attn_res_fused_tma, "
                   "sglang/kernels JIT for the device with its arch-specific target)",
        "targets": ["jit:10.x", "jit:11.x", "jit:13.0+"],
        "sources": ["sglang 0.5.23 kernels/ops/attention/attn_res.py _jit_fused_tma_module: 'requires SM100+ "
                    "excluding SM12x' (refuses major < 10 and major == 12), compiled for the device's own "
                    "major.minor with the 'a' suffix; kernels/ops/communication/attn_res_collective.py uses it"],
    },
    "flashinfer_trtllm_comm": {
        "summary": "FlashInfer trtllm all-reduce (+ RMSNorm) fusion kernels, nvcc JIT",
        "targets": ["jit:9.x", "jit:10.x", "jit:12.x"],
        "declared_in": "flashinfer/jit/comm.py:gen_trtllm_comm_module",
        "sources": [_FI + " jit/comm.py gen_trtllm_comm_module: supported_major_versions=[9, 10, 12]",
                    "FlashInfer PR #3903"],
    },
    "flashinfer_mnnvl_comm": {
        "summary": "FlashInfer MNNVL all-reduce fusion kernels, nvcc JIT",
        "targets": ["jit:9.x", "jit:10.x"],
        "declared_in": "flashinfer/jit/comm.py:gen_trtllm_mnnvl_comm_module",
        "sources": [_FI + " jit/comm.py gen_trtllm_mnnvl_comm_module: supported_major_versions=[9, 10] "
                          "('Thor (SM11x) and RTX/consumer (SM12x) are intentionally excluded')"],
    },
    "flashinfer_cutedsl_comm": {
        "summary": "FlashInfer CuTe DSL all-reduce fusion kernels (SM100 datacenter)",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "sglang 0.5.23 flashinfer_comm_fusion._resolve_backend: cutedsl on SM100"],
    },
    # --- MoE runners, FP8 block / FP4 GEMM ---
    "deep_gemm": {
        "summary": "DeepGEMM (FP8 block / MXFP8 GEMM and grouped MoE GEMM), JIT-compiled for the device's arch",
        "targets": ["jit:9.0", "jit:10.0", "jit:10.3", "jit:12.0", "jit:12.1"],
        "sources": ["deep-gemm in the sglang 0.5.23 environment: deep_gemm/_C.so host checks name arch_major 9, 10 "
                    "and 12 only ('Unsupported architecture' otherwise; no SM110)",
                    "sglang 0.5.23 deep_gemm_wrapper/configurer.py: SM120/SM121 by exact match (sgl-project/sglang "
                    "#39482: 'do not broaden these checks to future SM12x variants')",
                    "sglang 0.5.23 fp8_utils.initialize_fp8_gemm_config: 'DeepGEMM's block-FP8 kernel does not "
                    "support SM110'"],
    },
    "deep_gemm_mxfp8": {
        "summary": "DeepGEMM with MXFP8 operands (1x32 UE8M0 scale blocks): SM100 kernels only",
        "targets": ["jit:10.0", "jit:10.3"],
        "sources": ["deep_gemm/_C.so host check: '(arch_major == 9 and gran_k == 128 ...) or (arch_major == 10 and "
                    "(gran_k == 32 or gran_k == 128) ...)': scale blocks of 32 on arch 10 only"],
    },
    "deep_gemm_mega": {
        "summary": "DeepGEMM MegaMoE (fused dispatch + grouped GEMM, SM100 datacenter kernels)",
        "targets": ["jit:10.0", "jit:10.3"],
        "sources": ["sglang 0.5.23 arg_groups/moe_hook.py: megamoe requires is_sm100_supported",
                    "deep_gemm/_C.so: the mega kernels check arch_major == 10"],
    },
    "deep_gemm_paged_mqa_sm100": {
        "summary": "DeepGEMM's SM100 FP8 paged MQA-logits kernel (the DSA indexer), which takes a native "
                   "[B, next_n] query and schedule for MTP verify",
        "targets": ["jit:10.0", "jit:10.3"],
        "sources": ["deep-gemm 0.2.3.post2 in the sglang 0.5.23 environment: deep_gemm/_C.so dispatches "
                    "fp8_fp4_paged_mqa_logits to sm100_paged_mqa_logits on arch_major == 10 (sm90_fp8_paged_mqa_logits, "
                    "'next_n == 1 or next_n == 2', on 9; SM120 kernels on 12) and JIT-compiles it for the 100f family; "
                    "the same builds as deep_gemm's (10.0, 10.3)",
                    "sglang 0.5.23 dsa_backend.py _build_paged_mqa_schedule_2d_ctx_lens: 'for now DG-native is SM100+ "
                    "only'"],
    },
    "cutlass_fp8_blockwise_sm12x": {
        "summary": "SGLang's CUTLASS FP8 block-scale GEMM for SM12x (sglang/kernels JIT, --fp8-gemm-backend cutlass)",
        "targets": ["jit:12.x"],
        "kernel_spec": "gemm.fp8_blockwise_scaled_mm",
        "sources": ["sglang 0.5.23 kernels/ops/gemm: KernelSpec gemm.fp8_blockwise_scaled_mm, capabilities "
                    "cuda(min_sm=(12, 0), max_sm=(12, 9)), JIT (load_jit for the device)",
                    "sgl-project/sglang #18872, #9969: CUTLASS FP8 blockwise GEMM for SM120, auto-enabled there"],
    },
    "sgl_cutlass_fp8_grouped": {
        "summary": "sgl-kernel fp8_blockwise_scaled_grouped_mm (the cutlass FP8 block MoE runner)",
        "targets": ["sm_90a", "sm_100"],
        "binary": "sgl_kernel/sm100/common_ops.abi3.so",
        "sources": [_CUOBJDUMP + ": sglang-kernel 0.4.10 sm100/common_ops.abi3.so = sm_80 sm_89 sm_90 sm_90a "
                                 "sm_100 sm_120a, no PTX",
                    "sgl-project/sglang #28125: the grouped GEMM dispatches SM90 and SM100/SM103 only "
                    "('No implemented fp8_blockwise_scaled_grouped_mm for current compute capability' on SM12x)"],
    },
    "sgl_cutlass_fp4_grouped": {
        "summary": "sgl-kernel cutlass_fp4_group_mm (NVFP4 grouped GEMM of the cutlass MoE runner)",
        "targets": ["sm_100", "sm_120a"],
        "binary": "sgl_kernel/sm100/common_ops.abi3.so",
        "sources": [_CUOBJDUMP + ": the only SM12x SASS is sm_120a (runs on 12.0 alone)",
                    "sgl-project/sglang #17421, #18993: the dispatch checks sm_version == 120, not SM121 or SM110"],
    },
    "sgl_es_mxfp8_grouped": {
        "summary": "sgl-kernel es_sm100_mxfp8_blockscaled_grouped_mm (MXFP8 cutlass MoE runner)",
        "targets": ["sm_100"],
        "binary": "sgl_kernel/sm100/common_ops.abi3.so",
        "sources": ["sgl-project/sglang #13731: MXFP8 grouped GEMM for Blackwell (SM100)",
                    _CUOBJDUMP],
    },
    "sgl_kernel_moe_ops": {
        "summary": "sgl-kernel's MoE helpers (moe_align_block_size, moe_sum_reduce, topk): every build of the file",
        "targets": ["sm_80", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120a"],
        "binary": "sgl_kernel/sm100/common_ops.abi3.so",
        "sources": [_CUOBJDUMP + " (a catalog fact; no decision picks it: every runner uses it alike)"],
    },
    "triton_fp8": {
        "summary": "Triton kernels with FP8 (e4m3) operands: fused MoE and block GEMM, compiled for the device",
        "targets": ["jit:8.9+"],
        "sources": ["triton 3.8.0 backends/nvidia/compiler.py: fp8e4nv is supported from capability 89",
                    "sglang 0.5.23 fp8_utils._dispatch_auto_backend: triton is the portable FP8 block GEMM"],
    },
    "sglang_jit_tiny_gemm": {
        "summary": "SGLang's tiny BF16-activation GEMM for a handful of rows (kernels/ops/gemm/tiny_gemm.py: the "
                   "DeepSeek family's router), CUDA C++ JIT-compiled for the device",
        "targets": ["jit:8.0+"],
        "sources": ["sglang 0.5.23 kernels/jit/csrc/gemm/tiny_gemm.cuh: no architecture-specific instruction; "
                    "vector width from utils.cuh kMaxVecBytes (16 bytes before Blackwell, 32 from it), PDL only "
                    "where is_arch_support_pdl (SM90+); BF16 arithmetic from SM80",
                    "sglang 0.5.23 deepseek_common/utils.py tiny_router_gemm_max_tokens: 'Rows up to which the "
                    "tiny GEMM beats cuBLAS for the router'"],
    },
    "sglang_cutedsl_fused_a_gemm": {
        "summary": "SGLang's CuTe DSL DeepSeek-V3 fused QKV-A GEMM (kernels/ops/gemm/cutedsl_dsv3_fused_a_gemm.py: "
                   "cp.async + mbarrier pipeline, mma.sync.m16n8k16), fused_a_gemm's auto pick on SM120",
        "targets": ["jit:9.0", "jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS,
                    "sglang 0.5.23 cutedsl_dsv3_fused_a_gemm.py: 'CuTe DSL DeepSeek-V3 fused-A GEMM (sm90+)'; "
                    "_compiled_kernel raises below SM90"],
    },
    "sglang_jit_fused_a_gemm": {
        "summary": "SGLang's JIT CUDA C++ DeepSeek-V3 fused QKV-A GEMM (kernels/ops/gemm/dsv3_fused_a_gemm.py), "
                   "compiled for the device",
        "targets": ["jit:9.0+"],
        "sources": ["sglang 0.5.23 dsv3_fused_a_gemm.py: 'Runtime-compiled CUDA C++ kernel for SM90+ (Hopper) GPUs'",
                    "sglang 0.5.23 fused_a_gemm.py fused_a_gemm_weight_eligible: _DEVICE_SM >= 90"],
    },
    "sglang_cutedsl_nvfp4_gemm_swiglu": {
        "summary": "SGLang's CuTe DSL NVFP4 GEMM + SwiGLU + NVFP4 quant (kernels/ops/gemm/"
                   "nvfp4_gemm_swiglu_nvfp4_quant.py, tcgen05 block-scaled MMA): DeepSeek's fused shared expert",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0"],
        "min_cuda": "12.8",
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS,
                    "nvidia-cutlass-dsl 4.8.0 cute/nvgpu/tcgen05/mma.py MmaMXF4NVF4Op.admissible_archs: sm_100a "
                    "sm_100f sm_103a sm_107a sm_110a",
                    "sglang 0.5.23 nvfp4_gemm_swiglu_nvfp4_quant.py Sm100BlockScaledPersistentDenseGemmKernel"],
    },
    "triton_kernels_mxfp4": {
        "summary": "triton_kernels matmul_ogs (GPT-OSS MXFP4 MoE, --moe-runner-backend triton_kernel)",
        "targets": ["jit:8.0+"],
        "sources": ["sglang 0.5.23 model_overrides/gpt_oss.py: triton_kernel for GPT-OSS on any CUDA GPU (ep_size 1)",
                    "sglang 0.5.23 layers/quantization/mxfp4.py: SM120 takes the StridedLayout, non-persistent "
                    "path (sgl-project/sglang #16975, #19718, #24281)"],
    },
    "marlin": {
        "summary": "Marlin weight-only MoE / GEMM (fused_marlin_moe, FP4/INT4 weights upcast in the kernel)",
        "targets": ["jit:8.0+"],
        "sources": ["sglang 0.5.23 modelopt_quant.py: NVFP4 MoE auto takes marlin for (8, 0) <= capability < (10, 0)",
                    "sgl-project/sglang #34340: marlin is compiled for the local arch and launches no clusters"],
    },
    "flashinfer_trtllm_gen_moe": {
        "summary": "TensorRT-LLM-gen fused MoE cubins (FlashInfer artifacts): FP8 block, MXFP8, NVFP4, MXFP4",
        "targets": ["sm_100f", "sm_103a"],
        "min_cuda": "12.8",
        "sources": ["sgl-project/sglang #34340: the trtllm-gen MoE cubin pool ships sm100f (1636) and sm103a (60)",
                    "sglang 0.5.23 overrides._moe_runner_backend_quant_constraints: 'trtllm-gen MoE kernels are "
                    "SM100-only'; sgl-project/sglang #39807"],
    },
    "flashinfer_trtllm_gen_gemm": {
        "summary": "TensorRT-LLM-gen FP8 block / FP4 GEMM cubins (FlashInfer artifacts)",
        "targets": ["sm_100f"],
        "min_cuda": "12.8",
        "sources": [_FI + " artifacts.py: Blackwell (sm100f) cubins",
                    "sglang 0.5.23 fp8_utils._dispatch_explicit_backend: 'FlashInfer TRTLLM FP8 GEMM requires "
                    "SM100/SM103 GPUs'"],
    },
    "flashinfer_cutlass_moe_sm90": {
        "summary": "FlashInfer CUTLASS fused MoE, Hopper module (sm90a nvcc flags)",
        "targets": ["jit:9.0"],
        "sources": [_FI + " jit/fused_moe.py gen_cutlass_fused_moe_sm90_module: sm90a_nvcc_flags"],
    },
    "flashinfer_cutlass_moe_sm100": {
        "summary": "FlashInfer CUTLASS fused MoE, SM100 module (NVFP4, MXFP4, BF16)",
        "targets": ["jit:10.x", "jit:11.x"],
        "declared_in": "flashinfer/jit/fused_moe.py:gen_cutlass_fused_moe_sm100_module",
        "sources": [_FI + " jit/fused_moe.py gen_cutlass_fused_moe_sm100_module: supported_major_versions=[10, 11]"],
    },
    "flashinfer_cutlass_moe_sm120": {
        "summary": "FlashInfer CUTLASS fused MoE, SM12x module (NVFP4, MXFP4)",
        "targets": ["jit:12.x"],
        "declared_in": "flashinfer/jit/fused_moe.py:gen_cutlass_fused_moe_sm120_module",
        "sources": [_FI + " jit/fused_moe.py gen_cutlass_fused_moe_sm120_module: supported_major_versions=[12]"],
    },
    "flashinfer_cutlass_gemm_fp8": {
        "summary": "FlashInfer CUTLASS FP8 groupwise GEMM (SM100 module)",
        "targets": ["jit:10.x"],
        "declared_in": "flashinfer/jit/gemm/core.py:gen_gemm_sm100_module",
        "sources": [_FI + " jit/gemm/core.py gen_gemm_sm100_module: supported_major_versions=[10]"],
    },
    "flashinfer_deepgemm_sm90": {
        "summary": "FlashInfer's SM90 DeepGEMM FP8 block GEMM with swapAB (fp8_blockscale_gemm_sm90)",
        "targets": ["jit:9.0"],
        "sources": ["sglang 0.5.23 fp8_utils._dispatch_explicit_backend: 'This backend requires Hopper (SM90)'"],
    },
    "flashinfer_cutlass_gemm_fp4_sm100": {
        "summary": "FlashInfer CUTLASS FP4 GEMM, SM100 module",
        "targets": ["jit:10.x", "jit:11.x"],
        "declared_in": "flashinfer/jit/gemm/core.py:gen_gemm_sm100_module_cutlass_fp4",
        "sources": [_FI + " jit/gemm/core.py gen_gemm_sm100_module_cutlass_fp4: supported_major_versions=[10, 11]"],
    },
    "flashinfer_cutlass_gemm_fp4_sm120": {
        "summary": "FlashInfer CUTLASS FP4 GEMM, SM12x module",
        "targets": ["jit:12.x"],
        "declared_in": "flashinfer/jit/gemm/core.py:gen_gemm_sm120_module_cutlass_fp4",
        "sources": [_FI + " jit/gemm/core.py gen_gemm_sm120_module_cutlass_fp4: supported_major_versions=[12]",
                    "flashinfer-ai/flashinfer #1609: cutlass fp4 gemm for SM120 and SM121"],
    },
    "flashinfer_cutedsl_moe": {
        "summary": "FlashInfer CuTe DSL fused MoE (SM100 datacenter kernels)",
        "targets": ["jit:10.0", "jit:10.3"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "sglang 0.5.23 arg_groups/moe_hook.py: flashinfer_cutedsl MoE on SM100"],
    },
    "flashinfer_cutedsl_gemm_mxfp8": {
        "summary": "FlashInfer CuTe DSL MXFP8 dense GEMM (mm_mxfp8 backend cute-dsl): --fp8-gemm-backend "
                   "flashinfer_cutedsl, FP8 weights with 32-wide UE8M0 scale blocks served as MXFP8",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS,
                    _FI + " gemm/gemm_base.py _cute_dsl_gemm_mxfp8_requirement: "
                          "supported_compute_capability([100, 103, 107])",
                    "sglang 0.5.23 fp8_utils.resolve_mxfp8_dense_gemm_backend: flashinfer_cutedsl 'requires an "
                    "SM100/SM103 GPU and FlashInfer' (is_backend_supported('cute-dsl', sm))"],
    },
    # --- FlashInfer's quantize / dequantize kernels (NVFP4 KV cache, FP4 / MXFP8 activations) ---
    "flashinfer_nvfp4_kv_dequant": {
        "summary": "FlashInfer's NVFP4 KV cache dequantize (nvfp4_kv_dequantize, csrc/fp4_kv_dequantization.cu), "
                   "nvcc JIT: the NVFP4 KV cache's dequantize on SM100 / SM120 in SGLang",
        "targets": ["jit:8.0", "jit:8.6", "jit:8.9", "jit:9.0", "jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0",
                    "jit:12.0", "jit:12.1"],
        "sources": [_FI + " quantization/fp4_quantization.py:2378 _nvfp4_kv_dequant_check: "
                          "supported_compute_capability([80, 86, 89, 90, 100, 103, 107, 110, 120, 121]) "
                          "(nvfp4_kv_dequantize: 'Requires SM80+')",
                    _FI + " jit/fp4_kv_dequantization.py:22 gen_fp4_kv_dequantization_module: "
                          "supported_major_versions=[8, 9, 10, 11, 12]"],
    },
    "torch_nvfp4_kv_dequant": {
        "summary": "SGLang's pure PyTorch NVFP4 KV cache dequantize (kvfp4_tensor.py NVFP4KVQuantizeUtil."
                   "dequantize's fallback: a lookup table and elementwise scaling)",
        "targets": ["torch:0.0+"],
        "sources": ["sglang 0.5.23 kvfp4_tensor.py:270 '# Pure PyTorch fallback for SM90' (torch ops only)"],
    },
    "flashinfer_cutedsl_quantize": {
        "summary": "FlashInfer's CuTe DSL quantize kernels (quantization/kernels/nvfp4_quantize.py, "
                   "mxfp4_quantize.py, mxfp8_quantize.py): fp4_quantize / mxfp8_quantize backend='cute-dsl'",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS,
                    _FI + " quantization/fp4_quantization.py:1085 fp4_quantize: '\"cute-dsl\": CuTe-DSL kernel "
                          "(SM100+, **experimental**)'; fp8_quantization.py:204 mxfp8_quantize: the same"],
    },
    "flashinfer_cuda_fp4_quantize": {
        "summary": "FlashInfer's CUDA FP4 quantize (fp4_quantize backend='cuda': TensorRT-LLM's quantization "
                   "kernels, one nvcc JIT module per architecture)",
        "targets": ["jit:9.0", "jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0", "jit:12.0", "jit:12.1"],
        "sources": [_FI + " quantization/fp4_quantization.py:274 get_fp4_quantization_module: modules for "
                          "'121' '120f' '120' '110' '107' '103' '100' '90', else 'Invalid backend' (:1189 asks "
                          "f'{major}{minor}' of the input's device)"],
    },
    "flashinfer_cuda_mxfp8_quantize": {
        "summary": "FlashInfer's CUDA MXFP8 quantize (mxfp8_quantize backend='cuda': TensorRT-LLM's "
                   "fp8Quantize, one nvcc JIT module compiled for the device)",
        "targets": ["jit:7.0+"],
        "sources": [_FI + " jit/fp8_quantization.py:33 gen_mxfp8_quantization_sm100_module: "
                          "get_nvcc_flags_list(supported_major_versions=None): every architecture compiled for"],
    },
    "flashinfer_cutedsl_gemm_fp4": {
        "summary": "FlashInfer CuTe DSL FP4 GEMM (SM100 datacenter kernels)",
        "targets": ["jit:10.0", "jit:10.3"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "sglang 0.5.23 fp4_utils.initialize_fp4_gemm_config: flashinfer_cutedsl on SM100"],
    },
    "sglang_cutedsl_bf16_gemm": {
        "summary": "SGLang's CuTe DSL BF16 dense GEMM (kernels/ops/gemm/cutedsl_bf16_gemm.py, tcgen05): "
                   "--bf16-gemm-backend cutedsl, SGLang's auto pick on SM10x",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7"],
        "min_cuda": "12.8",
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS,
                    "nvidia-cutlass-dsl 4.8.0 cute/nvgpu/tcgen05/mma.py MmaF16BF16Op.admissible_archs: the "
                    "sm_100f and sm_110f families (10.0 10.3 10.7 11.0)",
                    "sglang 0.5.23 kernels/ops/gemm/cutedsl_bf16_gemm.py _tgv_bf16_gemm_run: raises unless "
                    "is_sm100_supported (major 10, CUDA >= 12.8), so 11.0 is left out"],
    },
    # Tuned GEMM / GEMV paths SGLang takes on one architecture (policies/gemm.py)
    "sglang_warp_splitk_bf16_gemm": {
        "summary": "SGLang's vendored copy of FlashInfer's CuTe DSL warp split-K BF16 GEMM with an FP32 output "
                   "(kernels/ops/gemm/dense_bf16_gemm_warp_splitk.py): K3's merged MoE front projection",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7"],
        "min_cuda": "12.8",
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS,
                    "sglang 0.5.23 kernels/ops/gemm/dense_bf16_gemm_warp_splitk.py: sizes its ring from "
                    "get_smem_capacity_in_bytes('sm_100'); reached only from _tgv_bf16_gemm_out_run, which raises "
                    "unless is_sm100_supported (major 10, CUDA >= 12.8)"],
    },
    "sglang_cutedsl_router_gemv": {
        "summary": "SGLang's CuTe DSL FP32 router GEMV for Muse Spark decode "
                   "(kernels/ops/gemm/muse_spark_router_gemv_cutedsl.py: SIMT FMA, warp shuffles, shared memory)",
        "targets": ["jit:8.0", "jit:8.6", "jit:8.7", "jit:8.9", "jit:9.0", "jit:10.0", "jit:10.3", "jit:10.7",
                    "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS,
                    "sglang 0.5.23 kernels/ops/gemm/muse_spark_router_gemv_cutedsl.py _kernel_type: no MMA, TMA or "
                    "cluster op (griddepcontrol only with PDL, which is_arch_support_pdl leaves to SM90 and newer)"],
    },
    "sglang_jit_muse_spark_all_gather": {
        "summary": "Muse Spark's fused GEMM + all-gather over CustomAllReduceV2's multicast push workspace "
                   "(kernels/ops/communication/muse_spark_all_gather.py gemm_ag, sglang/kernels JIT for the device)",
        "targets": ["jit:9.0+"],
        "sources": ["sglang 0.5.23 kernels/ops/communication/muse_spark_all_gather.py _jit_module: load_jit of "
                    "muse_spark/all_gather.cuh for the running device's arch",
                    "sglang 0.5.23 kernels/jit/csrc/muse_spark/all_gather.cuh: ptx::st_multimem_16B, which "
                    "sgl_kernel/distributed/ptx.cuh supports 'only on Hopper or later architecture'"],
    },
    "sglang_cutedsl_muse_spark_finalize_ar": {
        "summary": "Muse Spark's MoE finalize fused with the all-reduce (CuTe DSL, DSMEM clusters; "
                   "kernels/ops/communication/muse_spark_moe_finalize_all_reduce_cutedsl.py)",
        "targets": ["jit:9.0", "jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS,
                    "sglang 0.5.23 kernels/ops/communication/muse_spark_moe_finalize_all_reduce_cutedsl.py: one "
                    "block or DSMEM cluster per token (thread block clusters: SM90 and newer)"],
    },
    "sglang_jit_moe_finalize_shared_gate_ar": {
        "summary": "SGLang's MoE finalize + shared-expert gate + all-reduce (kernels/ops/communication/"
                   "all_reduce_fusion.py moe_finalize_shared_gate_all_reduce, JIT for the device, cluster launch)",
        "targets": ["jit:9.0+"],
        "sources": ["sglang 0.5.23 kernels/ops/communication/all_reduce_fusion.py _jit_shared_gate_module: "
                    "require_cluster_launch_arch() before load_jit of distributed/all_reduce_fusion.cuh "
                    "(thread block clusters: SM90 and newer)"],
    },
    "flashinfer_megamoe": {
        "summary": "FlashInfer MegaMoE (CuTe DSL, SM100 datacenter kernels)",
        "targets": ["jit:10.0", "jit:10.3"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "sglang 0.5.23 overrides: nvfp4_online (and its megamoe) only on SM100/SM103"],
    },
}

_MHA, _MLA = ["mha"], ["mla"]

CHOICES: Dict[str, Dict[str, List[Dict[str, Any]]]] = {
    # --attention-backend / --prefill-attention-backend / --decode-attention-backend
    "attention": {
        "fa3": [{"kernel": "fa3_sm90"}, {"kernel": "fa3_sm8x", "kinds": _MHA}],
        "fa4": [{"kernel": "fa4_cute", "kinds": _MHA}, {"kernel": "fa4_cute_mla", "kinds": _MLA}],
        "trtllm_mha": [{"kernel": "trtllm_gen_fmha", "kinds": _MHA}, {"kernel": "xqa", "kinds": _MHA}],
        "trtllm_mla": [{"kernel": "trtllm_gen_fmha", "kinds": _MLA},
                       {"kernel": "xqa_mla", "kinds": _MLA, "phases": ["decode"]}],
        "cutedsl_mla": [{"kernel": "cutedsl_mla_decode", "kinds": _MLA, "phases": ["decode"]}],
        "flashmla": [{"kernel": "flashmla", "kinds": _MLA}],
        "flashinfer": [{"kernel": "flashinfer_fa2"}],
        "triton": [{"kernel": "triton"}],
        "torch_native": [{"kernel": "torch"}],
    },
    # the vision encoder's attention (--mm-attention-backend, VisionAttention's default):
    # sglang 0.5.23 layers/attention/vision.py QKV_BACKEND_IMPL; its fa3 calls sgl_kernel.flash_attn
    # (kernels/ops/attention/flash_attention_v3.py), fa4 flash_attn.cute, triton_attn Triton, sdpa torch
    "vision": {
        "fa3": [{"kernel": "fa3_sm90"}, {"kernel": "fa3_sm8x"}],
        "fa4": [{"kernel": "fa4_cute_varlen"}],
        "triton_attn": [{"kernel": "triton"}],
        "sdpa": [{"kernel": "torch"}],
    },
    # --dsa-prefill-backend / --dsa-decode-backend
    "dsa": {
        "trtllm": [{"kernel": "trtllm_gen_fmha"}],
        "flashmla_kv": [{"kernel": "flashmla"}],
        "flashmla_sparse": [{"kernel": "flashmla"}],
        "fa3": [{"kernel": "fa3_sm90"}],
        "flashinfer_sparse_mla": [{"kernel": "flashinfer_sparse_mla_sm12x"}],
        "tilelang": [{"kernel": "tilelang"}],
    },
    # --dsv4-attn-backend (DeepSeek-V4's attention backend): FlashMLA's sparse kernels, or its
    # MegaAttention kernel (sglang 0.5.23 deepseek_v4_trtllm_backend.create_deepseek_v4_attn_backend)
    "dsv4_attention": {
        "flashmla": [{"kernel": "flashmla"}],
        "flashmla_mega": [{"kernel": "flashmla_mega"}],
    },
    # MiniCPM's sparse attention backends (--attention-backend minicpm_flashattn /
    # minicpm_flashinfer; sglang 0.5.23 layers/attention/minicpm/backend.py), per "kind"
    # "<FlashAttention>+<top-k path>": each builds FlashAttention for its dense layers
    # (fa_impl_ver 4 where get_platform().is_blackwell, else 3: an identity probe), selects its
    # sparse blocks by InfLLM-V2's stage-1 kernel ("stage1") or, with minicpm_fuse_topk
    # (is_blackwell and minicpm_flashinfer, or SGLANG_MINICPM_FUSE_TOPK), by TileLang's fused
    # pooling top-k ("fused_topk"), and attends to them with FlashAttention
    # (minicpm_flashattn) or FlashInfer (minicpm_flashinfer).  A use runs where its kernel and
    # every kernel it needs ("with") run.
    "minicpm_sparse": {
        backend: [
            {"kernel": build, "with": [topk, *sparse], "kinds": [f"{fa}+{path}"]}
            for fa, builds in (("fa3", ("fa3_sm90", "fa3_sm8x")), ("fa4", ("fa4_cute",)))
            for path, topk in (("stage1", "infllm_v2"), ("fused_topk", "tilelang"))
            for build in builds
        ]
        for backend, sparse in (("minicpm_flashattn", ()), ("minicpm_flashinfer", ("flashinfer_fa2",)))
    },
    # --linear-attn-backend / --linear-attn-{prefill,decode,verify}-backend, per kernel
    # family ("gdn", "kda") and phase ("prefill", "decode", "verify")
    "linear_attention": {
        "triton": [{"kernel": "triton"}],
        "flashinfer": [{"kernel": "flashinfer_gdn_prefill_sm90", "kinds": ["gdn"], "phases": ["prefill"]},
                       {"kernel": "flashinfer_gdn_prefill_sm100", "kinds": ["gdn"], "phases": ["prefill"]},
                       {"kernel": "flashinfer_gdn_prefill_sm120", "kinds": ["gdn"], "phases": ["prefill"]},
                       {"kernel": "flashinfer_kda_prefill", "kinds": ["kda"], "phases": ["prefill"]},
                       {"kernel": "flashinfer_gdn_decode", "kinds": ["gdn"], "phases": ["decode", "verify"]},
                       {"kernel": "flashinfer_kda_decode", "kinds": ["kda"], "phases": ["decode", "verify"]}],
        # the fused CuTe verify where it has a build, the Triton verify kernel elsewhere
        "nv_cutedsl": [{"kernel": "kda_verify_cute", "phases": ["verify"]},
                       {"kernel": "triton", "phases": ["verify"]}],
    },
    # torch symmetric-memory all-reduce kernel
    "symm_mem": {
        "multimem": [{"kernel": "torch_multimem"}],
        "two_shot": [{"kernel": "torch"}],
    },
    "custom_ar": {
        "jit_v2": [{"kernel": "sglang_jit_custom_ar"}],
    },
    # SGLang's PCIe-IPC all-reduce (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE)
    "pcie_ipc": {
        "flashinfer": [{"kernel": "flashinfer_pcie_ipc"}],
    },
    # --moe-runner-backend, per quantization kind of the MoE experts (policies/moe.py QUANT_KINDS).
    # A choice with no use for a kind is not judged for it (SGLang itself reroutes, e.g.
    # flashinfer_cutlass has no FP8 path and runs those experts on triton).
    # fp8_mxfp4: an FP8 checkpoint whose routed experts are MXFP4 (Fp8Config.is_fp4_experts),
    # served by sglang 0.5.23 fp8.py Fp8Config.get_quant_method: marlin -> Mxfp4MarlinMoEMethod,
    # flashinfer_mxfp4 -> Mxfp4FlashinferCutlassMoEMethod on is_sm90 / is_sm120 (FlashInfer's
    # CUTLASS fused MoE) and Mxfp4FlashinferTrtllmMoEMethod elsewhere (trtllm-gen), megamoe /
    # flashinfer_megamoe -> Fp8MoEMethod's FP4-expert weights for them; triton has no use
    # ("The auto runner resolves to Triton FP8, which cannot read packed MXFP4",
    # model_overrides/mimo_v2.py), nor humming / deep_gemm (not in the catalog for them).
    "moe_runner": {
        "triton": [{"kernel": "triton", "kinds": ["unquantized", "mxfp4"]},
                   {"kernel": "triton_fp8", "kinds": ["fp8_block"]}],
        "triton_kernel": [{"kernel": "triton_kernels_mxfp4", "kinds": ["mxfp4", "unquantized"]}],
        "deep_gemm": [{"kernel": "deep_gemm", "kinds": ["fp8_block"]}, {"kernel": "deep_gemm_mxfp8", "kinds": ["mxfp8"]}],
        "cutlass": [{"kernel": "sgl_cutlass_fp8_grouped", "kinds": ["fp8_block"]},
                    {"kernel": "sgl_es_mxfp8_grouped", "kinds": ["mxfp8"]},
                    {"kernel": "sgl_cutlass_fp4_grouped", "kinds": ["nvfp4"]}],
        "flashinfer_cutlass": [{"kernel": "flashinfer_cutlass_moe_sm100", "kinds": ["nvfp4", "mxfp4", "unquantized"]},
                               {"kernel": "flashinfer_cutlass_moe_sm120", "kinds": ["nvfp4", "mxfp4"]},
                               {"kernel": "flashinfer_cutlass_moe_sm90", "kinds": ["unquantized", "mxfp4"]}],
        "flashinfer_trtllm": [{"kernel": "flashinfer_trtllm_gen_moe"}],
        "flashinfer_trtllm_routed": [{"kernel": "flashinfer_trtllm_gen_moe"}],
        "flashinfer_mxfp4": [{"kernel": "flashinfer_trtllm_gen_moe", "kinds": ["mxfp4", "fp8_mxfp4"]},
                             {"kernel": "flashinfer_cutlass_moe_sm120", "kinds": ["mxfp4", "fp8_mxfp4"]},
                             {"kernel": "flashinfer_cutlass_moe_sm90", "kinds": ["mxfp4", "fp8_mxfp4"]}],
        "flashinfer_cutedsl": [{"kernel": "flashinfer_cutedsl_moe", "kinds": ["nvfp4"]}],
        "flashinfer_megamoe": [{"kernel": "flashinfer_megamoe", "kinds": ["nvfp4", "mxfp8", "fp8_mxfp4"]}],
        "megamoe": [{"kernel": "deep_gemm_mega", "kinds": ["fp8_block", "mxfp8", "nvfp4", "fp8_mxfp4"]}],
        "marlin": [{"kernel": "marlin", "kinds": ["nvfp4", "mxfp4", "fp8_mxfp4"]}],
    },
    # --fp8-gemm-backend (FP8 block-scale dense GEMM)
    "fp8_gemm": {
        "deep_gemm": [{"kernel": "deep_gemm"}],
        "cutlass": [{"kernel": "cutlass_fp8_blockwise_sm12x"}],
        "flashinfer_trtllm": [{"kernel": "flashinfer_trtllm_gen_gemm"}],
        "flashinfer_cutlass": [{"kernel": "flashinfer_cutlass_gemm_fp8"}],
        "flashinfer_deepgemm": [{"kernel": "flashinfer_deepgemm_sm90"}],
        "flashinfer_cutedsl": [{"kernel": "flashinfer_cutedsl_gemm_mxfp8"}],
        "triton": [{"kernel": "triton_fp8"}],
    },
    # --bf16-gemm-backend (unquantized BF16 dense GEMM; auto and torch run cuBLAS through torch)
    "bf16_gemm": {
        "cutedsl": [{"kernel": "sglang_cutedsl_bf16_gemm"}],
    },
    # Tuned GEMM / GEMV paths (policies/gemm.py): the kernels a path keyed to one architecture runs
    "gemm_path": {
        "k3_front_splitk": [{"kernel": "sglang_warp_splitk_bf16_gemm", "with": ["sglang_cutedsl_bf16_gemm"]}],
        "router_gemv": [{"kernel": "sglang_cutedsl_router_gemv"}],
        "muse_spark_gemm_ag": [{"kernel": "sglang_jit_muse_spark_all_gather"}],
        "muse_spark_finalize_ar": [{"kernel": "sglang_cutedsl_muse_spark_finalize_ar"}],
        "qwen4_decode_fusion": [{"kernel": "sglang_jit_moe_finalize_shared_gate_ar"}],
    },
    # --fp4-gemm-backend (NVFP4 dense GEMM)
    "fp4_gemm": {
        "flashinfer_cutlass": [{"kernel": "flashinfer_cutlass_gemm_fp4_sm100"},
                               {"kernel": "flashinfer_cutlass_gemm_fp4_sm120"}],
        "flashinfer_trtllm": [{"kernel": "flashinfer_trtllm_gen_gemm"}],
        "flashinfer_cutedsl": [{"kernel": "flashinfer_cutedsl_gemm_fp4"}],
        "marlin": [{"kernel": "marlin"}],
    },
    # sgl-kernel's own MoE helpers (no flag picks them; every runner above calls them): recorded
    # so that explain and the catalog tests see which GPUs the installed wheel loads on.
    "sgl_kernel": {
        "common_ops": [{"kernel": "sgl_kernel_moe_ops"}],
    },
    # DeepGEMM JIT enablement (SGLANG_ENABLE_JIT_DEEPGEMM; deep_gemm_wrapper.ENABLE_JIT_DEEPGEMM)
    "deep_gemm": {
        "jit": [{"kernel": "deep_gemm"}],
    },
    # DSA's MTP verify (target_verify with next_n >= 2): the native [B, next_n] paged-MQA layout
    "dsa_indexer": {
        "dg_native": [{"kernel": "deep_gemm_paged_mqa_sm100"}],
    },
    # DeepSeek-V4's inline Blackwell / Hopper path reads (policies/deepseek.py): SGLang's Triton
    # kernels (wo_a GEMV / small batch, q RMSNorm + MXFP8, mHC fused stats and combine-norm, the
    # V4.1 indexer's paged FP4 logits); the Blackwell paths' MXFP8 epilogues cast to float8e4nv
    "dsv4_paths": {
        "blackwell": [{"kernel": "triton_fp8"}],
        "hopper": [{"kernel": "triton"}],
    },
    # the DeepSeek family's router GEMM (deepseek_common/utils.tiny_router_gemm_max_tokens)
    # the NVFP4 KV cache's dequantize (kvfp4_tensor.py NVFP4KVQuantizeUtil.dequantize)
    "nvfp4_kv_dequant": {
        "flashinfer": [{"kernel": "flashinfer_nvfp4_kv_dequant"}],
        "torch": [{"kernel": "torch_nvfp4_kv_dequant"}],
    },
    # FlashInfer's FP4 / MXFP8 activation quantize backend (fp4_utils.fp4_quantize,
    # mxfp4_flashinfer_trtllm_moe's routed input)
    "flashinfer_fp4_quantize": {
        "cute-dsl": [{"kernel": "flashinfer_cutedsl_quantize"}],
        "cuda": [{"kernel": "flashinfer_cuda_fp4_quantize"}],
    },
    "flashinfer_mxfp8_quantize": {
        "cute-dsl": [{"kernel": "flashinfer_cutedsl_quantize"}],
        "cuda": [{"kernel": "flashinfer_cuda_mxfp8_quantize"}],
    },
    "tiny_router_gemm": {
        "tiny": [{"kernel": "sglang_jit_tiny_gemm"}],
    },
    # the DeepSeek-V3 fused QKV-A GEMM's backend (kernels/ops/gemm/fused_a_gemm.py)
    "fused_a_gemm": {
        "cutedsl": [{"kernel": "sglang_cutedsl_fused_a_gemm"}],
        "jit": [{"kernel": "sglang_jit_fused_a_gemm"}],
    },
    # DeepSeek's NVFP4 shared expert: the fused GEMM + SwiGLU + quant (DeepseekV2MoE.__init__)
    "nvfp4_swiglu_fusion": {
        "fused": [{"kernel": "sglang_cutedsl_nvfp4_gemm_swiglu"}],
    },
    # Kimi K3's sequence-parallel collective (SGLANG_K3_SP_COLLECTIVE) and its attention-residual
    # carry (SGLANG_K3_SP_ATTN_RES)
    "k3_sp_collective": {
        "sp": [{"kernel": "sglang_jit_sp_collective"}],
        "attn_res": [{"kernel": "sglang_jit_attn_res_tma"}],
    },
    # Kimi K3's fused all-reduce (SGLANG_K3_AR_FUSION; auto-probed on SM 100 / 103)
    "k3_ar_fusion": {
        "fused": [{"kernel": "sglang_jit_k3_ar_fusion"}],
    },
    # --flashinfer-allreduce-fusion-backend
    "fusion": {
        "trtllm": [{"kernel": "flashinfer_trtllm_comm"}],
        "mnnvl": [{"kernel": "flashinfer_mnnvl_comm"}],
        "cutedsl": [{"kernel": "flashinfer_cutedsl_comm"}],
    },
}
