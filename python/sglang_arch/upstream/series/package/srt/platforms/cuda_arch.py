"""Per-architecture tuning of the CUDA platform: collectives and attention.

One entry per compute capability SGLang is tuned for. A GPU the table does
not list reads the entry of the nearest listed capability below it in the
same major (10.5 reads 10.0's); a major the table does not list has no entry,
and each decision keeps its portable default. An entry holds sizes, tables
and preferences only: whether a kernel runs is its window in
``sglang.kernels.backend_windows``, checked against the device itself.
"""

from functools import lru_cache
from typing import Dict, Optional, Tuple

import msgspec

from sglang.kernels import backend_windows
from sglang.kernels.spec import PlatformInfo, capabilities_satisfied
from sglang.srt.runtime_context import get_platform

MiB = 1024 * 1024


class CudaArchConfig(msgspec.Struct, frozen=True, kw_only=True):
    # Torch symmetric memory: world size -> largest all-reduce in bytes, and
    # the world sizes that use multimem (NVLS multicast) rather than two-shot.
    torch_symm_mem_max_sizes: Dict[int, int] = msgspec.field(default_factory=dict)
    torch_symm_mem_multimem_world_sizes: Tuple[int, ...] = ()
    # Tuned table of the JIT custom all-reduce (configs/custom_all_reduce_v2.py).
    custom_all_reduce_v2_table: Optional[str] = None
    # FlashInfer all-reduce fusion: what "auto" means on one node and across
    # nodes, and whether it is enabled for the supported models unasked.
    allreduce_fusion_backend: Optional[str] = None
    allreduce_fusion_multi_node_backend: Optional[str] = None
    allreduce_fusion_auto_enable: bool = False
    # Preferred attention backends, used where their kernels run.
    mha_attention_backend: Optional[str] = None
    mla_attention_backend: Optional[str] = None


_SM90 = CudaArchConfig(
    torch_symm_mem_max_sizes={2: 64 * MiB, 4: 64 * MiB, 6: 128 * MiB, 8: 128 * MiB},
    torch_symm_mem_multimem_world_sizes=(4, 6, 8),
    custom_all_reduce_v2_table="sm90",
    allreduce_fusion_backend="trtllm",
    allreduce_fusion_auto_enable=True,
    mha_attention_backend="fa3",
    mla_attention_backend="fa3",
)
_SM100 = msgspec.structs.replace(
    _SM90,
    custom_all_reduce_v2_table="sm100",
    allreduce_fusion_backend="mnnvl",
    allreduce_fusion_multi_node_backend="mnnvl",
    mha_attention_backend="trtllm_mha",
    mla_attention_backend="flashinfer",
)

CUDA_ARCH_CONFIGS: Dict[Tuple[int, int], CudaArchConfig] = {
    (9, 0): _SM90,
    (10, 0): _SM100,
    (10, 7): msgspec.structs.replace(_SM100, custom_all_reduce_v2_table="sm107"),
}


@lru_cache(maxsize=None)
def get_cuda_arch_config(capability: Tuple[int, int]) -> Optional[CudaArchConfig]:
    """The entry for ``capability``: its own, else the nearest listed
    capability below it in the same major; None for an unlisted major."""
    listed = [c for c in CUDA_ARCH_CONFIGS if c[0] == capability[0] and c <= capability]
    return CUDA_ARCH_CONFIGS[max(listed)] if listed else None


def _targeted_capability() -> Optional[Tuple[int, int]]:
    """The CUDA device's capability where SGLang's toolkit targets it (the
    probes carry the CUDA floors: 12.3 on SM90, 12.8 on Blackwell)."""
    platform = get_platform()
    major, minor = platform.device_capability
    if major is None:
        # Probes answered without a CUDA context: the family's first capability.
        for family, targeted in (
            (9, platform.is_sm90),
            (10, platform.is_sm100),
            (12, platform.is_sm120),
        ):
            if targeted:
                return (family, 0)
        return None
    if major == 9:
        targeted = platform.is_sm90
    elif major == 10:
        targeted = platform.is_sm100
    else:
        targeted = major == 12 and platform.is_sm120
    return (major, minor) if targeted else None


def _window_admits(window, capability: Tuple[int, int]) -> bool:
    device = PlatformInfo(
        device_type="cuda", cuda_arch_major=capability[0], cuda_arch_minor=capability[1]
    )
    return bool(window) and capabilities_satisfied(window, device)


@lru_cache(maxsize=None)
def _fusion_backends(capability: Tuple[int, int], is_multi_node: bool):
    if is_multi_node:
        windows = backend_windows.ALLREDUCE_FUSION_MULTI_NODE
    else:
        windows = backend_windows.ALLREDUCE_FUSION
    return tuple(b for b, w in windows.items() if _window_admits(w, capability))


def allreduce_fusion_backends(is_multi_node: bool = False) -> Tuple[str, ...]:
    """The FlashInfer all-reduce fusion backends whose kernels run here."""
    capability = _targeted_capability()
    if capability is None:
        return ()
    return _fusion_backends(capability, is_multi_node)


def allreduce_fusion_auto_backend(is_multi_node: bool = False) -> Optional[str]:
    """What ``--flashinfer-allreduce-fusion-backend auto`` resolves to here."""
    capability = _targeted_capability()
    config = capability and get_cuda_arch_config(capability)
    if not config:
        return None
    if is_multi_node:
        backend = config.allreduce_fusion_multi_node_backend
    else:
        backend = config.allreduce_fusion_backend
    return backend if backend in _fusion_backends(capability, is_multi_node) else None


def allreduce_fusion_auto_enable(is_multi_node: bool = False) -> bool:
    """Whether the supported models get all-reduce fusion without asking."""
    capability = _targeted_capability()
    config = capability and get_cuda_arch_config(capability)
    return bool(
        config
        and config.allreduce_fusion_auto_enable
        and allreduce_fusion_auto_backend(is_multi_node) is not None
    )


def attention_backend_runs(
    backend: str, use_mla: bool, capability: Tuple[int, int]
) -> bool:
    """False only for a backend with a window that does not admit ``capability``."""
    window = backend_windows.ATTENTION.get((backend, "mla" if use_mla else "mha"))
    return window is None or _window_admits(window, capability)


def default_attention_backend(use_mla: bool) -> Optional[str]:
    """The preferred attention backend of this GPU's entry, where it runs."""
    capability = _targeted_capability()
    config = capability and get_cuda_arch_config(capability)
    if not config:
        return None
    backend = config.mla_attention_backend if use_mla else config.mha_attention_backend
    if backend and attention_backend_runs(backend, use_mla, capability):
        return backend
    return None
