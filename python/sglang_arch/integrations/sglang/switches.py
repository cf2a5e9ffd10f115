"""``SGLANG_ARCH_DISABLE``: the whole plugin off, or some of its decisions.

Values (surrounding white space and case ignored):

- unset, empty, ``0`` / ``false`` / ``no`` / ``off``: every decision routed;
- ``1`` / ``true`` / ``yes`` / ``on`` / ``all``: the plugin off, SGLang decides everything
  (the meaning the variable has always had);
- a comma-separated list of decision names (:data:`DECISIONS`), e.g. ``fusion,symm_mem``:
  those decisions stay SGLang's, every other one is routed.  The words above stand alone
  (``1,fusion`` is refused: all or some?); empty items between commas are ignored, and a
  list names at least one decision.

A value with a name that is not a decision is refused in one line naming the accepted ones.
Inside SGLang that keeps the whole plugin out (one warning): whoever set the variable meant
to turn something off, and SGLang's own behaviour is the side that can never be the reason
a server fails; ``sglang-arch show`` refuses it (exit 2).

The variable is read when it is used: when SGLang is first imported, as each module that
holds a target is loaded, and when SGLang loads its plugins.
"""

from __future__ import annotations

import os
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

VARIABLE = "SGLANG_ARCH_DISABLE"

# Decision name -> the target concerns (``targets.Target.concern``) it takes in and out.
# test_switches.py checks that every concern belongs to exactly one decision.
DECISIONS: Dict[str, Tuple[str, ...]] = {
    "symm_mem": ("torch symm mem", "symm-mem consumers"),
    "custom_all_reduce": ("custom all-reduce v2",),
    "pcie_ipc": ("PCIe-IPC all-reduce",),
    "fusion": ("all-reduce fusion", "Beam fused all-reduce", "K3 SP collective", "K3 all-reduce fusion"),
    "attention": ("attention backend", "FA4 page size", "attention build guard", "speculative draft attention",
                  "linear attention", "vision attention", "audio attention", "DSA attention",
                  "DeepSeek-V4 attention", "MiniCPM sparse attention", "MiniMax-M3 NVFP4 arm"),
    "moe": ("MoE runner", "MXFP4 triton_kernels flags", "MXFP4 Marlin widths", "MXFP8 MoE activations",
            "Shared-expert NVFP4 fusion", "Shared-expert fusion", "Qwen decode MoE fusion", "Marlin LoRA MoE decode",
            "LoRA MoE CuTe DSL tiles", "LoRA MoE FP8 division", "Muse Spark GEMM + all-gather",
            "Muse Spark finalize AR", "Nemotron-H prefill overlap", "single-batch overlap"),
    "gemm": ("DeepGEMM", "FP8 GEMM backend", "FP4 GEMM backend", "BF16 GEMM backend", "FP8 UE8M0 requant",
             "FP8 block-32 BF16 cache", "FP8 block-32 DeepGEMM", "FP8 fused activation", "Router GEMM",
             "Fused QKV-A GEMM", "BF16 GEMM tuned table", "BF16 GEMV window", "Muse Spark router GEMV",
             "FlashInfer quantize backend", "NVFP4 KV prefill dtype", "NVFP4 KV dequantize",
             "MiniMax sparse index dtype", "DeepSeek-V4 kernel paths", "DeepSeek-V4.1 index logits"),
    "platform_facts": ("platform facts",),
}
ALL: FrozenSet[str] = frozenset(DECISIONS)
_CONCERN_DECISION = {concern: name for name, concerns in DECISIONS.items() for concern in concerns}
_TRUE = ("1", "true", "yes", "on", "all")
_FALSE = ("", "0", "false", "no", "off")
ACCEPTED = ("1 (all off), 0 (none), or a comma-separated list of: " + ", ".join(DECISIONS))


class SwitchError(ValueError):
    """A value of ``SGLANG_ARCH_DISABLE`` that names something that is not a decision."""


def parse(value: Optional[str]) -> FrozenSet[str]:
    """The decisions ``value`` turns off (every one of :data:`DECISIONS` for all)."""
    text = (value or "").strip().lower()
    if text in _FALSE:
        return frozenset()
    if text in _TRUE:
        return ALL
    names = [part.strip() for part in text.split(",") if part.strip()]
    shown = value if len(value or "") <= 80 else (value or "")[:77] + "..."
    switches = [name for name in names if name in _TRUE or name in _FALSE]
    if switches:  # "1,fusion": all and some at once, or "0,fusion": none and some
        raise SwitchError(f"{VARIABLE}={shown!r}: {', '.join(switches)} turns everything on or off and stands "
                          f"alone, not in a list of decisions; accepted: {ACCEPTED}")
    unknown = [name for name in names if name not in DECISIONS]
    if unknown or not names:
        raise SwitchError(f"{VARIABLE}={shown!r}: not a decision: {', '.join(unknown) or 'none named'}; "
                          f"accepted: {ACCEPTED}")
    return frozenset(names)


def off(environ: Optional[Mapping[str, str]] = None) -> FrozenSet[str]:
    """The decisions turned off now; a value that cannot be read turns every one off."""
    try:
        return parse((os.environ if environ is None else environ).get(VARIABLE))
    except SwitchError:
        return ALL


def problem(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """Why the value cannot be read (one line), or None."""
    try:
        parse((os.environ if environ is None else environ).get(VARIABLE))
    except SwitchError as exc:
        return str(exc)
    return None


def decision_of(concern: str) -> str:
    """The decision a target's concern belongs to (the concern itself where no decision lists it)."""
    return _CONCERN_DECISION.get(concern, concern)


def describe(names: FrozenSet[str]) -> str:
    """``fusion, symm_mem`` in the table's order; ``all`` for every one."""
    if names >= ALL:
        return "all"
    return ",".join(name for name in DECISIONS if name in names)
