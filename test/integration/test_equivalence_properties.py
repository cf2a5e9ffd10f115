"""Hypothesis: input by input, the routed decision equals upstream's own function.

Two sides that share no process, cache or environment:

- upstream: SGLang 0.5.23 alone, in a process of its own with ``SGLANG_ARCH_DISABLE=1``
  (``upstream_oracle.py``): its own probes see the simulated device through torch's
  device queries and answer every platform fact; its own attention and fusion functions
  run on those facts.  It answers the whole finite domain of the properties once per
  session.
- routed: this process, with the plugin's hooks applied and the GPU simulated through
  the registry's variables (set per test with ``monkeypatch``, so nothing outlives it).

Where they differ, a documented difference (docs/differences.md) must explain it.  Draws
are weighted toward what decides something; a torch CUDA that cannot run on the GPU at
all is never drawn (the capability decides which CUDA versions are drawn, so no example
is discarded; ``assume`` guards the rule).
"""

import importlib.util

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from hypothesis import HealthCheck, assume, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from upstream_oracle import (  # noqa: E402
    CUDAS,
    FACT_CAPS,
    FACTS,
    FUSION_REQUESTS,
    KNOWN,
    MODELS,
    model_config,
    model_key,
    server_args,
)

# KNOWN: the tiers SGLang 0.5.23 decides for; CUDAS; FACT_CAPS (upstream_oracle.py).
# The oldest torch CUDA that can target each (CUDA release notes: sm_70/75 9.0/10.0, sm_80
# 11.0, sm_86 11.1, sm_87 11.4, sm_89/90 11.8, sm_100/120 12.8, sm_103/121 12.9,
# sm_110 (and SGLang's sm107 table) 13.0).
MIN_CUDA = {"7.0": (9, 0), "7.5": (10, 0), "8.0": (11, 0), "8.6": (11, 1), "8.7": (11, 4), "8.9": (11, 8),
            "9.0": (11, 8), "10.0": (12, 8), "10.3": (12, 9), "10.7": (13, 0), "11.0": (13, 0), "12.0": (12, 8),
            "12.1": (12, 9)}
TOPOLOGIES = ["nvswitch", "nvlink", "pcie-p2p", "pcie"]
MACHINE = {"is_cuda": True, "is_hip": False, "is_npu": False, "is_xpu": False, "is_musa": False, "is_mps": False}


@pytest.fixture(scope="session")
def upstream(upstream_answers):
    return upstream_answers


@pytest.fixture(scope="module")
def sglang_routed():
    mp = pytest.MonkeyPatch()
    mp.setenv("SGLANG_ARCH_CAPABILITY", "9.0")
    from sglang.srt.arg_groups import model_override_base
    from sglang.srt.layers import flashinfer_comm_fusion
    from sglang.srt.plugins.hook_registry import HookRegistry
    from sglang.srt.runtime_context import get_platform
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import register

    runtime.reset()
    register()
    HookRegistry.apply_hooks()
    yield {"attn": model_override_base.get_default_attn_backend, "fusion": flashinfer_comm_fusion._resolve_backend,
           "platform": get_platform}
    mp.undo()
    runtime.reset()


@pytest.fixture
def routed_machine(monkeypatch):
    """Simulate a machine for the routed side; undone after the test."""
    import contextlib

    from sglang.srt.runtime_context import override_platform
    from sglang_arch.arch import runtime

    @contextlib.contextmanager
    def machine(cap, cuda, world_size=8, topology="nvswitch", **facts):
        for name, value in (("SGLANG_ARCH_CAPABILITY", cap), ("SGLANG_ARCH_GPU_COUNT", str(world_size)),
                            ("SGLANG_ARCH_TOPOLOGY", topology), ("SGLANG_ARCH_CUDA", f"{cuda[0]}.{cuda[1]}")):
            monkeypatch.setenv(name, value)
        runtime.reset()
        with override_platform(**MACHINE, **facts):
            yield

    yield machine
    runtime.reset()


def call(fn, *args):
    try:
        return fn(*args)
    except ValueError:
        return "ValueError"


# Tiers where SGLang's answer depends on the tier (SM90, SM10x, SM12x) are drawn three
# times as often as the rest.
DECIDING = [c for c in KNOWN if c.split(".")[0] in ("9", "10", "12")]
# A known tier and a CUDA that can run on it: the tier decides which versions are drawn.
runnable = st.sampled_from(KNOWN + DECIDING * 2).flatmap(
    lambda cap: st.tuples(st.just(cap), st.sampled_from([c for c in CUDAS if c >= MIN_CUDA[cap]])))
