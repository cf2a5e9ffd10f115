"""Collective decisions: torch symmetric memory, custom all-reduce, FlashInfer fusion.

Each function is pure: (resolution, topology, world size[, nodes]) -> decision with the
reason.  A world size the tier does not list is a disabled decision with a reason,
never a ``KeyError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from .. import catalog
from ..profile import MIB
from ..registry import Resolution
from ..topology import Topology
from ..validate import SYMM_MEM_MAX_MIB
from .platform import tier_fact, tier_where

# SGLang 0.5.23 JIT custom all-reduce: the default cap of its workspaces
# (SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB = 16 MiB), and the conservative thresholds it
# uses for every arch without a tuned table (one-shot up to 1 MiB, two-shot to 16 MiB).
CUSTOM_AR_V2_MAX_BYTES = 16 * MIB
CUSTOM_AR_DEFAULT_ONE_SHOT_BYTES = 1 * MIB
CUSTOM_AR_DEFAULT_TWO_SHOT_BYTES = 16 * MIB
# The symmetric-memory buffer is allocated once per group; nothing in the table or an
# override file may ask for more than this (checked where profiles are built).
SYMM_MEM_MAX_BYTES_LIMIT = SYMM_MEM_MAX_MIB * MIB
FUSION_REQUESTS = ("auto", "trtllm", "mnnvl", "cutedsl")
# Why a tier that lists the world sizes fusion is turned on at (``allreduce_fusion_auto_world_sizes``)
# leaves it off elsewhere unless asked: the evidence for SM12x over PCIe, where the list is empty.
FUSION_AUTO_EVIDENCE = ("auto-selecting trtllm on single-node SM120/SM121 regressed at TP 4 over PCIe "
                        "(sgl-project/sglang#32330), and 8x RTX PRO 6000 at TP 8 gained 92.6 -> 92.7 tok/s with "
                        "fusion (a user's report, SGLang v0.5.9)")


@dataclass(frozen=True)
class SymmMemDecision:
    enabled: bool
    max_bytes: int
    algorithm: Optional[str]  # "multimem" | "two_shot" | None
    reason: str
    evidence: Tuple[str, ...] = ()  # ledger ids where this differs from stock SGLang (arch/evidence.py)


@dataclass(frozen=True)
class CustomAllReduceDecision:
    enabled: bool
    max_bytes: int
    table: Optional[str]  # which tuned v2 table; None: the conservative default
    reason: str


@dataclass(frozen=True)
class FusionDecision:
    enabled: bool
    backend: Optional[str]  # "trtllm" | "mnnvl" | "cutedsl" | None
    reason: str
    dropped: Tuple[Tuple[str, str], ...] = ()  # (candidate, why not): the tier's backends left out
    evidence: Tuple[str, ...] = ()


@dataclass(frozen=True)
class PcieIpcDecision:
    enabled: bool  # on by default: SGLang's SGLANG_ENABLE_PCIE_IPC_ALLREDUCE unset
    reason: str
    evidence: Tuple[str, ...] = ()


def _check_world_size(world_size: int) -> None:
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"invalid world size {world_size!r}; accepted: an integer >= 1")


def _check_nnodes(nnodes: int) -> None:
    if isinstance(nnodes, bool) or not isinstance(nnodes, int) or nnodes < 1:
        raise ValueError(f"invalid node count {nnodes!r}; accepted: an integer >= 1")


def _lent(res: Resolution) -> str:
    """How a value reached the device: '' for its own tier, else the fallback named."""
    if res.match in ("exact", "override"):
        return ""
    return f" ({res.match} fallback from {res.requested}: the nearest tier's bound, as --enable-torch-symm-mem asks)"


def torch_symm_mem(res: Resolution, topology: Topology, world_size: int, nnodes: int = 1) -> SymmMemDecision:
    """Max payload and kernel for ``--enable-torch-symm-mem``.

    With NVLink multicast, SGLang's own table (``torch_symm_mem``): multimem where the tier
    lists the world size, two-shot otherwise.  Without multicast SGLang turns the
    communicator off; the registry keeps torch's two-shot kernel (peer-to-peer access only)
    where the tier has a two-shot bound measured without multicast (``symm_mem_two_shot``,
    with its evidence), over NVLink as measured (over PCIe only from the node's own
    ``tune`` override), on one node (peer access does not span nodes), and only there.
    """
    _check_world_size(world_size)
    _check_nnodes(nnodes)
    tier = res.resolved
    if world_size == 1:
        return SymmMemDecision(False, 0, None, "one GPU: nothing to all-reduce")
    if res.match == "portable":
        return SymmMemDecision(False, 0, None, res.reason)
    if topology.multicast:
        table = res.profile.torch_symm_mem
        if not table:
            return SymmMemDecision(False, 0, None, f"tier {tier} has no torch symmetric-memory sizes")
        if world_size not in table:
            return SymmMemDecision(False, 0, None, f"world size {world_size} has no size on tier {tier} "
                                                   f"(sizes for {_span(tuple(sorted(table)))})")
        max_bytes = _bounded(table[world_size])
        if not max_bytes:
            return SymmMemDecision(False, 0, None, f"tier {tier}: the size for world size {world_size} is outside "
                                                   f"1 B-{SYMM_MEM_MAX_BYTES_LIMIT // MIB} MiB")
        if world_size in res.profile.symm_mem_multimem_world_sizes:
            return SymmMemDecision(True, max_bytes, "multimem", f"tier {tier}, world size {world_size}, "
                                                                f"{topology.name} has multicast: multimem{_lent(res)}")
        return SymmMemDecision(True, max_bytes, "two_shot",
                               f"tier {tier}, world size {world_size}, {topology.name} (multimem not tuned for world "
                               f"size {world_size}): two-shot over P2P{_lent(res)}")
    bounds = res.profile.symm_mem_two_shot
    # a node's own override carries its own measurement (its sources), not the shipped entry's
    evidence = res.profile.evidence_for("symm_mem_two_shot") if res.match != "override" else ()
    if not bounds:
        return SymmMemDecision(False, 0, None, f"{topology.name} has no NVLink multicast and tier {tier} has no "
                                               f"two-shot bound measured without it: off, as stock SGLang "
                                               f"(`sglang-arch tune collectives` on the node measures one)")
    if nnodes > 1:
        return SymmMemDecision(False, 0, None, f"{nnodes} nodes without NVLink multicast: two-shot needs "
                                               f"peer-to-peer access, which does not span nodes")
    if not topology.p2p:
        return SymmMemDecision(False, 0, None, f"topology {topology.name} has no peer-to-peer access")
    if not topology.full_nvlink and res.match != "override":
        return SymmMemDecision(False, 0, None, f"{topology.name}: tier {tier}'s two-shot bound was measured over "
                                               f"NVLink; nothing measured torch's two-shot kernel over PCIe: off, as "
                                               f"stock SGLang (`sglang-arch tune collectives` on the node measures "
                                               f"one)")
    if world_size not in bounds:
        return SymmMemDecision(False, 0, None, f"no two-shot bound for world size {world_size} on tier {tier} "
                                               f"without multicast (measured: {_span(tuple(sorted(bounds)))}): "
                                               f"off, as stock SGLang")
    max_bytes = _bounded(bounds[world_size])
    if not max_bytes:
        return SymmMemDecision(False, 0, None, f"tier {tier}: the two-shot bound for world size {world_size} is "
                                               f"outside 1 B-{SYMM_MEM_MAX_BYTES_LIMIT // MIB} MiB")
    where = "measured on this node (override)" if res.match == "override" else "measured without multicast"
    return SymmMemDecision(True, max_bytes, "two_shot",
                           f"tier {tier}, world size {world_size}, {topology.name} (no multicast): two-shot over "
                           f"P2P below {_size(max_bytes)}, {where}; larger reductions stay on NCCL{_lent(res)}",
                           evidence)


def _bounded(nbytes: int) -> int:
    """``nbytes`` where it is a size the buffer may have, else 0 (profiles are checked when
    built; this guards hand-made ones)."""
    return nbytes if 0 < nbytes <= SYMM_MEM_MAX_BYTES_LIMIT else 0


def _size(nbytes: int) -> str:
    if nbytes % MIB == 0:
        return f"{nbytes // MIB} MiB"
    return f"{nbytes // 1024} KiB" if nbytes % 1024 == 0 else f"{nbytes} B"


# SGLang 0.5.23 pcie_ipc_ar.py: the world sizes its kernels build IPC channels for.
PCIE_IPC_WORLD_SIZES = (2, 4, 8)


def pcie_ipc(res: Resolution, topology: Topology, world_size: int, nnodes: int = 1) -> PcieIpcDecision:
    """Whether SGLang's FlashInfer PCIe-IPC all-reduce is on without being asked.

    Upstream it is opt-in (``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE``) and, once on, takes the
    reductions that fit its decode-sized workspace (the widest captured decode batch x the
    hidden size), after custom all-reduce and before everything else.  The registry turns it
    on where it was measured to win: the tier's ``pcie_ipc_world_sizes``, one node over PCIe
    with peer-to-peer access, the device's own tier (a fallback never turns a path on).
    The user's variable, set either way, always wins (the plugin's glue).
    """
    _check_world_size(world_size)
    _check_nnodes(nnodes)
    tier = res.resolved
    measured = res.profile.pcie_ipc_world_sizes
    off = "off unless SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1, as stock SGLang"
    if world_size == 1:
        return PcieIpcDecision(False, "one GPU: nothing to all-reduce")
    if world_size not in PCIE_IPC_WORLD_SIZES:
        return PcieIpcDecision(False, f"its kernels serve world sizes {_span(PCIE_IPC_WORLD_SIZES)}, not "
                                      f"{world_size}")
    if nnodes > 1:
        return PcieIpcDecision(False, f"{nnodes} nodes: peer-to-peer access does not span nodes; {off}")
    if not topology.p2p:
        return PcieIpcDecision(False, f"topology {topology.name} has no peer-to-peer access; {off}")
    if topology.full_nvlink:
        return PcieIpcDecision(False, f"{topology.name}: custom all-reduce serves NVLink nodes; the PCIe-IPC "
                                      f"kernels were measured on PCIe only; {off}")
    verdict = catalog.choice_runs("pcie_ipc", "flashinfer", res.identities)
    if not verdict.runs:
        return PcieIpcDecision(False, f"{verdict.reason}; {off}")
    if world_size not in measured:
        where = f"measured at TP {_span(measured)} only" if measured else "never measured on this tier"
        return PcieIpcDecision(False, f"tier {tier}: {where}; {off}")
    if res.match not in ("exact", "override"):
        return PcieIpcDecision(False, f"measured on tier {tier}, not on {res.requested} ({res.match} fallback): a "
                                      f"fallback lends limits, never turns a path on; {off}")
    evidence = res.profile.evidence_for("pcie_ipc_world_sizes")
    return PcieIpcDecision(True, f"tier {tier}, TP {world_size} on one {topology.name} node: on, with SGLang's "
                                 f"decode-sized workspace (prefill-sized reductions stay on NCCL), measured to win "
                                 f"here; SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=0 keeps it off", evidence)


# --- The all-reduce plan: which path takes a reduction of a given size ---------------------------
#
# SGLang tries its paths in a fixed order (``GroupCoordinator._resolve_outplace_all_reduce_method``):
# custom all-reduce, PCIe-IPC, quick all-reduce (ROCm only), mscclpp (--enable-mscclpp), torch
# symmetric memory (--enable-torch-symm-mem), NCCL.  A bound on an earlier path decides what the
# later ones see.  Two sizes stand for the two phases: a decode batch and a prefill chunk at a
# typical hidden size (the one SGLang's PCIe-IPC measurement used).
PLAN_HIDDEN = 6144
PLAN_DECODE_TOKENS = 64
PLAN_PREFILL_TOKENS = 8192
PLAN_PATHS = ("custom all-reduce", "PCIe-IPC", "quick all-reduce", "mscclpp", "torch symm mem", "NCCL")


@dataclass(frozen=True)
class PlanStep:
    path: str  # one of PLAN_PATHS
    on: bool
    admits: str  # which reductions it takes when on
    reason: str


@dataclass(frozen=True)
class AllReducePlan:
    steps: Tuple[PlanStep, ...]
    decode: str  # the path a decode-sized reduction takes
    prefill: str  # the path a prefill-sized reduction takes
    decode_bytes: int
    prefill_bytes: int


def plan_bytes(tokens: int) -> int:
    return tokens * PLAN_HIDDEN * 2  # bf16


def allreduce_plan(custom_ar_bytes: int, pcie_ipc_on: bool, symm_mem_bytes: int, symm_mem_kernel: Optional[str],
                   symm_mem_flag: bool = False, reasons: Optional[Dict[str, str]] = None) -> AllReducePlan:
    """The path each phase's reduction takes, in SGLang's dispatch order.

    ``custom_ar_bytes``: custom all-reduce's bound (0: off); ``pcie_ipc_on``: PCIe-IPC built
    (it takes the rows of a decode batch: its workspace is sized for the widest captured
    decode); ``symm_mem_bytes`` / ``symm_mem_kernel``: the symm-mem communicator's bound and
    kernel, used only with ``symm_mem_flag`` (--enable-torch-symm-mem).  Bounds are SGLang's
    strict ``size < bound``.
    """
    reasons = reasons or {}
    decode, prefill = plan_bytes(PLAN_DECODE_TOKENS), plan_bytes(PLAN_PREFILL_TOKENS)
    symm_on = symm_mem_flag and symm_mem_bytes > 0
    steps = (
        PlanStep("custom all-reduce", custom_ar_bytes > 0, f"< {_size(custom_ar_bytes)}" if custom_ar_bytes else "-",
                 reasons.get("custom all-reduce", "")),
        PlanStep("PCIe-IPC", pcie_ipc_on, "decode batches (its workspace: widest captured decode x hidden)",
                 reasons.get("PCIe-IPC", "")),
        PlanStep("quick all-reduce", False, "-", "ROCm only"),
        PlanStep("mscclpp", False, "-", "only with --enable-mscclpp"),
        PlanStep("torch symm mem", symm_on,
                 f"< {_size(symm_mem_bytes)} ({symm_mem_kernel})" if symm_on else "-",
                 reasons.get("torch symm mem", "") if symm_mem_flag else "only with --enable-torch-symm-mem"),
        PlanStep("NCCL", True, "every size", "the fallback"),
    )

    def taker(nbytes: int, is_decode: bool) -> str:
        if custom_ar_bytes and nbytes < custom_ar_bytes:
            return "custom all-reduce"
        if pcie_ipc_on and is_decode:
            return "PCIe-IPC"
        if symm_on and nbytes < symm_mem_bytes:
            return f"torch symm mem ({symm_mem_kernel})"
        return "NCCL"

    return AllReducePlan(steps, taker(decode, True), taker(prefill, False), decode, prefill)


def custom_allreduce(res: Resolution, topology: Topology, world_size: int) -> CustomAllReduceDecision:
    """SGLang's custom all-reduce: needs P2P, and full NVLink above two GPUs."""
    _check_world_size(world_size)
    table = res.profile.custom_ar_v2_table
    if world_size == 1:
        return CustomAllReduceDecision(False, 0, table, "one GPU: nothing to all-reduce")
    if res.match == "portable":
        return CustomAllReduceDecision(False, 0, None, res.reason)
    if not topology.p2p:
        return CustomAllReduceDecision(False, 0, table, f"topology {topology.name} has no peer-to-peer access")
    if world_size > 2 and not topology.full_nvlink:
        return CustomAllReduceDecision(False, 0, table, f"{world_size} GPUs on {topology.name}: above 2 GPUs it needs full NVLink")
    sizes = res.profile.custom_ar_v2_world_sizes
    if world_size not in sizes:
        return CustomAllReduceDecision(False, 0, table, f"world size {world_size} not in the {table or 'default'} table ({_span(sizes)})")
    which = f"tuned {table} table" if table else "conservative default thresholds"
    return CustomAllReduceDecision(True, CUSTOM_AR_V2_MAX_BYTES, table,
                                   f"tier {res.resolved}, world size {world_size} on {topology.name}: {which}")


