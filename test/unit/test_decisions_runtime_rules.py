"""``decide``/``explain`` defaults and ``to_dict`` keys (a contract for tools: see the
module docstring of decisions.py), and the runtime's machine and its CUDA version (validate.py's
input limits: test_validate_rules.py).  Found by mutation testing:
docs/mutation.md."""

import sys
import types

import pytest
from sglang_arch.arch import TOPOLOGIES, resolve, runtime
from sglang_arch.arch import validate as v
from sglang_arch.arch.decisions import decide, explain
from sglang_arch.arch.policies.attention import ModelTraits
from sglang_arch.arch.profile import format_version


@pytest.fixture
def clean_env(monkeypatch):
    fake = types.ModuleType("torch")
    fake.version = types.SimpleNamespace(cuda=None)  # a CPU build of torch
    monkeypatch.setitem(sys.modules, "torch", fake)
    yield
    runtime.reset()


def test_decide_defaults_to_one_gpu_on_one_node():
    d = decide(resolve("9.0"))
    assert (d.world_size, d.nnodes, d.topology.name) == (1, 1, "single")


def test_decide_keeps_world_size_and_node_count():
    d = decide(resolve("10.0"), TOPOLOGIES["nvswitch"], world_size=8, nnodes=2)
    assert (d.world_size, d.nnodes) == (8, 2)
    assert "2 nodes" in d.fusion.reason  # the node count reaches the fusion decision


def test_decide_mha_and_mla_whatever_kind_the_traits_name():
    # tier 10.0 prefers trtllm_mha for MHA and flashinfer for MLA
    for kind in ("mha", "mla"):
        d = decide(resolve("10.0"), traits=ModelTraits(kind=kind))
        assert (d.mha.prefill, d.mla.prefill) == ("trtllm_mha", "flashinfer")


def test_explain_defaults_and_cuda():
    d = explain("9.0")
    assert (d.world_size, d.nnodes, d.topology.name) == (1, 1, "single")
    # fa3 on Hopper needs CUDA 12.3
    assert explain("9.0", cuda=(12, 2)).mha.prefill == "flashinfer"
    assert explain("9.0", cuda=(12, 3)).mha.prefill == "fa3"


def test_to_dict_keys():
    d = explain("9.0", world_size=8, topology="nvswitch", nnodes=2).to_dict()
    assert (d["name"], d["world_size"], d["nnodes"]) == ("Hopper", 8, 2)
    assert d["collectives"]["custom_allreduce"]["table"] == "sm90"
    assert d["attention"]["mha"] == {"prefill": "fa3", "decode": "fa3", "reason": "tier 9.0 prefers fa3",
                                     "dropped": []}
    assert set(d["attention"]["mla"]) == {"prefill", "decode", "reason", "dropped"}
    assert set(d["attention"]) == {"mha", "mla", "deterministic", "dsa", "vision", "hybrid_linear_draft",
                                   "fa4_page_size", "dsv4_attention", "minicpm_sparse",
                                   "minimax_m3_nvfp4"}
    # FA4 on Hopper: no tcgen05 kernel, the page size is kept (overrides.py _fa4_page_constraint: is_sm100)
    assert d["attention"]["fa4_page_size"]["page_size"] is None
    assert set(d["attention"]["deterministic"]["mha"]) == {"backend", "upstream_rule", "reason", "dropped"}
    assert set(d["collectives"]["allreduce_fusion"]) == {"enabled", "backend", "reason", "dropped", "evidence"}


