"""Expected values from their sources, not from the code under test.

Every expectation here is data written in this file with the source beside it: SGLang
0.5.23's own tables and rules (``test/integration/test_sources_upstream.py`` checks that
these literals still equal the installed package), the field report behind
docs/differences.md D1, and the topology definitions of the README.  Nothing is
imported from ``arch/table.py``; the registry is only ever the thing being checked.
"""

import pytest
from sglang_arch.arch import TOPOLOGIES, Capability, default_registry, resolve
from sglang_arch.arch.policies import collectives
from sglang_arch.arch.policies.platform import platform_facts
from unit.sglang_probes import UPSTREAM_PROBES, upstream_facts

MIB = 1 << 20

# --- sources -------------------------------------------------------------------------

# The tiers the registry must know, as docs/support-matrix.md lists them.
KNOWN_TIERS = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]

# sglang 0.5.23's probe rules (srt/utils/common.py): UPSTREAM_PROBES in sglang_probes.py.

# sglang 0.5.23, srt/distributed/device_communicators/all_reduce_utils.py
# TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES (device major -> world size -> bytes), in MiB.
UPSTREAM_SYMM_MEM_MIB = {9: {2: 64, 4: 64, 6: 128, 8: 128}, 10: {2: 64, 4: 64, 6: 128, 8: 128}}
# sglang 0.5.23, torch_symm_mem.py TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM.
UPSTREAM_MULTIMEM_WORLD_SIZES = {9: (4, 6, 8), 10: (4, 6, 8)}
# Two-shot without multicast (stock: off): bounds measured without multicast, in MiB, from
# benchmark/results/h200x2-collectives.json (2x H200, NVLink, multicast off: two-shot faster
# than NCCL below 16 MiB at world size 2), by tier; no other tier has a measurement.
MEASURED_TWO_SHOT_MIB = {"9.0": {2: 16}}

# sglang 0.5.23, configs/custom_all_reduce_v2.py _get_all_reduce_configs: major 9 ->
# _sm90_configs, major 10 with minor >= 7 -> _sm107_configs, other 10.x -> _sm100_configs,
# anything else the default for world sizes 2..16; and environ.py
# SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB = 16 * 1024.
UPSTREAM_CAR_TABLES = {"sm90": (2, 3, 4, 5, 6, 7, 8), "sm100": (2, 3, 4, 5, 6, 7, 8, 16),
                       "sm107": (2, 3, 4, 5, 6, 7, 8, 16), None: tuple(range(2, 17))}
UPSTREAM_CAR_MAX_BYTES = 16 * 1024 * 1024

# README "Using it": what each topology name means.
TOPOLOGY_FACTS = {  # name: (peer-to-peer, full NVLink, multicast)
    "single": (False, False, False),
    "nvswitch": (True, True, True),
    "nvlink": (True, True, False),
    "pcie-p2p": (True, False, False),
    "pcie": (False, False, False),
}

# sglang 0.5.23, srt/layers/flashinfer_comm_fusion.py _resolve_backend: SM90 auto ->
# trtllm (single node only), SM10x auto -> mnnvl (also multi-node), cutedsl on SM10x.
# docs/differences.md D3: 12.x -> trtllm with P2P (FlashInfer PR #3903); D4: trtllm needs P2P;
# D9: mnnvl needs NVLink multicast.
FUSION_AUTO = {  # tier: (one node, several nodes)
    "9.0": ("trtllm", None), "10.0": ("mnnvl", "mnnvl"), "10.3": ("mnnvl", "mnnvl"), "10.7": ("mnnvl", "mnnvl"),
    "12.0": ("trtllm", None), "12.1": ("trtllm", None),
}
# The CUDA each tier's fusion kernels need: sglang gates SM90 at 12.3 and SM10x at 12.8
# (common.py); FlashInfer's SM12x comm module needs 12.8 (CUDA 12.8 release notes: sm_120).
FUSION_MIN_CUDA = {"9.0": (12, 3), "10.0": (12, 8), "10.3": (12, 8), "10.7": (12, 8), "12.0": (12, 8), "12.1": (12, 8)}

