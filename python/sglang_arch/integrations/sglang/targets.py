"""The upstream targets the plugin hooks, what shape each must have, and the guard.

A target is patched only when it exists and still is the SGLang code it was written
against: its parameters, the module attributes its glue function reads, and its body (the
fingerprint of its definition, ``fingerprint.py``, recorded per supported release in
``known_bodies.py``).  Anything else leaves upstream's behaviour in place; the entry point
counts those in one warning and ``sglang-arch show`` lists them.

Each target's hook is one glue function in one guard form (``hooks.py``).
"""

from __future__ import annotations

import inspect
import logging
import os
import pkgutil
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import fingerprint, known_bodies
from .glue import attention, collectives, fusion, moe
from .hooks import answer, check, decides, done, fact, scoped, scoped_capability, scoped_fact, scoped_self, viewed

logger = logging.getLogger("sglang_arch")

TESTED_SGLANG_VERSIONS = known_bodies.SUPPORTED  # the releases whose code the targets were written against

_COMMON = "sglang.srt.utils.common"
_SYMM = "sglang.srt.distributed.device_communicators.torch_symm_mem"
_CAR = "sglang.srt.distributed.device_communicators.configs.custom_all_reduce_v2"
_PCIE_IPC = "sglang.srt.distributed.device_communicators.pcie_ipc_ar"
_FUSION = "sglang.srt.layers.flashinfer_comm_fusion"
_OVERRIDES = "sglang.srt.arg_groups.overrides"
_BASE = "sglang.srt.arg_groups.model_override_base"
_ADD_NORM = "sglang.srt.layers.layer_boundary.residual.add_norm"
_CONFIGURER = "sglang.srt.layers.deep_gemm_wrapper.configurer"
_FP8 = "sglang.srt.layers.quantization.fp8_utils"
_FP4 = "sglang.srt.layers.quantization.fp4_utils"
_UNQUANT = "sglang.srt.layers.quantization.unquant"
_KVFP4 = "sglang.srt.layers.quantization.kvfp4_tensor"
_MXFP4_TRTLLM = "sglang.srt.layers.quantization.mxfp4_flashinfer_trtllm_moe"
# The NVFP4 KV dequantize's two facts, in the order the glue answers them, and its parameters
# (the plugin target and the series sites); _flashinfer_fp4_quantize_impl's parameters
KV_DEQUANT_FACTS = ("is_sm100", "is_sm120")
KV_DEQUANT_PARAMS = ("quant_tensor", "block_scales", "global_scale", "dtype")
FP4_QUANTIZE_PARAMS = ("input", "global_scale", "sf_vec_size", "sf_use_ue8m0", "is_sf_swizzled_layout",
                       "is_sf_8x4_layout", "enable_pdl")
_LOADER_UTILS = "sglang.srt.model_loader.utils"
_MODEL_CONFIG = "sglang.srt.configs.model_config"
_FP8_METHOD = "sglang.srt.layers.quantization.fp8.Fp8LinearMethod"
_FP8_ACT = "sglang.srt.layers.quantization.fp8_activation"
_MXFP4 = "sglang.srt.layers.quantization.mxfp4"
_MXFP4_MARLIN = "sglang.srt.layers.quantization.mxfp4_marlin_moe"
_KV_HOOK = "sglang.srt.arg_groups.kv_cache_hook"
_MEMORY_POOL = "sglang.srt.mem_cache.memory_pool"
_SETUP = "sglang.srt.model_executor.model_runner_components.attention_backend_setup"
_DRAFT = "sglang.srt.speculative.draft_utils.DraftBackendFactory"
_VISION = "sglang.srt.layers.attention.vision.VisionAttention"
_KPOOL = "sglang.srt.layers.attention.dsa.dsa_backend_kpool"
_DSA = "sglang.srt.layers.attention.dsa_backend.DeepseekSparseAttnBackend"
_ARG_GROUPS = "sglang.srt.arg_groups"
_LINEAR = "sglang.srt.layers.attention.linear"
_DRAFT_WORKER = "sglang.srt.speculative.draft_worker_common"
_GEMMA4_VISION = "sglang.srt.models.gemma4_vision.Gemma4VisionAttention"
_KIMI_K3_VL = "sglang.srt.models.kimi_k3_vl"
_MIMO_AUDIO = "sglang.srt.models.mimo_audio.AudioEncoderMixin"
_BEAM_MODEL = "sglang.srt.models.beam.BeamModel"
_DSV4_HOOK = "sglang.srt.arg_groups.deepseek_v4_hook"
_DSPARK = "sglang.srt.models.deepseek_v4_dspark.DeepseekV4ForCausalLMDSpark"
_INKLING_COMM = "sglang.srt.models.inkling_common.kernels.comm"
# Inkling's readers of a group's torch symm-mem communicator that take "enabled" for "has
# NVLink multicast" (glue/collectives.group_without_multicast): name -> its parameters.  The
# fused kernels (ar_sconv_norm_fused, ar_scattered_sconv_fused, ar_fullwidth_sconv_fused)
# also read it, but run only where one of the *_fusable checks below said yes.
INKLING_MULTICAST_CONSUMERS = {
    "ensure_inkling_ar_resources": ("group",),
    "ar_sconv_norm_fusable": ("group", "forward_batch", "num_tokens", "hidden", "dtype"),
    "get_ar_buffer": ("group", "num_tokens", "hidden", "dtype"),
    "symm_mem_all_reduce": ("input", "group", "output", "input_is_ar_buffer", "num_sms", "shared"),
    "_symm_mem_comm": ("group", "input", "full_numel"),
    "scattered_ar_sconv_fusable": ("group", "forward_batch", "num_tokens", "hidden", "dtype"),
    "fullwidth_ar_sconv_fusable": ("group", "forward_batch", "num_tokens", "hidden", "dtype"),
}
_K3_SP = "sglang.srt.layers.communication.k3_sp_collective"
_K3_AR = "sglang.srt.layers.communication.k3_ar_fusion"
_CUTEDSL_GEMM = "sglang.kernels.ops.gemm.cutedsl_bf16_gemm"
_GEMV = "sglang.kernels.ops.gemm.hopper_bf16_gemv"
_ROUTER_GEMV = "sglang.kernels.ops.gemm.muse_spark_router_gemv_cutedsl"
_LORA_FP8 = "sglang.kernels.ops.lora.moe.fp8_quant"
_SBO = "sglang.srt.batch_overlap.single_batch_overlap.SboFlags"
_MUSE = "sglang.srt.models.muse_spark"
_DSV4 = "sglang.srt.models.deepseek_v4"
_DSV4_MHC = "sglang.srt.models.deepseek_v4_mhc"
_V41_SCORING = "sglang.srt.layers.attention.dsv4.v41_indexer.scoring"
# DeepSeek-V4's two inline path facts, in the order the glue answers them (the plugin targets
# and the series sites), and the parameters of the two longer functions that read them
DSV4_FACTS = ("is_blackwell", "is_sm90")
DSV4_WO_A_PARAMS = ("o", "wo_a", "is_decode", "is_target_verify", "fuse_mxfp8_quant", "is_prefill", "fast_path",
                    "fp8_grid", "emit_fp8")
DEEPSEEK_MOE_INIT_PARAMS = ("self", "config", "layer_id", "quant_config", "prefix", "alt_stream", "routed_quant_stream",
                            "is_nextn", "is_deepseek_v4", "vl_correction_bias", "reduce_results")
DSV4_DECODE_SCORES_PARAMS = ("inputs", "token_to_kv_pool", "req_to_token", "candidate_mask", "compute_topk_plan")
# DeepseekSparseAttnBackend._apply_cuda_graph_metadata's parameters (the plugin target and the series site)
DSA_REPLAY_PARAMS = ("self", "bs", "req_pool_indices", "seq_lens", "seq_lens_cpu", "forward_mode",
                     "spec_info", "out_cache_loc", "actual_forward_mode")
