"""CLI glue for ``sglang-arch plan`` (the work is in ``plan.py``)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ... import args as cli_args
from ...arch.validate import MAX_SHOWN_PATH, read_regular_file, shown
from .plan import MAX_MODEL_CONFIG_BYTES, MAX_WORKER_TIMEOUT_S, WORKER_TIMEOUT_S

MAX_ERROR_CHARS = 600  # of each worker's error quoted in plan's one-line error
WIDTH = 100  # every line of plan's table fits this many columns


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
    p.add_argument("--model-path", required=True, metavar="DIR",
                   help="a model directory with config.json (no weights needed), or a model id (org/name) already "
                        "in the local Hugging Face cache (read offline)")
    p.add_argument("--timeout", type=cli_args.bounded(1, MAX_WORKER_TIMEOUT_S, "seconds", flag="--timeout"),
                   default=WORKER_TIMEOUT_S, metavar="S",
                   help=f"seconds each SGLang worker may take (default {WORKER_TIMEOUT_S}, at most "
                        f"{MAX_WORKER_TIMEOUT_S}); past it the worker is killed and plan exits 2")
    p.add_argument("--verbose", action="store_true", dest="details",
                   help="list every concern routed through the registry")
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
        if token in ("-h", "--help"):
            raise ValueError(f"plan: {token} after '--' asks SGLang for its help, not for a plan; accepted: "
                             "python -m sglang.launch_server --help (SGLang's server arguments), or "
                             "sglang-arch plan --help")
        name = token.split("=", 1)[0]
        if not name.startswith("--") or len(name) < 4:
            continue
        for flag, own in MACHINE_FLAGS.items():
            if flag.startswith(name):
                raise ValueError(f"plan: server argument {shown(name)} after '--' names the simulated machine "
                                 f"({flag}); accepted: plan's own {own} (the machine and the registry are built "
                                 f"from it)")


MODEL_ID = r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}"


def hf_cache_dirs() -> List[str]:
    """Where the Hugging Face hub keeps downloaded repositories, in its own order:
    HF_HUB_CACHE, HF_HOME/hub, XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub."""
    env = os.environ
    dirs = []
    if env.get("HF_HUB_CACHE"):
        dirs.append(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        dirs.append(os.path.join(env["HF_HOME"], "hub"))
    if env.get("XDG_CACHE_HOME"):
        dirs.append(os.path.join(env["XDG_CACHE_HOME"], "huggingface", "hub"))
    dirs.append(os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub"))
    return list(dict.fromkeys(dirs))


def cached_model(model_id: str) -> Optional[str]:
    """The snapshot directory of ``model_id`` (``org/name``) in the local Hugging Face cache
    (the one ``refs/main`` names, else the newest holding a config.json), without any
    network access; None where there is none."""
    import re

    if not re.fullmatch(MODEL_ID, model_id) or ".." in model_id:
        return None
    folder = "models--" + model_id.replace("/", "--")
    for root in hf_cache_dirs():
        repo = os.path.join(root, folder)
        snapshots = os.path.join(repo, "snapshots")
        try:
            names = os.listdir(snapshots)
        except OSError:
            continue
        try:
            with open(os.path.join(repo, "refs", "main"), encoding="ascii") as f:
                main = f.read(100).strip()
        except (OSError, UnicodeDecodeError):
            main = ""
        order = ([main] if main in names else []) + sorted(
            names, key=lambda n: os.path.getmtime(os.path.join(snapshots, n)), reverse=True)
        for name in order:
            if os.path.isfile(os.path.join(snapshots, name, "config.json")):
                return os.path.join(snapshots, name)
    return None


def resolve_model_path(model_path: str) -> str:
    """A model directory as given, or a model id's snapshot in the local Hugging Face cache."""
    if os.path.isdir(model_path):
        return model_path
    return cached_model(model_path) or model_path


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
        import re

        cache = ""
        if re.fullmatch(MODEL_ID, model_path) and not os.path.exists(model_path):
            cache = f" (nor is it a model id in the local Hugging Face cache, {hf_cache_dirs()[0]})"
        raise ValueError(f"{where} has no config.json{cache}; give a model directory") from None
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
    from . import switches

    switches.parse(os.environ.get(switches.VARIABLE))  # a value that names no decision: refused here

    if args.topology is not None and args.topology.name == "single" and args.tp > 1:
        raise ValueError(f"plan: topology single is one GPU, but --tp {args.tp} GPUs are given; accepted: "
                         f"another topology for more than one GPU")
    model_path = resolve_model_path(args.model_path)
    check_model_dir(model_path)
    if importlib.util.find_spec("sglang") is None:
        raise ValueError("plan needs SGLang: pip install 'sglang-arch[serve]'")
    extra = list(args.server_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    check_extra(extra)
    from .plan import run_plan

    try:
        result = run_plan(args.capability, args.tp, args.topology.name if args.topology else None, args.nnodes,
                          args.cuda, model_path, extra, timeout=args.timeout)
    except RuntimeError as exc:  # a worker failed (e.g. a server argument SGLang refuses) or timed out
        raise ValueError(f"plan: {exc}") from None
    if model_path != args.model_path:
        result["machine"]["model"] = {"id": args.model_path, "path": model_path}
    check_resolved(result, args.model_path, extra)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result, args.details or getattr(args, "verbose", False)))
    return 0


