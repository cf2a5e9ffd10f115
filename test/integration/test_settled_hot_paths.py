"""Per-call targets decided once per process (``routing.settle``): after the first call the
name SGLang calls is SGLang's own function where the registry agrees with it, SGLang's body
with the registry's constant where it does not, and either answers what the hook answers."""

from __future__ import annotations

import functools
import importlib
import itertools
from types import SimpleNamespace

import pytest

from sglang_arch.arch import runtime
from sglang_arch.integrations.sglang import glue, routing, specialize
from sglang_arch.integrations.sglang.glue import collectives
from sglang_arch.integrations.sglang.targets import ROUTED_MARK

_GEMV = "sglang.kernels.ops.gemm.hopper_bf16_gemv.use_hopper_bf16_gemv"
_APPLIES = "sglang.srt.layers.layer_boundary.residual.add_norm.flashinfer_ar_fusion_applies"
_COMM = "sglang.srt.models.inkling_common.kernels.comm"


def _target(path):
    target = next(t for t in routing.all_routed_targets() if t.path == path)
    importlib.import_module(target.module)
    routing.route(target)
    return target


def _cached(value):
    return functools.lru_cache(maxsize=None)(lambda *a, **k: value)


@pytest.fixture
def simulate(monkeypatch):
    def use(capability, topology="nvswitch"):
        ctx = runtime.machine(capability=capability, topology=topology, gpu_count=8, cuda=(13, 0))
        monkeypatch.setattr(glue, "current", lambda: ctx)
        return ctx

    yield use
    routing.unsettle()


def test_a_fact_probe_becomes_a_cached_constant_and_is_decided_again_on_reset(simulate):
    target = _target("sglang.srt.utils.common.is_sm90_supported")
    common = importlib.import_module("sglang.srt.utils.common")
    simulate("9.0")
    settling = common.is_sm90_supported
    assert common.is_sm90_supported() is True
    bound = common.is_sm90_supported
    assert bound is not settling and type(bound) is type(functools.lru_cache()(lambda: 0))
    assert getattr(bound, ROUTED_MARK) == target.path and routing.is_routed(target)
    simulate("10.0")  # a new machine: the settling function is back, the next call decides again
    assert common.is_sm90_supported is settling
    assert common.is_sm90_supported() is False
    runtime.reset()
    assert common.is_sm90_supported is settling


@pytest.mark.parametrize("capability,own", [("9.0", False), ("12.0", True), ("12.0", False), ("10.0", True)])
def test_the_gemv_gate_settles_to_what_the_hook_answers(simulate, capability, own, monkeypatch):
    target = _target(_GEMV)
    module = importlib.import_module(target.module)
    simulate(capability)
    monkeypatch.setattr(module, "_is_sm12x", _cached(own))
    original = module.use_hopper_bf16_gemv.__wrapped__
    grid = list(itertools.product((1, 2), (64, 4096, 12288, 20000, 40000), (512, 640, 5120, 8192)))
    hooked = [target.hook(original, *args) for args in grid]
    module.use_hopper_bf16_gemv(1, 4096, 5120)
    bound = module.use_hopper_bf16_gemv
    assert getattr(bound, ROUTED_MARK) == target.path
    if target.hook.glue() == own:  # the registry agrees with SGLang's probe: SGLang's code
        assert bound.__code__ is original.__code__
    else:  # SGLang's body, the probe's global the registry's constant
        assert bound.__code__ is not original.__code__ and bound.__globals__ is original.__globals__
    assert [bound(*args) for args in grid] == hooked


def test_applies_is_sglangs_gate_where_the_registry_agrees(simulate, monkeypatch):
    target = _target(_APPLIES)
    module = importlib.import_module(target.module)
    simulate("9.0")
    monkeypatch.setattr(module, "get_parallel", lambda: SimpleNamespace(nnodes=1))
    monkeypatch.setattr(module, "_is_cuda", True)
    monkeypatch.setattr(module, "_is_sm90_supported", True)
    monkeypatch.setattr(module, "_is_sm100_supported", False)
    original = module.flashinfer_ar_fusion_applies.__wrapped__
    assert target.hook.specialize(original) is original
    monkeypatch.setattr(module, "_is_sm90_supported", False)  # SGLang's gate says no, the registry yes
    bound = target.hook.specialize(original)
    assert bound.__code__ is not original.__code__
    assert bound.__globals__[specialize.global_name(original, "_is_sm90_supported")] is True


