"""Compile targets for kernel builds, from the table's toolkit ranges.

For each capability: SASS for the richest target the toolkit can build (``sm_XYa``
runs only on that exact capability, ``sm_XYf`` on its whole family, ``sm_XY``
everywhere newer in the family), plus PTX for the newest capability so that a future
GPU can JIT-compile it.  A target the toolkit cannot build is an error naming the
minimum (or maximum) CUDA version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Tuple

from ..capability import Capability
from ..profile import ArchProfile, format_version

FORMATS = ("gencode", "torch", "cmake", "flashinfer")


@dataclass(frozen=True)
class Target:
    capability: Capability
    suffix: str  # "a", "f" or ""
    ptx: bool = False

    @property
    def sm(self) -> str:
        return f"{self.capability.sm}{self.suffix}"


@dataclass(frozen=True)
class BuildPlan:
    cuda: Tuple[int, int]
    targets: Tuple[Target, ...]
    notes: Tuple[str, ...]

    def render(self, fmt: str) -> str:
        if fmt not in FORMATS:
            raise ValueError(f"invalid format {fmt!r}; accepted: {', '.join(FORMATS)}")
        if fmt == "gencode":
            flags = []
            for t in self.targets:
                flags.append(f"-gencode=arch=compute_{t.sm},code=sm_{t.sm}")
                if t.ptx:
                    flags.append(f"-gencode=arch=compute_{t.capability.sm},code=compute_{t.capability.sm}")
            return " ".join(flags)
        if fmt == "torch":
            return ";".join(f"{t.capability}{t.suffix}" + ("+PTX" if t.ptx and not t.suffix else "")
                            for t in self.targets) + self._torch_ptx_tail()
        if fmt == "cmake":
            parts = [f"{t.sm}-real" for t in self.targets]
            parts += [f"{t.capability.sm}-virtual" for t in self.targets if t.ptx]
            return ";".join(parts)
        return " ".join(f"{t.capability}{t.suffix}" for t in self.targets)

    def _torch_ptx_tail(self) -> str:
        # torch's list cannot attach +PTX to an 'a'/'f' entry; add the plain one for PTX.
        extra = [t for t in self.targets if t.ptx and t.suffix]
        return "".join(f";{t.capability}+PTX" for t in extra)


def plan_targets(profiles: Iterable[ArchProfile], cuda: Tuple[int, int], *, specific: bool = True) -> BuildPlan:
    """Targets for the given tiers with toolkit ``cuda``.

    ``specific``: prefer ``a``/``f`` targets (the kernels that use wgmma, tcgen05, block-
    scaled FP4); without it, only plain targets are emitted.
    """
    chosen: List[Target] = []
    notes: List[str] = []
    ordered = sorted({p.capability: p for p in profiles}.values(), key=lambda p: p.capability)
    if not ordered:
        raise ValueError("no capability given; pass at least one")
    for profile in ordered:
        cap = profile.capability
        if profile.min_cuda is not None and cuda < profile.min_cuda:
            raise ValueError(f"sm_{cap.sm} needs CUDA >= {format_version(profile.min_cuda)}; "
                             f"toolkit is {format_version(cuda)}")
        if profile.max_cuda is not None and cuda > profile.max_cuda:
            raise ValueError(f"sm_{cap.sm} offline compilation was removed after CUDA {format_version(profile.max_cuda)}; "
                             f"toolkit is {format_version(cuda)}")
        suffix = _best_suffix(profile, cuda) if specific else ""
        if specific and not suffix and (profile.min_cuda_arch_specific or profile.min_cuda_family):
            needed = profile.min_cuda_arch_specific or profile.min_cuda_family
            notes.append(f"sm_{cap.sm}a/f need CUDA >= {format_version(needed)}; plain sm_{cap.sm} only")
        chosen.append(Target(cap, suffix))
    newest = chosen[-1]
    chosen[-1] = Target(newest.capability, newest.suffix, ptx=True)
    return BuildPlan(cuda, tuple(chosen), tuple(notes))


def _best_suffix(profile: ArchProfile, cuda: Tuple[int, int]) -> str:
    if profile.min_cuda_arch_specific is not None and cuda >= profile.min_cuda_arch_specific:
        return "a"
    if profile.min_cuda_family is not None and cuda >= profile.min_cuda_family:
        return "f"
    return ""
