"""Plots and tables from the collectives measurements (runs on any machine; matplotlib).

    python benchmark/plot_collectives.py --runs results/h200x2-collectives.json results/h200x2-collectives-run2.json \
        --chain results/h200x2-sglang-allreduce.json --out-dir results --prefix h200x2

Writes ``PREFIX-collectives.png`` (time per all-reduce against message size, one line
per path, eager and CUDA-graph replay, the trials' min-max as a band),
``PREFIX-sglang-allreduce.png`` (SGLang's chain per decode batch, with and without the
plugin) and ``PREFIX-collectives-stability.json`` (the decisions of each run side by
side: the crossover per mode and, per size, the verdict two-shot vs NCCL), and prints
the Markdown tables that benchmark/README.md quotes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from sglang_arch.tune import collectives as tc  # noqa: E402

PATHS = ("nccl", "two_shot", "one_shot")
COLORS = {"nccl": "tab:blue", "two_shot": "tab:orange", "one_shot": "tab:green",
          "sglang": "black", "ca": "tab:red", "pynccl": "tab:blue", "torch_symm_mem": "tab:orange"}


def _size(b: int) -> str:
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def verdicts(run, mode: str):
    """Per size: two_shot vs nccl -- 'two_shot', 'nccl' (faster beyond the spread) or 'tie'."""
    out = {}
    for m in run["measurements"]:
        times = tc._cell_times(m, mode)
        if "two_shot" not in times or "nccl" not in times:
            continue
        if tc.slower(m, mode, "two_shot", "nccl"):
            v = "nccl"
        elif tc.slower(m, mode, "nccl", "two_shot"):
            v = "two_shot"
        else:
            v = "tie"
        out[str(m["size"])] = v
    return out


def stability(runs):
    result = {"runs": [], "same_crossover": {}, "same_verdicts": {}}
    for path, saved in runs:
        run = saved["run"]
        result["runs"].append({
            "file": path.name, "started": run["started"],
            "crossover_mib": {mode: {ws: None if b is None else b / tc.MIB for ws, b in tc.tuned_sizes(run, mode=mode).items()}
                              for mode in ("eager", "graph")},
            "verdicts_two_shot_vs_nccl": {mode: verdicts(run, mode) for mode in ("eager", "graph")},
        })
    for mode in ("eager", "graph"):
        first = result["runs"][0]
        result["same_crossover"][mode] = all(r["crossover_mib"][mode] == first["crossover_mib"][mode]
                                             for r in result["runs"])
        diffs = {s: [r["verdicts_two_shot_vs_nccl"][mode].get(s) for r in result["runs"]]
                 for s in first["verdicts_two_shot_vs_nccl"][mode]}
        result["same_verdicts"][mode] = {"all": all(len(set(v)) == 1 for v in diffs.values()),
                                         "differing_sizes": {s: v for s, v in diffs.items() if len(set(v)) > 1}}
    return result


def plot_collectives(runs, out_png: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = runs[0][1]["run"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharey=True)
    for ax, mode in zip(axes, ("eager", "graph")):
        for path in PATHS:
            cells = [m for m in run["measurements"] if path in tc._cell_times(m, mode)]
            xs = [m["size"] for m in cells]
            st = [tc._cell_stats(m, mode, path) for m in cells]
            ax.plot(xs, [s["median"] for s in st], marker="o", ms=3, color=COLORS[path],
                    label=f"{path}{' (info: not an SGLang path)' if path == 'one_shot' else ''}")
            ax.fill_between(xs, [s["min"] for s in st], [s["max"] for s in st], color=COLORS[path], alpha=0.2)
            for extra_path, extra in runs[1:]:
                cells2 = [m for m in extra["run"]["measurements"] if path in tc._cell_times(m, mode)]
                ax.plot([m["size"] for m in cells2], [tc._cell_times(m, mode)[path] for m in cells2],
                        ls=":", color=COLORS[path], lw=1)
        ax.axvline(64 << 20, color="grey", ls="--", lw=1)
        ax.text(64 << 20, ax.get_ylim()[0] if mode == "eager" else 6, " 64 MiB: registry's\n two-shot maximum",
                fontsize=7, color="grey", va="bottom")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes, bf16)")
        ax.set_title({"eager": f"eager (prefill): {run['iters']} calls back to back",
                      "graph": f"CUDA-graph replay (decode): {run.get('graph_calls')} calls per graph"}[mode])
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("time per all-reduce (us), slowest rank")
    axes[1].legend(fontsize=8, loc="upper left")
    fig.suptitle(f"all-reduce on {len(run['world_sizes']) and max(run['world_sizes'])}x {run['device']}, multicast off: "
                 f"median of {run.get('trials')} trials, band = min-max; dotted = second run", fontsize=10)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def plot_chain(chain, out_png: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hiddens = sorted({row["hidden"] for r in chain["modes"].values() for row in r.get("rows", [])})
    fig, axes = plt.subplots(1, len(hiddens), figsize=(6.5 * len(hiddens), 5), sharey=True, squeeze=False)
    for ax, hidden in zip(axes[0], hiddens):
        for mode, style in (("without", "--"), ("with", "-")):
            rows = [row for row in chain["modes"].get(mode, {}).get("rows", []) if row["hidden"] == hidden]
            for name in ("sglang", "ca", "torch_symm_mem", "pynccl"):
                for timing, marker in (("graph", "o"), ("eager", "x")):
                    pts = [(row["batch"], row[timing][name]) for row in rows if name in row[timing]]
                    if not pts:
                        continue
                    if name == "sglang" and timing == "eager" and mode == "without":
                        continue
                    ax.errorbar([p[0] for p in pts], [p[1]["median"] for p in pts],
                                yerr=[[p[1]["median"] - p[1]["min"] for p in pts],
                                      [p[1]["max"] - p[1]["median"] for p in pts]],
                                ls=style, marker=marker, ms=3, lw=1, capsize=2, color=COLORS[name],
                                alpha=1.0 if timing == "graph" else 0.5,
                                label=f"{name} {timing}, {mode} plugin")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"decode batch (message = batch x {hidden} x 2 bytes)")
        ax.set_title(f"hidden {hidden}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("time per all-reduce (us), slowest rank")
    axes[0][-1].legend(fontsize=6, ncol=2)
    fig.suptitle(f"SGLang {chain.get('sglang')} all-reduce chain on {chain['world_size']}x {chain.get('device')}: "
                 f"sglang = its dispatch (picked ca everywhere); median of {chain['trials']}, bars = min-max",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)


def tables(runs, chain, stab) -> str:
    lines = []
    run = runs[0][1]["run"]
    run2 = runs[1][1]["run"] if len(runs) > 1 else None
    for mode in ("graph", "eager"):
        lines.append(f"\n{mode}: median [min-max] of {run.get('trials')} trials, us; verdict two-shot vs NCCL "
                     f"(run 1 / run 2)\n")
        lines.append("| size | NCCL | two-shot | one-shot (info) | two-shot / NCCL | verdict |")
        lines.append("|---|---|---|---|---|---|")
        v1 = stab["runs"][0]["verdicts_two_shot_vs_nccl"][mode]
        v2 = stab["runs"][1]["verdicts_two_shot_vs_nccl"][mode] if run2 else {}
        for m in run["measurements"]:
            cells = []
            for p in PATHS:
                st = tc._cell_stats(m, mode, p) if p in tc._cell_times(m, mode) else None
                cells.append(f"{st['median']:.1f} [{st['min']:.1f}-{st['max']:.1f}]" if st else "-")
            t = tc._cell_times(m, mode)
            ratio = f"{t['two_shot'] / t['nccl']:.2f}" if "two_shot" in t and "nccl" in t else "-"
            s = str(m["size"])
            lines.append(f"| {_size(m['size'])} | " + " | ".join(cells) + f" | {ratio} | {v1.get(s)} / {v2.get(s)} |")
    if chain:
        lines.append("\nSGLang chain, graph replay (decode), median us per all-reduce; per decode step = x 2 x layers\n")
        lines.append("| hidden | batch | size | method | SGLang chain without / with plugin | ca | pynccl | "
                     "per decode step without / with (us) |")
        lines.append("|---|---|---|---|---|---|---|---|")
        steps = chain.get("decode_step_us", {})
        w_rows = {(r["hidden"], r["batch"]): r for r in chain["modes"].get("with", {}).get("rows", [])}
        for r in chain["modes"].get("without", {}).get("rows", []):
            w = w_rows.get((r["hidden"], r["batch"]), {"graph": {}})
            g = r["graph"]

            def med(d, k):
                return f"{d[k]['median']:.1f}" if k in d else "-"
            sw = steps.get("without", {}).get(str(r["hidden"]), {}).get("batches", {}).get(str(r["batch"]), {})
            sp = steps.get("with", {}).get(str(r["hidden"]), {}).get("batches", {}).get(str(r["batch"]), {})
            lines.append(f"| {r['hidden']} | {r['batch']} | {_size(r['bytes'])} | {r.get('method_graph')} | "
                         f"{med(g, 'sglang')} / {med(w['graph'], 'sglang')} | {med(g, 'ca')} | {med(g, 'pynccl')} | "
                         f"{sw.get('per_step_us', 0):.0f} / {sp.get('per_step_us', 0):.0f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", nargs="+", required=True, help="tune collectives --results files (same machine)")
    parser.add_argument("--chain", help="benchmark/sglang_allreduce.py output")
    parser.add_argument("--out-dir", default=".")
    parser.add_argument("--prefix", default="collectives")
    a = parser.parse_args()
    runs = [(Path(p), json.loads(Path(p).read_text())) for p in a.runs]
    out = Path(a.out_dir)
    stab = stability(runs)
    (out / f"{a.prefix}-collectives-stability.json").write_text(json.dumps(stab, indent=2) + "\n")
    plot_collectives(runs, out / f"{a.prefix}-collectives.png")
    chain = json.loads(Path(a.chain).read_text()) if a.chain else None
    if chain:
        plot_chain(chain, out / f"{a.prefix}-sglang-allreduce.png")
    print(tables(runs, chain, stab))
    print("\nstability:", json.dumps({k: stab[k] for k in ("same_crossover", "same_verdicts")}),
          [r["crossover_mib"] for r in stab["runs"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