def allreduce_fusion(res: Resolution, topology: Topology, world_size: int, nnodes: int = 1,
                     requested: str = "auto", cuda: Optional[Tuple[int, int]] = None,
                     explicit: bool = False) -> FusionDecision:
    """FlashInfer all-reduce + residual + RMSNorm fusion.

    Two questions: whether it runs when asked (``explicit``: --flashinfer-allreduce-fusion-backend,
    or a backend named in ``requested``; SGLang's gate and ``_resolve_backend``), and whether it
    is turned on unasked (SGLang's auto-enable pass: the default).  The second also needs the
    world size among the tier's ``allreduce_fusion_auto_world_sizes`` where the tier lists
    them: the ones measured to win (``sglang-arch tune fusion``).

    ``auto`` takes the tier's first backend; an explicit one must be listed for the
    tier; across nodes only the tier's multi-node backends; trtllm's IPC workspace needs
    P2P, mnnvl's (multi-node) NVLink workspace is a multicast buffer (FlashInfer 0.7.2's
    ``McastGPUBuffer``: ``SymmDeviceMemory`` with multicast, which refuses a device without it),
    so it needs NVLink multicast (``nvswitch``).
    A backend is a candidate only where the kernel catalog has its comm kernels for the
    device itself (FlashInfer generates them for named majors), so a fallback lends the
    tier's list, never a kernel.  ``cuda`` (torch's CUDA version), when given, must reach
    the tier's minimum for these kernels.
    """
    _check_world_size(world_size)
    _check_nnodes(nnodes)
    if requested not in FUSION_REQUESTS:
        raise ValueError(f"invalid fusion backend {requested!r}; accepted: {', '.join(FUSION_REQUESTS)}")
    tier = res.resolved
    backends = res.profile.allreduce_fusion
    if world_size == 1:
        return FusionDecision(False, None, "one GPU: nothing to all-reduce")
    if not backends:
        return FusionDecision(False, None, f"tier {tier} has no FlashInfer all-reduce fusion kernels")
    built = catalog.runnable("fusion", backends, res.identities)
    dropped = tuple((b, catalog.choice_runs("fusion", b, res.identities).reason) for b in backends if b not in built)
    if not built:
        reasons = "; ".join(why for _, why in dropped)
        return FusionDecision(False, None, f"{res.match} match of tier {tier}: {reasons}", dropped)
    backends = list(built)  # the tier's order, less what has no build for the device
    need = res.profile.allreduce_fusion_min_cuda
    if cuda is not None and need is not None and cuda < need:
        return FusionDecision(False, None, f"fusion on tier {tier} needs torch CUDA >= {need[0]}.{need[1]} "
                                           f"(found {cuda[0]}.{cuda[1]})", dropped)
    if nnodes > 1:
        candidates = [b for b in backends if b in res.profile.allreduce_fusion_multi_node]
        where = f"{nnodes} nodes"
    else:
        candidates = list(backends)
        where = "one node"
    if requested != "auto":
        candidates = [b for b in candidates if b == requested]
    if not candidates:
        listed = ", ".join(res.profile.allreduce_fusion_multi_node if nnodes > 1 else backends) or "none"
        return FusionDecision(False, None, f"{requested} fusion is not available on tier {tier} with {where} (available: {listed})", dropped)
    choice = candidates[0]
    if choice == "trtllm" and not topology.p2p:
        return FusionDecision(False, None, f"trtllm fusion needs peer-to-peer access; {topology.name} has none",
                              dropped + (("trtllm", f"needs peer-to-peer access; {topology.name} has none"),))
    if choice == "mnnvl" and not topology.multicast:
        why = f"needs NVLink multicast (its workspace is a multicast buffer); {topology.name} has none"
        return FusionDecision(False, None, f"mnnvl fusion {why}", dropped + (("mnnvl", why),))
    here = f"tier {tier}, {world_size} GPUs on {topology.name}, {where}"
    measured = res.profile.allreduce_fusion_auto_world_sizes
    evidence = res.profile.evidence_for("allreduce_fusion")
    if explicit or requested != "auto" or measured is None:
        return FusionDecision(True, choice, f"{here}: {choice}", dropped, evidence)
    if world_size in measured:
        return FusionDecision(True, choice, f"{here}: {choice}, on by default: fusion won at world size "
                                            f"{world_size} on this node ({res.match} of tier {tier}: {res.reason})",
                              dropped, evidence)
    listed = ", ".join(str(w) for w in measured) or "none"
    return FusionDecision(False, None, f"{here}: off by default ({choice} runs when asked: "
                                       f"--flashinfer-allreduce-fusion-backend {choice}); no measurement shows a "
                                       f"gain here: "
                                       f"{FUSION_AUTO_EVIDENCE}; it is turned on where `sglang-arch tune fusion` on "
                                       f"the node found it faster at this world size (measured wins: {listed})",
                          dropped, evidence)