def _on(decision) -> str:
    return "on (decode-sized)" if (decision or {}).get("enabled") else "off"


def _symm(d: Dict[str, Any]) -> str:
    if not d["enabled"]:
        return "off"
    return f"{d['max_bytes'] >> 20} MiB {d['algorithm']}"


def _table(name: str) -> str:
    if name.startswith("default:"):
        _, sizes, one_shot, two_shot = name.split(":")
        return f"default ({int(one_shot) >> 20}/{int(two_shot) >> 20} MiB)"
    return name


def _custom_ar(result: Dict[str, Any], mode: Dict[str, Any]) -> str:
    """The custom all-reduce table a mode's server would use: ``off`` for one GPU (no
    all-reduce: what ``explain`` says at TP1) or with ``--disable-custom-all-reduce``."""
    if result["machine"]["gpus"] == 1:
        return "off (1 GPU)"
    if mode["custom_allreduce"].get("disabled_by_flag"):
        return "off (--disable-custom-all-reduce)"
    return _table(mode["custom_allreduce"]["v2_table"])


def _kernel(d: Dict[str, Any]) -> str:
    """A MoE / GEMM choice, marked when the kernel catalog has no build of it for the GPU."""
    return f"{d['backend']}" + (" (no build here)" if d["runs"] is False else "")


# SGLang's server flags behind each row of the table: a mode that refuses one of them
# (its error starts with the flag, as the registry's checks and SGLang's own say it) shows
# ``refused`` on that row, with the reason under it.
ROW_FLAGS = {
    "attention prefill": ("--attention-backend", "--prefill-attention-backend"),
    "attention decode": ("--attention-backend", "--decode-attention-backend"),
    "all-reduce fusion": ("--flashinfer-allreduce-fusion-backend",),
    "draft attention": ("--speculative-draft-attention-backend", "--speculative-attention-mode"),
    "KV cache dtype": ("--kv-cache-dtype",),
    "DSA KV prefill": ("--dsa-prefill-backend",),
    "DSA KV decode": ("--dsa-decode-backend",),
    "FP8 block GEMM": ("--fp8-gemm-backend",),
    "FP4 GEMM": ("--fp4-gemm-backend",),
}
REFUSED = "refused"


def refused_flag(error: Any) -> str:
    """The server flag a mode's error names first (``ArchDecisionError: --attention-backend
    fa3: ...``), or ''."""
    import re

    found = re.match(r"^\w+: (--[a-z0-9][a-z0-9-]*)", str(error or ""))
    return found.group(1) if found else ""


def _refused_by(label: str, flag: str) -> bool:
    if not flag:
        return False
    if label.startswith("MoE runner"):
        return flag == "--moe-runner-backend"
    return flag in ROW_FLAGS.get(label, ())


