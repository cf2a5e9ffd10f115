"""Compute capabilities: one value type and one parser for every spelling people use.

Users type ``12.0``, tools print ``sm_120a``, torch returns ``(12, 0)`` and NVML two
integers.  All of them become a :class:`Capability`; anything else is a ``ValueError``
that names the input and the accepted forms, so the CLI never shows a traceback or a
``KeyError`` for a typo.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Tuple, Union

from .validate import shown

ACCEPTED_FORMS = (
    "(12, 0) or '(12, 0)', '12.0', '12', 'sm_120', 'sm120a', 'sm_100f', 'compute_90a', '120' or 120 "
    "(ASCII digits; major 0-99, minor 0-9; a bare number up to 29 is a major, from 30 on an sm number)"
)

MAX_MAJOR = 99
# A bare number up to this is read as a major ("9", "12"); above it as an sm number
# ("90", "120").  No major above 29 is plausible for decades, and no sm number below 30.
_LARGEST_BARE_MAJOR = 29

# ASCII digits only: ``\d`` would also take "１２.０" (full-width) or Arabic-Indic digits.
_SM_RE = re.compile(r"(?:sm|compute)_?([0-9]{2,3})([af]?)")
_DOTTED_RE = re.compile(r"([0-9]{1,2})\.([0-9])")
_DIGITS_RE = re.compile(r"[0-9]{1,3}")
_PAIR_RE = re.compile(r"\(\s*([0-9]{1,2})\s*,\s*([0-9])\s*\)")  # "(12, 0)", as torch prints it
_MAX_TEXT = 40  # no spelling is longer; longer input is refused before any matching

CapabilityLike = Union["Capability", Tuple[int, int], str, int]


@dataclass(frozen=True, order=True)
class Capability:
    """A CUDA compute capability ``major.minor``; ordered like the hardware generations."""

    major: int
    minor: int

    def __post_init__(self) -> None:
        if isinstance(self.major, bool) or isinstance(self.minor, bool):
            raise ValueError(f"capability parts must be integers, got {shown(self.major)}.{shown(self.minor)}")
        if not isinstance(self.major, int) or not isinstance(self.minor, int):
            raise ValueError(f"capability parts must be integers, got {shown(self.major)}.{shown(self.minor)}")
        if not 0 <= self.major <= MAX_MAJOR or not 0 <= self.minor <= 9:
            raise ValueError(
                f"capability {self.major}.{self.minor} is out of range; accepted: {ACCEPTED_FORMS}"
            )

    @property
    def sm(self) -> int:
        """The integer used in ``sm_XY`` names, e.g. 120 for 12.0."""
        return self.major * 10 + self.minor

    def as_tuple(self) -> Tuple[int, int]:
        return (self.major, self.minor)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def parse_capability(value: CapabilityLike) -> Capability:
    """Turn any accepted spelling into a :class:`Capability`.

    An ``a`` or ``f`` suffix (``sm_90a``, ``sm_100f``) names a compile target, not a
    different device, so it is accepted and dropped.
    """
    if isinstance(value, Capability):
        return value
    if isinstance(value, bool):
        raise _bad(value)
    if isinstance(value, int):
        return _from_number(value, value)
    if isinstance(value, (tuple, list)):
        if len(value) != 2 or not all(isinstance(p, int) and not isinstance(p, bool) for p in value):
            raise _bad(value)
        try:
            return Capability(int(value[0]), int(value[1]))
        except ValueError:
            raise _bad(value) from None
    if isinstance(value, str) and len(value) <= _MAX_TEXT:
        text = value.strip().lower()
        m = _DOTTED_RE.fullmatch(text) or _PAIR_RE.fullmatch(text)
        if m:
            return _checked(value, int(m.group(1)), int(m.group(2)))
        m = _SM_RE.fullmatch(text)
        if m:
            return _checked(value, int(m.group(1)) // 10, int(m.group(1)) % 10)
        if _DIGITS_RE.fullmatch(text):
            return _from_number(int(text), value)
    raise _bad(value)


def _from_number(number: int, original: object) -> Capability:
    if number < 0:
        raise _bad(original)
    if number <= _LARGEST_BARE_MAJOR:
        return _checked(original, number, 0)
    return _checked(original, number // 10, number % 10)


def _checked(original: object, major: int, minor: int) -> Capability:
    try:
        return Capability(major, minor)
    except ValueError:
        raise _bad(original) from None


def _bad(value: object) -> ValueError:
    return ValueError(f"invalid compute capability {shown(value)}; accepted: {ACCEPTED_FORMS}")
