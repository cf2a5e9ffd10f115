"""The kernel catalog's rule: which kernels run on a device, and which choices they allow.

The tier (``registry.resolve``) answers "what would we like here": preferences, sizes,
thresholds, and it may be a neighbour's on a GPU the table does not know.  Only the
kernels answer "what can run here", and that is a property of the device itself:

- ``sm_XYa``: SASS for exactly X.Y (arch-specific features: wgmma, tcgen05 on ``a``);
- ``sm_XYf``: SASS for the family, every X.Z with Z >= Y (CUDA 12.9+ family targets);
- ``sm_XY``: plain SASS, binary compatible within the major: every X.Z with Z >= Y;
- ``compute_XY``: PTX, which the driver compiles for any device >= X.Y;
- ``jit:X.Y+``: compiled for the device when it runs (Triton, TileLang, FlashInfer's
  nvcc JIT), from a minimum capability;
- ``jit:X.x``: compiled for the device when it runs, by code that accepts only major X
  (FlashInfer's comm modules are generated for majors 9, 10 and 12);
- ``jit:X.Y``: compiled when it runs, but only for exactly X.Y (a compiler or
  dispatcher that names its targets one by one: CuTe DSL kernels, DeepGEMM's arches);
- ``torch:X.Y+``: built into PyTorch, from X.Y: it runs wherever the installed torch runs
  (a GPU torch does not run on runs none of SGLang, so that is no decision of ours).

(CUDA C++ Programming Guide, "Binary Compatibility" and "Feature Availability".)

A decision is the tier's preferences filtered by :func:`choice_runs` on the device's
identity (``Resolution.requested``), so a fallback can lend preferences and limits but
never a kernel.  One kernel is judged alike in every decision that can pick it: the
decisions name kernels, and the kernels carry the targets (``kernels.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple, Union

from .capability import Capability
from .kernels import CHOICES, KERNELS

TARGET_FORMS = "sm_XY, sm_XYa, sm_XYf, compute_XY, jit:X.Y+, jit:X.x, jit:X.Y, torch:X.Y+"
_TARGET_RE = re.compile(r"(?:(sm|compute)_([0-9]{1,2})([0-9])([af]?)|(jit|torch):([0-9]{1,2})\.([0-9x])(\+?))")

Cuda = Optional[Tuple[int, int]]
Devices = Union[Capability, Sequence[Capability]]  # one GPU, or every GPU of a (mixed) node


@dataclass(frozen=True)
class Target:
    """One build of a kernel: what it is compiled as, and for which capability."""

    text: str
    kind: str  # "arch" | "family" | "sass" | "ptx" | "jit_min" | "jit_major" | "jit_exact" | "torch_min"
    capability: Capability

    def runs_on(self, device: Capability) -> bool:
        cc = self.capability
        if self.kind in ("arch", "jit_exact"):
            return device == cc
        if self.kind in ("family", "sass"):
            return device.major == cc.major and device.minor >= cc.minor
        if self.kind == "jit_major":
            return device.major == cc.major
        return device >= cc  # ptx, jit_min, torch_min


def parse_target(text: str) -> Target:
    """A target as the catalog spells it; ``ValueError`` naming the accepted forms."""
    match = _TARGET_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"invalid kernel target {text!r}; accepted: {TARGET_FORMS}")
    sm_or_compute, major, minor, suffix, built, jit_major, jit_minor, plus = match.groups()
    if sm_or_compute is not None:
        cap = Capability(int(major), int(minor))
        if sm_or_compute == "compute":
            if suffix:
                raise ValueError(f"invalid kernel target {text!r}: arch- or family-specific PTX is not portable; "
                                 f"spell it as the sm_ target it is compiled to ({TARGET_FORMS})")
            return Target(text, "ptx", cap)
        return Target(text, {"a": "arch", "f": "family", "": "sass"}[suffix], cap)
    if built == "torch":
        if not plus or jit_minor == "x":
            raise ValueError(f"invalid kernel target {text!r}: torch kernels are spelled torch:X.Y+; "
                             f"accepted: {TARGET_FORMS}")
        return Target(text, "torch_min", Capability(int(jit_major), int(jit_minor)))
    if jit_minor == "x":
        if plus:
            raise ValueError(f"invalid kernel target {text!r}; accepted: {TARGET_FORMS}")
        return Target(text, "jit_major", Capability(int(jit_major), 0))
    return Target(text, "jit_min" if plus else "jit_exact", Capability(int(jit_major), int(jit_minor)))


def _cuda(text: Optional[str]) -> Cuda:
    if text is None:
        return None
    major, minor = text.split(".")
    return int(major), int(minor)


@dataclass(frozen=True)
class Kernel:
    """A kernel family SGLang can pick, with the builds that exist for it."""

    name: str
    targets: Tuple[Target, ...]
    min_cuda: Cuda
    summary: str
    sources: Tuple[str, ...]
    binary: Optional[str] = None  # package/path.so whose SASS/PTX the targets list (read with cuobjdump)
    declared_in: Optional[str] = None  # "package/file.py:generator" or "cutlass-dsl": where the JIT targets are declared
    kernel_spec: Optional[str] = None  # SGLang's own KernelSpec op whose CapabilityRequirement window covers it

    def runs_on(self, device: Capability, cuda: Cuda = None) -> "Verdict":
        if self.min_cuda is not None and cuda is not None and cuda < self.min_cuda:
            return Verdict(False, f"{self.name} needs CUDA >= {self.min_cuda[0]}.{self.min_cuda[1]} "
                                  f"(torch has {cuda[0]}.{cuda[1]})", self.name)
        for target in self.targets:
            if target.runs_on(device):
                return Verdict(True, f"{self.name} has {target.text} for {device}", self.name)
        builds = ", ".join(t.text for t in self.targets) or "none"
        return Verdict(False, f"{self.name} has no build for {device} (builds: {builds})", self.name)


@dataclass(frozen=True)
class Verdict:
    runs: bool
    reason: str
    kernel: Optional[str] = None


@dataclass(frozen=True)
class Use:
    """A choice's use of one kernel, for the model kinds and phases it serves."""

    kernel: str
    kinds: Optional[Tuple[str, ...]] = None  # None: every kind
    phases: Optional[Tuple[str, ...]] = None  # None: every phase
    needs: Tuple[str, ...] = ()  # kernels the choice runs beside ``kernel`` ("with"): all must run

    def serves(self, kind: Optional[str], phase: Optional[str]) -> bool:
        return ((kind is None or self.kinds is None or kind in self.kinds)
                and (phase is None or self.phases is None or phase in self.phases))