def _span(sizes: Tuple[int, ...]) -> str:
    return ", ".join(str(s) for s in sizes)


# SGLang 0.5.23 srt/models/beam.py, Beam's own fused all-reduce + norm (CustomAllReduceV2's
# push workspace and a kernel SGLang JIT-compiles for the device, beam_all_reduce.py):
# ``BeamModel._all_reduce_limits`` takes it for TP 2/4/8 on majors 9 and 10 up to the
# measured (attention, top-k MoE) token limits below (major 9 per TP size, major 10 64/64,
# capped at 32/32 on (10, 3) with TP 4), and ``_FLASHINFER_AR_TOKEN_BAND`` the token band
# where FlashInfer's MNNVL all-reduce beats it (measured on GB300 TP4).  Keyed here by the
# tier: a GPU the table does not know takes its tier's values, where the kernel runs.
_HOPPER_BEAM_LIMITS = {2: (32, 32), 4: (32, 64), 8: (1, 16)}
_BLACKWELL_BEAM_LIMITS = {2: (64, 64), 4: (64, 64), 8: (64, 64)}
BEAM_AR_LIMITS = {
    (9, 0): _HOPPER_BEAM_LIMITS,
    (10, 0): _BLACKWELL_BEAM_LIMITS,
    (10, 3): {**_BLACKWELL_BEAM_LIMITS, 4: (32, 32)},
    (10, 7): _BLACKWELL_BEAM_LIMITS,
}
BEAM_FLASHINFER_BAND = {(10, 3): {4: (96, 640)}}


