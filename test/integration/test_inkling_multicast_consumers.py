"""SGLang 0.5.23's own Inkling communication helpers (``srt/models/inkling_common/kernels/
comm.py``) against a group whose torch symm-mem communicator has no NVLink multicast.

The plugin keeps such a communicator enabled for torch's two-shot kernel (``comm.multicast``
False); Inkling's helpers read "enabled" as "multicast" and would call
``torch.ops.symm_mem.multimem_*``.  Through the plugin each helper takes the path stock
SGLang takes for a disabled communicator (NCCL's collectives through the group, no symm-mem
buffer, no fused kernel), and where the communicator has multicast its multicast path is
untouched.  The group, the communicator and the JIT module are stand-ins (no GPU); the
helpers are SGLang's own functions, routed by the plugin; every multimem op either records
its call or, where none may run, fails the test."""

import importlib.util
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_arch.integrations.sglang.glue import collectives

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import routed  # noqa: E402

_COMM = "sglang.srt.models.inkling_common.kernels.comm"
CONSUMERS = ("ensure_inkling_ar_resources", "ar_sconv_norm_fusable", "get_ar_buffer", "symm_mem_all_reduce",
             "_symm_mem_comm", "scattered_ar_sconv_fusable", "fullwidth_ar_sconv_fusable")
MULTIMEM_OPS = ("multimem_all_reduce_", "reduce_scatter_out", "multimem_all_gather_out")
HIDDEN = 6144  # Inkling's hidden size


@pytest.fixture(scope="module")
def comm_module():
    from sglang.srt.models.inkling_common.kernels import comm
    from sglang_arch.integrations.sglang import routing

    known = {target.path for target in routing.all_routed_targets()}  # (a plugin without these targets: none)
    with routed(*(path for path in (f"{_COMM}.{name}" for name in CONSUMERS) if path in known)):
        yield comm


def _cuda_looking():
    import torch

    class CudaLooking(torch.Tensor):
        """A CPU tensor that says it is on CUDA (the helpers check ``input.is_cuda``)."""

        @property
        def is_cuda(self):
            return True

    return CudaLooking


class Group:
    """Stands in for SGLang's ``GroupCoordinator``: NCCL's collectives record their calls."""

    def __init__(self, world_size, comm):
        self.world_size, self.torch_symm_mem_comm, self.calls = world_size, comm, []

    def all_reduce(self, input_):
        self.calls.append("all_reduce")
        return input_

    def reduce_scatter_tensor(self, output, input_):
        self.calls.append("reduce_scatter_tensor")

    def all_gather(self, input_, dim=-1):
        import torch

        self.calls.append("all_gather")
        return torch.cat([input_] * self.world_size, dim=dim)


