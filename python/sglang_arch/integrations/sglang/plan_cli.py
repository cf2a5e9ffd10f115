"""CLI glue for ``sglang-arch plan`` (the work is in ``plan.py``)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Dict

from ... import args as cli_args


def add_command(sub) -> None:
    p = sub.add_parser(
        "plan", help="what a real SGLang server would pick on a (simulated) machine, with and without the registry",
        description="Resolve SGLang's real ServerArgs for a simulated machine twice, through the plugin and with "
                    "SGLang alone, and print the decisions side by side. Needs sglang installed "
                    "(pip install 'sglang-arch[serve]'). Extra server arguments go after '--'.")
    p.add_argument("--capability", type=cli_args.capability, required=True, metavar="CAP", help="the GPU to simulate")
    p.add_argument("--tp", type=cli_args.world_size, default=1, metavar="N",
                   help=f"tensor parallel size = GPUs (default 1; at most {cli_args.MAX_GPUS_PER_NODE} per node)")
    p.add_argument("--topology", type=cli_args.topology, metavar="T", help="default: the tier's typical topology")
    p.add_argument("--nnodes", type=cli_args.nnodes, default=1, metavar="N", help="nodes (default 1; at most --tp)")
    p.add_argument("--cuda", type=cli_args.cuda, default=(13, 0), metavar="X.Y", help="torch's CUDA version (default 13.0)")
    p.add_argument("--model-path", required=True, metavar="DIR", help="a model directory with config.json (no weights needed)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="-- then extra sglang server arguments")
    p.set_defaults(func=cmd_plan)


def cmd_plan(args: argparse.Namespace) -> int:
    import importlib.util

    cli_args.machine(args, world="tp")
    if importlib.util.find_spec("sglang") is None:
        raise ValueError("plan needs SGLang: pip install 'sglang-arch[serve]'")
    if not os.path.isfile(os.path.join(args.model_path, "config.json")):
        raise ValueError(f"--model-path {args.model_path!r} has no config.json; give a model directory")
    extra = list(args.server_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    from .plan import run_plan

    try:
        result = run_plan(args.capability, args.tp, args.topology.name if args.topology else None, args.nnodes,
                          args.cuda, args.model_path, extra)
    except RuntimeError as exc:  # a worker failed (e.g. a server argument SGLang refuses): its last line
        raise ValueError(f"plan: {exc}") from None
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
    return 0


def _symm(d: Dict[str, Any]) -> str:
    if not d["enabled"]:
        return "off"
    return f"{d['max_bytes'] >> 20} MiB {d['algorithm']}"


def _table(name: str) -> str:
    if name.startswith("default:"):
        _, sizes, one_shot, two_shot = name.split(":")
        return f"default ({int(one_shot) >> 20}/{int(two_shot) >> 20} MiB)"
    return name


def render(result: Dict[str, Any]) -> str:
    m, r, u = result["machine"], result["routed"], result["upstream"]
    rows = [
        ("attention prefill", r["attention"]["prefill"], u["attention"]["prefill"]),
        ("attention decode", r["attention"]["decode"], u["attention"]["decode"]),
        ("all-reduce fusion", r["allreduce_fusion"]["backend"] or "off", u["allreduce_fusion"]["backend"] or "off"),
        ("torch symm mem", _symm(r["torch_symm_mem"]), _symm(u["torch_symm_mem"])),
        ("custom AR v2 table", _table(r["custom_allreduce"]["v2_table"]), _table(u["custom_allreduce"]["v2_table"])),
    ]
    head = (f"{m['gpus']}x sm_{m['capability'].replace('.', '')} on {m['topology']}, {m['nnodes']} node(s), "
            f"CUDA {m['cuda']}; registry tier {r['tier']['resolved']} [{r['tier']['match']}]")
    width = max(len(a) for a, _, _ in rows) + 2
    col = max(len(str(b)) for _, b, _ in rows) + 2
    lines = [head, "", f"{'':<{width}}{'with sglang-arch':<{col}}SGLang alone"]
    for name, routed, upstream in rows:
        mark = "" if routed == upstream else "   <- differs"
        lines.append(f"{name:<{width}}{str(routed):<{col}}{upstream}{mark}")
    if not r["torch_symm_mem"]["flag"]:
        lines.append("\n(torch symm mem is shown as it would be with --enable-torch-symm-mem)")
    for mode, res in (("with sglang-arch", r), ("SGLang alone", u)):
        if res["error"]:
            lines.append(f"{mode}: server would not start: {res['error']}")
    lines.append(f"routed through the registry: {', '.join(r['routed'])}")
    return "\n".join(lines)