def test_explain_lists_the_candidates_each_decision_dropped_and_why():
    """9.5 (family of 9.0): the tier prefers FA3, whose only Hopper build is sm_90a."""
    d = explain("9.5", world_size=8, topology="nvswitch").to_dict()
    fa3_gone = "fa3_sm90 has no build for 9.5 (builds: sm_90a)"
    assert d["attention"]["mha"]["prefill"] == "flashinfer"
    assert [x["choice"] for x in d["attention"]["mha"]["dropped"]] == ["fa3"]
    assert fa3_gone in d["attention"]["mha"]["dropped"][0]["reason"]
    assert d["attention"]["vision"]["backend"] == "triton_attn"
    assert d["attention"]["vision"]["dropped"][0]["choice"] == "fa3"
    assert d["attention"]["deterministic"]["mha"] == {
        "backend": "flashinfer", "upstream_rule": "fa3",
        "reason": d["attention"]["deterministic"]["mha"]["reason"],
        "dropped": [{"choice": "fa3", "reason": d["attention"]["deterministic"]["mha"]["dropped"][0]["reason"]}]}
    assert fa3_gone in d["attention"]["deterministic"]["mha"]["dropped"][0]["reason"]
    # 13.0 with P2P: the tier's trtllm fusion dropped, its comm kernels are built for majors 9, 10, 12
    fusion = explain("13.0", world_size=8, topology="pcie-p2p").to_dict()["collectives"]["allreduce_fusion"]
    assert fusion["enabled"] is False
    assert fusion["dropped"] == [{"choice": "trtllm", "reason": "flashinfer_trtllm_comm has no build for 13.0 "
                                                                 "(builds: jit:9.x, jit:10.x, jit:12.x)"}]
    # trtllm on a topology without P2P: dropped for the topology
    pcie = explain("12.0", world_size=8, topology="pcie").to_dict()["collectives"]["allreduce_fusion"]
    assert pcie["dropped"] == [{"choice": "trtllm", "reason": "needs peer-to-peer access; pcie has none"}]


