"""The kernel catalog (arch/catalog.py, arch/kernels.py): its target rule, its data, and
the property every decision keeps: it picks only kernels with a build for the device."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch import TOPOLOGIES, catalog, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.kernels import CHOICES, KERNELS
from sglang_arch.arch.policies import attention, collectives, dsa
from sglang_arch.arch.table import ARCHITECTURES

any_capability = st.builds(Capability, st.integers(0, 30), st.integers(0, 9))
target_capability = st.builds(Capability, st.integers(1, 30), st.integers(0, 9))  # sm_XY needs two digits
cudas = st.sampled_from([None, (12, 2), (12, 4), (12, 8), (12, 9), (13, 0)])


def cc(text):
    return Capability(*map(int, text.split(".")))


@pytest.mark.parametrize("target, runs, never", [
    ("sm_90a", ["9.0"], ["9.5", "10.0", "8.9"]),
    ("sm_100a", ["10.0"], ["10.3", "10.5", "11.0"]),
    ("sm_100f", ["10.0", "10.3", "10.5", "10.9"], ["9.0", "11.0", "12.0"]),
    ("sm_103f", ["10.3", "10.7"], ["10.0", "11.0"]),
    ("sm_80", ["8.0", "8.6", "8.9"], ["7.5", "9.0"]),
    ("sm_86", ["8.6", "8.9"], ["8.0", "9.0"]),
    ("compute_80", ["8.0", "9.0", "13.0"], ["7.5"]),
    ("jit:7.5+", ["7.5", "12.1", "20.0"], ["7.0", "6.1"]),
    ("jit:12.x", ["12.0", "12.1", "12.7"], ["11.0", "13.0"]),
    ("jit:10.3", ["10.3"], ["10.0", "10.5"]),
    ("torch:9.0+", ["9.0", "13.0"], ["8.9"]),
])
def test_target_rule(target, runs, never):
    t = catalog.parse_target(target)
    assert all(t.runs_on(cc(c)) for c in runs)
    assert not any(t.runs_on(cc(c)) for c in never)


@pytest.mark.parametrize("bad", ["sm90a", "sm_90x", "compute_90a", "jit:12.x+", "torch:9.0", "jit:", "", 90, None])
def test_bad_targets_name_the_accepted_forms(bad):
    with pytest.raises(ValueError, match=r"invalid kernel target .*sm_XY, sm_XYa, sm_XYf"):
        catalog.parse_target(bad)


@given(target_capability, any_capability)
def test_arch_targets_run_on_exactly_one_capability(target_cc, device):
    t = catalog.parse_target(f"sm_{target_cc.sm}a")
    assert t.runs_on(device) is (device == target_cc)


@given(target_capability, any_capability, st.sampled_from(["f", ""]))
def test_sass_and_family_targets_never_cross_a_major_or_go_down(target_cc, device, suffix):
    t = catalog.parse_target(f"sm_{target_cc.sm}{suffix}")
    if t.runs_on(device):
        assert device.major == target_cc.major and device >= target_cc


def test_every_kernel_has_sources_and_known_targets():
    for name, entry in KERNELS.items():
        assert entry["sources"] and entry["summary"], name
        assert all(catalog.parse_target(t) for t in entry["targets"]), name
    used = {kernel for by_choice in CHOICES.values() for uses in by_choice.values() for use in uses
            for kernel in (use["kernel"], *use.get("with", ()))}
    assert used == set(KERNELS), "a kernel no choice uses, or a use of a kernel the catalog lacks"


def test_every_tier_preference_is_a_catalog_choice():
    for cap, entry in ARCHITECTURES.items():
        for field, decision in (("attention_mha", "attention"), ("attention_mla", "attention"),
                                ("allreduce_fusion", "fusion")):
            for choice in entry.get(field, ()):
                assert choice in catalog.known_choices(decision), (cap, field, choice)


def test_unknown_decision_and_choice():
    with pytest.raises(ValueError, match="unknown catalog decision 'moe'"):
        catalog.known_choices("moe")
    assert catalog.choice_runs("attention", "aiter", cc("9.0")) is None


def test_min_cuda_is_inclusive_and_unknown_cuda_is_not_judged():
    fa3 = catalog.CATALOG["fa3_sm90"]
    assert fa3.runs_on(cc("9.0"), (12, 3)).runs
    assert not fa3.runs_on(cc("9.0"), (12, 2)).runs
    assert fa3.runs_on(cc("9.0"), None).runs


@given(any_capability, cudas)
def test_one_kernel_is_judged_alike_in_every_decision(device, cuda):
    """trtllm-gen's cubins decide trtllm_mla (MLA), DSA's trtllm and trtllm_mha's SM10x build alike."""
    gen = catalog.CATALOG["trtllm_gen_fmha"].runs_on(device, cuda).runs
    assert catalog.choice_runs("attention", "trtllm_mla", device, cuda, "mla", "prefill").runs is gen
    assert catalog.choice_runs("dsa", "trtllm", device, cuda).runs is gen
    if gen:
        assert catalog.choice_runs("attention", "trtllm_mha", device, cuda, "mha", "decode").runs
    flashmla = catalog.CATALOG["flashmla"].runs_on(device, cuda).runs
    assert catalog.choice_runs("dsa", "flashmla_sparse", device, cuda).runs is flashmla
    assert catalog.choice_runs("attention", "flashmla", device, cuda, "mla", "decode").runs is flashmla
    fa3 = catalog.CATALOG["fa3_sm90"].runs_on(device, cuda).runs
    assert catalog.choice_runs("dsa", "fa3", device, cuda).runs is fa3


