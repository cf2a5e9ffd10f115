"""Tuned GEMM / GEMV paths keyed to one architecture: the plugin's hooks against SGLang
0.5.23's own functions, on every exact tier and on GPUs outside the table.

Each function reads the device inline, per call, to take a path tuned on one GPU:

- ``kernels/ops/gemm/cutedsl_bf16_gemm.py``: ``use_cutedsl_bf16_gemm`` and
  ``_tgv_bf16_gemm_out_run`` take K3's split-K table where ``get_device_sm() == 107``;
- ``kernels/ops/gemm/hopper_bf16_gemv.py``: ``use_hopper_bf16_gemv``'s window and
  ``_config``'s unroll are SM12x's where ``_is_sm12x()``;
- ``kernels/ops/gemm/muse_spark_router_gemv_cutedsl.py``: ``router_gemv_cute_eligible``
  takes the CuTe DSL GEMV where ``_is_sm100_family(...)``;
- ``srt/models/nemotron_h.py``: ``NemotronHMoE._forward_core`` takes the prefill overlap
  where ``is_sm120()``;
- ``srt/batch_overlap/single_batch_overlap.py``: ``SboFlags`` overlaps the combine with
  DeepGEMM's down GEMM where ``not is_blackwell()``.

Upstream's side reads a simulated device through SGLang's own probe (the torch read, the
JIT arch, the SM probe the module imported); the routed side is the plugin's hook over the
same original with the registry routed to the same capability.  Every other condition of
each function is met (or stubbed) so that the capability read decides.
"""

import importlib
import importlib.util
import sys
from types import ModuleType, SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.glue import moe as glue_moe  # noqa: E402
from sglang_arch.integrations.sglang.plan import upstream_platform_facts  # noqa: E402

UNKNOWN = ("9.5", "10.5", "10.9", "11.5", "12.3", "13.0")
CUDA = (12, 9)
GEMM = "sglang.kernels.ops.gemm.cutedsl_bf16_gemm"
GEMV = "sglang.kernels.ops.gemm.hopper_bf16_gemv"
ROUTER = "sglang.kernels.ops.gemm.muse_spark_router_gemv_cutedsl"
NEMOTRON = "sglang.srt.models.nemotron_h"
SBO = "sglang.srt.batch_overlap.single_batch_overlap"


def _cap(text):
    return Capability(*map(int, text.split(".")))


def _torch_reads(monkeypatch, machine, *cached):
    """``device(cap)``: torch's ``get_device_capability`` answers ``cap`` (SGLang's side; its
    probes in ``cached`` forget their cached answer), and the glue decides for ``cap``."""
    import torch

    def device(cap):
        c = _cap(cap)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *args, **kwargs: c.as_tuple())
        for probe in cached:
            probe.cache_clear()
        machine(cap)

    return device


_machines = {}


@pytest.fixture
def machine(monkeypatch):
    """``machine(cap)``: the plugin's glue decides for a GPU of capability ``cap``."""

    def use(cap):
        ctx = _machines.get(cap) or _machines.setdefault(cap, runtime.machine(capability=cap, cuda=CUDA))
        monkeypatch.setattr(glue, "current", lambda: ctx)
        return ctx

    return use


def _paths(cap):
    return runtime.machine(capability=cap, cuda=CUDA).gemm_paths()


# --- K3's split-K table (cutedsl_bf16_gemm) ---

K3_SHAPES = [(m, 6016, 7168) for m in (1, 8, 9, 16, 24, 32, 33, 64)] + [(8, 4096, 4096), (32, 8448, 7168)]


@pytest.fixture
def gemm(monkeypatch, machine):
    module = importlib.import_module(GEMM)

    def device(cap):
        c = _cap(cap)
        monkeypatch.setattr(module, "get_device_sm", lambda: c.sm)
        machine(cap)

    return module, device


