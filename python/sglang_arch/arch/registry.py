"""Resolution: from a device's capability to the tier whose decisions it takes.

The rule, in order:

1. ``exact``: the capability is in the table.
2. ``family``: same major, the highest known minor below it.  Family-portable features
   (the ``f`` targets) survive; arch-specific ones (wgmma on sm_90a) do not.
3. ``generation``: the highest known capability below it.  Tuned limits survive;
   family and arch-specific features do not.  Logged once per capability.
4. ``portable``: below every known tier.  Every custom path is off.

Resolution never goes upward: a device never takes a newer tier's paths.  ``strict``
turns 2-4 into an error.  An override (a file in the table's schema, or "resolve every
device as X") wins and is reported as ``override``.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from .capability import Capability, CapabilityLike, parse_capability
from .profile import (
    FEATURES,
    ArchProfile,
    TableError,
    build_profile,
    check_unique,
    flatten_entries,
    inherits_of,
)
from .table import ARCHITECTURES
from .validate import (
    MAX_FILE_BYTES,
    MAX_INT_DIGITS,
    MAX_SHOWN_PATH,
    env_bool,
    json_int,
    long_integers,
    read_regular_file,
    shown,
    shown_path,
    toml_long_integers,
    unique_json_keys,
)

logger = logging.getLogger("sglang_arch")

# Strongest first: how much of a tier's code a device keeps under each kind of match.
MATCH_KINDS = ("exact", "override", "family", "generation", "portable")

# Which feature scopes survive each kind of match.
_SURVIVING_SCOPES = {
    "exact": ("portable", "family", "arch"),
    "override": ("portable", "family", "arch"),
    "family": ("portable", "family"),
    "generation": ("portable",),
    "portable": (),
}

ENV_CONFIG = "SGLANG_ARCH_CONFIG"
ENV_RESOLVE_AS = "SGLANG_ARCH_RESOLVE_AS"
ENV_STRICT = "SGLANG_ARCH_STRICT"


class UnknownCapabilityError(ValueError):
    """Raised in strict mode for a capability the table does not list."""


@dataclass(frozen=True)
class Resolution:
    requested: Capability
    profile: ArchProfile
    match: str
    reason: str
    devices: Tuple[Capability, ...] = ()  # every GPU of a mixed node (node_resolution); empty: just ``requested``

    @property
    def identities(self) -> Tuple[Capability, ...]:
        """The capabilities a kernel must have a build for: every GPU this resolution serves."""
        return self.devices or (self.requested,)

    @property
    def resolved(self) -> Capability:
        return self.profile.capability

    def has(self, feature: str) -> bool:
        """Whether a feature may be used on the requested device after fallback."""
        if feature not in FEATURES:
            raise ValueError(f"unknown feature {feature!r}; accepted: {', '.join(FEATURES)}")
        scope = self.profile.features.get(feature)
        return scope is not None and scope in _SURVIVING_SCOPES[self.match]

    @property
    def features(self) -> Dict[str, bool]:
        return {name: self.has(name) for name in FEATURES}

    @property
    def keeps_family_code(self) -> bool:
        """Whether code built for the tier's family (``f`` targets) runs on the device."""
        return self.match in ("exact", "family", "override")


def _portable_profile(cap: Capability) -> ArchProfile:
    return ArchProfile(capability=cap, name="portable", topology="pcie", sources=("registry rule 4",))


