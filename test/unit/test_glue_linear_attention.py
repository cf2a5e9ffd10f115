"""The linear-attention glue (glue/attention.py): each default site's answer, machine by
machine, with SGLang's modules stood in for (its own functions are compared with the
routed ones in test/integration/test_linear_attention_equivalence.py)."""

import sys
import types
from types import SimpleNamespace

import pytest
from sglang_arch.arch import runtime
from sglang_arch.integrations.sglang import glue
from sglang_arch.integrations.sglang.glue import attention as ga


class Log:
    def __init__(self):
        self.lines = []

    def __getattr__(self, level):
        return lambda msg, *args: self.lines.append(f"{level}: {msg % args}")


def module(monkeypatch, name, **attrs):
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    monkeypatch.setitem(sys.modules, name, mod)
    return mod


@pytest.fixture
def route(monkeypatch):
    """``route(capability, cuda)``: the machine the glue sees (no capability: no NVIDIA GPU),
    on CUDA as SGLang's platform context says."""
    monkeypatch.setattr(glue, "_warned", set())
    platform = SimpleNamespace(is_cuda=True, is_hip=False, is_sm100=False)
    module(monkeypatch, "sglang.srt.runtime_context", get_platform=lambda: platform)

    def use(capability=None, cuda=(13, 0)):
        if capability is None:
            ctx = SimpleNamespace(resolution=None)
        else:
            ctx = runtime.machine(capability=capability, gpu_count=1, cuda=cuda)
            platform.is_sm100 = ctx.facts["is_sm100"]  # SGLang's own fact: the device's identity
        monkeypatch.setattr(glue, "current", lambda: ctx)
        return ctx

    yield use
    runtime.reset()


def _resolution_module(monkeypatch, name):
    """An arg-group hook module: ``resolving_view`` reads the args, ``declare_resolution``
    records (source, fields) as SGLang's does."""
    log = Log()

    def declare(args, source, **fields):
        args.declared.append((source, fields))

    platform = sys.modules["sglang.srt.runtime_context"].get_platform
    module(monkeypatch, name, resolving_view=lambda args: args, declare_resolution=declare, logger=log,
           get_platform=platform)
    return log


def _args(**fields):
    base = dict(linear_attn_decode_backend=None, linear_attn_backend="triton", mamba_ssm_dtype="bfloat16",
                speculative_algorithm=None, linear_attn_verify_backend=None)
    base.update(fields)
    return SimpleNamespace(declared=[], **base)


# --- handle_linear_attn_backend: the decode default -------------------------------------


@pytest.mark.parametrize("cap, expected", [("10.0", "flashinfer"), ("10.3", "flashinfer"), ("9.0", None),
                                           ("12.0", None)])
def test_decode_default_on_exact_tiers(route, monkeypatch, cap, expected):
    route(cap)
    _resolution_module(monkeypatch, ga._ATTENTION_HOOK)
    args = _args()
    assert ga.linear_decode_default(args) is None  # check form: SGLang's body runs next
    assert args.declared == ([("_handle_linear_attn_backend", {"linear_attn_decode_backend": expected})]
                             if expected else [])


@pytest.mark.parametrize("base, kept", [("triton", "triton"), ("flashkda", "triton"), ("flashinfer", "flashinfer")])
def test_decode_default_on_a_major_10_gpu_flashinfer_has_no_build_for(route, monkeypatch, base, kept):
    """docs/differences.md D18: SGLang's is_sm100 rule picks FlashInfer decode on 10.5;
    no FlashInfer decode kernel has a build for it, so decode keeps what it inherits."""
    route("10.5")
    log = _resolution_module(monkeypatch, ga._ATTENTION_HOOK)
    warnings = Log()
    monkeypatch.setattr(ga, "logger", warnings)
    args = _args(linear_attn_backend=base)
    ga.linear_decode_default(args)
    assert args.declared == [("_handle_linear_attn_backend", {"linear_attn_decode_backend": kept})]
    assert warnings.lines and "has no build for 10.5" in warnings.lines[0]
    assert log.lines


