"""MiniCPM's sparse backend (``model_overrides/minicpm.py:60``) and MiniMax-M3.1 NVFP4's arm
(``model_overrides/minimax_m3.py:94``): SGLang 0.5.23's own override against the plugin's.

One child interpreter (``override_arm_suite.py``) runs SGLang's argument resolution for a
sparse-attention MiniCPM (``MiniCPMSALAForCausalLM``) and an M3.1 NVFP4 checkpoint
(``quantization_config`` mxfp8 with NVFP4 packed experts), per capability, with SGLang's
own provider and with the plugin's routed one (rebound in SGLang's override registry).
On every exact tier and on the unknown capabilities the two resolve alike: upstream's
picks are the registry's wherever they can run, and where no MiniCPM sparse backend runs
(7.x, 10.5, 11.5, 12.3, 13.0) or M3.1's Blackwell arm has no build (10.7, 11.x, 12.x) the
registry keeps SGLang's pick (policies/minicpm.py, policies/minimax_m3.py say why).  With
FlashInfer's kernels taken out of the catalog on 12.0, the routed MiniCPM override picks
``minicpm_flashattn`` where upstream picks ``minicpm_flashinfer``: the site reads the
registry.
"""

import importlib.util
import json
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import TIERS, clean_env, run_python  # noqa: E402

SUITE = Path(__file__).with_name("override_arm_suite.py")
UNKNOWN = ("10.5", "11.5", "12.3", "13.0")
BLACKWELL = {"10.0", "10.3", "10.5", "10.7", "11.0", "11.5", "12.0", "12.1", "12.3"}


@pytest.fixture(scope="module")
def rows():
    out = run_python([str(SUITE), "--caps", ",".join(TIERS + UNKNOWN)], env=clean_env(), timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("cap", TIERS + UNKNOWN)
def test_the_routed_overrides_resolve_as_sglangs_own(rows, cap):
    for case in ("minicpm_sparse", "minimax_m3_nvfp4"):
        row = rows[f"{case}|{cap}"]
        assert row["routed"] == row["upstream"], (case, cap, row)


@pytest.mark.parametrize("cap", TIERS + UNKNOWN)
def test_the_cases_take_the_arm_the_site_decides(rows, cap):
    """The fixtures reach the decision sites: the sparse backend and the M3.1 NVFP4 arm."""
    minicpm = rows[f"minicpm_sparse|{cap}"]["upstream"]
    assert minicpm.get("attention_backend") in ("minicpm_flashinfer", "minicpm_flashattn"), minicpm
    assert (minicpm["attention_backend"] == "minicpm_flashinfer") == (cap in BLACKWELL), (cap, minicpm)
    m3 = rows[f"minimax_m3_nvfp4|{cap}"]["upstream"]
    if "error" in m3:  # SGLang refuses the checkpoint before the arm (MegaMoE outside SM100, ...)
        return
    assert m3["quantization"] == "minimax_m3_nvfp4" and m3["page_size"] == 128, m3
    assert (m3["moe_a2a_backend"] == "megamoe") == (cap in BLACKWELL), (cap, m3)


def test_where_flashinfer_has_no_build_the_site_picks_the_other_minicpm_backend(rows):
    row = rows["minicpm_sparse_no_flashinfer|12.0"]
    assert row["upstream"]["attention_backend"] == "minicpm_flashinfer"
    assert row["routed"]["attention_backend"] == "minicpm_flashattn"
    # 12.1: InfLLM-V2 has no sm_121 build either, so no MiniCPM sparse backend runs: SGLang's pick stays
    row = rows["minicpm_sparse_no_flashinfer|12.1"]
    assert row["routed"] == row["upstream"]
