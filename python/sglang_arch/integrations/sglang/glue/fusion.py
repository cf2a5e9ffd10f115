"""FlashInfer all-reduce fusion, as the registry decides it.

The registry's fusion policy knows which backends a tier's FlashInfer build has and
what each needs from the interconnect (trtllm: peer-to-peer access; mnnvl across nodes).
``resolve_backend`` keeps ``_resolve_backend``'s contract (a backend name, or
``ValueError`` with the reason).  ``applies`` is the runtime gate every layer asks
before it calls the fused kernel: SGLang's own conditions, with its platform condition
(SM90 or SM100, cached at import) replaced by the registry's decision.  ``auto_enable`` keeps SGLang's own model and
parallelism rules: where SGLang's platform gate already admits the tier it lets SGLang's
pass run unchanged, and for a tier the gate does not know yet it runs the same pass
under the gate of the backend the registry chose.
"""

from __future__ import annotations

import contextvars
import logging
import sys
from typing import Any, Dict, Optional, Tuple

from ....arch.policies.collectives import FUSION_REQUESTS
from . import ArchDecisionError, Constants, device_context, fail_open, per_machine, routed_context

logger = logging.getLogger(__name__)

_OVERRIDES = "sglang.srt.arg_groups.overrides"
_ADD_NORM = "sglang.srt.layers.layer_boundary.residual.add_norm"

# The platform gate SGLang's auto-enable pass checks for a backend, by the backend the
# registry chose: SGLang enables trtllm fusion behind its SM90 gate.
FUSION_GATES: Dict[str, Dict[str, bool]] = {
    "trtllm": {"is_sm90": True, "is_sm100": False}
}

# The facts the glue answers while SGLang's own auto-enable pass runs: the backend's gate
# (FUSION_GATES) and DeepSeek-V4.1's Blackwell rule.
AUTO_ENABLE_FACTS = ("is_sm90", "is_sm100", "is_blackwell")

# Set while SGLang's own auto-enable pass runs under a gate (it must not route twice).
_in_upstream_pass: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "sglang_arch_upstream_pass", default=False
)


# (machine, backend, nodes) -> the fusion decision ``_resolve_backend`` answers: SGLang asks it
# at every workspace check (``ensure_workspace_initialized``, per fused layer call), so the
# registry's policy runs once per machine, backend and node count.
_resolved: Dict[Tuple[str, int], Tuple[Any, Any]] = {}


@fail_open
def resolve_backend(backend: str, is_multi_node: bool = False) -> Optional[str]:
    """The fusion backend for ``--flashinfer-allreduce-fusion-backend backend``.

    None: no NVIDIA GPU, SGLang resolves.  ``ValueError`` (as SGLang's own) when fusion
    cannot run here, with the registry's reason.  Decided once per machine, backend and
    node count.
    """
    ctx = routed_context()
    if ctx is None:
        return None
    nnodes = 2 if is_multi_node else 1
    decision = per_machine(_resolved, ctx, (backend, nnodes),
                           lambda: ctx.fusion(nnodes=nnodes, requested=backend, explicit=True))
    if decision.enabled:
        return decision.backend
    raise ArchDecisionError(
        f"FlashInfer allreduce fusion ({backend}): {decision.reason}"
    )


