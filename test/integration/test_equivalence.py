"""Routed decisions equal upstream's where upstream decides; every difference is documented.

The suite runs SGLang's own functions over capability x topology x world size x model.
``DIFFERENCES`` is the machine-checked form of docs/differences.md: a difference that
no entry explains fails the test, and every entry must be observed.
"""

import importlib.util
import re

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from decision_suite import KNOWN_TO_UPSTREAM_DOMAIN  # noqa: E402
from helpers import ROOT  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from unit.test_dsa_rules import built_for  # noqa: E402  where each DSA backend has a build, written as data

NO_MULTICAST = ("nvlink", "pcie-p2p", "pcie")


def _d1_pcie_ipc_at_tp8_on_sm120(cap, topo, ws, section, up, rt):
    """Ledger entry pcie-ipc-tp8-sm120: SGLang's PCIe-IPC all-reduce on by default there only."""
    return section == "pcie_ipc" and (cap, topo, ws) == ("12.0", "pcie-p2p", 8) and (up, rt) == (False, True)


def _d2_two_shot_without_multicast(cap, topo, ws, section, up, rt):
    """Ledger entry two-shot-ws2-sm90-no-multicast: below 16 MiB at world size 2 over NVLink."""
    return (section == "symm_mem" and cap.split(".")[0] == "9" and topo == "nvlink" and ws == 2
            and up == {"enabled": False} and rt == {"enabled": True, "max_bytes": 16 << 20, "algorithm": "two_shot"})


def _d3_sm12x_fusion(cap, topo, ws, section, up, rt):
    if not cap.startswith("12.") or topo == "pcie":
        return False
    if section == "fusion_auto_enable":
        return up == {} and rt == {"flashinfer_allreduce_fusion_backend": "auto"}
    if section == "fusion":
        changed = {k for k in up if up[k] != rt[k]}
        return changed == {"auto/single", "trtllm/single"} and all(rt[k] == "trtllm" for k in changed)
    return False


def _fusion_refused_by_interconnect(topo, up, rt):
    """The fusion keys that differ, each refused for its interconnect: D4 (trtllm needs P2P)
    or D9 (mnnvl needs NVLink multicast); None when a difference is anything else."""
    changed = {k for k in up if up[k] != rt[k]}
    kinds = set()
    for k in changed:
        if rt[k] != "ValueError":
            return None
        if up[k] == "trtllm" and topo == "pcie":
            kinds.add("D4")
        elif up[k] == "mnnvl" and topo in NO_MULTICAST:
            kinds.add("D9")
        else:
            return None
    return kinds


def _d4_trtllm_fusion_needs_p2p(cap, topo, ws, section, up, rt):
    if topo != "pcie":
        return False
    if section == "fusion_auto_enable":
        return rt == {} and up.get("flashinfer_allreduce_fusion_backend") == "auto"
    if section == "fusion":
        return "D4" in (_fusion_refused_by_interconnect(topo, up, rt) or ())
    return False


def _d9_mnnvl_fusion_needs_multicast(cap, topo, ws, section, up, rt):
    if topo not in NO_MULTICAST:
        return False
    if section == "fusion_auto_enable":
        return rt == {} and up.get("flashinfer_allreduce_fusion_backend") == "auto"
    if section == "fusion":
        return "D9" in (_fusion_refused_by_interconnect(topo, up, rt) or ())
    return False


def _d5_flashinfer_needs_sm75(cap, topo, ws, section, up, rt):
    if section != "attention" or cap not in ("7.0",):
        return False
    return all(up[k] == rt[k] or (up[k] == "flashinfer" and rt[k] == "triton") for k in up)


# Where FA3 has a build (sgl-kernel flash_ops: sm_80, sm_86 for MHA; sm_90a), written from cuobjdump.
def _fa3_runs(cap, kind):
    major, minor = map(int, cap.split("."))
    return (major, minor) == (9, 0) or (kind == "mha" and major == 8)


def _d16_deterministic_backend_that_runs(cap, topo, ws, section, up, rt):
    """Upstream names fa3 on every major but 10 and 12; where FA3 has no build for the tier
    (7.x, 11.0, MLA on 8.x) the registry takes the next deterministic backend that runs."""
    if section != "deterministic":
        return False
    for kind in up:
        if up[kind] == rt[kind]:
            continue
        if up[kind] != {"attention_backend": "fa3"} or _fa3_runs(cap, kind):
            return False
        if rt[kind] not in ({"attention_backend": "flashinfer"}, {"attention_backend": "triton"}):
            return False
    return True


