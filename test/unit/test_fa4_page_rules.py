"""FA4's page size (arch/policies/attention.py ``fa4_page_size``; glue/attention.py
``fa4_page_size`` over stand-in SGLang modules).

Expected values are written here from their sources, not imported from the registry:
SGLang 0.5.23 ``srt/arg_groups/overrides.py`` ``_fa4_page_constraint`` (FA4 as any backend,
non-MLA, EAGLE top-k <= 1, ``is_sm100``: page size 128, DiffusionGemma 1); FA4's interface
(sglang/kernels/ops/attention/flash_attn/cute/interface.py: one tcgen05 kernel, with tile_n
128, for ``arch // 10 in [10, 11]``; TMA paged KV only at page_size == tile_n); the builds
of FA4's paged kernel (CuTe DSL targets 9.0 10.0 10.3 10.7 11.0 12.0 12.1; none on 8.x:
"paged KV not supported on SM 8.0").  11.0 is D21 (docs/differences.md).
"""

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch import resolve
from sglang_arch.arch.policies import attention
from sglang_arch.arch.runtime import SIMULATED_CUDA_DEFAULT, machine
from sglang_arch.integrations.sglang import glue
from sglang_arch.integrations.sglang.glue import attention as ga

from .strategies import capabilities, cuda_versions

FA4_TCGEN05_MAJORS = {10, 11}  # interface.py: elif arch // 10 in [10, 11]: FlashAttentionForwardSm100
FA4_PAGED_BUILDS = {(9, 0), (10, 0), (10, 3), (10, 7), (11, 0), (12, 0), (12, 1)}
# tier -> upstream's answer for a plain MHA model on FA4 (is_sm100: major 10), D21 on 11.0
UPSTREAM = {"7.0": None, "7.5": None, "8.0": None, "8.6": None, "8.7": None, "8.9": None, "9.0": None,
            "10.0": 128, "10.3": 128, "10.7": 128, "11.0": None, "12.0": None, "12.1": None}
D21 = {"11.0": 128}


def expected(cap, kind, topk, diffusion):
    if kind == "mla" or topk > 1:
        return None
    if cap.major not in FA4_TCGEN05_MAJORS or cap.as_tuple() not in FA4_PAGED_BUILDS:
        return None
    return 1 if diffusion else 128


@given(cap=capabilities, kind=st.sampled_from(["mha", "mla"]), topk=st.integers(0, 8), diffusion=st.booleans(),
       cuda=cuda_versions)
def test_page_size_is_set_only_where_fa4s_tcgen05_kernel_runs(cap, kind, topk, diffusion, cuda):
    d = attention.fa4_page_size(resolve(cap), kind, topk, diffusion, cuda)
    assert d.page_size == expected(cap, kind, topk, diffusion), (cap, d)
    assert d.reason


@pytest.mark.parametrize("tier", sorted(UPSTREAM))
def test_exact_tiers_are_upstreams_rule_but_d21(tier):
    assert resolve(tier).match == "exact"
    d = attention.fa4_page_size(resolve(tier))
    assert d.page_size == D21.get(tier, UPSTREAM[tier]), (tier, d)
    assert d.reason.startswith(f"tier {tier} (exact)")
    for kind, topk in (("mla", 0), ("mha", 2)):  # arms that depend on no GPU
        assert attention.fa4_page_size(resolve(tier), kind, topk).page_size is None


def test_reasons_say_why():
    assert "TMA" in attention.fa4_page_size(resolve("10.0")).reason
    assert "head-dim-256" in attention.fa4_page_size(resolve("11.0")).reason
    assert "DiffusionGemma" in attention.fa4_page_size(resolve("10.0"), diffusion=True).reason
    assert "no tcgen05 kernel" in attention.fa4_page_size(resolve("9.0")).reason
    assert "fa4_cute has no build for 10.5" in attention.fa4_page_size(resolve("10.5")).reason
    assert "MLA" in attention.fa4_page_size(resolve("10.0"), "mla").reason
    assert "top-k 4" in attention.fa4_page_size(resolve("10.0"), eagle_topk=4).reason


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="invalid model kind 'gqa'"):
        attention.fa4_page_size(resolve("10.0"), "gqa")


# --- the glue: _fa4_page_constraint's answer ------------------------------------------


class Log:
    def __init__(self):
        self.lines = []

    def warning(self, msg, *args):
        self.lines.append(msg % args)


@pytest.fixture
def sglang(monkeypatch):
    """Routes ``capability`` (None: no NVIDIA GPU) and stands in SGLang's modules the glue reads."""
    import sys
    import types

    monkeypatch.setattr(glue, "_warned", set())
    log = Log()

    def use(capability, cuda=True):
        ctx = SimpleNamespace(resolution=None) if capability is None else machine(capability=capability,
                                                                                  cuda=SIMULATED_CUDA_DEFAULT)
        monkeypatch.setattr(glue, "current", lambda: ctx)
        for name, attrs in ((ga._OVERRIDES, dict(use_mla_backend=lambda view: view.mla, logger=log,
                                                 model_config_of=lambda view: view._model_config)),
                            ("sglang.srt.runtime_context",
                             dict(get_platform=lambda: SimpleNamespace(is_cuda=cuda, is_hip=False)))):
            mod = types.ModuleType(name)
            mod.__dict__.update(attrs)
            monkeypatch.setitem(sys.modules, name, mod)
        return log

    return use


def view(backend="fa4", prefill=None, decode=None, mla=False, topk=None, page=1, arch="LlamaForCausalLM"):
    return SimpleNamespace(attention_backend=backend, prefill_attention_backend=prefill,
                           decode_attention_backend=decode, mla=mla, speculative_eagle_topk=topk, page_size=page,
                           _model_config=SimpleNamespace(hf_config=SimpleNamespace(architectures=[arch])))


@pytest.mark.parametrize("cap, page", [("10.0", 128), ("10.3", 128), ("11.0", 128), ("9.0", None), ("12.0", None)])
def test_glue_declares_the_page_size(sglang, cap, page):
    log = sglang(cap)
    assert ga.fa4_page_size(view(page=16)) == ({} if page is None else {"page_size": page})
    assert len(log.lines) == (page is not None)
    if page:
        assert log.lines[0].startswith(f"FA4: changing page_size from 16 to {page} (tier {cap} (exact): ")
        assert log.lines[0].endswith("; sglang_arch.arch).")


@pytest.mark.parametrize("fields", [dict(backend=None, prefill="fa4"), dict(backend=None, decode="fa4")])
def test_glue_takes_fa4_as_the_prefill_or_decode_backend(sglang, fields):
    sglang("10.0")
    assert ga.fa4_page_size(view(**fields)) == {"page_size": 128}


def test_glue_diffusion_gemma_and_the_gpu_free_arms(sglang):
    log = sglang("10.0")
    assert ga.fa4_page_size(view(arch="DiffusionGemmaForBlockDiffusion")) == {"page_size": 1}
    assert log.lines == []  # already 1: nothing changes, nothing logged
    assert ga.fa4_page_size(view(mla=True)) == {}
    assert ga.fa4_page_size(view(topk=2)) == {}
    assert ga.fa4_page_size(view(topk=1, page=128)) == {"page_size": 128}
    assert log.lines == []


@pytest.mark.parametrize("case", ["no fa4", "no gpu", "not cuda"])
def test_glue_leaves_sglang_its_pass(sglang, case):
    log = sglang(None if case == "no gpu" else "10.0", cuda=case != "not cuda")
    assert ga.fa4_page_size(view(backend="flashinfer" if case == "no fa4" else "fa4")) is None
    assert log.lines == []
