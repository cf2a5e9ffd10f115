"""What ``sglang-arch show`` says about the plugin itself: which decisions are off, and which
hooks keep SGLang's code because the installed SGLang's code is not the code they were
written for.  Read without importing SGLang: its files are located beside the installed
package and each target's definition is compared by its fingerprint (``fingerprint.py``);
the plugin itself checks the same fingerprints, plus each target's shape, when SGLang runs.
"""

from __future__ import annotations

from typing import Any, Dict, List

from . import switches
from .switches import SwitchError

__all__ = ["SwitchError", "read", "lines"]

# (SGLang's package folder, target) -> why the target keeps SGLang's code (None: it is routed).
# SGLang's files are read once a process: reading them is most of `show`'s time.
_CHECKED: Dict[tuple, Any] = {}


def read() -> Dict[str, Any]:
    """The plugin's state on this machine; raises :class:`SwitchError` for an unreadable
    ``SGLANG_ARCH_DISABLE``."""
    import os
    from importlib.metadata import PackageNotFoundError, version

    off = switches.parse(os.environ.get(switches.VARIABLE))
    try:
        installed = version("sglang")
    except PackageNotFoundError:
        installed = None
    kept: List[Dict[str, str]] = []
    total = 0
    if installed is not None:
        from .fingerprint import installed_root
        from .targets import all_targets, file_problem, forget_files

        root = installed_root()
        if root is not None:
            for target in all_targets():
                if switches.decision_of(target.concern) in off:
                    continue
                total += 1
                key = (str(root), installed, target.path)
                if key not in _CHECKED:
                    _CHECKED[key] = file_problem(target)
                if _CHECKED[key]:
                    kept.append({"target": target.path, "reason": _CHECKED[key]})
            forget_files()
    from .known_bodies import SUPPORTED

    return {"disabled": off >= switches.ALL, "decisions_off": [n for n in switches.DECISIONS if n in off],
            "sglang": installed, "written_for": list(SUPPORTED), "hooks_checked": total, "hooks_kept": kept}


def lines(state: Dict[str, Any]) -> List[str]:
    """The lines ``show`` prints under the GPUs (none where everything is routed as written)."""
    out: List[str] = []
    if state["disabled"]:
        return ["  The plugin is off (SGLANG_ARCH_DISABLE): SGLang keeps its own decisions; below, what the "
                "registry would decide."]
    if state["decisions_off"]:
        out.append(f"  Left to SGLang ({switches.VARIABLE}): {', '.join(state['decisions_off'])}; "
                   "the rest is routed.")
    if state["sglang"] is None:
        out.append("  SGLang is not installed here: nothing is routed.")
    elif state["hooks_kept"]:
        out.append(f"  {len(state['hooks_kept'])} of {state['hooks_checked']} hooks keep SGLang's own code "
                   f"(sglang {state['sglang']} found; written for sglang {', '.join(state['written_for'])}):")
        out += [f"    {item['reason']}" for item in state["hooks_kept"]]
    return out