# Beam's module-level (capability, TP) -> token band table: the band target decides it
# (the series deletes it in the same step).
BEAM_BAND_TABLE = "sglang.srt.models.beam._FLASHINFER_AR_TOKEN_BAND"


@dataclass(frozen=True)
class Target:
    concern: str  # what the hook routes, for the start-up line
    path: str  # "module.attr" or "module.Class.method"
    hook: Callable  # an AROUND hook over a glue function (hooks.answer, done, check, fact)
    params: Tuple[str, ...]  # the original's parameter names in the tested release
    uses: Tuple[str, ...] = ()  # attributes of the target's module the glue reads
    refresh: Optional[Callable] = None  # recomputes the module's import-time values once routed
    # Audit sites this target takes besides its own function's (``sglang-arch audit``):
    # "module.qualname" (every site of it) or "module.qualname:check" (its sites whose line
    # holds check), e.g. upstream decisions a guard at the build point overrules.
    covers: Tuple[str, ...] = ()
    # A model override provider: SGLang's registry (``model_override_base``
    # ``_MODEL_OVERRIDE_FNS``) holds the function itself, bound when its module was imported,
    # so routing it rebinds it there too (``routing.route`` / ``unroute``).
    provider: bool = False
    # A module value, not a function: the name of the type it must have (``"constexpr"``).
    # SGLang binds it at import and reads it where no Python runs (a Triton ``constexpr``
    # read inside ``@triton.jit`` code); routing binds, once the module has run, the hook's
    # answer in that type (``routing.route``), the hook asked over a function that returns
    # SGLang's own value.  ``params`` is empty.
    value: Optional[str] = None
    # Called per forward, layer or collective, with an answer that depends on the machine
    # alone: decided on its first call and bound to the cheapest equivalent function (its
    # hook's ``specialize``; ``routing.settle``), decided again when the machine changes.
    per_process: bool = False

    @property
    def module(self) -> str:
        """The module that defines the target (SGLang's modules are lower case, classes not)."""
        parts = self.path.split(".")
        for i, part in enumerate(parts[:-1]):
            if part[:1].isupper():
                return ".".join(parts[:i])
        return ".".join(parts[:-1])

    @property
    def attr(self) -> str:
        """The target's name inside its module (``Class.method`` for a method)."""
        return self.path[len(self.module) + 1:]


# Decisions elsewhere in SGLang that the attention guards judge (``covers``): each picks,
# from an identity probe, a backend of the kernel catalog (arch/kernels.py CHOICES
# ["attention"]) into a field the guards read (docs/differences.md D17).  Where the catalog
# runs the pick the guards keep it; elsewhere the registry's default is what is built.
# One check per entry, so a decision added beside one stays unrouted until judged here.
# MiniCPM's sparse backends (minicpm_flashattn / minicpm_flashinfer) are the catalog's own
# decision (``minicpm_sparse``): the guards replace one that cannot run only by the other
# (``policies/minicpm.py``), and the pick between them is routed by its own target below.
# Left out on purpose: DeepSeek-V4's --dsv4-attn-backend (its own targets below; not an
# --attention-backend), linear-attention kernels (routed by their own targets below, not
# judged by these guards), DSA-internal and vision/audio kernels, sizes, MoE, and sites that
# also pick what these guards do not judge (MiniMax-M3's NVFP4 arm picks the MoE runner, the
# all-to-all and the KV dtype too: routed by its own target below).
_MO = "sglang.srt.arg_groups.model_overrides"
# Model overrides that declare --attention-backend (or its prefill / decode split): the
# resolution-time answer (``_attention_backend_default``) replaces a declared backend that
# cannot run here, and the build guard judges whatever reaches a model runner.
_DECLARED_BACKEND_SITES = (
    f"{_MO}.beam._beam_overrides:get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120",
    f"{_MO}.deepseek_v2._deepseek_family_overrides:if get_platform().is_sm100:",
    f"{_MO}.exaone._exaone_overrides:if get_platform().is_cuda and get_platform().is_sm100:",
    f"{_MO}.exaone._exaone_overrides:elif get_platform().is_cuda and get_platform().device_sm >= 80:",
    f"{_MO}.falcon_h1._falcon_h1_jet_overrides:if get_platform().is_sm100 and cfg.attention_backend is None:",
    f'{_MO}.gemma4._gemma4_overrides:else ("trtllm_mha" if get_platform().is_sm100 else "triton")',
    f"{_MO}.gpt_oss._gpt_oss_overrides:if get_platform().is_sm100:",
    f"{_MO}.gpt_oss._gpt_oss_overrides:elif get_platform().is_sm90:",
    f"{_MO}.granitemoehybrid._granite_moe_hybrid_overrides:if has_mamba and get_platform().is_sm100 and "
    "cfg.attention_backend is None:",
    f"{_MO}.inkling._inkling_overrides:if get_platform().is_sm90 or get_platform().is_sm100:",
    f"{_MO}.lfm2._lfm2_overrides:if get_platform().is_sm100 and cfg.attention_backend is None:",
    f'{_MO}.minicpm._minicpm_sala_overrides:"minicpm_flashattn": ("fa4" if get_platform().is_blackwell else "fa3")',
    f"{_MO}.minicpmv._minicpm_v4_6_overrides:if get_platform().is_sm100 and cfg.attention_backend is None:",
    f"{_MO}.minimax_m3._minimax_m3_overrides:elif get_platform().is_sm90:",
    f"{_MO}.nemotron_h._nemotron_h_overrides:elif get_platform().is_sm100:",
    f"{_MO}.olmo2._olmo2_overrides:if get_platform().is_cuda and get_platform().is_sm100:",
    f"{_MO}.olmo2._olmo2_overrides:elif get_platform().is_cuda and get_platform().device_sm >= 80:",
    f"{_MO}.qwen3_5._qwen3_5_hybrid_overrides:if not get_platform().is_sm100 or cfg.attention_backend is not None:",
    f"{_MO}.kimi_k3._kimi_k3_overrides:if not (get_platform().is_sm100 and get_platform().device_sm in (100, 103)):",
    f"{_OVERRIDES}._step3p_overrides:if get_platform().is_blackwell:",
    f"{_OVERRIDES}._step3p_overrides:elif get_platform().is_sm90:",
)
# Nemotron-H's Blackwell arm declares the server's and the speculative draft's backends:
# the draft's is built by the draft runner and, for EAGLE / NEXTN / DSPARK, by the draft
# backend factory, each guarded.
_DRAFT_AND_SERVER_BACKEND_SITES = (
    f"{_MO}.nemotron_h._nemotron_h_overrides:if get_platform().is_blackwell and is_attention_backend_not_set(cfg):",
    f"{_MO}.nemotron_h._nemotron_h_overrides:if get_platform().is_sm100 and cfg.speculative_eagle_topk in (",
)
# Kimi-K3's DSPARK draft default (trtllm_mha on is_sm100): the DSPARK draft is built by the
# draft backend factory, guarded.
_DRAFT_FACTORY_SITES = (
    "sglang.srt.arg_groups.kimi_k3_hook.apply_kimi_k3_spec_backend_defaults:and get_platform().is_sm100",
)
# MiniCPM's sparse backend picks FlashAttention 4 or 3 inside its constructor by is_blackwell
# (``fa_impl_ver``): the build guard judges the path it builds, "<fa4|fa3>+<top-k path>", by
# the catalog (``policies/minicpm.kind`` reads the same fact), and builds the other MiniCPM
# sparse backend where that path has no build here.
_MINICPM_KERNEL_SITES = (
    "sglang.srt.layers.attention.minicpm.backend.MiniCPMSparseBackend.__init__:if use_blackwell:",
)
# DFLASH's draft backend fallback: built by the draft model runner only.
_DRAFT_RUNNER_SITES = (
    "sglang.srt.arg_groups.speculative_hook._resolve_dflash_draft_attention_backend:"
    "if not current_platform.is_out_of_tree() and get_platform().is_sm100:",
)
# Every site the attention guards take, in one tuple.
ATTENTION_GUARD_COVERS = (_DECLARED_BACKEND_SITES + _DRAFT_AND_SERVER_BACKEND_SITES + _DRAFT_RUNNER_SITES
                          + _DRAFT_FACTORY_SITES + _MINICPM_KERNEL_SITES)


