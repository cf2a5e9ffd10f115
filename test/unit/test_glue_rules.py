"""The glue's answers over stand-in SGLang modules, case by case (found by mutation
testing: docs/mutation.md).  No sglang and no torch: each test puts the few names a glue
function reads in ``sys.modules`` and routes a simulated machine.

Expected values come from the sources the registry cites: sglang 0.5.23
all_reduce_utils.py (symmetric-memory sizes 64/64/128/128 MiB for world sizes 2/4/6/8 on
majors 9 and 10) and torch_symm_mem.py (multimem for world sizes 4, 6, 8; the 256 MiB and
512 MiB floors of the inkling all-reduce), configs/custom_all_reduce_v2.py (the tuned
tables by major, and the default Heuristic(1 MiB, 1 MiB, 16 MiB) for world sizes 2-16),
flashinfer_comm_fusion.py (SM90: trtllm on one node; SM10x: mnnvl, also across nodes),
model_override_base.py (Hopper prefers fa3, which needs CUDA 12.3; SM100 prefers
trtllm_mha), and docs/differences.md D3/D4 (12.x fuses with trtllm where there is P2P).
"""

import contextlib
import sys
import types
from types import SimpleNamespace

import pytest
from sglang_arch.arch import runtime
from sglang_arch.integrations.sglang import glue
from sglang_arch.integrations.sglang.glue import ArchDecisionError
from sglang_arch.integrations.sglang.glue import attention as ga
from sglang_arch.integrations.sglang.glue import collectives as gc
from sglang_arch.integrations.sglang.glue import fusion as gf
from sglang_arch.integrations.sglang.glue import platform as gp

MIB = 1024 * 1024
HOPPER_SYMM_MEM = {2: 64 * MIB, 4: 64 * MIB, 6: 128 * MIB, 8: 128 * MIB}


class Log:
    """Stands in for a glue module's logger."""

    def __init__(self):
        self.lines = []

    def __getattr__(self, level):
        return lambda msg, *args: self.lines.append(f"{level}: {msg % args}")


@pytest.fixture
def route(monkeypatch):
    """``route(capability, topology, gpus, cuda)``: the machine the glue sees; no
    capability: no NVIDIA GPU."""
    monkeypatch.setattr(glue, "_warned", set())
    monkeypatch.setattr(gf, "_platform_ok", {})
    monkeypatch.setattr(gf, "_resolved", {})

    def use(capability=None, topology=None, gpus=1, cuda=(12, 8)):
        if capability is None:
            ctx = SimpleNamespace(resolution=None)
        else:
            ctx = runtime.machine(capability=capability, topology=topology, gpu_count=gpus, cuda=cuda)
        monkeypatch.setattr(glue, "current", lambda: ctx)
        return ctx

    yield use
    runtime.reset()