class Registry:
    """An immutable set of tiers plus the resolution rule.  Resolutions are cached."""

    def __init__(
        self,
        profiles: Mapping[Capability, ArchProfile],
        *,
        overridden: Tuple[Capability, ...] = (),
        override_source: Optional[str] = None,
        resolve_as: Optional[Capability] = None,
        strict: bool = False,
        inherited: Optional[Mapping[Capability, Capability]] = None,
    ) -> None:
        if not profiles:
            raise ValueError("a registry needs at least one architecture")
        if resolve_as is not None and resolve_as not in profiles:
            known = ", ".join(str(c) for c in sorted(profiles))
            raise ValueError(f"{ENV_RESOLVE_AS}={resolve_as} is not a known tier; accepted: {known}")
        self._profiles = dict(profiles)
        self._known = tuple(sorted(profiles))
        self._overridden = frozenset(overridden)
        self._override_source = override_source
        self._resolve_as = resolve_as
        self._inherited = dict(inherited or {})  # tier -> the overridden ancestor it takes fields from
        self.strict = strict
        self._resolve_cached = functools.lru_cache(maxsize=256)(self._resolve)

    def with_strict(self, strict: bool) -> "Registry":
        """The same tiers and overrides with strict mode set as asked."""
        if strict == self.strict:
            return self
        return Registry(self._profiles, overridden=tuple(self._overridden), override_source=self._override_source,
                        resolve_as=self._resolve_as, strict=strict, inherited=self._inherited)

    @property
    def known(self) -> Tuple[Capability, ...]:
        return self._known

    def profile(self, cap: CapabilityLike) -> ArchProfile:
        cap = parse_capability(cap)
        if cap not in self._profiles:
            raise KeyError(cap)
        return self._profiles[cap]

    def resolve(self, cap: CapabilityLike) -> Resolution:
        return self._resolve_cached(parse_capability(cap))

    def _resolve(self, cap: Capability) -> Resolution:
        if self._resolve_as is not None:
            return Resolution(cap, self._profiles[self._resolve_as], "override",
                              f"{ENV_RESOLVE_AS}={self._resolve_as}: every device resolves as {self._resolve_as}")
        if cap in self._profiles:
            if cap in self._overridden:
                return Resolution(cap, self._profiles[cap], "override",
                                  f"{cap} is defined by the override file {self._override_source}")
            if cap in self._inherited:
                return Resolution(cap, self._profiles[cap], "override",
                                  f"{cap} inherits from {self._inherited[cap]}, which the override file "
                                  f"{self._override_source} patches")
            return Resolution(cap, self._profiles[cap], "exact", f"{cap} is a known tier")
        below = [k for k in self._known if k < cap]
        same_major = [k for k in below if k.major == cap.major]
        if same_major:
            tier = same_major[-1]
            res = Resolution(cap, self._profiles[tier], "family",
                             f"{cap} is unknown; nearest lower tier of the same family is {tier} "
                             f"(family features kept, arch-specific features dropped)")
        elif below:
            tier = below[-1]
            res = Resolution(cap, self._profiles[tier], "generation",
                             f"{cap} is unknown and has no known tier in family {cap.major}; nearest lower "
                             f"tier is {tier} (its tuned limits kept, family and arch-specific features dropped)")
        else:
            res = Resolution(cap, _portable_profile(cap), "portable",
                             f"{cap} is older than every known tier ({self._known[0]}); every custom path is off")
        if self.strict:
            known = ", ".join(str(c) for c in self._known)
            raise UnknownCapabilityError(
                f"strict mode: {cap} is not a known tier (would resolve as {res.match} of {res.resolved}); "
                f"known tiers: {known}; add it to the table or an override file ({ENV_CONFIG})")
        if res.match in ("generation", "portable"):
            logger.warning("sglang-arch: %s", res.reason)
        return res


# Fields whose null is a value of the schema: ``inherits`` (same as none), ``max_cuda``
# (no upper bound), ``custom_ar_v2_table`` (SGLang's conservative default table).  Any
# other field given as null was read as "nothing" (no features, no symm-mem sizes):
# leaving the field out is how an entry keeps the tier's value.
NULLABLE_FIELDS = frozenset({"inherits", "max_cuda", "custom_ar_v2_table"})


def _no_null_fields(entry: Mapping, where: str) -> None:
    for field, value in entry.items():
        if value is None and field not in NULLABLE_FIELDS:
            raise TableError(f"{where}: field {shown(field)} is null; accepted: a value, or leave the field out "
                             f"to keep the tier's (null is a value only for {', '.join(sorted(NULLABLE_FIELDS))})")


