"""Glue between SGLang's call sites and the GPU architecture registry.

Each routed call site asks one function of this package before running its own code
and gets either the registry's answer or ``None``.  ``None`` means "SGLang's own code
decides": that is the answer without an NVIDIA GPU (no resolution), off CUDA, and,
logged once, when the glue itself fails unexpectedly, so routing is never the reason a
server fails.  ``ArchDecisionError`` is the one error raised on purpose: a user choice
the registry knows cannot run on this GPU.

The same modules serve both ways of routing SGLang:

- the sglang-arch plugin, whose AROUND hooks (``integrations/sglang/hooks.py``) call a
  glue function and, on ``None``, SGLang's original;
- a tree patched by ``sglang-arch upstream``, which copies this package to
  ``sglang/srt/arch/glue/`` and inserts the same guard at the top of each routed
  function, with SGLang's body below it as the fallback.

So that the copy works unchanged inside SGLang, these modules import nothing from
sglang-arch but the registry (``....arch``, rewritten to ``..`` by the copier) and each
other, import SGLang only inside functions or through ``sys.modules`` (the plugin
imports them before SGLang is loaded; in the tree they are imported while SGLang's own
modules still load), and are formatted as SGLang formats (black, 88 columns).
``test_glue.py`` checks all three.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Optional, Set, TypeVar

from ....arch.runtime import MachineContext, current

logger = logging.getLogger(__name__)

# The registry this glue asks, as messages name it ("sglang.srt.arch" inside SGLang).
REGISTRY = current.__module__.rpartition(".")[0]

F = TypeVar("F", bound=Callable[..., Any])


class ArchDecisionError(ValueError):
    """A user choice the registry knows cannot run here; raised on purpose."""


def routed_context() -> Optional[MachineContext]:
    """This process's machine when the registry decides; ``None`` when SGLang should."""
    ctx = current()
    return None if ctx.resolution is None else ctx


_warned: Set[str] = set()


def fail_open(fn: F) -> F:
    """Answer ``None`` (SGLang decides) when ``fn`` fails unexpectedly; warn once."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ArchDecisionError:
            raise
        except Exception as exc:  # routing must never break the server
            name = f"{fn.__module__}.{fn.__qualname__}"
            if name not in _warned:
                _warned.add(name)
                logger.warning(
                    "%s failed (%s: %s); SGLang's own code decides",
                    name,
                    type(exc).__name__,
                    exc,
                )
            return None

    return guarded  # type: ignore[return-value]