@pytest.fixture
def stage(monkeypatch, comm_module, request):
    """``stage(world_size, multicast, scattered=False, custom_ar=True)``: a group of that size
    whose communicator is enabled, with or without multicast; the multimem ops record into
    ``multimem`` (or fail the test where ``multicast`` is False), the custom-AR resources
    built into ``resources``."""
    import torch

    from sglang_arch.integrations.sglang import routing

    multimem, resources = [], []
    # a fresh process: no communicator noted, nothing settled (undone after the test)
    monkeypatch.setitem(collectives._two_shot, "made", False)
    monkeypatch.setitem(collectives._two_shot, "multicast_made", False)
    routing.unsettle()
    request.addfinalizer(routing.unsettle)

    def use(world_size, multicast, scattered=False, custom_ar=True):
        comm = SimpleNamespace(disabled=False, multicast=multicast, dtype=torch.bfloat16, world_size=world_size,
                               max_size=1 << 30, buffer=torch.zeros(1 << 22, dtype=torch.bfloat16),
                               group=SimpleNamespace(group_name="tp"),
                               should_torch_symm_mem_allreduce=lambda inp: True)
        collectives.note_two_shot_communicator(comm)  # as init_torch_symm_mem notes each one it keeps
        for op in MULTIMEM_OPS:
            def called(*args, _op=op):
                assert multicast, f"torch.ops.symm_mem.{_op} called on a communicator without multicast"
                multimem.append(_op)
            monkeypatch.setattr(torch.ops.symm_mem, op, called)
        flags = SimpleNamespace(get=lambda: custom_ar)
        monkeypatch.setattr(comm_module, "envs", SimpleNamespace(
            SGLANG_OPT_USE_INKLING_CUSTOM_AR=flags, SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV_NORM=flags,
            SGLANG_OPT_USE_INKLING_FUSED_AR_SCONV=flags))
        monkeypatch.setattr(comm_module, "get_exec", lambda: SimpleNamespace(
            comm=SimpleNamespace(enable_scattered_sconv=scattered),
            deterministic=SimpleNamespace(enable_deterministic_inference=False)))
        monkeypatch.setattr(comm_module, "is_cuda", lambda: True)
        monkeypatch.setattr(comm_module, "is_in_prefill_graph_scope", lambda: False)
        jit = SimpleNamespace(MAX_BARRIER_BLOCKS=160, select_ar_config=lambda tokens, world: ("mm", 32, 512))
        monkeypatch.setattr(comm_module, "_ar_jit", lambda: jit)

        def build(c):
            assert multicast, "custom-AR resources (multicast_ptr) built for a communicator without multicast"
            resources.append(c)
            return SimpleNamespace(world=world_size, rank=0, multicast_ptr=0x1000, v4_in=(0, 0), v4_cur=0,
                                   ssconv_out=1 << 40)

        monkeypatch.setattr(comm_module, "_get_inkling_ar_resources", build)
        return Group(world_size, comm)

    use.multimem, use.resources = multimem, resources
    return use


def _batch(decode=False, extend=False):
    mode = SimpleNamespace(is_decode=lambda: decode, is_target_verify=lambda: False, is_extend=lambda: extend,
                           is_draft_extend_v2=lambda: False, is_extend_without_speculative=lambda: extend)
    return SimpleNamespace(forward_mode=mode)


def _hidden(tokens, width=HIDDEN):
    import torch

    return torch.ones(tokens, width, dtype=torch.bfloat16).as_subclass(_cuda_looking())


@pytest.mark.parametrize("world_size", [4, 8])
def test_without_multicast_the_all_reduce_goes_through_the_group(comm_module, stage, world_size):
    for custom_ar in (False, True):
        group = stage(world_size, multicast=False, custom_ar=custom_ar)
        x = _hidden(4)
        assert comm_module.symm_mem_all_reduce(x, group) is x
        assert group.calls == ["all_reduce"]
    assert stage.multimem == [] and stage.resources == []


@pytest.mark.parametrize("world_size", [4, 8])
def test_without_multicast_no_symm_mem_buffer_resources_or_fused_kernel(comm_module, stage, world_size):
    group = stage(world_size, multicast=False)
    comm_module.ensure_inkling_ar_resources(group)
    assert comm_module.get_ar_buffer(group, 4, HIDDEN, group.torch_symm_mem_comm.dtype) is None
    assert comm_module.ar_sconv_norm_fusable(group, _batch(decode=True), 4, HIDDEN, group.torch_symm_mem_comm.dtype) \
        is False
    assert comm_module.fullwidth_ar_sconv_fusable(group, _batch(extend=True), 4096, HIDDEN,
                                                  group.torch_symm_mem_comm.dtype) is False
    group = stage(world_size, multicast=False, scattered=True)
    assert comm_module.scattered_ar_sconv_fusable(group, _batch(extend=True), 64, HIDDEN,
                                                  group.torch_symm_mem_comm.dtype) is False
    assert stage.multimem == [] and stage.resources == []