def test_k3_table_selection_on_every_tier_and_unknown(gemm):
    module, device = gemm
    own, hook = upstream_and_hook(f"{GEMM}.use_cutedsl_bf16_gemm")
    premise = set()
    for cap in TIERS + UNKNOWN:
        device(cap)
        upstream = [own(*s) for s in K3_SHAPES]
        routed = [hook(own, *s) for s in K3_SHAPES]
        premise.add(tuple(upstream))
        if resolve(cap).match == "exact":
            assert routed == upstream, cap
        elif _cap(cap).sm != 107:  # no unknown GPU has SM 107: upstream never takes the table there
            assert routed == upstream, cap
        assert module.get_device_sm() == _cap(cap).sm  # the probe is SGLang's again after the call
    assert len(premise) == 2  # SM 10.7 takes the table, the rest do not


def _out_run(module, monkeypatch, calls):
    """SGLang's own ``_tgv_bf16_gemm_out_run`` with the two kernels it may launch recorded."""
    import torch

    kernel = ModuleType("sglang.kernels.ops.gemm.dense_bf16_gemm_warp_splitk")
    kernel.WarpSplitKTactic = lambda **kw: kw
    kernel.run_warp_splitk_dense = lambda *a, **kw: calls.append("warp_splitk")
    monkeypatch.setitem(sys.modules, kernel.__name__, kernel)
    monkeypatch.setattr(module, "_run_tgv", lambda *a, **kw: calls.append("tgv"))
    monkeypatch.setattr(module, "_pick_tactic", lambda *a: 0)
    monkeypatch.setattr(module, "is_sm100_supported", lambda: True)
    weight = torch.empty((6016, 7168), dtype=torch.bfloat16)

    def entry(m):
        x = torch.empty((m, 7168), dtype=torch.bfloat16)
        out = torch.empty((m, 6016), dtype=torch.float32)
        module._tgv_bf16_gemm_out_run(x, weight, out, None)

    # the op's Python entry, as the plugin's hook sees it (cutedsl_bf16_gemm_out calls the op)
    entry.__module__ = GEMM
    return entry


def test_k3_warp_splitk_run_on_every_tier_and_unknown(gemm, monkeypatch):
    module, device = gemm
    _, hook = upstream_and_hook(f"{GEMM}.cutedsl_bf16_gemm_out")
    calls = []
    entry = _out_run(module, monkeypatch, calls)
    for cap in TIERS + UNKNOWN:
        device(cap)
        for m in (8, 16, 32, 12):
            del calls[:]
            entry(m)
            upstream = list(calls)
            del calls[:]
            hook(entry, m)
            routed = list(calls)
            assert routed == upstream, (cap, m)
            if cap == "10.7" and m != 12:
                assert upstream == ["warp_splitk"]
            else:
                assert upstream == ["tgv"]


# --- the BF16 GEMV's window and unroll (hopper_bf16_gemv) ---

GEMV_SHAPES = [(1, n, k) for n in (64, 512, 4096, 12288, 20000, 32768, 100000)
               for k in (128, 512, 1536, 5120, 17408)] + [(2, 4096, 4096)]


@pytest.fixture
def gemv(monkeypatch, machine):
    module = importlib.import_module(GEMV)
    jit_utils = importlib.import_module("sglang.kernels.jit.utils")

    def device(cap):
        c = _cap(cap)
        monkeypatch.setattr(jit_utils, "get_jit_cuda_arch", lambda: SimpleNamespace(major=c.major, minor=c.minor))
        machine(cap)

    return module, device


def test_gemv_window_and_config_on_every_tier_and_unknown(gemv):
    module, device = gemv
    own_use, hook_use = upstream_and_hook(f"{GEMV}.use_hopper_bf16_gemv")
    own_config, hook_config = upstream_and_hook(f"{GEMV}._config")
    windows = set()
    for cap in TIERS + UNKNOWN:
        device(cap)
        upstream = ([own_use(*s) for s in GEMV_SHAPES], [own_config(n) for n in (64, 8192, 20000)])
        routed = ([hook_use(own_use, *s) for s in GEMV_SHAPES], [hook_config(own_config, n) for n in (64, 8192, 20000)])
        windows.add(repr(upstream))
        # one kernel either way: the tier's major decides, and no GPU's tier has another major class
        assert routed == upstream, cap
        assert routed[1][0] == ((1, 1, 8) if _paths(cap).hopper_gemv_sm12x.on else (1, 2, 8))
    assert len(windows) == 2


# --- Muse Spark's CuTe DSL router GEMV ---


class _Device:
    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return isinstance(other, _Device) and other.index == self.index