@fail_open
def auto_enable(view: Any) -> Optional[dict]:
    """The auto-enable pass's answer; None: SGLang's own pass runs as it is."""
    if _in_upstream_pass.get():
        return None
    ctx = routed_context()
    if ctx is None:
        return None
    decision = ctx.fusion(nnodes=view.nnodes, world_size=getattr(view, "tp_size", None))
    if not decision.enabled:
        if view.flashinfer_allreduce_fusion_backend is None:
            logger.info(
                "FlashInfer all-reduce fusion not auto-enabled: %s", decision.reason
            )
        return {}
    facts: Dict[str, bool] = {}
    if not (ctx.facts.get("is_sm90") or ctx.facts.get("is_sm100")):  # SGLang's own gate does not admit this tier
        gate = FUSION_GATES.get(decision.backend or "")
        if gate is None:
            return {}
        facts.update(gate)
    # DeepSeek-V4.1 at TP 4 keeps its custom push plane on Blackwell: the tier's rule
    # (policies/collectives.dsv41_custom_plane), where it differs from the device's fact.
    custom_plane = ctx.dsv41_custom_plane().custom_plane
    if custom_plane != bool(ctx.facts.get("is_blackwell")):
        facts["is_blackwell"] = custom_plane
    if not facts:
        return None  # SGLang's own pass decides as the registry here
    from sglang.srt.runtime_context import override_platform

    upstream_pass = sys.modules[_OVERRIDES]._flashinfer_allreduce_fusion_auto_enable
    token = _in_upstream_pass.set(True)
    try:
        with override_platform(**facts):
            return upstream_pass(view)
    finally:
        _in_upstream_pass.reset(token)


# (machine, backend, nodes) -> whether the registry runs fusion there; the gate is asked
# once per layer per forward pass, so its platform part is decided once.
_platform_ok: Dict[Tuple[str, int], Tuple[Any, bool]] = {}


@fail_open
def applies(batch_size: int) -> Optional[bool]:
    """Whether a layer of ``batch_size`` tokens runs the fused all-reduce + RMSNorm.

    None: no NVIDIA GPU; SGLang's own gate answers.  The order of the checks is
    SGLang's: the size checks stay last (under Dynamo tracing they guard on the token
    dimension, so statically-off configurations short-circuit before them).
    """
    ctx = device_context()  # SGLang's own gate: flags computed at import, no override
    if ctx is None:
        return None
    gate = sys.modules[_ADD_NORM]
    backend = gate.get_exec().comm.flashinfer_allreduce_fusion_backend
    return (
        bool(gate._is_cuda)
        and backend is not None
        and _fusion_runs_here(ctx, backend)
        and bool(gate._is_flashinfer_available)
        and not gate.is_dp_attention_enabled()
        and not gate.uses_cutedsl_ar_fusion()
        and not gate.is_flashinfer_allreduce_unavailable()
        and batch_size > 0
        and batch_size <= gate.FUSE_ALLREDUCE_MAX_BATCH_SIZE
    )


def applies_settled(original: Any) -> Any:
    """What ``flashinfer_ar_fusion_applies`` is bound to once decided for this process
    (``routing.settle``): SGLang's own gate where its platform condition, computed at import
    (``_is_sm90_supported or _is_sm100_supported``), is the registry's decision for every
    backend on this process's node count (a ``cutedsl`` backend is off in both: SGLang's gate
    leaves it to its own fused path); SGLang's body with that condition a constant where the
    registry answers one value that differs; the hook where the registry's answer depends on
    the backend, the answer for the backend this process resolved (one per process: SGLang
    resolves it with the server arguments, before the first forward), else the hook.
    Returns ``original``, ``Constants`` or ``KEEP``."""
    ctx = device_context()
    if ctx is None:
        return original
    gate = sys.modules[_ADD_NORM]
    own = bool(gate._is_sm90_supported or gate._is_sm100_supported)
    nnodes = gate.get_parallel().nnodes
    answers = {bool(gate._is_cuda) and _fusion_enabled(ctx, backend, nnodes)
               for backend in FUSION_REQUESTS if backend != "cutedsl"}
    if answers == {own}:
        return original
    if len(answers) != 1:
        backend = gate.get_exec().comm.flashinfer_allreduce_fusion_backend
        if backend is None or backend == "cutedsl":
            return original  # SGLang's gate answers no without reading its platform condition
        answers = {bool(gate._is_cuda) and _fusion_enabled(ctx, backend, nnodes)}
    (answer,) = answers
    return original if answer == own else Constants(_is_sm90_supported=answer, _is_sm100_supported=False)