def module(monkeypatch, name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


def flag(value):
    return SimpleNamespace(get=lambda: value)


# --- the package: routed_context, fail_open -------------------------------------------


def test_registry_name():
    assert glue.REGISTRY == "sglang_arch.arch"


def test_routed_context(route):
    route()
    assert glue.routed_context() is None
    ctx = route("9.0")
    assert glue.routed_context() is ctx


def _broken(key):
    raise KeyError(key)


def test_fail_open_answers_none_and_warns_once(monkeypatch):
    log = Log()
    monkeypatch.setattr(glue, "logger", log)
    monkeypatch.setattr(glue, "_warned", set())
    guarded = glue.fail_open(_broken)
    assert guarded("k") is None and guarded("k") is None
    assert log.lines == [f"warning: {_broken.__module__}._broken failed (KeyError: 'k'); SGLang's own code decides"]


def test_fail_open_passes_arguments_and_answers_through():
    def add(a, b=0):
        return a + b

    guarded = glue.fail_open(add)
    assert guarded(1, b=2) == 3
    assert guarded.__name__ == "add"


def test_fail_open_lets_a_decision_error_through():
    def refuse():
        raise ArchDecisionError("no")

    with pytest.raises(ArchDecisionError):
        glue.fail_open(refuse)()


# --- platform ---------------------------------------------------------------------------


def test_platform_facts(route):
    # sglang's is_sm90_supported: major 9 and CUDA >= 12.3
    route("9.0", cuda=(12, 3))
    assert gp.fact("is_sm90") is True and gp.fact("is_sm100") is False
    assert gp.fact("device_sm") == 90
    assert gp.fact("no_such_fact") is None
    route()
    assert gp.fact("is_sm90") is None


# --- fusion -------------------------------------------------------------------------------


def test_resolve_backend(route):
    route("9.0", "nvswitch", 8)
    assert gf.resolve_backend("auto") == "trtllm"
    with pytest.raises(ArchDecisionError) as e:
        gf.resolve_backend("auto", is_multi_node=True)
    assert str(e.value).startswith("FlashInfer allreduce fusion (auto): ") and "2 nodes" in str(e.value)
    with pytest.raises(ArchDecisionError) as e:
        gf.resolve_backend("auto", True)
    assert str(e.value).startswith("FlashInfer allreduce fusion (auto): ") and "2 nodes" in str(e.value)
    route("10.0", "nvswitch", 8)
    assert gf.resolve_backend("auto", is_multi_node=True) == "mnnvl"
    assert gf.resolve_backend("mnnvl") == "mnnvl"


def test_resolve_backend_without_a_gpu(route):
    route()
    assert gf.resolve_backend("auto") is None


def test_an_explicit_backend_is_asked_for_by_name(route, monkeypatch):
    # 12.x has trtllm only (docs/differences.md D3): auto runs, mnnvl does not
    route("12.0", "pcie-p2p", 2)
    with pytest.raises(ArchDecisionError) as e:
        gf.resolve_backend("mnnvl")
    assert str(e.value).startswith("FlashInfer allreduce fusion (mnnvl): mnnvl fusion is not available on tier 12.0")
    assert gf.resolve_backend("auto") == "trtllm"
    _add_norm(monkeypatch, backend="mnnvl")
    assert gf.applies(16) is False
    _add_norm(monkeypatch, backend="trtllm")
    assert gf.applies(16) is True
    _add_norm(monkeypatch, backend="flashinfer_default")  # not a request name: asked as "auto"
    assert gf.applies(16) is True


def test_the_platform_decision_is_kept_per_machine_backend_and_node_count(route, monkeypatch):
    # decided once, then read: but never across machines, backends or node counts
    route("9.0", "nvswitch", 8)
    _add_norm(monkeypatch, backend="trtllm", nnodes=1)
    assert gf.applies(16) is True
    _add_norm(monkeypatch, backend="trtllm", nnodes=2)
    assert gf.applies(16) is False
    route("12.0", "pcie-p2p", 2)
    _add_norm(monkeypatch, backend="mnnvl", nnodes=1)
    assert gf.applies(16) is False
    ctx = route("12.0", "pcie", 2)  # no P2P: trtllm cannot run (D4)
    _add_norm(monkeypatch, backend="trtllm", nnodes=1)
    assert gf.applies(16) is False
    assert gf._platform_ok[("trtllm", 1)] == (ctx, False)


def test_the_fusion_backend_is_decided_once_per_machine_backend_and_node_count(route, monkeypatch):
    from sglang_arch.arch import runtime as rt

    policy, asked = rt.collectives.allreduce_fusion, []

    def counted(res, topology, world_size, nnodes, requested, cuda, explicit=False):
        asked.append((str(res.resolved), nnodes, requested))
        return policy(res, topology, world_size, nnodes, requested, cuda, explicit=explicit)

    monkeypatch.setattr(rt.collectives, "allreduce_fusion", counted)
    route("9.0", "nvswitch", 8)
    assert [gf.resolve_backend("auto") for _ in range(50)] == ["trtllm"] * 50
    assert asked == [("9.0", 1, "auto")]
    for _ in range(3):  # a refusal is decided once too, and raised every time
        with pytest.raises(ArchDecisionError, match="multi-node|2 nodes"):
            gf.resolve_backend("auto", is_multi_node=True)
    assert gf.resolve_backend("trtllm") == "trtllm"
    assert asked == [("9.0", 1, "auto"), ("9.0", 2, "auto"), ("9.0", 1, "trtllm")]
    route("10.0", "nvswitch", 8)  # another machine: decided again
    assert gf.resolve_backend("auto") == gf.resolve_backend("auto") == "mnnvl"
    assert asked[3:] == [("10.0", 1, "auto")]


def test_mnnvl_is_refused_at_resolution_where_the_node_has_no_multicast(route):
    route("10.0", "nvlink", 8)  # NVLink, multicast off: FlashInfer's MNNVL workspace is a multicast buffer
    for backend in ("auto", "mnnvl"):
        with pytest.raises(ArchDecisionError, match=r"mnnvl fusion needs NVLink multicast .*; nvlink has none"):
            gf.resolve_backend(backend)
    assert gf.resolve_backend("trtllm") == "trtllm"
    route("10.0", "nvswitch", 8)
    assert gf.resolve_backend("mnnvl") == "mnnvl"


class _Driver:
    """Stands in for cuda-python's driver bindings (the multicast granularity query only)."""

    CUresult = SimpleNamespace(CUDA_SUCCESS="ok")

    def __init__(self, answer):
        self.answer, self.other = answer, "the driver's own"

    def cuMulticastGetGranularity(self, prop, option):  # noqa: N802
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_the_trtllm_workspace_is_sized_without_multicast_where_the_query_fails(route, monkeypatch):
    log = Log()
    monkeypatch.setattr(gf, "logger", log)
    route("12.0", "pcie-p2p", 2)
    backend = ["trtllm"]
    module(monkeypatch, gf._FUSION, resolve_flashinfer_allreduce_fusion_backend=lambda: backend[0])
    failing = _Driver(("not supported", 0))
    view = gf.trtllm_workspace_driver(failing)
    assert view.cuMulticastGetGranularity("prop", "mc") == ("ok", 1)  # no alignment, as FlashInfer allocates
    assert view.cuMulticastGetGranularity("prop", "mc") == ("ok", 1)
    assert view.other == "the driver's own"
    assert log.lines == ["info: FlashInfer trtllm workspace sized without multicast alignment: the multicast "
                         "granularity query failed (not supported) and FlashInfer's trtllm workspace does not use "
                         "multicast"]  # once per preflight
    assert gf.trtllm_workspace_driver(_Driver(RuntimeError("no binding"))).cuMulticastGetGranularity(0, 0) == ("ok", 1)
    working = gf.trtllm_workspace_driver(_Driver(("ok", 512 * MIB)))
    assert working.cuMulticastGetGranularity("prop", "mc") == ("ok", 512 * MIB)  # SGLang's result stands
    for other in ("mnnvl", None):
        backend[0] = other
        assert gf.trtllm_workspace_driver(failing) is None

    def refused():
        raise ValueError("FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs.")

    module(monkeypatch, gf._FUSION, resolve_flashinfer_allreduce_fusion_backend=refused)
    assert gf.trtllm_workspace_driver(failing) is None
    route()
    assert gf.trtllm_workspace_driver(failing) is None


def _add_norm(monkeypatch, backend="trtllm", nnodes=1, **over):
    attrs = dict(
        get_exec=lambda: SimpleNamespace(comm=SimpleNamespace(flashinfer_allreduce_fusion_backend=backend)),
        get_parallel=lambda: SimpleNamespace(nnodes=nnodes),
        _is_cuda=True, _is_flashinfer_available=True,
        is_dp_attention_enabled=lambda: False, uses_cutedsl_ar_fusion=lambda: False,
        is_flashinfer_allreduce_unavailable=lambda: False, FUSE_ALLREDUCE_MAX_BATCH_SIZE=2048,
    )
    attrs.update(over)
    return module(monkeypatch, gf._ADD_NORM, **attrs)


def test_applies_is_sglangs_gate_with_the_registrys_platform(route, monkeypatch):
    route("9.0", "nvswitch", 8)
    _add_norm(monkeypatch)
    assert [gf.applies(n) for n in (0, 1, 2048, 2049)] == [False, True, True, False]


@pytest.mark.parametrize("over", [
    {"_is_cuda": False}, {"_is_flashinfer_available": False}, {"backend": None},
    {"is_dp_attention_enabled": lambda: True}, {"uses_cutedsl_ar_fusion": lambda: True},
    {"is_flashinfer_allreduce_unavailable": lambda: True},
    {"nnodes": 2},  # SM90 fuses on one node only
])
def test_applies_each_condition(route, monkeypatch, over):
    route("9.0", "nvswitch", 8)
    _add_norm(monkeypatch, **over)
    assert gf.applies(16) is False


def test_applies_without_a_gpu(route, monkeypatch):
    route()
    _add_norm(monkeypatch)
    assert gf.applies(16) is None


def test_applies_on_a_tier_without_fusion(route, monkeypatch):
    route("12.0", "pcie", 2)  # trtllm needs P2P (docs/differences.md D4)
    _add_norm(monkeypatch)
    assert gf.applies(16) is False


class View(SimpleNamespace):
    pass


def _upstream_pass(monkeypatch, answer):
    seen = []

    @contextlib.contextmanager
    def override_platform(**gate):
        seen.append(("gate", gate))
        yield

    def upstream(view):
        seen.append(("pass", view, gf._in_upstream_pass.get()))
        return answer

    module(monkeypatch, "sglang.srt.runtime_context", override_platform=override_platform)
    module(monkeypatch, gf._OVERRIDES, _flashinfer_allreduce_fusion_auto_enable=upstream)
    return seen


def test_auto_enable_lets_sglang_decide_where_its_gate_admits_the_tier(route, monkeypatch):
    route("9.0", "nvswitch", 8)
    seen = _upstream_pass(monkeypatch, {"x": 1})
    assert gf.auto_enable(View(nnodes=1, flashinfer_allreduce_fusion_backend=None)) is None
    assert seen == []


def _measured_win(real, world_sizes=(2,), **facts):
    """The machine ``real`` with a tuned override listing ``world_sizes`` as fusion wins."""
    from dataclasses import replace

    res = replace(real.resolution, profile=replace(real.resolution.profile,
                                                   allreduce_fusion_auto_world_sizes=tuple(world_sizes)))
    return runtime.MachineContext(real.node, res, real.cuda, dict(real.facts, **facts))


def test_auto_enable_leaves_fusion_off_on_12x_without_a_measured_win(route, monkeypatch, caplog):
    """D3: nothing turns fusion on unasked on SM12x over PCIe; the log says why."""
    route("12.0", "pcie-p2p", 2)
    seen = _upstream_pass(monkeypatch, {"enable_flashinfer_allreduce_fusion": True})
    with caplog.at_level("INFO"):
        assert gf.auto_enable(View(nnodes=1, tp_size=2, flashinfer_allreduce_fusion_backend=None)) == {}
    assert seen == [] and "sgl-project/sglang#32330" in caplog.text and "92.6 -> 92.7 tok/s" in caplog.text
    assert gf.resolve_backend("auto") == "trtllm"  # asked for: it runs


def test_auto_enable_runs_sglangs_pass_under_the_trtllm_gate_on_12x(route, monkeypatch):
    real = route("12.0", "pcie-p2p", 2)
    monkeypatch.setattr(glue, "current", lambda: _measured_win(real))
    view = View(nnodes=1, tp_size=2, flashinfer_allreduce_fusion_backend=None)
    seen = _upstream_pass(monkeypatch, {"enable_flashinfer_allreduce_fusion": True})
    assert gf.auto_enable(view) == {"enable_flashinfer_allreduce_fusion": True}
    assert seen == [("gate", {"is_sm90": True, "is_sm100": False}), ("pass", view, True)]
    assert gf._in_upstream_pass.get() is False


def test_auto_enable_answers_the_tiers_blackwell_where_the_device_differs(route, monkeypatch):
    """A device whose is_blackwell is not its tier's (a major past the table resolving to a
    Blackwell tier: today fusion has no build there, so a 12.0 machine stands in with its fact
    turned off): SGLang's pass runs under the trtllm gate with is_blackwell answered by the tier
    (V4.1's custom push plane)."""
    real = route("12.0", "pcie-p2p", 2)
    ctx = _measured_win(real, is_blackwell=False)
    monkeypatch.setattr(glue, "current", lambda: ctx)
    view = View(nnodes=1, tp_size=2, flashinfer_allreduce_fusion_backend=None)
    seen = _upstream_pass(monkeypatch, {})
    assert gf.auto_enable(view) == {}
    assert seen == [("gate", {"is_sm90": True, "is_sm100": False, "is_blackwell": True}), ("pass", view, True)]


@pytest.mark.parametrize("cap", ["7.0", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1", "9.5", "10.5",
                                 "11.5", "12.3", "13.0", "6.1"])
def test_v41s_plane_is_the_tiers_blackwell_rule(cap):
    from sglang_arch.arch import resolve
    from sglang_arch.arch.policies import collectives
    from sglang_arch.arch.policies.platform import platform_facts

    res = resolve(cap)
    plane = collectives.dsv41_custom_plane(res, (13, 0))
    assert plane.custom_plane is (res.resolved.major in (10, 11, 12)), plane.reason
    if res.match == "exact":  # SGLang's own is_blackwell of the device
        assert plane.custom_plane is platform_facts(res, (13, 0))["is_blackwell"]


def test_auto_enable_inside_the_upstream_pass_does_not_route_again(route, monkeypatch):
    route("12.0", "pcie-p2p", 2)
    token = gf._in_upstream_pass.set(True)
    try:
        assert gf.auto_enable(View(nnodes=1, flashinfer_allreduce_fusion_backend=None)) is None
    finally:
        gf._in_upstream_pass.reset(token)


def test_auto_enable_where_fusion_cannot_run(route, monkeypatch):
    route("12.0", "pcie", 2)
    log = Log()
    monkeypatch.setattr(gf, "logger", log)
    assert gf.auto_enable(View(nnodes=1, flashinfer_allreduce_fusion_backend=None)) == {}
    assert log.lines == ["info: FlashInfer all-reduce fusion not auto-enabled: "
                         "trtllm fusion needs peer-to-peer access; pcie has none"]
    log.lines.clear()
    assert gf.auto_enable(View(nnodes=1, flashinfer_allreduce_fusion_backend="trtllm")) == {}
    assert log.lines == []  # an explicit backend is refused elsewhere, with the reason


def test_auto_enable_without_a_gate_for_the_backend(route, monkeypatch):
    # a 10.0 machine whose facts do not admit it (SGLang's gate would not): mnnvl has no gate here
    real = route("10.0", "nvswitch", 8)
    ctx = runtime.MachineContext(real.node, real.resolution, real.cuda, {})
    monkeypatch.setattr(glue, "current", lambda: ctx)
    seen = _upstream_pass(monkeypatch, {"x": 1})
    assert gf.auto_enable(View(nnodes=1, flashinfer_allreduce_fusion_backend=None)) == {}
    assert seen == []


def test_auto_enable_without_a_gpu(route):
    route()
    assert gf.auto_enable(View(nnodes=1, flashinfer_allreduce_fusion_backend=None)) is None


# --- collectives ------------------------------------------------------------------------


def comm(world_size=8, major=9):
    return SimpleNamespace(world_size=world_size, device_capability=major)


def test_size_and_kernel_two_shot_without_multicast(route):
    ctx = route("9.0", "nvlink", 8)
    c = comm(2)
    size, decision = gc._size_and_kernel(ctx, c)
    assert (size, decision.algorithm) == (16 * MIB, "two_shot")  # two-shot's own measured bound
    assert c._WORLD_SIZES_MULTIMEM == {9: []}
    size, decision = gc._size_and_kernel(ctx, comm(8))  # no bound measured at 8 without multicast
    assert (size, decision.enabled) == (0, False)


def test_size_and_kernel_for_a_major_without_a_row(route):
    ctx = route("9.0", "nvswitch", 8)
    assert gc._size_and_kernel(ctx, comm(8, major=8))[0] == 0


def test_publish_symm_mem_table(route, monkeypatch):
    ctx = route("9.0", "nvswitch", 8)
    a = module(monkeypatch, gc._SYMM_MEM)
    b = module(monkeypatch, gc._ALL_REDUCE_UTILS)
    gc.publish_symm_mem_table(ctx)
    assert a.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES == {9: HOPPER_SYMM_MEM}
    assert b.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES == {9: HOPPER_SYMM_MEM}
    monkeypatch.delitem(sys.modules, gc._ALL_REDUCE_UTILS)
    gc.publish_symm_mem_table(ctx)  # a module not loaded is skipped


@pytest.mark.parametrize("inkling, scattered, fused, expected", [
    (False, True, True, 64 * MIB),
    (True, False, False, 256 * MIB),
    (True, True, False, 512 * MIB),
    (True, False, True, 512 * MIB),
])
def test_inkling_floor(inkling, scattered, fused, expected):
    mod = SimpleNamespace(
        envs=SimpleNamespace(SGLANG_OPT_USE_INKLING_CUSTOM_AR=flag(inkling),
                             SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV=flag(fused)),
        get_exec=lambda: SimpleNamespace(comm=SimpleNamespace(enable_scattered_sconv=scattered)))
    assert gc._with_inkling_floor(mod, 64 * MIB) == expected
    assert gc._with_inkling_floor(mod, 1024 * MIB) == 1024 * MIB


def _torch(monkeypatch, major=9, sms=132):
    calls = []
    fake = module(monkeypatch, "torch",
                  device=lambda spec: ("device", spec), bfloat16=SimpleNamespace(itemsize=2),
                  cuda=SimpleNamespace(set_device=calls.append,
                                       get_device_capability=lambda device=None: (major, 0),
                                       get_device_properties=lambda device=None: SimpleNamespace(
                                           multi_processor_count=sms)))
    return fake, calls


def _symm_mem_module(monkeypatch, multicast_ptr=1, available=True, world_size=8):
    made = []
    return module(
        monkeypatch, gc._SYMM_MEM,
        torch_symm_mem_available=available,
        dist=SimpleNamespace(get_world_size=lambda group: world_size),
        torch_symm_mem=SimpleNamespace(
            empty=lambda n, device, dtype: made.append((n, device, dtype)) or ("buffer", n),
            rendezvous=lambda buf, name: SimpleNamespace(multicast_ptr=multicast_ptr)),
        envs=SimpleNamespace(SGLANG_OPT_USE_INKLING_CUSTOM_AR=flag(False),
                             SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV=flag(False)),
        get_exec=lambda: SimpleNamespace(comm=SimpleNamespace(enable_scattered_sconv=False)),
    ), made


def test_init_torch_symm_mem_multimem(route, monkeypatch):
    log = Log()
    monkeypatch.setattr(gc, "logger", log)
    route("9.0", "nvswitch", 8)
    fake_torch, set_device = _torch(monkeypatch)
    mod, made = _symm_mem_module(monkeypatch)
    c, group = SimpleNamespace(), SimpleNamespace(group_name="tp")
    assert gc.init_torch_symm_mem(c, group, 3) is True
    assert set_device == [("device", "cuda:3")]
    assert (c.disabled, c.max_size, c.buffer) == (False, 128 * MIB, ("buffer", 64 * MIB))
    assert made == [(64 * MIB, ("device", "cuda:3"), fake_torch.bfloat16)]
    assert (c.world_size, c.device_capability, c.group, c.device) == (8, 9, group, ("device", "cuda:3"))
    assert c.dtype is fake_torch.bfloat16
    assert c._WORLD_SIZES_MULTIMEM == {9: [8]}
    assert mod.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES == {9: HOPPER_SYMM_MEM}
    (line,) = log.lines
    assert line.startswith(f"info: TorchSymmMemCommunicator: multimem, max {128 * MIB} bytes (tier 9.0, world size 8")
    assert "multicast" in line


def test_init_torch_symm_mem_device_spellings(route, monkeypatch):
    route("9.0", "nvswitch", 8)
    _, set_device = _torch(monkeypatch)
    _symm_mem_module(monkeypatch)
    gc.init_torch_symm_mem(SimpleNamespace(), SimpleNamespace(group_name="tp"), "cuda:1")
    device = object()
    gc.init_torch_symm_mem(SimpleNamespace(), SimpleNamespace(group_name="tp"), device)
    assert set_device == [("device", "cuda:1"), device]


def test_init_torch_symm_mem_without_multicast(route, monkeypatch):
    route("9.0", "nvswitch", 8)
    _torch(monkeypatch)
    _symm_mem_module(monkeypatch, multicast_ptr=0)
    c = SimpleNamespace()
    assert gc.init_torch_symm_mem(c, SimpleNamespace(group_name="tp"), 0) is True
    assert (c.disabled, c.buffer, c.multicast) == (True, None, False)  # no two-shot bound at 8 without multicast
    # two-shot at its own bound, measured without multicast at world size 2
    route("9.0", "nvlink", 2)
    _symm_mem_module(monkeypatch, multicast_ptr=0, world_size=2)
    c = SimpleNamespace()
    assert gc.init_torch_symm_mem(c, SimpleNamespace(group_name="tp"), 0) is True
    assert (c.disabled, c.max_size, c.buffer, c.multicast) == (False, 16 * MIB, ("buffer", 8 * MIB), False)
    assert c._WORLD_SIZES_MULTIMEM == {9: []}
    # detection said multicast, the handle has none: the decision without multicast, within the buffer
    route("9.0", "nvswitch", 2)
    c = SimpleNamespace()
    assert gc.init_torch_symm_mem(c, SimpleNamespace(group_name="tp"), 0) is True
    assert (c.disabled, c.max_size, c.multicast) == (False, 16 * MIB, False)
    # a node without peer-to-peer access never reaches the rendezvous
    route("9.0", "pcie", 2)
    mod, made = _symm_mem_module(monkeypatch, multicast_ptr=0, world_size=2)
    c = SimpleNamespace()
    assert gc.init_torch_symm_mem(c, SimpleNamespace(group_name="tp"), 0) is True
    assert (c.disabled, made) == (True, [])


def test_the_plugins_communicator_says_whether_it_has_multicast(route, monkeypatch):
    route("9.0", "nvlink", 2)
    _torch(monkeypatch)
    _symm_mem_module(monkeypatch, multicast_ptr=0, world_size=2)
    c = SimpleNamespace()
    gc.init_torch_symm_mem(c, SimpleNamespace(group_name="tp"), 0)
    assert (c.disabled, c.multicast) == (False, False)  # two-shot below its measured bound, kept enabled
    route("9.0", "nvswitch", 8)
    _symm_mem_module(monkeypatch, multicast_ptr=0x7f00)
    c = SimpleNamespace()
    gc.init_torch_symm_mem(c, SimpleNamespace(group_name="tp"), 0)
    assert (c.disabled, c.multicast) == (False, True)


class _Group:
    """Stands in for SGLang's GroupCoordinator."""

    def __init__(self, comm, world_size=4):
        self.torch_symm_mem_comm, self.world_size = comm, world_size

    def all_reduce(self, x):
        return ("group all_reduce", x)


def test_group_without_multicast_only_where_the_plugins_communicator_has_none(monkeypatch):
    monkeypatch.setattr(gc, "_views", {})
    monkeypatch.setattr(glue, "_warned", set())
    two_shot = SimpleNamespace(disabled=False, multicast=False)
    group = _Group(two_shot, world_size=8)
    view = gc.group_without_multicast(group)
    assert (view.torch_symm_mem_comm, view.world_size, view.all_reduce("x")) == (None, 8, ("group all_reduce", "x"))
    assert group.torch_symm_mem_comm is two_shot  # the group itself is left as it is
    group.rank = 3
    assert view.rank == 3 and "rank" not in vars(view)  # data read through, never frozen
    assert "all_reduce" in vars(view)  # a method is kept after its first read (a miss costs an exception)
    assert gc.group_without_multicast(group) is view  # built once per group
    assert gc.group_without_multicast(_Group(two_shot)) is not view
    for comm in (None, SimpleNamespace(disabled=False, multicast=True),  # multicast: SGLang's path
                 SimpleNamespace(disabled=False),  # not made by the plugin (no flag): SGLang's
                 SimpleNamespace(disabled=True, multicast=False)):  # off: SGLang's disabled path already
        assert gc.group_without_multicast(_Group(comm)) is None
    assert gc.group_without_multicast(object()) is None  # not a group: SGLang's own code
    assert gc.group_without_multicast(SimpleNamespace(torch_symm_mem_comm=two_shot)) is None  # no world size: fails open
    assert glue._warned == {"sglang_arch.integrations.sglang.glue.collectives.group_without_multicast"}


def test_init_torch_symm_mem_off(route, monkeypatch):
    log = Log()
    monkeypatch.setattr(gc, "logger", log)
    route("9.0", "pcie", 8)
    _torch(monkeypatch)
    _symm_mem_module(monkeypatch)
    c = SimpleNamespace()
    assert gc.init_torch_symm_mem(c, SimpleNamespace(group_name="tp"), 0) is True
    assert (c.disabled, c.max_size, c.buffer) == (True, 0, None)
    assert log.lines == ["info: TorchSymmMemCommunicator: off (topology pcie has no peer-to-peer access)"]
    route("9.0", "nvswitch", 8)
    _symm_mem_module(monkeypatch, available=False)
    c = SimpleNamespace()
    assert gc.init_torch_symm_mem(c, SimpleNamespace(group_name="tp"), 0) is True
    assert (c.disabled, c.max_size, c.buffer) == (True, 0, None)
    route()
    assert gc.init_torch_symm_mem(SimpleNamespace(), None, 0) is None


def _configs(monkeypatch):
    return module(monkeypatch, gc._CUSTOM_AR_V2,
                  _sm90_configs=lambda n: ("sm90", n), _sm100_configs=lambda n: ("sm100", n),
                  _sm107_configs=lambda n: ("sm107", n),
                  Heuristic=lambda *a: ("heuristic",) + a, AllReduceConfig=lambda **kw: kw)


DEFAULT_HEURISTIC = ("heuristic", 1 * MIB, 1 * MIB, 16 * MIB)


def default_configs(sms, world_sizes):
    row = dict(graph=DEFAULT_HEURISTIC, eager=DEFAULT_HEURISTIC, num_push_blocks=sms, num_pull_blocks=sms,
               num_mc_blocks=None)
    return {ws: row for ws in world_sizes}


@pytest.mark.parametrize("cap, table", [("9.0", "sm90"), ("10.0", "sm100"), ("10.7", "sm107")])
def test_all_reduce_configs_tuned_tables(route, monkeypatch, cap, table):
    route(cap, "nvswitch", 8)
    _torch(monkeypatch, sms=132)
    _configs(monkeypatch)
    assert gc.all_reduce_configs() == (table, 132)


def test_all_reduce_configs_default(route, monkeypatch):
    route("12.0", "pcie-p2p", 2)
    _torch(monkeypatch, sms=188)
    _configs(monkeypatch)
    assert gc.all_reduce_configs() == default_configs(188, range(2, 17))
    route()
    assert gc.all_reduce_configs() is None


# --- attention ----------------------------------------------------------------------------


def _sglang_attention(monkeypatch, *, out_of_tree=False, cuda=True, hip=False, flashinfer=True,
                      algorithm=None, topk=None, forces=None, no_spec=True, mla=False):
    cfg = SimpleNamespace(speculative_algorithm=algorithm, speculative_eagle_topk=topk)
    # the views of the server arguments given ("args"), nothing else
    attrs = dict(current_platform=SimpleNamespace(is_out_of_tree=lambda: out_of_tree),
                 resolving_view=lambda server_args: {"args": cfg}[server_args],
                 resolved_view=lambda server_args: {"args": ("resolved", "args")}[server_args],
                 is_no_spec_infer_or_topk_one=lambda view: {("resolved", "args"): no_spec}[view])
    if forces is not None:
        attrs["_forces_eagle_topk_one"] = forces
    module(monkeypatch, ga._BASE, **attrs)
    module(monkeypatch, ga._OVERRIDES, use_mla_backend=lambda view: mla)
    module(monkeypatch, "sglang.srt.runtime_context",
           get_platform=lambda: SimpleNamespace(is_cuda=cuda, is_hip=hip, has_flashinfer=flashinfer))


def model(architectures=None, asymmetric=False, sinks=False):
    return SimpleNamespace(hf_config=SimpleNamespace(architectures=architectures),
                           has_asymmetric_kv=asymmetric, has_attention_sinks=sinks)


def test_default_backend_follows_the_tier(route, monkeypatch):
    route("9.0", cuda=(12, 3))
    _sglang_attention(monkeypatch)
    assert ga.default_backend("args", False, model()) == "fa3"
    assert ga.default_backend("args", True, model()) == "fa3"
    route("9.0", cuda=(12, 2))  # fa3 needs CUDA 12.3: the machine's CUDA reaches the check
    assert ga.default_backend("args", False, model()) == "flashinfer"


def test_default_backend_defers_off_nvidia(route, monkeypatch):
    route("9.0", cuda=(12, 3))
    for kw in ({"out_of_tree": True},):
        _sglang_attention(monkeypatch, **kw)
        assert ga.default_backend("args", False, model()) is None
    for kw in ({"cuda": False}, {"hip": True}):
        _sglang_attention(monkeypatch, **kw)
        assert ga.default_backend("args", False, model()) is None
    route()
    _sglang_attention(monkeypatch)
    assert ga.default_backend("args", False, model()) is None


def test_default_backend_model_traits(route, monkeypatch):
    route("10.0", cuda=(12, 8))  # SM100 prefers trtllm_mha for MHA, flashinfer for MLA
    _sglang_attention(monkeypatch)
    assert ga.default_backend("args", False, model()) == "trtllm_mha"
    assert ga.default_backend("args", True, model()) == "flashinfer"
    assert ga.default_backend("args", False, model(asymmetric=True)) == "fa4"
    assert ga.default_backend("args", False, model(architectures=["WhisperForConditionalGeneration"])) == "flashinfer"
    # speculative top-k > 1 rules trtllm_mha out; the portable tail is flashinfer, or
    # triton where the model has attention sinks or flashinfer is not installed
    _sglang_attention(monkeypatch, algorithm="EAGLE", topk=4, no_spec=False)
    assert ga.default_backend("args", False, model()) == "flashinfer"
    assert ga.default_backend("args", False, model(sinks=True)) == "triton"
    _sglang_attention(monkeypatch, algorithm="EAGLE", topk=4, no_spec=False, flashinfer=False)
    assert ga.default_backend("args", False, model()) == "triton"


def test_default_backend_speculative_top_k_not_decided(route, monkeypatch):
    route("10.0", cuda=(12, 8))
    _sglang_attention(monkeypatch, algorithm="EAGLE", topk=None)
    assert ga.default_backend("args", False, model()) == "flashinfer"
    _sglang_attention(monkeypatch, algorithm="EAGLE", topk=None, forces=lambda algorithm: algorithm == "EAGLE")
    assert ga.default_backend("args", False, model()) == "trtllm_mha"
    _sglang_attention(monkeypatch, algorithm="EAGLE", topk=None, forces=lambda algorithm: False)
    assert ga.default_backend("args", False, model()) == "flashinfer"
    _sglang_attention(monkeypatch, algorithm="EAGLE", topk=1)
    assert ga.default_backend("args", False, model()) == "trtllm_mha"


def test_model_traits(monkeypatch):
    _sglang_attention(monkeypatch, algorithm="EAGLE", topk=None, no_spec=False)
    base = sys.modules[ga._BASE]
    t = ga._model_traits(base, "args", True, model(["WhisperForConditionalGeneration"], True, True), False, (12, 4))
    assert (t.kind, t.asymmetric_kv, t.attention_sinks, t.speculative_multi_branch, t.speculative_topk_pending,
            t.cross_attention_needs_flashinfer, t.flashinfer_available, t.cuda) == (
        "mla", True, True, True, True, True, False, (12, 4))
    t = ga._model_traits(base, "args", False, SimpleNamespace(hf_config=SimpleNamespace()), True, None)
    assert (t.kind, t.asymmetric_kv, t.attention_sinks, t.cross_attention_needs_flashinfer,
            t.flashinfer_available, t.cuda) == ("mha", False, False, False, True, None)


def _view(attention=None, prefill=None, decode=None):
    return SimpleNamespace(attention_backend=attention, prefill_attention_backend=prefill,
                           decode_attention_backend=decode)


def test_check_explicit_backends_refuses_what_cannot_run(route, monkeypatch):
    route("9.0", cuda=(12, 2))
    _sglang_attention(monkeypatch)
    with pytest.raises(ArchDecisionError) as e:
        ga.check_explicit_backends(_view(attention="fa3"))
    msg = str(e.value)
    assert msg.startswith("--attention-backend fa3: fa3 cannot run MHA prefill on 9.0")
    assert "CUDA >= 12.3" in msg
    assert ". Valid here: " in msg and "flashinfer" in msg.split("Valid here: ")[1]
    assert msg.endswith(". (checked by sglang_arch.arch)")


def test_check_explicit_backends_by_phase_and_kind(route, monkeypatch):
    route("10.0", cuda=(12, 8))  # cutedsl_mla: MLA decode only
    _sglang_attention(monkeypatch, mla=True)
    assert ga.check_explicit_backends(_view(decode="cutedsl_mla")) is None
    with pytest.raises(ArchDecisionError) as e:
        ga.check_explicit_backends(_view(prefill="cutedsl_mla"))
    assert str(e.value).startswith("--prefill-attention-backend cutedsl_mla: cutedsl_mla cannot run MLA prefill")
    with pytest.raises(ArchDecisionError) as e:
        ga.check_explicit_backends(_view(attention="cutedsl_mla"))
    assert str(e.value).startswith("--attention-backend cutedsl_mla: cutedsl_mla cannot run MLA prefill")
    _sglang_attention(monkeypatch, mla=False)
    with pytest.raises(ArchDecisionError) as e:
        ga.check_explicit_backends(_view(decode="cutedsl_mla"))
    assert str(e.value).startswith("--decode-attention-backend cutedsl_mla: cutedsl_mla cannot run MHA decode")


def test_check_explicit_backends_passes_what_runs_or_is_unknown(route, monkeypatch):
    route("9.0", cuda=(12, 3))
    _sglang_attention(monkeypatch)
    assert ga.check_explicit_backends(_view(attention="fa3", prefill="flashinfer", decode="not_in_registry")) is None
    _sglang_attention(monkeypatch, cuda=False)
    assert ga.check_explicit_backends(_view(attention="cutedsl_mla")) is None
    route()
    assert ga.check_explicit_backends(_view(attention="cutedsl_mla")) is None


# --- DSA: sglang 0.5.23 overrides.py _dsa_kv_cache_dtype_default / _dsa_split_backend_resolution
# (FP8 KV cache and trtllm on major >= 10; bfloat16 with flashmla_sparse / fa3 below; GLM-5
# FP8 on SM12x: flashinfer_sparse_mla), D10 (tilelang off the table).

DEEPSEEK_FAMILY = frozenset({"DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"})


def _sglang_dsa(monkeypatch, *, cuda=True, hip=False, dsa=True, refuse=None):
    log, checked = Log(), []

    def check_pair(kv, prefill, decode, *, hip, dcp_size=1):
        checked.append((kv, prefill, decode, hip, dcp_size))
        if refuse:
            raise ValueError(refuse)

    module(monkeypatch, ga._OVERRIDES, model_config_of=lambda view: view._model_config,
           _DEEPSEEK_FAMILY_ARCHS=DEEPSEEK_FAMILY, logger=log, _check_dsa_backend_constraints=check_pair)
    module(monkeypatch, "sglang.srt.configs.model_config", is_deepseek_dsa=lambda hf_config: dsa)
    module(monkeypatch, "sglang.srt.runtime_context",
           get_platform=lambda: SimpleNamespace(is_cuda=cuda, is_hip=hip))
    return log, checked


def _dsa_view(arch="DeepseekV32ForCausalLM", kv="auto", prefill=None, decode=None, hisparse=False,
              sinks=False, dcp=1):
    hf_config = SimpleNamespace(architectures=[arch])
    if sinks:
        hf_config.learnable_sink = True
    return SimpleNamespace(kv_cache_dtype=kv, dsa_prefill_backend=prefill, dsa_decode_backend=decode,
                           enable_hisparse=hisparse, dcp_size=dcp, _model_config=SimpleNamespace(hf_config=hf_config))


@pytest.mark.parametrize("cap, kv", [("9.0", "bfloat16"), ("10.0", "fp8_e4m3"), ("12.0", "fp8_e4m3"),
                                     ("13.0", "fp8_e4m3")])
def test_dsa_kv_cache_default(route, monkeypatch, cap, kv):
    route(cap)
    log, _ = _sglang_dsa(monkeypatch)
    assert ga.dsa_kv_cache_dtype_default(_dsa_view()) == {"kv_cache_dtype": kv}
    assert len(log.lines) == 1
    assert log.lines[0].startswith(f"warning: Setting KV cache dtype to {kv} for DeepSeek DSA (tier ")
    assert log.lines[0].endswith("; sglang_arch.arch).")


def test_dsa_kv_cache_default_warns_about_explicit_backends(route, monkeypatch):
    route("10.0")
    log, _ = _sglang_dsa(monkeypatch)
    assert ga.dsa_kv_cache_dtype_default(_dsa_view(decode="trtllm")) == {"kv_cache_dtype": "fp8_e4m3"}
    assert log.lines[0].startswith("warning: When specifying --dsa-prefill-backend or --dsa-decode-backend")
    assert len(log.lines) == 2


@pytest.mark.parametrize("case", ["explicit dtype", "sinks", "not dsa", "other family", "not cuda", "hip", "no gpu"])
def test_dsa_kv_cache_default_leaves_the_other_arms_to_sglang(route, monkeypatch, case):
    route(None if case == "no gpu" else "10.0")
    log, _ = _sglang_dsa(monkeypatch, dsa=case != "not dsa", cuda=case != "not cuda", hip=case == "hip")
    view = _dsa_view(kv="bfloat16" if case == "explicit dtype" else "auto", sinks=case == "sinks",
                     arch="LlamaForCausalLM" if case == "other family" else "DeepseekV32ForCausalLM")
    assert ga.dsa_kv_cache_dtype_default(view) is None
    assert log.lines == []


@pytest.mark.parametrize("cap, kv, pair", [
    ("9.0", "bfloat16", ("flashmla_sparse", "fa3")), ("9.0", "fp8_e4m3", ("flashmla_kv", "flashmla_kv")),
    ("10.0", "fp8_e4m3", ("trtllm", "trtllm")), ("10.0", "bfloat16", ("flashmla_sparse", "trtllm")),
    ("13.0", "fp8_e4m3", ("tilelang", "tilelang")), ("13.0", "bfloat16", ("tilelang", "tilelang"))])
def test_dsa_split_backends(route, monkeypatch, cap, kv, pair):
    route(cap)
    log, checked = _sglang_dsa(monkeypatch)
    assert ga.dsa_split_backends(_dsa_view(kv=kv, dcp=None)) == {"dsa_prefill_backend": pair[0],
                                                                 "dsa_decode_backend": pair[1]}
    assert checked == [(kv, pair[0], pair[1], False, 1)]
    assert log.lines[0].startswith(f"warning: Set DSA backends for {kv} KV Cache: prefill={pair[0]}, "
                                   f"decode={pair[1]} (")


def test_dsa_split_backends_keeps_the_users_choice(route, monkeypatch):
    route("10.0")
    _, checked = _sglang_dsa(monkeypatch)
    assert ga.dsa_split_backends(_dsa_view(kv="fp8_e4m3", prefill="tilelang", dcp=2)) == {
        "dsa_decode_backend": "trtllm"}
    assert checked == [("fp8_e4m3", "tilelang", "trtllm", False, 2)]
    assert ga.dsa_split_backends(_dsa_view(kv="fp8_e4m3", prefill="tilelang", decode="tilelang")) == {}
    assert checked[-1] == ("fp8_e4m3", "tilelang", "tilelang", False, 1)


def test_dsa_split_backends_glm5_fp8_on_sm12x(route, monkeypatch):
    route("12.0")
    log, checked = _sglang_dsa(monkeypatch)
    for hisparse in (False, True):  # upstream's GLM-5 arm comes before its HiSparse arm
        view = _dsa_view(arch="GlmMoeDsaForCausalLM", kv="fp8_e4m3", hisparse=hisparse)
        assert ga.dsa_split_backends(view) == {"dsa_prefill_backend": "flashinfer_sparse_mla",
                                               "dsa_decode_backend": "flashinfer_sparse_mla"}
    assert checked == []  # as upstream: that arm runs no constraint check
    view = _dsa_view(arch="GlmMoeDsaForCausalLM", kv="bfloat16")  # D11: FlashMLA and trtllm-gen have no SM120 build
    assert ga.dsa_split_backends(view) == {"dsa_prefill_backend": "tilelang", "dsa_decode_backend": "tilelang"}


@pytest.mark.parametrize("case", ["sinks", "hisparse", "not dsa", "not cuda", "hip", "no gpu"])
def test_dsa_split_backends_leaves_the_other_arms_to_sglang(route, monkeypatch, case):
    route(None if case == "no gpu" else "10.0")
    log, checked = _sglang_dsa(monkeypatch, dsa=case != "not dsa", cuda=case != "not cuda", hip=case == "hip")
    view = _dsa_view(kv="fp8_e4m3", sinks=case == "sinks", hisparse=case == "hisparse")
    assert ga.dsa_split_backends(view) is None
    assert (log.lines, checked) == ([], [])


def test_dsa_split_backends_refused_pair_is_a_clear_error(route, monkeypatch):
    route("8.0")  # D11: FlashMLA has no 8.0 build; tilelang, whose FP8 cache SGLang refuses below SM89
    _sglang_dsa(monkeypatch, refuse="CUDA TileLang FP8 KV requires SM89 or newer.")
    with pytest.raises(ArchDecisionError) as e:
        ga.dsa_split_backends(_dsa_view(kv="fp8_e4m3"))
    msg = str(e.value)
    assert msg.startswith("DSA backends prefill=tilelang, decode=tilelang (tier 8.0 (exact): FP8 KV cache -> "
                          "flashmla_kv, but on 8.0 prefill flashmla_kv: flashmla has no build for 8.0")
    assert "CUDA TileLang FP8 KV requires SM89 or newer." in msg
    assert msg.endswith("(checked by sglang_arch.arch)")


@pytest.mark.parametrize("cap", ["7.0", "7.5", "6.1"])
@pytest.mark.parametrize("kv", ["bfloat16", "fp8_e4m3"])
def test_dsa_split_backends_below_sm80_refuse_the_model_with_why(route, monkeypatch, cap, kv):
    """No DSA kernel has a build below SM80 (TileLang compiles from SM80): one line, why."""
    route(cap)
    log, checked = _sglang_dsa(monkeypatch)
    for prefill, decode in ((None, None), ("tilelang", None), (None, "tilelang")):
        with pytest.raises(ArchDecisionError) as e:
            ga.dsa_split_backends(_dsa_view(kv=kv, prefill=prefill, decode=decode))
        msg = str(e.value)
        assert "\n" not in msg
        assert msg.startswith("DeepseekV32ForCausalLM uses DeepSeek sparse attention, and no DSA kernel has a "
                              "build for this GPU: ")
        assert f"tilelang: tilelang has no build for {cap} (builds: jit:8.0+)" in msg
        assert msg.endswith(f"no DSA kernel has a build for {cap} (checked by sglang_arch.arch)")
    assert (log.lines, checked) == ([], [])
    # Both phases the user's own: SGLang's pass and its checks take them, as upstream.
    assert ga.dsa_split_backends(_dsa_view(kv=kv, prefill="tilelang", decode="tilelang")) == {}


# --- the speculative draft's build guard and deterministic replacements ------------------

_DRAFT_MAP = {name: None for name in ("flashinfer", "triton", "intel_amx", "intel_xpu", "aiter", "fa3",
                                      "hybrid_linear_attn", "flashmla", "trtllm_mha", "trtllm_mla", "cutedsl_mla",
                                      "dsa", "nsa", "ascend", "fa4", "dsv4")}  # draft_utils.py 0.5.23


def _draft_factory(monkeypatch, backend, kind="mha"):
    module(monkeypatch, "sglang.srt.runtime_context", attention_backends=lambda: (backend, backend),
           get_platform=lambda: SimpleNamespace(is_cuda=True, is_hip=False))
    monkeypatch.setattr(ga, "_runner_traits", lambda runner, ctx: ga.ModelTraits(kind=kind, cuda=ctx.cuda))
    return SimpleNamespace(draft_attn_backend=None, draft_model_runner=SimpleNamespace())


@pytest.mark.parametrize("cap, backend, built", [("9.0", "fa3", None), ("7.0", "flashinfer", "triton"),
                                                 ("13.0", "fa3", "flashinfer")])
def test_guard_draft_backend_builds_a_runnable_factory_backend(route, monkeypatch, cap, backend, built):
    route(cap)
    factory = _draft_factory(monkeypatch, backend)
    assert ga.guard_draft_backend(factory, "decode_attention_backend", _DRAFT_MAP, "{backend_type}") is None
    assert factory.draft_attn_backend == built  # None: SGLang builds its own (it runs here)


@pytest.mark.parametrize("backend", ["flashinfer", "triton"])
def test_guard_draft_backend_refuses_speculation_where_no_draft_backend_runs(route, monkeypatch, backend):
    route("6.1")  # the registry's default torch_native has no draft backend; FlashInfer and Triton no build
    factory = _draft_factory(monkeypatch, backend)
    with pytest.raises(ArchDecisionError) as e:
        ga.guard_draft_backend(factory, "decode_attention_backend", _DRAFT_MAP, "{backend_type}")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"--speculative-algorithm: the speculative draft (decode_attention_backend) {backend}: ")
    assert "no draft backend SGLang can build runs MHA decode on 6.1" in msg
    assert msg.endswith("(checked by sglang_arch.arch)")
    assert factory.draft_attn_backend is None