# Capabilities around every tier: the tier, X.Y-1, X.Y+1, the next major, and a few
# far away; CUDA versions around every minimum above.
NEIGHBOURS = sorted({f"{t.split('.')[0]}.{m}" for t in KNOWN_TIERS for m in range(10)}
                    | {f"{int(t.split('.')[0]) + 1}.0" for t in KNOWN_TIERS} | {"0.0", "6.1", "6.9", "13.5", "20.0", "99.9"},
                    key=lambda s: tuple(map(int, s.split("."))))
CUDAS = [(11, 0), (11, 8), (12, 0), (12, 2), (12, 3), (12, 4), (12, 7), (12, 8), (12, 9), (13, 0), (13, 1)]
WORLD_SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 16]


def _symm_mem_source(tier):
    major = int(tier.split(".")[0])
    if major in UPSTREAM_SYMM_MEM_MIB:
        return UPSTREAM_SYMM_MEM_MIB[major], UPSTREAM_MULTIMEM_WORLD_SIZES[major]
    return {}, ()


def _car_table(tier):
    major, minor = map(int, tier.split("."))
    if major == 9:
        return "sm90"
    if major == 10:
        return "sm107" if minor >= 7 else "sm100"
    return None


# --- checks ----------------------------------------------------------------------------

def test_the_registry_knows_exactly_the_documented_tiers():
    assert [str(c) for c in default_registry().known] == KNOWN_TIERS


@pytest.mark.parametrize("cap", NEIGHBOURS)
def test_platform_facts_are_upstreams_rule_on_the_devices_own_capability(cap):
    """SGLang's probes answer from the device's own major and torch's CUDA; so must the
    routed facts, for known and unknown capabilities alike (identity, not a decision)."""
    c = Capability(*map(int, cap.split(".")))
    res = resolve(c)
    for cuda in CUDAS:
        facts = platform_facts(res, cuda)
        assert facts == upstream_facts((c.major, c.minor), cuda), (cap, cuda)


def test_platform_facts_without_a_gpu_or_without_cuda_are_all_false():
    assert platform_facts(None, (13, 0)) == {name: False for name in UPSTREAM_PROBES}
    facts = platform_facts(resolve("9.0"), None)
    assert {k: v for k, v in facts.items() if k in UPSTREAM_PROBES} == {n: False for n in UPSTREAM_PROBES}
    assert facts["device_capability"] == (9, 0) and facts["device_sm"] == 90


def test_topologies_mean_what_the_readme_says():
    assert {name: (t.p2p, t.full_nvlink, t.multicast) for name, t in TOPOLOGIES.items()} == TOPOLOGY_FACTS


@pytest.mark.parametrize("tier", KNOWN_TIERS)
def test_symm_mem_sizes_and_algorithm_come_from_sglang_or_a_measurement(tier):
    """Every topology x world size: with multicast SGLang's own sizes and kernel choice;
    without it two-shot only at a bound measured without multicast (D2), with P2P."""
    sizes, multimem = _symm_mem_source(tier)
    two_shot = MEASURED_TWO_SHOT_MIB.get(tier, {})
    res = resolve(tier)
    for topo, (p2p, full_nvlink, multicast) in TOPOLOGY_FACTS.items():
        for ws in WORLD_SIZES:
            d = collectives.torch_symm_mem(res, TOPOLOGIES[topo], ws)
            if ws == 1:
                expected = (False, 0, None)
            elif multicast:
                expected = ((True, sizes[ws] * MIB, "multimem" if ws in multimem else "two_shot") if ws in sizes
                            else (False, 0, None))
            elif full_nvlink and ws in two_shot:  # measured over NVLink
                expected = (True, two_shot[ws] * MIB, "two_shot")
            else:
                expected = (False, 0, None)
            assert (d.enabled, d.max_bytes, d.algorithm) == expected, (tier, topo, ws, d.reason)
            assert d.reason


def test_multimem_is_never_chosen_without_multicast():
    """Over every capability near a tier, every topology and world size."""
    for cap in NEIGHBOURS:
        res = resolve(cap)
        for topo, (_, _, multicast) in TOPOLOGY_FACTS.items():
            for ws in WORLD_SIZES:
                d = collectives.torch_symm_mem(res, TOPOLOGIES[topo], ws)
                if d.algorithm == "multimem":
                    assert multicast, (cap, topo, ws)


