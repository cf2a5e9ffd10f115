import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from sglang_arch.arch import TOPOLOGIES, catalog, decide, explain, resolve
from sglang_arch.arch.policies import collectives
from sglang_arch.arch.policies.attention import (
    ModelTraits,
    check_backend,
    default_backend,
)

from unit.strategies import (
    capabilities,
    collective_capabilities,
    collective_world_sizes,
    topologies,
    traits,
    world_sizes,
)

MIB = 1 << 20


@settings(max_examples=400)
@given(collective_capabilities, topologies, collective_world_sizes)
def test_symm_mem_enabled_means_a_bounded_size_and_a_possible_algorithm(cap, topo, ws):
    res = resolve(cap)
    event(f"match: {res.match}")
    d = collectives.torch_symm_mem(res, topo, ws)
    event(f"symm mem: {d.algorithm or 'off'} on {topo.name}")
    assert d.reason
    if not d.enabled:
        assert d.max_bytes == 0 and d.algorithm is None
        return
    assert 0 < d.max_bytes <= collectives.SYMM_MEM_MAX_BYTES_LIMIT
    assert d.max_bytes % 4 == 0  # the payload must stay 4-byte aligned
    if topo.multicast:  # SGLang's own table and kernel choice
        assert ws in res.profile.torch_symm_mem and d.max_bytes == res.profile.torch_symm_mem[ws]
        assert (d.algorithm == "multimem") == (ws in res.profile.symm_mem_multimem_world_sizes)
        return
    # without multicast only a two-shot bound measured without it, with its evidence
    assert d.algorithm == "two_shot" and topo.p2p and d.max_bytes == res.profile.symm_mem_two_shot[ws]
    assert d.evidence and d.evidence == res.profile.evidence_for("symm_mem_two_shot")


@given(collective_capabilities, topologies, collective_world_sizes)
def test_custom_allreduce_needs_p2p_and_nvlink_above_two(cap, topo, ws):
    d = collectives.custom_allreduce(resolve(cap), topo, ws)
    assert d.reason
    if d.enabled:
        assert topo.p2p and (ws == 2 or topo.full_nvlink)
        assert 0 < d.max_bytes <= collectives.CUSTOM_AR_V2_MAX_BYTES
    else:
        assert d.max_bytes == 0


@settings(max_examples=400)
@given(collective_capabilities, topologies, collective_world_sizes, st.integers(1, 4),
       st.sampled_from(collectives.FUSION_REQUESTS))
def test_fusion_backend_is_listed_and_runnable(cap, topo, ws, nnodes, requested):
    res = resolve(cap)
    d = collectives.allreduce_fusion(res, topo, ws, nnodes, requested)
    event(f"fusion: {d.backend or 'off'}")
    assert d.reason
    if not d.enabled:
        assert d.backend is None
        return
    assert d.backend in res.profile.allreduce_fusion
    assert requested in ("auto", d.backend)
    assert ws > 1 and catalog.choice_runs("fusion", d.backend, res.requested).runs
    if nnodes > 1:
        assert d.backend in res.profile.allreduce_fusion_multi_node
    if d.backend == "trtllm":
        assert topo.p2p


@given(capabilities, traits)
def test_every_default_attention_backend_passes_its_own_check(cap, tr):
    res = resolve(cap)
    d = default_backend(res, tr)
    for phase, name in (("prefill", d.prefill), ("decode", d.decode)):
        assert check_backend(res, name, tr.kind, phase, tr.cuda).valid, (cap, tr, d)
    assert d.reason


@given(capabilities, st.sampled_from(catalog.known_choices("attention")), st.sampled_from(["mha", "mla"]),
       st.sampled_from(["prefill", "decode"]))
def test_an_invalid_backend_names_valid_alternatives(cap, name, kind, phase):
    res = resolve(cap)
    v = check_backend(res, name, kind, phase)
    assert v.valid in (True, False)
    if not v.valid:
        assert name not in v.alternatives and "torch_native" in v.alternatives
        assert all(check_backend(res, alt, kind, phase).valid for alt in v.alternatives)


