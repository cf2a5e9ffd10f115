"""The plugin's start-up line: what it decided for this machine, in one line of at most 200 characters.

One line per process, at INFO on rank 0 (and in processes that have no rank: the launcher,
the detokenizer), at DEBUG on every other rank; which hooks were applied is DEBUG too.
Example (8x RTX PRO 6000, PCIe with peer-to-peer access)::

    sglang-arch: 8x sm_120 pcie-p2p -> tier 12.0 [exact]; symm-mem 128 MiB two_shot; custom-AR no;
    fusion no; attn MHA fa3/fa3 MLA flashinfer/flashinfer

(one line).  A decision left to SGLang by ``SGLANG_ARCH_DISABLE`` reads ``SGLang``, and the
line ends with ``off: <names>``; hooks whose SGLang code differs from what they were written
for are counted at the end (``2 hooks kept SGLang's``).
"""

from __future__ import annotations

import sys
from typing import Any, FrozenSet, Iterable, Optional

from ...arch.profile import MIB
from .switches import DECISIONS, describe

MAX_LENGTH = 200
PREFIX = "sglang-arch: "


def _size(nbytes: int) -> str:
    return f"{nbytes // MIB} MiB" if nbytes % MIB == 0 else f"{nbytes} B"


def _pair(decision: Any) -> str:
    if decision.prefill is None and decision.decode is None:
        return "-"
    if decision.prefill == decision.decode:
        return str(decision.prefill)
    return f"{decision.prefill}/{decision.decode}"


def line(machine: str, d: Any, off: FrozenSet[str] = frozenset(), kept: int = 0) -> str:
    """The start-up line.  ``machine``: ``8x sm_120 pcie-p2p``; ``d``: the node's ``Decisions``;
    ``off``: decisions ``SGLANG_ARCH_DISABLE`` leaves to SGLang; ``kept``: hooks left to SGLang
    because SGLang's code is not the code they were written for."""
    res = d.resolution
    parts = [f"{machine} -> tier {res.resolved} [{res.match}]"]
    symm = d.symm_mem
    parts.append("symm-mem " + ("SGLang" if "symm_mem" in off else
                                f"{_size(symm.max_bytes)} {symm.algorithm or ''}".strip() if symm.enabled else "no"))
    car = d.custom_allreduce
    parts.append("custom-AR " + ("SGLang" if "custom_all_reduce" in off else _size(car.max_bytes) if car.enabled
                                 else "no"))
    parts.append("fusion " + ("SGLang" if "fusion" in off else (d.fusion.backend or "yes") if d.fusion.enabled
                              else "no"))
    attention = "SGLang" if "attention" in off else f"MHA {_pair(d.mha)} MLA {_pair(d.mla)}"
    parts.append("attn " + attention)
    if off:
        parts.append("off: " + describe(off))
    if kept:
        parts.append(f"{kept} hook{'s' if kept != 1 else ''} kept SGLang's")
    text = PREFIX + "; ".join(parts)
    # Too long: first the names of the decisions off become their count, then the kept hooks'
    # words shorten, then a mixed node's architectures become their count.
    if len(text) > MAX_LENGTH and off:
        parts[-2 if kept else -1] = f"off: {len(off)} of {len(DECISIONS)} decisions"
        text = PREFIX + "; ".join(parts)
    if len(text) > MAX_LENGTH and kept:
        parts[-1] = f"{kept} hook{'s' if kept != 1 else ''} kept"
        text = PREFIX + "; ".join(parts)
    if len(text) > MAX_LENGTH:
        count, archs, *rest = machine.split(" ")
        if "+" in archs:
            parts[0] = parts[0].replace(machine, " ".join([count, f"{archs.count('+') + 1} archs", *rest]), 1)
            text = PREFIX + "; ".join(parts)
    return text if len(text) <= MAX_LENGTH else text[:MAX_LENGTH - 3] + "..."


def machine_words(node: Any, topology: Optional[str] = None) -> str:
    """``8x sm_120 pcie-p2p``: the GPU count, their architectures, the topology."""
    caps = "+".join(sorted({f"sm_{c.sm}" for c in node.capabilities}))
    return f"{len(node.gpus)}x {caps} {topology or node.topology.name}"


def is_rank_zero(frames: Optional[Iterable[Any]] = None) -> bool:
    """Whether this process is rank 0, or a process without a rank (the launcher, the
    detokenizer).  SGLang's scheduler loads plugins first thing in ``run_scheduler_process``,
    whose arguments carry its ranks; torch's launchers set ``RANK``."""
    import os

    rank = os.environ.get("RANK", "").strip()
    if rank.isdigit() and int(rank) != 0:
        return False
    if frames is None:
        frames = _stack()
    for frame in frames:
        if frame.f_code.co_name == "run_scheduler_process":
            local = frame.f_locals
            return not any(isinstance(local.get(n), int) and local.get(n) for n in ("tp_rank", "pp_rank", "dp_rank"))
    return True


def _stack() -> Iterable[Any]:
    frame = sys._getframe(1)
    while frame is not None:
        yield frame
        frame = frame.f_back
