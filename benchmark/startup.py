"""The plugin's cost on SGLang's start-up, as a ratio from one run.

    python benchmark/startup.py [--runs N] [--in-process-runs N] [--out FILE]

Times ``python -m sglang.launch_server --help`` with the plugin and with
``SGLANG_ARCH_DISABLE=1``, in interleaved pairs (the order inside a pair alternates), and
reports the medians, their ratio, and the spread of the per-pair ratios (min, quartiles,
max).  "With" is whatever an installed sglang-arch does on start (SGLang's entry point, an
early import hook, ...): the script only sets or clears ``SGLANG_ARCH_DISABLE``.  Also, in
process: the cost of ``load_plugins()`` after ``import sglang.launch_server``, and of the
plugin's two steps (``register()``: detect, resolve, check every target; SGLang's
``HookRegistry.apply_hooks()``), ``--in-process-runs`` times (default: ``--runs``); which
hardware probes one ``--help`` ran in each mode (sglang-arch's detection, with its time),
the plugin's own time inside one ``--help`` as a share of it (``--in-process-runs`` times),
and whether torch initialised CUDA; and NVML's own start on this machine.  The subprocess
ratio is noisy on a small machine; the in-process numbers are the cost itself.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402

HELP = [sys.executable, "-m", "sglang.launch_server", "--help"]
LOAD = [sys.executable, "-c", (
    "import time, sglang.launch_server, sglang.srt.plugins as p;"
    "t=time.perf_counter(); p.load_plugins(); print(time.perf_counter()-t)")]
# The plugin's own two steps, inside launch_server's import context.
SPLIT = [sys.executable, "-c", (
    "import json, time, sglang.launch_server; from sglang.srt.plugins.hook_registry import HookRegistry;"
    "import sglang_arch.integrations.sglang as p; t0=time.perf_counter(); p.register(); t1=time.perf_counter();"
    "HookRegistry.apply_hooks(); t2=time.perf_counter();"
    "print(json.dumps({'register': t1 - t0, 'apply_hooks': t2 - t1}))")]
# One ``launch_server --help`` in this process, its output discarded (the in-process scripts'
# common step).
RUN_HELP = """
sys.argv = ["launch_server", "--help"]
out, sys.stdout = sys.stdout, open("/dev/null", "w")
try:
    runpy.run_module("sglang.launch_server", run_name="__main__")
except SystemExit:
    pass
sys.stdout = out
"""
# One --help in-process: which hardware probes ran (sglang-arch's detection, with its time),
# and whether torch initialised CUDA.  Run once per mode.
TRACE = [sys.executable, "-c", """
import importlib, json, runpy, sys, time
calls = []
try:
    d = importlib.import_module("sglang_arch.arch.detect")
    for name in ("_nvml_node", "_torch_node"):
        def wrap(orig=getattr(d, name), name=name):
            t = time.perf_counter()
            try:
                return orig()
            finally:
                calls.append({"probe": name, "seconds": time.perf_counter() - t})
        setattr(d, name, wrap)
except ImportError:
    pass
""" + RUN_HELP + """import torch
print(json.dumps({"detections": calls, "cuda_initialized": torch.cuda.is_initialized()}))
"""]
# The plugin's own time inside one ``--help`` (in-process, as installed): the early router's
# first import of sglang-arch (``_learn_targets``), its routing of each target module as it
# loads (``loaded``), and SGLang's entry point (``register``), against the whole run's wall
# time.  Less noisy than the ratio of two processes: it times only what the plugin runs.
OWN = [sys.executable, "-c", """
import json, runpy, sys, time
t0 = time.perf_counter()
spent = {"learn_targets": 0.0, "loaded": 0.0, "register": 0.0}
def timed(owner, name, key):
    orig = getattr(owner, name)
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return orig(*a, **k)
        finally:
            spent[key] += time.perf_counter() - t
    setattr(owner, name, wrapper)
try:
    import _sglang_arch_early as early
    timed(early._Router, "_learn_targets", "learn_targets")
    timed(early._Router, "loaded", "loaded")
except ImportError:
    early = None