# Decisions elsewhere in SGLang that the MoE pass's guard judges (``covers``; the glue is
# ``moe.moe_runner_backend``, docs/differences.md D20): model overrides, and the DeepSeek
# pass before it, write a MoE runner or an FP8 / FP4 GEMM backend from an identity probe
# into the server arguments; the guard, run by SGLang after every override and
# ``_deepseek_moe_quant_resolution``, keeps the pick where the kernel catalog runs it for
# the experts' kind and replaces it elsewhere (a GEMM backend by ``auto``, resolved by the
# registry at load time).  One check per entry; each has a case in
# test_moe_override_guard.py.  Formats the guard does not judge stay SGLang's at a covered
# site: Llama-4 / DeepSeek per-tensor FP8 (modelopt_fp8, no weight_block_size), DeepSeek's
# modelopt_mixed and Kimi-K2 INT4.
# FP8 checkpoints whose routed experts are MXFP4 (Bailing V3, DeepSeek-V4) are the
# ``fp8_mxfp4`` kind: Fp8Config's own dispatch serves them (fp8.py ``get_quant_method``:
# marlin, flashinfer_mxfp4, ...), and DeepSeek-V4.1's ``flashinfer_cutedsl`` is FlashInfer's
# CuTe DSL MXFP8 GEMM (catalog ``flashinfer_cutedsl_gemm_mxfp8``).
# Left out on purpose:
# - gpt_oss's ``is_blackwell and driver >= 595`` arm (triton instead of triton_kernel, which
#   segfaults there), and mimo_v2, nemotron_h, qwen3_moe, minimax_m3: their sites are kernel
#   gates (audit/gates.py), not decisions; the guard still judges what they leave.
MOE_GUARD_COVERS = (
    f"{_MO}.glm4_moe._glm4_moe_overrides:if get_platform().is_sm100:",
    f'{_MO}.gemma4._gemma4_overrides:if get_platform().is_sm100 and cfg.moe_runner_backend == "auto":',
    f'{_MO}.llama4._llama4_overrides:if get_platform().is_sm100 and cfg.moe_runner_backend == "auto":',
    f"{_MO}.minimax_m2._minimax_m2_overrides:get_platform().is_sm100",
    f"{_MO}.cohere2_moe._cohere2_moe_runner_overrides:if not get_platform().is_sm100:",
    f"{_MO}.kimi_k3._kimi_k3_moe_runner_overrides:"
    "if not (get_platform().is_sm100 and get_platform().device_sm in (100, 103, 107)):",
    f"{_MO}.beam._beam_overrides:and get_platform().is_sm100",
    f"{_MO}.gpt_oss._gpt_oss_overrides:if get_platform().is_sm100 and is_mxfp4_quant_format:",
    f"{_MO}.gpt_oss._gpt_oss_overrides:elif get_platform().is_sm120 and is_mxfp4_quant_format:",
    f'{_MO}.muse_glimmer._muse_glimmer_fp4_gemm_runner_overrides:if get_platform().is_sm120 and '
    'cfg.fp4_gemm_runner_backend == "auto":',
    f"{_OVERRIDES}._deepseek_moe_quant_resolution:if get_platform().is_sm100:",
    f"{_MO}.bailing_moe_v3._bailing_moe_v3_overrides:"
    "get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120",
    f"{_MO}.deepseek_v4._deepseek_v4_overrides:get_platform().is_sm90",
    f"{_MO}.deepseek_v4._deepseek_v4_overrides:or get_platform().is_sm100",
    f"{_MO}.deepseek_v4._deepseek_v4_overrides:or get_platform().is_sm120",
    f"{_MO}.deepseek_v4._deepseek_v4_overrides:and get_platform().is_sm100",
)
# The NVFP4 experts' load-time pick for ``auto`` (marlin on SM80-SM9x, else trtllm-gen), in
# ModelOpt's MoE method and in Muse Spark's own ModelOpt-FP4 experts: it runs only while the
# runner is still ``auto``, which the MoE guard leaves only where the registry's decision is
# this pick (``policies/moe.upstream_moe_runner`` models it; the matrix's NVFP4 row checks
# it per capability).  The FP4-expert split of Fp8Config's flashinfer_mxfp4 (CUTLASS on
# is_sm90 / is_sm120, trtllm-gen elsewhere) runs only for that runner, which the guard
# leaves only where the catalog runs it for the ``fp8_mxfp4`` kind, and the catalog's
# runnable kernel there is the one the split picks.  test_audit.py reads the premises.
MOE_LOAD_TIME_COVERS = (
    "sglang.srt.layers.quantization.modelopt_quant.ModelOptNvFp4FusedMoEMethod.create_moe_runner:"
    "if is_cuda() and (8, 0) <= get_device_capability() < (10, 0):",
    "sglang.srt.layers.muse_spark.muse_spark_fp4_moe._resolve_moe_runner_backend:"
    "if is_cuda() and (8, 0) <= get_device_capability() < (10, 0):",
    "sglang.srt.layers.quantization.fp8.Fp8Config.get_quant_method:"
    "if get_platform().is_sm90 or get_platform().is_sm120:",
)

# FP8 block GEMM picks inside SGLang's dispatch that the FP8 GEMM and DeepGEMM targets decide
# for: ``_dispatch_auto_backend`` runs only while the backend is ``auto``, which the FP8 GEMM
# target leaves only where SGLang's automatic pick has a build here (elsewhere it names the
# registry's backend); the SM90 block-32 DeepGEMM pick for ``auto`` needs
# ``ENABLE_JIT_DEEPGEMM``, which the DeepGEMM target leaves on only where DeepGEMM has a
# build, and is the registry's FP8 GEMM decision there (``deep_gemm`` where it is on).  ``test_audit.py`` checks both
# premises against the installed release's source.
_FP8_UTILS = "sglang.srt.layers.quantization.fp8_utils"
FP8_GEMM_COVERS = (
    f"{_FP8_UTILS}._dispatch_auto_backend:elif get_platform().is_sm120:",
    f"{_FP8_UTILS}.dispatch_w8a8_block_fp8_linear:(get_platform().is_sm90 and (backend.is_auto() or "
    "backend.is_deep_gemm()))",
)
# Not covered: the same condition's SM100 arm (block-32 DeepGEMM for an explicit deep_gemm
# with UE8M0 activation scales) is its own decision, taken by the "FP8 block-32 DeepGEMM"
# target over the function (policies/quant.deep_gemm_sm100_block32).

# DSA's MHA one-shot kernel: ``_forward_standard_mha`` runs TRT-LLM's ragged attention where
# the device's major is 10 or more, FA3's varlen kernel below.  It runs only under
# ``self.use_mha``, which only ``set_dsa_prefill_impl`` sets, from the MHA one-shot band the
# registry decides there (``policies/dsa.prefill_bands``): the tier's band (9.0, 10.x), kept
# only where the kernel this check then picks for the device has a build (the policy models
# the same check: trtllm from major 10, fa3 below).  So the kernel the check picks is one
# that band decision judged already.  ``test_deepseek_family_picks.py`` checks the premises
# against the installed release's source.
DSA_MHA_KERNEL_COVERS = (
    f"{_DSA}._forward_standard_mha:if _is_cuda and self.device_sm_major >= 10:",
)

