"""The CLI's heavier commands; each imports what it needs only when it runs."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
from typing import Optional, Tuple

from .arch import default_registry, detect, parse_capability
from .arch.policies import build
from .arch.profile import format_version, parse_version
from .arch.validate import MAX_ITEMS


def add_commands(sub) -> None:
    p = sub.add_parser(
        "gencode", help="compile targets for kernel builds (-gencode, TORCH_CUDA_ARCH_LIST, CMake, FlashInfer)",
        description="Compile targets for the given (or detected) GPUs and CUDA toolkit, from the registry's "
                    "toolkit table. 'a' targets only for their exact capability, 'f' where the toolkit has them, "
                    "PTX for the newest capability.")
    p.add_argument("--cuda", metavar="X.Y", help="CUDA toolkit version (default: nvcc --version, else torch's)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--capability", action="append", metavar="CAP",
                     help=f"a capability to build for (repeatable, at most {MAX_ITEMS} times)")
    who.add_argument("--detected", action="store_true", help="the GPUs on this machine (default)")
    p.add_argument("--format", choices=build.FORMATS, default="gencode")
    p.add_argument("--no-specific", action="store_true", help="only plain sm_XY targets, no 'a'/'f'")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_gencode)

    from .integrations.sglang import plan_cli

    plan_cli.add_command(sub)

    from .upstream import cli as upstream_cli

    upstream_cli.add_command(sub)

    from .tune import cli as tune_cli

    tune_cli.add_command(sub)


def toolkit_version(explicit: Optional[str]) -> Tuple[Tuple[int, int], str]:
    """The CUDA toolkit to build for: the argument, nvcc's version, or torch's."""
    if explicit:
        return parse_version(explicit), "--cuda"
    nvcc = shutil.which("nvcc") or (os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc") if os.environ.get("CUDA_HOME") else None)
    if nvcc and os.path.exists(nvcc):
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        m = re.search(r"release (\d+)\.(\d+)", out)
        if m:
            return (int(m.group(1)), int(m.group(2))), nvcc
    try:
        import torch

        if torch.version.cuda:
            return parse_version(torch.version.cuda), "torch.version.cuda"
    except ImportError:
        pass
    raise ValueError("no CUDA toolkit found (no nvcc, no CUDA torch); pass --cuda X.Y")


def cmd_gencode(args: argparse.Namespace) -> int:
    if args.capability and len(args.capability) > MAX_ITEMS:
        raise ValueError(f"--capability is given {len(args.capability)} times; accepted: at most {MAX_ITEMS} "
                         f"capabilities")
    cuda, cuda_source = toolkit_version(args.cuda)
    registry = default_registry()
    if args.capability:
        caps = [parse_capability(c) for c in args.capability]
    else:
        node = detect()
        if not node.gpus:
            raise ValueError("no NVIDIA GPU detected; pass --capability CAP (e.g. --capability 9.0)")
        caps = list(node.capabilities)
    profiles = []
    for cap in caps:
        if cap not in registry.known:
            known = ", ".join(str(c) for c in registry.known)
            raise ValueError(f"no compile target is known for {cap}: the toolkit range of an unlisted GPU cannot be "
                             f"guessed; known: {known}")
        profiles.append(registry.profile(cap))
    plan = build.plan_targets(profiles, cuda, specific=not args.no_specific)
    text = plan.render(args.format)
    if args.json:
        print(json.dumps({"cuda": format_version(cuda), "cuda_source": cuda_source, "format": args.format,
                          "value": text, "targets": [t.sm for t in plan.targets], "notes": list(plan.notes)}, indent=2))
    else:
        print(text)
    return 0
