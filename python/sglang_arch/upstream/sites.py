"""The patch series: its steps, and what each step replaces at SGLang's call sites.

Each step deletes SGLang's per-GPU code at a call site (a capability-keyed table, an
``is_sm90 or is_sm100`` branch, a module-level capability flag) and puts one read of the
registry in its place (``replace.py``): the call site reads the registry through a glue
function of ``sglang.srt.arch.glue.<step>``, which is the plugin's own glue module
(``integrations/sglang/glue/``, copied by ``glue.py``).  The sites are the plugin's targets
(``integrations/sglang/targets.py``, the spec): the same functions with the same
parameters; the glue functions the series calls are the replace forms next to the
plugin's hooks, so the patched tree and the plugin decide with the same code
(``test/integration/test_upstream_series.py`` compares them machine by machine).

The platform probes are not a step: the registry's platform facts are identity, equal
to SGLang's own probes on every device (docs/fallback.md), so routing them would change
nothing but add code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .replace import (
    AndCondition,
    Delete,
    ReplaceArms,
    ReplaceBody,
    ReplaceCall,
    ReplaceFact,
    ReplaceName,
    ReplaceOperands,
    ReplaceSpan,
    ReplaceValue,
)
from ..integrations.sglang.targets import (
    ATTENTION_GUARD_COVERS,
    BEAM_BAND_TABLE,
    DEEPSEEK_MOE_INIT_PARAMS,
    DSA_MHA_KERNEL_COVERS,
    DSA_REPLAY_PARAMS,
    DSV4_DECODE_SCORES_PARAMS,
    DSV4_WO_A_PARAMS,
    FP4_QUANTIZE_PARAMS,
    FP8_GEMM_COVERS,
    KV_DEQUANT_PARAMS,
    MOE_GUARD_COVERS,
    MOE_LOAD_TIME_COVERS,
)
from .rewriter import FunctionSite, ModulePlan

# The SGLang releases these sites were written against (and tested with).
SGLANG_TESTED = ("0.5.22", "0.5.23")

_SYMM_MEM_INIT = ("TorchSymmMemCommunicator.__init__", ("self", "group", "device"))
_ATTENTION_DEFAULT = """
# NVIDIA GPUs: the default of this GPU's tier (sglang.srt.arch).
arch_backend = {alias}.nvidia_default_backend(
    server_args, use_mla_backend, model_config
)
if arch_backend is not None:
    return arch_backend
"""

# Beam's fused all-reduce + norm: the tier's token limits replace the capability span
# (SGLang's non-capability checks stay), and the tier's FlashInfer band the table look-up.
_BEAM_LIMITS = """
limits = {alias}.beam_all_reduce_limits_here(
    parallel.tp_size, hidden_states.device
)
if (
    limits is None
    or get_forward().sp_active
    or not _beam_owns_tp_boundaries()
):
    return None
