"""Hypothesis: input by input, the routed decision equals upstream's own function.

In one interpreter the plugin's hooks are applied; every hooked SGLang function keeps
upstream's original as ``__wrapped__``.  For each generated machine the routed call runs
with the GPU simulated through the registry's override, and upstream's original runs
with the facts SGLang's own probes would compute, given through SGLang's own
``override_platform``.  Where they differ, a documented difference must explain it.
"""

import contextlib
import os

import pytest

pytest.importorskip("sglang", reason="needs the real sglang 0.5.23: pip install -e 'python[serve]'")

from decision_suite import MACHINE, _model_config, _server_args  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sglang_arch.arch import default_registry  # noqa: E402
from sglang_arch.arch.profile import format_version  # noqa: E402

KNOWN = [str(c) for c in default_registry().known]
CUDAS = [(11, 8), (12, 0), (12, 3), (12, 4), (12, 8), (12, 9), (13, 0)]


@pytest.fixture(scope="module")
def sglang_routed():
    os.environ["SGLANG_ARCH_CAPABILITY"] = "9.0"
    from sglang.srt.arg_groups import model_override_base
    from sglang.srt.layers import flashinfer_comm_fusion
    from sglang.srt.plugins.hook_registry import HookRegistry
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import register

    runtime.reset()
    register()
    HookRegistry.apply_hooks()
    yield {"attn": model_override_base.get_default_attn_backend, "fusion": flashinfer_comm_fusion._resolve_backend}
    os.environ.pop("SGLANG_ARCH_CAPABILITY", None)


@contextlib.contextmanager
def machine(cap, cuda, world_size=8, topology="nvswitch", upstream=False):
    from sglang.srt.runtime_context import override_platform
    from sglang_arch.arch import parse_capability, runtime
    from sglang_arch.integrations.sglang.plan import upstream_platform_facts

    facts = dict(MACHINE)
    if upstream:
        facts.update(upstream_platform_facts(parse_capability(cap), cuda))
    else:
        os.environ.update(SGLANG_ARCH_CAPABILITY=cap, SGLANG_ARCH_GPU_COUNT=str(world_size),
                          SGLANG_ARCH_TOPOLOGY=topology, SGLANG_ARCH_CUDA=format_version(cuda))
        runtime.reset()
    with override_platform(**facts):
        yield


def call(fn, *args):
    try:
        return fn(*args)
    except ValueError:
        return "ValueError"


def supported_cuda(cap, cuda):
    profile = default_registry().profile(cap)
    return profile.min_cuda is None or cuda >= profile.min_cuda


model = st.tuples(
    st.booleans(),  # MLA
    st.sampled_from([None, 1, 2, 4]),  # speculative top-k (None: no speculative decoding)
    st.sampled_from([1, 16]),  # page size
    st.booleans(),  # asymmetric K/V
    st.booleans(),  # attention sinks
    st.booleans(),  # Whisper
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.sampled_from(KNOWN), cuda=st.sampled_from(CUDAS), m=model, has_flashinfer=st.booleans())
def test_default_attention_backend_equals_upstream(sglang_routed, cap, cuda, m, has_flashinfer):
    if not supported_cuda(cap, cuda):
        return  # torch built for an older toolkit cannot run on this GPU at all
    mla, topk, page, asym, sinks, whisper = m
    sa = _server_args({"speculative_algorithm": "EAGLE" if topk else None, "speculative_eagle_topk": topk,
                       "page_size": page})
    mc = _model_config({"has_asymmetric_kv": asym, "has_attention_sinks": sinks,
                        "architectures": ["WhisperForConditionalGeneration"] if whisper else ["LlamaForCausalLM"]})
    fn = sglang_routed["attn"]
    from sglang.srt.runtime_context import override_platform

    with machine(cap, cuda), override_platform(has_flashinfer=has_flashinfer):
        routed = call(fn, sa, mla, mc)
    with machine(cap, cuda, upstream=True), override_platform(has_flashinfer=has_flashinfer):
        upstream = call(fn.__wrapped__, sa, mla, mc)
    if cap == "7.0" and upstream == "flashinfer":
        assert routed == "triton"  # D5: FlashInfer needs SM 7.5+
    else:
        assert routed == upstream, (cap, cuda, m, has_flashinfer)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.sampled_from(KNOWN), cuda=st.sampled_from(CUDAS), requested=st.sampled_from(["auto", "trtllm", "mnnvl", "cutedsl"]),
       multi_node=st.booleans(), topology=st.sampled_from(["nvswitch", "nvlink", "pcie-p2p", "pcie"]),
       world_size=st.sampled_from([2, 4, 8]))
def test_fusion_backend_equals_upstream(sglang_routed, cap, cuda, requested, multi_node, topology, world_size):
    if not supported_cuda(cap, cuda):
        return
    fn = sglang_routed["fusion"]
    with machine(cap, cuda, world_size, topology):
        routed = call(fn, requested, multi_node)
    with machine(cap, cuda, world_size, topology, upstream=True):
        upstream = call(fn.__wrapped__, requested, multi_node)
    if cap.startswith("12.") and topology != "pcie" and routed == "trtllm":
        assert upstream == "ValueError"  # D3
    elif topology == "pcie" and upstream == "trtllm":
        assert routed == "ValueError"  # D4
    else:
        assert routed == upstream, (cap, cuda, requested, multi_node, topology)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cap=st.sampled_from(KNOWN), cuda=st.sampled_from(CUDAS))
def test_platform_facts_equal_upstream(sglang_routed, cap, cuda):
    from sglang.srt.runtime_context import get_platform

    names = ["is_sm90", "is_sm100", "is_sm100_or_sm110", "is_sm110", "is_sm120", "is_blackwell",
             "is_hopper_with_cuda_12_3", "device_capability", "device_sm"]
    with machine(cap, cuda):
        routed = {n: getattr(get_platform(), n) for n in names}
    with machine(cap, cuda, upstream=True):
        upstream = {n: getattr(get_platform(), n) for n in names}
    assert routed == upstream