def _deterministic_sglang(monkeypatch, deepseek=False):
    module(monkeypatch, "sglang.srt.server_args",
           DETERMINISTIC_ATTENTION_BACKEND_CHOICES=["ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton"])
    module(monkeypatch, ga._OVERRIDES, _deterministic_is_deepseek_model=lambda view: deepseek)


@pytest.mark.parametrize("deterministic, cap, name, built", [
    (False, "10.5", "fa4", "trtllm_mha"),  # the registry's MHA default on 10.5
    (True, "10.5", "fa4", "flashinfer"),  # its deterministic decision (SGLang's rule on tier 10.3)
    (True, "13.0", "fa3", "flashinfer"),
    (True, "9.0", "fa3", None),  # runs: not replaced
])
def test_a_replacement_under_deterministic_inference_is_the_deterministic_decision(
        route, monkeypatch, deterministic, cap, name, built):
    ctx = route(cap)
    _deterministic_sglang(monkeypatch)
    args = SimpleNamespace(enable_deterministic_inference=deterministic)
    swap = ga._replacement(ctx, args, name, ("prefill", "decode"), ga.ModelTraits(cuda=ctx.cuda))
    assert (swap and swap.backend) == built
    if deterministic and built:
        assert f"the registry's deterministic backend {built} runs here" in swap.reason


