"""``sglang-arch check``: on one screen, whether the plugin works here and what it changes.

It answers, without importing SGLang or torch (SGLang's version from its package metadata,
its code compared by the recorded fingerprints, torch's CUDA version from its build's
``version.py``):

- whether SGLang will load the plugin in this environment: its entry point registered,
  ``SGLANG_PLUGINS`` read exactly as SGLang's loader reads it, ``SGLANG_ARCH_DISABLE``;
- whether the installed SGLang release is one the plugin supports, and how many of its
  hooks route (N of N);
- the GPUs, and whether peer access between them is real (measured by NVML or torch) or
  only simulated;
- for this launch (``--tp``, the server arguments after ``--``): the flags a decision still
  needs to take effect (``--enable-torch-symm-mem``), and what differs from stock SGLang.

Exit status (for scripts): 0 the plugin is active and every hook of the decisions it routes
routes; 1 it changes nothing here (SGLang will not load it, it is turned off, SGLang is not
installed, or there is no NVIDIA GPU); 3 it is active in part (some hooks keep SGLang's
code: a release it does not support, or code that differs); 2 bad input, as every command.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from typing import Any, Dict, List

from ... import args as cli_args
from ...arch import TOPOLOGIES

WIDTH = 100
LABEL_W = 13
ACTIVE, INACTIVE, PARTIAL = 0, 1, 3
VERDICTS = {ACTIVE: "active", INACTIVE: "not active", PARTIAL: "active in part"}


def add_command(sub) -> None:
    p = sub.add_parser(
        "check", help="one screen: will SGLang load the plugin here, on a supported release, what it changes",
        description="Whether SGLang will load the plugin in this environment (its entry point, SGLANG_PLUGINS, "
                    "SGLANG_ARCH_DISABLE), whether the installed SGLang release is supported and how many hooks "
                    "route, whether peer access between the GPUs is real, which flags a decision still needs "
                    "for this launch, and what differs from stock SGLang. Reads no SGLang code into memory. "
                    "Exit status: 0 active; 1 not active (not loaded, turned off, no SGLang or no NVIDIA GPU); "
                    "3 active in part (some hooks keep SGLang's code); 2 bad input.")
    p.add_argument("--tp", type=cli_args.world_size, metavar="N",
                   help="the launch's tensor-parallel size (default: the server arguments' --tp-size, else every "
                        "GPU of the node)")
    p.add_argument("--capability", type=cli_args.capability, metavar="CAP",
                   help="simulate GPUs of this capability instead of detecting")
    p.add_argument("--gpus", type=cli_args.gpus, metavar="N", help="simulate N GPUs (with --capability)")
    p.add_argument("--topology", dest="topology_name", type=cli_args.topology, metavar="T",
                   help=f"simulate this topology ({', '.join(TOPOLOGIES)}; with --capability)")
    p.add_argument("--cuda", type=cli_args.cuda, metavar="X.Y",
                   help="torch's CUDA version (default: SGLANG_ARCH_CUDA, else the installed torch's)")
    p.add_argument("--verbose", action="store_true", dest="details",
                   help="every reason a hook keeps SGLang's code, and each difference's reason")
    p.add_argument("--json", action="store_true", help="machine-readable output (the same exit status)")
    p.add_argument("server_args", nargs=argparse.REMAINDER,
                   help="-- then the server arguments of the launch (--tp-size, --enable-torch-symm-mem, ...)")
    p.set_defaults(func=cmd_check)


def _peer_access(node: Any) -> Dict[str, Any]:
    """Whether peer access between the GPUs is real: measured (NVML, torch), set by a
    variable, simulated, or moot (one GPU)."""
    topo = node.topology
    if len(node.gpus) <= 1:
        return {"p2p": None, "measured": False, "text": "one GPU: no peer to access"}
    forced = any("set by SGLANG_ARCH_TOPOLOGY" in note for note in node.notes)
    if node.source == "simulated" or forced:
        how = "simulated" if node.source == "simulated" else "set by SGLANG_ARCH_TOPOLOGY"
        return {"p2p": topo.p2p, "measured": False,
                "text": f"{'yes' if topo.p2p else 'no'}, {how} ({topo.name}): not measured on this machine"}
    what = ("NVML reports peer-to-peer reads between every pair" if node.source == "nvml"
            else "torch.cuda.can_device_access_peer holds for every pair")
    if topo.p2p:
        return {"p2p": True, "measured": True, "text": f"yes, measured: {what} ({topo.name})"}
    none = ("NVML reports a pair without peer-to-peer reads" if node.source == "nvml"
            else "torch.cuda.can_device_access_peer fails for a pair")
    return {"p2p": False, "measured": True,
            "text": f"no, measured: {none} ({topo.name}); two-shot symm mem and custom all-reduce stay off"}


def _needs(d: Any, launch: Any) -> List[Dict[str, str]]:
    """The flags a decision the registry takes still needs to take effect in this launch."""
    from ...explain_text import FUSION_FLAG, size_text
    from .startup import SYMM_MEM_FLAG

    out = []
    if d.symm_mem.enabled and not launch.symm_mem_flag:
        out.append({"flag": SYMM_MEM_FLAG, "decision": "torch symm mem",
                    "text": f"{SYMM_MEM_FLAG}: torch symm mem {size_text(d.symm_mem.max_bytes)} "
                            f"{d.symm_mem.algorithm} is used only with it (with or without the plugin)"})
    if d.fusion.enabled and not launch.fusion_off:
        out.append({"flag": f"{FUSION_FLAG} auto", "decision": "all-reduce fusion",
                    "text": f"{FUSION_FLAG} auto: for a model SGLang does not turn fusion on for (Llama, Qwen, "
                            f"DeepSeek and others it does by itself)"})
    return out


def _differences(d: Any, s: Any, launch: Any) -> List[Dict[str, str]]:
    """Each decision of this launch that differs from stock SGLang's (collectives, attention
    defaults, MoE / GEMM)."""
    from ...explain_text import _car, _gemm_changed, _symm

    rows = [("torch symm mem", _symm(d), s.symm_mem.value),
            ("PCIe-IPC all-reduce", "on (decode-sized)" if d.pcie_ipc.enabled else "off", s.pcie_ipc.value),
            ("custom all-reduce", _car(d), s.custom_allreduce.value),
            ("all-reduce fusion", d.fusion.backend if d.fusion.enabled else "off", s.fusion.value)]
    for label, ours, theirs in (("attention MHA", d.mha, s.mha), ("attention MLA", d.mla, s.mla)):
        rows.append((label, f"{ours.prefill}/{ours.decode}" if ours.prefill != ours.decode else str(ours.prefill),
                     f"{theirs.prefill}/{theirs.decode}" if theirs.prefill != theirs.decode else theirs.prefill))
    rows += _gemm_changed(d)
    return [{"decision": label, "plugin": ours, "stock": theirs} for label, ours, theirs in rows if ours != theirs]


def _in_effect(plugin: Dict[str, Any], diffs: List[Dict[str, str]]) -> None:
    """Mark each difference with whether it takes effect here (its hooks route)."""
    from . import status

    for diff in diffs:
        diff["in_effect"] = status.row_effect(plugin, diff["decision"])


def gather(args: argparse.Namespace) -> Dict[str, Any]:
    """Every answer ``check`` gives, as a dictionary (what ``--json`` prints)."""
    from ...arch import runtime
    from ...arch.decisions import decide
    from ...arch.policies.attention import ModelTraits
    from ... import stock
    from . import status, startup

    extra = list(args.server_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    launch = startup.launch_from_argv(extra)
    if launch is None:
        raise ValueError("check: the server arguments after '--' cannot be read (--tp-size and --nnodes take "
                         "an integer >= 1); accepted: SGLang's server arguments")
    plugin = status.read(strict=False)
    ctx = runtime.machine(capability=args.capability, topology=args.topology_name, gpu_count=args.gpus,
                          cuda=args.cuda)
    node = ctx.node
    out: Dict[str, Any] = {"plugin": plugin, "gpus": {"count": len(node.gpus), "source": node.source,
                                                      "notes": list(node.notes)}}
    tp_given = args.tp is not None or any(t.split("=", 1)[0] in ("--tp", "--tp-size", "--tensor-parallel-size")
                                          for t in extra)
    if node.gpus:
        tp = args.tp or (launch.tp if tp_given else len(node.gpus))
        from dataclasses import replace

        launch = replace(launch, tp=tp)
        d = decide(ctx.resolution, ctx.topology, tp, launch.nnodes, ModelTraits(cuda=ctx.cuda))
        s = stock.decide(ctx.resolution.requested, d.topology, tp, launch.nnodes, ctx.cuda)
        res = ctx.resolution
        out["gpus"].update(capabilities=sorted({str(c) for c in node.capabilities}),
                           names=sorted({g.name for g in node.gpus}), tier=str(res.resolved), match=res.match,
                           topology=node.topology.name, peer_access=_peer_access(node))
        out["launch"] = {"tp": tp, "tp_from": "given" if tp_given else "the node's GPU count",
                         "nnodes": launch.nnodes, "flags": [f for f, on in (
                             (startup.SYMM_MEM_FLAG, launch.symm_mem_flag),
                             (startup.CUSTOM_AR_OFF_FLAG, launch.custom_ar_off),
                             (startup.FUSION_OFF_FLAG, launch.fusion_off)) if on]}
        out["needs"] = _needs(d, launch)
        out["differs_from_stock"] = _differences(d, s, launch)
        _in_effect(plugin, out["differs_from_stock"])
        kept = len(plugin["hooks_kept"])
        out["startup_line"] = startup.line(startup.machine_words(node, ctx.topology.name), d,
                                           frozenset(plugin["decisions_off"]), kept, launch)
    if plugin["not_loaded"] or not node.gpus:
        code = INACTIVE
    elif plugin["hooks_kept"]:
        code = PARTIAL
    else:
        code = ACTIVE
    out["status"] = {"exit": code, "verdict": VERDICTS[code]}
    return out


def _wrap(label: str, text: str) -> List[str]:
    return textwrap.wrap(" ".join(text.split()), width=WIDTH, initial_indent=f"{label:<{LABEL_W}}",
                         subsequent_indent=" " * LABEL_W, break_on_hyphens=False) or [label]


def render(state: Dict[str, Any], verbose: bool = False) -> str:
    from . import status

    p = state["plugin"]
    code = state["status"]["exit"]
    lines = [f"sglang-arch check: the plugin is {state['status']['verdict'].upper()} here (exit {code})", ""]
    if p["not_loaded"]:
        lines += _wrap("loads", f"no: {p['not_loaded']}")
    else:
        plugins = p["sglang_plugins"]
        allow = ("SGLANG_PLUGINS unset (SGLang loads every plugin)" if not plugins
                 else "SGLANG_PLUGINS names sglang_arch")
        off = (f"; SGLANG_ARCH_DISABLE leaves {', '.join(p['decisions_off'])} to SGLang" if p["decisions_off"]
               else "")
        lines += _wrap("loads", f"yes: entry point registered, {allow}{off}")
        if not p["early_hook"]:
            lines += _wrap("", "the start-up hook (sglang_arch_early.pth) did not run in this interpreter: hooks "
                               "apply when SGLang loads its plugins, after values it computes at import")
    if p["sglang"] is None:
        lines += _wrap("release", f"SGLang is not installed (supported: {', '.join(p['written_for'])})")
    else:
        verdict = "supported" if p["supported"] else "NOT supported"
        lines += _wrap("release", f"sglang {p['sglang']}: {verdict} (supported: {', '.join(p['written_for'])})")
        hooks = f"{p['hooks_routed']} of {p['hooks_checked']} route"
        if p["not_loaded"]:
            hooks += " once loaded"
        if p["hooks_kept"]:
            reasons = status.kept_summary(p)
            hooks += f"; {len(p['hooks_kept'])} keep SGLang's own code"
            if not verbose:
                hooks += f" ({len(reasons)} reasons; --verbose lists them)"
        lines += _wrap("hooks", hooks)
        if p["hooks_kept"] and verbose:
            for reason in status.kept_summary(p):
                lines += _wrap("", f"- {reason}")
    g = state["gpus"]
    if not g["count"]:
        lines += _wrap("GPUs", "no NVIDIA GPU found: SGLang decides everything (sglang-arch explain CAP shows "
                               "the decisions for a GPU you do not have)")
    else:
        lines += _wrap("GPUs", f"{g['count']}x {' + '.join(g['names'])} ({', '.join(g['capabilities'])}) from "
                               f"{g['source']} -> tier {g['tier']} [{g['match']}]")
        lines += _wrap("peer access", g["peer_access"]["text"])
        launch = state["launch"]
        tp = f"tp {launch['tp']}" + (" (every GPU of the node; --tp N for another)"
                                     if launch["tp_from"] != "given" else "")
        lines += _wrap("launch", f"{tp}, {launch['nnodes']} node(s)"
                                 + (f", {' '.join(launch['flags'])}" if launch["flags"] else ""))
        if state["needs"]:
            first = True
            for need in state["needs"]:
                lines += _wrap("needs" if first else "", need["text"])
                first = False
        else:
            lines += _wrap("needs", "no flag: every decision below takes effect as it is")
        diffs = state["differs_from_stock"]
        if p["not_loaded"]:
            lines += _wrap("differs", f"nothing: SGLang decides everything; loaded, the plugin would change "
                                      f"{len(diffs)} decision(s) (sglang-arch show lists them)")
        elif diffs:
            first = True
            for diff in diffs:
                effect = diff["in_effect"]
                note = "" if effect == "routed" else (
                    " - not in effect: SGLang's code decides" if effect == "SGLang's" else f" - {effect}")
                lines += _wrap("differs" if first else "", f"{diff['decision']}: {diff['plugin']} "
                                                          f"(stock SGLang: {diff['stock']}){note}")
                first = False
        else:
            lines += _wrap("differs", "nothing: every decision of this launch is stock SGLang's")
        if not p["not_loaded"]:
            lines += ["", "start-up line:"] + textwrap.wrap(state["startup_line"], width=WIDTH, initial_indent="  ",
                                                             subsequent_indent="    ", break_on_hyphens=False)
    lines += ["", "exit status: 0 active, 1 not active, 3 active in part (some hooks keep SGLang's code)"]
    return "\n".join(lines)


def cmd_check(args: argparse.Namespace) -> int:
    if args.capability is None and (args.gpus is not None or args.topology_name is not None):
        raise ValueError("check: --gpus and --topology simulate a machine and need --capability CAP")
    state = gather(args)
    if args.json:
        print(json.dumps(state, indent=2))
    else:
        print(render(state, args.details or getattr(args, "verbose", False)))
    return state["status"]["exit"]
