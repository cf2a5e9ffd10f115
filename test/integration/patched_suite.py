"""The decision suite on a tree patched by ``sglang-arch upstream``, with no plugin.

A patched tree no longer routes SGLang's platform probes (the registry's platform facts
are the device's own identity, equal to SGLang's probes: docs/fallback.md), so SGLang's
probes must see the simulated GPU the way they would see a real one: each machine's facts
are given to SGLang through its own ``override_platform``, computed by SGLang 0.5.23's
rule for that capability (``upstream_platform_facts``, the same the ``upstream`` mode
uses), while the registry is simulated as in the ``routed`` mode
(``SGLANG_ARCH_CAPABILITY`` ...).  Everything else is ``decision_suite.run_suite``.

Run with the patched tree first on ``PYTHONPATH`` and ``SGLANG_ARCH_DISABLE=1``,
``SGLANG_PLUGINS=none``; prints one JSON object like ``decision_suite.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import decision_suite  # noqa: E402
from sglang_arch.arch import parse_capability  # noqa: E402
from sglang_arch.integrations.sglang.plan import upstream_platform_facts  # noqa: E402


def main() -> int:
    import sglang.srt.runtime_context as runtime_context

    own = runtime_context.override_platform

    def override_platform(**facts):
        cap = os.environ.get("SGLANG_ARCH_CAPABILITY")
        merged = dict(upstream_platform_facts(parse_capability(cap), decision_suite.CUDA_VERSION)) if cap else {}
        merged.update(facts)
        return own(**merged)

    runtime_context.override_platform = override_platform
    result = decision_suite.run_suite("routed", "sglang.srt.arch.runtime")
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
