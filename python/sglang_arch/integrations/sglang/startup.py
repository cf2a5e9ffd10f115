"""The plugin's start-up line: what it decided for this launch, in one line of at most 200 characters.

One line per process, at INFO on rank 0 (and in processes that have no rank: the launcher,
the detokenizer), at DEBUG on every other rank; which hooks were applied is DEBUG too.
The decisions are those of this launch: its tensor-parallel size (not the node's GPU
count) and its server flags, read from SGLang's server arguments where the process has
them (a scheduler, the detokenizer, ``Engine(...)``), else from the launcher's command
line.  Example (``--tp 8`` on 8x RTX PRO 6000, PCIe with peer-to-peer access, without
``--enable-torch-symm-mem``)::

    sglang-arch: tp 8 on 8x sm_120 pcie-p2p -> tier 12.0 [exact]; symm-mem no; pcie-ipc on
    (decode-sized); custom-AR no; fusion no; attn MHA flashinfer MLA triton

(one line).  On a tier with symm-mem sizes the symm-mem part reads ``symm-mem 128 MiB
multimem`` with ``--enable-torch-symm-mem`` and ``off (no --enable-torch-symm-mem)``
without it; the pcie-ipc part shows only where the plugin turns it on; a flag
that turns a decision off reads ``off (--flag)``, an explicit ``--attention-backend``
``attn fa4 (--attention-backend)``.  A decision left to SGLang by ``SGLANG_ARCH_DISABLE``
reads ``SGLang``, and the line ends with ``off: <names>``; hooks whose SGLang code differs
from what they were written for are counted at the end (``2 hooks kept SGLang's``).  Where
no launch can be read, the node's GPU count stands in and the symm-mem part says it needs
the flag.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, FrozenSet, Iterable, Optional, Sequence

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


SYMM_MEM_FLAG = "--enable-torch-symm-mem"
CUSTOM_AR_OFF_FLAG = "--disable-custom-all-reduce"
FUSION_OFF_FLAG = "--enforce-disable-flashinfer-allreduce-fusion"
ATTENTION_FLAG = "--attention-backend"


@dataclass(frozen=True)
class Launch:
    """What one launch's server arguments say about the decisions the line reports."""

    tp: int = 1
    nnodes: int = 1
    symm_mem_flag: bool = False
    custom_ar_off: bool = False
    fusion_off: bool = False
    attention: Optional[str] = None  # an explicit --attention-backend
    source: str = "command line"


class _Quiet(argparse.ArgumentParser):
    """A parser that raises instead of printing its usage and exiting."""

    def error(self, message):
        raise ValueError(message)


