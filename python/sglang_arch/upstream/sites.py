"""The patch series: its steps, and the SGLang call sites each step routes.

The sites are the plugin's targets (``integrations/sglang/targets.py``), which are the
spec: the same functions, with the same parameters; ``test_upstream_rewriter.py`` fails
when the two tables drift apart.  Each guard only calls the glue module of its step,
which is the plugin's own glue (``integrations/sglang/glue/``, copied by ``glue.py``):
the tree applies the registry's decisions with the code the plugin's hooks call, in the
same guard forms; no policy is decided here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from .rewriter import FunctionSite, ModulePlan, ProbeSite

# The SGLang releases these sites were written against (and tested with).
SGLANG_TESTED = ("0.5.23",)

@dataclass(frozen=True)
class Step:
    """One commit of the series (and one PR description)."""

    number: int
    key: str  # short name, used in the report and the PR file name
    title: str  # the report's heading
    glue: Optional[str]  # glue module this step writes (None: the registry step)
    modules: Tuple[ModulePlan, ...] = ()

    @property
    def pr_name(self) -> str:
        return f"PR-{self.number}-{self.key}.md"


_PROBES = (
    ProbeSite(("is_hopper_with_cuda_12_3",), "is_hopper_with_cuda_12_3"),
    ProbeSite(("is_blackwell_supported", "is_blackwell"), "is_blackwell"),
    ProbeSite(("is_sm120_supported",), "is_sm120"),
    ProbeSite(("is_sm100_supported",), "is_sm100"),
    ProbeSite(("is_sm100_or_sm110_supported",), "is_sm100_or_sm110"),
    ProbeSite(("is_sm110_supported",), "is_sm110"),
    ProbeSite(("is_sm90_supported",), "is_sm90"),
)

STEPS: Tuple[Step, ...] = (
    Step(1, "registry", "registry: sglang.srt.arch", None),
    Step(2, "collectives", "collectives: torch symm mem, custom all-reduce v2", "collectives", (
        ModulePlan("srt/distributed/device_communicators/torch_symm_mem.py", "collectives", (
            FunctionSite("TorchSymmMemCommunicator.__init__", ("self", "group", "device"),
                         "init_torch_symm_mem", ("self", "group", "device"), form="done",
                         uses=("torch_symm_mem", "torch_symm_mem_available", "dist", "envs", "get_exec",
                               "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES")),
        )),
        ModulePlan("srt/distributed/device_communicators/configs/custom_all_reduce_v2.py", "collectives", (
            FunctionSite("_get_all_reduce_configs", (), "all_reduce_configs",
                         uses=("_sm90_configs", "_sm100_configs", "_sm107_configs", "AllReduceConfig", "Heuristic")),
        )),
    )),
    Step(3, "fusion", "fusion: FlashInfer all-reduce fusion", "fusion", (
        ModulePlan("srt/layers/flashinfer_comm_fusion.py", "fusion", (
            FunctionSite("_resolve_backend", ("backend", "is_multi_node"), "resolve_backend",
                         ("backend", "is_multi_node")),
        )),
        ModulePlan("srt/layers/layer_boundary/residual/add_norm.py", "fusion", (
            FunctionSite("flashinfer_ar_fusion_applies", ("batch_size",), "applies", ("batch_size",),
                         uses=("_is_cuda", "_is_flashinfer_available", "is_dp_attention_enabled", "get_exec",
                               "get_parallel", "uses_cutedsl_ar_fusion", "is_flashinfer_allreduce_unavailable",
                               "FUSE_ALLREDUCE_MAX_BATCH_SIZE")),
        )),
        ModulePlan("srt/arg_groups/overrides.py", "fusion", (
            FunctionSite("_flashinfer_allreduce_fusion_auto_enable", ("view",), "auto_enable", ("view",)),
        )),
    )),
    Step(4, "attention", "attention: default backend, explicit-backend check", "attention", (
        ModulePlan("srt/arg_groups/model_override_base.py", "attention", (
            FunctionSite("get_default_attn_backend", ("server_args", "use_mla_backend", "model_config"),
                         "default_backend", ("server_args", "use_mla_backend", "model_config"),
                         uses=("current_platform", "resolving_view", "resolved_view", "is_no_spec_infer_or_topk_one",
                               "_forces_eagle_topk_one")),
        )),
        ModulePlan("srt/arg_groups/overrides.py", "attention", (
            FunctionSite("_attention_backend_default", ("view",), "check_explicit_backends", ("view",), form="check",
                         uses=("use_mla_backend",)),
        )),
    )),
    Step(5, "platform-probes", "platform probes: get_platform() facts", "platform", (
        ModulePlan("srt/utils/common.py", "platform", _PROBES + (
            FunctionSite("get_device_capability", ("device_id",), "fact", ('"device_capability"',)),
            FunctionSite("get_device_sm", (), "fact", ('"device_sm"',)),
        )),
    )),
)


def glue_files() -> Tuple[str, ...]:
    """Every glue module the series writes, relative to ``srt/arch/``."""
    return ("glue/__init__.py",) + tuple(f"glue/{s.glue}.py" for s in STEPS if s.glue)
