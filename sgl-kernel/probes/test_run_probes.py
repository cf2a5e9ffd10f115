"""Self-test of run_probes.py: the claim/probe comparison, and the --dry-run build.

No GPU is needed.  The comparison is checked on synthetic probe outcomes; the dry
run builds the real probes and is skipped where nvcc is absent.
Run: python -m pytest sgl-kernel/probes -q
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict

import pytest

HERE = Path(__file__).resolve().parent


def _load() -> ModuleType:
    # "sgl-kernel" is no importable package name, so load the script by path.
    spec = importlib.util.spec_from_file_location("run_probes", HERE / "run_probes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_probes"] = module
    spec.loader.exec_module(module)
    return module


rp = _load()

H200_PER_BLOCK = 227 * 1024  # 232448
H200_PER_SM = 228 * 1024  # 233472


def ran(name: str, status: str, detail: str = "synthetic", **data: Any):
    return rp.ProbeOutcome(name, True, True, status, detail, {"probe": name, "status": status, **data})


def smem(status: str = "verified", per_block: int = H200_PER_BLOCK, per_sm: int = H200_PER_SM, **extra: Any):
    return ran("smem_optin", status, per_block_optin_bytes=per_block, per_sm_bytes=per_sm, **extra)


# ---- features -------------------------------------------------------------------------

@pytest.mark.parametrize("claimed, probe_status, expected", [
    (True, "verified", "verified"),
    (True, "refuted", "refuted"),
    (True, "unsupported_build", "unverified"),  # built without it: the hardware was not tested
    (True, "error", "unverified"),
    (False, "unsupported_build", "verified"),  # absent as claimed
    (False, "refuted", "verified"),  # the instructions did not work: absent as claimed
    (False, "verified", "refuted"),  # worked although claimed absent
    (False, "error", "unverified"),
])
def test_feature_verdicts(claimed: bool, probe_status: str, expected: str) -> None:
    verdict = rp.judge_feature(claimed, ran("wgmma", probe_status))
    assert verdict.status == expected
    assert verdict.claimed is claimed
    assert verdict.detail


def test_feature_not_built_or_not_run_is_unverified() -> None:
    not_built = rp.ProbeOutcome("tma", False, False, detail="ptxas error")
    not_run = rp.ProbeOutcome("tma", True, False, detail="not run (dry run)")
    silent = rp.ProbeOutcome("tma", True, True, None, "exit status -11, no JSON line on stdout")
    for outcome, words in ((not_built, "did not build"), (not_run, "did not run"), (silent, "printed no result")):
        verdict = rp.judge_feature(True, outcome)
        assert verdict.status == "unverified"
        assert words in verdict.detail


# ---- shared memory -------------------------------------------------------------------

def test_smem_exact_match_is_verified() -> None:
    assert rp.judge_smem("smem_per_block_kib", 227, smem()).status == "verified"
    assert rp.judge_smem("smem_per_sm_kib", 228, smem()).status == "verified"


def test_smem_off_by_one_byte_is_refuted() -> None:
    verdict = rp.judge_smem("smem_per_block_kib", 227, smem(per_block=H200_PER_BLOCK - 1))
    assert verdict.status == "refuted"
    assert "232448" in verdict.detail and "232447" in verdict.detail


def test_smem_kib_confusion_is_refuted() -> None:
    # A table that wrote the per-SM value as the per-block one is caught.
    assert rp.judge_smem("smem_per_block_kib", 228, smem()).status == "refuted"


def test_smem_block_value_matches_but_kernel_failed_is_refuted() -> None:
    verdict = rp.judge_smem("smem_per_block_kib", 227, smem(status="refuted", detail="launch failed"))
    assert verdict.status == "refuted"
    # The per-SM claim rests on the attribute alone and still stands.
    assert rp.judge_smem("smem_per_sm_kib", 228, smem(status="refuted")).status == "verified"


def test_smem_without_table_value_or_measurement_is_unverified() -> None:
    assert rp.judge_smem("smem_per_sm_kib", None, smem()).status == "unverified"
    failed = rp.ProbeOutcome("smem_optin", True, True, "error", "no device", {})
    assert rp.judge_smem("smem_per_sm_kib", 228, failed).status == "unverified"


# ---- all claims together -----------------------------------------------------------------

def hopper_claims():
    from sglang_arch.arch import resolve

    res = resolve("9.0")
    return dict(res.features), {"smem_per_block_kib": res.profile.smem_per_block_kib,
                                "smem_per_sm_kib": res.profile.smem_per_sm_kib}


def h200_outcomes(**overrides: Any) -> Dict[str, Any]:
    """What the probes print on an H200 built for sm_90a, with per-probe overrides."""
    outcomes = {
        "smem_optin": smem(capability="9.0", device="NVIDIA H200"),
        "tma": ran("tma", "verified"),
        "wgmma": ran("wgmma", "verified"),
        "tcgen05": ran("tcgen05", "unsupported_build"),
        "fp8": ran("fp8", "verified"),
        "fp4": ran("fp4", "unsupported_build"),
    }
    outcomes.update(overrides)
    return outcomes


def test_registry_hopper_claims_match_h200_probes() -> None:
    features, smem_kib = hopper_claims()
    assert smem_kib == {"smem_per_block_kib": 227, "smem_per_sm_kib": 228}
    verdicts = rp.judge_claims(features, smem_kib, h200_outcomes(), capability="9.0")
    assert set(verdicts) == {"tma", "wgmma", "tcgen05", "fp8", "fp4", "smem_per_block_kib", "smem_per_sm_kib"}
    assert {k: v.status for k, v in verdicts.items()} == dict.fromkeys(verdicts, "verified")
    assert rp.exit_status(verdicts) == 0


def test_one_refuted_claim_fails_the_run() -> None:
    features, smem_kib = hopper_claims()
    verdicts = rp.judge_claims(features, smem_kib, h200_outcomes(wgmma=ran("wgmma", "refuted", "D[0][0] = 1")),
                               capability="9.0")
    assert verdicts["wgmma"].status == "refuted"
    assert rp.exit_status(verdicts) == 1


def test_probes_on_another_device_verify_nothing() -> None:
    features, smem_kib = hopper_claims()
    outcomes = h200_outcomes(smem_optin=smem(capability="10.0", device="B200"))
    verdicts = rp.judge_claims(features, smem_kib, outcomes, capability="9.0")
    assert all(v.status == "unverified" and "10.0" in v.detail for v in verdicts.values())
    assert rp.exit_status(verdicts) == 0


def test_dry_run_verdicts_say_no_gpu() -> None:
    features, smem_kib = hopper_claims()
    outcomes = {name: rp.ProbeOutcome(name, True, False, detail="not run (dry run)") for name in rp.PROBES}
    outcomes["fp4"] = rp.ProbeOutcome("fp4", False, False, detail="ptxas fatal")
    verdicts = rp.dry_run_verdicts(features, smem_kib, outcomes)
    assert all(v.status == "unverified" and v.detail.startswith("no GPU") for v in verdicts.values())
    assert "did not build: ptxas fatal" in verdicts["fp4"].detail


# ---- parsing a probe's output --------------------------------------------------------

def test_parse_probe_output() -> None:
    line = json.dumps({"probe": "smem_optin", "status": "verified", "detail": "ok", "per_sm_bytes": H200_PER_SM})
    outcome = rp.parse_probe_output("smem_optin", 0, line + "\n", "")
    assert (outcome.status, outcome.detail, outcome.data["per_sm_bytes"]) == ("verified", "ok", H200_PER_SM)

    crashed = rp.parse_probe_output("tma", -11, "", "Segmentation fault\n")
    assert crashed.status is None and "Segmentation fault" in crashed.detail

    # A non-zero exit with a "verified" line is not trusted.
    odd = rp.parse_probe_output("fp8", 3, json.dumps({"status": "verified", "detail": "x"}), "")
    assert odd.status == "error"

    garbage = rp.parse_probe_output("fp8", 0, "{not json\n", "")
    assert garbage.status is None and "unreadable" in garbage.detail


# ---- the real thing, without a GPU -----------------------------------------------------------

@pytest.mark.skipif(shutil.which("nvcc") is None,
                    reason="nvcc is not on PATH; the dry run needs it to build the probes")
def test_dry_run_builds_every_probe(tmp_path: Path) -> None:
    build_dir, out = tmp_path / "build", tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    proc = subprocess.run([sys.executable, str(HERE / "run_probes.py"), "--dry-run", "--capability", "9.0",
                           "--build-dir", str(build_dir), "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    report = json.loads(out.read_text())
    assert (report["capability"], report["tier"], report["match"]) == ("9.0", "9.0", "exact")
    assert "-gencode=arch=compute_90a,code=sm_90a" in report["gencode"]
    assert report["claims"]["smem_per_block_kib"]["claimed"] == 227
    assert report["claims"]["wgmma"]["claimed"] is True
    for name, verdict in report["claims"].items():
        assert verdict["status"] == "unverified", name
        assert verdict["detail"].startswith("no GPU (dry run); probe "), verdict["detail"]
        assert verdict["detail"].endswith(" built"), verdict["detail"]
    for name in rp.PROBES:
        assert report["probes"][name]["built"] is True, report["probes"][name]
        assert (build_dir / name).is_file()