def test_inkling_consumers_are_sglangs_until_a_communicator_without_multicast_is_made(simulate, monkeypatch):
    simulate("9.0", "nvlink")
    monkeypatch.setitem(collectives._two_shot, "made", False)
    monkeypatch.setitem(collectives._two_shot, "multicast_made", False)
    target = _target(f"{_COMM}.get_ar_buffer")
    original = routing.current_function(target).__wrapped__
    assert target.hook.specialize(original) is original
    calls = []
    glue.on_machine_change(lambda: calls.append(1))
    # at world size 2 (SM90's measured two-shot bound) the consumers never read the communicator
    collectives.note_two_shot_communicator(SimpleNamespace(multicast=False, disabled=False, world_size=2))
    assert not calls and target.hook.specialize(original) is original
    collectives.note_two_shot_communicator(SimpleNamespace(multicast=False, disabled=False, world_size=8))
    assert calls
    # a node without multicast: what SGLang's function answers on a disabled communicator
    bound = target.hook.specialize(original)
    assert bound.__code__ is not original.__code__ and bound(None, 4, 6144, None) is None
    # a communicator with multicast as well (both kinds in one process): the hook views each group
    monkeypatch.setitem(collectives._two_shot, "multicast_made", False)
    calls.clear()
    collectives.note_two_shot_communicator(SimpleNamespace(multicast=True, disabled=False, world_size=8))
    assert calls and target.hook.specialize(original) is specialize.KEEP


def test_applies_settles_for_the_processs_backend_where_the_registry_answers_by_backend(simulate, monkeypatch):
    """On 12.0 over PCIe the registry runs trtllm fusion when asked, never mnnvl: one answer per
    backend; a process has one backend, so the gate settles to SGLang's body with that answer."""
    target = _target(_APPLIES)
    module = importlib.import_module(target.module)
    simulate("12.0", "pcie-p2p")
    monkeypatch.setattr(module, "get_parallel", lambda: SimpleNamespace(nnodes=1))
    monkeypatch.setattr(module, "_is_cuda", True)
    monkeypatch.setattr(module, "_is_sm90_supported", False)
    monkeypatch.setattr(module, "_is_sm100_supported", False)
    original = module.flashinfer_ar_fusion_applies.__wrapped__
    for backend, answer in (("trtllm", True), ("auto", True), ("mnnvl", False), (None, False)):
        monkeypatch.setattr(module, "get_exec", lambda b=backend: SimpleNamespace(
            comm=SimpleNamespace(flashinfer_allreduce_fusion_backend=b)))
        bound = target.hook.specialize(original)
        if answer is False:
            assert bound is original, backend  # SGLang's own gate already answers no
            continue
        name = specialize.global_name(original, "_is_sm90_supported")
        assert bound.__code__ is not original.__code__ and bound.__globals__[name] is True, backend


def test_a_name_used_other_than_as_a_global_read_keeps_the_hook():
    namespace = {"probe": lambda: 1}
    exec("def f(x):\n    return probe() + x.probe\n", namespace)
    assert specialize.with_global(namespace["f"], "probe", lambda: 2) is None
    exec("def g(x):\n    return probe() + x\n", namespace)
    g = specialize.with_global(namespace["g"], "probe", lambda: 2)
    assert g(1) == 3 and namespace["g"](1) == 2
    namespace["probe"] = lambda: 5  # the module's later changes are still seen by the other globals
    assert namespace["g"](1) == 6 and g(1) == 3


_MARLIN = "sglang.srt.lora.marlin_lora_temp.moe_runner._use_multi_shared_outer_decode_factorization"


@pytest.mark.parametrize("capability,device", [("10.0", (10, 0)), ("10.0", (12, 0)), ("12.0", (10, 0)),
                                               ("9.0", (9, 0))])
