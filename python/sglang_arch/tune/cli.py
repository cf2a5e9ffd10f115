"""``sglang-arch tune collectives``: measure, check the registry, write an override file."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict, List, Optional

from .. import args as cli_args
from ..arch.capability import parse_capability
from ..arch.topology import MULTI_GPU_TOPOLOGIES, TOPOLOGIES, parse_topology
from ..arch.validate import (
    MAX_FILE_BYTES,
    MAX_GPUS_PER_NODE,
    MAX_TEXT,
    read_regular_file,
    printable,
    shown,
    shown_path,
    unique_json_keys,
)
from ..files import check_outputs, output_lock, write_files


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
        "collectives", help="NCCL vs torch symmetric memory (two-shot, one-shot), and with --sglang SGLang's custom "
                            "all-reduce and PCIe-IPC, per world size and size",
        description="One process per GPU; checks each path against NCCL, times it (bf16, multicast off) eager and "
                    "under CUDA-graph replay, --trials times each, reports the median and spread and whether the "
                    "registry's pick is slower than the fastest path beyond 10% and beyond the spread, and writes "
                    "an override file (the table's schema) with the measured two-shot bounds without multicast "
                    "(symm_mem_two_shot) and, with --sglang, the world sizes PCIe-IPC wins at "
                    "(pcie_ipc_world_sizes). Use it with SGLANG_ARCH_CONFIG=FILE.")
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
    c.add_argument("--sglang", action="store_true",
                   help="also measure SGLang's own paths through its GroupCoordinator (the plugin loaded): its "
                        "custom all-reduce v2 and FlashInfer's PCIe-IPC all-reduce where the group builds them, and "
                        "its dispatch as run (which path it took, against the fastest); needs sglang installed, and "
                        "nvcc for the custom all-reduce's JIT build; --out then also writes pcie_ipc_world_sizes "
                        "where PCIe-IPC was timed")
    c.add_argument("--out", metavar="FILE", help="write the override file (.toml or .json)")
    c.add_argument("--results", metavar="FILE", help="write the raw measurements and the check as JSON")
    c.add_argument("--from-results", metavar="FILE",
                   help="analyse measurements saved by --results instead of measuring (no GPU needed)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(func=cmd_tune_collectives)
    f = tsub.add_parser(
        "fusion", help="whether FlashInfer all-reduce fusion wins at one world size (your benchmark's trials)",
        description="Record whether --flashinfer-allreduce-fusion-backend auto won on this node at one world size: run the "
                    "same benchmark (same model, batch and lengths) several times without and with the flag and give "
                    "the throughputs. Fusion wins where its median is higher and its slowest trial beats the "
                    "baseline's fastest. With --out the override lists the world sizes it won at, and the registry "
                    "turns fusion on there by default (tiers that list them: SM12x over PCIe). Use it with "
                    "SGLANG_ARCH_CONFIG=FILE.")
    f.add_argument("--world-size", type=cli_args.bounded(2, MAX_GPUS_PER_NODE, "world size", "--world-size"),
                   required=True, metavar="N", help="the tensor-parallel size the trials ran at")
    f.add_argument("--without", required=True, metavar="T,T,T",
                   help="tokens per second of each trial without fusion (at least 3)")
    f.add_argument("--with", dest="with_fusion", required=True, metavar="T,T,T",
                   help="tokens per second of each trial with --flashinfer-allreduce-fusion-backend auto (at least 3)")
    f.add_argument("--topology", type=cli_args.topology, default=None, metavar="T",
                   help="override the detected topology")
    f.add_argument("--out", metavar="FILE", help="write the override file (.toml or .json); an override file "
                                                 "already there keeps its other entries and fields")
    f.add_argument("--json", action="store_true", help="print the report as JSON")
    f.set_defaults(func=cmd_tune_fusion)


def _refuse_resolve_as(what: str) -> None:
    """An override is written for the measured device's own tier; ``SGLANG_ARCH_RESOLVE_AS``
    would make the registry (and so the override's key and base values) another tier's."""
    from ..arch.registry import ENV_RESOLVE_AS

    value = os.environ.get(ENV_RESOLVE_AS)
    if value:
        raise ValueError(f"tune {what}: --out: {ENV_RESOLVE_AS}={printable(value, 40)} makes every device resolve as "
                         f"that tier, but the measurements are of this node's own GPUs; accepted: unset "
                         f"{ENV_RESOLVE_AS} (the override is written for the measured device's own tier)")


def _refuse_single(what: str, topology: Optional[str]) -> None:
    """``tune`` measures two GPUs or more: a one-GPU topology cannot describe the run."""
    if topology is not None and parse_topology(topology).name == "single":
        others = ", ".join(MULTI_GPU_TOPOLOGIES)
        raise ValueError(f"tune {what}: --topology single is one GPU, but tune measures 2 GPUs or more; accepted: "
                         f"one of {others}, or no --topology (the node's own)")


def cmd_tune_fusion(args: argparse.Namespace) -> int:
    from ..arch import detect, node_resolution, parse_topology
    from . import fusion as tf

    _refuse_single("fusion", args.topology)

    if args.out is not None:
        if not args.out.strip():
            raise ValueError("--out: an empty path; accepted: a file path (the folder must exist)")
        _refuse_resolve_as("fusion")
        check_outputs([("--out", args.out)])
    without = tf.parse_trials(args.without, "--without")
    with_fusion = tf.parse_trials(args.with_fusion, "--with")
    node = detect()
    if not node.gpus:
        raise ValueError("tune fusion: no NVIDIA GPU on this node; accepted: a run on the node the trials were "
                         "measured on (or SGLANG_ARCH_CAPABILITY / SGLANG_ARCH_GPU_COUNT describing it)")
    tf.check_world_size(args.world_size, len(node.gpus))
    res = node_resolution(node.capabilities)
    topology = parse_topology(args.topology) if args.topology else node.topology
    v = tf.verdict(without, with_fusion)
    tier = str(res.resolved)
    current = res.profile.allreduce_fusion_auto_world_sizes
    report: Dict[str, Any] = {"tier": tier, "match": res.match, "device": printable(node.gpus[0].name, 200),
                              "topology": topology.name, "world_size": args.world_size, "verdict": v}
    if current is None:
        report["sizes"] = "every world size (the tier's rule)"
        if args.out:
            raise ValueError(f"tune fusion: --out: tier {tier} turns fusion on by default at every world size where it "
                             f"runs (SGLang's own rule); a measurement adds nothing to write; accepted: --out on a "
                             f"tier that lists its measured world sizes (SM12x)")
    elif not args.out:
        report["sizes"] = tf.updated_sizes(current, args.world_size, v["result"])
    else:
        _check_capability("tune fusion", res)
        # The file is read under its folder's lock, held until it is written: a second run
        # at once waits, then reads what this one wrote (no update falls between).
        with output_lock([args.out]) as notes:
            _say(notes)
            report["sizes"] = _write_fusion(args, tier, current, v, report["device"], topology.name)
        report["override_file"] = args.out
    print(tf.render_json(report) if args.json else tf.report_text(report))
    return 0


def _say(notes) -> None:
    """What a killed earlier run left, undone before this one wrote: one line each, on stderr."""
    for note in notes:
        print(note, file=sys.stderr)


def _write_fusion(args: argparse.Namespace, tier: str, current, v, device: str, topology: str):
    """The fusion world sizes after this measurement, written into the file at --out (its
    other entries, fields and comments kept: ``merge``); the caller holds the folder's lock."""
    from . import collectives as tc
    from . import fusion as tf
    from . import merge

    where = f"--out {printable(args.out, 200)}"
    existing = merge.read_existing(args.out, where)  # its shape checked first: tables where tables belong
    existing_entries = tf.existing_override(args.out)  # the file as the registry reads it: refused if it would be
    base = existing_entries and next((e for k, e in existing_entries.items() if tf._same_capability(k, tier)), None)
    if base is not None and tf.FIELD in base:
        current = tuple(base[tf.FIELD])
    sizes = tf.updated_sizes(current, args.world_size, v["result"])
    source = tf.source_line(tier, args.world_size, device, v, f"topology {topology}")
    text = merge.updated_text(existing, tier, {tf.FIELD: list(sizes)}, source, "tune fusion", where)
    written = tc.read_back(args.out, text, where).profile(tier).allreduce_fusion_auto_world_sizes
    if tuple(written or ()) != tuple(sizes):
        raise ValueError(f"{where}: the override would be read as {written}, not {sizes}; nothing was written")
    write_files([("--out", args.out, text)], expect={args.out: existing.expect}, held=True)
    return sizes


def cmd_tune_collectives(args: argparse.Namespace) -> int:
    from . import collectives as tc

    _refuse_single("collectives", args.topology)

    # Outputs checked (and probed) before anything is read or measured: a folder that does not
    # exist, a read-only one, a FIFO, a device, both naming one file.
    outputs = [(flag, target) for flag, target in (("--out", args.out), ("--results", args.results))
               if target is not None]
    for flag, target in outputs:
        if not target.strip():
            raise ValueError(f"{flag}: an empty path; accepted: a file path (the folder must exist)")
        if args.from_results and os.path.realpath(target) == os.path.realpath(args.from_results):
            raise ValueError(f"{flag} {target} is the --from-results input; accepted: another file "
                             f"(the measurements would be overwritten)")
    check_outputs(outputs)
    if args.out:
        _refuse_resolve_as("collectives")
    gloo_out = ("--out: a gloo run checks the harness on CPUs and tunes nothing, so it writes no override; "
                "accepted: --out with an nccl run (GPUs)")
    if args.from_results and args.sglang:
        raise ValueError("--sglang measures SGLang's paths, --from-results analyses saved measurements (SGLang's "
                         "paths are in them where that run had --sglang); accepted: one of the two")
    if args.from_results:
        saved = load_results(args.from_results)
        run = saved["run"]
        if args.out and run["backend"] == "gloo":
            raise ValueError(f"--from-results {args.from_results}: {gloo_out}")
        return _report(args, run, run["world_sizes"], topology_name=args.topology or saved.get("topology"))
    if args.out and args.backend == "gloo":  # refused before the measurement, not ignored after it
        raise ValueError(gloo_out)
    if args.out and args.backend == "nccl":  # a capability with no tier is refused before minutes of measuring
        from ..arch import detect, node_resolution

        node = detect()
        if node.gpus:
            _check_capability("tune collectives", node_resolution(node.capabilities))
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
    if args.sglang:
        import importlib.util

        if importlib.util.find_spec("sglang") is None:
            raise ValueError("--sglang measures SGLang's own paths, but sglang is not installed: "
                             "pip install 'sglang-arch[serve]' (or leave --sglang out)")
    with tc.multicast_off():  # as the measurement ran; the caller's environment is restored
        run = tc.measure(world_sizes, args.sizes or tc.DEFAULT_SIZES, args.iters, args.backend,
                         trials=args.trials, modes=args.modes, sglang=args.sglang).to_dict()
        return _report(args, run, world_sizes, topology_name=args.topology)


# Bounds of a results file (README "Limits"), beyond what the command line bounds.
MAX_MEASUREMENTS = 10_000
MAX_PATHS = 16  # paths timed in one cell (the harness times 3)
MAX_PATH_NAME = 64  # characters of a path name
MAX_DEVICE = 200  # characters of run.device (it goes into the override's `sources`)
MAX_STARTED = 100  # characters of run.started (likewise)
MIN_TIME_US, MAX_TIME_US = 1e-3, 1e9  # one all-reduce: 1 ns to 1000 s
MAX_ITERS, MAX_TRIALS = 100_000, 1000  # as --iters and --trials
MAX_GRAPH_CALLS = 100_000
TIME_ACCEPTED = "a number of microseconds from 0.001 to 1000000000 (1 ns to 1000 s)"
STAT_KEYS = ("median", "min", "max")


def load_results(path: str) -> Dict[str, Any]:
    """A results file written by --results, checked field by field (a regular file of at
    most 1 MiB): every field the analysis, the report and the override file read, within
    the bounds above; every string encodable as UTF-8."""
    where = f"--from-results {path}"
    try:
        data = read_regular_file(path)
    except OSError as exc:
        raise ValueError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"{where}: cannot read: {exc}; accepted: a regular file of at most {MAX_FILE_BYTES} bytes") from None
    try:
        saved = json.loads(data.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=unique_json_keys)
    except RecursionError:
        raise ValueError(f"{where}: not a results file (nested too deeply)") from None
    except ValueError as exc:  # also UnicodeDecodeError
        raise ValueError(f"{where}: not a results file ({' '.join(str(exc).split())[:200]})") from None

    def need(ok: bool, field: str, value: Any, accepted: str) -> None:
        if not ok:
            field = field if len(field) <= 200 else field[:197] + "..."
            raise ValueError(f"{where}: field '{field}': expected {accepted}, got {shown(value)}")

    bad_text = _first_non_utf8(saved)
    if bad_text is not None:
        field, value = bad_text
        need(False, field, value, "text encodable as UTF-8 (no lone surrogate such as \\ud800)")
    need(isinstance(saved, dict), "(top level)", saved, "an object with 'run'")
    run = saved.get("run")
    need(isinstance(run, dict), "run", run, "an object")
    need(run.get("backend") in ("nccl", "gloo"), "run.backend", run.get("backend"), "'nccl' or 'gloo'")
    for key, most in (("device", MAX_DEVICE), ("started", MAX_STARTED)):
        need(isinstance(run.get(key), str) and 0 < len(run[key]) <= most, f"run.{key}", run.get(key),
             f"a string of 1-{most} characters")
    need(_is_int(run.get("iters"), 1, MAX_ITERS), "run.iters", run.get("iters"), f"an integer 1-{MAX_ITERS}")
    for key, most in (("trials", MAX_TRIALS), ("graph_calls", MAX_GRAPH_CALLS)):
        need(key not in run or _is_int(run[key], 0, most), f"run.{key}", run.get(key),
             f"an integer 0-{most} (0: not recorded), or no such field")
    chains = run.get("sglang_chain", {})
    need(isinstance(chains, dict) and len(chains) <= MAX_GPUS_PER_NODE
         and all(isinstance(v, str) and len(v) <= MAX_TEXT for v in chains.values()), "run.sglang_chain", chains,
         f"an object of world size -> how SGLang's chain was built (at most {MAX_TEXT} characters), or no such field")
    modes = run.get("modes", [])
    need(isinstance(modes, list) and len(set(map(str, modes))) == len(modes) <= 2
         and all(m in ("eager", "graph") for m in modes), "run.modes", modes,
         "a list of 'eager' and/or 'graph', or no such field")
    ws = run.get("world_sizes")
    need(isinstance(ws, list) and 0 < len(ws) <= MAX_GPUS_PER_NODE and all(_is_int(w, 2, MAX_GPUS_PER_NODE) for w in ws),
         "run.world_sizes", ws, f"a list of 1-{MAX_GPUS_PER_NODE} integers 2-{MAX_GPUS_PER_NODE}")
    cap = run.get("capability")
    need(cap is None or isinstance(cap, str), "run.capability", cap, "a capability string or null")
    need(run["backend"] == "gloo" or isinstance(cap, str), "run.capability", cap, "a capability for an nccl run")
    if isinstance(cap, str):
        try:
            parse_capability(cap)
        except ValueError as exc:
            need(False, "run.capability", cap, str(exc).split("; accepted: ", 1)[-1])
    topo = saved.get("topology")
    need(topo is None or (isinstance(topo, str) and topo.strip().lower() in TOPOLOGIES), "topology", topo,
         f"one of {', '.join(TOPOLOGIES)}, or null")
    # every run measures 2 GPUs or more (run.world_sizes): never on one GPU's topology
    need(topo is None or topo.strip().lower() != "single", "topology", topo,
         f"a topology of more than one GPU ({', '.join(MULTI_GPU_TOPOLOGIES)}), or null: "
         "the measured world sizes are 2 or more")
    ms = run.get("measurements")
    need(isinstance(ms, list) and len(ms) <= MAX_MEASUREMENTS, "run.measurements", ms,
         f"a list of at most {MAX_MEASUREMENTS} objects")
    cells: Dict[Any, int] = {}  # (world size, size) -> index of its measurement
    for i, m in enumerate(ms):
        field = f"run.measurements[{i}]"
        need(isinstance(m, dict), field, m, "an object")
        need(_is_int(m.get("world_size"), 2, MAX_GPUS_PER_NODE) and m["world_size"] in ws, f"{field}.world_size",
             m.get("world_size"), f"an integer 2-{MAX_GPUS_PER_NODE} listed in run.world_sizes")
        need(_is_int(m.get("size"), 4, cli_args.MAX_MESSAGE_BYTES) and m["size"] % 4 == 0, f"{field}.size",
             m.get("size"), f"a multiple of 4 bytes from 4 to {cli_args.MAX_MESSAGE_BYTES} (as --sizes)")
        cell = (m["world_size"], m["size"])
        if cell in cells:
            need(False, f"{field}", {"world_size": cell[0], "size": cell[1]},
                 f"one measurement per world size and size (run.measurements[{cells[cell]}] has the same)")
        cells[cell] = i
        times = {}
        for key, mode in (("times_us", "eager"), ("graph_times_us", "graph")):
            value = m.get(key, {}) if key == "graph_times_us" else m.get(key)
            need(isinstance(value, dict) and len(value) <= MAX_PATHS and all(_is_path(k) for k in value),
                 f"{field}.{key}", value, f"an object of at most {MAX_PATHS} path -> microseconds (path names of "
                 f"1-{MAX_PATH_NAME} characters)" + (", or no such field" if key == "graph_times_us" else ""))
            for p, t in value.items():
                need(_is_time(t), f"{field}.{key}.{p}", t, TIME_ACCEPTED)
            times[mode] = value
        errors = m.get("errors")
        need(isinstance(errors, dict) and len(errors) <= 2 * MAX_PATHS and all(_is_path(k) for k in errors),
             f"{field}.errors", errors, f"an object of at most {2 * MAX_PATHS} path -> reason (path names of "
             f"1-{MAX_PATH_NAME} characters)")
        for p, why in errors.items():
            need(isinstance(why, str) and len(why) <= MAX_TEXT, f"{field}.errors.{p}", why,
                 f"a string of at most {MAX_TEXT} characters")
        stats = m.get("stats", {})
        need(isinstance(stats, dict) and all(k in ("eager", "graph") for k in stats), f"{field}.stats", stats,
             "an object of mode ('eager', 'graph') -> path -> spread, or no such field")
        for mode, by_path in stats.items():
            need(isinstance(by_path, dict) and all(p in times[mode] for p in by_path), f"{field}.stats.{mode}",
                 by_path, f"an object of path -> spread, for paths timed in {mode} mode")
            for p, st in by_path.items():
                _check_spread(need, f"{field}.stats.{mode}.{p}", st)
        methods = m.get("sglang_methods", {})
        need(isinstance(methods, dict) and all(k in ("eager", "graph") and _is_path(v) for k, v in methods.items()),
             f"{field}.sglang_methods", methods, f"an object of mode ('eager', 'graph') -> the path SGLang's dispatch "
             f"took (1-{MAX_PATH_NAME} characters), or no such field")
    return saved


