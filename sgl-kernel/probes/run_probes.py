#!/usr/bin/env python3
"""Check the registry's hardware claims for one GPU against that GPU.

The registry (``sglang_arch``) says, per tier, which hardware features a device may
use (tma, wgmma, tcgen05, fp8, fp4) and how much shared memory a block can opt in to.
Those values come from documents; this script tests them on the device: it asks the
registry for the compile targets of the tier (``sglang_arch gencode``), builds one
small CUDA probe per claim with those flags, runs each, and compares.

Each claim gets one verdict:

``verified``
    the claim is true and the probe ran the feature correctly, or the claim is false
    and the probe found the feature absent from the tier's build (an absent claim is
    checked within the tier's own compile targets, which are the richest the toolkit
    has for it); for shared memory, the measured value equals the table's.
``refuted``
    the probe contradicts the claim: a claimed feature failed or gave wrong results,
    an absent one worked, or the measured shared memory differs from the table.
``unverified``
    the probe could not say: it did not build, could not run (no GPU, ``--dry-run``),
    hit an unexpected CUDA error, ran on a device of another capability, or was built
    without the feature although the claim says it is there.

Exit status: 1 when any claim is refuted, 2 for a usage error, 0 otherwise.
Needs only the standard library and ``sglang_arch`` (taken from the checkout when it
is not installed).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

HERE = Path(__file__).resolve().parent


def _import_registry():
    """Import ``sglang_arch``; fall back to the checkout's ``python/`` so a bare clone works."""
    try:
        import sglang_arch  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(HERE.parents[1] / "python"))
    from sglang_arch import arch

    return arch


arch = _import_registry()

#: Every probe, in the order they are reported.  One source file ``<name>.cu`` each.
PROBES: Tuple[str, ...] = ("smem_optin", "tma", "wgmma", "tcgen05", "fp8", "fp4")
#: Feature claim -> the probe that tests it.  The keys are the registry's FEATURES.
FEATURE_PROBES: Dict[str, str] = {"tma": "tma", "wgmma": "wgmma", "tcgen05": "tcgen05", "fp8": "fp8", "fp4": "fp4"}
#: Shared-memory claim (a profile field, KiB) -> the smem_optin probe's field (bytes).
SMEM_CLAIMS: Dict[str, str] = {"smem_per_block_kib": "per_block_optin_bytes", "smem_per_sm_kib": "per_sm_bytes"}
KIB = 1024

VERIFIED, REFUTED, UNVERIFIED = "verified", "refuted", "unverified"
BUILD_TIMEOUT_S = 600
RUN_TIMEOUT_S = 120


@dataclass(frozen=True)
class ProbeOutcome:
    """What happened to one probe: whether it built and ran, and the line it printed.

    ``status`` is the probe's own word (verified / refuted / unsupported_build /
    error) when it printed a JSON line, else None; ``detail`` explains the outcome in
    every case, so a verdict can always say why.
    """

    name: str
    built: bool
    ran: bool
    status: Optional[str] = None
    detail: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        extra = {k: v for k, v in self.data.items() if k not in ("probe", "status", "detail")}
        return {"built": self.built, "ran": self.ran, "status": self.status, "detail": self.detail, **extra}


@dataclass(frozen=True)
class Verdict:
    """One claim's outcome: what the registry claimed, and what the probe made of it."""

    claimed: Any
    status: str
    detail: str

    def to_dict(self) -> Dict[str, Any]:
        return {"claimed": self.claimed, "status": self.status, "detail": self.detail}


# ---------------------------------------------------------------------------
# Comparison: pure functions of the claims and the probe outcomes (unit-tested).
# ---------------------------------------------------------------------------

def claim_probe(claim: str) -> Optional[str]:
    """The probe that tests a claim, or None."""
    return "smem_optin" if claim in SMEM_CLAIMS else FEATURE_PROBES.get(claim)


