"""Platform probes answered by the registry (``get_platform().is_sm90`` and friends).

``sglang.srt.runtime_context.get_platform()`` reads the probes in
``sglang.srt.utils.common`` at call time; routing them makes every ``is_sm*`` fact,
``device_capability`` and ``device_sm`` report the resolved tier, so a GPU SGLang does
not know yet takes its nearest tier's paths instead of none.  On a known GPU the
answers equal SGLang's own (the registry's platform policy uses the same majors and
CUDA minimums).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from . import fail_open, routed_context


@fail_open
def fact(name: str) -> Optional[Any]:
    """The registry's value of platform fact ``name``; None: SGLang's probe decides."""
    ctx = routed_context()
    if ctx is None:
        return None
    return ctx.facts.get(name)


def routed_probe(name: str, probe: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap one of SGLang's cached probes so the registry answers fact ``name`` first.

    The registry is asked on every call (one cached look-up), so a process that
    re-resolves its machine sees the new answer; SGLang's own cached probe answers
    whenever the registry has nothing to say.
    """

    def routed(*args: Any, **kwargs: Any) -> Any:
        answer = fact(name)
        return probe(*args, **kwargs) if answer is None else answer

    routed.__name__ = routed.__qualname__ = f"routed_probe_{name}"
    routed.__doc__ = (
        f"Platform fact {name!r}: the registry's answer, else SGLang's own probe."
    )
    routed.__wrapped__ = probe  # type: ignore[attr-defined]
    # Callers that reset SGLang's cached probe keep working.
    for attr in ("cache_clear", "cache_info"):
        if hasattr(probe, attr):
            setattr(routed, attr, getattr(probe, attr))
    return routed
