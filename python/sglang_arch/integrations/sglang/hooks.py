"""The hook bodies.  Each one reads the registry's decision and applies it; none decides.

Every hook is AROUND: it receives upstream's original and calls it whenever the
registry has nothing to say (no NVIDIA GPU, a non-CUDA platform).  An unexpected
error inside a hook is logged once and upstream's original answers instead, so the
plugin is never the reason a server fails.  ``ArchDecisionError`` is the one error a
hook raises on purpose: an explicitly chosen backend that cannot run on this GPU.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any, Callable, Dict, Set

from ...arch.policies.attention import ModelTraits
from ...arch.policies.collectives import CUSTOM_AR_DEFAULT_ONE_SHOT_BYTES, CUSTOM_AR_DEFAULT_TWO_SHOT_BYTES
from ...arch.runtime import current

logger = logging.getLogger("sglang_arch")

KILL_SWITCH = "SGLANG_ARCH_DISABLE"


class ArchDecisionError(ValueError):
    """A user choice the registry knows cannot run here; raised on purpose."""


_warned: Set[str] = set()


def fail_open(fn: Callable) -> Callable:
    """Run a hook; on an unexpected error, warn once and let upstream's original answer."""

    @functools.wraps(fn)
    def wrapper(original: Callable, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(original, *args, **kwargs)
        except ArchDecisionError:
            raise
        except Exception as exc:  # the plugin must never break the server
            key = fn.__name__
            if key not in _warned:
                _warned.add(key)
                logger.warning("sglang-arch: hook %s failed (%s: %s); using SGLang's own behaviour",
                               key, type(exc).__name__, exc)
            return original(*args, **kwargs)

    return wrapper


# --- get_platform() facts -------------------------------------------------------------

def fact_hook(fact: str) -> Callable:
    """A hook for one platform probe (``is_sm90_supported`` answers fact ``is_sm90``)."""

    @fail_open
    def platform_fact(original: Callable, *args: Any, **kwargs: Any) -> Any:
        ctx = current()
        if ctx.resolution is None or fact not in ctx.facts:
            return original(*args, **kwargs)
        return ctx.facts[fact]

    platform_fact.__name__ = f"platform_fact_{fact}"
    return platform_fact


# --- torch symmetric memory -----------------------------------------------------------

@fail_open
def symm_mem_init(original: Callable, self: Any, group: Any, device: Any) -> None:
    ctx = current()
    if ctx.resolution is None:
        return original(self, group, device)
    module = sys.modules[type(self).__module__]
    routed = ctx.symm_mem_table()
    module.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES = routed
    utils = sys.modules.get("sglang.srt.distributed.device_communicators.all_reduce_utils")
    if utils is not None:
        utils.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES = routed
    original(self, group, device)
    world_size = getattr(self, "world_size", None)
    if world_size is None:  # torch symmetric memory unavailable: upstream returned first
        return None
    decision = ctx.symm_mem(world_size)
    # Per instance: the kernel choice on every all-reduce stays a plain dict look-up.
    self._WORLD_SIZES_MULTIMEM = {self.device_capability: [world_size] if decision.algorithm == "multimem" else []}
    if decision.enabled and decision.algorithm == "two_shot" and self.disabled and self.max_size > 0:
        # SGLang 0.5.23 drops every group without multicast; two-shot needs only P2P.
        self.buffer = module.torch_symm_mem.empty(self.max_size // self.dtype.itemsize, device=self.device,
                                                   dtype=self.dtype)
        module.torch_symm_mem.rendezvous(self.buffer, self.group.group_name)
        self.disabled = False
    logger.info("sglang-arch: torch symm mem %s (%s, max %d bytes): %s", "on" if not self.disabled else "off",
                decision.algorithm or "-", self.max_size if not self.disabled else 0, decision.reason)
    return None


# --- custom all-reduce v2 -------------------------------------------------------------

@fail_open
def custom_ar_v2_configs(original: Callable) -> Dict[int, Any]:
    ctx = current()
    if ctx.resolution is None:
        return original()
    configs = sys.modules[original.__module__]
    import torch

    num_sm = torch.cuda.get_device_properties().multi_processor_count
    table = ctx.custom_ar_table()
    if table is not None:
        return getattr(configs, f"_{table}_configs")(num_sm)
    heuristic = configs.Heuristic(CUSTOM_AR_DEFAULT_ONE_SHOT_BYTES, CUSTOM_AR_DEFAULT_ONE_SHOT_BYTES,
                                  CUSTOM_AR_DEFAULT_TWO_SHOT_BYTES)
    default = configs.AllReduceConfig(graph=heuristic, eager=heuristic, num_push_blocks=num_sm,
                                      num_pull_blocks=num_sm, num_mc_blocks=None)
    return {ws: default for ws in ctx.resolution.profile.custom_ar_v2_world_sizes}


# --- FlashInfer all-reduce fusion -----------------------------------------------------

@fail_open
def fusion_resolve_backend(original: Callable, backend: str, is_multi_node: bool = False) -> str:
    ctx = current()
    if ctx.resolution is None:
        return original(backend, is_multi_node)
    decision = ctx.fusion(nnodes=2 if is_multi_node else 1, requested=backend)
    if decision.enabled:
        return decision.backend
    raise ArchDecisionError(f"FlashInfer allreduce fusion ({backend}): {decision.reason}")


# The platform gate upstream's auto-enable pass checks for a tier it already serves,
# by the backend the registry chose; used to ask upstream's own model and parallelism
# rules on a tier whose gate it does not know (SM12x with P2P uses trtllm, as SM90).
FUSION_GATES: Dict[str, Dict[str, bool]] = {"trtllm": {"is_sm90": True, "is_sm100": False}}


@fail_open
def fusion_auto_enable(original: Callable, view: Any) -> dict:
    ctx = current()
    if ctx.resolution is None:
        return original(view)
    decision = ctx.fusion(nnodes=view.nnodes)
    if not decision.enabled:
        if view.flashinfer_allreduce_fusion_backend is None:
            logger.info("sglang-arch: FlashInfer all-reduce fusion not auto-enabled: %s", decision.reason)
        return {}
    if ctx.facts.get("is_sm90") or ctx.facts.get("is_sm100"):
        return original(view)  # upstream's own gate already admits this tier
    gate = FUSION_GATES.get(decision.backend)
    if gate is None:
        return {}
    from sglang.srt.runtime_context import override_platform

    with override_platform(**gate):
        return original(view)


# --- attention backends ---------------------------------------------------------------

@fail_open
def default_attention_backend(original: Callable, server_args: Any, use_mla_backend: bool, model_config: Any) -> str:
    ctx = current()
    from sglang.srt.runtime_context import get_platform

    platform = get_platform()
    base = sys.modules[original.__module__]
    if (ctx.resolution is None or not platform.is_cuda or platform.is_hip
            or base.current_platform.is_out_of_tree()):
        return original(server_args, use_mla_backend, model_config)
    traits = model_traits(base, server_args, use_mla_backend, model_config, platform.has_flashinfer, ctx.cuda)
    return ctx.attention_default(traits).prefill


def model_traits(base: Any, server_args: Any, use_mla: bool, model_config: Any, has_flashinfer: bool,
                 cuda: Any) -> ModelTraits:
    """Read the model and speculative settings the default depends on, with upstream's helpers."""
    cfg = base.resolving_view(server_args)
    topk_declared = (cfg.speculative_algorithm is None or cfg.speculative_eagle_topk is not None
                     or base._forces_eagle_topk_one(cfg.speculative_algorithm))
    return ModelTraits(
        kind="mla" if use_mla else "mha",
        asymmetric_kv=bool(getattr(model_config, "has_asymmetric_kv", False)),
        attention_sinks=bool(getattr(model_config, "has_attention_sinks", False)),
        speculative_multi_branch=not base.is_no_spec_infer_or_topk_one(base.resolved_view(server_args)),
        speculative_topk_pending=not topk_declared,
        cross_attention_needs_flashinfer="WhisperForConditionalGeneration" in (
            getattr(model_config.hf_config, "architectures", None) or []),
        flashinfer_available=bool(has_flashinfer),
        cuda=cuda,
    )


@fail_open
def attention_backend_check(original: Callable, view: Any) -> dict:
    result = original(view)
    ctx = current()
    from sglang.srt.runtime_context import get_platform

    if ctx.resolution is None or not get_platform().is_cuda:
        return result
    overrides = sys.modules[original.__module__]
    kind = "mla" if overrides.use_mla_backend(view) else "mha"
    chosen = [("--attention-backend", view.attention_backend, ("prefill", "decode")),
              ("--prefill-attention-backend", view.prefill_attention_backend, ("prefill",)),
              ("--decode-attention-backend", view.decode_attention_backend, ("decode",))]
    for flag, name, phases in chosen:
        if name is None:
            continue
        for phase in phases:
            check = ctx.check_backend(name, kind, phase)
            if check.valid is False:
                raise ArchDecisionError(
                    f"{flag} {name}: {check.reason}. Valid here: {', '.join(check.alternatives)}. "
                    f"(checked by sglang-arch; {KILL_SWITCH}=1 turns the plugin off)")
    return result