def test_no_deterministic_backend_refuses_the_users_flag(route, monkeypatch):
    ctx = route("6.1")
    _deterministic_sglang(monkeypatch)
    args = SimpleNamespace(enable_deterministic_inference=True)
    with pytest.raises(ArchDecisionError) as e:
        ga._replacement(ctx, args, "triton", ("prefill",), ga.ModelTraits(cuda=ctx.cuda))
    msg = str(e.value)
    assert msg.startswith("--enable-deterministic-inference: triton cannot run MHA prefill on 6.1")
    assert "no deterministic attention backend runs MHA on 6.1" in msg and "\n" not in msg


# --- DSA K-pool tail: sglang 0.5.23 dsa/dsa_backend_kpool.py _resolve_kpool_tail_backend
# (flashmla_sparse -> trtllm on major >= 10, fa3 on major 9; other backends, no top-k
# indices or no K-pool (dsa_index_kpool <= 1): the backend it was given)

@pytest.mark.parametrize("cap, backend", [("9.0", "fa3"), ("10.0", "trtllm"), ("10.3", "trtllm"),
                                          ("12.0", "tilelang"), ("13.0", "tilelang"), ("9.5", "tilelang")])
def test_dsa_kpool_tail_backend(route, monkeypatch, cap, backend):
    monkeypatch.setattr(ga, "_tail", {})
    route(cap)
    assert ga.dsa_kpool_tail_backend(SimpleNamespace(dsa_index_kpool=2), object(), "flashmla_sparse") == backend


