"""FA4's page size: the plugin's hook against SGLang 0.5.23's own ``_fa4_page_constraint``.

Upstream's side is the pass as SGLang defines it (``__wrapped__`` when the plugin is
applied), run under SGLang's own ``override_platform`` with the facts its probes compute
for the GPU.  The routed side is the plugin's AROUND hook over that same function, with
the registry routed to the tier.  On every exact tier but 11.0 the two answer alike for
every drawn setting; on 11.0 (docs/differences.md D21) the routed pass answers what
upstream answers on 10.0, because FA4 runs the same kernel for both majors: the premise
is read from the installed FA4 interface, not assumed.
"""

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

PATH = "sglang.srt.arg_groups.overrides._fa4_page_constraint"
D21 = {"11.0": "10.0"}  # tier -> the tier whose upstream answer the routed pass gives
# The oldest torch CUDA that targets each tier (as test_linear_attention_equivalence.py).
MIN_CUDA = {"7.0": (9, 0), "7.5": (10, 0), "8.0": (11, 0), "8.6": (11, 1), "8.7": (11, 4), "8.9": (11, 8),
            "9.0": (11, 8), "10.0": (12, 8), "10.3": (12, 9), "10.7": (13, 0), "11.0": (13, 0), "12.0": (12, 8),
            "12.1": (12, 9)}
CUDAS = ((11, 8), (12, 3), (12, 8), (12, 9), (13, 0))
BACKENDS = (None, "fa4", "fa3", "flashinfer", "triton", "trtllm_mha")
ARCHS = ("LlamaForCausalLM", "DiffusionGemmaForBlockDiffusion")

settings_ = st.fixed_dictionaries({
    "attention_backend": st.sampled_from(BACKENDS),
    "prefill_attention_backend": st.sampled_from(BACKENDS),
    "decode_attention_backend": st.sampled_from(BACKENDS),
    "mla": st.booleans(),
    "speculative_eagle_topk": st.sampled_from((None, 0, 1, 2, 4)),
    "page_size": st.sampled_from((1, 16, 64, 128)),
    "arch": st.sampled_from(ARCHS),
})


@pytest.fixture(scope="module")
def sides():
    return upstream_and_hook(PATH)


def _view(s):
    from sglang.srt.configs.model_config import AttentionArch

    model_config = SimpleNamespace(hf_config=SimpleNamespace(architectures=[s["arch"]]),
                                   attention_arch=AttentionArch.MLA if s["mla"] else AttentionArch.MHA)
    return SimpleNamespace(model_path=f"/fa4/{s['arch']}", _model_config=model_config,
                           **{k: v for k, v in s.items() if k not in ("mla", "arch")})


_machines = {}


def _upstream(own, tier, cuda, s):
    from sglang.srt.runtime_context import override_platform

    with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(resolve(tier).requested, cuda)):
        return own(_view(s))


def _routed(hook, own, tier, cuda, s):
    from sglang.srt.runtime_context import override_platform

    ctx = _machines.get((tier, cuda)) or _machines.setdefault((tier, cuda), runtime.machine(capability=tier, cuda=cuda))
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(glue, "current", lambda: ctx)
        with override_platform(**SIMULATED_MACHINE):
            return hook(own, _view(s))
    finally:
        mp.undo()


@settings(max_examples=400, deadline=None)
@given(tier=st.sampled_from(TIERS), cuda=st.sampled_from(CUDAS), s=settings_)
def test_on_every_exact_tier_the_hook_is_upstreams_function(sides, tier, cuda, s):
    assert resolve(tier).match == "exact"
    cuda = max(cuda, MIN_CUDA[tier])
    own, hook = sides
    routed = _routed(hook, own, tier, cuda, s)
    assert routed == _upstream(own, D21.get(tier, tier), max(cuda, MIN_CUDA[D21.get(tier, tier)]), s), (tier, s)


def test_d21_on_11_0_fa4_sets_128_where_upstream_keeps_the_page_size(sides):
    own, hook = sides
    s = dict(attention_backend="fa4", prefill_attention_backend=None, decode_attention_backend=None, mla=False,
             speculative_eagle_topk=None, page_size=1, arch="LlamaForCausalLM")
    assert _upstream(own, "11.0", (13, 0), s) == {}
    assert _routed(hook, own, "11.0", (13, 0), s) == {"page_size": 128}
    # and nowhere else among the exact tiers does the routed pass differ (the property above)
    assert _upstream(own, "10.0", (13, 0), s) == {"page_size": 128}


def _fa4_tcgen05_majors():
    """The majors FA4 (SGLang's vendored flash_attn.cute) builds FlashAttentionForwardSm100 for,
    read from the installed interface: the ``elif arch // 10 in [...]`` arm that builds it."""
    spec = importlib.util.find_spec("sglang")
    source = (Path(spec.origin).parent / "kernels/ops/attention/flash_attn/cute/interface.py").read_text()
    arms = list(re.finditer(r"elif arch // 10 in \[([0-9, ]+)\]:", source))
    building = [m for m in arms if "FlashAttentionForwardSm100" in source[m.end():m.end() + 4000].split("elif arch")[0]]
    assert len(building) == 1, "the FA4 interface still has one arm that builds the SM100 kernel"
    majors = {int(x) for x in building[0].group(1).split(",")}
    # its paged KV is loaded by TMA only at page_size == tile_n, and tile_n defaults to 128
    assert "paged_kv_non_tma=page_size not in [None, tile_n]" in source
    assert "fwd_cfg = FwdConfig(128, 128, True, True)" in source
    return majors


def test_fa4_runs_one_kernel_for_majors_10_and_11():
    assert _fa4_tcgen05_majors() == {10, 11}


@settings(max_examples=200, deadline=None)
@given(major=st.integers(0, 30), minor=st.integers(0, 9))
def test_where_the_hook_sets_128_fa4s_tcgen05_kernel_serves_the_device(sides, major, minor):
    """Over every capability: 128 exactly where FA4 has a kernel for the device and that
    kernel is its SM100 (tcgen05) one, as FA4's own interface says."""
    own, hook = sides
    s = dict(attention_backend="fa4", prefill_attention_backend=None, decode_attention_backend=None, mla=False,
             speculative_eagle_topk=None, page_size=16, arch="LlamaForCausalLM")
    cap = f"{major}.{minor}"
    try:
        routed = _routed(hook, own, cap, (13, 0), s)
    finally:
        _machines.clear()
        runtime.reset()
    runs = catalog.choice_runs("attention", "fa4", Capability(major, minor), (13, 0), "mha").runs
    assert (routed == {"page_size": 128}) == (runs and major in _fa4_tcgen05_majors()), (cap, routed)
    assert routed in ({}, {"page_size": 128}), routed
