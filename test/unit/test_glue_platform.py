"""The glue takes the machine from SGLang's platform context (no SGLang needed).

SGLang's unit tests describe a GPU with ``override_platform(is_sm90=..., ...)``; inside
such a scope ``routed_context()`` must decide for the described GPU, so the registry and
SGLang's own code answer for the same machine.  SGLang's ``runtime_context`` is stood
in for by a module with the same shape: ``get_platform()`` returning an object whose
``_overrides`` slot holds the overridden facts.
"""

import sys
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch import runtime
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies.platform import platform_facts
from sglang_arch.arch.registry import resolve
from sglang_arch.integrations.sglang import glue
from sglang_arch.integrations.sglang.glue import ArchDecisionError, fusion, platform

NO_GPU = runtime.described(runtime.machine(capability="9.0", cuda=(13, 0)), None)


class _Platform:
    """SGLang 0.5.23's PlatformContext, reduced to its override table."""

    __slots__ = ("_overrides",)

    def __init__(self):
        self._overrides = {}


@pytest.fixture
def sglang_platform(monkeypatch):
    """A stand-in ``sglang.srt.runtime_context``; returns its override table."""
    context = _Platform()
    module = types.ModuleType(glue._RUNTIME_CONTEXT)
    module.get_platform = lambda: context
    monkeypatch.setitem(sys.modules, glue._RUNTIME_CONTEXT, module)
    monkeypatch.setattr(glue, "_described", {})
    return context._overrides


def _on(monkeypatch, device):
    monkeypatch.setattr(glue, "current", lambda: device)
    return device


def _described(overrides, device=NO_GPU):
    return glue.platform_capability(device, overrides)


# --- which GPU the platform context describes -------------------------------------------


@pytest.mark.parametrize("overrides, capability", [
    ({"is_sm100": True}, "10.0"),
    ({"is_sm100": False, "is_sm90": True}, "9.0"),
    ({"is_sm120": True}, "12.0"),
    ({"is_sm110": True, "is_blackwell": True}, "11.0"),
    ({"device_capability": (8, 9)}, "8.9"),
    ({"device_sm": 103}, "10.3"),
    ({"is_sm100": True, "device_capability": (10, 3)}, "10.3"),  # the exact one of that major
    ({"is_sm90": True, "device_capability": (10, 0)}, "9.0"),  # the flag SGLang decides by wins
    ({"is_sm90": True, "is_sm100": True}, None),  # no one GPU is both
    ({"is_sm100": True, "is_hip": True}, None),  # not an NVIDIA GPU
    ({"is_sm90": True, "is_cuda": False}, None),
])
def test_facts_that_name_a_gpu_describe_it(overrides, capability):
    assert _described(overrides) == (True, capability)


@pytest.mark.parametrize("overrides", [
    {"is_sm100": False, "is_sm90": False},  # SGLang's "pre-SM90 / post-SM10x" on a CPU host
    {"is_cuda": True, "is_hip": False},
    {"has_amx": True, "has_flashinfer": False},
    {"device_capability": (None, None)},  # SGLang's own answer without a GPU
    {"device_capability": (-1, 0)},
])
def test_facts_that_name_no_gpu_leave_the_device(overrides):
    assert _described(overrides) == (False, None)


def test_the_device_keeps_its_exact_capability_and_loses_it_to_a_false_fact():
    h100, b300 = runtime.machine(capability="9.0", cuda=runtime.SIMULATED_CUDA_DEFAULT), runtime.machine(capability="10.3", cuda=runtime.SIMULATED_CUDA_DEFAULT)
    assert _described({"is_sm100": True}, b300) == (False, None)  # it is one already
    assert _described({"is_sm90": True, "is_sm100": False}, h100) == (False, None)
    assert _described({"is_sm90": True}, b300) == (True, "9.0")
    # SGLang's "neither SM90 nor SM10x" on a Hopper host: no GPU the facts identify
    assert _described({"is_sm90": False, "is_sm100": False}, h100) == (True, None)
    assert _described({"is_sm120": False}, h100) == (False, None)  # not its major


@given(st.builds(Capability, st.integers(0, 20), st.integers(0, 9)))
def test_the_registry_facts_of_a_gpu_describe_its_major_back(capability):
    """One source answers both: SGLang's tests override the facts the registry itself
    gives a GPU (known or not); handed back, they describe that GPU's major, and the
    device itself where the GPU has no ``is_sm*`` fact (before SM90, after SM12x)."""
    facts = platform_facts(resolve(capability), (13, 0))
    overrides = {name: facts[name] for name in glue.MAJOR_FACTS}
    changed, described = _described(overrides)
    if capability.major in glue.MAJOR_FACTS.values():
        assert changed and Capability(*map(int, described.split("."))).major == capability.major
    else:  # no is_sm* fact of its own: the all-false facts describe nothing
        assert (changed, described) == (False, None)


