"""``sglang-arch tune collectives``: measure, check the registry, write an override file."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, Dict, List

from .. import args as cli_args
from ..arch.validate import MAX_FILE_BYTES, MAX_GPUS_PER_NODE, read_regular_file, shown


def _modes(text: str) -> List[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    if not modes or any(m not in ("eager", "graph") for m in modes):
        raise argparse.ArgumentTypeError(f"invalid modes {text!r}; accepted: eager, graph (comma-separated)")
    return modes


def add_command(sub) -> None:
    p = sub.add_parser("tune", help="measure collectives on this node and write a registry override",
                       description="Measure all-reduce paths on this node.")
    tsub = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    c = tsub.add_parser(
        "collectives", help="NCCL vs torch symmetric memory (two-shot, one-shot), per world size and size",
        description="One process per GPU; checks each path against NCCL, times it (bf16, multicast off) eager and "
                    "under CUDA-graph replay, --trials times each, reports the median and spread and whether the "
                    "registry's pick is slower than the fastest path beyond 10% and beyond the spread, and writes "
                    "an override file (the table's schema) with the measured symm-mem sizes. Use it with "
                    "SGLANG_ARCH_CONFIG=FILE.")
    c.add_argument("--world-sizes", type=cli_args.tune_world_sizes, default=None, metavar="N,M",
                   help="default: 2 up to the visible GPU count (powers of two)")
    c.add_argument("--sizes", type=cli_args.tune_sizes, default=None, metavar="S,S",
                   help="message sizes (default 4K..256M, x2 steps)")
    c.add_argument("--iters", type=cli_args.iters, default=20, help="eager calls per trial (default 20)")
    c.add_argument("--trials", type=cli_args.trials, default=7, help="timed trials per path, mode and size (default 7)")
    c.add_argument("--modes", default="eager,graph", type=_modes, metavar="M,M",
                   help="eager (prefill: calls back to back) and/or graph (decode: 20 calls captured in a "
                        "CUDA graph, replayed); default both")
    c.add_argument("--tune-mode", choices=("eager", "graph"), default=None,
                   help="which timing decides the override's sizes (default: graph where measured)")
    c.add_argument("--backend", choices=("nccl", "gloo"), default="nccl",
                   help="gloo runs on CPUs and checks the harness only")
    c.add_argument("--topology", type=cli_args.topology, default=None, metavar="T",
                   help="override the detected topology for the check")
    c.add_argument("--out", metavar="FILE", help="write the override file (.toml or .json)")
    c.add_argument("--results", metavar="FILE", help="write the raw measurements and the check as JSON")
    c.add_argument("--from-results", metavar="FILE",
                   help="analyse measurements saved by --results instead of measuring (no GPU needed)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(func=cmd_tune_collectives)


def cmd_tune_collectives(args: argparse.Namespace) -> int:
    from . import collectives as tc

    if args.from_results:
        saved = load_results(args.from_results)
        run = saved["run"]
        return _report(args, run, run["world_sizes"], topology_name=args.topology or saved.get("topology"))
    try:
        import torch  # noqa: F401
    except ImportError:
        raise ValueError("tune collectives measures with torch, which is not installed: pip install torch "
                         "(or analyse saved measurements with --from-results FILE)") from None
    world_sizes = args.world_sizes
    if world_sizes is None:
        if args.backend == "gloo":
            world_sizes = [2, 4]
        else:
            n = torch.cuda.device_count()
            world_sizes = [w for w in (2, 4, 8) if w <= n]
            if not world_sizes:
                raise ValueError(f"tune collectives needs at least 2 GPUs; {n} visible (or --backend gloo)")
    with tc.multicast_off():  # as the measurement ran; the caller's environment is restored
        run = tc.measure(world_sizes, args.sizes or tc.DEFAULT_SIZES, args.iters, args.backend,
                         trials=args.trials, modes=args.modes).to_dict()
        return _report(args, run, world_sizes, topology_name=args.topology)


def load_results(path: str) -> Dict[str, Any]:
    """A results file written by --results, checked field by field (a regular file of at most 1 MiB)."""
    where = f"--from-results {path}"
    try:
        data = read_regular_file(path)
    except OSError as exc:
        raise ValueError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{where}: cannot read: {exc}; accepted: a regular file of at most {MAX_FILE_BYTES} bytes") from None
    try:
        saved = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ValueError(f"{where}: not a results file (nested too deeply)") from None
    except ValueError as exc:  # also UnicodeDecodeError
        raise ValueError(f"{where}: not a results file ({' '.join(str(exc).split())[:200]})") from None

    def need(ok: bool, field: str, value: Any, accepted: str) -> None:
        if not ok:
            raise ValueError(f"{where}: field '{field}': expected {accepted}, got {shown(value)}")

    need(isinstance(saved, dict), "(top level)", saved, "an object with 'run'")
    run = saved.get("run")
    need(isinstance(run, dict), "run", run, "an object")
    need(run.get("backend") in ("nccl", "gloo"), "run.backend", run.get("backend"), "'nccl' or 'gloo'")
    for key in ("device", "started"):
        need(isinstance(run.get(key), str), f"run.{key}", run.get(key), "a string")
    need(_is_int(run.get("iters"), 1, 10 ** 6), "run.iters", run.get("iters"), "an integer >= 1")
    ws = run.get("world_sizes")
    need(isinstance(ws, list) and 0 < len(ws) <= MAX_GPUS_PER_NODE and all(_is_int(w, 2, MAX_GPUS_PER_NODE) for w in ws),
         "run.world_sizes", ws, f"a list of integers 2-{MAX_GPUS_PER_NODE}")
    cap = run.get("capability")
    need(cap is None or isinstance(cap, str), "run.capability", cap, "a capability string or null")
    need(run["backend"] == "gloo" or isinstance(cap, str), "run.capability", cap, "a capability for an nccl run")
    topo = saved.get("topology")
    need(topo is None or isinstance(topo, str), "topology", topo, "a topology name or null")
    ms = run.get("measurements")
    need(isinstance(ms, list) and len(ms) <= 10_000, "run.measurements", ms, "a list of at most 10000 objects")
    for i, m in enumerate(ms):
        field = f"run.measurements[{i}]"
        need(isinstance(m, dict), field, m, "an object")
        need(_is_int(m.get("world_size"), 2, MAX_GPUS_PER_NODE), f"{field}.world_size", m.get("world_size"),
             f"an integer 2-{MAX_GPUS_PER_NODE}")
        need(_is_int(m.get("size"), 4, cli_args.MAX_MESSAGE_BYTES), f"{field}.size", m.get("size"),
             f"an integer 4-{cli_args.MAX_MESSAGE_BYTES}")
        times, errors = m.get("times_us"), m.get("errors")
        need(isinstance(times, dict) and all(isinstance(k, str) and _is_time(v) for k, v in times.items()),
             f"{field}.times_us", times, "an object of path -> microseconds (a finite number > 0)")
        need(isinstance(errors, dict) and all(isinstance(v, str) for v in errors.values()),
             f"{field}.errors", errors, "an object of path -> reason")
    return saved


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _is_int(value: Any, minimum: int, maximum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= maximum


def _is_time(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _report(args: argparse.Namespace, run, world_sizes, topology_name) -> int:
    from ..arch import detect, node_resolution, parse_topology, resolve
    from . import collectives as tc

    report = {"run": run}
    if run["backend"] == "nccl":
        node = detect() if not args.from_results else None
        res = node_resolution(node.capabilities) if node and node.gpus else resolve(run["capability"])
        topology = parse_topology(topology_name) if topology_name else node.topology
        measured = [m for m in ("eager", "graph") if any(tc._cell_times(c, m) for c in run["measurements"])]
        tune_mode = args.tune_mode or ("graph" if "graph" in measured else "eager")
        rows = [r for mode in measured for r in tc.check(run, res, topology, mode)]
        tuned = tc.tuned_sizes(run, mode=tune_mode)
        report.update(tier=str(res.resolved), match=res.match, topology=topology.name, check=rows, tuned_mib=tuned,
                      tune_mode=tune_mode, tuned_mib_by_mode={m: tc.tuned_sizes(run, mode=m) for m in measured},
                      within_10_percent=all(r["ok"] for r in rows),
                      within_10_percent_by_mode={m: all(r["ok"] for r in rows if r["mode"] == m) for m in measured})
        if args.out:
            source = (f"sglang-arch tune collectives, {run['started']}, {max(world_sizes)}x {run['device']}, "
                      f"topology {topology.name}, multicast off, {tune_mode} timing")
            entry = tc.override_entry(str(res.resolved), dict(res.profile.torch_symm_mem), tuned, source)
            tc.write_override(args.out, entry)
            report["override_file"] = args.out
    if args.results:
        with open(args.results, "w") as fh:
            json.dump(report, fh, indent=2)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    return 0


def render(report) -> str:
    run = report["run"]
    trials = run.get("trials") or "?"
    lines = [f"{run['device']} ({run['backend']}), world sizes {run['world_sizes']}, {trials} trials; "
             f"eager: {run['iters']} calls per trial; graph: {run.get('graph_calls') or '-'} calls per replay",
             "times per all-reduce in us: median [min-max] of the trials, slowest rank"]
    checks = {(r["world_size"], r["size"], r.get("mode", "eager")): r for r in report.get("check", [])}
    for mode in ("eager", "graph"):
        key = "times_us" if mode == "eager" else "graph_times_us"
        cells = [m for m in run["measurements"] if m.get(key)]
        if not cells:
            continue
        paths = sorted({p for m in cells for p in m[key]})
        lines.append(f"-- {mode}")
        lines.append(f"{'ws':>3} {'size':>8}  " + "  ".join(f"{p:>22}" for p in paths) + "   registry pick")
        for m in cells:
            row = []
            for p in paths:
                if p in m[key]:
                    st = m.get("stats", {}).get(mode, {}).get(p, {})
                    lo, hi = st.get("min", m[key][p]), st.get("max", m[key][p])
                    row.append(f"{m[key][p]:>8.1f} [{lo:>5.1f}-{hi:>5.1f}]".rjust(22))
                else:
                    row.append(f"{'-':>22}")
            r = checks.get((m["world_size"], m["size"], mode))
            if r is None:
                pick = ""
            elif r["pick_over_fastest"] is None:
                pick = f"{r['pick']} (not measured)"
            else:
                pick = f"{r['pick']} ({r['pick_over_fastest']:.2f}x SGLang's fastest){'' if r['ok'] else '  slower!'}"
                if r["fastest_measured"] != r["fastest"]:
                    pick += f"; {r['fastest_measured']} {r['pick_over_fastest_measured']:.2f}x faster"
            lines.append(f"{m['world_size']:>3} {_fmt(m['size']):>8}  " + "  ".join(row) + f"   {pick}")
    for m in run["measurements"]:
        for p, why in m["errors"].items():
            lines.append(f"  {m['world_size']} {_fmt(m['size'])} {p}: {why}")
    if "tuned_mib" in report:
        by_mode = report.get("tuned_mib_by_mode", {})
        lines.append(f"measured symm-mem max sizes (MiB), decided from {report.get('tune_mode', 'eager')} timing: "
                     f"{report['tuned_mib']} (by mode: {by_mode}); registry's pick never slower beyond 10% and the "
                     f"spread: {report.get('within_10_percent_by_mode', report['within_10_percent'])}")
    if report.get("override_file"):
        lines.append(f"override written to {report['override_file']} (use SGLANG_ARCH_CONFIG={report['override_file']})")
    return "\n".join(lines)


def _fmt(size: int) -> str:
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return f"{size // div} {unit}"
    return f"{size} B"