def _not_usable(outcome: ProbeOutcome) -> Optional[str]:
    """Why an outcome cannot judge anything, or None when it can."""
    if not outcome.built:
        return f"probe {outcome.name} did not build: {outcome.detail}"
    if not outcome.ran:
        return f"probe {outcome.name} did not run: {outcome.detail}"
    if outcome.status is None:
        return f"probe {outcome.name} printed no result: {outcome.detail}"
    if outcome.status == "error":
        return f"probe {outcome.name} hit an unexpected CUDA error: {outcome.detail}"
    if outcome.status not in ("verified", "refuted", "unsupported_build"):
        return f"probe {outcome.name} reported an unknown status {outcome.status!r}: {outcome.detail}"
    return None


def judge_feature(claimed: bool, outcome: ProbeOutcome) -> Verdict:
    """Compare a feature claim with its probe (see the module docstring for the rules)."""
    why_not = _not_usable(outcome)
    if why_not is not None:
        return Verdict(claimed, UNVERIFIED, why_not)
    status, detail = outcome.status, outcome.detail
    if claimed:
        if status == "verified":
            return Verdict(claimed, VERIFIED, detail)
        if status == "refuted":
            return Verdict(claimed, REFUTED, f"claimed, but the probe failed: {detail}")
        return Verdict(claimed, UNVERIFIED,
                       f"claimed, but the probe was built without it for this device, so the hardware was not "
                       f"tested (are the tier's compile targets right?): {detail}")
    if status == "verified":
        return Verdict(claimed, REFUTED, f"claimed absent, but the probe ran it successfully: {detail}")
    if status == "refuted":
        return Verdict(claimed, VERIFIED, f"absent as claimed: the probe's instructions failed: {detail}")
    return Verdict(claimed, VERIFIED, f"absent as claimed: not in this tier's build: {detail}")


def judge_smem(claim: str, claimed_kib: Optional[int], outcome: ProbeOutcome) -> Verdict:
    """Compare a shared-memory claim (KiB in the table) with the probe's bytes, exactly."""
    key = SMEM_CLAIMS[claim]
    measured = outcome.data.get(key)
    if not isinstance(measured, int) or isinstance(measured, bool):
        # The probe prints the attributes even when its kernel fails; without them, nothing to compare.
        why_not = _not_usable(outcome) or f"probe {outcome.name} did not report {key}: {outcome.detail}"
        return Verdict(claimed_kib, UNVERIFIED, why_not)
    if claimed_kib is None:
        return Verdict(claimed_kib, UNVERIFIED, f"the table has no value; the device reports {measured} bytes")
    expected = claimed_kib * KIB
    if measured != expected:
        return Verdict(claimed_kib, REFUTED,
                       f"table: {claimed_kib} KiB = {expected} bytes; device reports {measured} bytes "
                       f"({measured / KIB:g} KiB)")
    matched = f"device reports {measured} bytes = {claimed_kib} KiB"
    if claim != "smem_per_block_kib":
        return Verdict(claimed_kib, VERIFIED, matched)
    # The per-block value is what kernels size themselves to: the kernel must also have used it.
    if outcome.status == "verified":
        return Verdict(claimed_kib, VERIFIED, f"{matched}; {outcome.detail}")
    if outcome.status == "refuted":
        return Verdict(claimed_kib, REFUTED, f"{matched}, but using it failed: {outcome.detail}")
    return Verdict(claimed_kib, VERIFIED, f"{matched} (attribute only; the kernel did not run: {outcome.detail})")


def judge_claims(features: Mapping[str, bool], smem_kib: Mapping[str, Optional[int]],
                 outcomes: Mapping[str, ProbeOutcome], *, capability: Optional[str] = None) -> Dict[str, Verdict]:
    """Every claim's verdict.

    ``capability``: the capability the claims are for; when the smem_optin probe saw
    a device of another capability, no verdict can stand (the probes ran elsewhere).
    """
    verdicts: Dict[str, Verdict] = {}
    for name, claimed in features.items():
        probe = claim_probe(name)
        outcome = outcomes.get(probe) if probe else None
        if outcome is None:
            verdicts[name] = Verdict(claimed, UNVERIFIED, f"no probe tests {name}")
        else:
            verdicts[name] = judge_feature(claimed, outcome)
    smem = outcomes.get("smem_optin", ProbeOutcome("smem_optin", False, False, detail="not run"))
    for claim in SMEM_CLAIMS:
        verdicts[claim] = judge_smem(claim, smem_kib.get(claim), smem)
    seen = smem.data.get("capability")
    if capability is not None and isinstance(seen, str) and seen != capability:
        why = f"the probes ran on a {seen} device ({smem.data.get('device', '?')}); the claims are for {capability}"
        verdicts = {k: Verdict(v.claimed, UNVERIFIED, why) for k, v in verdicts.items()}
    return verdicts