import sglang_arch.integrations.sglang as entry
timed(entry, "register", "register")
""" + RUN_HELP + """wall = time.perf_counter() - t0
print(json.dumps(dict(spent, total=sum(spent.values()), wall=wall, early_router=early is not None)))
"""]
# NVML's own start on this machine (what a detection through NVML pays first).
NVML = [sys.executable, "-c", (
    "import json, time; t0=time.perf_counter(); import pynvml; t1=time.perf_counter(); pynvml.nvmlInit();"
    "t2=time.perf_counter(); n=pynvml.nvmlDeviceGetCount(); pynvml.nvmlShutdown();"
    "print(json.dumps({'import_s': t1 - t0, 'init_s': t2 - t1, 'gpus': n}))")]


def compiled_as_installed() -> None:
    """sglang-arch's bytecode up to date, as ``pip install`` leaves it: where the environment
    sets PYTHONDONTWRITEBYTECODE=1, a module edited since the last compile is compiled again
    in every interpreter, which a user's install never does."""
    import compileall
    import importlib.util

    for name in ("sglang_arch", "_sglang_arch_early"):
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        if spec.submodule_search_locations:
            for folder in spec.submodule_search_locations:
                compileall.compile_dir(folder, quiet=1)
        else:
            compileall.compile_file(spec.origin, quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="interleaved pairs (default 7)")
    parser.add_argument("--in-process-runs", type=int, metavar="N",
                        help="runs of the in-process load_plugins() / register() timings (default: --runs)")
    parser.add_argument("--out")
    args = parser.parse_args()
    compiled_as_installed()
    base = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    modes = {"with plugin": dict(base), "plugin disabled": dict(base, SGLANG_ARCH_DISABLE="1")}
    help_times = {m: [] for m in modes}
    load_times = {m: [] for m in modes}
    pair_ratios = []
    in_process = args.runs if args.in_process_runs is None else args.in_process_runs
    for i in range(args.runs):
        order = list(modes.items()) if i % 2 == 0 else list(reversed(modes.items()))
        for mode, env in order:
            t0 = time.perf_counter()
            out = subprocess.run(HELP, env=env, capture_output=True, text=True)
            help_times[mode].append(time.perf_counter() - t0)
            if out.returncode != 0:
                raise SystemExit(f"launch_server --help failed ({mode}): {out.stderr[-500:]}")
            if i < in_process:
                out = subprocess.run(LOAD, env=env, capture_output=True, text=True, check=True)
                load_times[mode].append(float(out.stdout.strip().splitlines()[-1]))
        pair_ratios.append(help_times["with plugin"][-1] / help_times["plugin disabled"][-1])
        print(f"pair {i + 1}/{args.runs}: --help with {help_times['with plugin'][-1]:.2f} s, without "
              f"{help_times['plugin disabled'][-1]:.2f} s, ratio {pair_ratios[-1]:.3f}", file=sys.stderr, flush=True)
    split = [json.loads(subprocess.run(SPLIT, env=modes["with plugin"], capture_output=True, text=True, check=True)
                        .stdout.strip().splitlines()[-1]) for _ in range(in_process)]
    own = [_last_json(OWN, modes["with plugin"]) for _ in range(in_process)]
    shares = [o["total"] / o["wall"] for o in own if "total" in o]
    trace = {mode: _last_json(TRACE, env) for mode, env in modes.items()}
    nvml = _last_json(NVML, modes["with plugin"])
    med = {m: statistics.median(v) for m, v in help_times.items()}
    load = {m: statistics.median(v) if v else None for m, v in load_times.items()}
    result = {
        "command": f"python benchmark/startup.py --runs {args.runs} --in-process-runs {in_process}",
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "launch_server_help_median_s": med,
        "ratio_with_over_without": med["with plugin"] / med["plugin disabled"],
        "pair_ratios": pair_ratios,
        "pair_ratio_spread": _spread(pair_ratios),
        "launch_server_help_s": help_times,
        "load_plugins_median_s": load,
        "load_plugins_added_s": (load["with plugin"] - load["plugin disabled"]) if in_process else None,
        "plugin_steps_median_s": ({k: statistics.median(d[k] for d in split) for k in ("register", "apply_hooks")}
                                  if in_process else None),
        "plugin_own_time_in_help": own,
        "plugin_own_share_of_help": _spread(shares) if shares else None,
        "help_trace": trace,
        "nvml_start": nvml,
        "note": "apply_hooks is SGLang's HookRegistry: it re-points stale imports by scanning every loaded module "
                "once per target",
    }
    return emit(result, args.out)


def _last_json(command, env):
    """The JSON on the last line of ``command``'s output, or {"error": ...} when it failed."""
    out = subprocess.run(command, env=env, capture_output=True, text=True)
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1][:300]}


def _spread(values):
    """median, min, max and the quartiles (statistics' inclusive method) of ``values``."""
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive") if len(values) > 1 else (values[0],) * 3
    return {"median": statistics.median(values), "min": min(values), "q1": q1, "q3": q3, "max": max(values)}


if __name__ == "__main__":
    sys.exit(main())
