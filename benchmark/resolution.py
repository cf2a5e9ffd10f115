"""Resolution cost, and the CLI's start-up, as ratios from one run.

    python benchmark/resolution.py [--out FILE]

- resolve(), cached (the process registry's lru_cache) and uncached (the rule itself);
- decide(): every policy for one machine;
- runtime.current(): what each routed SGLang probe pays per call (cached);
- a hot-path hook: a ``scoped_fact`` hook (DSA's CUDA-graph replay takes one per decode step)
  over a stand-in method that reads ``get_platform().is_sm100``, against the bare method;
- the CLI: ``python -m sglang_arch explain 12.0 --json`` against ``python -c pass``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from sglang_arch.arch import (  # noqa: E402
    Capability,
    decide,
    default_registry,
    resolve,
    runtime,  # noqa: E402
)

CAPS = [Capability(m, n) for m in range(0, 21) for n in range(10)]


def per_call_ns(fn, rounds: int = 7) -> float:
    """Median over rounds of the mean per-call time of a loop long enough for ~50 ms."""
    n = 1
    while True:
        t0 = time.perf_counter()
        fn(n)
        if time.perf_counter() - t0 > 0.05:
            break
        n *= 2
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(n)
        samples.append((time.perf_counter() - t0) / n * 1e9)
    return statistics.median(samples)


def cli_start(runs: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    cmds = {"python -c pass": [sys.executable, "-c", "pass"],
            "sglang-arch explain 12.0 --json": [sys.executable, "-m", "sglang_arch", "explain", "12.0", "--json"]}
    times = {k: [] for k in cmds}
    for _ in range(runs):  # interleaved, so drift hits both alike
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, capture_output=True, check=True)
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"median_s": med, "ratio": med["sglang-arch explain 12.0 --json"] / med["python -c pass"], "runs": runs}


def _hot_path_hook():
    """Loops over a stand-in DSA method, bare and through the plugin's ``scoped_fact`` hook
    with its real glue (``dsa_dg_native_verify``: decided once per machine, the 12.0 set above)."""
    import types

    from sglang_arch.integrations.sglang import hooks
    from sglang_arch.integrations.sglang.glue import attention

    module = types.ModuleType("bench_dsa_backend")
    platform_ = types.SimpleNamespace(is_sm100=True, is_cuda=True)
    module.get_platform = lambda: platform_
    exec("def apply(bs):\n    return bs if get_platform().is_sm100 else 0\n", module.__dict__)
    sys.modules[module.__name__] = module
    hook = hooks.scoped_fact(attention.dsa_dg_native_verify, "is_sm100")
    method = module.apply

    def replay(n):
        for _ in range(n):
            method(1)

    def hooked(n):
        for _ in range(n):
            hook(method, 1)

    return replay, hooked


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the JSON result here")
    parser.add_argument("--cli-runs", type=int, default=10)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # fallback warnings are part of the work, not of the output
    reg = default_registry()
    for cap in CAPS:
        reg.resolve(cap)  # warm the cache

    def cached(n):
        for i in range(n):
            reg.resolve(CAPS[i % len(CAPS)])

    def uncached(n):
        for i in range(n):
            reg._resolve(CAPS[i % len(CAPS)])

    res = resolve("12.0")

    def decide_all(n):
        for _ in range(n):
            decide(res, None, 8)

    os.environ["SGLANG_ARCH_CAPABILITY"] = "12.0"
    runtime.reset()
    runtime.current()

    def current(n):
        for _ in range(n):
            runtime.current().facts["is_sm120"]

    replay, hooked = _hot_path_hook()

    result = {
        "command": "python benchmark/resolution.py",
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%d"),
        "ns_per_call": {
            "resolve (cached)": per_call_ns(cached),
            "resolve (uncached rule)": per_call_ns(uncached),
            "decide (all policies, one machine)": per_call_ns(decide_all),
            "runtime.current().facts[...] (a routed probe)": per_call_ns(current),
            "a method reading get_platform().is_sm100 (bare)": per_call_ns(replay),
            "the same through the scoped_fact hook (DSA's replay)": per_call_ns(hooked),
        },
        "cli_start": cli_start(args.cli_runs),
    }
    calls = result["ns_per_call"]
    result["ratios"] = {"uncached / cached resolve": calls["resolve (uncached rule)"] / calls["resolve (cached)"],
                        "scoped_fact hook / bare method": calls["the same through the scoped_fact hook (DSA's replay)"]
                        / calls["a method reading get_platform().is_sm100 (bare)"]}
    return emit(result, args.out)


if __name__ == "__main__":
    sys.exit(main())