@pytest.mark.parametrize("kpool, indices, impl, cap", [
    (1, object(), "flashmla_sparse", "10.0"), (2, None, "flashmla_sparse", "10.0"), (2, object(), "fa3", "12.0"),
    (2, object(), "flashmla_kv", "12.0"), (2, object(), "flashmla_sparse", None)])
def test_dsa_kpool_tail_backend_leaves_what_the_gpu_does_not_decide_to_sglang(route, monkeypatch, kpool, indices,
                                                                               impl, cap):
    monkeypatch.setattr(ga, "_tail", {})
    route(cap)
    assert ga.dsa_kpool_tail_backend(SimpleNamespace(dsa_index_kpool=kpool), indices, impl) is None


def test_dsa_kpool_tail_backend_is_decided_once_per_machine(route, monkeypatch):
    monkeypatch.setattr(ga, "_tail", {})
    from sglang_arch.arch.policies import dsa

    route("10.0")
    asked = []
    real = dsa.kpool_tail_backend
    monkeypatch.setattr(dsa, "kpool_tail_backend", lambda res, impl, cuda=None: asked.append(impl) or real(res, impl))
    for _ in range(3):
        assert ga.dsa_kpool_tail_backend(SimpleNamespace(dsa_index_kpool=2), object(), "flashmla_sparse") == "trtllm"
    assert asked == ["flashmla_sparse"]