def _check_spread(need, field: str, st: Any) -> None:
    accepted = (f"an object with median, min and max (each {TIME_ACCEPTED}; min <= median <= max), optional "
                f"q1, q3 (times) and trials (a list of 1-{MAX_TRIALS} times)")
    need(isinstance(st, dict), field, st, accepted)
    for key in STAT_KEYS + ("q1", "q3"):
        need((key in st or key not in STAT_KEYS) and (key not in st or _is_time(st[key])), f"{field}.{key}",
             st.get(key), TIME_ACCEPTED + ("" if key in STAT_KEYS else ", or no such field"))
    need(st["min"] <= st["median"] <= st["max"], field, st, "min <= median <= max")
    trials = st.get("trials", [0.001])
    need(isinstance(trials, list) and 0 < len(trials) <= MAX_TRIALS and all(_is_time(t) for t in trials),
         f"{field}.trials", trials, f"a list of 1-{MAX_TRIALS} times ({TIME_ACCEPTED}), or no such field")


def _first_non_utf8(doc: Any):
    """(field path, value) of the first string (key or value) in ``doc`` that UTF-8 cannot
    encode (a lone surrogate from a ``\\ud800`` escape), else None.  Iterative: a document
    nested as deeply as the JSON parser allows is walked without recursion."""
    stack = [("(top level)", doc)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return where, value
        elif isinstance(value, dict):
            for k, v in value.items():
                if _first_non_utf8_key(k):
                    return f"{where} (a key)", k
                stack.append((k if where == "(top level)" else f"{where}.{k}", v))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(value))
    return None