class _Tensor:
    """What router_gemv_cute_eligible reads of a CUDA FP32 tensor."""

    def __init__(self, shape):
        import torch

        self.shape, self.dtype, self.is_cuda, self.device = shape, torch.float32, True, _Device(0)

    def dim(self):
        return len(self.shape)

    def stride(self, i):
        return (self.shape[1], 1)[i]

    def data_ptr(self):
        return 0

    def is_contiguous(self):
        return True


@pytest.fixture
def router(monkeypatch, machine):
    module = importlib.import_module(ROUTER)
    yield module, _torch_reads(monkeypatch, machine, module._is_sm100_family)
    module._is_sm100_family.cache_clear()


def test_router_gemv_on_every_tier_and_unknown(router):
    module, device = router
    own, hook = upstream_and_hook(f"{ROUTER}.router_gemv_cute_eligible")
    x, w = _Tensor((1, 4096)), _Tensor((256, 4096))
    for cap in TIERS + UNKNOWN:
        device(cap)
        upstream, routed = own(x, w), hook(own, x, w)
        if resolve(cap).match == "exact":
            assert routed == upstream, cap
        else:
            runs = catalog.choice_runs("gemm_path", "router_gemv", _cap(cap), CUDA).runs
            assert routed == (upstream and runs), cap
            if cap in ("10.5", "10.9"):  # upstream's major-10 rule, where CuTe DSL compiles no kernel
                assert upstream and not runs and not routed
    device("10.0")
    assert own(x, _Tensor((256, 1000))) is False and hook(own, x, _Tensor((256, 1000))) is False


# --- Nemotron-H's prefill overlap ---


@pytest.fixture
def nemotron(monkeypatch, machine):
    from sglang.srt.utils import common

    module = importlib.import_module(NEMOTRON)
    monkeypatch.setattr(module, "get_parallel", lambda: SimpleNamespace(tp_size=1))
    monkeypatch.setattr(module, "is_in_breakable_cuda_graph", lambda: True)
    monkeypatch.setattr(module, "_is_cuda", False)
    monkeypatch.setattr(common, "is_cuda", lambda: True)

    yield module, _torch_reads(monkeypatch, machine, common.is_sm120)  # SGLang's probe is cached per process
    common.is_sm120.cache_clear()


def _nemotron_prefill():
    """A Nemotron-H MoE layer, hidden states and a batch on the prefill overlap's path but for
    the device check: (layer, hidden, batch) for ``NemotronHMoE._forward_core``."""
    import torch

    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    layer = SimpleNamespace(ep_size=1, n_routed_experts=512, moe_hidden_size=1024, shared_experts=object(),
                            _forward_core_prefill_overlap=lambda h: "prefill_overlap",
                            _forward_core_normal=lambda h: "normal")
    hidden = SimpleNamespace(shape=(1024, 4096), dtype=torch.bfloat16)
    return layer, hidden, SimpleNamespace(forward_mode=ForwardMode.EXTEND)


def test_nemotron_prefill_overlap_on_every_tier_and_unknown(nemotron):
    module, device = nemotron
    own, hook = upstream_and_hook(f"{NEMOTRON}.NemotronHMoE._forward_core")
    layer, hidden, batch = _nemotron_prefill()
    for cap in TIERS + UNKNOWN:
        device(cap)
        upstream, routed = own(layer, hidden, batch), hook(own, layer, hidden, batch)
        assert routed == upstream, cap  # SM 12.0 exactly, in the table and out of it
        assert upstream == ("prefill_overlap" if cap == "12.0" else "normal")
        assert module.is_sm120() is (cap == "12.0")  # SGLang's probe again after the call
        module.is_sm120.cache_clear()


# --- DeepGEMM's down-GEMM overlap in single-batch overlap ---


@pytest.fixture
def sbo(monkeypatch, machine):
    module = importlib.import_module(SBO)
    backend = SimpleNamespace(is_flashinfer_cutedsl=lambda: False, is_deep_gemm=lambda: True)
    monkeypatch.setattr(module, "is_sbo_enabled", lambda: True)
    monkeypatch.setattr(module, "get_moe_runner_backend", lambda: backend)

    def device(cap):
        blackwell = upstream_platform_facts(_cap(cap), CUDA)["is_blackwell"]
        monkeypatch.setattr(module, "is_blackwell", lambda: blackwell)
        machine(cap)

    return module, device