def test_scoped_self_answers_each_probe_and_falls_back_where_the_instance_cannot_take_them():
    """hooks.scoped_self: the probes answer the glue's values of their own type during the
    call and are put back after; an instance without a ``__dict__`` runs SGLang's own
    probes (the plugin never breaks the forward pass)."""
    from sglang_arch.integrations.sglang import hooks

    def ask(self):
        return (0, False)

    hook = hooks.scoped_self(ask, ("_get_sm", "_is_bw"))

    class Backend:
        def __init__(self):
            self._get_sm, self._is_bw = (lambda: 100), (lambda: True)

    def original(self):
        return self._get_sm(), self._is_bw()

    backend = Backend()
    sm, bw = hook(original, backend)
    assert (sm, bw) == (0, False) and type(sm) is int and type(bw) is bool
    assert (backend._get_sm(), backend._is_bw()) == (100, True)

    class Slotted:
        __slots__ = ()

        def _get_sm(self):
            return 90

        def _is_bw(self):
            return False

    assert hook(original, Slotted()) == (90, False)


def test_per_machine_decides_again_for_another_machine_context_even_under_a_reused_key():
    """glue.per_machine: an answer cached for one machine context is not served to another
    (``runtime.reset()`` builds a new one, which may reuse the old object's id)."""
    from sglang_arch.integrations.sglang import glue

    cache, calls = {}, []

    def decide(answer):
        return lambda: calls.append(answer) or answer

    first, second = object(), object()
    assert glue.per_machine(cache, first, "k", decide(1)) == 1
    assert glue.per_machine(cache, first, "k", decide(2)) == 1  # decided once for this machine
    assert glue.per_machine(cache, second, "k", decide(3)) == 3  # another machine: decided again
    assert calls == [1, 3]