def dry_run_verdicts(features: Mapping[str, bool], smem_kib: Mapping[str, Optional[int]],
                     outcomes: Mapping[str, ProbeOutcome]) -> Dict[str, Verdict]:
    """Every claim unverified for want of a GPU, saying whether its probe at least built."""
    verdicts: Dict[str, Verdict] = {}
    for claim, claimed in [*features.items(), *smem_kib.items()]:
        probe = claim_probe(claim)
        outcome = outcomes.get(probe) if probe else None
        if outcome is None:
            built = f"no probe tests {claim}"
        elif outcome.built:
            built = f"probe {probe} built"
        else:
            built = f"probe {probe} did not build: {outcome.detail}"
        verdicts[claim] = Verdict(claimed, UNVERIFIED, f"no GPU (dry run); {built}")
    return verdicts


def exit_status(verdicts: Mapping[str, Verdict]) -> int:
    """1 when any claim is refuted, else 0."""
    return 1 if any(v.status == REFUTED for v in verdicts.values()) else 0


def parse_probe_output(name: str, returncode: int, stdout: str, stderr: str) -> ProbeOutcome:
    """Read a probe's one JSON line; anything else becomes an outcome that says what went wrong."""
    line = next((ln for ln in stdout.splitlines() if ln.lstrip().startswith("{")), None)
    tail = (stderr.strip().splitlines() or [""])[-1][:300]
    if line is None:
        return ProbeOutcome(name, True, True, None,
                            f"exit status {returncode}, no JSON line on stdout" + (f"; stderr: {tail}" if tail else ""))
    try:
        data = json.loads(line)
    except ValueError as exc:
        return ProbeOutcome(name, True, True, None,
                            f"exit status {returncode}, unreadable JSON line ({exc}): {line[:200]}")
    if not isinstance(data, dict):
        return ProbeOutcome(name, True, True, None, f"exit status {returncode}, JSON line is not an object")
    status = data.get("status")
    detail = str(data.get("detail", ""))
    if returncode != 0 and status != "error":
        detail = f"exit status {returncode} with status {status!r}: {detail}"
        status = "error"
    return ProbeOutcome(name, True, True, status if isinstance(status, str) else None, detail, data)


# ---------------------------------------------------------------------------
# Toolchain: nvcc, the registry's compile flags, building and running the probes.
# ---------------------------------------------------------------------------

def find_nvcc(explicit: Optional[str]) -> Optional[str]:
    """The nvcc to build with: the argument, PATH, then $CUDA_HOME/bin."""
    if explicit:
        return explicit if os.path.exists(explicit) else shutil.which(explicit)
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidate = os.path.join(home, "bin", "nvcc") if home else None
    return candidate if candidate and os.path.exists(candidate) else None