@pytest.mark.parametrize("fields", [dict(linear_attn_decode_backend="triton"), dict(linear_attn_backend="helion"),
                                    dict(mamba_ssm_dtype="float32")])
def test_decode_default_leaves_settings_sglang_does_not_default(route, monkeypatch, fields):
    route("10.0")
    _resolution_module(monkeypatch, ga._ATTENTION_HOOK)
    args = _args(**fields)
    ga.linear_decode_default(args)
    assert args.declared == []


def test_decode_default_without_a_gpu_or_a_registry(route, monkeypatch):
    route()
    _resolution_module(monkeypatch, ga._ATTENTION_HOOK)
    args = _args()
    ga.linear_decode_default(args)
    assert args.declared == []
    monkeypatch.setattr(glue, "current", lambda: (_ for _ in ()).throw(KeyError("registry")))
    monkeypatch.setattr(ga, "logger", Log())
    assert ga.linear_decode_default(args) is None and args.declared == []


# --- Kimi and GLM-5-Next: the done forms -------------------------------------------------


@pytest.mark.parametrize("cap, expected", [("10.0", "triton"), ("9.0", None), ("12.1", None)])
def test_kimi_decode_default(route, monkeypatch, cap, expected):
    route(cap)
    _resolution_module(monkeypatch, ga._KIMI_K3_HOOK)
    args = _args()
    assert ga.kimi_linear_decode_default(args) is True
    assert args.declared == ([("apply_kimi_k3_linear_attn_defaults", {"linear_attn_decode_backend": expected})]
                             if expected else [])
    done = _args(linear_attn_decode_backend="flashinfer")
    assert ga.kimi_linear_decode_default(done) is True and done.declared == []


@pytest.mark.parametrize("cap, expected", [("10.0", "nv_cutedsl"), ("10.7", "nv_cutedsl"), ("9.0", None)])
def test_glm5_verify_default(route, monkeypatch, cap, expected):
    route(cap)
    _resolution_module(monkeypatch, ga._GLM5_NEXT_HOOK)
    args = _args(speculative_algorithm="EAGLE")
    assert ga.glm5_verify_default(args) is True
    assert args.declared == ([("apply_glm5_next_spec_backend_defaults", {"linear_attn_verify_backend": expected})]
                             if expected else [])
    plain = _args()
    assert ga.glm5_verify_default(plain) is True and plain.declared == []


def test_kimi_and_glm5_without_a_gpu_leave_it_to_sglang(route, monkeypatch):
    route()
    assert ga.kimi_linear_decode_default(_args()) is None
    assert ga.glm5_verify_default(_args(speculative_algorithm="EAGLE")) is None


# --- the prefill defaults ----------------------------------------------------------------


def _gdn(monkeypatch, chunk=4096, state="float32", head=128, prefill=None, base="triton", available=True):
    # The glue compares the pool's state dtype with ``getattr(torch, name)``; a stand-in
    # torch with two distinct dtype objects keeps this tier free of torch's import (~4 s).
    torch = SimpleNamespace(float32=object(), bfloat16=object())
    monkeypatch.setitem(sys.modules, "torch", torch)
    logs = []
    execution = SimpleNamespace(mamba=SimpleNamespace(linear_attn_backend=base, linear_attn_prefill_backend=prefill),
                                deterministic=SimpleNamespace(enable_deterministic_inference=False))
    module(monkeypatch, ga._GDN, get_exec=lambda: execution,
           get_schedule=lambda: SimpleNamespace(chunked_prefill_size=chunk, enable_dynamic_chunking=False),
           hybrid_gdn_config=lambda _: SimpleNamespace(linear_key_head_dim=head, linear_value_head_dim=128),
           rank0_log=logs.append)
    module(monkeypatch, "sglang.srt.layers.attention.linear.kernels.gdn_flashinfer",
           is_flashinfer_gdn_prefill_available=lambda: available)
    cache = SimpleNamespace(temporal=SimpleNamespace(dtype=getattr(torch, state)))
    return SimpleNamespace(model_config=None,
                           req_to_token_pool=SimpleNamespace(mamba_pool=SimpleNamespace(mamba_cache=cache))), logs


