"""The all-reduce plan: which of SGLang's paths takes a decode-sized and a prefill-sized
reduction, and the rule behind every path the registry turns on where stock SGLang does not:
a ledger entry (arch/evidence.py), a node of one, peer-to-peer access, the device's own tier."""

from hypothesis import event, given, settings
from hypothesis import strategies as st

from sglang_arch import stock
from sglang_arch.arch import TOPOLOGIES, explain, resolve
from sglang_arch.arch.evidence import LEDGER
from sglang_arch.arch.policies import collectives as c

from unit.strategies import capabilities, topologies

MIB = 1 << 20
WORLD_SIZES = st.sampled_from([1, 2, 3, 4, 6, 8, 16])


def test_sm120_tp8_pcie_p2p_decode_on_pcie_ipc_prefill_on_nccl():
    d = explain("12.0", 8, "pcie-p2p")
    plan = d.plan()
    assert (plan.decode, plan.prefill) == ("PCIe-IPC", "NCCL")
    assert d.pcie_ipc.evidence == ("pcie-ipc-tp8-sm120",)
    theirs = stock.plan(d.resolution.requested, d.topology, 8)
    assert (theirs.decode, theirs.prefill) == ("NCCL", "NCCL")
    # --enable-torch-symm-mem changes nothing there: no torch symm mem over PCIe
    assert (d.plan(True).decode, d.plan(True).prefill) == ("PCIe-IPC", "NCCL")
    assert [s.path for s in plan.steps] == list(c.PLAN_PATHS)  # SGLang's dispatch order


def test_across_nodes_nothing_claims_peer_access():
    d = explain("12.0", 8, "pcie-p2p", nnodes=2)
    assert not d.pcie_ipc.enabled and "does not span nodes" in d.pcie_ipc.reason
    two = explain("9.0", 2, "nvlink", nnodes=2)  # on one node: two-shot below 16 MiB
    assert not two.symm_mem.enabled and "does not span nodes" in two.symm_mem.reason
    assert explain("9.0", 2, "nvlink").symm_mem.enabled


def test_two_shot_without_multicast_only_where_measured():
    h = resolve("9.0")
    d = c.torch_symm_mem(h, TOPOLOGIES["nvlink"], 2)
    assert (d.enabled, d.max_bytes, d.algorithm, d.evidence) == (True, 16 * MIB, "two_shot",
                                                                ("two-shot-ws2-sm90-no-multicast",))
    # measured over NVLink at world size 2 only
    assert not c.torch_symm_mem(h, TOPOLOGIES["nvlink"], 4).enabled
    assert not c.torch_symm_mem(h, TOPOLOGIES["pcie-p2p"], 2).enabled
    # no other tier has a bound measured without multicast
    for cap in ("10.0", "10.3", "12.0", "12.1"):
        for topo in ("nvlink", "pcie-p2p"):
            assert not c.torch_symm_mem(resolve(cap), TOPOLOGIES[topo], 2).enabled, (cap, topo)
    # with multicast: SGLang's own sizes, two-shot at world size 2 as SGLang picks it
    d = c.torch_symm_mem(h, TOPOLOGIES["nvswitch"], 2)
    assert (d.max_bytes, d.algorithm, d.evidence) == (64 * MIB, "two_shot", ())


def test_plan_bounds_follow_sglangs_strict_comparison():
    below = c.allreduce_plan(0, False, c.plan_bytes(c.PLAN_DECODE_TOKENS) + 1, "two_shot", True)
    at = c.allreduce_plan(0, False, c.plan_bytes(c.PLAN_DECODE_TOKENS), "two_shot", True)
    assert below.decode == "torch symm mem (two_shot)" and at.decode == "NCCL"
    unflagged = c.allreduce_plan(0, False, 64 * MIB, "two_shot", False)
    assert unflagged.decode == unflagged.prefill == "NCCL"
    car = c.allreduce_plan(16 * MIB, True, 0, None)
    assert (car.decode, car.prefill) == ("custom all-reduce", "NCCL")  # custom all-reduce before PCIe-IPC


@settings(max_examples=600)
@given(capabilities, topologies, WORLD_SIZES, st.integers(1, 3))
def test_every_path_stock_leaves_off_names_its_evidence(cap, topo, ws, nnodes):
    if topo.name == "single" and ws > 1:
        return
    d = explain(cap, ws, topo.name, nnodes)
    s = stock.decide(d.resolution.requested, d.topology, ws, nnodes)
    event(f"pcie-ipc {'on' if d.pcie_ipc.enabled else 'off'}; symm {d.symm_mem.algorithm or 'off'}")
    if d.pcie_ipc.enabled:  # stock: opt-in everywhere
        assert s.pcie_ipc.value == "off"
        assert d.pcie_ipc.evidence and all(e in LEDGER for e in d.pcie_ipc.evidence)
        assert nnodes == 1 and d.topology.p2p and not d.topology.full_nvlink
        assert d.resolution.match in ("exact", "override") and ws in d.resolution.profile.pcie_ipc_world_sizes
    if d.symm_mem.enabled and s.symm_mem.value == "off":  # on where stock turns it off: two-shot, measured
        assert d.symm_mem.algorithm == "two_shot" and not d.topology.multicast
        assert d.symm_mem.evidence and all(e in LEDGER for e in d.symm_mem.evidence)
        assert nnodes == 1 and d.topology.full_nvlink
        assert d.symm_mem.max_bytes == d.resolution.profile.symm_mem_two_shot[ws]
    if nnodes > 1:  # peer-to-peer access does not span nodes
        assert not d.pcie_ipc.enabled and (not d.symm_mem.enabled or d.topology.multicast)
    plan = d.plan(True)
    assert plan.prefill in ("NCCL", "torch symm mem (multimem)", "torch symm mem (two_shot)")
    if plan.prefill != "NCCL":  # a prefill chunk on a peer-write kernel only below a bound that holds it
        assert d.symm_mem.max_bytes > plan.prefill_bytes
