"""Platform probes answered by the registry (``get_platform().is_sm90`` and friends).

``sglang.srt.runtime_context.get_platform()`` reads the probes in
``sglang.srt.utils.common`` at call time.  They are identity (docs/fallback.md): every
``is_sm*`` fact, ``device_capability`` and ``device_sm`` describes the device itself,
with SGLang 0.5.23's own (majors, minimum CUDA) rule, so on a real GPU the answers equal
SGLang's probes on every capability, known or not, and agree with every site that reads
torch directly.  Routing them gives every process one cached answer, and lets a GPU
simulated through the registry (``SGLANG_ARCH_CAPABILITY``) look like that GPU to SGLang.
A fallback changes decisions at the decision sites, never these.
"""

from __future__ import annotations

from typing import Any, Optional

from . import device_context, fail_open


@fail_open
def fact(name: str) -> Optional[Any]:
    """The registry's value of platform fact ``name``; None: SGLang's probe decides."""
    ctx = device_context()  # the probes themselves: what an override starts from
    if ctx is None:
        return None
    return ctx.facts.get(name)
