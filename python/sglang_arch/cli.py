"""``sglang-arch``: the registry's command-line face.

Human tables by default, ``--json`` for tools.  Bad input exits 2 with one line that
names what was wrong and what is accepted; no traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import sys
from typing import Any, Dict, List, Optional, Sequence

from . import __version__
from . import args as args_mod
from .arch import (
    ACCEPTED_FORMS,
    TOPOLOGIES,
    Decisions,
    TableError,
    UnknownCapabilityError,
    decide,
    resolve,
    runtime,
)
from .arch.policies import attention
from .arch.profile import MIB, format_version
from .args import CliError
from .args import Parser as _Parser

_capability, _topology, _cuda = args_mod.capability, args_mod.topology, args_mod.cuda  # former names


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


def _size(nbytes: int) -> str:
    from .explain_text import size_text

    return size_text(nbytes) if nbytes > 0 else "-"


WIDTH = 100  # every default output line fits this many columns


def decision_rows(d: Decisions) -> List[tuple]:
    """(label, on, value, reason, dropped) of every decision ``show`` lists, in its order."""
    symm = (_size(d.symm_mem.max_bytes) + " " + (d.symm_mem.algorithm or "")).strip()
    car = ((_size(d.custom_allreduce.max_bytes) + " " + (d.custom_allreduce.table or "default")).strip()
           if d.custom_allreduce.enabled else "-")
    rows = [("torch symm mem", _yn(d.symm_mem.enabled), symm, d.symm_mem.reason, ()),
            ("custom all-reduce", _yn(d.custom_allreduce.enabled), car, d.custom_allreduce.reason, ()),
            ("all-reduce fusion", _yn(d.fusion.enabled), d.fusion.backend or "-", d.fusion.reason, d.fusion.dropped),
            ("PCIe-IPC all-reduce", _yn(d.pcie_ipc.enabled), "decode-sized" if d.pcie_ipc.enabled else "-",
             d.pcie_ipc.reason, ())]
    if d.world_size > 1:
        plan = d.plan()
        rows.append(("all-reduce path", "", f"decode {plan.decode}, prefill {plan.prefill}",
                     "SGLang's dispatch order, without opt-in flags", ()))
    from .arch.evidence import entry

    rows += [("evidence", "", evidence_id, entry(evidence_id).short(), ()) for evidence_id in d.evidence()]
    rows += [(label, "", value, reason, dropped) for label, value, reason, dropped in d.named()]
    from .explain_text import gemm_cells

    # stock SGLang's answer on the device itself beside each, as explain and plan show it
    rows += [(name, "", value, reason, ()) for name, value, reason in gemm_cells(d)]
    return rows


def render_decisions(d: Decisions, effect=None, verbose: bool = False, width: int = WIDTH) -> str:
    """The node's decisions as ``show`` prints them: a row each (its value wrapped in its
    column), with ``effect(label)`` in a last column where given (whether the plugin's
    hooks for it take effect); ``verbose`` adds each reason and dropped candidate under its
    row.  Every line fits ``width`` columns."""
    import textwrap

    from .explain_text import header

    rows = decision_rows(d)
    label_w = min(27, max(len(row[0]) for row in rows) + 1)
    value_w = 38
    last = "in effect" if effect is not None else ""
    lines = header(d) + ["", f"{'decision':<{label_w}}{'on':<5}{'value':<{value_w}}{last}".rstrip()]
    for label, on, value, reason, dropped in rows:
        cells = textwrap.wrap(value, width=value_w - 2, break_on_hyphens=False) or ["-"]
        tail = effect(label) if effect is not None else ""
        name = label if len(label) < label_w else None
        if name is None:  # a name as wide as its column: on a line of its own
            lines.append(label)
        for i, cell in enumerate(cells):
            first = i == 0
            lines.append(f"{(name or '') if first else '':<{label_w}}{on if first else '':<5}{cell:<{value_w}}"
                         f"{tail if first else ''}".rstrip())
        if verbose:
            pad = " " * label_w
            lines += textwrap.wrap(" ".join(reason.split()), width=width, initial_indent=pad + "why: ",
                                   subsequent_indent=pad + "     ", break_on_hyphens=False)
            for choice, why in dropped:
                lines += textwrap.wrap(f"{choice}: {why}", width=width, initial_indent=pad + "dropped ",
                                       subsequent_indent=pad + "        ", break_on_hyphens=False)
    if not verbose:
        lines += ["", "--verbose adds each decision's reason; --json for tools."]
    return "\n".join(lines)


def _dropped_lines(dropped, indent: int = 25) -> list:
    """The candidates a decision left out, one line each, under it."""
    return [f"{'':<{indent}}dropped {choice}: {why}" for choice, why in dropped]


def cmd_explain(args: argparse.Namespace) -> int:
    from . import explain_text, stock
    from .arch.topology import check_machine_topology, stand_in_note

    args_mod.machine(args)
    if args.topology is not None:
        try:
            check_machine_topology(args.topology, args.world_size)
        except ValueError as exc:
            raise CliError(f"sglang-arch explain: error: {exc}") from None
    res = resolve(args.capability, strict=True if args.strict else None)
    if args.cuda is None:  # as show and the plugin read it: SGLANG_ARCH_CUDA, else the simulated default
        args.cuda = runtime.configured_cuda() or runtime.SIMULATED_CUDA_DEFAULT
    traits = attention.ModelTraits(cuda=args.cuda)
    d = decide(res, args.topology, args.world_size, args.nnodes, traits)
    baseline = stock.decide(res.requested, d.topology, d.world_size, d.nnodes, args.cuda)
    note = stand_in_note(res.profile.topology, args.world_size, args.topology)
    if args.json:
        print(json.dumps(dict(d.to_dict(), topology_note=note, stock_sglang=baseline.to_dict()), indent=2))
    else:
        print(explain_text.render(d, baseline, note, everything=args.all, cuda=args.cuda))
    return 0


def _plugin_status() -> Dict[str, Any]:
    """The plugin's state (decisions off, hooks that keep SGLang's code); a value of
    SGLANG_ARCH_DISABLE that names no decision is an error here (inside SGLang it keeps the
    plugin out, with one warning)."""
    from .integrations.sglang import status

    try:
        return status.read()
    except status.SwitchError as exc:
        raise CliError(f"sglang-arch: error: {exc} (inside SGLang this value keeps the plugin out)") from None


def gpu_lines(per_gpu) -> List[str]:
    """One line per run of GPUs with the same name, capability and tier (``GPU 0-7: ...``)."""
    groups: List[list] = []
    for g, r in per_gpu:
        key = (g.name, g.capability, r.resolved, r.match)
        if groups and groups[-1][0] == key and groups[-1][2] == g.index - 1:
            groups[-1][2] = g.index
        else:
            groups.append([key, g.index, g.index])
    out = []
    for (name, cap, resolved, match), first, last in groups:
        which = f"GPU {first}" if first == last else f"GPU {first}-{last}"
        out.append(f"  {which}: {name}  sm_{cap.sm}  -> tier {resolved} [{match}]")
    return out


def cmd_show(args: argparse.Namespace) -> int:
    if args.capability is None and (args.gpus is not None or args.topology_name is not None):
        raise CliError("sglang-arch show: error: --gpus and --topology simulate a machine and need --capability CAP")
    plugin = _plugin_status()
    # The plugin's own MachineContext, built by the same code: show prints what it decides.
    ctx = runtime.machine(capability=args.capability, topology=args.topology_name, gpu_count=args.gpus,
                          cuda=args.cuda)
    node = ctx.node
    verbose = args.details or args.verbose
    from .integrations.sglang import status

    if not node.gpus:
        if args.json:
            print(json.dumps({"source": node.source, "gpus": [], "notes": list(node.notes),
                              "plugin_disabled": plugin["not_loaded"] is not None, "plugin": plugin}, indent=2))
        else:
            print("No NVIDIA GPU found on this machine.")
            for note in node.notes:
                print(f"  {note}")
            for line in status.lines(plugin, verbose):
                print(line)
            print("To see what the registry decides for a GPU you do not have: sglang-arch explain 12.0 --world-size 8")
        return 0
    per_gpu = [(g, resolve(g.capability)) for g in node.gpus]
    d = ctx.decisions()
    if args.json:
        print(json.dumps({
            "source": node.source,
            "notes": list(node.notes),
            "cuda": format_version(ctx.cuda),
            "gpus": [{"index": g.index, "name": g.name, "capability": str(g.capability),
                      "resolved": str(r.resolved), "match": r.match} for g, r in per_gpu],
            "node": d.to_dict(),
            # true wherever SGLang will not run the plugin (SGLANG_PLUGINS, SGLANG_ARCH_DISABLE, ...)
            "plugin_disabled": plugin["not_loaded"] is not None,
            "plugin": plugin,
            "in_effect": {row[0]: status.row_effect(plugin, row[0]) for row in decision_rows(d)},
        }, indent=2))
        return 0
    import textwrap

    cuda = f"; torch CUDA {format_version(ctx.cuda)}" if ctx.cuda else ""
    head = f"{len(node.gpus)} GPU(s) from {node.source}" + (f" ({'; '.join(node.notes)})" if node.notes else "")
    for line in textwrap.wrap(head + cuda, width=WIDTH, subsequent_indent="  ", break_on_hyphens=False):
        print(line)
    for line in gpu_lines(per_gpu):
        print(line)
    for line in status.lines(plugin, verbose):
        print(line)
    print()
    print(render_decisions(d, effect=lambda label: status.row_effect(plugin, label), verbose=verbose))
    return 0


def matrix_rows(cuda=(13, 0)) -> List[Dict[str, Any]]:
    from .arch import default_registry

    rows = []
    for cap in default_registry().known:
        res = resolve(cap)
        world = 8 if res.profile.topology != "single" else 1
        d = decide(res, None, world, 1, attention.ModelTraits(cuda=cuda))
        p = res.profile
        rows.append({
            "capability": str(cap),
            "name": p.name,
            "examples": list(p.examples),
            "features": [k for k, v in res.features.items() if v],
            "smem_per_block_kib": p.smem_per_block_kib,
            "typical_topology": p.topology,
            "min_cuda": format_version(p.min_cuda),
            "decisions_at": {"world_size": world, "topology": d.topology.name},
            "torch_symm_mem": (f"{d.symm_mem.max_bytes // MIB} MiB {d.symm_mem.algorithm}" if d.symm_mem.enabled else "off"),
            "symm_mem_world_sizes": sorted(p.torch_symm_mem),
            "symm_mem_two_shot": {ws: p.symm_mem_two_shot[ws] for ws in sorted(p.symm_mem_two_shot)},
            "pcie_ipc_world_sizes": list(p.pcie_ipc_world_sizes),
            "custom_ar_v2_table": p.custom_ar_v2_table or "default",
            "allreduce_fusion": list(p.allreduce_fusion),
            "attention_mha": d.mha.prefill,
            "attention_mla": d.mla.prefill,
            "lead": list(p.lead),
        })
    return rows


def render_matrix_markdown(rows: List[Dict[str, Any]]) -> str:
    head = ["cc", "name", "examples", "features", "smem/block KiB", "typical topology", "min CUDA",
            "symm mem (8 GPUs, typical topology)", "symm mem world sizes", "two-shot without multicast",
            "PCIe-IPC by default", "custom AR v2 table",
            "fusion backends", "MHA default", "MLA default"]
    out = [
        "# Support matrix",
        "",
        "Generated by `sglang-arch matrix --format markdown` from the registry's table; "
        "`test/tools/test_cli.py` fails when this file and the table drift apart.",
        "Decisions are shown for 8 GPUs on each tier's typical topology (one GPU for single-GPU tiers), CUDA 13.0. "
        "Values marked * have a single source so far (see `lead` in the table).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rows:
        lead = set(r["lead"])

        def mark(field: str, text: str) -> str:
            return f"{text}*" if field in lead else text

        out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in [  # an override's name may hold '|'
            r["capability"], mark("name", r["name"]), mark("examples", ", ".join(r["examples"])),
            mark("features", ", ".join(r["features"]) or "-"), mark("smem_per_block_kib", str(r["smem_per_block_kib"] or "-")),
            r["typical_topology"], mark("min_cuda", r["min_cuda"] or "-"),
            f"{mark('torch_symm_mem', r['torch_symm_mem'])} ({r['decisions_at']['world_size']}x {r['decisions_at']['topology']})",
            ", ".join(map(str, r["symm_mem_world_sizes"])) or "-",
            ", ".join(f"{ws}: < {_size(b)}" for ws, b in r["symm_mem_two_shot"].items()) or "-",
            ", ".join(f"TP {ws}" for ws in r["pcie_ipc_world_sizes"]) or "-", r["custom_ar_v2_table"],
            mark("allreduce_fusion", ", ".join(r["allreduce_fusion"]) or "-"), mark("attention_mha", r["attention_mha"]),
            r["attention_mla"],
        ]) + " |")
    return "\n".join(out) + "\n"


def render_matrix_table(rows: List[Dict[str, Any]], width: int = WIDTH) -> str:
    """The support matrix as a terminal table within ``width`` columns: one line per tier,
    a wide cell (the name, the fusion backends) wrapped in its column; examples and the
    rest are in ``--format markdown`` / ``json``."""
    import textwrap

    head = ["cc", "name", "topology", "CUDA", "symm mem (8 GPUs)", "custom AR", "fusion", "MHA", "MLA"]
    cells = [[r["capability"], r["name"], r["typical_topology"], r["min_cuda"] or "-",
              r["torch_symm_mem"] if r["decisions_at"]["world_size"] > 1 else f"{r['torch_symm_mem']} (1 GPU)",
              r["custom_ar_v2_table"], ", ".join(r["allreduce_fusion"]) or "-", r["attention_mha"], r["attention_mla"]]
             for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(head)]
    wrap_at = {1: 12, 6: 9}  # the name and the fusion backends wrap where the line is too wide
    for i, narrow in wrap_at.items():
        if sum(widths) + 2 * (len(widths) - 1) > width:
            widths[i] = max(len(head[i]), narrow)
    out = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
    for row in cells:
        parts = [textwrap.wrap(c, width=w, break_on_hyphens=False) or [""] for c, w in zip(row, widths)]
        for k in range(max(len(p) for p in parts)):
            out.append("  ".join((p[k] if k < len(p) else "").ljust(w) for p, w in zip(parts, widths)).rstrip())
    out += ["", "Decisions for 8 GPUs on each tier's typical topology (1 for a single-GPU tier), CUDA 13.0;",
            "--format markdown adds examples, features and sizes (docs/support-matrix.md), --format json all."]
    return "\n".join(out) + "\n"


def cmd_matrix(args: argparse.Namespace) -> int:
    rows = matrix_rows()
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    elif args.format == "markdown":
        sys.stdout.write(render_matrix_markdown(rows))
    else:
        sys.stdout.write(render_matrix_table(rows))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from .audit import AuditError, audit, report

    try:
        result = audit(args.src, early_routing=args.early_routing)
    except AuditError as exc:
        raise CliError(f"sglang-arch audit: {exc}") from None
    render = report.to_json if args.json else report.render_markdown if args.markdown else report.render_table
    sys.stdout.write(render(result))
    return 0


def version_text() -> str:
    """``--version``: this release and the SGLang releases it supports (the plugin's
    recorded fingerprints, ``known_bodies.SUPPORTED``)."""
    from .integrations.sglang.known_bodies import SUPPORTED

    return (f"sglang-arch {__version__}; supports sglang {', '.join(SUPPORTED)} "
            f"(other releases: hooks route only where SGLang's code is unchanged)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="sglang-arch", description=(
        "The GPU architecture registry for SGLang: what a GPU resolves to and what SGLang "
        "decides on it (torch symmetric memory, custom all-reduce, FlashInfer all-reduce "
        "fusion, attention backends, MoE runners and GEMM backends, and the model-specific "
        "kernel paths). Start with `sglang-arch check`: whether the plugin works here."),
        epilog=f"Capabilities are written as {ACCEPTED_FORMS}. Topologies: {', '.join(TOPOLOGIES)}.")
    parser.add_argument("--version", action="version", version=version_text())
    parser.add_argument("-v", "--verbose", action="store_true", help="log fallback warnings and detection details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def add_common(p: argparse.ArgumentParser, *, world: bool = True,
                   cuda_help: str = "torch's CUDA version the decisions assume (default 13.0)") -> None:
        if world:
            p.add_argument("--world-size", "--tp", type=args_mod.world_size, default=1, metavar="N",
                           help=f"GPUs taking part in each all-reduce (default 1; at most "
                                f"{args_mod.MAX_GPUS_PER_NODE} per node)")
            p.add_argument("--nnodes", type=args_mod.nnodes, default=1, metavar="N",
                           help=f"nodes (default 1, at most {args_mod.MAX_NODES}; at most the world size)")
        p.add_argument("--cuda", type=args_mod.cuda, default=(13, 0), metavar="X.Y", help=cuda_help)
        p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("show", help="the GPUs on this machine, their tiers and the node's decisions",
                       description="Detect the GPUs (NVML, then torch), resolve each, and print the node's decisions. "
                                   "--capability simulates a machine.")
    p.add_argument("--capability", type=args_mod.capability, metavar="CAP",
                   help="simulate GPUs of this capability instead of detecting")
    p.add_argument("--topology", dest="topology_name", type=args_mod.topology, metavar="T",
                   help=f"simulate this topology ({', '.join(TOPOLOGIES)}; with --capability)")
    p.add_argument("--gpus", type=args_mod.gpus, metavar="N",
                   help=f"simulate N GPUs (1-{args_mod.MAX_GPUS_PER_NODE}; with --capability)")
    p.add_argument("--verbose", dest="details", action="store_true",
                   help="each decision's reason, and every reason a hook keeps SGLang's code")
    add_common(p, world=False, cuda_help="torch's CUDA version the decisions assume (default: SGLANG_ARCH_CUDA, "
                                           "else the installed torch's; 13.0 for a simulated GPU without either)")
    p.set_defaults(cuda=None)
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("explain", help="the decisions for a capability, beside stock SGLang's, with reasons",
                       description="Resolve CAP and print the decisions the plugin makes (torch symmetric memory, "
                                   "custom all-reduce, all-reduce fusion, attention, a summary of MoE / GEMM), "
                                   "each beside stock SGLang 0.5.23's answer, with its reason; --all adds the "
                                   "model-specific rows and each MoE / GEMM choice.")
    p.add_argument("capability", type=args_mod.capability, metavar="CAP", help=f"compute capability: {ACCEPTED_FORMS}")
    p.add_argument("--topology", type=args_mod.topology, metavar="T",
                   help=f"one of {', '.join(TOPOLOGIES)} (default: the tier's typical topology; single for one GPU; "
                        f"pcie, without P2P, for several GPUs of a single-GPU tier)")
    p.add_argument("--strict", action="store_true", help="fail instead of falling back for an unknown capability")
    p.add_argument("--all", action="store_true", help="add the model-specific rows (DeepSeek, MiniCPM, MiniMax, DSA, "
                                                      "vision, GEMM paths, each MoE runner)")
    add_common(p, cuda_help="torch's CUDA version the decisions assume (default: SGLANG_ARCH_CUDA, else 13.0)")
    p.set_defaults(cuda=None)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("matrix", help="the support matrix of every known tier",
                       description="Print the support matrix (docs/support-matrix.md is generated from it).")
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table",
                   help="table (default: fits 100 columns), markdown (docs/support-matrix.md), json")
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser("audit", help="every capability-dependent site of an SGLang tree and whether it is routed",
                       description="Static inventory (Python's ast) of sglang/srt and sglang/kernels: each site whose "
                                   "behaviour depends on the compute capability, its kind (decision: picks a backend, "
                                   "a size, on/off; gate: which compiled kernel can run here; fact: the identity "
                                   "itself), its concern (from what it decides), and its status for the plugin and "
                                   "the patched tree: routed (the registry takes it), unrouted (a decision SGLang "
                                   "takes by itself), probe / device (a gate or fact read through a platform probe / "
                                   "from the device). Files that cannot be parsed are listed. SRC: an sglang package "
                                   "dir, a dir containing sglang/, or an SGLang git clone.")
    p.add_argument("src", metavar="SRC", help="the SGLang tree")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="every site, machine-readable")
    out.add_argument("--markdown", action="store_true", help="docs/capability-sites.md")
    p.add_argument("--no-early-routing", dest="early_routing", action="store_false",
                   help="count values cached at import from a probe as unrouted for the plugin")
    p.set_defaults(func=cmd_audit)

    from . import commands

    commands.add_commands(sub)
    return parser


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    """The parser, built once per process (a build costs a few ms, mostly argparse's gettext
    look-ups; in-process callers of ``main`` pay it once).  Parsing does not change it."""
    return build_parser()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the command is, so that every writer rolls back as
    on Ctrl-C (``files.Transaction``; a running ``git`` child is killed by ``subprocess``)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum, _frame):
    raise Terminated(signum)


@contextlib.contextmanager
def _terminate_like_interrupt():
    """SIGTERM / SIGHUP as Ctrl-C for the command's length: only in the main thread, and
    only where nobody installed a handler (an embedding program keeps its own)."""
    import signal
    import threading

    saved = {}
    if threading.current_thread() is threading.main_thread():
        for name in ("SIGTERM", "SIGHUP"):
            signum = getattr(signal, name, None)
            if signum is not None and signal.getsignal(signum) == signal.SIG_DFL:
                saved[signum] = signal.signal(signum, _raise_terminated)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Exit 0 on success, 2 with one line on stderr for bad input; never a traceback."""
    with _terminate_like_interrupt(), _any_encoding():
        return _main(argv)


