"""Per-architecture tuning for collectives and attention, in one table.

SGLang tunes a few things per GPU architecture: the torch symmetric-memory
all-reduce sizes, the JIT custom all-reduce tables, the FlashInfer all-reduce
fusion backend and the default attention backend. Each tier below holds those
values for one compute capability.

A capability the table does not list resolves to the nearest tier below it:
the highest known minor of the same major first ("family"), else the highest
known capability below ("generation"). A fallback only lends values that
cannot break correctness (sizes, thresholds, preferences). Whether a kernel
runs on the device is never lent: each kernel below lists the capabilities it
is built for, and a preference is used only where its kernel is listed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Dict, Optional, Tuple

from sglang.srt.runtime_context import get_platform

logger = logging.getLogger(__name__)

Capability = Tuple[int, int]

MiB = 1024 * 1024


@dataclass(frozen=True)
class ArchTier:
    name: str
    # Torch symmetric memory: world size -> largest all-reduce payload in bytes.
    symm_mem_max_sizes: Dict[int, int] = field(default_factory=dict)
    # World sizes where symmetric memory uses multimem (NVLS multicast);
    # the others use two-shot.
    symm_mem_multimem_world_sizes: Tuple[int, ...] = ()
    # Tuned table of the JIT custom all-reduce (configs/custom_all_reduce_v2.py);
    # None keeps its conservative default.
    custom_all_reduce_v2_table: Optional[str] = None
    # FlashInfer all-reduce fusion: what `auto` resolves to on one node and
    # across nodes, and whether fusion is enabled without being asked for.
    fusion_backend: Optional[str] = None
    fusion_multi_node_backend: Optional[str] = None
    fusion_auto_enable: bool = False
    # Preferred attention backends; None leaves SGLang's portable choice.
    mha_attention_backend: Optional[str] = None
    mla_attention_backend: Optional[str] = None


_SYMM_MEM_MAX_SIZES = {2: 64 * MiB, 4: 64 * MiB, 6: 128 * MiB, 8: 128 * MiB}

_HOPPER = ArchTier(
    name="Hopper",
    symm_mem_max_sizes=_SYMM_MEM_MAX_SIZES,
    symm_mem_multimem_world_sizes=(4, 6, 8),
    custom_all_reduce_v2_table="sm90",
    fusion_backend="trtllm",
    fusion_auto_enable=True,
    mha_attention_backend="fa3",
    mla_attention_backend="fa3",
)

_BLACKWELL = ArchTier(
    name="Blackwell",
    symm_mem_max_sizes=_SYMM_MEM_MAX_SIZES,
    symm_mem_multimem_world_sizes=(4, 6, 8),
    custom_all_reduce_v2_table="sm100",
    fusion_backend="mnnvl",
    fusion_multi_node_backend="mnnvl",
    fusion_auto_enable=True,
    mha_attention_backend="trtllm_mha",
    mla_attention_backend="flashinfer",
)

# RTX PRO 6000 / RTX 5090 / DGX Spark: PCIe, no NVLS multicast, so symmetric
# memory runs two-shot over peer-to-peer access. Fusion is used only when
# asked for: auto-selecting trtllm on SM120 regressed at TP4 over PCIe (#32330).
_BLACKWELL_RTX = ArchTier(
    name="Blackwell RTX",
    symm_mem_max_sizes=_SYMM_MEM_MAX_SIZES,
    fusion_backend="trtllm",
)

ARCH_TIERS: Dict[Capability, ArchTier] = {
    (7, 0): ArchTier(name="Volta"),
    (7, 5): ArchTier(name="Turing"),
    (8, 0): ArchTier(name="Ampere"),
    (8, 6): ArchTier(name="Ampere"),
    (8, 7): ArchTier(name="Ampere (Jetson Orin)"),
    (8, 9): ArchTier(name="Ada Lovelace"),
    (9, 0): _HOPPER,
    (10, 0): _BLACKWELL,
    (10, 3): replace(_BLACKWELL, name="Blackwell Ultra"),
    (10, 7): replace(_BLACKWELL, name="Rubin", custom_all_reduce_v2_table="sm107"),
    (11, 0): ArchTier(name="Jetson Thor"),
    (12, 0): _BLACKWELL_RTX,
    (12, 1): replace(_BLACKWELL_RTX, name="GB10"),
}

# The capabilities each kernel is built for. A fallback tier never extends
# these lists: a GPU that is not listed does not get the kernel.
_SM10X = ((10, 0), (10, 3), (10, 7))
_SM12X = ((12, 0), (12, 1))
ALLREDUCE_FUSION_KERNELS: Dict[str, Tuple[Capability, ...]] = {
    "trtllm": ((9, 0), *_SM10X, *_SM12X),
    "mnnvl": ((9, 0), *_SM10X),
    "cutedsl": _SM10X,
}
# Backends that also span nodes (multi-node NVLink) where they run.
ALLREDUCE_FUSION_MULTI_NODE_KERNELS: Dict[str, Tuple[Capability, ...]] = {
    "mnnvl": _SM10X,
    "cutedsl": _SM10X,
}
# (backend, uses MLA) -> capabilities, for the backends that ship prebuilt
# kernels: sgl-kernel's FA3 is sm_80, sm_86 and sm_90a (MLA on Hopper only);
# trtllm-gen MLA is SM10x only (SM120 fails, #24633). JIT backends run anywhere.
ATTENTION_KERNELS: Dict[Tuple[str, bool], Tuple[Capability, ...]] = {
    ("fa3", False): ((8, 0), (8, 6), (8, 7), (8, 9), (9, 0)),
    ("fa3", True): ((9, 0),),
    ("trtllm_mha", False): ((9, 0), *_SM10X, *_SM12X),
    ("trtllm_mla", True): _SM10X,
}

_NO_TIER = ArchTier(name="untuned")


@dataclass(frozen=True)
class Resolution:
    capability: Capability
    tier: ArchTier
    # The tier's capability; None below the oldest tier.
    matched: Optional[Capability]
    # "exact", "family", "generation" or "none".
    match: str


def check_capability(capability) -> Capability:
    """Return ``capability`` as a (major, minor) pair or raise ValueError."""
    if (
        not isinstance(capability, tuple)
        or len(capability) != 2
        or not all(type(x) is int and 0 <= x < 100 for x in capability)
    ):
        raise ValueError(
            f"Invalid compute capability {capability!r}: expected a (major, minor) "
            "tuple of integers in 0..99, e.g. (9, 0)."
        )
    return capability


def resolve(capability: Capability) -> Resolution:
    """The tier whose tuning applies to ``capability``; never a newer one."""
    return _resolve(check_capability(capability))


@lru_cache(maxsize=None)
def _resolve(capability: Capability) -> Resolution:
    if capability in ARCH_TIERS:
        return Resolution(capability, ARCH_TIERS[capability], capability, "exact")
    below = [known for known in ARCH_TIERS if known < capability]
    if not below:
        return Resolution(capability, _NO_TIER, None, "none")
    matched = max(below)
    match = "family" if matched[0] == capability[0] else "generation"
    logger.warning(
        "Compute capability %d.%d is not in the architecture table; using the "
        "tuning of %d.%d (%s) by %s fallback.",
        *capability,
        *matched,
        ARCH_TIERS[matched].name,
        match,
    )
    return Resolution(capability, ARCH_TIERS[matched], matched, match)


# SGLang's platform fact for each major that has listed kernels: it carries the CUDA
# floor of that family's kernels (12.3 on Hopper, 12.8 on Blackwell), and names the
# family where a test describes a GPU by its facts alone (override_platform).
_FAMILY_FACTS = {9: "is_sm90", 10: "is_sm100", 12: "is_sm120"}


def device_capability() -> Optional[Capability]:
    """The CUDA device's capability, or None off CUDA (ROCm reports one too).

    Where SGLang's platform context describes another family than the device's own
    (``override_platform(is_sm100=True)`` in a test, on any machine), that family's
    first capability: the registry decides for the GPU the context describes.
    """
    platform = get_platform()
    capability = None
    if platform.is_cuda:
        major, minor = platform.device_capability
        if major is not None:
            capability = (major, minor)
    for major, fact in _FAMILY_FACTS.items():
        if getattr(platform, fact) and (capability is None or capability[0] != major):
            return (major, 0)
    return capability


def _device_tier(
    capability: Optional[Capability],
) -> Tuple[Optional[Capability], ArchTier]:
    if capability is None:
        capability = device_capability()
    if capability is None:
        return None, _NO_TIER
    return capability, resolve(capability).tier


def _listed(kernels: Dict, key, capability: Optional[Capability]) -> bool:
    return capability in kernels.get(key, ())


def _toolkit_supports(capability: Capability) -> bool:
    if capability[0] < 9:
        return True
    fact = _FAMILY_FACTS.get(capability[0])
    return fact is not None and getattr(get_platform(), fact)


def symm_mem_max_size(world_size: int, capability: Optional[Capability] = None) -> int:
    """Largest torch symmetric-memory all-reduce in bytes; 0 when unsupported."""
    _, tier = _device_tier(capability)
    return tier.symm_mem_max_sizes.get(world_size, 0)


def symm_mem_uses_multimem(
    world_size: int, capability: Optional[Capability] = None
) -> bool:
    """Whether symmetric memory prefers multimem over two-shot here."""
    _, tier = _device_tier(capability)
    return world_size in tier.symm_mem_multimem_world_sizes


def custom_all_reduce_v2_table(
    capability: Optional[Capability] = None,
) -> Optional[str]:
    """Name of the tuned custom all-reduce v2 table; None for the default."""
    _, tier = _device_tier(capability)
    return tier.custom_all_reduce_v2_table


def allreduce_fusion_backends(
    is_multi_node: bool = False, capability: Optional[Capability] = None
) -> Tuple[str, ...]:
    """FlashInfer all-reduce fusion backends that run on this device."""
    capability, _ = _device_tier(capability)
    kernels = (
        ALLREDUCE_FUSION_MULTI_NODE_KERNELS
        if is_multi_node
        else ALLREDUCE_FUSION_KERNELS
    )
    return tuple(
        name
        for name in kernels
        if _listed(kernels, name, capability) and _toolkit_supports(capability)
    )


def allreduce_fusion_auto_backend(
    is_multi_node: bool = False, capability: Optional[Capability] = None
) -> Optional[str]:
    """What ``--flashinfer-allreduce-fusion-backend auto`` means here."""
    capability, tier = _device_tier(capability)
    backend = tier.fusion_multi_node_backend if is_multi_node else tier.fusion_backend
    if backend in allreduce_fusion_backends(is_multi_node, capability):
        return backend
    return None


def allreduce_fusion_auto_enable(
    is_multi_node: bool = False, capability: Optional[Capability] = None
) -> bool:
    """Whether SGLang enables all-reduce fusion without the flag."""
    capability, tier = _device_tier(capability)
    return tier.fusion_auto_enable and (
        allreduce_fusion_auto_backend(is_multi_node, capability) is not None
    )


def attention_backend(
    use_mla: bool, capability: Optional[Capability] = None
) -> Optional[str]:
    """The tier's preferred attention backend if its kernels run here."""
    capability, tier = _device_tier(capability)
    backend = tier.mla_attention_backend if use_mla else tier.mha_attention_backend
    if backend is None or not _toolkit_supports(capability):
        return None
    if attention_backend_runs(backend, use_mla, capability):
        return backend
    return None


def attention_backend_runs(
    backend: str, use_mla: bool, capability: Optional[Capability] = None
) -> bool:
    """False only for a backend whose kernels are not built for this device."""
    capability, _ = _device_tier(capability)
    if capability is None or (backend, use_mla) not in ATTENTION_KERNELS:
        return True
    return _listed(ATTENTION_KERNELS, (backend, use_mla), capability)


def check_attention_backend(backend: str, use_mla: bool) -> None:
    """Raise ValueError for an attention backend that cannot run here."""
    if attention_backend_runs(backend, use_mla):
        return
    kind = "MLA" if use_mla else "MHA"
    major, minor = device_capability()
    built = ", ".join(f"{a}.{b}" for a, b in ATTENTION_KERNELS[(backend, use_mla)])
    raise ValueError(
        f"Attention backend {backend!r} ({kind}) is not built for compute "
        f"capability {major}.{minor}; it runs on {built}. "
        "Please choose another --attention-backend (e.g. flashinfer or triton)."
    )