@pytest.mark.parametrize("world_size", [4, 8])
def test_without_multicast_scattered_sconv_uses_the_groups_collectives(comm_module, stage, world_size):
    group = stage(world_size, multicast=False, scattered=True)
    x = _hidden(4)
    assert comm_module._symm_mem_comm(group, x, x.numel()) is None
    shard = comm_module.reduce_scatter_hidden(x, group)
    assert tuple(shard.shape) == (4, HIDDEN // world_size)
    gathered = comm_module.all_gather_hidden(shard, group)
    assert tuple(gathered.shape) == (4, HIDDEN)
    assert group.calls == ["reduce_scatter_tensor", "all_gather"]
    assert stage.multimem == []


@pytest.mark.parametrize("world_size", [4, 8])
def test_with_multicast_the_consumers_keep_their_multicast_path(comm_module, stage, world_size):
    group = stage(world_size, multicast=True, custom_ar=False)
    comm = group.torch_symm_mem_comm
    x = _hidden(4)
    out = comm_module.symm_mem_all_reduce(x, group)
    assert tuple(out.shape) == (4, HIDDEN) and out.data_ptr() == comm.buffer.data_ptr()
    buf = comm_module.get_ar_buffer(group, 4, HIDDEN, comm.dtype)
    assert buf is not None and buf.data_ptr() == comm.buffer.data_ptr()
    assert comm_module._symm_mem_comm(group, x, x.numel()) is comm
    comm_module.reduce_scatter_hidden(x, group)
    comm_module.all_gather_hidden(_hidden(4, HIDDEN // world_size), group)
    assert stage.multimem == ["multimem_all_reduce_", "reduce_scatter_out", "multimem_all_gather_out"]
    assert group.calls == []

    group = stage(world_size, multicast=True)
    comm = group.torch_symm_mem_comm
    comm_module.ensure_inkling_ar_resources(group)
    assert comm_module.ar_sconv_norm_fusable(group, _batch(decode=True), 4, HIDDEN, comm.dtype) is True
    assert comm_module.fullwidth_ar_sconv_fusable(group, _batch(extend=True), 4096, HIDDEN, comm.dtype) is True
    group = stage(world_size, multicast=True, scattered=True)
    assert comm_module.scattered_ar_sconv_fusable(group, _batch(extend=True), 64, HIDDEN, comm.dtype) is True
    assert len(stage.resources) == 4
    # the same communicator object without multicast: its flag alone decides
    group.torch_symm_mem_comm.multicast = False
    collectives.note_two_shot_communicator(group.torch_symm_mem_comm)
    assert comm_module.scattered_ar_sconv_fusable(group, _batch(extend=True), 64, HIDDEN, comm.dtype) is False
    assert comm_module.symm_mem_all_reduce(x, group) is x and group.calls == ["all_reduce"]
    assert len(stage.resources) == 4


def test_the_consumers_are_routed_and_take_the_group_by_name_too(comm_module, stage):
    for name in CONSUMERS:
        assert getattr(comm_module, name).__sglang_arch_target__ == f"{_COMM}.{name}"
    group = stage(4, multicast=False)
    assert comm_module.get_ar_buffer(group=group, num_tokens=4, hidden=HIDDEN,
                                     dtype=group.torch_symm_mem_comm.dtype) is None
    x = _hidden(4)
    assert comm_module.symm_mem_all_reduce(x, group=group) is x
    assert group.calls == ["all_reduce"] and stage.multimem == []


def test_with_multicast_alone_the_consumers_are_sglangs_own_functions(comm_module, stage, monkeypatch):
    """No communicator without multicast made in the process: once decided, each consumer's
    name holds SGLang's own code (marked routed), not the hook."""
    from sglang_arch.integrations.sglang import routing

    monkeypatch.setitem(collectives._two_shot, "made", False)
    routing.unsettle()
    group = stage(4, multicast=True, custom_ar=False)
    comm_module.get_ar_buffer(group, 4, HIDDEN, group.torch_symm_mem_comm.dtype)
    bound = comm_module.get_ar_buffer
    assert bound.__code__ is bound.__wrapped__.__code__
    assert bound.__sglang_arch_target__ == f"{_COMM}.get_ar_buffer"
    routing.unsettle()


def _settled(comm_module, name):
    """The function SGLang's name holds once the consumer decided in this process."""
    from sglang_arch.integrations.sglang import routing

    return routing.settle(f"{_COMM}.{name}")


def test_on_a_node_without_multicast_each_consumer_settles_to_its_disabled_path(comm_module, stage):
    """Only communicators without multicast in the process: each consumer's name holds, not
    the hook, but what SGLang's function does on a disabled communicator: its constant
    answer there with SGLang's parameters, or (the all-reduce) SGLang's own body reading no
    Inkling world size."""
    import inspect

    from sglang_arch.integrations.sglang import specialize

    group = stage(8, multicast=False)
    for name in CONSUMERS:
        bound = _settled(comm_module, name)
        original = bound.__wrapped__
        assert getattr(comm_module, name) is bound and bound.__code__ is not original.__code__, name
        assert inspect.signature(bound).parameters.keys() == inspect.signature(original).parameters.keys(), name
        assert bound.__defaults__ == original.__defaults__ and bound.__kwdefaults__ == original.__kwdefaults__, name
    all_reduce = comm_module.symm_mem_all_reduce
    assert all_reduce.__code__.co_code == all_reduce.__wrapped__.__code__.co_code
    assert all_reduce.__globals__ is vars(comm_module)
    assert vars(comm_module)[specialize.global_name(all_reduce.__wrapped__, "_INKLING_AR_WORLD_SIZES")] == ()
    with pytest.raises(TypeError):  # a call SGLang's function refuses is refused alike
        comm_module.get_ar_buffer(group, 4, HIDDEN)
    x = _hidden(4)
    assert comm_module.symm_mem_all_reduce(x, group) is x and group.calls == ["all_reduce"]
    assert stage.multimem == [] and stage.resources == []


def test_with_both_kinds_of_communicator_the_consumers_keep_the_hook(comm_module, stage):
    from sglang_arch.integrations.sglang import routing

    stage(8, multicast=False)
    stage(8, multicast=True)
    for name in CONSUMERS:
        target, _original, hook, _settling = routing._settling[f"{_COMM}.{name}"]
        assert _settled(comm_module, name) is hook, name


_MODES = {"decode": _batch(decode=True), "extend": _batch(extend=True), "neither": _batch()}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(world_size=st.sampled_from([1, 2, 3, 4, 6, 8]), state=st.sampled_from(["none", "disabled", "no-multicast"]),
       mode=st.sampled_from(sorted(_MODES)), tokens=st.sampled_from([0, 1, 4, 64, 4096]),
       hidden=st.sampled_from([HIDDEN, 6000, 128]), scattered=st.booleans(), custom_ar=st.booleans())
def test_settled_consumers_answer_as_stock_on_a_disabled_communicator(comm_module, stage, world_size, state, mode,
                                                                      tokens, hidden, scattered, custom_ar):
    """The settled bodies (a process whose communicators all lack multicast) against SGLang's
    own functions given the same group with its communicator disabled (stock's answer there),
    over world sizes, communicator states, forward modes and shapes."""
    import torch

    group = stage(8, multicast=False, scattered=scattered, custom_ar=custom_ar)  # notes the process's kind
    comm = group.torch_symm_mem_comm
    comm.world_size = world_size
    group = Group(world_size, None if state == "none" else comm)
    comm.disabled = state == "disabled"
    stock_group = Group(world_size, None if state == "none" else SimpleNamespace(**{**vars(comm), "disabled": True}))
    batch, dtype = _MODES[mode], torch.bfloat16
    for name in ("ar_sconv_norm_fusable", "scattered_ar_sconv_fusable", "fullwidth_ar_sconv_fusable"):
        settled, stock = _settled(comm_module, name), getattr(comm_module, name).__wrapped__
        assert settled(group, batch, tokens, hidden, dtype) == stock(stock_group, batch, tokens, hidden, dtype), name
    settled, stock = _settled(comm_module, "get_ar_buffer"), comm_module.get_ar_buffer.__wrapped__
    assert settled(group, max(tokens, 1), hidden, dtype) is stock(stock_group, max(tokens, 1), hidden, dtype) is None
    x = _hidden(max(tokens, 1), hidden)
    settled, stock = _settled(comm_module, "_symm_mem_comm"), comm_module._symm_mem_comm.__wrapped__
    assert settled(group, x, x.numel()) is stock(stock_group, x, x.numel()) is None
    settled, stock = _settled(comm_module, "symm_mem_all_reduce"), comm_module.symm_mem_all_reduce.__wrapped__
    assert settled(x, group) is stock(x, stock_group) is x
    assert group.calls == stock_group.calls
    _settled(comm_module, "ensure_inkling_ar_resources")(group)
    assert stage.multimem == [] and stage.resources == []
