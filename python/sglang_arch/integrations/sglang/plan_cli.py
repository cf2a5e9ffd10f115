"""CLI glue for ``sglang-arch plan`` (the work is in ``plan.py``)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Dict, Sequence

from ... import args as cli_args
from ...arch.validate import MAX_SHOWN_PATH, read_regular_file, shown
from .plan import MAX_MODEL_CONFIG_BYTES, MAX_WORKER_TIMEOUT_S, WORKER_TIMEOUT_S

MAX_ERROR_CHARS = 600  # of each worker's error quoted in plan's one-line error


def add_command(sub) -> None:
    p = sub.add_parser(
        "plan", help="what a real SGLang server would pick on a (simulated) machine, with and without the registry",
        description="Resolve SGLang's real ServerArgs for a simulated machine twice, through the plugin and with "
                    "SGLang alone, and print the decisions side by side. Needs sglang installed "
                    "(pip install 'sglang-arch[serve]'). Extra server arguments go after '--'. Exits 2 when SGLang "
                    "cannot resolve them at all (the model's config.json, or arguments both modes refuse).")
    p.add_argument("--capability", type=cli_args.capability, required=True, metavar="CAP", help="the GPU to simulate")
    p.add_argument("--tp", type=cli_args.world_size, default=1, metavar="N",
                   help=f"tensor parallel size = GPUs (default 1; at most {cli_args.MAX_GPUS_PER_NODE} per node)")
    p.add_argument("--topology", type=cli_args.topology, metavar="T", help="default: the tier's typical topology")
    p.add_argument("--nnodes", type=cli_args.nnodes, default=1, metavar="N", help="nodes (default 1; at most --tp)")
    p.add_argument("--cuda", type=cli_args.cuda, default=(13, 0), metavar="X.Y", help="torch's CUDA version (default 13.0)")
    p.add_argument("--model-path", required=True, metavar="DIR", help="a model directory with config.json (no weights needed)")
    p.add_argument("--timeout", type=cli_args.bounded(1, MAX_WORKER_TIMEOUT_S, "seconds", flag="--timeout"),
                   default=WORKER_TIMEOUT_S, metavar="S",
                   help=f"seconds each SGLang worker may take (default {WORKER_TIMEOUT_S}, at most "
                        f"{MAX_WORKER_TIMEOUT_S}); past it the worker is killed and plan exits 2")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="-- then extra sglang server arguments")
    p.set_defaults(func=cmd_plan)


# SGLang's flags that name the simulated machine, and plan's own flag for each: after '--'
# SGLang's parser would take them over plan's (the last one wins) while the machine and the
# registry are built from plan's, so the two columns would describe different machines.
MACHINE_FLAGS = {"--model-path": "--model-path", "--tp-size": "--tp", "--tensor-parallel-size": "--tp",
                 "--nnodes": "--nnodes"}


def check_extra(extra: Sequence[str]) -> None:
    """Refuse a server argument after '--' that names the machine, in any spelling SGLang's
    parser takes: the flag, an abbreviation of it (argparse accepts unambiguous prefixes),
    ``--flag=value``."""
    for token in extra:
        name = token.split("=", 1)[0]
        if not name.startswith("--") or len(name) < 4:
            continue
        for flag, own in MACHINE_FLAGS.items():
            if flag.startswith(name):
                raise ValueError(f"plan: server argument {shown(name)} after '--' names the simulated machine "
                                 f"({flag}); accepted: plan's own {own} (the machine and the registry are built "
                                 f"from it)")


def check_model_dir(model_path: str) -> None:
    """``DIR/config.json`` is a regular file of at most MAX_MODEL_CONFIG_BYTES holding a JSON
    object, checked before any SGLang process starts (read without blocking: a FIFO, a
    device or a 4 GB file is refused at once).  ValueError naming the path otherwise."""
    where = f"--model-path {shown(model_path, MAX_SHOWN_PATH)}"
    accepted = (f"accepted: a model directory whose config.json is a JSON object in a regular file of at most "
                f"{MAX_MODEL_CONFIG_BYTES >> 20} MiB")
    config = os.path.join(model_path, "config.json")
    try:
        data = read_regular_file(config, MAX_MODEL_CONFIG_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        raise ValueError(f"{where} has no config.json; give a model directory") from None
    except OSError as exc:
        raise ValueError(f"{where}: cannot read config.json: {exc.strerror or exc}; {accepted}") from None
    except ValueError as exc:  # not a regular file, too large, a NUL in the path
        raise ValueError(f"{where}: config.json is {exc}; {accepted}") from None
    try:
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: config.json is not UTF-8 ({exc.reason} at byte {exc.start}); {accepted}") from None
    except RecursionError:
        raise ValueError(f"{where}: config.json is not valid JSON (nested too deeply); {accepted}") from None
    except ValueError as exc:
        raise ValueError(f"{where}: config.json is not valid JSON ({' '.join(str(exc).split())[:200]}); "
                         f"{accepted}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{where}: config.json holds a JSON {type(document).__name__}, not an object; {accepted}")


def _cut(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


def check_resolved(result: Dict[str, Any], model_path: str, extra: Sequence[str] = ()) -> None:
    """A plan compares two servers; when SGLang cannot resolve the arguments at all (both
    modes refuse, or either refuses the model's own files), there is nothing to compare:
    ValueError naming the model path (and server arguments) and SGLang's reason.  One mode
    refusing (an explicit backend the registry refuses) is the comparison: a result."""
    r, u = result["routed"], result["upstream"]
    about_model = [res for res in (r, u) if res["error"] and res.get("error_about") == "model"]
    where = f"--model-path {shown(model_path, MAX_SHOWN_PATH)}"
    if about_model:
        raise ValueError(f"plan: {where}: SGLang cannot load the model's config: {_cut(about_model[0]['error'])}; "
                         f"accepted: a model directory whose config.json Transformers can load")
    if r["error"] and u["error"]:
        if r["error"] == u["error"]:
            reason = f"with or without sglang-arch: {_cut(r['error'])}"
        else:
            reason = f"with sglang-arch: {_cut(r['error'])}; SGLang alone: {_cut(u['error'])}"
        args = f" with server arguments {shown(' '.join(extra), MAX_SHOWN_PATH)}" if extra else ""
        raise ValueError(f"plan: {where}{args}: SGLang would not start, {reason}; "
                         f"accepted: server arguments SGLang accepts for this model and machine")


def cmd_plan(args: argparse.Namespace) -> int:
    import importlib.util

    cli_args.machine(args, world="tp")
    check_model_dir(args.model_path)
    if importlib.util.find_spec("sglang") is None:
        raise ValueError("plan needs SGLang: pip install 'sglang-arch[serve]'")
    extra = list(args.server_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    check_extra(extra)
    from .plan import run_plan

    try:
        result = run_plan(args.capability, args.tp, args.topology.name if args.topology else None, args.nnodes,
                          args.cuda, args.model_path, extra, timeout=args.timeout)
    except RuntimeError as exc:  # a worker failed (e.g. a server argument SGLang refuses) or timed out
        raise ValueError(f"plan: {exc}") from None
    check_resolved(result, args.model_path, extra)
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


def _kernel(d: Dict[str, Any]) -> str:
    """A MoE / GEMM choice, marked when the kernel catalog has no build of it for the GPU."""
    return f"{d['backend']}" + (" (no build here)" if d["runs"] is False else "")


def render(result: Dict[str, Any]) -> str:
    m, r, u = result["machine"], result["routed"], result["upstream"]
    rows = [
        ("attention prefill", r["attention"]["prefill"], u["attention"]["prefill"]),
        ("attention decode", r["attention"]["decode"], u["attention"]["decode"]),
        ("all-reduce fusion", r["allreduce_fusion"]["backend"] or "off", u["allreduce_fusion"]["backend"] or "off"),
        ("torch symm mem", _symm(r["torch_symm_mem"]), _symm(u["torch_symm_mem"])),
        ("custom AR v2 table", _table(r["custom_allreduce"]["v2_table"]), _table(u["custom_allreduce"]["v2_table"])),
    ]
    if r.get("moe_gemm") and u.get("moe_gemm"):
        kind = r["moe_gemm"]["quantization"] or "not judged"
        for label, key in ((f"MoE runner ({kind})", "moe_runner"), ("FP8 block GEMM", "fp8_gemm"),
                           ("FP4 GEMM", "fp4_gemm"), ("DeepGEMM", "deep_gemm")):
            rows.append((label, _kernel(r["moe_gemm"][key]), _kernel(u["moe_gemm"][key])))
    head = (f"{m['gpus']}x sm_{m['capability'].replace('.', '')} on {m['topology']}, {m['nnodes']} node(s), "
            f"CUDA {m['cuda']}; registry tier {r['tier']['resolved']} [{r['tier']['match']}]")
    routed_head, upstream_head = "with sglang-arch", "SGLang alone"
    width = max(len(a) for a, _, _ in rows) + 2
    col = max([len(routed_head)] + [len(str(b)) for _, b, _ in rows]) + 2
    lines = [head, "", f"{'':<{width}}{routed_head:<{col}}{upstream_head}"]
    for name, routed, upstream in rows:
        mark = "" if routed == upstream else "   <- differs"
        lines.append(f"{name:<{width}}{str(routed):<{col}}{upstream}{mark}")
    if not r["torch_symm_mem"]["flag"]:
        lines.append("\n(torch symm mem is shown as it would be with --enable-torch-symm-mem)")
    for mode, res in ((routed_head, r), (upstream_head, u)):
        if res["error"]:
            lines.append(f"{mode}: server would not start: {res['error']}")
    lines.append(f"routed through the registry: {', '.join(r['routed'])}")
    return "\n".join(lines)