@contextlib.contextmanager
def _any_encoding():
    """Text the output's encoding cannot hold (a path named in UTF-8 under
    ``PYTHONIOENCODING=ascii`` or a C locale) is printed escaped (``\\xe9``), not a
    codec error after the work is done; the streams' own setting is back afterwards."""
    saved = []
    for stream in (sys.stdout, sys.stderr):
        errors = getattr(stream, "errors", None)
        if errors in (None, "strict") and hasattr(stream, "reconfigure"):
            try:
                stream.reconfigure(errors="backslashreplace")
                saved.append((stream, errors or "strict"))
            except (ValueError, OSError, AttributeError):  # a stream already written to in another way
                pass
    try:
        yield
    finally:
        for stream, errors in saved:
            with contextlib.suppress(ValueError, OSError, AttributeError):
                stream.reconfigure(errors=errors)


def _main(argv: Optional[Sequence[str]]) -> int:
    from . import interrupts

    interrupts.completed(reset=True)
    try:
        parser = _parser()
        args = parser.parse_args(argv)
        logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR, format="%(message)s")
        if not getattr(args, "func", None):
            parser.print_help()
            return _fail("sglang-arch: error: a COMMAND is required (see the list above, or --help)", 2)
        return args.func(args)
    except CliError as exc:
        return _fail(str(exc), 2)
    except (ValueError, TableError, UnknownCapabilityError) as exc:
        return _fail(f"sglang-arch: error: {exc}", 2)
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a file named on the command line that cannot be read or written
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"sglang-arch: error: {where}{exc.strerror or exc}", 2)
    except Terminated as exc:
        done = "its writes had completed" if interrupts.completed() else "every write rolled back"
        return _fail(f"sglang-arch: terminated (signal {exc.signum}); {done}", 128 + exc.signum)
    except KeyboardInterrupt:
        return _fail("sglang-arch: interrupted", 130)
    except Exception as exc:  # a bug: still one line, and not the exit status of bad input
        return _fail(f"sglang-arch: internal error: {type(exc).__name__}: {exc} (please report it)", 1)


def _fail(message: str, status: int) -> int:
    line = " ".join(message.split())
    print(line if len(line) <= 2000 else line[:1997] + "...", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
