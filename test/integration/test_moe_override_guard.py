"""D20: the MoE runner / GEMM backends SGLang 0.5.23's model overrides pick from identity
probes (is_sm100, is_sm120, is_blackwell), judged by the MoE pass's guard.

One child interpreter (``moe_override_suite.py``) runs SGLang's own argument resolution
for each covered override with a minimal config, per capability: with SGLang's MoE pass
as released (upstream) and routed through the plugin, and routed again with a kernel
catalog narrowed so the override's pick has no build for the device (the 0.5.23 catalog
builds every one of these picks wherever its probe fires, so the case the guard is for
is simulated).  On exact tiers where upstream's pick runs the two resolutions are equal;
in the narrowed catalog the guard replaces the pick with one that runs there and never
raises (the user passed none of these flags).
"""

import importlib.util
import json
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import clean_env, run_python  # noqa: E402

SUITE = Path(__file__).with_name("moe_override_suite.py")
CAPS = ("9.0", "10.0", "10.7", "11.0", "12.0", "12.1")  # the majors the covered probes name, and 11
CUDA = (13, 0)
DECISIONS = {"moe": "moe_runner", "fp8_gemm": "fp8_gemm", "fp4_gemm": "fp4_gemm"}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("moe-overrides")
    out = run_python([str(SUITE), "--root", str(root), "--caps", ",".join(CAPS)], env=clean_env(), timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _verdict(decision, choice, cap, kind, narrowed=()):
    from sglang_arch.arch import catalog, parse_capability

    verdict = catalog.choice_runs(decision, choice, parse_capability(cap), CUDA,
                                  kind if decision == "moe_runner" else None)
    if verdict is None:
        return None
    return verdict.runs and verdict.kernel not in narrowed


def _picks(resolution):
    return {field: value for field, value in resolution.items() if field in DECISIONS and value not in (None, "auto")}


def test_every_case_resolves_on_both_sides(rows):
    names = {key.split("|")[0] for key in rows}
    assert len(names) == 16 and len(rows) == len(CAPS) * len(names)
    for key, row in rows.items():
        assert "error" not in row["upstream"], (key, row["upstream"])
        assert "error" not in row["routed"], (key, row["routed"])


def test_on_exact_tiers_where_the_overrides_pick_runs_the_routed_resolution_is_upstreams(rows):
    from sglang_arch.arch import resolve

    compared = 0
    for key, row in rows.items():
        cap = key.split("|")[1]
        if resolve(cap).match != "exact":
            continue
        picks = _picks(row["upstream"])
        if all(_verdict(DECISIONS[f], v, cap, row["kind"]) is not False for f, v in picks.items()):
            assert row["routed"] == row["upstream"], (key, row)
            compared += 1
        else:  # upstream's pick has no build here: the guard's choice runs
            for field, value in _picks(row["routed"]).items():
                assert _verdict(DECISIONS[field], value, cap, row["kind"]) is not False, (key, row)
    assert compared == len(rows)  # 0.5.23's catalog builds every pick where its probe fires


def test_where_the_overrides_pick_cannot_run_the_guard_replaces_it_with_one_that_does(rows):
    judged = set()
    for key, row in rows.items():
        if "narrow" not in row:
            continue
        cap, narrowed, mine = key.split("|")[1], set(row["narrowed"]), row["narrow"]
        assert "error" not in mine, (key, mine)  # the user passed none of these flags: never refused
        for field, theirs in _picks(row["upstream"]).items():
            decision = DECISIONS[field]
            if _verdict(decision, theirs, cap, row["kind"]) is None:
                continue  # not in the catalog: not judged
            assert mine[field] != theirs, (key, field, mine)
            if mine[field] == "auto":  # a GEMM backend: the registry resolves auto at load time
                assert decision != "moe_runner", (key, mine)
            else:
                assert _verdict(decision, mine[field], cap, row["kind"], narrowed), (key, field, mine)
            judged.add(row["site"])
    assert judged == {row["site"] for row in rows.values()}


def test_each_covered_site_fires_in_the_suite_and_is_judged(rows):
    """Every file of MOE_GUARD_COVERS has a case whose override picks on some capability
    here, and the narrowed resolution changed that pick; GPT-OSS's file holds two covered
    arms (``is_sm100``, ``is_sm120``): each fires, and so do DeepSeek-V4's (the MXFP4
    experts' runner on 10.x and 12.x, V4.1's FP8 GEMM on 10.x) and Bailing V3's."""
    from sglang_arch.integrations.sglang.targets import MOE_GUARD_COVERS

    fired = {}
    for key, row in rows.items():
        if "narrow" in row and any(row["narrow"][f] != v for f, v in _picks(row["upstream"]).items()):
            fired.setdefault(row["site"].split(" ")[0], set()).add(key.split("|")[1])
    files = {f"{entry.split(':')[0].rsplit('.', 2)[-2]}.py" for entry in MOE_GUARD_COVERS}
    judged_files = {site.split(":")[0].rsplit("/", 1)[-1] for site in fired}
    assert files <= judged_files, files - judged_files
    assert fired["model_overrides/gpt_oss.py:110"] and fired["overrides.py:771"]
    assert {cap.split(".")[0] for cap in fired["model_overrides/gpt_oss.py:65/70"]} >= {"10", "12"}
    for site in ("model_overrides/deepseek_v4.py:82-84", "model_overrides/bailing_moe_v3.py:30"):
        assert {cap.split(".")[0] for cap in fired[site]} == {"9", "10", "12"}, site
    gemm = {key.split("|")[1] for key, row in rows.items() if row["site"] == "model_overrides/deepseek_v4.py:33"
            and row["upstream"].get("fp8_gemm") == "flashinfer_cutedsl" and row.get("narrow", {}).get("fp8_gemm") == "auto"}
    assert gemm and {cap.split(".")[0] for cap in gemm} == {"10"}, gemm
