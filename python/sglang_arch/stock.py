"""What stock SGLang 0.5.23 decides on a machine, without SGLang: a model of its rules.

``explain`` prints these answers beside the registry's so that a reader sees what the
plugin changes, on a machine where SGLang is not installed.  Each rule is written from
SGLang 0.5.23's own code (named on each function); ``test/integration/test_stock_model.py``
calls those functions on simulated devices and fails where this model and SGLang disagree.

The platform facts SGLang's rules read are its ``is_sm*`` probes: a capability major
and a minimum torch CUDA version each (``srt/utils/common.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, Optional, Tuple

from .arch.capability import Capability
from .arch.policies import collectives, moe
from .arch.profile import MIB
from .arch.topology import Topology

RELEASE = "0.5.23"
Cuda = Optional[Tuple[int, int]]

# SGLang's probes: fact -> (capability majors, minimum torch CUDA)
PROBES = {
    "is_sm90": ((9,), (12, 3)),
    "is_hopper_with_cuda_12_3": ((9,), (12, 3)),
    "is_sm100": ((10,), (12, 8)),
}
# all_reduce_utils.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES: major -> world size -> bytes
SYMM_MEM_MAX_BYTES = {major: {2: 64 * MIB, 4: 64 * MIB, 6: 128 * MIB, 8: 128 * MIB} for major in (9, 10)}
# TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM
MULTIMEM_WORLD_SIZES = {9: (4, 6, 8), 10: (4, 6, 8)}
# configs/custom_all_reduce_v2.py: the world sizes of each table _get_all_reduce_configs picks
CUSTOM_AR_WORLD_SIZES = {"sm90": tuple(range(2, 9)), "sm100": tuple(range(2, 9)) + (16,),
                         "sm107": tuple(range(2, 9)) + (16,), "default": tuple(range(2, 17))}


def fact(name: str, cap: Capability, cuda: Cuda) -> bool:
    majors, need = PROBES[name]
    return cap.major in majors and (cuda is None or cuda >= need)


@dataclass(frozen=True)
class StockAnswer:
    value: str  # as explain prints it: "off", "128 MiB multimem", a backend name
    reason: str


@dataclass(frozen=True)
class StockAttention:
    prefill: str
    decode: str
    reason: str


@dataclass(frozen=True)
class StockDecisions:
    symm_mem: StockAnswer
    custom_allreduce: StockAnswer
    fusion: StockAnswer
    pcie_ipc: StockAnswer
    mha: StockAttention
    mla: StockAttention
    moe_gemm: Dict[str, str]

    def to_dict(self) -> Dict[str, Any]:
        out = {name: asdict(getattr(self, name))
               for name in ("symm_mem", "custom_allreduce", "fusion", "pcie_ipc", "mha", "mla")}
        out["moe_gemm"] = dict(self.moe_gemm)
        return dict(release=RELEASE, **out)


def symm_mem(cap: Capability, topology: Topology, world_size: int) -> StockAnswer:
    """``TorchSymmMemCommunicator.__init__`` (with ``--enable-torch-symm-mem``): a size for
    the major and world size, and a multicast handle, else disabled; multimem where the
    major lists the world size, else two-shot.  (SGLang's own inkling floor, which raises
    the size to >= 256 MiB, is left out on both sides.)"""
    if world_size == 1:
        return StockAnswer("off", "one GPU")
    sizes = SYMM_MEM_MAX_BYTES.get(cap.major)
    if sizes is None:
        return StockAnswer("off", f"no size for major {cap.major} (only majors "
                                  f"{', '.join(map(str, sorted(SYMM_MEM_MAX_BYTES)))} have one)")
    if world_size not in sizes:
        return StockAnswer("off", f"world size {world_size} has no size (sizes for {', '.join(map(str, sorted(sizes)))})")
    if not topology.multicast:
        return StockAnswer("off", f"{topology.name} has no multicast, which this release requires")
    algorithm = "multimem" if world_size in MULTIMEM_WORLD_SIZES.get(cap.major, ()) else "two_shot"
    return StockAnswer(f"{sizes[world_size] // MIB} MiB {algorithm}", f"major {cap.major}, world size {world_size}")


def symm_mem_bytes(cap: Capability, topology: Topology, world_size: int) -> Tuple[int, Optional[str]]:
    """The communicator's bound and kernel under ``symm_mem``'s rule; (0, None) where it is off."""
    sizes = SYMM_MEM_MAX_BYTES.get(cap.major, {})
    if world_size == 1 or world_size not in sizes or not topology.multicast:
        return 0, None
    return sizes[world_size], "multimem" if world_size in MULTIMEM_WORLD_SIZES.get(cap.major, ()) else "two_shot"


def pcie_ipc() -> StockAnswer:
    """``pcie_ipc_ar.eligible_group``: opt-in, on no GPU by default."""
    return StockAnswer("off", "opt-in: SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1")


def plan(cap: Capability, topology: Topology, world_size: int, symm_mem_flag: bool = False) -> collectives.AllReducePlan:
    """``GroupCoordinator._resolve_outplace_all_reduce_method`` with stock's communicators."""
    car = custom_allreduce(cap, topology, world_size)
    nbytes, kernel = symm_mem_bytes(cap, topology, world_size)
    return collectives.allreduce_plan(16 * MIB if car.value != "off" else 0, False, nbytes, kernel, symm_mem_flag,
                                      {"custom all-reduce": car.reason, "PCIe-IPC": pcie_ipc().reason,
                                       "torch symm mem": symm_mem(cap, topology, world_size).reason})


