"""What ``sglang-arch show`` and ``sglang-arch check`` say about the plugin itself: whether
SGLang loads it here, which decisions are off, and which hooks keep SGLang's code because
the installed SGLang's code is not the code they were written for.  Read without importing
SGLang: its version from the installed package's metadata, its files located beside the
installed package and each target's definition compared by its fingerprint
(``fingerprint.py``); the plugin itself checks the same fingerprints, plus each target's
shape, when SGLang runs.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import switches
from .switches import SwitchError

__all__ = ["SwitchError", "read", "lines", "why_not_loaded", "kept_summary", "ENTRY_POINT_GROUP"]

# SGLang's entry-point group for general plugins, and this plugin's name in it.
ENTRY_POINT_GROUP = "sglang.srt.plugins"
PLUGIN_NAME = "sglang_arch"

# (SGLang's package folder, target) -> why the target keeps SGLang's code (None: it is routed).
# SGLang's files are read once a process: reading them is most of `show`'s time.
_CHECKED: Dict[tuple, Any] = {}


def _entry_point() -> bool:
    """Whether the installed distributions register this plugin in SGLang's group (read from
    their metadata, as SGLang's loader reads it)."""
    from importlib.metadata import entry_points

    try:
        return any(ep.name == PLUGIN_NAME for ep in entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # a broken distribution's metadata: not SGLang's problem to report here
        return False


def _allowed() -> bool:
    """``SGLANG_PLUGINS`` read as SGLang's loader reads it (``_sglang_arch_early``)."""
    import _sglang_arch_early as early

    return early.allowed_by_sglang()


def _early_hook() -> bool:
    """Whether the start-up hook (``sglang_arch_early.pth``) ran in this interpreter, as it runs
    in every interpreter SGLang starts from the same environment."""
    try:
        import _sglang_arch_early as early
    except ImportError:
        return False
    return early.installed()


def read(*, strict: bool = True) -> Dict[str, Any]:
    """The plugin's state on this machine.  ``strict``: raise :class:`SwitchError` for an
    unreadable ``SGLANG_ARCH_DISABLE`` (``show``); else report it (``check``: inside SGLang
    it keeps the plugin out)."""
    import os
    from importlib.metadata import PackageNotFoundError, version

    switch_problem: Optional[str] = None
    try:
        off = switches.parse(os.environ.get(switches.VARIABLE))
    except SwitchError as exc:
        if strict:
            raise
        switch_problem, off = str(exc), switches.ALL
    try:
        installed: Optional[str] = version("sglang")
    except PackageNotFoundError:
        installed = None
    kept: List[Dict[str, str]] = []
    total = 0
    per_concern: Dict[str, Dict[str, int]] = {}
    if installed is not None:
        from .fingerprint import installed_root
        from .targets import all_targets, file_problem, forget_files

        root = installed_root()
        if root is not None:
            for target in all_targets():
                decision = switches.decision_of(target.concern)
                if decision in off:
                    continue
                total += 1
                counts = per_concern.setdefault(target.concern, {"hooks": 0, "routed": 0})
                counts["hooks"] += 1
                key = (str(root), installed, target.path)
                if key not in _CHECKED:
                    _CHECKED[key] = file_problem(target)
                if _CHECKED[key]:
                    kept.append({"target": target.path, "module": target.module, "concern": target.concern,
                                 "decision": decision, "reason": _CHECKED[key]})
                else:
                    counts["routed"] += 1
            forget_files()
    from .known_bodies import SUPPORTED

    allowed = _allowed()
    registered = _entry_point()
    state = {"disabled": off >= switches.ALL, "decisions_off": [n for n in switches.DECISIONS if n in off],
             "switch_problem": switch_problem, "allowed_by_sglang_plugins": allowed,
             "sglang_plugins": os.environ.get("SGLANG_PLUGINS"), "entry_point": registered,
             "early_hook": _early_hook(), "sglang": installed, "written_for": list(SUPPORTED),
             "supported": installed in SUPPORTED, "hooks_checked": total,
             "hooks_routed": total - len(kept), "hooks_kept": kept, "concerns": per_concern}
    state["not_loaded"] = why_not_loaded(state)
    return state


def why_not_loaded(state: Dict[str, Any]) -> Optional[str]:
    """Why SGLang will not run the plugin here (one line), or None where it will."""
    if state.get("switch_problem"):
        return f"{state['switch_problem']} (inside SGLang this value keeps the plugin out)"
    if state["disabled"]:
        return f"{switches.VARIABLE} turns every decision off: SGLang decides everything"
    if state["sglang"] is None:
        return "SGLang is not installed in this environment"
    if not state.get("entry_point", True):
        return (f"no distribution here registers the {PLUGIN_NAME} entry point in {ENTRY_POINT_GROUP} "
                f"(pip install sglang-arch into SGLang's environment)")
    if not state.get("allowed_by_sglang_plugins", True):
        shown = state.get("sglang_plugins") or ""
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return (f"SGLANG_PLUGINS={shown!r} does not name {PLUGIN_NAME}: SGLang's loader skips the plugin "
                f"(add {PLUGIN_NAME} to the list, or unset it)")
    return None


def kept_summary(state: Dict[str, Any]) -> List[str]:
    """The reasons hooks keep SGLang's code, each once: hooks of one module that cannot be
    found make one line with their count, identical reasons one line."""
    out: Dict[str, int] = {}
    for item in state["hooks_kept"]:
        out[item["reason"]] = out.get(item["reason"], 0) + 1
    return [reason if count == 1 else f"{reason} ({count} hooks)" for reason, count in out.items()]


# ``show``'s rows -> the targets' concerns (``targets.Target.concern``) whose hooks carry them;
# a row not listed is carried by the concern of its own name.  test_check.py checks that every
# row ``show`` prints maps to concerns the plugin has.
ROW_CONCERNS: Dict[str, tuple] = {
    "custom all-reduce": ("custom all-reduce v2",),
    # the path of each phase and the evidence behind a difference: the collectives that decide them
    "all-reduce path": ("custom all-reduce v2", "PCIe-IPC all-reduce", "torch symm mem"),
    "evidence": ("PCIe-IPC all-reduce", "torch symm mem", "all-reduce fusion"),
    "attention MHA": ("attention backend",),
    "attention MLA": ("attention backend",),
    "deterministic MHA": ("attention backend",),
    "deterministic MLA": ("attention backend",),
    "DSA FP8 KV cache": ("DSA attention",),
    "DSA bf16 KV cache": ("DSA attention",),
    "hybrid linear draft": ("speculative draft attention",),
    "tuned GEMM paths": ("BF16 GEMV window", "BF16 GEMM tuned table", "Muse Spark router GEMV",
                         "Nemotron-H prefill overlap", "single-batch overlap", "Qwen decode MoE fusion",
                         "Marlin LoRA MoE decode", "LoRA MoE CuTe DSL tiles", "Muse Spark GEMM + all-gather",
                         "Muse Spark finalize AR"),
    "DeepSeek-V4.1 auto": ("DeepSeek-V4 attention",),
    "MiniCPM sparse": ("MiniCPM sparse attention",),
    "M3.1 NVFP4 arm": ("MiniMax-M3 NVFP4 arm",),
    "FP8 dense scales": ("FP8 UE8M0 requant",),
    "DeepSeek-V4 paths": ("DeepSeek-V4 kernel paths",),
    "fused QKV-A GEMM auto": ("Fused QKV-A GEMM",),
    "FlashInfer FP4 quantize": ("FlashInfer quantize backend",),
    "FlashInfer MXFP8 quantize": ("FlashInfer quantize backend",),
    "FP8 block GEMM": ("FP8 GEMM backend",),
    "FP4 GEMM": ("FP4 GEMM backend",),
    "DeepSeek-V4.1 indexer": ("DeepSeek-V4 kernel paths",),
    "V4.1 index logits": ("DeepSeek-V4.1 index logits",),
}


def row_concerns(label: str) -> tuple:
    if label.startswith("MoE runner"):
        return ("MoE runner",)
    return ROW_CONCERNS.get(label, (label,))


def effect(state: Dict[str, Any], concerns) -> str:
    """Whether the hooks of ``concerns`` take effect here: ``routed``, ``SGLang's`` (the plugin
    not loaded, the decision off, or every hook kept), ``part: R of N hooks``; ``-`` where no
    hook of them was read (SGLang is not installed)."""
    if state.get("not_loaded") or all(switches.decision_of(c) in state["decisions_off"] for c in concerns):
        return "SGLang's"
    counted = [state["concerns"][c] for c in concerns if c in state["concerns"]]
    hooks, routed = sum(c["hooks"] for c in counted), sum(c["routed"] for c in counted)
    if not hooks:
        return "-"
    if routed == hooks:
        return "routed"
    if routed == 0:
        return "SGLang's"
    return f"part: {routed} of {hooks} hooks"


def row_effect(state: Dict[str, Any], label: str) -> str:
    """:func:`effect` for one of ``show``'s rows."""
    return effect(state, row_concerns(label))


def decision_effect(state: Dict[str, Any], decision: str) -> str:
    """:func:`effect` for one of ``SGLANG_ARCH_DISABLE``'s decisions (all its concerns)."""
    return effect(state, switches.DECISIONS[decision])


def lines(state: Dict[str, Any], verbose: bool = False, width: int = 100) -> List[str]:
    """The lines ``show`` prints under the GPUs: whether SGLang loads the plugin, on which
    release, and how many hooks route (every kept reason once with ``verbose``)."""
    import textwrap

    def wrap(text: str, indent: str = "  ", more: str = "    ") -> List[str]:
        return textwrap.wrap(text, width=width, initial_indent=indent, subsequent_indent=more,
                             break_on_hyphens=False)

    out: List[str] = []
    if state["not_loaded"]:
        return wrap(f"The plugin is not loaded here: {state['not_loaded']}. Below, what the registry would "
                    f"decide.")
    if state["decisions_off"]:
        out += wrap(f"Left to SGLang ({switches.VARIABLE}): {', '.join(state['decisions_off'])}; the rest is "
                    f"routed.")
    supported = "supported" if state["supported"] else (
        f"not supported; written for {', '.join(state['written_for'])}")
    out += wrap(f"Plugin: loads here; sglang {state['sglang']} ({supported}); {state['hooks_routed']} of "
                f"{state['hooks_checked']} hooks route.")
    if state["hooks_kept"]:
        reasons = kept_summary(state)
        if verbose:
            out += wrap(f"{len(state['hooks_kept'])} hooks keep SGLang's own code:")
            for reason in reasons:
                out += wrap(reason, "    ", "      ")
        else:
            out += wrap(f"{len(state['hooks_kept'])} hooks keep SGLang's own code ({len(reasons)} reasons; "
                        f"--verbose lists them).")
    return out
