"""SGLang's fused all-reduce + residual + RMSNorm (FlashInfer) against the unfused path.

    python benchmark/fused_allreduce_rmsnorm.py [--world-size 2] [--trials 7] [--out FILE]

One process per GPU loads SGLang's plugins as SGLang does (``load_plugins()``: the
registry decides), publishes SGLang 0.5.23's arguments with
``--flashinfer-allreduce-fusion-backend auto`` and builds its tensor-parallel groups as
the model runner does (``sglang_arch.tune.sglang_chain.Chain``).  It records what
SGLang's own gate (``add_norm.flashinfer_ar_fusion_applies``) and backend resolution say
on this machine, then for a decode step's hidden states (bf16, hidden 4096 and 8192,
tokens 1 to 256) runs:

- ``fused``: SGLang's ``flashinfer_allreduce_residual_rmsnorm`` (FlashInfer's
  ``allreduce_fusion``, pattern kARResidualRMSNorm, SGLang's workspace manager), the
  kernel the gate admits;
- ``unfused``: SGLang's ``GroupCoordinator.all_reduce`` (its own dispatch: custom
  all-reduce, torch symmetric memory, NCCL) followed by FlashInfer's
  ``fused_add_rmsnorm`` (the kernel family of sgl_kernel's ``fused_add_rmsnorm``, which the
  GPU host cannot carry);

checks that both give the same normalised output and residual (bf16 tolerance), and times
both eagerly and under CUDA-graph replay (20 calls captured inside SGLang's
``graph_capture()``), ``--trials`` trials each, the slowest rank's time.  Multicast stays
off.  ``--cpu`` checks the harness on CPUs with gloo (no FlashInfer kernels: the fused
path answers "unavailable" there).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import emit  # noqa: E402
from sglang_allreduce import common_args, common_parser, result_header  # noqa: E402
from sglang_arch.tune.collectives import MULTICAST_OFF  # noqa: E402
from sglang_arch.tune.collectives import spread as _spread  # noqa: E402
from sglang_arch.tune.sglang_chain import Chain, run_ranks, stub_sgl_kernel_if_missing, with_fatal  # noqa: E402
from sglang_arch.tune.sglang_chain import time_eager as _time_eager  # noqa: E402
from sglang_arch.tune.sglang_chain import time_graph as _time_graph  # noqa: E402

TOKENS = (1, 8, 32, 64, 128, 256)
EPS = 1e-6
MAX_TOKENS = 2048  # SGLang's default workspace size for the fused kernel


def _rms_add_reference(x, residual, weight):
    """The unfused result in float32: residual + x, then RMSNorm."""
    import torch

    r = residual.float() + x.float()
    norm = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + EPS) * weight.float()
    return norm, r


def _rank(rank: int, world: int, port: int, args: Dict[str, Any], queue) -> None:
    os.environ.update(MULTICAST_OFF)
    info: Dict[str, Any] = {"rank": rank}
    try:
        import torch
        import torch.distributed as dist

        info["sgl_kernel_stubbed"] = stub_sgl_kernel_if_missing()
        from sglang.srt.plugins import load_plugins

        load_plugins()
        chain = Chain(rank, world, port, args["cpu"], info,
                      server_args={"flashinfer_allreduce_fusion_backend": "auto"})
        from sglang.srt.layers import flashinfer_comm_fusion as fc
        from sglang.srt.layers.layer_boundary.residual import add_norm

        info["resolved_backend"] = fc.resolve_flashinfer_allreduce_fusion_backend()
        info["gate_routed_by_plugin"] = bool(getattr(add_norm.flashinfer_ar_fusion_applies,
                                                     "__sglang_arch_target__", None))
        info["flashinfer_comm"] = fc._flashinfer_comm is not None
        try:
            import flashinfer
            from flashinfer.norm import fused_add_rmsnorm

            info["flashinfer"] = flashinfer.__version__
        except Exception as exc:
            fused_add_rmsnorm = None
            info["flashinfer_error"] = f"{type(exc).__name__}: {exc}"[:300]

        def unfused(x, residual, weight):
            y = chain.sglang_all_reduce(x)
            if fused_add_rmsnorm is None or chain.cpu:
                norm, res = _rms_add_reference(y, residual, weight)
                return norm.to(x.dtype), res.to(x.dtype)
            res = residual.clone()
            fused_add_rmsnorm(y, res, weight, EPS)  # y <- norm(y + res), res <- y + res
            return y, res

        def fused(x, residual, weight):
            return fc.flashinfer_allreduce_residual_rmsnorm(x, residual, weight, EPS, MAX_TOKENS)

        rows = []
        for hidden in args["hidden"]:
            for tokens in args["tokens"]:
                g = torch.Generator().manual_seed(1000 * rank + tokens)
                x = (torch.randn(tokens, hidden, generator=g) / 4).to(torch.bfloat16).to(chain.device)
                residual = torch.randn(tokens, hidden, generator=torch.Generator().manual_seed(tokens)).to(
                    torch.bfloat16).to(chain.device)
                weight = (1 + torch.randn(hidden, generator=torch.Generator().manual_seed(7)) / 10).to(
                    torch.bfloat16).to(chain.device)
                total = x.float().clone()
                dist.all_reduce(total)
                ref_norm, ref_res = _rms_add_reference(total, residual, weight)
                row: Dict[str, Any] = {"hidden": hidden, "tokens": tokens, "bytes": x.numel() * x.element_size(),
                                       "gate_applies": bool(add_norm.flashinfer_ar_fusion_applies(tokens)),
                                       "eager": {}, "graph": {}, "max_abs_err": {}, "errors": {}}
                for name, fn in (("unfused", unfused), ("fused", fused)):
                    try:
                        norm, res = fn(x, residual, weight)
                        if norm is None:
                            row["errors"][name] = "SGLang's fused path answered unavailable (None)"
                            continue
                        row["max_abs_err"][name] = {"norm": float((norm.float() - ref_norm).abs().max()),
                                                    "residual": float((res.float() - ref_res).abs().max())}
                    except Exception as exc:
                        row["errors"][name] = f"{type(exc).__name__}: {exc}"[:300]
                        continue
                    def call(fn=fn):
                        return fn(x, residual, weight)

                    try:
                        row["eager"][name] = _spread(_time_eager(chain, call, args["iters"], args["trials"]))
                    except Exception as exc:
                        row["errors"][f"{name}@eager"] = f"{type(exc).__name__}: {exc}"[:300]
                    try:
                        samples, _ = _time_graph(chain, call, x, args["trials"])
                        row["graph"][name] = _spread(samples)
                    except Exception as exc:
                        row["errors"][f"{name}@graph"] = f"{type(exc).__name__}: {exc}"[:300]
                        if not chain.cpu:
                            torch.cuda.synchronize()
                for mode in ("eager", "graph"):
                    t = row[mode]
                    if "fused" in t and "unfused" in t:
                        row[f"{mode}_fused_over_unfused"] = t["fused"]["median"] / t["unfused"]["median"]
                rows.append(row)
        info["rows"] = rows
        queue.put(info)
    except Exception as exc:
        queue.put(with_fatal(info, exc))


def summary(r: Dict[str, Any]) -> List[str]:
    lines = [f"backend {r.get('resolved_backend')}, gate routed {r.get('gate_routed_by_plugin')}, "
             f"flashinfer {r.get('flashinfer', r.get('flashinfer_error'))}, coordinator {r.get('coordinator')}"]
    for key in ("fatal", "fatal_ranks", "coordinator_error"):
        if r.get(key):
            lines.append(f"   {key}: {r[key]}")
    for row in r.get("rows", []):
        cells = []
        for mode in ("graph", "eager"):
            t = row[mode]
            cells.append(mode + " " + "/".join(f"{t[n]['median']:.1f}" if n in t else "-" for n in ("unfused", "fused")))
        lines.append(f"   h{row['hidden']} t{row['tokens']:>3} gate {row['gate_applies']!s:<5} unfused/fused us: "
                     + "  ".join(cells) + f"  err {row['max_abs_err']}" + (f"  {row['errors']}" if row["errors"] else ""))
    return lines


def main() -> int:
    parser = common_parser(__doc__.splitlines()[0])
    parser.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    parser.add_argument("--timeout", type=float, default=540, help="seconds for the ranks")
    a = parser.parse_args()
    args = dict(common_args(a), timeout=a.timeout, tokens=[int(t) for t in a.tokens.split(",")])
    result: Dict[str, Any] = dict(result_header("fused_allreduce_rmsnorm.py", a), eps=EPS)
    try:
        import importlib.metadata as md

        import torch

        result["torch"] = torch.__version__
        result["sglang"] = md.version("sglang")
        if not a.cpu:
            result["device"] = torch.cuda.get_device_name(0)
    except Exception as exc:
        result["versions_error"] = str(exc)
    result["run"] = run_ranks(_rank, args, args["timeout"])
    print("\n".join(summary(result["run"])), file=sys.stderr, flush=True)
    return emit(result, a.out)


if __name__ == "__main__":
    sys.exit(main())
