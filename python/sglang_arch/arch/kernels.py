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
        "summary": "FlashAttention 4 (flash-attn-4 CuTe DSL), compiled for the device on first use",
        "targets": ["jit:10.0", "jit:10.3", "jit:10.7", "jit:11.0", "jit:12.0", "jit:12.1"],
        "declared_in": _CUTE,
        "sources": [_CUTE_ARCHS, "flash-attn-4 4.0.0b36 cute/interface.py: arch // 10 in [8, 9, 10, 11, 12]",
                    "sglang 0.5.23: fa4 on SM100 and SM12x"],
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
    # --- collectives ---
    "sglang_jit_custom_ar": {
        "summary": "SGLang's JIT custom all-reduce v2 (sglang/jit_kernel), nvcc for the device",
        "targets": ["jit:8.0+"],
        "sources": ["sglang 0.5.23 jit_kernel: compiled for the running device's arch (tvm-ffi + nvcc)",
                    "measured 2026-11-30 on the H200 host: built in 22.5 s with nvcc 13.0 (ARCH-FACTS)"],
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
}

_MHA, _MLA = ["mha"], ["mla"]

CHOICES: Dict[str, Dict[str, List[Dict[str, Any]]]] = {
    # --attention-backend / --prefill-attention-backend / --decode-attention-backend
    "attention": {
        "fa3": [{"kernel": "fa3_sm90"}, {"kernel": "fa3_sm8x", "kinds": _MHA}],
        "fa4": [{"kernel": "fa4_cute"}],
        "trtllm_mha": [{"kernel": "trtllm_gen_fmha", "kinds": _MHA}, {"kernel": "xqa", "kinds": _MHA}],
        "trtllm_mla": [{"kernel": "trtllm_gen_fmha", "kinds": _MLA}],
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
        "fa4": [{"kernel": "fa4_cute"}],
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
    # torch symmetric-memory all-reduce kernel
    "symm_mem": {
        "multimem": [{"kernel": "torch_multimem"}],
        "two_shot": [{"kernel": "torch"}],
    },
    "custom_ar": {
        "jit_v2": [{"kernel": "sglang_jit_custom_ar"}],
    },
    # --flashinfer-allreduce-fusion-backend
    "fusion": {
        "trtllm": [{"kernel": "flashinfer_trtllm_comm"}],
        "mnnvl": [{"kernel": "flashinfer_mnnvl_comm"}],
        "cutedsl": [{"kernel": "flashinfer_cutedsl_comm"}],
    },
}
