"""CLI glue for ``sglang-arch upstream`` (the work is in ``series.py``)."""

from __future__ import annotations

import argparse


def add_command(sub) -> None:
    p = sub.add_parser(
        "upstream", help="write the registry and the routed call sites into an SGLang source tree",
        description="Copy the registry into SRC as sglang.srt.arch and rewrite SGLang's call sites (torch symm "
                    "mem, custom all-reduce v2, FlashInfer all-reduce fusion, attention backends) to read it, "
                    "deleting the code each decision replaces (the DSA passes keep their other platforms' arms); "
                    "on a git clone, also SGLang-style CPU tests under test/registered/unit/arch/. SRC is a git clone of "
                    "SGLang (with python/sglang/srt/) or an installed sglang package directory (with srt/). "
                    "A call site that does not have the expected shape is reported and its whole step left "
                    "out. Running it again changes nothing. Exit status: 0 routed and up to date, 1 --check "
                    "found work or a step was left out, 2 bad input. Needs libcst "
                    "(pip install 'sglang-arch[upstream]').")
    p.add_argument("src", metavar="SRC", help="the SGLang git clone or installed sglang package directory")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--into-git", action="store_true",
                      help="commit each step on its own (registry; collectives; fusion; attention) with its PR "
                           "description as the message; SRC must be in a git work tree")
    mode.add_argument("--check", action="store_true",
                      help="only report what would change; exit 1 if anything would")
    p.set_defaults(func=cmd_upstream)


def cmd_upstream(args: argparse.Namespace) -> int:
    try:
        import libcst  # noqa: F401
    except ImportError:
        raise ValueError("upstream needs libcst: pip install 'sglang-arch[upstream]'") from None
    from .series import exit_status, render, run_series

    series = run_series(args.src, into_git=args.into_git, check=args.check)
    print(render(series))
    return exit_status(series)