def _dsa_cell_expected(cap, upstream):
    """D10/D11: upstream's DSA pair where both its kernels are built for ``cap``, else
    tilelang for both (an FP8 cache then needs SM89: SGLang's own refusal below); below
    SM80, where TileLang has no build either, the registry's refusal."""
    if not isinstance(upstream, dict):
        return upstream
    pair = (upstream["dsa_prefill_backend"], upstream["dsa_decode_backend"])
    if all(built_for(b, cap) for b in pair):
        return upstream
    if not built_for("tilelang", cap):
        return "ValueError"  # no DSA kernel has a build below SM80: the registry refuses the model (D10)
    if upstream["kv_cache_dtype"] == "fp8_e4m3" and Capability(*map(int, cap.split("."))) < Capability(8, 9):
        return "ValueError"  # SGLang's own check: TileLang with an FP8 KV cache needs SM89
    return {**upstream, "dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}


def _d11_dsa_kernels_not_built_for_the_tier(cap, topo, ws, section, up, rt):
    if section != "dsa":
        return False
    return all(rt[cell] == _dsa_cell_expected(cap, up[cell]) for cell in up if up[cell] != rt[cell])


DIFFERENCES = {
    "D1": _d1_pcie_ipc_at_tp8_on_sm120,
    "D2": _d2_two_shot_without_multicast,
    "D3": _d3_sm12x_fusion,
    "D4": _d4_trtllm_fusion_needs_p2p,
    "D5": _d5_flashinfer_needs_sm75,
    "D9": _d9_mnnvl_fusion_needs_multicast,
    "D11": _d11_dsa_kernels_not_built_for_the_tier,
    "D16": _d16_deterministic_backend_that_runs,
}


def _differences(suites, domain):
    up, rt = suites["upstream"], suites["routed"]
    for key in up:
        cap, topo, ws = key.split("|")
        if cap not in domain:
            continue
        for section in up[key]:
            if up[key][section] != rt[key][section]:
                yield cap, topo, int(ws), section, up[key][section], rt[key][section]


def test_routed_equals_upstream_where_upstream_decides_except_documented(suites):
    unexplained = []
    for diff in _differences(suites, KNOWN_TO_UPSTREAM_DOMAIN):
        if not any(rule(*diff) for rule in DIFFERENCES.values()):
            unexplained.append(diff[:4])
    assert not unexplained, f"undocumented differences from upstream: {unexplained[:10]}"


@pytest.mark.parametrize("difference", sorted(DIFFERENCES))
def test_each_documented_difference_happens_and_is_in_the_docs(suites, difference):
    seen = [d for d in _differences(suites, KNOWN_TO_UPSTREAM_DOMAIN) if DIFFERENCES[difference](*d)]
    assert seen, f"{difference} is documented but never observed"
    doc = (ROOT / "docs" / "differences.md").read_text()
    assert re.search(rf"^## {difference}\b", doc, re.M), f"{difference} missing from docs/differences.md"


def test_everything_upstream_decides_alike_is_equal(suites):
    """The bulk of the grid: platform facts, attention on SM8x-SM12x, custom AR tables."""
    up, rt = suites["upstream"], suites["routed"]
    checked = 0
    for key in up:
        cap = key.split("|")[0]
        if cap not in KNOWN_TO_UPSTREAM_DOMAIN:
            continue
        assert up[key]["facts"] == rt[key]["facts"], key
        assert up[key]["custom_ar_v2"] == rt[key]["custom_ar_v2"], key
        if cap != "7.0":
            assert up[key]["attention"] == rt[key]["attention"], key
        checked += 1
    assert checked == len(KNOWN_TO_UPSTREAM_DOMAIN) * 4 * 3


def test_unknown_capabilities_take_their_nearest_tier(suites):
    """D6: fallback for capabilities SGLang does not know."""
    rt, up = suites["routed"], suites["upstream"]
    # Identity facts are the device's own, as SGLang's probes answer them (the decisions
    # below take the tier): a 13.0 GPU is no SM120 and reports 13.0.
    for key in rt:
        if key.split("|")[0] not in KNOWN_TO_UPSTREAM_DOMAIN:
            assert rt[key]["facts"] == up[key]["facts"], key
    assert rt["13.0|pcie-p2p|8"]["facts"]["is_sm120"] is False
    assert rt["13.0|pcie-p2p|8"]["facts"]["device_capability"] == [13, 0]
    assert rt["13.0|pcie-p2p|8"]["symm_mem"] == {"enabled": False}  # 12.1 has no symm-mem sizes to lend
    assert rt["13.0|pcie-p2p|8"]["fusion"]["auto/single"] == "ValueError"  # family kernels not kept
    # asked for (--enable-torch-symm-mem), 9.5 takes 9.0's two-shot bound measured without multicast
    assert rt["9.5|nvlink|2"]["symm_mem"] == {"enabled": True, "max_bytes": 16 << 20, "algorithm": "two_shot"}
    assert rt["9.5|nvswitch|8"]["attention"]["mha"] == "flashinfer"  # no sm_90a wgmma on 9.5
    assert rt["9.5|nvswitch|8"]["custom_ar_v2"] == "sm90"  # tuned limits kept
    assert rt["10.5|nvswitch|8"]["attention"]["mha"] == "trtllm_mha"  # sm_100f family code runs
    assert rt["6.1|nvswitch|8"]["attention"]["mha"] == "torch_native"  # Triton compiles for SM70 and newer
    assert rt["6.1|nvswitch|8"]["symm_mem"] == {"enabled": False}
    assert suites["upstream"]["9.5|nvswitch|8"]["attention"]["mha"] == "fa3"  # what upstream would try
    assert "## D6" in (ROOT / "docs" / "differences.md").read_text()


def test_a_fallback_never_turns_on_by_default_a_path_stock_leaves_off(suites):
    """What a fallback lends: on a GPU the table does not know, a path SGLang turns on by itself
    (PCIe-IPC, the fusion auto-enable pass) is on only where stock SGLang turns it on too;
    only what the user asks for (torch symm mem's flag) may take the nearest tier's bounds."""
    rt, up = suites["routed"], suites["upstream"]
    unknown = [key for key in rt if key.split("|")[0] not in KNOWN_TO_UPSTREAM_DOMAIN]
    assert len(unknown) >= 6 * 4 * 3
    for key in unknown:
        assert not (rt[key]["pcie_ipc"] is True and up[key]["pcie_ipc"] is not True), key
        assert not (rt[key]["fusion_auto_enable"] and not up[key]["fusion_auto_enable"]), key


def test_d10_d11_dsa_takes_upstreams_pair_only_where_its_kernels_are_built(suites):
    """D10 off the table, D11 on known tiers: the DSA backends are upstream's pair where
    FlashMLA / FA3 / trtllm-gen have a build for the device, else tilelang (JIT for the
    device); the KV-cache default (a data layout) stays upstream's everywhere."""
    rt, up = suites["routed"], suites["upstream"]
    changed = set()
    for key, row in rt.items():
        if "dsa" not in row:
            continue
        cap = key.split("|")[0]
        for cell, routed in row["dsa"].items():
            upstream = up[key]["dsa"][cell]
            assert routed == _dsa_cell_expected(cap, upstream), (key, cell, routed, upstream)
            if routed != upstream:
                changed.add(cap)
    # 9.5: no FA3/FlashMLA build (sm_90a); 10.5: FlashMLA has none (bfloat16 cells); 11.x, 12.x,
    # 13.0: no trtllm-gen / FlashMLA build; 7.x, 8.x: FlashMLA and FA3's MLA are sm_90a and newer
    assert {"9.5", "10.5", "11.0", "11.5", "12.0", "12.1", "12.5", "13.0", "8.0", "8.9"} <= changed
    assert not changed & {"9.0", "10.0", "10.3"}
    assert up["13.0|nvswitch|8"]["dsa"]["DeepseekV32ForCausalLM/auto"]["dsa_decode_backend"] == "trtllm"
    doc = (ROOT / "docs" / "differences.md").read_text()
    assert re.search(r"^## D10\b", doc, re.M) and re.search(r"^## D11\b", doc, re.M)