def test_sbo_deep_gemm_down_overlap_on_every_tier_and_unknown(sbo):
    module, device = sbo
    own, hook = upstream_and_hook(f"{SBO}.SboFlags.enable_combine_down_gemm_two_stream_overlap")
    for cap in TIERS + UNKNOWN:
        device(cap)
        upstream, routed = own(), hook(own)
        if resolve(cap).match == "exact":
            assert routed == upstream, cap
        else:
            runs = catalog.choice_runs("deep_gemm", "jit", _cap(cap), CUDA).runs
            assert routed == _paths(cap).sbo_deep_gemm_down_overlap.on, cap
            assert not routed or (upstream and runs), cap  # only where DeepGEMM builds, as upstream's rule
        # the signal layout compute_overlap_args picks stays the device's own (a gate)
        assert module.is_blackwell() == upstream_platform_facts(_cap(cap), CUDA)["is_blackwell"]
    device("13.0")  # upstream: not Blackwell, so DeepGEMM's SM90 signal; the tier (12.1) is Blackwell
    assert own() is True and hook(own) is False


def test_the_hooks_answer_once_per_machine(machine):
    """Per call the glue reads one cached entry: the policy runs once per machine."""
    ctx = machine("10.7")
    glue_moe._GEMM_PATHS.clear()
    calls = []
    real = type(ctx).gemm_paths

    def counting(self):
        calls.append(1)
        return real(self)

    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(type(ctx), "gemm_paths", counting)
        for _ in range(50):
            assert glue_moe.bf16_gemm_k3_splitk_sm() == 107
            assert glue_moe.router_gemv_sm100_family() is True
            assert glue_moe.nemotron_prefill_overlap() is False
    finally:
        mp.undo()
    assert len(calls) == 2  # the paths, and the split-K SM (from the same decision)


def test_the_hooks_answer_the_registry_not_the_probe(gemm, gemv, nemotron, machine):
    """Where the registry's machine and SGLang's probe disagree, the hooked call follows the
    registry (the functions are equal elsewhere because the two agree on every GPU)."""
    gemm_module, gemm_device = gemm
    own, hook = upstream_and_hook(f"{GEMM}.use_cutedsl_bf16_gemm")
    gemm_device("10.7")
    machine("10.0")
    assert own(16, 6016, 7168) is True and hook(own, 16, 6016, 7168) is False

    _, gemv_device = gemv
    own, hook = upstream_and_hook(f"{GEMV}._config")
    gemv_device("12.0")
    machine("9.0")
    assert own(64) == (1, 1, 8) and hook(own, 64) == (1, 2, 8)

    nemotron_module, nemotron_device = nemotron
    own, hook = upstream_and_hook(f"{NEMOTRON}.NemotronHMoE._forward_core")
    layer, hidden, batch = _nemotron_prefill()
    nemotron_device("12.0")
    machine("12.1")
    assert own(layer, hidden, batch) == "prefill_overlap" and hook(own, layer, hidden, batch) == "normal"


# --- torch reads written inline (scoped_capability) ---

TORCH_PATHS = {  # path -> SGLang's own check of the device, as the site writes it
    "qwen4_decode_fusion": lambda cap: cap.major == 10,
    "marlin_lora_b200_decode": lambda cap: cap.as_tuple() == (10, 0),
    "lora_cutedsl_wide_tiles": lambda cap: cap.as_tuple() < (10, 0),
    "muse_spark_gemm_ag": lambda cap: cap.as_tuple() == (10, 3),
    "muse_spark_finalize_ar": lambda cap: cap.major == 10,
}


@pytest.fixture
def torch_device(monkeypatch, machine):
    """``device(cap)``: torch reads capability ``cap`` (SGLang's side), and the glue decides for it."""
    import torch

    # SGLang's modules read the platform as they are imported: before torch is patched
    for name in ("sglang.srt.layers.moe.qwen4_decode", "sglang.srt.lora.marlin_lora_temp.moe_runner",
                 "sglang.srt.lora.moe.base_gemm_provider.cutedsl_bf16", "sglang.srt.models.muse_spark"):
        importlib.import_module(name)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    return _torch_reads(monkeypatch, machine)