@pytest.mark.parametrize("cap, cuda, state, chunk, expected", [
    ("9.0", (12, 8), "float32", 32768, "flashinfer"),
    ("9.0", (12, 8), "float32", 32769, "triton"),  # past the Hopper kernel's validated chunk
    ("9.0", (12, 8), "bfloat16", 4096, "triton"),  # the Hopper kernel takes an fp32 state
    ("10.0", (13, 0), "bfloat16", 8192, "flashinfer"),
    ("10.0", (13, 0), "bfloat16", 8193, "triton"),
    ("10.0", (12, 9), "bfloat16", 4096, "triton"),  # the SM100 kernel needs CUDA 13
    ("12.0", (13, 0), "float32", 4096, "triton"),  # SGLang defaults nothing on SM12x
    ("9.5", (13, 0), "float32", 4096, "triton"),  # no build of the Hopper kernel for 9.5
])
def test_gdn_prefill_default(route, monkeypatch, cap, cuda, state, chunk, expected):
    route(cap, cuda)
    runner, logs = _gdn(monkeypatch, chunk=chunk, state=state)
    assert ga.gdn_prefill_default(runner) == expected
    assert bool(logs) is (expected == "flashinfer")


def test_gdn_prefill_default_leaves_what_no_gpu_changes_to_sglang(route, monkeypatch):
    route("9.0")
    runner, _ = _gdn(monkeypatch, prefill="triton")
    assert ga.gdn_prefill_default(runner) is None
    runner, _ = _gdn(monkeypatch, base="flashinfer")
    assert ga.gdn_prefill_default(runner) is None
    runner, _ = _gdn(monkeypatch, available=False)
    assert ga.gdn_prefill_default(runner) == "triton"
    route()
    runner, _ = _gdn(monkeypatch)
    assert ga.gdn_prefill_default(runner) is None


def _kda(monkeypatch, lower=-5.0, full_graph=False):
    backend = SimpleNamespace(FULL="full", DISABLED="disabled")
    execution = SimpleNamespace(
        mamba=SimpleNamespace(linear_attn_backend="triton"),
        deterministic=SimpleNamespace(enable_deterministic_inference=False),
        overlap=SimpleNamespace(enable_two_batch_overlap=False),
        graph=SimpleNamespace(cuda_graph_config=SimpleNamespace(
            prefill=SimpleNamespace(backend=backend.FULL if full_graph else backend.DISABLED))))
    module(monkeypatch, ga._KDA, get_exec=lambda: execution, CudaGraphBackend=backend)

    class BailingHybridConfig:
        pass

    module(monkeypatch, "sglang.srt.configs.bailing_hybrid", BailingHybridConfig=BailingHybridConfig)
    module(monkeypatch, "sglang.srt.configs.hybrid_arch",
           hybrid_kda_config=lambda _: SimpleNamespace(linear_attn_config={"gate_lower_bound": lower}))
    return SimpleNamespace(model_config=None)


@pytest.mark.parametrize("cap, expected", [("10.0", "flashinfer"), ("10.3", "flashinfer"), ("10.7", "triton"),
                                           ("9.0", "triton"), ("12.0", "triton")])
def test_kda_prefill_default(route, monkeypatch, cap, expected):
    route(cap)
    runner = _kda(monkeypatch)
    assert ga.kda_prefill_default(runner) == expected


def test_kda_prefill_default_leaves_what_no_gpu_changes_to_sglang(route, monkeypatch):
    route("10.0")
    assert ga.kda_prefill_default(_kda(monkeypatch, lower=None)) is None
    assert ga.kda_prefill_default(_kda(monkeypatch, full_graph=True)) is None
    route()
    assert ga.kda_prefill_default(_kda(monkeypatch)) is None