def build_registry(
    overrides: Optional[Mapping[str, Mapping]] = None,
    *,
    override_source: str = "<overrides>",
    resolve_as: Optional[CapabilityLike] = None,
    strict: bool = False,
) -> Registry:
    """The shipped table, optionally patched by override entries in the same schema.

    An override entry for a known capability patches the fields it names (``inherits``
    absent or null); with ``inherits`` it is rebuilt from that tier plus its own fields.
    An entry for a new capability is added (it may ``inherits`` from any tier).  A tier
    that inherits from an overridden one takes the patch and is reported as ``override``.
    """
    raw: Dict[str, Mapping] = {str(parse_capability(k)): v for k, v in ARCHITECTURES.items()}
    overridden: Tuple[Capability, ...] = ()
    if overrides is not None and not isinstance(overrides, Mapping):
        raise TableError(f"{override_source}: expected a table of capability -> fields, got {shown(overrides)}")
    if overrides:
        flat_base = flatten_entries(raw, "built-in table")
        spelled: Dict[Capability, Any] = {}
        for key, entry in overrides.items():
            try:
                cap = parse_capability(key)
            except ValueError as exc:
                raise TableError(f"{override_source}: {exc}") from None
            if not isinstance(entry, Mapping):
                raise TableError(f"{override_source}: entry {shown(key)} must be a table of fields, "
                                 f"got {type(entry).__name__}")
            check_unique(spelled, cap, key, override_source)
            _no_null_fields(entry, f"{override_source}: entry {cap}")
            patches = inherits_of(entry, f"{override_source}: entry {cap}") is None
            base = dict(flat_base.get(cap, {})) if patches else {}
            base.pop("lead", None)
            raw[str(cap)] = {**base, **{k: v for k, v in entry.items() if not (k == "inherits" and v is None)}}
            overridden += (cap,)
    where = override_source if overrides else "built-in table"
    flat = flatten_entries(raw, where)
    profiles = {cap: build_profile(cap, fields, where) for cap, fields in flat.items()}
    cap_as = parse_capability(resolve_as) if resolve_as is not None else None
    return Registry(profiles, overridden=overridden, override_source=override_source,
                    resolve_as=cap_as, strict=strict, inherited=_inherited_overrides(raw, overridden))


def _inherited_overrides(raw: Mapping[str, Mapping], overridden: Tuple[Capability, ...]) -> Dict[Capability, Capability]:
    """Each tier that is not overridden itself but inherits from one that is -> that ancestor."""
    parents = {}
    for key, entry in raw.items():
        parent = entry.get("inherits") if isinstance(entry, Mapping) else None
        if isinstance(parent, str):
            parents[parse_capability(key)] = parse_capability(parent)
    out: Dict[Capability, Capability] = {}
    for cap in parents:
        if cap in overridden:
            continue
        seen = {cap}
        parent = parents.get(cap)
        while parent is not None and parent not in seen:  # flatten_entries has refused cycles already
            if parent in overridden:
                out[cap] = parent
                break
            seen.add(parent)
            parent = parents.get(parent)
    return out


def env_config_label(path: str) -> str:
    """How errors and reasons name the file of ``SGLANG_ARCH_CONFIG``: the variable and its
    value, quoted, control characters escaped, cut at MAX_SHOWN_PATH (``validate.shown``)."""
    return f"{ENV_CONFIG}={shown(path, MAX_SHOWN_PATH)}"


