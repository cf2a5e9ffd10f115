"""Capability windows of the library kernels SGLang selects by backend name.

FlashInfer's all-reduce fusion backends and the attention backends that ship
prebuilt kernels run only on the GPUs they are built for. Each window is a set
of :class:`CapabilityRequirement` with OR semantics, declared as the specs of
``sglang.kernels.ops`` are. SM12x windows name their minors instead of the
whole family (#39482: do not broaden these checks to future SM12x variants).
"""

from sglang.kernels.spec import CapabilityRequirement

_SM8X = frozenset({CapabilityRequirement.cuda(min_sm=(8, 0), max_sm=(8, 9))})
_SM9X = frozenset({CapabilityRequirement.cuda(min_sm=(9, 0), max_sm=(9, 9))})
_SM10X = frozenset({CapabilityRequirement.cuda(min_sm=(10, 0), max_sm=(10, 9))})
_SM12X = frozenset({CapabilityRequirement.cuda(min_sm=(12, 0), max_sm=(12, 1))})

# FlashInfer all-reduce fusion (flashinfer.comm) on one node, by backend.
ALLREDUCE_FUSION = {
    "trtllm": _SM9X | _SM10X,
    "mnnvl": _SM9X | _SM10X,
    "cutedsl": _SM10X,
}
# Backends that also reduce across nodes (multi-node NVLink).
ALLREDUCE_FUSION_MULTI_NODE = {
    "mnnvl": _SM10X,
    "cutedsl": _SM10X,
}

# Attention backends with prebuilt kernels, by (backend, model kind); a
# backend not listed is JIT-built for the device and has no window.
ATTENTION = {
    ("fa3", "mha"): _SM8X | _SM9X,
    ("fa3", "mla"): _SM9X,
    ("trtllm_mha", "mha"): _SM9X | _SM10X | _SM12X,
}