# A third anything, a third known tiers, a third every capability of the majors SGLang's
# facts name (9-12: known or not).
fact_caps = st.one_of(st.sampled_from([f"{a}.{b}" for a, b in FACT_CAPS]), st.sampled_from(KNOWN),
                      st.sampled_from([f"{a}.{b}" for a, b in FACT_CAPS if 9 <= a <= 12]))
model = st.sampled_from(MODELS)

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@settings(max_examples=300, **SETTINGS)
@given(machine=runnable, m=model, has_flashinfer=st.booleans())
def test_default_attention_backend_equals_upstream(sglang_routed, routed_machine, upstream, machine, m, has_flashinfer):
    cap, cuda = machine
    assume(cuda >= MIN_CUDA[cap])
    mla, topk, page, asym, sinks, whisper = m
    with routed_machine(cap, cuda, has_flashinfer=has_flashinfer):
        routed = call(sglang_routed["attn"], server_args(topk, page), mla, model_config(asym, sinks, whisper))
    up = upstream["attention"][f"{cap}|{cuda[0]}.{cuda[1]}|{model_key(m)}|{has_flashinfer}"]
    event(f"upstream: {up}")
    if cap == "7.0" and up == "flashinfer":
        assert routed == "triton"  # D5: FlashInfer needs SM 7.5+
        event("D5")
    else:
        assert routed == up, (cap, cuda, m, has_flashinfer)


@settings(max_examples=300, **SETTINGS)
@given(machine=runnable, requested=st.sampled_from(FUSION_REQUESTS), multi_node=st.booleans(),
       topology=st.sampled_from(TOPOLOGIES), world_size=st.sampled_from([2, 3, 4, 6, 8, 16]))
def test_fusion_backend_equals_upstream(sglang_routed, routed_machine, upstream, machine, requested, multi_node,
                                        topology, world_size):
    cap, cuda = machine
    assume(cuda >= MIN_CUDA[cap])
    with routed_machine(cap, cuda, world_size, topology):
        routed = call(sglang_routed["fusion"], requested, multi_node)
    up = upstream["fusion"][f"{cap}|{cuda[0]}.{cuda[1]}|{requested}|{multi_node}"]
    event(f"upstream: {up}")
    if cap.startswith("12.") and topology != "pcie" and routed == "trtllm":
        assert up == "ValueError"  # D3
        event("D3")
    elif topology == "pcie" and up == "trtllm":
        assert routed == "ValueError"  # D4
        event("D4")
    elif topology in ("pcie", "pcie-p2p", "nvlink") and up == "mnnvl":
        assert routed == "ValueError"  # D9: mnnvl needs NVLink multicast
        event("D9")
    else:
        assert routed == up, (cap, cuda, requested, multi_node, topology)


@settings(max_examples=300, **SETTINGS)
@given(cap=fact_caps, cuda=st.sampled_from(CUDAS))
def test_platform_facts_equal_upstream(sglang_routed, routed_machine, upstream, cap, cuda):
    """Identity facts equal SGLang's own probes on every capability, known or not."""
    with routed_machine(cap, cuda):
        platform = sglang_routed["platform"]()
        routed = {n: getattr(platform, n) for n in FACTS}
    routed = {n: list(v) if isinstance(v, tuple) else v for n, v in routed.items()}
    up = upstream["facts"][f"{cap}|{cuda[0]}.{cuda[1]}"]
    event("known tier" if cap in KNOWN else "unknown capability")
    event(f"is_sm* true: {sorted(n for n in FACTS[:7] if up[n]) or 'none'}")
    assert routed == up, (cap, cuda)


def test_the_oracle_is_sglang_alone(upstream):
    """Its facts come from SGLang's probes, not from a rule of this suite or the registry:
    the ones this suite would write down must agree, cell by cell, with SGLang's answers."""
    facts = upstream["facts"]
    assert facts["12.0|12.8"]["is_sm120"] is True and facts["12.0|12.7"]["is_sm120"] is False
    assert facts["13.0|13.0"]["is_sm120"] is False and facts["13.0|13.0"]["device_capability"] == [13, 0]
    assert facts["9.0|12.3"]["is_sm90"] is True and facts["9.0|12.2"]["is_sm90"] is False
    assert facts["10.7|13.0"]["is_sm100"] is True and facts["11.0|12.8"]["is_sm110"] is True
    assert len(facts) == len(FACT_CAPS) * len(CUDAS)