@dataclass(frozen=True)
class TokenLimits:
    value: Optional[Tuple[int, int]]  # None: not here
    reason: str


def _measured(res: Resolution, tp_size: int, table: Dict[Tuple[int, int], Dict[int, Tuple[int, int]]],
              missing: str, decision: str, choice: str) -> Tuple[Optional[Tuple[int, int]], str]:
    """The tier's measured pair for ``tp_size`` where the kernel it feeds runs on the device."""
    tier = (res.resolved.major, res.resolved.minor)
    where = f"{tier_where(res)}, TP {tp_size}"
    pair = table.get(tier, {}).get(tp_size)
    if pair is None:
        return None, f"{where}: {missing}"
    verdict = catalog.choice_runs(decision, choice, res.identities)
    if not verdict.runs:
        return None, f"{where}: {verdict.reason}"
    return pair, where


def beam_all_reduce_limits(res: Resolution, tp_size: int) -> TokenLimits:
    """Beam's fused all-reduce + norm: (attention, top-k MoE) token limits for ``tp_size``."""
    limits, why = _measured(res, tp_size, BEAM_AR_LIMITS, "no measured limits", "custom_ar", "jit_v2")
    if limits is None:
        return TokenLimits(None, why)
    return TokenLimits(limits, f"{why}: attention up to {limits[0]}, top-k MoE up to {limits[1]} tokens")


