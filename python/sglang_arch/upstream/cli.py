"""CLI glue for ``sglang-arch upstream`` (the work is in ``series.py``)."""

from __future__ import annotations

import argparse


def add_command(sub) -> None:
    p = sub.add_parser(
        "upstream", help="write the registry's core into an SGLang source tree, one commit per PR",
        description="Add sglang/kernels/backend_windows.py (kernel windows as CapabilityRequirement sets) and "
                    "sglang/srt/platforms/cuda_arch.py (the per-architecture table) to SRC and edit SGLang's call "
                    "sites to read them: torch symm mem and custom all-reduce v2 sizes, FlashInfer all-reduce "
                    "fusion, the attention default; then two-shot symm mem without multicast, SM12x fusion when "
                    "asked for, the trtllm_mla prefill gate and fa3's check; on a git clone, also SGLang-style "
                    "CPU tests under test/registered/unit/platforms/. SRC is a git clone of SGLang (with python/sglang/srt/) or an "
                    "installed sglang package directory (with srt/). A site whose code differs from the releases "
                    "the series was written for (0.5.21 to 0.5.23) is left out with one line; the rest lands. "
                    "Running it again changes nothing. Exit status: 0 routed and up to date, 1 --check found "
                    "work or a site was left out, 2 bad input.")
    p.add_argument("src", metavar="SRC", help="the SGLang git clone or installed sglang package directory")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--into-git", action="store_true",
                      help="commit each step on its own (platform table; two-shot; SM12x fusion; attention checks) with its PR "
                           "description as the message; SRC must be in a git work tree")
    mode.add_argument("--check", action="store_true",
                      help="only report what would change; exit 1 if anything would")
    p.set_defaults(func=cmd_upstream)


def cmd_upstream(args: argparse.Namespace) -> int:
    from .series import exit_status, render, run_series

    series = run_series(args.src, into_git=args.into_git, check=args.check)
    status = exit_status(series)
    try:
        print(render(series), flush=True)
    except BrokenPipeError:  # a reader that stopped early (| head) does not change the verdict
        import os
        import sys

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return status
