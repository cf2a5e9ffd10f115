"""Torch symmetric memory and custom all-reduce v2, as the registry decides them.

``init_torch_symm_mem`` is ``TorchSymmMemCommunicator.__init__`` with the registry's
decision in place of ``TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES`` and the multicast check:
the size comes from the tier's table (keyed, like SGLang's, by the device's major), the
multimem kernel is chosen per instance only where the topology has NVLS multicast, and a
group without multicast keeps the two-shot kernel, which needs peer-to-peer access only.
``all_reduce_configs`` names which of SGLang's tuned v2 tables a tier uses.

Why the communicator is initialised here rather than steered: the alternative, installing
the registry's table in SGLang's module, running SGLang's ``__init__`` and then undoing
its refusal of a group without multicast, allocates and rendezvouses the buffer twice (a
collective call on every rank) and leaves the decision split between SGLang's body and a
repair after it.  Initialising from the registry in one place keeps the decision whole
and SGLang's body untouched as the fallback: the plugin's AROUND hook runs SGLang's
original whenever this answers ``None``.  The registry's table is still published in SGLang's two modules, so whatever reads
``TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES`` sees the sizes the communicator uses.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Dict, Optional, Tuple

from ....arch.policies.collectives import (
    CUSTOM_AR_DEFAULT_ONE_SHOT_BYTES,
    CUSTOM_AR_DEFAULT_TWO_SHOT_BYTES,
    SymmMemDecision,
)
from ....arch.runtime import MachineContext
from . import KEEP, Answers, Constants, device_context, fail_open, machine_changed, per_machine, routed_context

logger = logging.getLogger(__name__)

_SYMM_MEM = "sglang.srt.distributed.device_communicators.torch_symm_mem"
_ALL_REDUCE_UTILS = "sglang.srt.distributed.device_communicators.all_reduce_utils"
_PCIE_IPC = "sglang.srt.distributed.device_communicators.pcie_ipc_ar"
_CUSTOM_AR_V2 = (
    "sglang.srt.distributed.device_communicators.configs.custom_all_reduce_v2"
)
MIB = 1024 * 1024


@fail_open
def init_torch_symm_mem(comm: Any, group: Any, device: Any) -> Optional[bool]:
    """Initialise ``comm`` (a ``TorchSymmMemCommunicator``) from the registry.

    True: done, the caller returns.  None: no NVIDIA GPU; SGLang's own ``__init__``
    runs.  The decision is taken on the node's detected topology (the same on every rank,
    so every rank allocates and rendezvouses alike, or none does; a node without
    peer-to-peer access never reaches the rendezvous, which crashes there on some PCIe
    GPUs); after the rendezvous the handle says whether multicast really works, and the
    decision for that is kept (without multicast: two-shot at its own measured bound, or
    off as SGLang).  ``comm.multicast`` records it for the consumers that need multicast
    (Inkling's kernels), which take their other path where it is False.
    """
    ctx = routed_context()
    if ctx is None:
        return None
    module = sys.modules[_SYMM_MEM]
    publish_symm_mem_table(ctx)
    comm.disabled = True
    comm.buffer = None
    comm.max_size = 0
    comm.multicast = False
    if not module.torch_symm_mem_available:
        return True

    import torch

    if isinstance(device, int):
        device = torch.device(f"cuda:{device}")
    elif isinstance(device, str):
        device = torch.device(device)
    torch.cuda.set_device(device)
    comm.dtype = torch.bfloat16
    comm.device = device
    comm.group = group
    comm.world_size = module.dist.get_world_size(group)
    comm.device_capability = torch.cuda.get_device_capability(device)[0]
    max_size, decision = _size_and_kernel(ctx, comm)
    if not max_size:
        logger.info("TorchSymmMemCommunicator: off (%s)", decision.reason)
        return True
    if decision.algorithm == "multimem" or ctx.topology.multicast:
        max_size = _with_inkling_floor(module, max_size)
    comm.buffer = module.torch_symm_mem.empty(
        max_size // comm.dtype.itemsize, device=comm.device, dtype=comm.dtype
    )
    handle = module.torch_symm_mem.rendezvous(comm.buffer, group.group_name)
    comm.multicast = handle.multicast_ptr != 0  # what SGLang's multicast-only consumers read
    if comm.multicast != ctx.topology.multicast:
        # The handle knows better than detection (multicast turned off by a variable, or a
        # group that spans fabrics): the decision for what the handle says.
        max_size, decision = _size_and_kernel(ctx, comm, comm.multicast, max_size)
    if not max_size:
        logger.warning(
            "TorchSymmMemCommunicator: torch symmetric memory "
            "multicast operations are not supported (%s).",
            decision.reason,
        )
        comm.buffer = None
        return True
    comm.max_size = max_size
    comm.disabled = False
    note_two_shot_communicator(comm)
    logger.info(
        "TorchSymmMemCommunicator: %s, max %d bytes (%s)",
        decision.algorithm,
        comm.max_size,
        decision.reason,
    )
    return True


def _size_and_kernel(ctx: MachineContext, comm: Any, multicast: Optional[bool] = None,
                     allocated: Optional[int] = None) -> Tuple[int, Any]:
    """The registry's bound for ``comm`` (0: off) and its decision, on the node's topology or
    with ``multicast`` as the rendezvous found it (the bound then at most the ``allocated``
    buffer); sets the instance's multimem list, so the kernel choice on every all-reduce
    stays a look-up.  A group larger than the node spans nodes."""
    nnodes = 1 if comm.world_size <= len(ctx.node.gpus) else 2
    decision = ctx.symm_mem(comm.world_size, multicast=multicast, nnodes=nnodes)
    if comm.device_capability not in {c.major for c in ctx.node.capabilities}:
        decision = SymmMemDecision(False, 0, None, f"major {comm.device_capability} is not a GPU of this node")
    comm._WORLD_SIZES_MULTIMEM = {
        comm.device_capability: (
            [comm.world_size] if decision.algorithm == "multimem" else []
        )
    }
    size = decision.max_bytes if decision.enabled else 0
    return (size if allocated is None else min(size, allocated)), decision


def publish_symm_mem_table(ctx: MachineContext) -> None:
    """Set ``TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES`` to the registry's table.

    In ``all_reduce_utils``, which defines it, and in ``torch_symm_mem``, which holds
    its own binding of it: both then read as the sizes the communicator uses.
    """
    table = ctx.symm_mem_table()
    for name in (_SYMM_MEM, _ALL_REDUCE_UTILS):
        module = sys.modules.get(name)
        if module is not None:
            module.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES = table


def _with_inkling_floor(module: Any, max_size: int) -> int:
    """SGLang's own floors for its JIT all-reduce buffer, over the registry's size."""
    if module.envs.SGLANG_OPT_USE_INKLING_CUSTOM_AR.get():
        max_size = max(max_size, 256 * MIB)
        if (
            module.get_exec().comm.enable_scattered_sconv
            or module.envs.SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV.get()
        ):
            max_size = max(max_size, 512 * MIB)
    return max_size


@fail_open
def pcie_ipc_eligible(group_name: Optional[str], world_size: int, deterministic: bool) -> Optional[bool]:
    """``pcie_ipc_ar.eligible_group``: whether ``GroupCoordinator`` builds SGLang's PCIe-IPC
    all-reduce for a group.

    None (SGLang's own rule) without an NVIDIA GPU, where the user set
    ``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE`` either way, and where the registry does not turn it
    on (SGLang's rule then answers off: the variable is unset).  Where it does (the tier's
    measured TP sizes, one node over PCIe with peer-to-peer access), SGLang's other
    conditions stand: its group names, and off in deterministic mode with SGLang's warning.
    The workspace stays SGLang's decode-sized one.
    """
    ctx = routed_context()
    if ctx is None or ctx.resolution is None:
        return None
    module = sys.modules[_PCIE_IPC]
    if module.envs.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE.is_set():
        return None
    nnodes = 1 if world_size <= len(ctx.node.gpus) else 2
    decision = ctx.pcie_ipc(world_size, nnodes)
    if not decision.enabled or group_name not in module._ELIGIBLE_GROUP_NAMES:
        return None
    if deterministic:
        module._warn_deterministic_wins()
        return False
    logger.info("FlashInfer PCIe-IPC all-reduce on by default: %s", decision.reason)
    return True


@fail_open
def all_reduce_configs() -> Optional[Dict[int, Any]]:
    """The custom all-reduce v2 configs of this tier.

    None: no NVIDIA GPU; SGLang picks by the device's major.
    """
    ctx = routed_context()
    if ctx is None or ctx.resolution is None:
        return None
    configs = sys.modules[_CUSTOM_AR_V2]

    import torch

    num_sm = torch.cuda.get_device_properties().multi_processor_count
    table = ctx.custom_ar_table()
    if table is not None:
        return getattr(configs, f"_{table}_configs")(num_sm)
    return _default_configs(
        configs, num_sm, ctx.resolution.profile.custom_ar_v2_world_sizes
    )


def _default_configs(configs: Any, num_sm: int, world_sizes: Any) -> Dict[int, Any]:
    """SGLang's conservative v2 thresholds, for each of ``world_sizes``."""
    heuristic = configs.Heuristic(
        CUSTOM_AR_DEFAULT_ONE_SHOT_BYTES,
        CUSTOM_AR_DEFAULT_ONE_SHOT_BYTES,
        CUSTOM_AR_DEFAULT_TWO_SHOT_BYTES,
    )
    default = configs.AllReduceConfig(
        graph=heuristic,
        eager=heuristic,
        num_push_blocks=num_sm,
        num_pull_blocks=num_sm,
        num_mc_blocks=None,
    )
    return {world_size: default for world_size in world_sizes}


# --- Inkling's symmetric-memory consumers (srt/models/inkling_common/kernels/comm.py) ---


class GroupWithoutSymmMem:
    """A process group (SGLang's ``GroupCoordinator``) seen without its torch
    symmetric-memory communicator: ``torch_symm_mem_comm`` is None, ``world_size`` the
    group's, every other attribute the group's own (its ``all_reduce``,
    ``reduce_scatter_tensor`` and ``all_gather`` are the group's bound methods, so they
    still take the two-shot communicator where it applies)."""

    torch_symm_mem_comm = None

    def __init__(self, group: Any) -> None:
        self.__dict__["_group"] = group
        self.__dict__["world_size"] = group.world_size  # read on every call: no look-up through the group

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.__dict__["_group"], name)
        if callable(value):  # a bound method of the group: kept, so the next read is a plain look-up
            self.__dict__[name] = value  # (a miss costs an AttributeError raised and caught: ~2 us)
        return value


# Whether init_torch_symm_mem kept an enabled communicator in this process at a world size
# Inkling's multicast consumers read: without multicast ("made", the two-shot kernel's), and
# with it.
_two_shot = {"made": False, "multicast_made": False}


# The world sizes at which Inkling's consumers read the communicator at all (comm.py's
# ``_INKLING_AR_WORLD_SIZES``; its sconv gates take 4 and 8 of them): elsewhere each takes its
# non-multicast path by itself.
INKLING_WORLD_SIZES = (4, 6, 8)


def note_two_shot_communicator(comm: Any) -> None:
    """``comm`` was made by ``init_torch_symm_mem``: where it is enabled at a world size
    Inkling's multicast consumers read it at, note whether it has multicast.  Once one
    without multicast exists the consumers decide again (``inkling_consumer_settled``); at
    any other world size they never read it."""
    if comm.disabled or getattr(comm, "world_size", None) not in INKLING_WORLD_SIZES:
        return
    key = "made" if getattr(comm, "multicast", True) is False else "multicast_made"
    if not _two_shot[key]:
        _two_shot[key] = True
        if _two_shot["made"]:
            machine_changed()


# What each Inkling consumer is settled to in a process whose communicators (at Inkling's
# world sizes) all lack multicast: what it does on a disabled communicator, whatever group
# it is given.  Six answer one constant there on every path (None, or False), so their
# name answers it; the all-reduce's disabled path is the group's own all-reduce, so it is
# SGLang's body with ``_INKLING_AR_WORLD_SIZES`` (read in the one ``and`` chain beside
# ``comm.disabled``) read as no world size.  Each is tested against SGLang's own functions.
_WITHOUT_MULTICAST = {
    "ensure_inkling_ar_resources": Answers(None),
    "ar_sconv_norm_fusable": Answers(False),
    "get_ar_buffer": Answers(None),
    "_symm_mem_comm": Answers(None),
    "scattered_ar_sconv_fusable": Answers(False),
    "fullwidth_ar_sconv_fusable": Answers(False),
    "symm_mem_all_reduce": Constants(_INKLING_AR_WORLD_SIZES=()),
}


def inkling_consumer_settled(original: Any) -> Any:
    """What an Inkling multicast consumer is bound to once decided (``routing.settle``).

    - No communicator without multicast made in this process (each group's then has
      multicast, is off, or is SGLang's: the view answers ``None`` for all): SGLang's own
      function.
    - Only communicators without multicast (a node without NVLS multicast: the fabric's
      fact, the same for every group of the node): what SGLang's function does on a
      disabled communicator (``_WITHOUT_MULTICAST``), at no per-call cost.
    - Both (not seen on one node; tests make it): the hook, which views each group."""
    if not _two_shot["made"]:
        return original
    settled = _WITHOUT_MULTICAST.get(getattr(original, "__name__", ""))
    return KEEP if _two_shot["multicast_made"] or settled is None else settled


_views: Dict[int, Tuple[Any, GroupWithoutSymmMem]] = {}  # id(group) -> (group, its view), built once


@fail_open
def group_without_multicast(group: Any) -> Optional[GroupWithoutSymmMem]:
    """The group as Inkling's multicast consumers must see it (the ``viewed`` form).

    SGLang 0.5.23's Inkling kernels read "the group's symmetric-memory communicator is
    enabled (and the world size 4, 6 or 8)" as "NVLink multicast is available" and then
    call ``torch.ops.symm_mem.multimem_*`` or build resources from ``multicast_ptr``.  A
    communicator the plugin keeps enabled for torch's two-shot kernel
    (``init_torch_symm_mem``: ``comm.multicast`` False) has none, so those readers see the
    group without it and take the path stock SGLang takes when the communicator is
    disabled (NCCL's collectives through the group, no custom-AR buffer, no fused
    kernels).  ``None`` (SGLang reads the group itself) wherever the communicator has
    multicast, is off, or was not made by the plugin (no ``multicast`` attribute).

    Asked per collective: two attribute reads where nothing changes; the view is built
    once per group."""
    comm = getattr(group, "torch_symm_mem_comm", None)
    if comm is None or getattr(comm, "multicast", True) is not False or comm.disabled:
        return None
    entry = _views.get(id(group))
    if entry is None or entry[0] is not group:
        entry = _views[id(group)] = (group, GroupWithoutSymmMem(group))
    return entry[1]


# --- Beam's fused all-reduce + norm (srt/models/beam.py) ---

_BEAM = "sglang.srt.models.beam"
_HIDDEN = 5120  # Beam's hidden size, the only one its fused kernel is built for
_MAX_ROWS = 64  # the most rows the fused kernel takes (beam.py _all_reduce_limits)
_beam_decided: Dict[int, Tuple[Any, Optional[Tuple[int, int]]]] = {}


@fail_open
def beam_all_reduce_limits(model: Any, hidden_states: Any) -> Optional[tuple]:
    """``BeamModel._all_reduce_limits`` (the ``decides`` form: ``(answer,)``, the answer
    ``None`` when the fused path does not apply; ``None`` itself: SGLang decides).

    SGLang's eligibility checks on the input, the parallel layout and the MoE, with the
    capability-keyed limits (majors 9 and 10, the (10, 3) TP 4 cap) replaced by the
    registry's decision for the tier.  None (SGLang decides) without an NVIDIA GPU."""
    ctx = device_context()
    if ctx is None:
        return None
    beam = sys.modules[_BEAM]
    torch = beam.torch
    if not hidden_states.is_cuda or torch.compiler.is_compiling():
        return (None,)
    rows, hidden = hidden_states.shape[0], hidden_states.shape[1]
    if (
        hidden_states.dtype != torch.bfloat16
        or not hidden_states.is_contiguous()
        or hidden_states.data_ptr() % 16 != 0
        or hidden != _HIDDEN
        or not 0 < rows <= _MAX_ROWS
    ):
        return (None,)
    parallel = beam.get_parallel()
    # asked every forward: decided once per machine and TP size
    limits = per_machine(_beam_decided, ctx, parallel.tp_size,
                         lambda: ctx.beam_all_reduce_limits(parallel.tp_size).value)
    if (
        limits is None
        or beam.get_forward().sp_active
        or not beam._beam_owns_tp_boundaries()
    ):
        return (None,)
    return (_beam_token_limits(model, limits, rows),)


# SGLang 0.5.23 BeamModel._all_reduce_limits's own limits: (attention, top-k) by TP size on
# major 9, (64, 64) on major 10, capped at 32 on (10, 3) at TP 4; none elsewhere.
_SGLANG_BEAM_SM90 = {2: (32, 32), 4: (32, 64), 8: (1, 16)}


def sglang_beam_limits(capability: Tuple[int, int], tp_size: int) -> Optional[Tuple[int, int]]:
    """The limits SGLang's ``_all_reduce_limits`` applies on a device of ``capability``."""
    if tp_size not in (2, 4, 8) or capability[0] not in (9, 10):
        return None
    limits = _SGLANG_BEAM_SM90[tp_size] if capability[0] == 9 else (64, 64)
    if tuple(capability) == (10, 3) and tp_size == 4:
        limits = (min(limits[0], 32), min(limits[1], 32))
    return limits


def beam_limits_settled(original: Any) -> Any:
    """What ``BeamModel._all_reduce_limits`` is bound to once decided (``routing.settle``):
    SGLang's own where the registry's limits for this device are SGLang's at every TP size,
    else the hook (the limits differ per TP size, read per call)."""
    ctx = device_context()
    if ctx is None:
        return original
    own = ctx.resolution.requested
    same = all(_limits_tuple(ctx.beam_all_reduce_limits(tp).value) == sglang_beam_limits((own.major, own.minor), tp)
               for tp in _BEAM_TP_SIZES)
    return original if same else KEEP


def _limits_tuple(limits: Any) -> Optional[Tuple[int, int]]:
    return None if limits is None else tuple(limits)


_BEAM_TP_SIZES = range(1, 65)


def _beam_token_limits(model: Any, limits: tuple, rows: int) -> Optional[tuple]:
    """SGLang's MoE and row checks on the limits the tier allows."""
    beam = sys.modules[_BEAM]
    parallel = beam.get_parallel()
    attention_max_tokens, topk_max_tokens = limits
    if (
        not model.fuse_moe_all_reduce
        or parallel.moe_ep_size != 1
        or parallel.moe_tp_size != parallel.tp_size
        or beam.should_skip_post_experts_all_reduce(is_tp_path=True)
    ):
        topk_max_tokens = 0
    if rows > max(attention_max_tokens, topk_max_tokens):
        return None
    return attention_max_tokens, topk_max_tokens


# --- Kimi K3's sequence-parallel collective (srt/layers/communication/k3_sp_collective.py) ---

@fail_open
def k3_sp_collective_sm() -> Optional[int]:
    """What ``get_device_sm()`` answers while ``_init_state`` reads it for the SP collective's
    band (the ``scoped`` form): the registry's SM (policies/collectives.k3_sp_collective:
    the tier's where the collective may be enabled, else one outside the band).  None
    (SGLang's probe) without an NVIDIA GPU.  The device is the one SGLang's probe reads (no
    platform override reaches ``utils.common.get_device_sm``)."""
    ctx = device_context()
    if ctx is None:
        return None
    return ctx.k3_sp_collective().band_sm



@fail_open
def k3_ar_fusion_sm() -> Optional[int]:
    """What ``get_device_sm()`` answers while K3's all-reduce fusion auto-probe (``_get_state``,
    ``SGLANG_K3_AR_FUSION`` unset) reads it: the registry's SM (policies/collectives.k3_ar_fusion:
    the tier's where the fusion may be auto-enabled, else one outside the band).  None (SGLang's
    probe) without an NVIDIA GPU."""
    ctx = device_context()
    if ctx is None:
        return None
    return ctx.k3_ar_fusion().band_sm