def _expected(path, cap, upstream):
    """On the table SGLang's answer; elsewhere the registry's, which takes a path only where
    its kernels build for the device."""
    if resolve(cap).match == "exact":
        return upstream
    return getattr(_paths(cap), path).on


def test_qwen4_decode_fusion_on_every_tier_and_unknown(monkeypatch, torch_device):
    import torch

    module = importlib.import_module("sglang.srt.layers.moe.qwen4_decode")

    class Comm:
        disabled = False

    comm = Comm()
    monkeypatch.setattr(module, "CustomAllReduceV2", Comm)
    monkeypatch.setattr(module, "_get_decode_comm", lambda tp_comm: "fused")
    monkeypatch.setattr(module, "get_parallel", lambda: SimpleNamespace(
        tp_size=4, attn_dp_size=1, moe_ep_size=1, tp_group=SimpleNamespace(ca_comm=comm)))
    monkeypatch.setattr(module, "get_lora", lambda: SimpleNamespace(enable_lora=False))
    monkeypatch.setattr(module, "get_spec", lambda: SimpleNamespace(speculative_algorithm=None))
    monkeypatch.setattr(module, "get_exec", lambda: SimpleNamespace(
        overlap=SimpleNamespace(enable_two_batch_overlap=False)))
    monkeypatch.setattr(module, "is_enable_moe_cp_allgather", lambda: False)
    mlp = SimpleNamespace(supports_deferred_finalize=True, num_experts=512, shared_expert_gate=object(),
                          enable_shared_expert_fusion=False,
                          experts=SimpleNamespace(w13_weight=SimpleNamespace(dtype=torch.bfloat16)))
    own, hook = upstream_and_hook("sglang.srt.layers.moe.qwen4_decode.prepare_qwen4_decode_comm")
    for cap in TIERS + UNKNOWN:
        torch_device(cap)
        upstream = own(mlp) == "fused"
        routed = hook(own, mlp) == "fused"
        assert upstream is TORCH_PATHS["qwen4_decode_fusion"](_cap(cap))
        assert routed is _expected("qwen4_decode_fusion", cap, upstream), cap
        assert module.torch is torch  # torch again after the call


def test_marlin_lora_decode_factorization_on_every_tier_and_unknown(torch_device):
    import torch

    def weights(*shape):
        return SimpleNamespace(shape=shape)

    info = SimpleNamespace(gate_up_lora_a_weights=weights(2, 1, 64, 6144), gate_up_lora_b_weights=weights(2, 256, 768, 32),
                           down_lora_a_weights=weights(2, 256, 32, 384), down_lora_b_weights=weights(2, 1, 6144, 32),
                           max_lora_rank=32, experts_shared_outer_loras=True)
    hidden = SimpleNamespace(is_cuda=True, dtype=torch.bfloat16, device="cuda:0")
    kwargs = dict(num_tokens=8, hidden_size=6144, router_topk=6, num_experts=256, intermediate_size=384,
                  ep_active=False)
    own, hook = upstream_and_hook("sglang.srt.lora.marlin_lora_temp.moe_runner."
                                  "_use_multi_shared_outer_decode_factorization")
    for cap in TIERS + UNKNOWN:
        torch_device(cap)
        upstream, routed = own(info, hidden, **kwargs), hook(own, info, hidden, **kwargs)
        assert upstream is TORCH_PATHS["marlin_lora_b200_decode"](_cap(cap))
        assert routed is _expected("marlin_lora_b200_decode", cap, upstream), cap