def _fusion_enabled(ctx: Any, backend: str, nnodes: int) -> bool:
    """Whether the registry enables fusion with ``backend`` here: decided once per machine,
    backend and node count (the layers ask it every forward)."""
    requested = backend if backend in FUSION_REQUESTS else "auto"
    return per_machine(_platform_ok, ctx, (backend, nnodes),
                       lambda: ctx.fusion(nnodes=nnodes, requested=requested, explicit=True).enabled)


def _fusion_runs_here(ctx: Any, backend: str) -> bool:
    nnodes = sys.modules[_ADD_NORM].get_parallel().nnodes
    return _fusion_enabled(ctx, backend, nnodes)


# --- FlashInfer's trtllm workspace preflight (flashinfer_comm_fusion.py) ---

_FUSION = "sglang.srt.layers.flashinfer_comm_fusion"


class DriverWithoutMulticastAlignment:
    """cuda-python's driver bindings as FlashInfer's trtllm workspace sees the machine: the
    multicast granularity query answers 1 (no alignment) where the driver's own query does
    not succeed, every other binding the driver's own.  FlashInfer 0.7.2 creates the trtllm
    workspace's buffers with ``enable_multicast=False`` (``comm/trtllm_ar.py``), sized to the
    allocation granularity alone, so a node without multicast needs no multicast
    granularity for them."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver
        self.answered: list = []  # the driver's errors answered with granularity 1 (for the log)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._driver, name)

    def cuMulticastGetGranularity(self, prop: Any, option: Any) -> Tuple[Any, int]:  # noqa: N802 (the driver's name)
        success = self._driver.CUresult.CUDA_SUCCESS
        try:
            err, granularity = self._driver.cuMulticastGetGranularity(prop, option)
        except Exception as exc:  # a driver or binding without the call: no multicast either
            err, granularity = exc, 0
        if err != success:
            if not self.answered:
                logger.info("FlashInfer trtllm workspace sized without multicast alignment: the multicast "
                            "granularity query failed (%s) and FlashInfer's trtllm workspace does not use "
                            "multicast", err)
            self.answered.append(err)
            return success, 1
        return err, granularity


@fail_open
def trtllm_workspace_driver(driver: Any) -> Optional[DriverWithoutMulticastAlignment]:
    """The driver ``_flashinfer_trtllm_workspace_allocation_sizes`` reads (the ``viewed`` form),
    for the preflight SGLang runs before it creates FlashInfer's fusion workspace.

    SGLang 0.5.23 aligns each size to the multicast granularity for every backend, and where
    that query fails (SM12x over PCIe, an H100 / H200 node with multicast off) the preflight
    fails and fusion is skipped with a warning, although the trtllm workspace never uses
    multicast.  Where the process's fusion backend resolves to ``trtllm``, the sizes are
    computed as FlashInfer allocates them when the query fails; where it succeeds, or for
    any other backend (mnnvl's workspace is a multicast buffer: the registry refuses mnnvl
    without multicast at backend resolution), SGLang's result stands.  None (SGLang's own
    driver) without an NVIDIA GPU or for another backend."""
    if routed_context() is None:
        return None
    try:
        backend = sys.modules[_FUSION].resolve_flashinfer_allreduce_fusion_backend()
    except ValueError:  # fusion refused here: nothing of the plugin's to size
        return None
    return DriverWithoutMulticastAlignment(driver) if backend == "trtllm" else None


# --- Beam's FlashInfer all-reduce token band (srt/models/beam.py) ---

_BEAM_TP_SIZES = range(2, 65)


@fail_open
def beam_flashinfer_band_table() -> Optional[dict]:
    """``_FLASHINFER_AR_TOKEN_BAND`` while ``BeamModel._flashinfer_ar_band`` reads it (the
    ``scoped`` form): the registry's band per TP size, keyed, as SGLang's, by the
    capability torch reports for this device."""
    ctx = device_context()
    if ctx is None:
        return None
    own = ctx.resolution.requested
    table = {}
    for tp_size in _BEAM_TP_SIZES:
        band = ctx.beam_flashinfer_band(tp_size).value
        if band is not None:
            table[((own.major, own.minor), tp_size)] = band
    return table