attention_max_tokens, topk_max_tokens = limits
"""
_BEAM_BAND = """
band = {alias}.beam_flashinfer_band_here(parallel.tp_size)
return band if band is not None and is_flashinfer_available() else None
"""

# The decisions elsewhere in SGLang that step 4's guards judge (the resolution-time answer
# in ``_attention_backend_default``, the build guard in ``resolve_attention_backend_strs``
# and ``DraftBackendFactory._create_backend``): the plugin's targets list the same entries
# (``integrations/sglang/targets.py``, which says why each is there and what is left out).
_ATTENTION_GUARD_COVERS = ATTENTION_GUARD_COVERS


# Tuned GEMM / GEMV paths keyed to one architecture (policies/gemm.py; the plugin's
# targets.gemm_path_targets): each probe call the path reads becomes the registry's
# per-machine answer, and a probe helper no code reads any more goes.
_TORCH_CAPABILITY = "torch.cuda.get_device_capability"
GEMM_PATH_PLANS: Tuple[ModulePlan, ...] = (
    ModulePlan("kernels/ops/gemm/cutedsl_bf16_gemm.py", "moe", (
        ReplaceCall("use_cutedsl_bf16_gemm", ("m", "n", "k"), "get_device_sm", "bf16_gemm_k3_splitk_sm_here", (),
                    what="K3 split-K table's SM"),
        ReplaceCall("_tgv_bf16_gemm_out_run", ("x", "weight", "out", "bias"), "get_device_sm",
                    "bf16_gemm_k3_splitk_sm_here", (), what="K3 warp split-K table's SM"),
        Delete((), unused=("get_device_sm",), what="probe of the replaced checks"),
    )),
    ModulePlan("kernels/ops/gemm/hopper_bf16_gemv.py", "moe", (
        ReplaceCall("_config", ("n",), "_is_sm12x", "hopper_gemv_sm12x_here", (), what="SM12x tile config"),
        ReplaceCall("use_hopper_bf16_gemv", ("m", "n", "k"), "_is_sm12x", "hopper_gemv_sm12x_here", (),
                    what="SM12x GEMV window"),
        Delete((), unused=("_is_sm12x",), what="helper of the replaced checks"),
    )),
    ModulePlan("kernels/ops/gemm/muse_spark_router_gemv_cutedsl.py", "moe", (
        ReplaceCall("router_gemv_cute_eligible", ("x", "w"), "_is_sm100_family", "router_gemv_sm100_family_here",
                    ("x.device.index",), what="SM100-family check", any_args=True),
        Delete((), unused=("_is_sm100_family",), what="helper of the replaced check"),
    )),
    ModulePlan("srt/models/nemotron_h.py", "moe", (
        ReplaceCall("NemotronHMoE._forward_core", ("self", "hidden_states", "forward_batch"), "is_sm120",
                    "nemotron_prefill_overlap_here", (), what="prefill overlap's SM120 check"),
    )),
    ModulePlan("srt/batch_overlap/single_batch_overlap.py", "moe", (
        ReplaceCall("SboFlags.enable_combine_down_gemm_two_stream_overlap", ("cls",), "is_blackwell",
                    "sbo_deep_gemm_blackwell_here", (), what="DeepGEMM down-GEMM overlap's Blackwell check"),
    )),
    # Torch reads written inline: the capability the check compares becomes the registry's.
    ModulePlan("srt/layers/moe/qwen4_decode.py", "moe", (
        ReplaceCall("prepare_qwen4_decode_comm", ("mlp",), _TORCH_CAPABILITY, "qwen4_decode_capability_here", (),
                    what="fused decode's major-10 check", any_args=True),
    )),
    ModulePlan("srt/lora/marlin_lora_temp/moe_runner.py", "moe", (
        ReplaceCall("_use_multi_shared_outer_decode_factorization",
                    ("lora_info", "hidden_states", "num_tokens", "hidden_size", "router_topk", "num_experts",
                     "intermediate_size", "ep_active"), _TORCH_CAPABILITY, "marlin_lora_decode_capability_here", (),
                    what="B200 decode factorization's check", any_args=True),
    )),
    ModulePlan("srt/lora/moe/base_gemm_provider/cutedsl_bf16.py", "moe", (
        ReplaceCall("CuteDslBf16ContiguousProvider.__init__", ("self", "quant_info"), _TORCH_CAPABILITY,
                    "lora_cutedsl_tile_capability_here", (), what="Hopper wide-tile check", any_args=True),
    )),
    ModulePlan("srt/models/muse_spark.py", "moe", (
        ReplaceCall("MuseSpark1xMoE.__init__",
                    ("self", "config", "layer_idx", "nvfp4_checkpoint", "prefix", "quant_config"), _TORCH_CAPABILITY,
                    "muse_spark_gemm_ag_capability_here", (), what="GEMM + all-gather workspace's 10.3 check",
                    any_args=True),
        ReplaceCall("MuseSpark1xMoE._forward_experts", ("self", "hidden_states", "router_input", "ar_workspace"),
                    _TORCH_CAPABILITY, "muse_spark_gemm_ag_capability_here", (),
                    what="GEMM + all-gather's 10.3 check", any_args=True),
        ReplaceCall("MuseSpark1xModel.__init__", ("self", "config", "quant_config", "prefix"), _TORCH_CAPABILITY,
                    "muse_spark_finalize_ar_capability_here", (), what="finalize AR fusion's major-10 check",
                    any_args=True),
    )),
)


@dataclass(frozen=True)
class Step:
    """One commit of the series (and one PR description)."""

    number: int
    key: str  # short name, used in the report and the PR file name
    title: str  # the report's heading
    glue: Optional[str]  # glue module this step writes (None: the registry step)
    modules: Tuple[ModulePlan, ...] = ()
    # Audit sites the step takes besides the functions it rewrites (as ``Target.covers``).
    covers: Tuple[str, ...] = ()

    @property
    def pr_name(self) -> str:
        return f"PR-{self.number}-{self.key}.md"


STEPS: Tuple[Step, ...] = (
    Step(1, "registry", "registry: sglang.srt.arch", None),
    Step(2, "collectives", "collectives: torch symm mem sizes and kernel, custom all-reduce v2 table", "collectives", (
        ModulePlan("srt/distributed/device_communicators/torch_symm_mem.py", "collectives", (
            ReplaceSpan(*_SYMM_MEM_INIT, table="TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES",
                        code="self.max_size = {alias}.symm_mem_max_size(self)\nif not self.max_size:\n    return\n",
                        call="symm_mem_max_size", what="size table"),
            AndCondition(*_SYMM_MEM_INIT, attribute="multicast_ptr", call="uses_multimem",
                         args=("self",), what="multicast check"),
            Delete(("TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM", "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES"),
                   what="multimem table, size-table import"),
        )),
        ModulePlan("srt/distributed/device_communicators/all_reduce_utils.py", "collectives", (
            Delete(("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES",), unused=("MiB",), what="size table"),
        )),
        ModulePlan("srt/distributed/device_communicators/configs/custom_all_reduce_v2.py", "collectives", (
            ReplaceBody("_get_all_reduce_configs", (), "all_reduce_configs_here", (),
                        reads=("get_device_capability", "_sm90_configs", "_sm100_configs"),
                        what="per-capability table choice"),
        )),
        # Kimi K3's SP collective: the SM band _init_state reads from a probe it imports inside.
        ModulePlan("srt/layers/communication/k3_sp_collective.py", "collectives", (
            ReplaceCall("_init_state", (), "get_device_sm", "k3_sp_collective_sm_here", (),
                        what="SP collective's SM band"),
        )),
        ModulePlan("srt/models/beam.py", "collectives", (
            ReplaceSpan("BeamModel._all_reduce_limits", ("self", "hidden_states"), table="capability",
                        code=_BEAM_LIMITS, call="beam_all_reduce_limits_here", what="capability-keyed token limits"),
        )),
    )),
    Step(3, "fusion", "fusion: FlashInfer all-reduce fusion backend, auto-enable and runtime gate", "fusion", (
        ModulePlan("srt/layers/flashinfer_comm_fusion.py", "fusion", (
            ReplaceBody("_resolve_backend", ("backend", "is_multi_node"), "resolve_backend_here",
                        ("backend", "is_multi_node"), reads=("is_sm90", "is_sm100"), what="SM90/SM100 branches"),
            Delete((), unused=("_mnnvl_supported",), what="capability helper"),
        )),
        ModulePlan("srt/layers/layer_boundary/residual/add_norm.py", "fusion", (
            ReplaceOperands("flashinfer_ar_fusion_applies", ("batch_size",), "fusion_runs_here", (),
                            what="SM90/SM100 condition"),
            Delete(("_is_sm90_supported", "_is_sm100_supported"), unused=("get_platform",),
                   what="capability flags"),
        )),
        ModulePlan("srt/arg_groups/overrides.py", "fusion", (
            ReplaceOperands("_flashinfer_allreduce_fusion_auto_enable", ("view",), "fusion_enabled_here",
                            ("view.nnodes",), what="SM90/SM100 conditions"),
            # DeepSeek-V4.1 at TP 4: its custom push plane on Blackwell (MiMo's SM100 check
            # above it is a kernel gate and stays: audit/gates.py)
            ReplaceFact("_flashinfer_allreduce_fusion_auto_enable", ("view",), "is_blackwell",
                        "dsv41_custom_plane_here", (), what="V4.1's Blackwell push-plane check"),
        )),
        ModulePlan("srt/models/beam.py", "fusion", (
            ReplaceSpan("BeamModel._flashinfer_ar_band", (), table="_FLASHINFER_AR_TOKEN_BAND", code=_BEAM_BAND,
                        call="beam_flashinfer_band_here", what="capability-keyed token band"),
            Delete(("_FLASHINFER_AR_TOKEN_BAND",), what="token band table"),
        )),
    ), covers=(BEAM_BAND_TABLE,)),
    Step(4, "attention", "attention: default backend, explicit-backend check, deterministic and DSA defaults, "
         "draft and vision backends, build guard, linear-attention defaults", "attention", (
        ModulePlan("srt/arg_groups/model_override_base.py", "attention", (
            ReplaceArms("get_default_attn_backend", ("server_args", "use_mla_backend", "model_config"),
                        code=_ATTENTION_DEFAULT, anchor="is_out_of_tree", call="nvidia_default_backend",
                        what="Hopper/SM100 branches"),
            Delete((), unused=("_forces_eagle_topk_one",), what="helper of a deleted branch"),
        )),
        ModulePlan("srt/arg_groups/overrides.py", "attention", (
            FunctionSite("_attention_backend_default", ("view",), "attention_backend_default", ("view",),
                         uses=("use_mla_backend", "model_config_of", "logger")),
            ReplaceBody("_deterministic_attention_backend", ("view",), "deterministic_backend_here", ("view",),
                        reads=("is_sm100", "is_sm120"), what="SM100/SM120 rule"),
            # FA4's page size: the registry's rule for the tier (policies/attention.py).
            FunctionSite("_fa4_page_constraint", ("view",), "fa4_page_size", ("view",),
                         uses=("use_mla_backend", "model_config_of", "logger")),
            # DSA: the two passes hold XPU, NPU, ROCm, sinks and HiSparse arms besides the CUDA
            # ones; the registry answers the CUDA arms and the rest stays SGLang's.
            FunctionSite("_dsa_kv_cache_dtype_default", ("view",), "dsa_kv_cache_dtype_default", ("view",),
                         uses=("model_config_of", "_DEEPSEEK_FAMILY_ARCHS", "logger")),
            FunctionSite("_dsa_split_backend_resolution", ("view",), "dsa_split_backends", ("view",),
                         uses=("model_config_of", "_DEEPSEEK_FAMILY_ARCHS", "logger",
                               "_check_dsa_backend_constraints")),
        )),
        # The build guard: whatever path chose a backend, what is built runs here.
        ModulePlan("srt/model_executor/model_runner_components/attention_backend_setup.py", "attention", (
            FunctionSite("resolve_attention_backend_strs", ("model_runner",), "built_backends", ("model_runner",),
                         uses=("ResolvedAttentionBackendStr",)),
        )),
        ModulePlan("srt/speculative/draft_utils.py", "attention", (
            FunctionSite("DraftBackendFactory._create_backend",
                         ("self", "backend_name", "backend_map", "error_template", "stamps_children"),
                         "guard_draft_backend",
                         ("self", "backend_name", "backend_map", "error_template", "stamps_children"), form="check"),
            ReplaceBody("DraftBackendFactory._create_hybrid_linear_attn_decode_backend", ("self",),
                        "hybrid_linear_draft_decode_here", ("self",), reads=("is_blackwell",),
                        what="Blackwell rule"),
            ReplaceBody("DraftBackendFactory._create_hybrid_linear_attn_prefill_backend", ("self",),
                        "hybrid_linear_draft_prefill_here", ("self",), reads=("is_blackwell",),
                        what="Blackwell rule"),
            Delete((), unused=("is_blackwell", "cpu_has_amx_support"), what="helpers of the deleted rules"),
        )),
        # DSA's K-pool tail: the phase backend that takes the appended tail tokens.
        ModulePlan("srt/layers/attention/dsa/dsa_backend_kpool.py", "attention", (
            FunctionSite("DeepseekSparseAttnBackendKPoolMixin._resolve_kpool_tail_backend",
                         ("self", "topk_indices", "dsa_impl"), "dsa_kpool_tail_backend",
                         ("self", "topk_indices", "dsa_impl")),
        )),
        # DSA's per-batch prefill pick: the MHA one-shot band (``get_device_sm()``) and
        # flashmla_auto's FlashMLA variant (``is_blackwell()``), probes the method binds.
        ModulePlan("srt/layers/attention/dsa_backend.py", "attention", (
            ReplaceCall("DeepseekSparseAttnBackend.set_dsa_prefill_impl", ("self", "forward_batch"),
                        "get_device_sm", "dsa_mha_band_sm_here", ("self",), what="MHA one-shot band's SM"),
            ReplaceCall("DeepseekSparseAttnBackend.set_dsa_prefill_impl", ("self", "forward_batch"),
                        "is_blackwell", "dsa_flashmla_sparse_band_here", ("self",),
                        what="FlashMLA variant's Blackwell check"),
            # MTP verify's DeepGEMM-native [B, next_n] schedule: built per batch, replayed per
            # CUDA graph (that check is nested in the target_verify branch), one decision.
            ReplaceFact("DeepseekSparseAttnBackend._build_paged_mqa_schedule_2d_ctx_lens",
                        ("self", "forward_mode", "cache_seqlens_int32", "seqlens_expanded", "batch_size"),
                        "is_sm100", "dsa_dg_native_verify_here", (), what="DeepGEMM-native verify's SM100 check"),
            ReplaceFact("DeepseekSparseAttnBackend._apply_cuda_graph_metadata", DSA_REPLAY_PARAMS,
                        "is_sm100", "dsa_dg_native_verify_here", (), what="DeepGEMM-native verify's SM100 check"),
            Delete((), unused=("get_platform",), what="platform import"),
        )),
        # DeepSeek-V4: ``--dsv4-attn-backend auto``'s SM100 probe (imported in the function
        # body, which then imports it no more), and DSpark's commit-KV Blackwell fact.
        ModulePlan("srt/arg_groups/deepseek_v4_hook.py", "attention", (
            FunctionSite("apply_deepseek_v4_defaults", ("server_args", "model_arch"), "check_dsv4_attn_backend",
                         ("server_args", "model_arch"), form="check"),
            ReplaceCall("_default_dsv4_attention_backend", ("server_args",), "is_sm100_supported",
                        "dsv4_flashmla_mega_default_here", (), what="MegaAttention's SM100 condition"),
        )),
        ModulePlan("srt/models/deepseek_v4_dspark.py", "attention", (
            ReplaceFact("DeepseekV4ForCausalLMDSpark.project_commit_kv", ("self", "main_hidden", "pool"),
                        "is_blackwell", "dspark_commit_kv_views_here", (), what="commit-KV views' Blackwell check"),
        )),
        # Model overrides whose arm is a platform fact read inside the function: the read
        # becomes the registry's decision (policies/minicpm.py, policies/minimax_m3.py).
        ModulePlan("srt/arg_groups/model_overrides/minicpm.py", "attention", (
            ReplaceFact("_minicpm_sala_overrides", ("server_args", "hf_config"), "is_blackwell",
                        "minicpm_sparse_flashinfer_here", (), what="MiniCPM sparse backend's Blackwell check",
                        marker="minicpm_flashinfer"),
        )),
        ModulePlan("srt/arg_groups/model_overrides/minimax_m3.py", "attention", (
            ReplaceFact("_minimax_m3_overrides", ("server_args", "hf_config"), "is_blackwell",
                        "minimax_m3_blackwell_arm_here", (), what="M3.1 NVFP4 arm's Blackwell checks"),
        )),
        # The same arm where the attention backend, the KV pool class and its budget read it.
        ModulePlan("srt/configs/model_config.py", "attention", (
            FunctionSite("uses_minimax_m3_nvfp4_native_stack", ("quantization",), "minimax_m3_native_stack",
                         ("quantization",)),
        )),
        # Linear attention: each phase's kernel default (policies/linear_attention.py).
        ModulePlan("srt/arg_groups/attention_hook.py", "attention", (
            ReplaceOperands("handle_linear_attn_backend", ("server_args",), "linear_decode_flashinfer_here", (),
                            what="SM100 decode condition"),
        )),
        ModulePlan("srt/arg_groups/kimi_k3_hook.py", "attention", (
            ReplaceBody("apply_kimi_k3_linear_attn_defaults", ("server_args",), "kimi_linear_decode_default_here",
                        ("server_args",), reads=("is_sm100",), what="SM100 rule"),
        )),
        ModulePlan("srt/arg_groups/glm5_next_hook.py", "attention", (
            ReplaceBody("apply_glm5_next_spec_backend_defaults", ("server_args",), "glm5_verify_default_here",
                        ("server_args",), reads=("is_sm100",), what="SM100 rule"),
            Delete((), unused=("get_platform",), what="import of the deleted rule"),
        )),
        ModulePlan("srt/layers/attention/linear/gdn_backend.py", "attention", (
            ReplaceBody("flashinfer_gdn_prefill_default", ("model_runner",), "gdn_prefill_default_here",
                        ("model_runner",), reads=("get_device_capability",), what="SM90/SM100 rule"),
        )),
        ModulePlan("srt/layers/attention/linear/kda_backend.py", "attention", (
            ReplaceBody("flashinfer_kda_prefill_default", ("model_runner",), "kda_prefill_default_here",
                        ("model_runner",), reads=("get_device_capability",), what="SM100/SM103 rule"),
        )),
        ModulePlan("srt/speculative/draft_worker_common.py", "attention", (
            FunctionSite("resolve_draft_worker_attention_backend", ("algo_label",), "draft_worker_backend",
                         ("algo_label=algo_label",)),
        )),
        ModulePlan("srt/layers/attention/vision.py", "attention", (
            FunctionSite("VisionAttention._determine_attention_backend", ("self", "passed_backend"),
                         "vision_backend", ("self", "passed_backend")),
        )),
        ModulePlan("srt/models/gemma4_vision.py", "attention", (
            FunctionSite("Gemma4VisionAttention._select_backend", (), "gemma4_vision_backend", ()),
        )),
        ModulePlan("srt/models/kimi_k3_vl.py", "attention", (
            FunctionSite("_resolve_mm_attention_backend",
                         ("configured_backend", "max_seqlen", "total_tokens", "device", "fa4_available"),
                         "kimi_k3_vision_backend",
                         ("configured_backend", "max_seqlen=max_seqlen", "total_tokens=total_tokens",
                          "device=device", "fa4_available=fa4_available"),
                         uses=("_is_fa4_available", "_SM103_TRITON_MAX_SEQLEN", "_SM103_FA4_MIN_ATTENTION_WORK")),
        )),
        ModulePlan("srt/models/mimo_audio.py", "attention", (
            ReplaceOperands("AudioEncoderMixin.build_audio_encoder", ("self", "config"),
                            "mimo_local_attention_here", (), what="SM90 condition"),
            Delete((), unused=("is_sm90_supported",), what="probe of the replaced condition"),
        )),
    ), covers=_ATTENTION_GUARD_COVERS + DSA_MHA_KERNEL_COVERS),
    Step(5, "moe", "moe: MoE runner, FP8 block / FP4 GEMM backends, DeepGEMM enablement", "moe", (
        # Guards, not deletions: each function also holds ROCm, NPU, MUSA and
        # environment arms the registry does not decide, which stay SGLang's below.
        ModulePlan("srt/arg_groups/overrides.py", "moe", (
            FunctionSite("_moe_runner_backend_quant_constraints", ("view",), "moe_runner_backend", ("view",),
                         uses=("model_config_of", "logger", "declare_resolution", "validate_declarations")),
        )),
        ModulePlan("srt/layers/deep_gemm_wrapper/configurer.py", "moe", (
            FunctionSite("_compute_enable_deep_gemm", (), "deep_gemm_enabled", ()),
        )),
        ModulePlan("srt/layers/quantization/fp8_utils.py", "moe", (
            FunctionSite("initialize_fp8_gemm_config", (), "fp8_gemm_config", (), form="done",
                         uses=("get_exec", "Fp8GemmRunnerBackend")),
            ReplaceFact("dispatch_w8a8_block_fp8_linear", ("weight_block_size", "act_scale_ue8m0"), "is_sm100",
                        "deep_gemm_sm100_block32_here", (), what="block-32 DeepGEMM's SM100 arm"),
        )),
        ModulePlan("srt/layers/quantization/fp4_utils.py", "moe", (
            FunctionSite("initialize_fp4_gemm_config", (), "fp4_gemm_config", (), form="done",
                         uses=("get_exec", "Fp4GemmRunnerBackend")),
            # FlashInfer's FP4 quantize backend, bound at import from is_sm100 inside the
            # optional import's try: the registry's, read where it is passed to FlashInfer
            ReplaceName("_flashinfer_fp4_quantize_impl", FP4_QUANTIZE_PARAMS, "_flashinfer_fp4_quantize_backend",
                        "fp4_quantize_backend_here", (), what="quantize backend bound at import"),
            Delete((), unused=("_flashinfer_fp4_quantize_backend",), what="the import-time pick"),
        )),
        # The BF16 GEMM's auto arm reads the SM100 fact inline; its explicit-cutedsl check
        # (the same fact, no string literal of its own) stays SGLang's.
        ModulePlan("srt/layers/quantization/unquant.py", "moe", (
            ReplaceFact("initialize_bf16_gemm_config", (), "is_sm100", "bf16_gemm_cutedsl_here", (),
                        what="BF16 GEMM auto arm's SM100 check", marker="cutedsl"),
        )),
        # Block-FP8 weights' UE8M0 requantization: the dense SM12x check's SM follows the
        # registry's dense block-FP8 GEMM (policies/quant.py).
        ModulePlan("srt/model_loader/utils.py", "moe", (
            ReplaceCall("should_deepgemm_weight_requant_ue8m0",
                        ("weight_block_size", "output_dtype", "weight_shape", "grouped_moe"), "get_device_sm",
                        "dense_ue8m0_requant_sm_here", (), what="dense block-FP8 SM12x check"),
            Delete((), unused=("get_device_sm",), what="probe of the replaced check"),
        )),
        # Load-time quantization rules read from one platform fact (policies/quant.py).
        ModulePlan("srt/layers/quantization/fp8.py", "moe", (
            ReplaceFact("Fp8LinearMethod.process_weights_after_loading_block_quant", ("self", "layer"), "is_sm90",
                        "hopper_bf16_weight_cache_here", (), what="block-32 FP8 BF16 cache's Hopper check"),
        )),
        ModulePlan("srt/layers/quantization/fp8_activation.py", "moe", (
            ReplaceFact("DenseSiluAndMulQuant.__init__", ("self", "down_proj"), "is_sm100",
                        "deep_gemm_sm100_fused_activation_here", (), what="fused activation's SM100 check"),
        )),
        ModulePlan("srt/layers/quantization/mxfp4.py", "moe", (
            ReplaceFact("_swizzle_mxfp4", ("quant_tensor", "scale", "num_warps"), "is_sm100",
                        "triton_mxfp4_persistent_here", (), what="triton_kernels' SM100 flags"),
            ReplaceCall("_prepare_flashinfer_mxfp8_activations", ("x", "hidden_size"), "_is_sm107_supported",
                        "mxfp8_moe_quantizer_sm107_here", (), what="MoE activations' SM107 quantizer"),
        )),
        ModulePlan("srt/layers/quantization/mxfp4_marlin_moe.py", "moe", (
            ReplaceFact("Mxfp4MarlinMoEMethod.create_weights",
                        ("self", "layer", "num_experts", "hidden_size", "intermediate_size_per_partition",
                         "params_dtype", "**extra_weight_attrs"), "is_sm90", "marlin_mxfp4_hopper_widths_here", (),
                        what="MXFP4 Marlin widths' Hopper check"),
        )),
        ModulePlan("srt/arg_groups/kv_cache_hook.py", "moe", (
            ReplaceFact("handle_nvfp4_prefill_kv_dequant_dtype", ("server_args",), "is_sm100",
                        "nvfp4_native_prefill_here", (), what="NVFP4 prefill default's SM100 check",
                        marker="fp8_e4m3"),
        )),
        ModulePlan("srt/mem_cache/memory_pool.py", "moe", (
            ReplaceFact("get_minimax_sparse_index_dtype", ("fp8_attn_gemm", "kv_cache_dtype", "model_dtype"),
                        "is_sm90", "minimax_fp8_index_hopper_here", (), what="MiniMax index dtype's Hopper check"),
        )),
        # DeepSeek-V4's Triton kernel paths: every inline is_blackwell / is_sm90 read of the
        # functions the plugin hooks becomes the registry's one decision (policies/deepseek.py).
        ModulePlan("srt/models/deepseek_v4.py", "moe", (
            ReplaceFact("_apply_wo_a_bf16_matmul", DSV4_WO_A_PARAMS, "is_blackwell", "dsv4_blackwell_path_here", (),
                        what="wo_a fast paths' Blackwell checks"),
            ReplaceFact("_apply_wo_a_bf16_matmul", DSV4_WO_A_PARAMS, "is_sm90", "dsv4_hopper_path_here", (),
                        what="wo_a decode GEMV's Hopper check"),
            ReplaceFact("MQALayer._normalize_q_lora", ("self", "q"), "is_blackwell", "dsv4_blackwell_path_here", (),
                        what="q RMSNorm + MXFP8 Blackwell check"),
        )),
        ModulePlan("srt/models/deepseek_v4_mhc.py", "moe", (
            ReplaceFact("_mix_stats_impl", ("hc", "x"), "is_blackwell", "dsv4_blackwell_path_here", (),
                        what="mHC fused stats' Blackwell check"),
            ReplaceFact("_mix_stats_impl", ("hc", "x"), "is_sm90", "dsv4_hopper_path_here", (),
                        what="mHC stats' Hopper bands"),
            ReplaceFact("_combine", ("hc", "state", "quantized"), "is_blackwell", "dsv4_blackwell_path_here", (),
                        what="mHC fused combine's Blackwell check"),
            ReplaceFact("_combine", ("hc", "state", "quantized"), "is_sm90", "dsv4_hopper_path_here", (),
                        what="mHC fused combine's Hopper band"),
        )),
        ModulePlan("srt/layers/attention/dsv4/v41_indexer/scoring.py", "moe", (
            ReplaceFact("decode_scores", DSV4_DECODE_SCORES_PARAMS, "is_sm90", "dsv4_hopper_path_here", (),
                        what="V4.1 indexer's paged decode scoring (Hopper)"),
        )),
        # The DeepSeek family's router GEMM (SGLang's tiny BF16 GEMM or cuBLAS).
        ModulePlan("srt/models/deepseek_common/utils.py", "moe", (
            FunctionSite("tiny_router_gemm_max_tokens", ("num_experts", "hidden_size", "weight_dtype"),
                         "tiny_router_gemm_off", ()),
        )),
        # DeepSeek's shared-expert fusion under NVFP4 + Marlin: the Hopper operand of its condition.
        ModulePlan("srt/models/deepseek_v2.py", "moe", (
            ReplaceOperands("DeepseekV2ForCausalLM.shared_experts_fusion_disable_reason",
                            ("cls", "hf_config", "quant_config"), "shared_experts_hopper_marlin_hold_here", (),
                            what="NVFP4 + Marlin's Hopper check"),
            Delete((), unused=("is_sm90_supported",), what="probe of the replaced condition"),
            ReplaceFact("DeepseekV2MoE.__init__", DEEPSEEK_MOE_INIT_PARAMS, "is_sm100", "nvfp4_swiglu_fusion_here", (),
                        what="shared expert's fused NVFP4 GEMM + SwiGLU SM100 check"),
        )),
        # DeepSeek-V4.1's index logits dtype: the module's SM100 probe call in it (the probe
        # stays: the head-weight dtype's gate reads it too).
        ModulePlan("kernels/ops/attention/dsv4/index_logits.py", "moe", (
            ReplaceName("index_logits_dtype", (), "_is_sm100", "dsv41_bf16_index_logits_here", (),
                        what="bf16 logits' SM100 check"),
        )),
        # The fused QKV-A GEMM's auto backend: the import-time pick becomes the registry's,
        # read where the function resolves "auto".
        ModulePlan("kernels/ops/gemm/fused_a_gemm.py", "moe", (
            ReplaceName("dsv3_fused_a_gemm", ("mat_a", "mat_b", "output", "backend"), "_AUTO_BACKEND",
                        "fused_a_gemm_auto_backend_here", (), what="auto backend bound at import"),
            Delete((), unused=("_AUTO_BACKEND", "is_sm120_supported"), what="the import-time pick and its probe"),
        )),
        # The NVFP4 KV cache's dequantize: its two inline facts become the registry's one decision
        # (policies/quant.nvfp4_kv_dequant); the is_sm90 assert on the fallback stays SGLang's.
        ModulePlan("srt/layers/quantization/kvfp4_tensor.py", "moe", (
            ReplaceFact("NVFP4KVQuantizeUtil.dequantize", KV_DEQUANT_PARAMS, "is_sm100", "nvfp4_kv_dequant_sm100_here",
                        (), what="FlashInfer dequantize's SM100 check"),
            ReplaceFact("NVFP4KVQuantizeUtil.dequantize", KV_DEQUANT_PARAMS, "is_sm120", "nvfp4_kv_dequant_sm120_here",
                        (), what="FlashInfer dequantize's SM120 check"),
        )),
        # FlashInfer's MXFP8 quantize backend (and its FP4 one, in fp4_utils.py above): the
        # import-time pick becomes the registry's, read where the function passes it to FlashInfer.
        ModulePlan("srt/layers/quantization/mxfp4_flashinfer_trtllm_moe.py", "moe", (
            ReplaceName("Mxfp4FlashinferTrtllmMoEMethod.quantize_routed_input", ("self", "hidden_states", "hidden_size"),
                        "_MXFP8_QUANTIZE_BACKEND", "mxfp8_quantize_backend_here", (),
                        what="MXFP8 quantize backend bound at import"),
            Delete((), unused=("_MXFP8_QUANTIZE_BACKEND", "get_platform"), what="the import-time pick and its probe"),
        )),
        # The LoRA MoE's FP8 quantizer: a Triton constexpr bound at import and read only inside
        # @triton.jit code, so its value itself becomes the registry's (torch read nowhere else).
        ModulePlan("kernels/ops/lora/moe/fp8_quant.py", "moe", (
            ReplaceValue("_WHOLE_ROW_FAST_DIV", "lora_fp8_whole_row_fast_div_here", (), within="tl.constexpr",
                         what="whole-row fast division's SM90 check"),
            Delete((), unused=("torch",), what="torch, read by nothing else"),
        )),
        # The model overrides' MoE runner / GEMM picks the guard judges (the plugin's
        # MoE runner target lists the same: targets.MOE_GUARD_COVERS, which says why
        # each is there and what is left out).
    ) + GEMM_PATH_PLANS, covers=MOE_GUARD_COVERS + MOE_LOAD_TIME_COVERS + FP8_GEMM_COVERS),
)


def glue_files() -> Tuple[str, ...]:
    """Every glue module the series writes, relative to ``srt/arch/``."""
    return ("glue/__init__.py",) + tuple(f"glue/{s.glue}.py" for s in STEPS if s.glue)