# Fact -> upstream helper, as SGLang 0.5.23's runtime_context._PLATFORM_PROBES /
# _PLATFORM_VALUES map them; checked against the installed release before use.
FACT_HELPERS = {
    "is_sm90": "is_sm90_supported",
    "is_sm100": "is_sm100_supported",
    "is_sm100_or_sm110": "is_sm100_or_sm110_supported",
    "is_sm110": "is_sm110_supported",
    "is_sm120": "is_sm120_supported",
    "is_blackwell": "is_blackwell_supported",
    "is_hopper_with_cuda_12_3": "is_hopper_with_cuda_12_3",
    "device_capability": "get_device_capability",
    "device_sm": "get_device_sm",
}
_PROBE_PARAMS = ("device_capability_majors", "cuda_version")


def all_targets() -> List[Target]:
    facts = [Target("platform facts", f"{_COMMON}.{helper}", fact(name),
                     {"device_capability": ("device_id",), "device_sm": ()}.get(name, _PROBE_PARAMS),
                     per_process=True)
             for name, helper in FACT_HELPERS.items()]
    # ``is_blackwell`` is the same object under a second name in the same module.
    facts.append(Target("platform facts", f"{_COMMON}.is_blackwell", fact("is_blackwell"), _PROBE_PARAMS,
                        per_process=True))
    return facts + [
        Target("torch symm mem", f"{_SYMM}.TorchSymmMemCommunicator.__init__", done(collectives.init_torch_symm_mem),
               ("self", "group", "device"),
               ("torch_symm_mem", "torch_symm_mem_available", "dist", "envs", "get_exec",
                "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES")),
        # SGLang's PCIe-IPC all-reduce: opt-in upstream; on by default where the ledger has a
        # measurement (the user's SGLANG_ENABLE_PCIE_IPC_ALLREDUCE, set either way, wins).
        Target("PCIe-IPC all-reduce", f"{_PCIE_IPC}.eligible_group", answer(collectives.pcie_ipc_eligible),
               ("group_name", "world_size", "deterministic"),
               ("envs", "_ELIGIBLE_GROUP_NAMES", "_warn_deterministic_wins")),
    ] + [
        # Inkling's multicast consumers: where the plugin kept the communicator for two-shot
        # (no multicast), each runs with the group seen without it (stock's disabled path).
        Target("symm-mem consumers", f"{_INKLING_COMM}.{name}",
               viewed(collectives.group_without_multicast, "group", params.index("group"),
                      specialize=collectives.inkling_consumer_settled), params, per_process=True)
        for name, params in INKLING_MULTICAST_CONSUMERS.items()
    ] + [
        Target("custom all-reduce v2", f"{_CAR}._get_all_reduce_configs", answer(collectives.all_reduce_configs), (),
               ("_sm90_configs", "_sm100_configs", "_sm107_configs", "AllReduceConfig", "Heuristic")),
        Target("all-reduce fusion", f"{_FUSION}._resolve_backend", answer(fusion.resolve_backend),
               ("backend", "is_multi_node")),
        # The workspace preflight's sizes: for the trtllm backend, the driver it reads answers
        # the multicast granularity the trtllm workspace does without (FlashInfer's allocation).
        Target("all-reduce fusion", f"{_FUSION}._flashinfer_trtllm_workspace_allocation_sizes",
               viewed(fusion.trtllm_workspace_driver, "cuda_driver", 0),
               ("cuda_driver", "prop", "world_size", "max_token_num", "hidden_dim", "dtype"),
               ("resolve_flashinfer_allreduce_fusion_backend",)),
        Target("all-reduce fusion", f"{_ADD_NORM}.flashinfer_ar_fusion_applies",
               answer(fusion.applies, specialize=fusion.applies_settled), ("batch_size",),
               ("_is_cuda", "_is_flashinfer_available", "is_dp_attention_enabled", "get_exec", "get_parallel",
                "uses_cutedsl_ar_fusion",
                "is_flashinfer_allreduce_unavailable", "FUSE_ALLREDUCE_MAX_BATCH_SIZE"), per_process=True),
        Target("all-reduce fusion", f"{_OVERRIDES}._flashinfer_allreduce_fusion_auto_enable",
               answer(fusion.auto_enable, fusion.AUTO_ENABLE_FACTS), ("view",)),
        # Kimi K3's SP collective: _init_state imports get_device_sm from utils.common inside
        # its body and reads it for the collective's SM band; for that one call the name answers
        # the registry's SM.
        Target("K3 SP collective", f"{_K3_SP}._init_state",
               scoped(collectives.k3_sp_collective_sm, "get_device_sm", module=_COMMON), ()),
        # Kimi K3's fused all-reduce: the auto-probe of _get_state imports get_device_sm the
        # same way and reads it for the fusion's SM band.
        Target("K3 all-reduce fusion", f"{_K3_AR}._get_state",
               scoped(collectives.k3_ar_fusion_sm, "get_device_sm", module=_COMMON), ()),
        Target("Beam fused all-reduce", f"{_BEAM_MODEL}._all_reduce_limits",
               decides(collectives.beam_all_reduce_limits, specialize=collectives.beam_limits_settled),
               ("self", "hidden_states"),
               ("torch", "get_parallel", "get_forward", "_beam_owns_tp_boundaries",
                "should_skip_post_experts_all_reduce"), per_process=True),
        Target("Beam fused all-reduce", f"{_BEAM_MODEL}._flashinfer_ar_band",
               scoped(fusion.beam_flashinfer_band_table, "_FLASHINFER_AR_TOKEN_BAND", value=True), (),
               ("_FLASHINFER_AR_TOKEN_BAND",), covers=(BEAM_BAND_TABLE,)),
        Target("attention backend", f"{_BASE}.get_default_attn_backend", answer(attention.default_backend),
               ("server_args", "use_mla_backend", "model_config"),
               ("current_platform", "resolving_view", "resolved_view", "is_no_spec_infer_or_topk_one",
                "_forces_eagle_topk_one")),
        Target("attention backend", f"{_OVERRIDES}._attention_backend_default",
               answer(attention.attention_backend_default), ("view",),
               ("use_mla_backend", "model_config_of", "logger", "_deterministic_is_deepseek_model"),
               covers=_DECLARED_BACKEND_SITES + _DRAFT_AND_SERVER_BACKEND_SITES),
        Target("FA4 page size", f"{_OVERRIDES}._fa4_page_constraint", answer(attention.fa4_page_size), ("view",),
               ("use_mla_backend", "model_config_of", "logger")),
        Target("attention backend", f"{_OVERRIDES}._deterministic_attention_backend",
               answer(attention.deterministic_backend), ("view",),
               ("use_mla_backend", "_deterministic_is_deepseek_model", "logger")),
        # The build guard: what a model runner and the speculative draft finally build.
        Target("attention build guard", f"{_SETUP}.resolve_attention_backend_strs",
               answer(attention.built_backends), ("model_runner",), ("ResolvedAttentionBackendStr",),
               covers=ATTENTION_GUARD_COVERS),
        Target("attention build guard", f"{_DRAFT}._create_backend", check(attention.guard_draft_backend),
               ("self", "backend_name", "backend_map", "error_template", "stamps_children"),
               covers=_DRAFT_AND_SERVER_BACKEND_SITES + _DRAFT_FACTORY_SITES),
        Target("speculative draft attention", f"{_DRAFT}._create_hybrid_linear_attn_decode_backend",
               answer(attention.hybrid_linear_draft_decode), ("self",)),
        Target("speculative draft attention", f"{_DRAFT}._create_hybrid_linear_attn_prefill_backend",
               answer(attention.hybrid_linear_draft_prefill), ("self",)),
        # Linear attention (hybrid GDN / KDA models): each phase's kernel default.
        Target("linear attention", f"{_ARG_GROUPS}.attention_hook.handle_linear_attn_backend",
               check(attention.linear_decode_default), ("server_args",),
               ("resolving_view", "declare_resolution", "get_platform", "logger")),
        Target("linear attention", f"{_ARG_GROUPS}.kimi_k3_hook.apply_kimi_k3_linear_attn_defaults",
               done(attention.kimi_linear_decode_default), ("server_args",),
               ("resolving_view", "declare_resolution", "logger")),
        Target("linear attention", f"{_ARG_GROUPS}.glm5_next_hook.apply_glm5_next_spec_backend_defaults",
               done(attention.glm5_verify_default), ("server_args",),
               ("resolving_view", "declare_resolution", "logger")),
        Target("linear attention", f"{_LINEAR}.gdn_backend.flashinfer_gdn_prefill_default",
               answer(attention.gdn_prefill_default), ("model_runner",),
               ("get_exec", "get_schedule", "hybrid_gdn_config", "rank0_log")),
        Target("linear attention", f"{_LINEAR}.kda_backend.flashinfer_kda_prefill_default",
               answer(attention.kda_prefill_default), ("model_runner",), ("get_exec", "CudaGraphBackend")),
        Target("speculative draft attention", f"{_DRAFT_WORKER}.resolve_draft_worker_attention_backend",
               answer(attention.draft_worker_backend), ("algo_label",)),
        Target("vision attention", f"{_VISION}._determine_attention_backend",
               answer(attention.vision_backend), ("self", "passed_backend")),
        Target("vision attention", f"{_GEMMA4_VISION}._select_backend", answer(attention.gemma4_vision_backend), ()),
        Target("vision attention", f"{_KIMI_K3_VL}._resolve_mm_attention_backend",
               answer(attention.kimi_k3_vision_backend),
               ("configured_backend", "max_seqlen", "total_tokens", "device", "fa4_available"),
               ("_is_fa4_available", "_SM103_TRITON_MAX_SEQLEN", "_SM103_FA4_MIN_ATTENTION_WORK")),
        Target("audio attention", f"{_MIMO_AUDIO}.build_audio_encoder",
               scoped(attention.mimo_local_attention, "is_sm90_supported"), ("self", "config"),
               ("is_sm90_supported",)),
        Target("DSA attention", f"{_OVERRIDES}._dsa_kv_cache_dtype_default",
               answer(attention.dsa_kv_cache_dtype_default), ("view",),
               ("model_config_of", "_DEEPSEEK_FAMILY_ARCHS", "logger")),
        Target("DSA attention", f"{_OVERRIDES}._dsa_split_backend_resolution",
               answer(attention.dsa_split_backends), ("view",),
               ("model_config_of", "_DEEPSEEK_FAMILY_ARCHS", "logger", "_check_dsa_backend_constraints")),
        Target("DSA attention", f"{_KPOOL}.DeepseekSparseAttnBackendKPoolMixin._resolve_kpool_tail_backend",
               answer(attention.dsa_kpool_tail_backend), ("self", "topk_indices", "dsa_impl")),
        # The per-batch prefill pick: the MHA one-shot band and flashmla_auto's variant are
        # inline in set_dsa_prefill_impl, the smallest method that makes them, read through
        # two probes the backend binds at init; the hook answers those two for the call.
        Target("DSA attention", f"{_DSA}.set_dsa_prefill_impl",
               scoped_self(attention.dsa_prefill_probes, ("_get_device_sm", "_is_blackwell")),
               ("self", "forward_batch"), covers=DSA_MHA_KERNEL_COVERS),
        # DeepSeek-V4's --dsv4-attn-backend auto: the one capability condition among SGLang's
        # model, dtype, parallelism and layout ones is a probe the function imports when it
        # runs (from sglang.srt.utils.common); the hook answers that probe for the call.
        Target("DeepSeek-V4 attention", f"{_DSV4_HOOK}._default_dsv4_attention_backend",
               scoped(attention.dsv4_flashmla_mega_default, "is_sm100_supported", module=_COMMON),
               ("server_args",)),
        # An explicit --dsv4-attn-backend flashmla_mega, judged only where SGLang's own
        # assertion (is_sm100_supported) would let it through without a build.
        Target("DeepSeek-V4 attention", f"{_DSV4_HOOK}.apply_deepseek_v4_defaults",
               check(attention.check_dsv4_attn_backend), ("server_args", "model_arch")),
        # DSpark's commit-KV views: one platform fact read inline, beside SGLang's unified-KV
        # and uniform-FP8 checks; the hook answers that fact to the method's module for the call.
        Target("DeepSeek-V4 attention", f"{_DSPARK}.project_commit_kv",
               scoped_fact(attention.dspark_commit_kv_views, "is_blackwell"), ("self", "main_hidden", "pool"),
               ("get_platform",), per_process=True),
        # DSA's MTP verify layout (DeepGEMM's native [B, next_n] schedule): both methods read
        # get_platform().is_sm100 of their module for it; during the call the module's
        # get_platform() answers that fact with the registry's one decision, every other SGLang's.
        Target("DSA attention", f"{_DSA}._build_paged_mqa_schedule_2d_ctx_lens",
               scoped_fact(attention.dsa_dg_native_verify, "is_sm100"),
               ("self", "forward_mode", "cache_seqlens_int32", "seqlens_expanded", "batch_size"), ("get_platform",), per_process=True),
        Target("DSA attention", f"{_DSA}._apply_cuda_graph_metadata",
               scoped_fact(attention.dsa_dg_native_verify, "is_sm100"),
               DSA_REPLAY_PARAMS, ("get_platform",), per_process=True),
        # Model overrides whose rule reads a platform fact inside a larger function: for the
        # call, the module's get_platform() answers that fact by the registry's decision.
        Target("MiniCPM sparse attention", f"{_MO}.minicpm._minicpm_sala_overrides",
               scoped_fact(attention.minicpm_sparse_flashinfer, "is_blackwell"),
               ("server_args", "hf_config"), ("get_platform",), provider=True),
        Target("MiniMax-M3 NVFP4 arm", f"{_MO}.minimax_m3._minimax_m3_overrides",
               scoped_fact(attention.minimax_m3_blackwell_arm, "is_blackwell"),
               ("server_args", "hf_config"), ("get_platform",), provider=True),
        # The same arm, asked where the attention backend, the KV pool class and its cell-size
        # budget read it (one decision answers all: policies/minimax_m3.py).
        Target("MiniMax-M3 NVFP4 arm", f"{_MODEL_CONFIG}.uses_minimax_m3_nvfp4_native_stack",
               answer(attention.minimax_m3_native_stack), ("quantization",)),
        Target("MoE runner", f"{_OVERRIDES}._moe_runner_backend_quant_constraints", answer(moe.moe_runner_backend),
               ("view",), ("model_config_of", "logger", "declare_resolution", "validate_declarations"),
               covers=MOE_GUARD_COVERS + MOE_LOAD_TIME_COVERS),
        Target("DeepGEMM", f"{_CONFIGURER}._compute_enable_deep_gemm", answer(moe.deep_gemm_enabled), (),
               ("ENABLE_JIT_DEEPGEMM", "DEEPGEMM_BLACKWELL", "DEEPGEMM_SCALE_UE8M0",
                "DEEPGEMM_NEED_TMA_ALIGNED_SCALES", "DEEPGEMM_PAGED_SPARSE_MQA_LOGITS"),
               refresh=moe.refresh_deep_gemm_flags),
        Target("FP8 GEMM backend", f"{_FP8}.initialize_fp8_gemm_config", done(moe.fp8_gemm_config), (),
               ("get_exec", "Fp8GemmRunnerBackend", "FP8_GEMM_RUNNER_BACKEND"), covers=FP8_GEMM_COVERS),
        Target("FP4 GEMM backend", f"{_FP4}.initialize_fp4_gemm_config", done(moe.fp4_gemm_config), (),
               ("get_exec", "Fp4GemmRunnerBackend", "FP4_GEMM_RUNNER_BACKEND")),
        # The BF16 GEMM's auto pick reads get_platform().is_sm100 inside the function: for the
        # call, that fact answers whether the registry's BF16 GEMM is SGLang's CuTe DSL kernel.
        Target("BF16 GEMM backend", f"{_UNQUANT}.initialize_bf16_gemm_config",
               scoped_fact(moe.bf16_gemm_cutedsl, "is_sm100"), (), ("get_exec", "get_platform")),
        # Block-FP8 weights' UE8M0 requantization at load: its dense SM12x check reads
        # get_device_sm(); for the call it answers 120 where the registry's dense block-FP8
        # GEMM reads FP32 scales (policies/quant.py, D26), the device's SM elsewhere.
        Target("FP8 UE8M0 requant", f"{_LOADER_UTILS}.should_deepgemm_weight_requant_ue8m0",
               scoped(moe.dense_ue8m0_requant_sm, "get_device_sm"),
               ("weight_block_size", "output_dtype", "weight_shape", "grouped_moe"), ("get_device_sm",)),
        # Load-time quantization rules SGLang reads from one platform fact inside a larger
        # function (policies/quant.py): for the call, that fact answers the registry's rule.
        Target("FP8 block-32 BF16 cache", f"{_FP8_METHOD}.process_weights_after_loading_block_quant",
               scoped_fact(moe.hopper_bf16_weight_cache, "is_sm90"), ("self", "layer"), ("get_platform",)),
        Target("FP8 block-32 DeepGEMM", f"{_FP8}.dispatch_w8a8_block_fp8_linear",
               scoped_fact(moe.deep_gemm_sm100_block32, "is_sm100"), ("weight_block_size", "act_scale_ue8m0"),
               ("get_platform",)),
        Target("FP8 fused activation", f"{_FP8_ACT}.DenseSiluAndMulQuant.__init__",
               scoped_fact(moe.deep_gemm_sm100_fused_activation, "is_sm100"), ("self", "down_proj"),
               ("get_platform",)),
        Target("MXFP4 triton_kernels flags", f"{_MXFP4}._swizzle_mxfp4",
               scoped_fact(moe.triton_mxfp4_persistent, "is_sm100"), ("quant_tensor", "scale", "num_warps"),
               ("get_platform",)),
        Target("MXFP4 Marlin widths", f"{_MXFP4_MARLIN}.Mxfp4MarlinMoEMethod.create_weights",
               scoped_fact(moe.marlin_mxfp4_hopper_widths, "is_sm90"),
               ("self", "layer", "num_experts", "hidden_size", "intermediate_size_per_partition", "params_dtype",
                "extra_weight_attrs"), ("get_platform",)),
        Target("NVFP4 KV prefill dtype", f"{_KV_HOOK}.handle_nvfp4_prefill_kv_dequant_dtype",
               scoped_fact(moe.nvfp4_native_prefill, "is_sm100"), ("server_args",), ("get_platform",)),
        Target("MXFP8 MoE activations", f"{_MXFP4}._prepare_flashinfer_mxfp8_activations",
               scoped(moe.mxfp8_moe_quantizer_sm107, "_is_sm107_supported"), ("x", "hidden_size"),
               ("_is_sm107_supported",)),
        Target("MiniMax sparse index dtype", f"{_MEMORY_POOL}.get_minimax_sparse_index_dtype",
               scoped_fact(moe.minimax_fp8_index_hopper, "is_sm90"), ("fp8_attn_gemm", "kv_cache_dtype", "model_dtype"),
               ("get_platform",)),
        # The LoRA MoE's FP8 quantizer: a Triton constexpr bound at import (a value target).
        Target("LoRA MoE FP8 division", f"{_LORA_FP8}._WHOLE_ROW_FAST_DIV", answer(moe.lora_fp8_whole_row_fast_div),
               (), value="constexpr"),
        # DeepSeek-V4's Triton kernel paths: each function reads get_platform().is_blackwell /
        # is_sm90 inline per layer; for the call, its module's get_platform() answers them with
        # the registry's one decision (policies/deepseek.py), every other fact SGLang's.
        Target("DeepSeek-V4 kernel paths", f"{_DSV4}._apply_wo_a_bf16_matmul",
               scoped_fact(moe.dsv4_kernel_paths, DSV4_FACTS), DSV4_WO_A_PARAMS, ("get_platform",), per_process=True),
        Target("DeepSeek-V4 kernel paths", f"{_DSV4}.MQALayer._normalize_q_lora",
               scoped_fact(moe.dsv4_blackwell_path, "is_blackwell"), ("self", "q"), ("get_platform",), per_process=True),
        Target("DeepSeek-V4 kernel paths", f"{_DSV4_MHC}._mix_stats_impl",
               scoped_fact(moe.dsv4_kernel_paths, DSV4_FACTS), ("hc", "x"), ("get_platform",), per_process=True),
        Target("DeepSeek-V4 kernel paths", f"{_DSV4_MHC}._combine",
               scoped_fact(moe.dsv4_kernel_paths, DSV4_FACTS), ("hc", "state", "quantized"), ("get_platform",), per_process=True),
        # DeepSeek-V4.1's indexer: DeepGEMM's MQA logits (decode, prefill, the candidate sparse
        # table, the fused index store) or torch; never DeepGEMM where it has no build.
        Target("DeepSeek-V4 kernel paths", "sglang.srt.layers.attention.dsv4.v41_indexer.is_sm100_or_newer",
               answer(moe.dsv41_indexer_deep_gemm), ()),
        Target("DeepSeek-V4 kernel paths", f"{_V41_SCORING}.decode_scores",
               scoped_fact(moe.dsv4_hopper_path, "is_sm90"), DSV4_DECODE_SCORES_PARAMS, ("get_platform",), per_process=True),
        # The DeepSeek family's router GEMM: SGLang's tiny BF16 GEMM (up to 16 rows) or cuBLAS;
        # the registry answers -1 where it keeps cuBLAS, else SGLang's function checks the shape.
        Target("Router GEMM", "sglang.srt.models.deepseek_common.utils.tiny_router_gemm_max_tokens",
               answer(moe.tiny_router_gemm_off), ("num_experts", "hidden_size", "weight_dtype")),
        # DeepSeek's NVFP4 shared expert: the one platform fact the MoE layer's constructor reads
        # (the fused GEMM + SwiGLU + quant kernel) answers the registry's decision for the call.
        Target("Shared-expert NVFP4 fusion", "sglang.srt.models.deepseek_v2.DeepseekV2MoE.__init__",
               scoped_fact(moe.nvfp4_swiglu_fusion, "is_sm100"), DEEPSEEK_MOE_INIT_PARAMS, ("get_platform",)),
        # DeepSeek's shared-expert fusion under NVFP4 + Marlin: the class method's one probe call
        # (is_sm90_supported, imported by the module) answers the registry's rule for the call.
        Target("Shared-expert fusion", "sglang.srt.models.deepseek_v2.DeepseekV2ForCausalLM"
               ".shared_experts_fusion_disable_reason",
               scoped(moe.shared_experts_hopper_marlin_hold, "is_sm90_supported"), ("cls", "hf_config", "quant_config"),
               ("is_sm90_supported",)),
        # DeepSeek-V4.1's index logits dtype: the module's own SM100 probe, called in the
        # (cached) function, answers the registry's rule for the call.
        Target("DeepSeek-V4.1 index logits", "sglang.kernels.ops.attention.dsv4.index_logits.index_logits_dtype",
               scoped(moe.dsv41_bf16_index_logits, "_is_sm100"), (), ("_is_sm100",)),
        # The fused QKV-A GEMM's auto backend, bound at import (_AUTO_BACKEND): for the call,
        # that name answers the registry's backend.
        Target("Fused QKV-A GEMM", "sglang.kernels.ops.gemm.fused_a_gemm.dsv3_fused_a_gemm",
               scoped(moe.fused_a_gemm_auto_backend, "_AUTO_BACKEND", value=True),
               ("mat_a", "mat_b", "output", "backend"), ("_AUTO_BACKEND", "FusedAGemmBackend")),
        # The NVFP4 KV cache's dequantize reads get_platform().is_sm100 / is_sm120 per call to take
        # FlashInfer's kernel: for the call, those facts answer the registry's one decision
        # (policies/quant.nvfp4_kv_dequant); SGLang's is_sm90 assert on the fallback stays its own.
        Target("NVFP4 KV dequantize", f"{_KVFP4}.NVFP4KVQuantizeUtil.dequantize",
               scoped_fact(moe.nvfp4_kv_dequant, KV_DEQUANT_FACTS), KV_DEQUANT_PARAMS, ("get_platform",), per_process=True),
        # FlashInfer's FP4 / MXFP8 quantize backend, bound at import from is_sm100: for the call,
        # the name answers the registry's backend.  fp4_quantize's custom op holds the function
        # itself (registered at import), so the refresh also sets the module value once routed.
        Target("FlashInfer quantize backend", f"{_FP4}._flashinfer_fp4_quantize_impl",
               scoped(moe.fp4_quantize_backend, "_flashinfer_fp4_quantize_backend", value=True),
               FP4_QUANTIZE_PARAMS, ("_flashinfer_fp4_quantize_backend",), refresh=moe.refresh_fp4_quantize_backend),
        Target("FlashInfer quantize backend", f"{_MXFP4_TRTLLM}.Mxfp4FlashinferTrtllmMoEMethod.quantize_routed_input",
               scoped(moe.mxfp8_quantize_backend, "_MXFP8_QUANTIZE_BACKEND", value=True),
               ("self", "hidden_states", "hidden_size"), ("_MXFP8_QUANTIZE_BACKEND",)),
    ] + gemm_path_targets()