@pytest.mark.parametrize("tier", KNOWN_TIERS)
def test_custom_allreduce_table_and_world_sizes_are_sglangs(tier):
    table = _car_table(tier)
    res = resolve(tier)
    for topo, (p2p, full_nvlink, _) in TOPOLOGY_FACTS.items():
        for ws in WORLD_SIZES:
            d = collectives.custom_allreduce(res, TOPOLOGIES[topo], ws)
            enabled = ws in UPSTREAM_CAR_TABLES[table] and p2p and (ws == 2 or full_nvlink)
            assert (d.enabled, d.max_bytes) == ((True, UPSTREAM_CAR_MAX_BYTES) if enabled else (False, 0)), (tier, topo, ws)
            if ws > 1:
                assert d.table == table
            assert d.reason


@pytest.mark.parametrize("tier", KNOWN_TIERS)
def test_fusion_backend_from_sglang_and_d3_d4(tier):
    one, several = FUSION_AUTO.get(tier, (None, None))
    res = resolve(tier)
    for topo, (p2p, _, multicast) in TOPOLOGY_FACTS.items():
        for ws in (1, 2, 4, 8):
            for nnodes, expected in ((1, one), (2, several)):
                if ws == 1 or (expected == "trtllm" and not p2p) or (expected == "mnnvl" and not multicast):
                    expected = None  # D4: trtllm needs P2P; D9: mnnvl needs NVLink multicast
                d = collectives.allreduce_fusion(res, TOPOLOGIES[topo], ws, nnodes, explicit=True)
                assert (d.enabled, d.backend) == (expected is not None, expected), (tier, topo, ws, nnodes, d.reason)
                # unasked (SGLang's auto-enable pass): also where the tier lists the world size as
                # measured to win (D3: SM12x lists none)
                auto = res.profile.allreduce_fusion_auto_world_sizes
                default = collectives.allreduce_fusion(res, TOPOLOGIES[topo], ws, nnodes)
                assert default.enabled is (d.enabled and (auto is None or ws in auto)), (tier, topo, ws, default.reason)


@pytest.mark.parametrize("tier", sorted(FUSION_MIN_CUDA))
def test_fusion_needs_the_cuda_of_its_kernels(tier):
    need = FUSION_MIN_CUDA[tier]
    res = resolve(tier)
    for cuda in CUDAS:
        d = collectives.allreduce_fusion(res, TOPOLOGIES["nvswitch"], 8, 1, "auto", cuda, explicit=True)
        assert d.enabled is (cuda >= need), (tier, cuda, d.reason)
        if cuda < need:
            assert f"needs torch CUDA >= {need[0]}.{need[1]} (found {cuda[0]}.{cuda[1]})" in d.reason


@pytest.mark.parametrize("tier,requested,nnodes,expected", [
    # sglang 0.5.23 _resolve_backend: explicit backends.
    ("9.0", "trtllm", 1, "trtllm"), ("9.0", "mnnvl", 1, "mnnvl"), ("9.0", "cutedsl", 1, None),
    ("9.0", "trtllm", 2, None), ("9.0", "mnnvl", 2, None),
    ("10.0", "trtllm", 1, "trtllm"), ("10.0", "cutedsl", 1, "cutedsl"), ("10.0", "cutedsl", 2, "cutedsl"),
    ("10.0", "mnnvl", 2, "mnnvl"), ("10.0", "trtllm", 2, None),
    ("12.0", "trtllm", 1, "trtllm"), ("12.0", "mnnvl", 1, None), ("12.0", "cutedsl", 1, None),
    ("8.0", "trtllm", 1, None), ("11.0", "auto", 1, None),
])
def test_explicit_fusion_backends(tier, requested, nnodes, expected):
    d = collectives.allreduce_fusion(resolve(tier), TOPOLOGIES["nvswitch"], 8, nnodes, requested)
    assert (d.enabled, d.backend) == (expected is not None, expected), d.reason