def _first_non_utf8_key(key: str) -> bool:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def _is_int(value: Any, minimum: int, maximum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= maximum


def _is_time(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and MIN_TIME_US <= value <= MAX_TIME_US)  # a comparison: no float() of a huge int


def _is_path(name: Any) -> bool:
    return isinstance(name, str) and 0 < len(name) <= MAX_PATH_NAME


def _report(args: argparse.Namespace, run, world_sizes, topology_name) -> int:
    from ..arch import detect, node_resolution, parse_topology, resolve
    from . import collectives as tc

    report = {"run": run}
    outputs = []  # (flag, path, text): every text made before the first is written
    if run["backend"] == "nccl":
        node = detect() if not args.from_results else None
        res = node_resolution(node.capabilities) if node and node.gpus else resolve(run["capability"])
        if topology_name:
            topology = parse_topology(topology_name)
        elif node is not None:
            topology = node.topology
        else:
            raise ValueError(f"--from-results {args.from_results}: field 'topology': no topology saved; "
                             f"accepted: --topology T ({', '.join(TOPOLOGIES)}), or a topology in the file")
        measured = [m for m in ("eager", "graph") if any(tc._cell_times(c, m) for c in run["measurements"])]
        tune_mode = args.tune_mode or ("graph" if "graph" in measured else "eager")
        rows = [r for mode in measured for r in tc.check(run, res, topology, mode)]
        tuned = tc.tuned_sizes(run, mode=tune_mode)
        dispatch = [r for mode in measured for r in tc.check_dispatch(run, mode)]
        if dispatch:
            report.update(dispatch_check=dispatch, dispatch_within_10_percent=all(r["ok"] for r in dispatch))
        pcie = tc.tuned_pcie_ipc(run, tune_mode)
        if pcie:
            report["pcie_ipc_on"] = pcie
        decided = {ws: on for ws, on in pcie.items() if on is not None}  # what --out writes
        report.update(tier=str(res.resolved), match=res.match, topology=topology.name, check=rows, tuned_bytes=tuned,
                      tune_mode=tune_mode, tuned_bytes_by_mode={m: tc.tuned_sizes(run, mode=m) for m in measured},
                      within_10_percent=all(r["ok"] for r in rows),
                      within_10_percent_by_mode={m: all(r["ok"] for r in rows if r["mode"] == m) for m in measured})
        if args.out:
            _check_writable(args, run, res, tune_mode, tuned, decided)
            report["override_file"] = args.out
    # Both outputs under their folders' locks, the override file read inside them: another
    # run's update of it is never overwritten, and the two files are written as one.
    with output_lock([path for path in (args.out, args.results) if path]) as notes:
        _say(notes)
        expect = {}
        if args.out and run["backend"] == "nccl":
            text, expect[args.out] = _override_update(args, run, res, topology, tune_mode, tuned, world_sizes,
                                                      decided)
            outputs.append(("--out", args.out, text))
        if args.results:
            outputs.append(("--results", args.results, json.dumps(report, indent=2) + "\n"))
        shown_report = json.dumps(report, indent=2) if args.json else render(report)
        write_files(outputs, expect=expect, held=True)
    print(shown_report)
    return 0


def _override_update(args: argparse.Namespace, run, res, topology, tune_mode: str, tuned, world_sizes, decided):
    """(the text of the file at --out with the tier's measured two-shot bounds without multicast
    set, and the world sizes PCIe-IPC was measured on or off at, the text read there): its
    other tiers, fields and comments kept (``merge``)."""
    from . import collectives as tc
    from . import merge

    # One printable line within the schema's limit on a string: the registry reads it back.
    source = printable(f"sglang-arch tune collectives, {printable(run['started'])}, {max(world_sizes)}x "
                       f"{printable(run['device'])}, topology {topology.name}, multicast off, "
                       f"{tune_mode} timing", MAX_TEXT)
    tier = str(res.resolved)
    where = f"--out {printable(args.out, 200)}"
    existing = merge.read_existing(args.out, where)
    fields = {}
    if tuned:
        computed = tc.override_entry(tier, dict(res.profile.symm_mem_two_shot), tuned, source)[tier][tc.TUNED_FIELD]
        fields[tc.TUNED_FIELD] = merge.sizes_field(existing, tier, tc.TUNED_FIELD, computed, tuned)
    if decided:
        base = merge.effective_profile(existing, tier, where, res.profile).pcie_ipc_world_sizes
        fields[tc.PCIE_IPC_FIELD] = tc.pcie_ipc_world_sizes(base, decided)
    text = merge.updated_text(existing, tier, fields, source, "tune collectives", where)
    profile = tc.read_back(args.out, text, where).profile(tier)
    read = dict(profile.symm_mem_two_shot)
    wrong = {ws: read.get(ws) for ws, b in tuned.items() if read.get(ws) != b}
    if wrong:
        meant = {ws: tuned[ws] for ws in wrong}
        raise ValueError(f"{where}: the override would be read as {wrong}, not {meant}; nothing was written")
    wrong_pcie = {ws: on for ws, on in decided.items() if (ws in profile.pcie_ipc_world_sizes) != on}
    if wrong_pcie:
        raise ValueError(f"{where}: the override would read PCIe-IPC at {sorted(profile.pcie_ipc_world_sizes)}, "
                         f"not as measured {wrong_pcie}; nothing was written")
    return text, existing.expect


def _check_writable(args: argparse.Namespace, run, res, tune_mode: str, tuned, decided) -> None:
    """Refuse an override the measurements cannot support: nothing timed (no measurement,
    or every one errored), or a capability the table does not list.  For the latter an
    entry under the device's own key is what the schema allows (``inherits`` the tier it
    falls back to), but such an entry is an exact tier: it would give the device the
    fallback tier's arch-specific and family features, which a fallback drops; so it is
    refused, and the way to a tier for it named."""
    where = f"--from-results {args.from_results}" if args.from_results else "tune collectives"
    if not tuned and not decided:
        ms = run["measurements"]
        errored = sum(1 for m in ms if m["errors"] and not tc_times(m))
        raise ValueError(f"{where}: --out: nothing measured to write: no world size has a two_shot time (or, "
                         f"with --sglang, a pcie_ipc time beside nccl's) in {tune_mode} timing ({len(ms)} "
                         f"measurement(s), {errored} with errors only); accepted: a run where two_shot or "
                         f"pcie_ipc was timed at least once (the override would only repeat the table)")
    _check_capability(where, res)


def _check_capability(where: str, res) -> None:
    if res.match == "portable" or (res.match != "override" and res.resolved != res.requested):
        raise ValueError(f"{where}: --out: capability {res.requested} is not a known tier (it resolves as "
                         f"{res.match} of {res.resolved}); an override for {res.resolved} would change every "
                         f"GPU of that tier, and one for {res.requested} would be a new tier with the features "
                         f"of {res.resolved}; accepted: a run on a known capability; for {res.requested}, add a tier "
                         f"(name, features, and symm_mem_two_shot from the sizes this reports without --out) to an "
                         f"override file yourself")


def tc_times(m) -> bool:
    return bool(m.get("times_us") or m.get("graph_times_us"))


def render(report) -> str:
    run = report["run"]
    trials = run.get("trials") or "?"
    device = printable(run["device"])
    backend = run["backend"]
    judged = backend != "gloo"  # a gloo run checks the harness on CPUs: no registry pick is judged
    # The backend once: a gloo run's device already says it
    named = device if f"({backend}" in device else f"{device} ({backend})"
    lines = [f"{named}, world sizes {run['world_sizes']}, {trials} trials; "
             f"eager: {run['iters']} calls per trial; graph: {run.get('graph_calls') or '-'} calls per replay",
             "times per all-reduce in us: median [min-max] of the trials, slowest rank"]
    if not judged:
        lines.append("registry pick: none on gloo (CPUs): this run checks the harness; the picks are judged on GPUs")

    def label(path: str) -> str:
        # torch.distributed's all_reduce runs on the run's backend: named after it
        return backend if path == "nccl" else path
    checks = {(r["world_size"], r["size"], r.get("mode", "eager")): r for r in report.get("check", [])}
    for mode in ("eager", "graph"):
        key = "times_us" if mode == "eager" else "graph_times_us"
        cells = [m for m in run["measurements"] if m.get(key)]
        if not cells:
            continue
        paths = sorted({p for m in cells for p in m[key]})
        lines.append(f"-- {mode}")
        lines.append((f"{'ws':>3} {'size':>8}  " + "  ".join(f"{printable(label(p)):>22}" for p in paths)
                      + ("   registry pick" if judged else "")).rstrip())
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
                pick = f"{printable(r['pick'])} (not measured)"
            else:
                pick = (f"{printable(r['pick'])} ({r['pick_over_fastest']:.2f}x SGLang's fastest)"
                        f"{'' if r['ok'] else '  slower!'}")
                if r["fastest_measured"] != r["fastest"]:
                    pick += f"; {printable(r['fastest_measured'])} {r['pick_over_fastest_measured']:.2f}x faster"
            lines.append((f"{m['world_size']:>3} {_fmt(m['size']):>8}  " + "  ".join(row)
                          + (f"   {pick}" if judged else "")).rstrip())
    for m in run["measurements"]:
        for p, why in m["errors"].items():
            lines.append(f"  {m['world_size']} {_fmt(m['size'])} {printable(p)}: {printable(why)}")
    if "tuned_bytes" in report:
        def sizes(tuned):
            return {ws: "off" if b is None else _fmt(b) for ws, b in tuned.items()}

        by_mode = {m: sizes(t) for m, t in report.get("tuned_bytes_by_mode", {}).items()}
        lines.append(f"measured symm-mem max sizes, decided from {report.get('tune_mode', 'eager')} timing: "
                     f"{sizes(report['tuned_bytes'])} (by mode: {by_mode}); registry's pick never slower beyond 10% and the "
                     f"spread: {report.get('within_10_percent_by_mode', report['within_10_percent'])}")
    for ws, built in sorted((run.get("sglang_chain") or {}).items()):
        lines.append(f"SGLang's chain at world size {printable(str(ws))}: {printable(str(built))}")
    for r in report.get("dispatch_check", []):
        lines.append(f"  SGLang's dispatch ({r['mode']}) ws {r['world_size']} {_fmt(r['size'])}: took "
                     f"{printable(r['took'])}, {r['over_fastest']:.2f}x the fastest ({printable(r['fastest'])})"
                     f"{'' if r['ok'] else '  slower!'}")
    if report.get("pcie_ipc_on"):
        verdicts = {ws: {True: "on", False: "off", None: "inside the noise: the table's kept"}[on]
                    for ws, on in report["pcie_ipc_on"].items()}
        lines.append(f"PCIe-IPC by world size, decided from {report.get('tune_mode', 'eager')} timing (on: faster "
                     f"than NCCL beyond noise somewhere, slower nowhere; off: slower somewhere): {verdicts}")
    if report.get("override_file"):
        shown_file = shown_path(report["override_file"])
        lines.append(f"override written to {shown_file} (use SGLANG_ARCH_CONFIG={shown_file})")
    return "\n".join(lines)


def _fmt(size: int) -> str:
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= div and size % div == 0:
            return f"{size // div} {unit}"
    return f"{size} B"