# The warp split-K run is a custom op SGLang registers at import with the function itself, so
# no hook over that function is ever called; its one Python entry is cutedsl_bf16_gemm_out,
# and while that runs (the op is called inside it) the module's get_device_sm answers.
K3_SPLITK_RUN_COVERS = (f"{_CUTEDSL_GEMM}._tgv_bf16_gemm_out_run:get_device_sm() == 107",)


def gemm_path_targets() -> List[Target]:
    """Tuned GEMM / GEMV paths SGLang keys to one architecture (``policies/gemm.py``): each
    reads a probe inline, per call; for the call, the module's probe answers the registry's
    per-machine decision (the ``scoped`` form: one cached look-up and one attribute swap)."""
    return [
        Target("BF16 GEMM tuned table", f"{_CUTEDSL_GEMM}.use_cutedsl_bf16_gemm",
               scoped(moe.bf16_gemm_k3_splitk_sm, "get_device_sm"), ("m", "n", "k"),
               ("get_device_sm", "_K3_FRONT_WARP_SPLITK"), per_process=True),
        Target("BF16 GEMM tuned table", f"{_CUTEDSL_GEMM}.cutedsl_bf16_gemm_out",
               scoped(moe.bf16_gemm_k3_splitk_sm, "get_device_sm"), ("x", "weight", "out", "bias"),
               ("get_device_sm", "_tgv_bf16_gemm_out_run"), covers=K3_SPLITK_RUN_COVERS, per_process=True),
        # The GEMV's window and its tile config read the same check; both answer alike.
        Target("BF16 GEMV window", f"{_GEMV}.use_hopper_bf16_gemv", scoped(moe.hopper_gemv_sm12x, "_is_sm12x"),
               ("m", "n", "k"), ("_is_sm12x",), per_process=True),
        Target("BF16 GEMV window", f"{_GEMV}._config", scoped(moe.hopper_gemv_sm12x, "_is_sm12x"), ("n",),
               ("_is_sm12x",), per_process=True),
        Target("Muse Spark router GEMV", f"{_ROUTER_GEMV}.router_gemv_cute_eligible",
               scoped(moe.router_gemv_sm100_family, "_is_sm100_family"), ("x", "w"), ("_is_sm100_family",), per_process=True),
        Target("Nemotron-H prefill overlap", "sglang.srt.models.nemotron_h.NemotronHMoE._forward_core",
               scoped(moe.nemotron_prefill_overlap, "is_sm120"), ("self", "hidden_states", "forward_batch"),
               ("is_sm120",), per_process=True),
        Target("single-batch overlap", f"{_SBO}.enable_combine_down_gemm_two_stream_overlap",
               scoped(moe.sbo_deep_gemm_blackwell, "is_blackwell"), ("cls",), ("is_blackwell",)),
        # Torch reads written inline: for the call, the module's torch answers the capability
        # the check compares (``scoped_capability``).
        Target("Qwen decode MoE fusion", "sglang.srt.layers.moe.qwen4_decode.prepare_qwen4_decode_comm",
               scoped_capability(moe.qwen4_decode_capability), ("mlp",), ("torch",), per_process=True),
        Target("Marlin LoRA MoE decode", "sglang.srt.lora.marlin_lora_temp.moe_runner."
               "_use_multi_shared_outer_decode_factorization", scoped_capability(moe.marlin_lora_decode_capability),
               ("lora_info", "hidden_states", "num_tokens", "hidden_size", "router_topk", "num_experts",
                "intermediate_size", "ep_active"), ("torch",), per_process=True),
        Target("LoRA MoE CuTe DSL tiles", "sglang.srt.lora.moe.base_gemm_provider.cutedsl_bf16."
               "CuteDslBf16ContiguousProvider.__init__", scoped_capability(moe.lora_cutedsl_tile_capability),
               ("self", "quant_info"), ("torch",)),
        Target("Muse Spark GEMM + all-gather", f"{_MUSE}.MuseSpark1xMoE.__init__",
               scoped_capability(moe.muse_spark_gemm_ag_capability),
               ("self", "config", "layer_idx", "nvfp4_checkpoint", "prefix", "quant_config"), ("torch",)),
        Target("Muse Spark GEMM + all-gather", f"{_MUSE}.MuseSpark1xMoE._forward_experts",
               scoped_capability(moe.muse_spark_gemm_ag_capability),
               ("self", "hidden_states", "router_input", "ar_workspace"), ("torch",), per_process=True),
        Target("Muse Spark finalize AR", f"{_MUSE}.MuseSpark1xModel.__init__",
               scoped_capability(moe.muse_spark_finalize_ar_capability),
               ("self", "config", "quant_config", "prefix"), ("torch",)),
    ]