def test_a_capability_read_inline_settles_to_sglangs_body_reading_its_own_name(simulate, monkeypatch, capability,
                                                                               device):
    """``scoped_capability``: where torch reports another capability than the registry's
    answer, the settled function is SGLang's body whose ``torch.cuda.get_device_capability``
    reads ``torch.cuda._sglang_arch_get_device_capability_<answer>``; its other torch reads
    are torch's own (no view), and it answers as the hook does."""
    import torch

    target = _target(_MARLIN)
    module = importlib.import_module(target.module)
    simulate(capability)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: device_capability)
    device_capability = device
    original = module._use_multi_shared_outer_decode_factorization.__wrapped__
    answer = target.hook.glue()
    bound = target.hook.specialize(original)
    if answer is None or tuple(answer) == device:
        assert bound is original
        return
    name = "_sglang_arch_get_device_capability_" + "_".join(map(str, answer))
    assert getattr(torch.cuda, name)() == tuple(answer)
    assert name in bound.__code__.co_names and "get_device_capability" not in bound.__code__.co_names
    assert bound.__globals__["torch"] is torch  # torch itself, not a view
    rank, hidden, experts, inter = 32, 6144, 256, 384
    lora = SimpleNamespace(
        gate_up_lora_a_weights=torch.empty(2, 1, 2 * rank, hidden, device="meta"),
        gate_up_lora_b_weights=torch.empty(2, experts, 2 * inter, rank, device="meta"),
        down_lora_a_weights=torch.empty(2, experts, rank, inter, device="meta"),
        down_lora_b_weights=torch.empty(2, 1, hidden, rank, device="meta"),
        max_lora_rank=rank, experts_shared_outer_loras=True)
    hidden_states = SimpleNamespace(is_cuda=True, device="cuda:0", dtype=torch.bfloat16)
    for tokens, ep_active in itertools.product((1, 32, 33), (False, True)):
        kwargs = dict(num_tokens=tokens, hidden_size=hidden, router_topk=6, num_experts=experts,
                      intermediate_size=inter, ep_active=ep_active)
        assert bound(lora, hidden_states, **kwargs) == target.hook(original, lora, hidden_states, **kwargs)


def test_an_attribute_read_other_than_through_the_chain_keeps_the_view():
    class Cuda:
        def probe(self):
            return 1

    cuda = Cuda()
    namespace = {"torch": SimpleNamespace(cuda=cuda)}
    exec("def f(x):\n    return torch.cuda.probe() + x.probe()\n", namespace)
    assert specialize.with_attribute(namespace["f"], ("torch", "cuda"), "probe", cuda, "_new", lambda: 2) is None
    exec("def h():\n    return getattr(torch.cuda, 'probe')()\n", namespace)
    assert specialize.with_attribute(namespace["h"], ("torch", "cuda"), "probe", cuda, "_new", lambda: 2) is None
    exec("def g(x):\n    return torch.cuda.probe() + x\n", namespace)
    g = specialize.with_attribute(namespace["g"], ("torch", "cuda"), "probe", cuda, "_new", lambda: 2)
    assert g(1) == 3 and namespace["g"](1) == 2 and cuda._new() == 2


def test_an_answering_function_takes_the_calls_its_original_takes():
    def inner(group, num_tokens, hidden=1):
        return False

    @functools.wraps(inner)
    def wrapper(group, *args, **kwargs):  # inspect.signature would show inner's parameters
        return inner(group, *args, **kwargs)

    copy = specialize.answering(wrapper, None)
    assert copy(1, 2) is None and wrapper(1, 2) is False and copy.__name__ == "inner"
    exec("def posonly(a, b=2, /, c=3, *rest, d, e=5, **kw):\n    return 0\n", namespace := {})
    copy = specialize.answering(namespace["posonly"], None)
    assert copy(1, d=4) is None and copy(1, 2, 3, 4, d=4, x=1) is None
    assert copy(1, b=2, d=4) is None and namespace["posonly"](1, b=2, d=4) == 0  # b goes to **kw in both
    for bad in (lambda: copy(d=4), lambda: copy(1, 2, 3, 4), lambda: copy(1)):
        with pytest.raises(TypeError):
            bad()
    odd = lambda g: 0  # noqa: E731
    odd.__name__ = "x(): print('ran')\ndef y"  # never source: the name is set, not compiled
    assert specialize.answering(odd, False)(1) is False


@pytest.mark.parametrize("source", [
    "async def f(group):\n    return None\n",
    "def f(group):\n    yield None\n",
    "def f(group, _sglang_arch_answer=1):\n    return None\n",  # would shadow the answer
])
def test_no_answering_function_where_it_could_not_answer_as_the_original(source):
    exec(source, namespace := {})
    assert specialize.answering(namespace["f"], None) is None


@pytest.mark.parametrize("source", [
    "def f(x=None):\n    return (x or torch).cuda.probe()\n",  # a jump lands inside the chain
    "def f(flag, other):\n    return (other if flag else torch).cuda.probe()\n",
    "def f():\n    names = ('probe',)\n    return torch.cuda.probe(), [getattr(torch.cuda, n)() for n in names]\n",
])
def test_an_attribute_read_not_always_through_the_chain_keeps_the_view(source):
    class Cuda:
        def probe(self):
            return 1

    cuda = Cuda()
    namespace = {"torch": SimpleNamespace(cuda=cuda)}
    exec(source, namespace)
    assert specialize.with_attribute(namespace["f"], ("torch", "cuda"), "probe", cuda, "_new", lambda: 2) is None