def beam_flashinfer_band(res: Resolution, tp_size: int) -> TokenLimits:
    """The token band Beam hands to FlashInfer's MNNVL all-reduce for ``tp_size``."""
    band, why = _measured(res, tp_size, BEAM_FLASHINFER_BAND, "no measured band", "fusion", "mnnvl")
    if band is None:
        return TokenLimits(None, why)
    return TokenLimits(band, f"{why}: FlashInfer MNNVL all-reduce for {band[0]}-{band[1]} tokens")


# SGLang 0.5.23 srt/layers/communication/k3_sp_collective.py, Kimi K3's sequence-parallel
# reduce-scatter / all-gather (SGLANG_K3_SP_COLLECTIVE): ``_init_state`` enables it only on
# SM 10.0 and 10.3 (``device_sm not in (100, 103)``: "requires SM100/SM103", its tuning
# tables are GB200 / GB300 ones), then only where a checked-in dispatch table names the
# exact device (by name) and world size; NCCL otherwise.  The kernel is JIT-compiled by
# SGLang for the device (multimem: SM90 and newer), so the SM band is a choice of where the
# collective was tuned and validated, not of where it builds: a decision.  The registry
# applies the band to the tier, keeps it where the kernel has a build for the device, and
# leaves the per-device table check to SGLang.
K3_SP_SMS = (100, 103)
K3_SP = "k3_sp_collective"  # the kernel catalog's name for the collective's kernels