def _one_target(check: Callable[..., Optional[str]]) -> Callable[..., Optional[str]]:
    """A check of one target that cannot fail for the others: anything it raises (a bug, a
    file past a limit) keeps that target's SGLang code, named with the target, instead of
    turning the whole plugin off with a line that names no hook."""
    import functools

    @functools.wraps(check)
    def checked(target: Target, *args: Any, **kwargs: Any) -> Optional[str]:
        try:
            return check(target, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - one target's problem, said with its name
            return f"{target.path}: its code could not be checked ({type(exc).__name__}: {exc}); SGLang's code stays"

    return checked


@_one_target
def check_target(target: Target, early: bool = False) -> Optional[str]:
    """None when the target matches its expected shape, else why not (one line).

    ``early``: called while SGLang is still importing (the early finder), so nothing is
    imported here; the probe-mapping check then waits for the entry point.
    """
    owner_path, attr = target.path.rsplit(".", 1)
    try:
        owner = pkgutil.resolve_name(owner_path)
    except Exception as exc:
        return f"{owner_path} cannot be imported ({type(exc).__name__}: {exc})"
    original = getattr(owner, attr, None)
    if target.value is not None:
        if original is None or type(original).__name__ != target.value:  # (a constexpr is callable)
            found = "missing" if original is None else f"a {type(original).__name__}"
            return f"{target.path} changed: {found}, expected a module value of type {target.value}"
        return body_problem(target) or _missing_uses(target, owner)
    if original is None or not callable(original):
        return f"{target.path} is missing"
    raw = inspect.getattr_static(owner, attr, None)
    if isinstance(raw, classmethod):  # its function's parameters, ``cls`` first (as the series reads them)
        original = raw.__func__
    try:
        params = tuple(inspect.signature(original).parameters)
    except (TypeError, ValueError):
        return f"{target.path} has no inspectable signature"
    if params != target.params:
        return f"{target.path} changed: parameters {params}, expected {target.params}"
    problem = body_problem(target, original) or _missing_uses(target, owner)
    if problem:
        return problem
    if early and "sglang.srt.runtime_context" not in sys.modules:
        return None
    if target.concern == "platform facts" and not _probe_mapping_ok(target):
        return f"{target.path} is no longer the probe SGLang's get_platform() reads"
    return None


def _missing_uses(target: Target, owner: object) -> Optional[str]:
    module = owner if inspect.ismodule(owner) else sys.modules[owner.__module__]
    missing = [name for name in target.uses if not hasattr(module, name)]
    return f"{target.path}: its module no longer has {', '.join(missing)}" if missing else None


def _probe_mapping_ok(target: Target) -> bool:
    from sglang.srt import runtime_context

    helper = target.path.rsplit(".", 1)[1]
    mapped = set(getattr(runtime_context, "_PLATFORM_PROBES", {}).values())
    mapped |= set(getattr(runtime_context, "_PLATFORM_VALUES", {}).values())
    return helper in mapped or helper == "is_blackwell"


ROUTED_MARK = "__sglang_arch_target__"  # set on a routed function (``routing.route``)
_LIVE: Dict[Tuple[str, Any], Optional[str]] = {}  # (target, SGLang's function) -> its fingerprint
_FILES: Dict[Any, Any] = {}  # module files read for fingerprints (``fingerprint.of_file``'s cache)


def _module_path(module: str) -> Optional[str]:
    """A module's file: its own ``__file__`` once imported, else found without importing it
    (beside the installed ``sglang`` package)."""
    loaded = sys.modules.get(module)
    if loaded is not None:
        return getattr(loaded, "__file__", None)
    root = fingerprint.installed_root()
    return None if root is None else fingerprint.module_file(root, module)


def live_fingerprint(target: Target, function: Any = None) -> Optional[str]:
    """The fingerprint of the installed SGLang's definition of ``target``: from the function's own
    lines where it has them (``function``, SGLang's or the routed one over it), else from its
    module's file (a module value, a probe bound by assignment, a module not imported yet)."""
    if function is not None and target.value is None:
        function = getattr(function, "__wrapped__", function) if getattr(function, ROUTED_MARK, None) else function
        key = (target.path, function)
        try:
            if key in _LIVE:
                return _LIVE[key]
        except TypeError:  # not hashable: not cached
            key = None
        found = _recorded_for_live(target, function)
        if found is None:
            found = fingerprint.of_object(function)
        if found is None:  # no lines of its own (a probe bound by assignment): its module's file
            found = _from_file(target)
        if key is not None:
            _LIVE[key] = found
        return found
    return _from_file(target)


def _recorded(target: Target, path: Optional[str]) -> Optional[str]:
    """The recorded fingerprint of ``target`` where its module's file ``path`` is byte for byte
    a supported release's (then it holds that release's definitions and every name its glue
    reads); None otherwise, or where the file or the installed SGLang cannot be found."""
    root = fingerprint.installed_root()
    return None if root is None or path is None else fingerprint.recorded_fingerprint(root, path, target.path)


def _from_file(target: Target) -> Optional[str]:
    """The fingerprint of ``target``'s definition in its module's file: the recorded one where
    the file is byte for byte a supported release's, else read from the file."""
    path = _module_path(target.module)
    if path is None:
        return None
    quick = _recorded(target, path)
    return quick if quick is not None else fingerprint.of_file(path, target.attr, _FILES)


def _recorded_for_live(target: Target, function: Any) -> Optional[str]:
    """The recorded fingerprint of a live function whose code is still its module's own (compiled
    from that file, under the target's name) where the file is byte for byte a supported
    release's: no need to read its lines.  None otherwise (a function from elsewhere, a
    decorated one, an edited file): it is fingerprinted from its code."""
    code = getattr(function, "__code__", None)
    path = _module_path(target.module)
    if code is None or path is None or code.co_name != target.attr.rsplit(".", 1)[-1]:
        return None
    try:
        if not os.path.samefile(code.co_filename, path):
            return None
    except OSError:
        return None
    return _recorded(target, path)


def body_problem(target: Target, function: Any = None) -> Optional[str]:
    """None where SGLang's definition of ``target`` is one its hook was written for (its
    fingerprint recorded for a supported release), else why not (one line)."""
    if not any(target.path in known_bodies.BODIES.get(r, {}) for r in known_bodies.SUPPORTED):
        return f"{target.path}: no fingerprint of it is recorded ({fingerprint.supported()})"
    found = live_fingerprint(target, function)
    if found is None:
        return f"{target.path}: its code cannot be read to compare it with {fingerprint.supported()}'s"
    if not fingerprint.releases_with(target.path, found):
        return f"{target.path}: SGLang's code differs from {fingerprint.supported()}'s, which its hook was written for"
    return data_problem(target)


def data_key(target: Target, name: str) -> str:
    """The recorded name of a table ``target``'s decision reads: its module's value ``name``."""
    return f"{target.module}.{name}"


def data_problem(target: Target) -> Optional[str]:
    """None where every module-level table the target's glue reads (its ``uses`` bound by an
    assignment, in its module or imported into it) is the one a supported release has: a
    release that fixed a decision in its data (an edited size in
    ``TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES``) keeps its fix, as one that fixed its code does."""
    for name in target.uses:
        key = data_key(target, name)
        if not any(key in known_bodies.BODIES.get(r, {}) for r in known_bodies.SUPPORTED):
            continue  # not a table (a function, a module) in any supported release
        found = _data_fingerprint(target, name, key)
        if found is None or not fingerprint.releases_with(key, found):
            return (f"{target.path}: {name}, which its decision reads, differs from {fingerprint.supported()}'s "
                    f"(SGLang's own values stay)")
    return None


def _data_fingerprint(target: Target, name: str, key: str) -> Optional[str]:
    """The fingerprint of the assignment that writes the table: the recorded one where the
    target's module and the table's own module are byte for byte a supported release's
    (no parse), else read from the files."""
    path = _module_path(target.module)
    if path is not None and _recorded(target, path) is not None:
        for release in known_bodies.SUPPORTED:
            where = getattr(known_bodies, "DATA", {}).get(release, {}).get(key)
            source = where and _module_path(where.rpartition(".")[0])
            root = fingerprint.installed_root()
            quick = source and root and fingerprint.recorded_fingerprint(root, source, key)
            if quick:
                return quick
    return fingerprint.of_data(_module_path, target.module, name, _FILES)


@_one_target
def file_problem(target: Target) -> Optional[str]:
    """:func:`check_target`'s answer for a module not imported yet, from its file alone: whether
    it defines the target, with the body the hook was written for (shape and attributes are
    checked when the module is imported)."""
    path = _module_path(target.module)
    if path is None:
        return f"{target.module} cannot be found"
    if _recorded(target, path) is not None:
        # byte for byte a supported release's file: it defines the target with the recorded body
        # and has every name the glue reads; the tables it reads may live in another file
        return data_problem(target)
    if live_fingerprint(target) is None:
        return f"{target.path} is missing"
    problem = body_problem(target)
    if problem:
        return problem
    lines = _FILES.get(("lines", path))
    if lines is None:  # not kept by the fingerprint's reading of the file
        try:
            lines = _FILES[("lines", path)] = fingerprint.source_lines(path)
        except (OSError, ValueError, SyntaxError):
            lines = []
    text = "".join(lines)
    missing = [name for name in target.uses if not re.search(rf"\b{re.escape(name)}\b", text)]
    if missing:  # (a name the file never mentions; one it mentions is checked on import)
        return f"{target.path}: its module no longer has {', '.join(missing)}"
    return None


def forget_files() -> None:
    """Drop the module files read for fingerprints (start-up is over)."""
    _FILES.clear()
