"""The one parser for command-line input: every command takes its arguments from here.

Each argparse ``type`` wraps one of the registry's parsers or bounds (``arch/validate.py``),
so a capability, topology, CUDA version, world size or node count means the same and is
refused the same way everywhere: one line naming the input and what is accepted.
"""

from __future__ import annotations

import argparse
import os
from typing import Callable, List

from .arch import parse_capability, parse_topology
from .arch.detect import ENV_TOPOLOGY, check_environment
from .arch.profile import parse_version
from .arch.validate import (
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    MAX_WORLD_SIZE,
    SYMM_MEM_MAX_MIB,
    check_machine,
    parse_int,
    shown,
)


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise CliError(f"{self.prog}: {' '.join(message.split())}")


def argument(parse: Callable, name: str = "") -> Callable[[str], object]:
    """An argparse ``type`` from one of the registry's parsers: its ValueError, which names
    the input and the accepted forms, becomes argparse's one-line error."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = name or parse.__name__
    return convert


def bounded(minimum: int, maximum: int, what: str, flag: str = "") -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            return parse_int(text, what, minimum, maximum)
        except ValueError:
            value = f"{flag} {shown(text).strip(chr(39))}" if flag else f"value {shown(text)}"
            raise ValueError(f"invalid {value}; accepted: an integer >= {minimum} and <= {maximum} "
                             f"({what}, ASCII digits)") from None

    return argument(parse, what.replace(" ", "_"))


capability = argument(parse_capability, "capability")
topology = argument(parse_topology, "topology")
cuda = argument(parse_version, "cuda")
world_size = bounded(1, MAX_WORLD_SIZE, "world size")
nnodes = bounded(1, MAX_NODES, "node count")
gpus = bounded(1, MAX_GPUS_PER_NODE, "GPU count")
iters = bounded(1, 100_000, "iteration count", flag="--iters")
trials = bounded(1, 1000, "trial count", flag="--trials")


def machine(args: argparse.Namespace, world: str = "world_size") -> None:
    """World size and node count together (README "Limits"), and the detection variables a
    server would read (``SGLANG_ARCH_CAPABILITY`` / ``_GPU_COUNT`` / ``_TOPOLOGY``, checked as
    everywhere); without ``--topology``, ``SGLANG_ARCH_TOPOLOGY`` is the machine's topology, as
    the plugin would take it.  Raises CliError."""
    try:
        check_machine(getattr(args, world), args.nnodes)
        check_environment()
    except ValueError as exc:
        raise CliError(f"sglang-arch: error: {exc}") from None
    forced = os.environ.get(ENV_TOPOLOGY)
    if getattr(args, "topology", None) is None and forced:
        args.topology = parse_topology(forced)  # checked just above


def _world_sizes(text: str) -> List[int]:
    parts = text.split(",")
    if len(parts) > MAX_GPUS_PER_NODE:
        raise ValueError(f"invalid world sizes {shown(text)}; accepted: at most {MAX_GPUS_PER_NODE} values")
    try:
        values = [parse_int(p, "x", 2, MAX_GPUS_PER_NODE) for p in parts]
    except ValueError:
        raise ValueError(f"invalid world sizes {shown(text)}; accepted: integers 2-{MAX_GPUS_PER_NODE}, "
                         f"comma-separated") from None
    return _once_each(values, "world size", text)


def _once_each(values: List[int], what: str, text: str) -> List[int]:
    """A value given twice would be measured twice, and a results file holding both is
    refused by ``--from-results`` (one measurement per world size and size)."""
    seen = set()
    for value in values:
        if value in seen:
            raise ValueError(f"invalid {what}s {shown(text)}: {what} {value} is given twice; accepted: each once")
        seen.add(value)
    return values


_UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
# SGLang sends a message through symmetric memory only below the buffer's size, at most
# SYMM_MEM_MAX_MIB: a size measured at or above that could be won by a path no override
# can turn on (tune/collectives.py tuned_sizes), so the largest size is the last multiple
# of 4 bytes below it.
MAX_MESSAGE_BYTES = SYMM_MEM_MAX_MIB * 1024 * 1024 - 4


def _sizes(text: str) -> List[int]:
    parts = text.split(",")
    if len(parts) > 64:
        raise ValueError(f"invalid sizes {shown(text)}; accepted: at most 64 values")
    out = []
    for part in parts:
        p = part.strip().lower()
        for suffix in ("ib", "b"):
            if p.endswith(suffix) and len(p) > len(suffix):
                p = p[: -len(suffix)]
                break
        unit = p[-1:] if p[-1:] in ("k", "m", "g") else ""
        try:
            value = parse_int(p[: len(p) - len(unit)], "size", 1, MAX_MESSAGE_BYTES) * _UNITS[unit]
        except ValueError:
            value = 0
        if not 4 <= value <= MAX_MESSAGE_BYTES or value % 4:
            raise ValueError(f"invalid size {shown(part)}; accepted: a positive multiple of 4 bytes below "
                             f"{SYMM_MEM_MAX_MIB} MiB (the largest symmetric-memory buffer), as bytes or 4K, 1M, "
                             f"256M (comma-separated)")
        out.append(value)
    return _once_each(out, "size", text)


tune_world_sizes = argument(_world_sizes, "world_sizes")
tune_sizes = argument(_sizes, "sizes")