def nvcc_version(nvcc: str) -> Tuple[int, int]:
    """``release X.Y`` from ``nvcc --version``."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"release (\d+)\.(\d+)", out)
    if not m:
        raise RuntimeError(f"cannot read the CUDA version from '{nvcc} --version'")
    return int(m.group(1)), int(m.group(2))


def _registry_env() -> Dict[str, str]:
    """The environment for ``python -m sglang_arch``, able to import the package we imported."""
    env = dict(os.environ)
    root = str(Path(arch.__file__).resolve().parents[2])  # .../python, holding sglang_arch/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def gencode_flags(capability: str, cuda: str) -> List[str]:
    """The registry's nvcc flags for one capability, from the same CLI that CMake uses."""
    cmd = [sys.executable, "-m", "sglang_arch", "gencode", "--capability", capability, "--cuda", cuda,
           "--format", "gencode"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_registry_env(), timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{shlex.join(cmd)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout.split()


def build_probe(nvcc: str, name: str, flags: Sequence[str], build_dir: Path) -> ProbeOutcome:
    """Compile one probe; the outcome carries the compiler's complaint when it fails."""
    binary = build_dir / name
    cmd = [nvcc, "-std=c++17", "-O2", *flags, "-o", str(binary), str(HERE / f"{name}.cu")]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return ProbeOutcome(name, False, False, detail=f"nvcc took longer than {BUILD_TIMEOUT_S} s")
    except OSError as exc:
        return ProbeOutcome(name, False, False, detail=f"cannot run nvcc: {exc}")
    (build_dir / f"{name}.build.log").write_text(shlex.join(cmd) + "\n" + proc.stdout + proc.stderr)
    if proc.returncode != 0 or not binary.exists():
        errors = [ln for ln in (proc.stderr + proc.stdout).splitlines() if "error" in ln.lower()]
        return ProbeOutcome(name, False, False, detail="; ".join(errors[:3])[:500] or f"nvcc exit {proc.returncode}")
    return ProbeOutcome(name, True, False, detail="built")


def run_probe(name: str, build_dir: Path) -> ProbeOutcome:
    """Run one built probe and read its line."""
    try:
        proc = subprocess.run([str(build_dir / name)], capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return ProbeOutcome(name, True, True, None, f"did not finish within {RUN_TIMEOUT_S} s")
    except OSError as exc:
        return ProbeOutcome(name, True, False, detail=f"cannot run: {exc}")
    return parse_probe_output(name, proc.returncode, proc.stdout, proc.stderr)


def build_all(nvcc: str, flags: Sequence[str], build_dir: Path) -> Dict[str, ProbeOutcome]:
    """Compile every probe in parallel: nvcc is single-threaded and there are six."""
    workers = max(1, min(len(PROBES), os.cpu_count() or 1))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(build_probe, nvcc, name, flags, build_dir) for name in PROBES}
        return {name: fut.result() for name, fut in futures.items()}


# ---------------------------------------------------------------------------
# The command.
# ---------------------------------------------------------------------------

def _parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description="Build and run the CUDA probes with the registry's compile flags and check the registry's "
                    "claims for the GPU's tier.")
    p.add_argument("--capability", metavar="CAP", help="capability to check (default: GPU 0, detected via NVML)")
    p.add_argument("--cuda", metavar="X.Y", help="CUDA version for the compile targets (default: nvcc's)")
    p.add_argument("--nvcc", metavar="PATH", help="nvcc to build with (default: PATH, then $CUDA_HOME/bin)")
    p.add_argument("--build-dir", metavar="DIR", help="where to build the probes (default: a temporary directory)")
    p.add_argument("--out", metavar="FILE", help="write the JSON report here (default: print it)")
    p.add_argument("--dry-run", action="store_true", help="build the probes only; every claim is unverified")
    return p.parse_args(argv)


def _choose_capability(args: argparse.Namespace) -> Tuple[Any, Any, List[str]]:
    """(capability to check, detected node or None, notes).  Raises ValueError for bad input."""
    notes: List[str] = []
    # Detection is only skipped where it cannot matter: a dry run for a given capability.
    node = None if (args.dry_run and args.capability) else arch.detect()
    if args.capability:
        cap = arch.parse_capability(args.capability)
    elif node is not None and node.gpus:
        cap = node.gpus[0].capability
    else:
        why = "; ".join(node.notes) if node is not None else ""
        raise ValueError(f"no GPU detected ({why}); pass --capability CAP (with --dry-run to only build)")
    if node is not None and len(set(node.capabilities)) > 1:
        notes.append(f"mixed node ({', '.join(str(c) for c in node.capabilities)}): the probes run on CUDA device 0")
    return cap, node, notes


def _toolchain(args: argparse.Namespace, target: Any, report: Dict[str, Any]) -> Tuple[Optional[str], List[str], str]:
    """(nvcc, nvcc flags, problem); a non-empty problem means nothing can be built."""
    nvcc = find_nvcc(args.nvcc)
    if nvcc is None:
        return None, [], "nvcc not found (pass --nvcc or put it on PATH)"
    report["nvcc"] = nvcc
    try:
        cuda = args.cuda or "{}.{}".format(*nvcc_version(nvcc))
        report["cuda"] = cuda
        flags = gencode_flags(str(target), cuda)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return nvcc, [], str(exc)
    report["gencode"] = flags
    return nvcc, flags, ""


def _build_and_run(nvcc: str, flags: Sequence[str], build_dir: Path, dry_run: bool) -> Dict[str, ProbeOutcome]:
    outcomes = build_all(nvcc, flags, build_dir)
    for name, built in outcomes.items():
        if built.built:
            outcomes[name] = (ProbeOutcome(name, True, False, detail="not run (dry run)") if dry_run
                              else run_probe(name, build_dir))
    return outcomes


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parse_args(argv)
    try:
        cap, node, notes = _choose_capability(args)
        res = arch.resolve(cap)
    except ValueError as exc:
        print(f"run_probes: {exc}", file=sys.stderr)
        return 2

    profile = res.profile
    features = dict(res.features)
    smem_kib = {"smem_per_block_kib": profile.smem_per_block_kib, "smem_per_sm_kib": profile.smem_per_sm_kib}
    # An unknown capability has no compile targets of its own; build for its tier,
    # which is what kernels would ship for it.
    target = cap if cap in arch.default_registry().known else res.resolved
    report: Dict[str, Any] = {
        "capability": str(cap), "tier": str(res.resolved), "tier_name": profile.name, "match": res.match,
        "reason": res.reason, "cuda": None, "nvcc": None, "gencode": [], "build_dir": args.build_dir,
        "dry_run": bool(args.dry_run), "notes": notes,
    }

    nvcc, flags, problem = _toolchain(args, target, report)
    if problem or nvcc is None:
        outcomes = {name: ProbeOutcome(name, False, False, detail=problem) for name in PROBES}
    elif args.build_dir:
        Path(args.build_dir).mkdir(parents=True, exist_ok=True)
        outcomes = _build_and_run(nvcc, flags, Path(args.build_dir), args.dry_run)
    else:
        with tempfile.TemporaryDirectory(prefix="sglang-arch-probes-") as tmp:
            outcomes = _build_and_run(nvcc, flags, Path(tmp), args.dry_run)

    if args.dry_run:
        verdicts = dry_run_verdicts(features, smem_kib, outcomes)
    else:
        verdicts = judge_claims(features, smem_kib, outcomes, capability=str(cap))
    report["claims"] = {k: v.to_dict() for k, v in verdicts.items()}
    report["probes"] = {k: outcomes[k].to_dict() for k in PROBES}
    report["device_properties"] = _device_properties(node, outcomes.get("smem_optin"))

    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
        _print_summary(report)
    else:
        print(text)
    return exit_status(verdicts)


def _device_properties(node: Any, smem: Optional[ProbeOutcome]) -> Dict[str, Any]:
    """What is known of the device: the detected GPU, then what the smem probe measured."""
    props: Dict[str, Any] = {}
    if node is not None and node.gpus:
        gpu = node.gpus[0]
        props.update({"index": gpu.index, "name": gpu.name, "capability": str(gpu.capability),
                      "memory_bytes": gpu.memory_bytes, "detected_by": node.source, "gpu_count": len(node.gpus)})
    if smem is not None:
        props.update({k: v for k, v in smem.data.items() if k not in ("probe", "status", "detail")})
    return props


def _print_summary(report: Mapping[str, Any]) -> None:
    print(f"capability {report['capability']} -> tier {report['tier']} {report['tier_name']} [{report['match']}], "
          f"CUDA {report['cuda']}, {' '.join(report['gencode']) or 'no compile flags'}")
    for name, v in report["claims"].items():
        print(f"  {name:<20}{str(v['claimed']):<8}{v['status']:<12}{v['detail']}")


if __name__ == "__main__":
    sys.exit(main())
