"""The CLI's heavier commands; each imports what it needs only when it runs."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
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

    from .integrations.sglang import check, plan_cli

    check.add_command(sub)

    plan_cli.add_command(sub)

    from .upstream import cli as upstream_cli

    upstream_cli.add_command(sub)

    from .tune import cli as tune_cli

    tune_cli.add_command(sub)


# How long ``gencode`` waits for ``nvcc --version`` (a healthy nvcc answers in well under a
# second; one on a hung network file system may never answer).
NVCC_TIMEOUT_S = 10


def toolkit_version(explicit: Optional[str]) -> Tuple[Tuple[int, int], str]:
    """The CUDA toolkit to build for: the argument, nvcc's version, or torch's.  Where none
    answers, the error says what each source did (nvcc not found, timed out, failed)."""
    if explicit is not None:  # an empty --cuda is refused, not read as "detect"
        try:
            return parse_version(explicit), "--cuda"
        except ValueError as exc:
            raise ValueError(f"argument --cuda: {exc}") from None
    from .toolkit import find_nvcc

    nvcc, where = find_nvcc()  # torch's extension-build order: CUDA_HOME, CUDA_PATH, PATH, /usr/local/cuda
    nvcc_failed = False  # an nvcc that is there but gave no release (timed out, failed): said if torch is used
    if nvcc and os.path.exists(nvcc):
        version, nvcc_said = _nvcc_release(nvcc)
        if version is not None:
            return version, nvcc
        nvcc_failed = True
    elif nvcc:
        nvcc_said = f"{nvcc} does not exist ({where})"
    else:
        nvcc_said = where
    try:
        import torch

        if torch.version.cuda:
            version = parse_version(torch.version.cuda)
            if nvcc_failed:  # never a silent fallback: the build may target another toolkit than nvcc's
                print(f"sglang-arch: warning: {nvcc_said}; using torch's CUDA {format_version(version)} "
                      f"(torch.version.cuda) instead; pass --cuda X.Y to choose", file=sys.stderr)
            return version, "torch.version.cuda"
        torch_said = "torch has no CUDA"
    except ImportError:
        torch_said = "torch is not installed"
    raise ValueError(f"no CUDA toolkit found: {nvcc_said}; {torch_said}; pass --cuda X.Y")


# The most of ``nvcc --version``'s output that is read (a real one prints about 300 bytes).
NVCC_OUTPUT_BYTES = 64 * 1024


def _nvcc_release(nvcc: str) -> Tuple[Optional[Tuple[int, int]], str]:
    """``nvcc --version``'s release, or why there is none.  The wait is bounded by
    NVCC_TIMEOUT_S for nvcc and everything it started (its own session, killed whole), and
    the output read by NVCC_OUTPUT_BYTES: a reader thread takes at most that much, so neither
    endless output nor a detached child holding the pipe can hold gencode past the bound."""
    import signal
    import threading

    try:
        proc = subprocess.Popen([nvcc, "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return None, f"{nvcc} --version could not start ({exc.strerror or exc})"
    chunks = []

    def read() -> None:
        taken = 0
        while taken < NVCC_OUTPUT_BYTES:
            chunk = proc.stdout.read1(min(4096, NVCC_OUTPUT_BYTES - taken))
            if not chunk:
                return
            chunks.append(chunk)
            taken += len(chunk)

    reader = threading.Thread(target=read, daemon=True)  # daemon: a pipe held open elsewhere never blocks exit
    reader.start()
    try:
        proc.wait(timeout=NVCC_TIMEOUT_S)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    if timed_out or reader.is_alive():  # nvcc, or something it left behind, is still at work
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
        proc.wait()
    reader.join(timeout=1)
    if timed_out:
        return None, f"{nvcc} --version did not answer within {NVCC_TIMEOUT_S:g} s (timed out)"
    if proc.returncode != 0:
        return None, f"{nvcc} --version exited with status {proc.returncode}"
    out = b"".join(chunks).decode("utf-8", "replace")
    m = re.search(r"release ([0-9]+)\.([0-9]+)", out)
    if not m:
        return None, f"{nvcc} --version printed no 'release X.Y' (in its first {NVCC_OUTPUT_BYTES // 1024} KiB)"
    try:
        return parse_version(f"{m.group(1)}.{m.group(2)}"), nvcc
    except ValueError as exc:
        return None, f"{nvcc} --version: {exc}"


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
