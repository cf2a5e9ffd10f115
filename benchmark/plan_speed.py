"""``sglang-arch plan`` beside SGLang's own argument resolution for the same arguments.

    python benchmark/plan_speed.py [--runs 3] [--out FILE]

For each case (a model of ``test/fixtures/models``, a simulated GPU, a TP size), interleaved
runs of:

- ``sglang-arch plan --capability CAP --tp N --model-path DIR`` (a subprocess: two SGLang
  workers, with and without the plugin, side by side);
- one plan worker alone (``python -m sglang_arch.integrations.sglang.plan --mode upstream``):
  what each of plan's two workers costs without the other beside it;
- SGLang alone: a fresh interpreter that imports SGLang and resolves the same server
  arguments once (``prepare_server_args(argv).resolve_once()``) with the platform facts
  SGLang's probes would answer for the simulated GPU, as plan's upstream worker gives them,
  and nothing of the plugin loaded (``SGLANG_ARCH_DISABLE=1``, ``SGLANG_PLUGINS`` naming
  another plugin).

Reports each median, their ratio, the plan's own account of its workers, the machine's
speed (seconds of a Python loop of 10^7 additions) and the load average.
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

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "test" / "fixtures" / "models"
CASES = (("llama-tiny", "12.0", 8), ("qwen3-moe-fp8-block", "9.0", 8), ("deepseek-mla-tiny", "12.1", 1))

SGLANG_ALONE = """
import sys, time
started = time.perf_counter()
from sglang_arch.arch import parse_capability
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, simulated_torch_device, upstream_platform_facts
from sglang.srt.runtime_context import override_platform
from sglang.srt.server_args import prepare_server_args
from sglang.srt.layers import quantization
quantization.QUANTIZATION_METHODS.setdefault("mxfp4", quantization.Mxfp4Config)
cap, tp, model = parse_capability(sys.argv[1]), sys.argv[2], sys.argv[3]
facts = dict(SIMULATED_MACHINE, **upstream_platform_facts(cap, (13, 0)))
with override_platform(**facts), simulated_torch_device(cap):
    args = prepare_server_args(["--model-path", model, "--tp-size", tp, "--nnodes", "1", "--device", "cuda"])
    args.resolve_once()
print("RESOLVED", args.attention_backend, time.perf_counter() - started)
"""


def loop_seconds() -> float:
    t0 = time.perf_counter()
    x = 0
    for i in range(10 ** 7):
        x += i
    return time.perf_counter() - t0


def timed(cmd, env) -> tuple:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    took = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])} failed ({out.returncode}): {out.stderr[-600:]}")
    return took, out.stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH")) if p)
    env.pop("SGLANG_PLUGINS", None)
    alone_env = dict(env, SGLANG_ARCH_DISABLE="1", SGLANG_PLUGINS="none")
    speed_before = loop_seconds()
    load_before = os.getloadavg()
    report = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "loop_1e7_additions_s_before": round(speed_before, 3),
                          "loadavg_before": [round(x, 2) for x in load_before]},
              "runs": args.runs, "cases": []}
    for model, cap, tp in CASES:
        path = str(MODELS / model)
        plan_cmd = [sys.executable, "-m", "sglang_arch", "plan", "--capability", cap, "--tp", str(tp),
                    "--model-path", path, "--json"]
        alone_cmd = [sys.executable, "-c", SGLANG_ALONE, cap, str(tp), path]
        topology = "single" if tp == 1 else json.loads(timed(plan_cmd[:3] + ["explain", cap, "--world-size", str(tp),
                                                                              "--json"], env)[1])["topology"]
        worker_cmd = [sys.executable, "-m", "sglang_arch.integrations.sglang.plan", "--mode", "upstream",
                      "--capability", cap, "--tp", str(tp), "--topology", topology, "--nnodes", "1", "--cuda", "13.0",
                      "--model-path", path, "--"]
        plans, alones, singles, workers = [], [], [], []
        for i in range(args.runs):  # interleaved; the order turns so drift hits each alike
            order = ("plan", "alone", "worker")
            for which in order[i % 3:] + order[:i % 3]:
                if which == "plan":
                    took, out = timed(plan_cmd, env)
                    plans.append(took)
                    workers.append(json.loads(out)["timing"])
                elif which == "worker":
                    took, _ = timed(worker_cmd, alone_env)
                    singles.append(took)
                else:
                    took, _ = timed(alone_cmd, alone_env)
                    alones.append(took)
        case = {"model": model, "capability": cap, "tp": tp, "plan_s": [round(x, 2) for x in plans],
                "sglang_alone_s": [round(x, 2) for x in alones], "one_worker_alone_s": [round(x, 2) for x in singles],
                "plan_workers": workers, "one_worker_alone_median_s": round(statistics.median(singles), 2),
                "plan_median_s": round(statistics.median(plans), 2),
                "sglang_alone_median_s": round(statistics.median(alones), 2)}
        case["ratio"] = round(case["plan_median_s"] / case["sglang_alone_median_s"], 2)
        report["cases"].append(case)
        print(json.dumps(case), flush=True)
    report["machine"]["loop_1e7_additions_s_after"] = round(loop_seconds(), 3)
    report["machine"]["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
