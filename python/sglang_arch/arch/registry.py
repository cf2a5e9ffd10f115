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
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from .capability import Capability, CapabilityLike, parse_capability
from .profile import FEATURES, ArchProfile, TableError, build_profile, flatten_entries
from .table import ARCHITECTURES

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
        self.strict = strict
        self._resolve_cached = functools.lru_cache(maxsize=256)(self._resolve)

    def with_strict(self, strict: bool) -> "Registry":
        """The same tiers and overrides with strict mode set as asked."""
        if strict == self.strict:
            return self
        return Registry(self._profiles, overridden=tuple(self._overridden), override_source=self._override_source,
                        resolve_as=self._resolve_as, strict=strict)

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


def build_registry(
    overrides: Optional[Mapping[str, Mapping]] = None,
    *,
    override_source: str = "<overrides>",
    resolve_as: Optional[CapabilityLike] = None,
    strict: bool = False,
) -> Registry:
    """The shipped table, optionally patched by override entries in the same schema.

    An override entry for a known capability patches its fields; an entry for a new
    capability is added (it may ``inherits`` from any tier).
    """
    raw: Dict[str, Mapping] = {str(parse_capability(k)): v for k, v in ARCHITECTURES.items()}
    overridden: Tuple[Capability, ...] = ()
    if overrides:
        if not isinstance(overrides, Mapping):
            raise TableError(f"{override_source}: expected a table of capability -> fields")
        flat_base = flatten_entries(raw, "built-in table")
        for key, entry in overrides.items():
            try:
                cap = parse_capability(key)
            except ValueError as exc:
                raise TableError(f"{override_source}: {exc}") from None
            if not isinstance(entry, Mapping):
                raise TableError(f"{override_source}: entry {key!r} must be a table of fields")
            base = dict(flat_base.get(cap, {})) if "inherits" not in entry else {}
            base.pop("lead", None)
            raw[str(cap)] = {**base, **entry}
            overridden += (cap,)
    where = override_source if overrides else "built-in table"
    flat = flatten_entries(raw, where)
    profiles = {cap: build_profile(cap, fields, where) for cap, fields in flat.items()}
    cap_as = parse_capability(resolve_as) if resolve_as is not None else None
    return Registry(profiles, overridden=overridden, override_source=override_source,
                    resolve_as=cap_as, strict=strict)


def load_override_file(path: str) -> Dict[str, Mapping]:
    """Read an override file: TOML (``.toml``) or JSON (anything else)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise TableError(f"{path}: cannot read override file: {exc.strerror}") from None
    if path.endswith(".toml"):
        try:
            import tomllib  # Python 3.11+
        except ImportError:  # pragma: no cover - Python 3.10
            raise TableError(f"{path}: TOML needs Python 3.11+; write the file as JSON") from None
        try:
            parsed = tomllib.loads(data.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise TableError(f"{path}: not valid TOML: {exc}") from None
    else:
        import json

        try:
            parsed = json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise TableError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise TableError(f"{path}: expected a table of capability -> fields at the top level")
    # TOML keys such as "12.0" must be quoted; an unquoted 12.0 becomes nested {"12": {"0": ..}}.
    return {str(k): v for k, v in parsed.get("architectures", parsed).items()}


def env_flag(name: str) -> bool:
    value = os.environ.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{name}={os.environ[name]!r} is not a boolean; accepted: 1/0, true/false, yes/no, on/off")


@functools.lru_cache(maxsize=1)
def default_registry() -> Registry:
    """The registry this process uses: the table plus what the environment asks for."""
    path = os.environ.get(ENV_CONFIG) or None
    overrides = load_override_file(path) if path else None
    resolve_as = os.environ.get(ENV_RESOLVE_AS) or None
    if resolve_as is not None:
        try:
            parse_capability(resolve_as)
        except ValueError as exc:
            raise ValueError(f"{ENV_RESOLVE_AS}: {exc}") from None
    return build_registry(overrides, override_source=path or "<none>", resolve_as=resolve_as,
                          strict=env_flag(ENV_STRICT))


def reset_default_registry() -> None:
    """Forget the environment-derived registry (tests, and after changing the env)."""
    default_registry.cache_clear()


def resolve(cap: CapabilityLike, *, strict: Optional[bool] = None) -> Resolution:
    """Resolve with the process registry; ``strict`` overrides the environment's choice."""
    registry = default_registry()
    return (registry if strict is None else registry.with_strict(strict)).resolve(cap)