def load_override_file(path: str, label: Optional[str] = None) -> Dict[str, Mapping]:
    """Read an override file: TOML (``.toml``, any case) or JSON (anything else).

    Only a regular file of at most 1 MiB is read, without blocking (``validate.py``);
    the document must be a table of capability -> table of fields, optionally under
    ``architectures``.  Every field is checked later, when the profiles are built.
    Errors start with ``label`` (default: the path, escaped where it is not printable).
    """
    where = label or shown_path(path)
    try:
        data = read_regular_file(path)
    except OSError as exc:
        raise TableError(f"{where}: cannot read override file: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise TableError(f"{where}: cannot read override file: {exc}; accepted: a regular file of at most "
                         f"{MAX_FILE_BYTES} bytes") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TableError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if str(path).lower().endswith(".toml"):
        parsed = _parse_toml(where, text)
    else:
        parsed = _parse_json(where, text)
    if not isinstance(parsed, dict):
        raise TableError(f"{where}: expected a table of capability -> fields at the top level, got {type(parsed).__name__}")
    if "architectures" in parsed:
        if len(parsed) != 1:
            extra = sorted(str(k) for k in parsed if k != "architectures")
            raise TableError(f"{where}: unknown top-level key(s) {[shown(k) for k in extra[:3]]} beside "
                             f"'architectures'; accepted: 'architectures' alone, or capability keys")
        parsed = parsed["architectures"]
        if not isinstance(parsed, dict):
            raise TableError(f"{where}: field 'architectures': expected a table of capability -> fields, "
                             f"got {type(parsed).__name__}")
    # TOML keys such as "12.0" must be quoted; an unquoted 12.0 becomes nested {"12": {"0": ..}}.
    return {str(k): v for k, v in parsed.items()}


def _parse_toml(path: str, text: str):
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # pragma: no cover - Python 3.10
        raise TableError(f"{path}: TOML needs Python 3.11+; write the file as JSON") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TableError(f"{path}: not valid TOML: {_one_line(exc)}") from None
    except RecursionError:
        raise TableError(f"{path}: not valid TOML: nested too deeply") from None
    except ValueError as exc:  # an integer past Python's digit limit: the field refuses it by name
        marked = toml_long_integers(text)
        if marked is not None:
            try:
                return long_integers(tomllib.loads(marked))
            except (ValueError, RecursionError):
                pass
        raise TableError(f"{path}: not valid TOML: {_one_line(exc)}; accepted: integers of at most "
                         f"{MAX_INT_DIGITS} digits") from None


def _parse_json(path: str, text: str):
    import json

    def constant(name: str):
        raise ValueError(f"{name} is not a number JSON allows")

    def number(literal: str) -> float:
        value = float(literal)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"number {literal[:20]} is out of range")
        return value

    try:
        return json.loads(text, parse_constant=constant, parse_float=number, parse_int=json_int,
                          object_pairs_hook=unique_json_keys)
    except RecursionError:
        raise TableError(f"{path}: not valid JSON: nested too deeply") from None
    except ValueError as exc:
        raise TableError(f"{path}: not valid JSON: {_one_line(exc)}") from None


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def env_flag(name: str) -> bool:
    """A boolean environment variable (``validate.env_bool``: one parser for all)."""
    return env_bool(name)


_default_lock = threading.Lock()
_default: list = []  # [Registry] once built: single-flight, see default_registry()


def default_registry() -> Registry:
    """The registry this process uses: the table plus what the environment asks for.

    Built once (single-flight: concurrent first calls wait for one build and share it).
    """
    if _default:
        return _default[0]
    with _default_lock:
        if not _default:
            _default.append(_build_default())
        return _default[0]


def _build_default() -> Registry:
    path = os.environ.get(ENV_CONFIG) or None
    label = env_config_label(path) if path else "<none>"
    overrides = load_override_file(path, label) if path else None
    resolve_as = os.environ.get(ENV_RESOLVE_AS) or None
    if resolve_as is not None:
        try:
            parse_capability(resolve_as)
        except ValueError as exc:
            raise ValueError(f"{ENV_RESOLVE_AS}: {exc}") from None
    return build_registry(overrides, override_source=label, resolve_as=resolve_as,
                          strict=env_flag(ENV_STRICT))


def reset_default_registry() -> None:
    """Forget the environment-derived registry (tests, and after changing the env)."""
    with _default_lock:
        _default.clear()


default_registry.cache_clear = reset_default_registry  # type: ignore[attr-defined]  # the former lru_cache API


def resolve(cap: CapabilityLike, *, strict: Optional[bool] = None) -> Resolution:
    """Resolve with the process registry; ``strict`` overrides the environment's choice."""
    registry = default_registry()
    return (registry if strict is None else registry.with_strict(strict)).resolve(cap)