@dataclass(frozen=True)
class K3SpDecision:
    allowed: bool  # the SP collective may be enabled (SGLang's table and topology checks follow)
    # The SM _init_state's band test (and its message) reads: the tier's where allowed, else
    # the device's own where that is outside the band, else 0 (as SGLang's probe without a GPU).
    band_sm: int
    reason: str


def _k3_band(res: Resolution, decision: str, kind: str, band: str, otherwise: str, then: str) -> K3SpDecision:
    """Kimi K3's SM 10.0 / 10.3 band, asked of the tier: inside it where the catalog runs the
    kernels of ``decision`` / ``kind`` on the device (``band``: what the band enables;
    ``otherwise``: what runs outside it; ``then``: what SGLang checks after it)."""
    tier = res.resolved
    where = f"tier {tier} ({res.match})"
    own = res.requested.sm
    refused = own if own not in K3_SP_SMS else 0
    if tier.sm not in K3_SP_SMS:
        return K3SpDecision(False, refused, f"{where}: SM {tier.sm} is outside {band} (SM 10.0, 10.3): {otherwise}")
    verdict = catalog.choice_runs(decision, kind, res.identities)
    if not verdict.runs:
        return K3SpDecision(False, refused, f"{where}: SM {tier.sm} is in {band}, but on {res.requested} "
                                            f"{verdict.reason}: {otherwise}")
    return K3SpDecision(True, tier.sm, f"{where}: SM {tier.sm} is in {band} (then {then})")