def _parser() -> argparse.ArgumentParser:
    """SGLang's spellings of the flags the line reads (``ServerArgs.add_cli_args``; ``--tp``
    is how most launches abbreviate ``--tp-size``, which SGLang's parser accepts)."""
    p = _Quiet(add_help=False, allow_abbrev=False, exit_on_error=False)
    p.add_argument("--tp-size", "--tensor-parallel-size", "--tp", dest="tp", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument(SYMM_MEM_FLAG, dest="symm", action="store_true")
    p.add_argument(CUSTOM_AR_OFF_FLAG, dest="car_off", action="store_true")
    p.add_argument(FUSION_OFF_FLAG, dest="fusion_off", action="store_true")
    p.add_argument(ATTENTION_FLAG, dest="attention")
    return p


def launch_from_argv(argv: Sequence[str]) -> Optional[Launch]:
    """The launch SGLang's command line ``argv`` describes (its server arguments, in any
    order); None where they cannot be read (a value SGLang itself would refuse)."""
    tokens = [str(t) for t in argv]
    for i, token in enumerate(tokens):  # --flag=value as SGLang's parser takes it
        if token.startswith("--") and "=" in token:
            tokens[i:i + 1] = token.split("=", 1)
    try:
        ns, _ = _parser().parse_known_args(tokens)
    except (SystemExit, ValueError, TypeError, argparse.ArgumentError):
        return None
    if ns.tp < 1 or ns.nnodes < 1:
        return None
    return Launch(ns.tp, ns.nnodes, ns.symm, ns.car_off, ns.fusion_off, ns.attention, "command line")


def launch_from_server_args(args: Any, source: str = "server arguments") -> Optional[Launch]:
    """The launch an SGLang ``ServerArgs`` (or the keywords of ``Engine(...)``) describes."""
    get = args.get if isinstance(args, dict) else lambda name, default=None: getattr(args, name, default)
    tp = get("tp_size", 1)
    nnodes = get("nnodes", 1)
    if not isinstance(tp, int) or not isinstance(nnodes, int) or tp < 1 or nnodes < 1:
        return None
    attention = get("attention_backend", None)
    return Launch(tp, nnodes, bool(get("enable_torch_symm_mem", False)), bool(get("disable_custom_all_reduce", False)),
                  bool(get("enforce_disable_flashinfer_allreduce_fusion", False)),
                  attention if isinstance(attention, str) else None, source)


def this_launch(frames: Optional[Iterable[Any]] = None, argv: Optional[Sequence[str]] = None) -> Optional[Launch]:
    """This process's launch: SGLang's server arguments where a caller holds them (a
    scheduler's, the detokenizer's ``server_args``; ``Engine(**kwargs)``), else the
    launcher's command line (``python -m sglang.launch_server ...`` / ``sglang serve ...``:
    one that names a model); None where neither is found."""
    if frames is None:
        frames = _stack()
    for frame in frames:
        local = frame.f_locals
        held = local.get("server_args")
        if held is not None and hasattr(held, "tp_size"):
            return launch_from_server_args(held)
        kwargs = local.get("kwargs")
        if frame.f_code.co_name == "__init__" and isinstance(kwargs, dict) and (
                "model_path" in kwargs or "tp_size" in kwargs):
            if kwargs.get("server_args") is not None:
                return launch_from_server_args(kwargs["server_args"])
            return launch_from_server_args(kwargs, "Engine arguments")
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(token.split("=", 1)[0] in ("--model-path", "--model") for token in argv):
        return launch_from_argv(argv)
    return None


def line(machine: str, d: Any, off: FrozenSet[str] = frozenset(), kept: int = 0,
         launch: Optional[Launch] = None) -> str:
    """The start-up line.  ``machine``: ``8x sm_120 pcie-p2p``; ``d``: the ``Decisions`` at the
    launch's TP size (the node's GPU count where ``launch`` is None); ``off``: decisions
    ``SGLANG_ARCH_DISABLE`` leaves to SGLang; ``kept``: hooks left to SGLang because SGLang's
    code is not the code they were written for; ``launch``: the launch's flags."""
    res = d.resolution
    where = f"tp {launch.tp} on {machine}" if launch is not None else machine
    parts = [f"{where} -> tier {res.resolved} [{res.match}]"]
    symm = d.symm_mem
    if "symm_mem" in off:
        symm_text = "SGLang"
    elif not symm.enabled:
        symm_text = "no"
    elif launch is None:
        symm_text = f"{_size(symm.max_bytes)} {symm.algorithm or ''} with {SYMM_MEM_FLAG}".replace("  ", " ")
    elif not launch.symm_mem_flag:
        symm_text = f"off (no {SYMM_MEM_FLAG})"
    else:
        symm_text = f"{_size(symm.max_bytes)} {symm.algorithm or ''}".strip()
    parts.append("symm-mem " + symm_text)
    if d.pcie_ipc.enabled and "pcie_ipc" not in off:  # on where measured (off: named in the off list)
        parts.append("pcie-ipc on (decode-sized)")
    car = d.custom_allreduce
    parts.append("custom-AR " + ("SGLang" if "custom_all_reduce" in off else
                                 f"off ({CUSTOM_AR_OFF_FLAG})" if launch is not None and launch.custom_ar_off
                                 else _size(car.max_bytes) if car.enabled else "no"))
    parts.append("fusion " + ("SGLang" if "fusion" in off else
                              f"off ({FUSION_OFF_FLAG})" if launch is not None and launch.fusion_off
                              else (d.fusion.backend or "yes") if d.fusion.enabled else "no"))
    if launch is not None and launch.attention and "attention" not in off:
        attention = f"{launch.attention} ({ATTENTION_FLAG})"
    else:
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
    if len(text) > MAX_LENGTH:  # the flags named in the parts become the word "flag"
        import re

        parts = [re.sub(r"\((?:no )?--[a-z0-9-]+\)", "(flag)", part).replace(f" with {SYMM_MEM_FLAG}", " (flag)")
                 for part in parts]
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