def test_unknown_backend_is_not_judged():
    v = check_backend(resolve("9.0"), "aiter")
    assert v.valid is None and "not checked" in v.reason


@given(capabilities, world_sizes, st.sampled_from(sorted(TOPOLOGIES)))
def test_explain_json_always_has_the_contract_keys(cap, ws, topo):
    d = explain(cap, ws, topo).to_dict()
    assert {"requested", "resolved", "match", "reason", "topology", "features", "collectives", "attention"} <= set(d)
    assert set(d["features"]) == {"tma", "wgmma", "tcgen05", "fp8", "fp4"}
    assert set(d["collectives"]) == {"torch_symm_mem", "custom_allreduce", "allreduce_fusion", "pcie_ipc", "plan"}
    assert {"enabled", "max_bytes", "algorithm", "reason"} <= set(d["collectives"]["torch_symm_mem"])
    assert {"enabled", "max_bytes", "reason"} <= set(d["collectives"]["custom_allreduce"])
    assert {"enabled", "backend", "reason"} <= set(d["collectives"]["allreduce_fusion"])
    for kind in ("mha", "mla"):
        assert {"prefill", "decode"} <= set(d["attention"][kind])


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "8"])
def test_bad_world_size_is_a_precise_value_error(bad):
    res = resolve("9.0")
    for fn in (collectives.torch_symm_mem, collectives.custom_allreduce, collectives.allreduce_fusion):
        with pytest.raises(ValueError, match="invalid world size .*accepted: an integer >= 1"):
            fn(res, TOPOLOGIES["nvswitch"], bad)


def test_bad_model_kind_and_phase():
    with pytest.raises(ValueError, match="invalid model kind 'gqa'"):
        ModelTraits(kind="gqa")
    with pytest.raises(ValueError, match="invalid phase 'verify'"):
        check_backend(resolve("9.0"), "fa3", "mha", "verify")


# One row per known tier: (capability, topology, world size) -> expected decisions.
# symm mem as (algorithm or None, MiB), fusion backend or None, custom AR table, MHA, MLA.
ROWS = [
    ("7.0", "nvlink", 8, (None, 0), None, True, "triton", "triton"),
    ("7.5", "pcie", 8, (None, 0), None, False, "flashinfer", "triton"),
    ("8.0", "nvlink", 8, (None, 0), None, True, "flashinfer", "triton"),
    ("8.6", "pcie", 8, (None, 0), None, False, "flashinfer", "triton"),
    ("8.7", "single", 1, (None, 0), None, False, "flashinfer", "triton"),
    ("8.9", "pcie", 8, (None, 0), None, False, "flashinfer", "triton"),
    ("9.0", "nvswitch", 8, ("multimem", 128), "trtllm", True, "fa3", "fa3"),
    # without multicast: two-shot's own bound, measured at world size 2
    ("9.0", "nvlink", 2, ("two_shot", 16), "trtllm", True, "fa3", "fa3"),
    ("10.0", "nvswitch", 8, ("multimem", 128), "mnnvl", True, "trtllm_mha", "flashinfer"),
    ("10.3", "nvswitch", 4, ("multimem", 64), "mnnvl", True, "trtllm_mha", "flashinfer"),
    ("10.7", "nvswitch", 8, ("multimem", 128), "mnnvl", True, "trtllm_mha", "flashinfer"),
    ("11.0", "single", 1, (None, 0), None, False, "flashinfer", "triton"),
    # D3: fusion runs on 12.0 with P2P when asked, and is off by default (no measured gain);
    # no torch symm mem over PCIe (nothing measured it there)
    ("12.0", "pcie-p2p", 8, (None, 0), None, False, "flashinfer", "triton"),
    ("12.0", "pcie-p2p", 2, (None, 0), None, True, "flashinfer", "triton"),
    ("12.0", "pcie", 8, (None, 0), None, False, "flashinfer", "triton"),
    ("12.1", "single", 1, (None, 0), None, False, "flashinfer", "triton"),
]