def test_dsa_dg_native_verify_is_the_registrys_decision_and_sglangs_fact_without_a_gpu(monkeypatch):
    """glue.attention.dsa_dg_native_verify: what dsa_backend's two ``is_sm100`` reads answer
    (the scoped_fact hook): the registry's DG-native decision per machine (10.7 and an
    unknown 10.5 keep the per-token schedule); None (SGLang's own ``is_sm100``) without an
    NVIDIA GPU."""
    import sys
    import types

    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue
    from sglang_arch.integrations.sglang.glue import attention as ga

    rc = types.ModuleType("sglang.srt.runtime_context")
    rc.get_platform = lambda: types.SimpleNamespace(is_sm100=True, is_cuda=True, is_hip=False)
    monkeypatch.setitem(sys.modules, "sglang.srt.runtime_context", rc)
    monkeypatch.setattr(ga, "_dg_native", {})
    for cap, native in (("10.0", True), ("10.3", True), ("10.7", False), ("9.0", False), ("10.5", False)):
        ctx = runtime.machine(capability=cap, cuda=(12, 9))
        monkeypatch.setattr(glue, "current", lambda: ctx)
        assert ga.dsa_dg_native_verify() is native, cap
    monkeypatch.setattr(glue, "current", lambda: types.SimpleNamespace(resolution=None))
    assert ga.dsa_dg_native_verify() is None
    runtime.reset()