traits = st.builds(attention.ModelTraits, kind=st.sampled_from(attention.MODEL_KINDS),
                   asymmetric_kv=st.booleans(), attention_sinks=st.booleans(),
                   speculative_multi_branch=st.booleans(), speculative_topk_pending=st.booleans(),
                   cross_attention_needs_flashinfer=st.booleans(), flashinfer_available=st.booleans(),
                   cuda=cudas)


@given(any_capability, traits)
def test_the_attention_default_has_a_kernel_for_the_device(device, tr):
    d = attention.default_backend(resolve(device), tr)
    for phase, name in (("prefill", d.prefill), ("decode", d.decode)):
        verdict = catalog.choice_runs("attention", name, device, tr.cuda, tr.kind, phase)
        assert verdict is not None and verdict.runs, (device, tr, d)


@given(any_capability, st.sampled_from(dsa.KV_CACHE_DTYPES), st.sampled_from(["", dsa.GLM_DSA_ARCH]), cudas)
def test_dsa_backends_have_a_kernel_for_the_device_or_are_tilelang(device, kv, arch, cuda):
    d = dsa.split_backends(resolve(device), kv, arch, cuda)
    pair = (d.prefill, d.decode)
    if pair == (None, None):  # no backend only where no DSA choice of the catalog runs
        assert not catalog.runnable("dsa", catalog.known_choices("dsa"), device, cuda), (device, d)
    elif pair != (dsa.PORTABLE, dsa.PORTABLE):
        assert all(catalog.choice_runs("dsa", b, device, cuda).runs for b in pair), (device, d)


@given(any_capability, st.sampled_from(sorted(TOPOLOGIES)), st.integers(2, 16), st.integers(1, 4))
def test_collective_kernels_have_a_build_for_the_device(device, topo, ws, nnodes):
    res = resolve(device)
    fusion = collectives.allreduce_fusion(res, TOPOLOGIES[topo], ws, nnodes)
    if fusion.enabled:
        assert catalog.choice_runs("fusion", fusion.backend, device).runs
    symm = collectives.torch_symm_mem(res, TOPOLOGIES[topo], ws)
    if symm.enabled:
        assert catalog.choice_runs("symm_mem", symm.algorithm, device).runs


def test_family_fallback_lends_preferences_not_kernels():
    """10.5 (family of 10.3): trtllm-gen's sm_100f cubins run there, FA4's CuTe targets do not."""
    res = resolve("10.5")
    assert res.match == "family"
    assert attention.default_backend(res, attention.ModelTraits()).prefill == "trtllm_mha"
    assert not attention.check_backend(res, "fa4").valid
    assert dsa.split_backends(res, "fp8_e4m3").prefill == "trtllm"


def test_a_mixed_node_needs_a_build_for_every_gpu():
    """9.0 + 10.0 in one node: fa3's sm_90a build does not run on the 10.0 GPU."""
    from sglang_arch.arch import node_resolution

    res = node_resolution([cc("9.0"), cc("10.0")])
    assert res.identities == (cc("9.0"), cc("10.0"))
    assert attention.check_backend(res, "fa3").valid is False
    assert "has no build for 10.0" in attention.check_backend(res, "fa3").reason
    assert attention.default_backend(res, attention.ModelTraits()).prefill == "flashinfer"
    assert resolve("9.0").identities == (cc("9.0"),)