@pytest.mark.parametrize("cap,topo,ws,symm,fusion,car,mha,mla", ROWS)
def test_support_matrix_rows(cap, topo, ws, symm, fusion, car, mha, mla):
    d = explain(cap, ws, topo)
    assert d.resolution.match == "exact"
    assert (d.symm_mem.algorithm, d.symm_mem.max_bytes // MIB) == symm
    assert d.fusion.backend == fusion
    assert d.custom_allreduce.enabled is car
    assert (d.mha.prefill, d.mla.prefill) == (mha, mla)


def test_world_sizes_a_tier_does_not_list_are_disabled_with_a_reason():
    for ws in (3, 5, 7, 16):
        d = collectives.torch_symm_mem(resolve("9.0"), TOPOLOGIES["nvswitch"], ws)
        assert not d.enabled and f"world size {ws} has no size on tier 9.0 (sizes for 2, 4, 6, 8)" == d.reason
        d = collectives.torch_symm_mem(resolve("9.0"), TOPOLOGIES["nvlink"], ws)
        assert not d.enabled and d.reason.startswith(f"no two-shot bound for world size {ws} on tier 9.0")
    d = collectives.torch_symm_mem(resolve("12.0"), TOPOLOGIES["single"], 1)
    assert not d.enabled and "one GPU" in d.reason


def test_attention_model_traits_follow_upstream_rules():
    h = resolve("9.0")
    assert default_backend(h, ModelTraits(speculative_multi_branch=True)).prefill == "flashinfer"
    assert default_backend(h, ModelTraits(cuda=(12, 2))).prefill == "flashinfer"
    b = resolve("10.0")
    assert default_backend(b, ModelTraits(asymmetric_kv=True)).prefill == "fa4"
    assert default_backend(b, ModelTraits(speculative_topk_pending=True)).prefill == "flashinfer"
    assert default_backend(resolve("12.0"), ModelTraits(attention_sinks=True)).prefill == "triton"
    assert default_backend(resolve("8.0"), ModelTraits(flashinfer_available=False)).prefill == "triton"
    assert default_backend(resolve("8.0"), ModelTraits(cross_attention_needs_flashinfer=True)).prefill == "flashinfer"


def test_fallback_examples_from_the_issue():
    d = explain("12.0", 8, "pcie-p2p").to_dict()
    # no torch symm mem over PCIe (nothing measured it there); SGLang's PCIe-IPC all-reduce at TP 8 (measured)
    assert d["collectives"]["torch_symm_mem"]["enabled"] is False
    assert d["collectives"]["pcie_ipc"]["enabled"] is True
    assert d["collectives"]["pcie_ipc"]["evidence"] == ["pcie-ipc-tp8-sm120"]
    assert d["collectives"]["plan"]["default"]["decode"] == "PCIe-IPC"
    assert d["collectives"]["plan"]["default"]["prefill"] == "NCCL"
    assert d["collectives"]["allreduce_fusion"]["backend"] is None  # D3: off by default, trtllm when asked
    assert collectives.allreduce_fusion(resolve("12.0"), TOPOLOGIES["pcie-p2p"], 8, explicit=True).backend == "trtllm"
    # 9.5 is in the Hopper family but not sm_90a: fa3 (wgmma) must not be chosen.
    assert explain("9.5", 8, "nvswitch").mha.prefill == "flashinfer"
    # 13.0 falls back to 12.1, which has no symm-mem sizes, no PCIe-IPC measurement and no
    # FlashInfer comm kernels for 13.0: every collective path stays as stock SGLang leaves it.
    d13 = explain("13.0", 8, "pcie-p2p")
    assert not d13.symm_mem.enabled and not d13.pcie_ipc.enabled
    assert not d13.fusion.enabled and "has no build for 13.0" in d13.fusion.reason


def test_decide_uses_the_typical_topology_by_default():
    assert decide(resolve("12.0"), None, 8).topology.name == "pcie-p2p"
    assert decide(resolve("9.0"), None, 1).topology.name == "single"