def test_explain_prints_the_fa4_page_size(capsys):
    """FA4's tcgen05 kernel (10.x, 11.x) loads paged KV by TMA at page size 128 (D21 on 11.0)."""
    from sglang_arch import cli

    assert explain("11.0").to_dict()["attention"]["fa4_page_size"]["page_size"] == 128
    assert cli.main(["explain", "10.0", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (at,) = [i for i, x in enumerate(lines) if x.startswith("FA4 page size")]
    assert lines[at].split()[3] == "128" and "TMA" in " ".join(lines[at + 1:at + 4])
    assert cli.main(["explain", "12.0", "--all"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("FA4 page size")]
    assert line.split()[3] == "kept"


def test_explain_text_prints_each_dropped_candidate_under_its_decision(capsys):
    from sglang_arch import cli

    assert cli.main(["explain", "9.5", "--world-size", "8", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("vision attention"))
    assert "triton_attn" in lines[at]
    assert lines[at + 1].strip().startswith("dropped fa3: fa3_sm90 has no build for 9.5")


def test_format_version():
    assert format_version(None) is None
    assert format_version((12, 8)) == "12.8"


def test_no_gpu_context_refuses_decisions():
    ctx = runtime.MachineContext(node=None, resolution=None, cuda=None, facts={})
    with pytest.raises(RuntimeError) as e:
        ctx.attention_default(ModelTraits())
    assert str(e.value) == "no NVIDIA GPU: the registry has nothing to decide"


def test_cuda_version_without_torch_cuda(clean_env):
    assert runtime._cuda_version(True) == (13, 0)  # simulated GPU: SIMULATED_CUDA_DEFAULT
    assert runtime._cuda_version(False) is None


def test_simulated_machine(clean_env):
    m = runtime.machine(capability="9.0", topology="nvlink", gpu_count=8, cuda=runtime.SIMULATED_CUDA_DEFAULT)
    assert m.topology.name == "nvlink"
    assert m.cuda == (13, 0)


def test_machine_facts(clean_env):
    # sglang's is_sm90_supported needs CUDA 12.3; the SM100 family 12.8
    m = runtime.machine(capability="9.0", gpu_count=1, cuda=(12, 3))
    assert m.facts["is_sm90"] is True and m.facts["is_hopper_with_cuda_12_3"] is True
    assert m.facts["is_sm100"] is False
    assert (m.facts["device_capability"], m.facts["device_sm"]) == ((9, 0), 90)


def test_current_is_built_once(monkeypatch):
    made = []
    monkeypatch.setattr(runtime, "machine", lambda: made.append(object()) or made[-1])
    runtime.reset()
    try:
        first = runtime.current()
        assert runtime.current() is first and len(made) == 1
    finally:
        runtime.reset()


# sglang 0.5.23 all_reduce_utils.py TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES[9], in MiB
HOPPER_SYMM_MEM_MIB = {2: 64, 4: 64, 6: 128, 8: 128}


def test_symm_mem_table_is_upstreams_for_the_devices_major(clean_env):
    m = runtime.machine(capability="9.0", topology="nvswitch", gpu_count=8, cuda=runtime.SIMULATED_CUDA_DEFAULT)
    assert m.symm_mem_table() == {9: {ws: mib * v.MIB for ws, mib in HOPPER_SYMM_MEM_MIB.items()}}


def test_symm_mem_table_lists_only_enabled_world_sizes(clean_env):
    # PCIe without peer-to-peer access: neither multimem nor two-shot
    assert runtime.machine(capability="9.0", topology="pcie", gpu_count=8, cuda=runtime.SIMULATED_CUDA_DEFAULT).symm_mem_table() == {9: {}}


def test_symm_mem_table_without_a_gpu_is_empty():
    assert runtime.MachineContext(node=None, resolution=None, cuda=None, facts={}).symm_mem_table() == {}


def test_attention_default_uses_the_traits_given(clean_env):
    # fa3 on Hopper needs CUDA 12.3 (sglang 0.5.23 model_override_base.py)
    m = runtime.machine(capability="9.0", gpu_count=1, cuda=runtime.SIMULATED_CUDA_DEFAULT)
    d = m.attention_default(ModelTraits(cuda=(12, 2)))
    assert (d.prefill, d.decode) == ("flashinfer", "flashinfer")
    assert "fa3" in d.reason and "CUDA >= 12.3" in d.reason
    assert m.attention_default(ModelTraits(cuda=(12, 3))).prefill == "fa3"


def test_check_backend_uses_the_machines_cuda(clean_env):
    # fa3 on Hopper needs CUDA 12.3
    old = runtime.machine(capability="9.0", gpu_count=1, cuda=(12, 2)).check_backend("fa3", "mha", "prefill")
    assert old.valid is False
    assert old.reason.startswith("fa3 cannot run MHA prefill on 9.0")
    assert "CUDA >= 12.3" in old.reason
    new = runtime.machine(capability="9.0", gpu_count=1, cuda=(12, 3)).check_backend("fa3", "mha", "prefill")
    assert new.valid is True and new.reason.startswith("fa3 runs on 9.0")


def test_check_backend_passes_kind_and_phase(clean_env):
    # cutedsl_mla: MLA decode only, on the SM10x family with tcgen05
    m = runtime.machine(capability="10.0", gpu_count=1, cuda=(12, 8))
    assert m.check_backend("cutedsl_mla", "mla", "decode").valid is True
    prefill = m.check_backend("cutedsl_mla", "mla", "prefill")
    assert prefill.valid is False and prefill.reason.endswith("has no kernel for MLA prefill")
    mha = m.check_backend("cutedsl_mla", "mha", "decode")
    assert mha.valid is False and "MHA decode" in mha.reason


def test_explain_prints_deepseek_v4s_auto_attention_backend(capsys):
    """MegaAttention is the SM100 family's default where sgl-flash-mla has its SASS (sm_100a,
    sm_103a, sm_107a); 10.5 resolves to the 10.3 tier but has no build: flashmla."""
    from sglang_arch import cli

    assert explain("10.3").to_dict()["attention"]["dsv4_attention"]["auto"] == "flashmla_mega"
    assert explain("9.0").to_dict()["attention"]["dsv4_attention"]["auto"] == "flashmla"
    d = explain("10.5").to_dict()["attention"]["dsv4_attention"]
    assert d["auto"] == "flashmla" and "no build for 10.5" in d["reason"]
    assert cli.main(["explain", "10.0", "--all"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("DeepSeek-V4.1 auto")]
    assert line.split()[2] == "flashmla_mega"