def custom_ar_table(cap: Capability) -> str:
    """``configs/custom_all_reduce_v2._get_all_reduce_configs``: which table, by capability."""
    if cap.major == 9:
        return "sm90"
    if cap.major == 10:
        return "sm107" if cap.minor >= 7 else "sm100"
    return "default"


def custom_allreduce(cap: Capability, topology: Topology, world_size: int) -> StockAnswer:
    """``custom_all_reduce_utils.can_use_custom_all_reduce_with_nvlink``: P2P, and full
    NVLink above two GPUs; the world size in the table the capability picks."""
    table = custom_ar_table(cap)
    if world_size == 1:
        return StockAnswer("off", "one GPU")
    if not topology.p2p:
        return StockAnswer("off", f"{topology.name} has no peer-to-peer access")
    if world_size > 2 and not topology.full_nvlink:
        return StockAnswer("off", f"above 2 GPUs it needs full NVLink; {topology.name} has none")
    if world_size not in CUSTOM_AR_WORLD_SIZES[table]:
        return StockAnswer("off", f"world size {world_size} is not in the {table} table")
    return StockAnswer(f"16 MiB {table}", f"{table} table")


def fusion(cap: Capability, world_size: int, nnodes: int, cuda: Cuda) -> StockAnswer:
    """``overrides._flashinfer_allreduce_fusion_auto_enable`` for a model it enables fusion
    for, then ``flashinfer_comm_fusion._resolve_backend('auto')``: SM90 or SM100 only,
    TP > 1, one node unless SM100; mnnvl on SM100, trtllm on SM90."""
    sm90, sm100 = fact("is_sm90", cap, cuda), fact("is_sm100", cap, cuda)
    if world_size == 1:
        return StockAnswer("off", "one GPU")
    if not (sm90 or sm100):
        return StockAnswer("off", f"auto-enabled only on SM90 and SM100 (CUDA >= 12.3 / 12.8), not {cap}")
    if nnodes > 1 and not sm100:
        return StockAnswer("off", "across nodes only on SM100")
    return StockAnswer("mnnvl" if sm100 else "trtllm", "SM100: mnnvl" if sm100 else "SM90: trtllm")


def attention(cap: Capability, kind: str, cuda: Cuda) -> StockAttention:
    """``model_override_base.get_default_attn_backend`` for a model without speculative
    decoding, attention sinks or asymmetric K/V, with FlashInfer installed."""
    hopper, sm100 = fact("is_hopper_with_cuda_12_3", cap, cuda), fact("is_sm100", cap, cuda)
    other = "flashinfer" if kind == "mha" else "triton"
    if hopper:
        name, why = "fa3", "Hopper with torch CUDA >= 12.3"
    elif sm100:
        name, why = ("trtllm_mha" if kind == "mha" else "flashinfer"), "SM100 (major 10) with torch CUDA >= 12.8"
    else:
        name, why = other, f"neither Hopper nor SM100 ({cap}): the portable default"
    return StockAttention(name, name, f"{why}: {name}")


def moe_gemm(cap: Capability) -> Dict[str, str]:
    """DeepGEMM, the FP8 block and FP4 GEMM backends for ``auto`` (``policies/moe.py``'s
    ``upstream_*`` rules, which the registry's tests compare with SGLang's code)."""
    deep_gemm = moe.upstream_deep_gemm(cap)
    return {"deep_gemm": "on" if deep_gemm else "off", "fp8_gemm": moe.upstream_fp8_gemm(cap, deep_gemm),
            "fp4_gemm": moe.upstream_fp4_gemm(cap)}


def moe_runner(cap: Capability, kind: str) -> str:
    """SGLang's MoE runner for ``auto`` for experts of ``kind`` on ``cap`` (``policies/moe.py``'s
    ``upstream_moe_runner``, the rule the registry's tests compare with SGLang's code)."""
    return moe.upstream_moe_runner(cap, kind)


def decide(cap: Capability, topology: Topology, world_size: int, nnodes: int = 1, cuda: Cuda = (13, 0)) -> StockDecisions:
    return StockDecisions(symm_mem=symm_mem(cap, topology, world_size), pcie_ipc=pcie_ipc(),
                          custom_allreduce=custom_allreduce(cap, topology, world_size),
                          fusion=fusion(cap, world_size, nnodes, cuda),
                          mha=attention(cap, "mha", cuda), mla=attention(cap, "mla", cuda), moe_gemm=moe_gemm(cap))


def named(cap: Capability, cuda: Cuda = (13, 0)) -> Dict[str, str]:
    """Stock SGLang's answer for the model-specific rows ``explain --all`` prints, where this
    model has SGLang's rule: each asked of the device's own capability, as SGLang asks it.
    A row without an entry here is not modelled (``plan`` runs SGLang's own code for it)."""
    from types import SimpleNamespace

    from .arch.policies import deterministic, speculative, vision

    # SGLang's rules read the device, not a tier: the registry's own copies of them (the
    # policies' upstream_pick, which read only the resolved capability), asked of the device.
    device = SimpleNamespace(resolved=cap)
    return {
        "deterministic MHA": deterministic.upstream_pick(device, False, cuda),
        "deterministic MLA": deterministic.upstream_pick(device, True, cuda),
        "vision attention": vision.upstream_pick(device),
        "hybrid linear draft": speculative.upstream_pick(device, cuda),
        # layers/attention/dsv4/v41_indexer.is_sm100_or_newer: major >= 10
        "DeepSeek-V4.1 indexer": "DeepGEMM" if cap.major >= 10 else "torch",
        # kernels/ops/attention/dsv4/index_logits._is_sm100: major == 10
        "V4.1 index logits": "bf16" if cap.major == 10 else "fp32",
    }