def k3_sp_collective(res: Resolution) -> K3SpDecision:
    """Whether Kimi K3's SP collective may be enabled on this device's tier."""
    return _k3_band(res, K3_SP, "sp", "the SP collective's band", "NCCL", "SGLang's per-device table decides")


# SGLang 0.5.23 srt/layers/communication/k3_ar_fusion.py, Kimi K3's fused all-reduce
# (SGLANG_K3_AR_FUSION): unset, ``_get_state`` auto-probes it only where ``get_device_sm()``
# is 100 or 103 ("Auto-enabled on SM100/SM103 when CustomAllReduceV2 with multicast is
# available"); set, it is tried anywhere.  The band is a preference (its kernels are JIT-built
# for the device, SM90+), so the tier's SM decides it where the catalog runs the kernels.
K3_AR_FUSION = "k3_ar_fusion"  # the kernel catalog's name for the fusion's kernels


def k3_ar_fusion(res: Resolution) -> K3SpDecision:
    """Whether Kimi K3's fused all-reduce is auto-probed on this device's tier (``band_sm``:
    what ``get_device_sm()`` answers the probe; 0 or the device's own SM outside the band)."""
    return _k3_band(res, K3_AR_FUSION, "fused", "the K3 all-reduce fusion's auto band", "the regular all-reduce",
                    "SGLang's own checks: no symm-mem, no EP all-to-all, multicast")


# --- DeepSeek-V4.1's plane at TP 4: the custom push plane or FlashInfer's fusion ----------------
#
# ``_flashinfer_allreduce_fusion_auto_enable`` (``arg_groups/overrides.py:978-985``) does not
# auto-enable FlashInfer's all-reduce fusion for DeepSeek-V4.1 (hidden 5120) at TP 4 on one node
# on ``is_blackwell``: "V4.1 TP4 uses the custom push plane for decode and fused MoE finalize"
# (CustomAllReduceV2's push plane, ``layers/layer_boundary/fusions/custom_all_reduce_fusion.py``,
# JIT-compiled for the device).  Either plane runs where the fusion pass is reached, so which one
# is a decision: SGLang's Blackwell rule, asked of the tier.


@dataclass(frozen=True)
class PlanePreference:
    custom_plane: bool  # V4.1 TP 4 keeps its custom push plane (FlashInfer fusion not auto-enabled)
    reason: str


def dsv41_custom_plane(res: Resolution, cuda: Optional[Tuple[int, int]] = (13, 0)) -> PlanePreference:
    """Whether DeepSeek-V4.1 at TP 4 keeps the custom push plane over FlashInfer's fusion."""
    on = tier_fact(res, "is_blackwell", cuda)
    return PlanePreference(on, f"{tier_where(res)}: {'Blackwell' if on else 'not Blackwell'}: DeepSeek-V4.1 at TP 4 "
                               f"{'keeps the custom push plane' if on else 'may take FlashInfer fusion'}")