# --- routed_context and the described machine --------------------------------------------


def test_outside_an_override_the_machine_is_the_device(monkeypatch, sglang_platform):
    device = _on(monkeypatch, runtime.machine(capability="12.0", cuda=runtime.SIMULATED_CUDA_DEFAULT))
    assert glue.routed_context() is device
    monkeypatch.delitem(sys.modules, glue._RUNTIME_CONTEXT)  # SGLang not loaded yet
    assert glue.routed_context() is device
    _on(monkeypatch, NO_GPU)
    assert glue.routed_context() is None


def test_an_override_on_a_host_without_a_gpu_describes_a_node_of_that_gpu(monkeypatch, sglang_platform):
    _on(monkeypatch, NO_GPU)
    sglang_platform.update(is_sm100=True)
    ctx = glue.routed_context()
    assert ctx.resolution.requested == Capability(10, 0)
    assert len(ctx.node.gpus) == runtime.DESCRIBED_GPU_COUNT
    assert ctx.topology.name == ctx.resolution.profile.topology  # the tier's usual node
    assert ctx.cuda == runtime.SIMULATED_CUDA_DEFAULT  # NO_GPU's torch has no CUDA here
    assert glue.routed_context() is ctx  # built once
    assert glue.device_context() is None  # the probes and the runtime gates: the device
    sglang_platform.clear()
    assert glue.routed_context() is None


def test_a_multi_gpu_host_keeps_its_node(monkeypatch, sglang_platform):
    device = _on(monkeypatch, runtime.machine(capability="12.0", gpu_count=4, topology="pcie-p2p", cuda=runtime.SIMULATED_CUDA_DEFAULT))
    sglang_platform.update(is_sm90=True)
    ctx = glue.routed_context()
    assert (str(ctx.resolution.requested), len(ctx.node.gpus), ctx.topology.name) == ("9.0", 4, "pcie-p2p")
    assert ctx.cuda == device.cuda


def test_an_sglang_without_an_override_table_is_no_override(monkeypatch):
    module = types.ModuleType(glue._RUNTIME_CONTEXT)
    module.get_platform = lambda: object()
    monkeypatch.setitem(sys.modules, glue._RUNTIME_CONTEXT, module)
    assert glue.platform_overrides() == {}


def test_the_platform_probes_answer_the_device_inside_an_override(monkeypatch, sglang_platform):
    """SGLang's context answers overridden facts itself and asks the probe for the rest,
    so a routed probe must describe the device, not the overridden GPU."""
    _on(monkeypatch, runtime.machine(capability="9.0", cuda=runtime.SIMULATED_CUDA_DEFAULT))
    sglang_platform.update(is_sm100=True)
    assert glue.routed_context().resolution.requested == Capability(10, 0)
    assert platform.fact("is_sm100") is False
    assert platform.fact("is_blackwell") is False
    assert platform.fact("device_capability") == (9, 0)


# --- the contract of SGLang's fusion tests, at the glue ----------------------------------


def _resolve(backend, multi_node):
    try:
        return fusion.resolve_backend(backend, multi_node)
    except ArchDecisionError:
        return "ValueError"


@pytest.mark.parametrize("overrides, single, multi", [
    # SGLang 0.5.23's _resolve_backend("auto", ...)
    ({"is_sm100": True}, "mnnvl", "mnnvl"),
    ({"is_sm100": False, "is_sm90": True}, "trtllm", "ValueError"),
    ({"is_sm100": False, "is_sm90": False}, None, None),  # no GPU described: SGLang's check refuses
])
def test_the_fusion_backend_answers_for_the_described_gpu(monkeypatch, sglang_platform, overrides, single, multi):
    _on(monkeypatch, NO_GPU)
    sglang_platform.update(overrides)
    assert (_resolve("auto", False), _resolve("auto", True)) == (single, multi)
    sglang_platform.clear()  # and without the override: no GPU, SGLang resolves
    assert _resolve("auto", False) is None


def test_the_plugin_leaves_the_auto_enable_pass_to_sglang_where_its_gate_admits(monkeypatch, sglang_platform):
    _on(monkeypatch, NO_GPU)
    view = types.SimpleNamespace(nnodes=1, flashinfer_allreduce_fusion_backend=None)
    assert fusion.auto_enable(view) is None  # no GPU: SGLang's pass
    sglang_platform.update(is_sm90=True)
    assert fusion.auto_enable(view) is None  # SGLang's gate admits SM90: its pass runs
    sglang_platform.update(is_sm90=False, is_sm100=False, device_capability=(8, 0))
    assert fusion.auto_enable(view) == {}  # the registry: no fusion on Ampere