def test_lora_cutedsl_tiles_on_every_tier_and_unknown(monkeypatch, torch_device):
    from sglang.srt.lora.moe.base_gemm_provider import cutedsl_bf16

    cls = cutedsl_bf16.CuteDslBf16ContiguousProvider
    dropped = []
    monkeypatch.setattr(cls.__mro__[1], "__init__", lambda self, *a, **kw: None)  # the base provider's setup
    for base in cls.__mro__[1:]:
        if "__init__" in vars(base) and base is not object:
            monkeypatch.setattr(base, "__init__", lambda self, *a, **kw: None)
    monkeypatch.setattr(cls, "_init_tiles", lambda self, info, drop_narrow_tile: dropped.append(drop_narrow_tile))
    info = SimpleNamespace(w13_weight=SimpleNamespace(device="cuda:0"))
    own, hook = upstream_and_hook("sglang.srt.lora.moe.base_gemm_provider.cutedsl_bf16."
                                  "CuteDslBf16ContiguousProvider.__init__")
    for cap in TIERS + UNKNOWN:
        torch_device(cap)
        own(object.__new__(cls), info)
        hook(own, object.__new__(cls), info)
        upstream, routed = dropped[-2:]
        assert upstream is TORCH_PATHS["lora_cutedsl_wide_tiles"](_cap(cap))
        assert routed is _expected("lora_cutedsl_wide_tiles", cap, upstream), cap


def _site_check(path, needle):
    """SGLang's own check at a Muse Spark site, read from the installed function's source and
    evaluated in its module (a model's init and forward need a GPU and a checkpoint)."""
    import inspect
    import textwrap

    from helpers import routed_target  # noqa: F401  (the target exists: upstream_and_hook checks it)

    own, hook = upstream_and_hook(path)
    lines = [line.strip() for line in inspect.getsource(own).splitlines() if needle in line]
    assert len(lines) == 1, lines
    expr = textwrap.dedent(lines[0])
    for word in ("and ", "or "):
        if expr.startswith(word):
            expr = expr[len(word):]
    module = sys.modules[own.__module__]
    code = compile(expr, f"<{path}>", "eval")

    def check(hidden_states=None):
        return eval(code, vars(module), {"hidden_states": hidden_states})

    check.__module__ = own.__module__
    return expr, check, hook


@pytest.mark.parametrize("path,expected_expr,name", [
    ("sglang.srt.models.muse_spark.MuseSpark1xMoE.__init__", "torch.cuda.get_device_capability() == (10, 3)",
     "muse_spark_gemm_ag"),
    ("sglang.srt.models.muse_spark.MuseSpark1xMoE._forward_experts",
     "torch.cuda.get_device_capability(hidden_states.device) == (10, 3)", "muse_spark_gemm_ag"),
    ("sglang.srt.models.muse_spark.MuseSpark1xModel.__init__", "torch.cuda.get_device_capability()[0] != 10",
     "muse_spark_finalize_ar"),
])
def test_muse_spark_checks_on_every_tier_and_unknown(torch_device, path, expected_expr, name):
    expr, check, hook = _site_check(path, "torch.cuda.get_device_capability(")
    assert expr == expected_expr
    negated = "!=" in expr  # the finalize AR check names where the fusion is unavailable
    hidden = SimpleNamespace(device="cuda:0")
    for cap in TIERS + UNKNOWN:
        torch_device(cap)
        upstream = check(hidden) != negated
        routed = hook(check, hidden) != negated
        assert upstream is TORCH_PATHS[name](_cap(cap))
        assert routed is _expected(name, cap, upstream), cap
    torch_device("10.5")  # the GEMM + all-gather's tier (10.3) where its JIT kernel builds; CuTe DSL's finalize AR does not
    assert (hook(check, hidden) != negated) is (name == "muse_spark_gemm_ag")


def test_scoped_capability_nests_within_one_module(torch_device):
    """Muse Spark's model init builds its MoE layers: the inner hooked init answers its own
    check, the outer's answer is back after it, and torch is SGLang's after both."""
    import torch

    module = sys.modules["sglang.srt.models.muse_spark"]
    _, outer_check, outer = _site_check("sglang.srt.models.muse_spark.MuseSpark1xModel.__init__",
                                        "torch.cuda.get_device_capability(")
    _, inner_check, inner = _site_check("sglang.srt.models.muse_spark.MuseSpark1xMoE.__init__",
                                        "torch.cuda.get_device_capability(")
    torch_device("10.5")  # finalize AR off (answered (0, 0)), GEMM + all-gather on (answered (10, 3))
    seen = []

    def model_init():
        seen.append(outer_check())  # "[0] != 10": unavailable
        seen.append(inner(inner_check))  # "== (10, 3)"
        seen.append(outer_check())

    model_init.__module__ = module.__name__
    outer(model_init)
    assert seen == [True, True, True]
    assert module.torch is torch