def _build_kernels(raw: Mapping[str, Mapping]) -> Dict[str, Kernel]:
    kernels = {}
    for name, entry in raw.items():
        if not entry.get("sources"):
            raise ValueError(f"kernel catalog: {name} has no source")
        targets = tuple(parse_target(t) for t in entry["targets"])
        kernels[name] = Kernel(name, targets, _cuda(entry.get("min_cuda")), entry["summary"],
                               tuple(entry["sources"]), entry.get("binary"), entry.get("declared_in"),
                               entry.get("kernel_spec"))
    return kernels


def _build_choices(raw: Mapping[str, Mapping[str, Sequence[Mapping]]],
                   kernels: Mapping[str, Kernel]) -> Dict[Tuple[str, str], Tuple[Use, ...]]:
    choices = {}
    for decision, by_choice in raw.items():
        for choice, uses in by_choice.items():
            built = []
            for use in uses:
                for kernel in (use["kernel"], *use.get("with", ())):
                    if kernel not in kernels:
                        raise ValueError(f"kernel catalog: {decision}:{choice} uses unknown kernel {kernel!r}")
                built.append(Use(use["kernel"], _tuple(use.get("kinds")), _tuple(use.get("phases")),
                                 tuple(use.get("with", ()))))
            choices[(decision, choice)] = tuple(built)
    return choices


def _tuple(value: Optional[Iterable[str]]) -> Optional[Tuple[str, ...]]:
    return None if value is None else tuple(value)


CATALOG: Dict[str, Kernel] = _build_kernels(KERNELS)
_CHOICES: Dict[Tuple[str, str], Tuple[Use, ...]] = _build_choices(CHOICES, CATALOG)
DECISIONS = tuple(sorted({decision for decision, _ in _CHOICES}))


def known_choices(decision: str) -> Tuple[str, ...]:
    """The choices of ``decision`` the catalog knows, in catalog order."""
    if decision not in DECISIONS:
        raise ValueError(f"unknown catalog decision {decision!r}; accepted: {', '.join(DECISIONS)}")
    return tuple(choice for d, choice in _CHOICES if d == decision)


def kernels_of(decision: str, choice: str) -> Tuple[Use, ...]:
    return _CHOICES.get((decision, choice), ())


def choice_runs(decision: str, choice: str, device: Devices, cuda: Cuda = None,
                kind: Optional[str] = None, phase: Optional[str] = None) -> Optional[Verdict]:
    """Whether ``choice`` of ``decision`` has a kernel for ``device``; None: not in the catalog.

    A choice runs when any kernel it uses for this model kind and phase runs on the
    device, with every kernel that use needs beside it (``with``); given several devices (a mixed node: ``Resolution.identities``), on each of
    them.  The verdict's reason names the kernel that runs, or every one that does not.
    """
    uses = _CHOICES.get((decision, choice))
    if uses is None:
        return None
    if not isinstance(device, Capability):
        verdicts = [choice_runs(decision, choice, one, cuda, kind, phase) for one in device]
        refused = [v for v in verdicts if not v.runs]
        return refused[0] if refused else verdicts[0]
    serving = [use for use in uses if use.serves(kind, phase)]
    if not serving:
        what = " ".join(x for x in (kind and kind.upper(), phase) if x)
        return Verdict(False, f"{choice} has no kernel for {what}")
    refusals = []
    for use in serving:
        verdicts = [CATALOG[kernel].runs_on(device, cuda) for kernel in (use.kernel, *use.needs)]
        refused = [v.reason for v in verdicts if not v.runs]
        if not refused:
            return verdicts[0] if not use.needs else Verdict(
                True, "; ".join(v.reason for v in verdicts), use.kernel)
        refusals.extend(r for r in refused if r not in refusals)
    return Verdict(False, "; ".join(refusals))


def runnable(decision: str, choices: Iterable[str], device: Devices, cuda: Cuda = None,
             kind: Optional[str] = None, phase: Optional[str] = None) -> Tuple[str, ...]:
    """The choices among ``choices`` the catalog says run on ``device`` (unknown ones kept out)."""
    out = []
    for choice in choices:
        verdict = choice_runs(decision, choice, device, cuda, kind, phase)
        if verdict is not None and verdict.runs:
            out.append(choice)
    return tuple(out)