def test_k3_sp_collective_sm_is_the_band_sm_and_sglangs_probe_without_a_gpu(monkeypatch):
    """glue.collectives.k3_sp_collective_sm: the SM _init_state's band reads; None (SGLang's
    probe) without an NVIDIA GPU."""
    import types

    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import glue
    from sglang_arch.integrations.sglang.glue import collectives as gc

    for cap, sm in (("10.0", 100), ("10.3", 103), ("10.5", 103), ("10.7", 107), ("9.0", 90), ("11.5", 115)):
        ctx = runtime.machine(capability=cap, cuda=(12, 9))
        monkeypatch.setattr(glue, "current", lambda: ctx)
        assert gc.k3_sp_collective_sm() == sm, cap
    monkeypatch.setattr(glue, "current", lambda: types.SimpleNamespace(resolution=None))
    assert gc.k3_sp_collective_sm() is None
    runtime.reset()


def test_trtllm_mla_on_sm12x_is_refused_for_prefill_only_at_argument_resolution(route, monkeypatch):
    """An explicit trtllm_mla on SM12x: decode runs (FlashInfer's XQA MLA), prefill is refused
    while SGLang resolves its arguments, before any weight loads, naming what runs."""
    route("12.0", "pcie-p2p", 8)
    _sglang_attention(monkeypatch, mla=True)
    assert ga.check_explicit_backends(_view(prefill="triton", decode="trtllm_mla")) is None
    for view, flag in ((_view(attention="trtllm_mla"), "--attention-backend"),
                       (_view(prefill="trtllm_mla", decode="trtllm_mla"), "--prefill-attention-backend")):
        with pytest.raises(ArchDecisionError) as e:
            ga.check_explicit_backends(view)
        assert str(e.value).startswith(f"{flag} trtllm_mla: trtllm_mla cannot run MLA prefill on 12.0")
        assert "Valid here: flashinfer, triton" in str(e.value)