def rows_of(result: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """(label, with sglang-arch, SGLang alone) for every decision the plan compares; a row
    for speculative decoding and the KV cache only where the server arguments set them."""
    r, u = result["routed"], result["upstream"]
    rows = [
        ("attention prefill", r["attention"]["prefill"], u["attention"]["prefill"]),
        ("attention decode", r["attention"]["decode"], u["attention"]["decode"]),
    ]
    if r.get("speculative") or u.get("speculative"):
        rows.append(("draft attention", (r.get("speculative") or {}).get("draft_attention") or "-",
                     (u.get("speculative") or {}).get("draft_attention") or "-"))
    kv_r, kv_u = r.get("kv_cache") or {}, u.get("kv_cache") or {}
    if kv_r.get("dtype") not in (None, "auto") or kv_u.get("dtype") not in (None, "auto"):
        rows.append(("KV cache dtype", str(kv_r.get("dtype")), str(kv_u.get("dtype"))))
    if any(kv.get(key) for kv in (kv_r, kv_u) for key in ("dsa_prefill", "dsa_decode")):
        rows.append(("DSA KV prefill", str(kv_r.get("dsa_prefill") or "-"), str(kv_u.get("dsa_prefill") or "-")))
        rows.append(("DSA KV decode", str(kv_r.get("dsa_decode") or "-"), str(kv_u.get("dsa_decode") or "-")))
    rows += [
        ("all-reduce fusion", r["allreduce_fusion"]["backend"] or "off", u["allreduce_fusion"]["backend"] or "off"),
        ("torch symm mem", _symm(r["torch_symm_mem"]), _symm(u["torch_symm_mem"])),
        ("PCIe-IPC all-reduce", _on(r.get("pcie_ipc")), _on(u.get("pcie_ipc"))),
        ("custom AR v2 table", _custom_ar(result, r), _custom_ar(result, u)),
    ]
    if r.get("moe_gemm") and u.get("moe_gemm"):
        kind = r["moe_gemm"]["quantization"] or "not judged"
        for label, key in ((f"MoE runner ({kind})", "moe_runner"), ("FP8 block GEMM", "fp8_gemm"),
                           ("FP4 GEMM", "fp4_gemm"), ("DeepGEMM", "deep_gemm")):
            rows.append((label, _kernel(r["moe_gemm"][key]), _kernel(u["moe_gemm"][key])))
    flags = refused_flag(r["error"]), refused_flag(u["error"])
    return [(label, REFUSED if _refused_by(label, flags[0]) else str(a),
             REFUSED if _refused_by(label, flags[1]) else str(b)) for label, a, b in rows]


def _seconds(value: Any) -> str:
    return f"{value:.1f} s" if isinstance(value, (int, float)) else "?"


def timing_lines(result: Dict[str, Any], width: int = WIDTH) -> List[str]:
    """What plan's time went to: two SGLang processes resolving the same arguments side by
    side, one with the plugin and one without (the comparison is what the time buys)."""
    import textwrap

    t = result.get("timing")
    if not t:
        return []
    text = (f"time: {_seconds(t.get('wall_s'))} for two resolutions of SGLang's server arguments run side by side, "
            f"with the plugin ({_seconds(t.get('routed_s'))}) and SGLang alone ({_seconds(t.get('upstream_s'))}), "
            f"each in a fresh interpreter; one resolution is what a server's start-up spends before its GPUs")
    return textwrap.wrap(text, width=width, break_on_hyphens=False)


def render(result: Dict[str, Any], verbose: bool = False) -> str:
    """The plan as a table within WIDTH columns; ``verbose`` lists every routed concern."""
    import textwrap

    def wrap(text: str, indent: str = "", more: str = "  ") -> List[str]:
        return textwrap.wrap(" ".join(str(text).split()), width=WIDTH, initial_indent=indent,
                             subsequent_indent=more, break_on_hyphens=False) or [indent]

    m, r, u = result["machine"], result["routed"], result["upstream"]
    rows = rows_of(result)
    head = (f"{m['gpus']}x sm_{m['capability'].replace('.', '')} on {m['topology']}, {m['nnodes']} node(s), "
            f"CUDA {m['cuda']}; registry tier {r['tier']['resolved']} [{r['tier']['match']}]")
    routed_head, upstream_head = "with sglang-arch", "SGLang alone"
    width = max(len(a) for a, _, _ in rows) + 2
    col = max([len(routed_head)] + [len(str(b)) for _, b, _ in rows]) + 2
    lines = [head]
    if m.get("topology_note"):
        lines += textwrap.wrap(m["topology_note"], width=WIDTH)
    if m.get("model"):
        lines += wrap(f"model {m['model']['id']} from the local Hugging Face cache ({m['model']['path']})")
    lines += ["", f"{'':<{width}}{routed_head:<{col}}{upstream_head}"]
    shown_errors = set()
    for name, routed, upstream in rows:
        mark = "" if routed == upstream else "   <- differs"
        lines.append(f"{name:<{width}}{routed:<{col}}{upstream}{mark}")
        for mode, value, res in ((routed_head, routed, r), (upstream_head, upstream, u)):
            if value == REFUSED and mode not in shown_errors:  # the reason once, under its first row
                shown_errors.add(mode)
                lines += textwrap.wrap(" ".join(str(res["error"]).split()), width=WIDTH, initial_indent=" " * width
                                       + f"{mode}: ", subsequent_indent=" " * (width + 2), break_on_hyphens=False)
    if not r["torch_symm_mem"]["flag"]:
        lines.append("\n(torch symm mem is shown as it would be with --enable-torch-symm-mem)")
    for mode, res in ((routed_head, r), (upstream_head, u)):
        if res["error"]:
            where = " (refused above)" if mode in shown_errors else f": {res['error']}"
            lines += wrap(f"{mode}: server would not start{where}")
    from . import switches

    off = os.environ.get(switches.VARIABLE, "").strip()
    off_note = f" ({switches.VARIABLE}={off})" if off else ""
    if verbose or not r["routed"]:
        lines += wrap(f"routed through the registry: {', '.join(r['routed']) or 'nothing'}{off_note}")
    else:
        lines += wrap(f"routed through the registry: {len(r['routed'])} concerns{off_note} (--verbose lists them)")
    lines += timing_lines(result)
    return "\n".join(lines)
