"""Linear attention: SGLang 0.5.23's own five default functions against the routed ones.

Upstream's side is the function as SGLang 0.5.23 defines it (taken before the plugin's
hooks are applied), run with SGLang's own ``override_platform`` giving the facts its
probes would compute for the GPU, and torch's device queries answering for it (the two
prefill defaults read torch directly).  The routed side is the hooked function, with the
GPU simulated through the registry's variables.  On every exact tier, for every drawn
setting, the two decide alike (docs/differences.md lists no difference for these).
"""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from sglang_arch.arch import parse_capability  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, simulated_torch_device  # noqa: E402

KNOWN = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
# The oldest torch CUDA that targets each tier (as test_equivalence_properties.py).
MIN_CUDA = {"7.0": (9, 0), "7.5": (10, 0), "8.0": (11, 0), "8.6": (11, 1), "8.7": (11, 4), "8.9": (11, 8),
            "9.0": (11, 8), "10.0": (12, 8), "10.3": (12, 9), "10.7": (13, 0), "11.0": (13, 0), "12.0": (12, 8),
            "12.1": (12, 9)}
CUDAS = [(11, 8), (12, 3), (12, 8), (12, 9), (13, 0)]
machines = st.sampled_from(KNOWN).flatmap(
    lambda cap: st.tuples(st.just(cap), st.sampled_from([c for c in CUDAS if c >= MIN_CUDA[cap]] or [(13, 0)])))
SETTINGS = dict(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])

_HOOK = "sglang.srt.arg_groups.attention_hook"
_KIMI = "sglang.srt.arg_groups.kimi_k3_hook"
_GLM5 = "sglang.srt.arg_groups.glm5_next_hook"
_GDN = "sglang.srt.layers.attention.linear.gdn_backend"
_KDA = "sglang.srt.layers.attention.linear.kda_backend"
FUNCTIONS = {
    "decode": (_HOOK, "handle_linear_attn_backend"),
    "kimi": (_KIMI, "apply_kimi_k3_linear_attn_defaults"),
    "glm5": (_GLM5, "apply_glm5_next_spec_backend_defaults"),
    "gdn": (_GDN, "flashinfer_gdn_prefill_default"),
    "kda": (_KDA, "flashinfer_kda_prefill_default"),
}


@pytest.fixture(scope="module")
def functions():
    """name -> (upstream's own function, the routed one)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("SGLANG_ARCH_CAPABILITY", "9.0")
    modules = {name: importlib.import_module(module) for name, (module, _) in FUNCTIONS.items()}
    from sglang.srt.plugins.hook_registry import HookRegistry
    from sglang_arch.arch import runtime
    from sglang_arch.integrations.sglang import register

    runtime.reset()
    register()
    HookRegistry.apply_hooks()
    routed = {name: getattr(modules[name], attr) for name, (_, attr) in FUNCTIONS.items()}
    # SGLang's HookRegistry keeps the function it wraps as ``__wrapped__``: upstream's own.
    originals = {name: getattr(fn, "__wrapped__", None) for name, fn in routed.items()}
    assert all(originals.values()), "the plugin hooked every function"
    yield {name: (originals[name], routed[name]) for name in FUNCTIONS}
    mp.undo()
    runtime.reset()


def upstream_facts(cap, cuda):
    """What SGLang 0.5.23's own probes answer for ``cap``: each probe is an
    ``lru_cache(partial(..., device_capability_majors=..., cuda_version=...))`` (under
    the plugin, wrapped once more by its hook), evaluated here from those keywords."""
    from sglang.srt.runtime_context import _PLATFORM_PROBES
    from sglang.srt.utils import common

    facts = {}
    for fact, helper in _PLATFORM_PROBES.items():
        probe = getattr(common, helper, None)
        while probe is not None and not hasattr(probe, "keywords"):
            probe = getattr(probe, "__wrapped__", None)
        keywords = getattr(probe, "keywords", None) or {}
        if "device_capability_majors" in keywords:
            facts[fact] = cap.major in keywords["device_capability_majors"] and cuda >= tuple(keywords["cuda_version"])
    assert {"is_sm90", "is_sm100", "is_sm120", "is_blackwell"} <= set(facts), "SGLang's probes were read"
    facts.update(device_capability=cap.as_tuple(), device_sm=cap.sm)
    return facts


@pytest.fixture
def both(monkeypatch):
    """``both(cap, cuda, fn_pair, make_args)`` -> (upstream's answer, the routed answer)."""
    import contextlib

    import torch
    from sglang.srt.runtime_context import override_platform
    from sglang_arch.arch import runtime

    def run(cap, cuda, pair, make_args):
        upstream, routed = pair
        monkeypatch.setattr(torch.version, "cuda", f"{cuda[0]}.{cuda[1]}")
        for module in (_GDN, _KDA):
            monkeypatch.setattr(importlib.import_module(module), "is_cuda", lambda: True)
        with contextlib.ExitStack() as scope:
            scope.enter_context(override_platform(**SIMULATED_MACHINE,
                                                  **upstream_facts(parse_capability(cap), cuda)))
            scope.enter_context(simulated_torch_device(parse_capability(cap)))
            upstream_args = make_args()
            theirs = (_call(upstream, upstream_args), upstream_args)
        for name, value in (("SGLANG_ARCH_CAPABILITY", cap), ("SGLANG_ARCH_GPU_COUNT", "8"),
                            ("SGLANG_ARCH_CUDA", f"{cuda[0]}.{cuda[1]}")):
            monkeypatch.setenv(name, value)
        runtime.reset()
        # torch answers for the same GPU: where the glue leaves the decision to SGLang's
        # body (settings no GPU changes), that body reads torch as on a real machine.
        with override_platform(**SIMULATED_MACHINE), simulated_torch_device(parse_capability(cap)):
            routed_args = make_args()
            ours = (_call(routed, routed_args), routed_args)
        runtime.reset()
        return theirs, ours

    return run


def _call(fn, args):
    """The function's answer, or "ValueError" where it refuses the settings (both sides must)."""
    try:
        return fn(args)
    except ValueError:
        return "ValueError"


class Args(SimpleNamespace):
    """Server arguments mid-resolution: a field no test sets reads as unset."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return None


def declared(args, field):
    """The last value resolution declared for ``field`` (SGLang's own record), else None."""
    value = None
    for _source, fields in getattr(args, "_resolved_overrides", None) or ():
        value = fields.get(field, value)
    return value


@settings(**SETTINGS)
@given(machine=machines, base=st.sampled_from(["triton", "flashkda", "helion", "flashinfer"]),
       decode=st.sampled_from([None, "triton"]), ssm=st.sampled_from(["bfloat16", "float32"]))
def test_decode_default_equals_upstream(functions, both, machine, base, decode, ssm):
    cap, cuda = machine

    def make():
        return Args(linear_attn_backend=base, linear_attn_decode_backend=decode, mamba_ssm_dtype=ssm,
                    _raw_input={})

    (answer, theirs), (routed_answer, ours) = both(cap, cuda, functions["decode"], make)
    up, routed = declared(theirs, "linear_attn_decode_backend"), declared(ours, "linear_attn_decode_backend")
    assert (routed_answer, routed) == (answer, up), (cap, cuda)


@settings(**SETTINGS)
@given(machine=machines, decode=st.sampled_from([None, "flashinfer"]), ssm=st.sampled_from(["bfloat16", "float32"]))
def test_kimi_decode_default_equals_upstream(functions, both, machine, decode, ssm):
    cap, cuda = machine

    def make():
        return Args(linear_attn_decode_backend=decode, mamba_ssm_dtype=ssm)

    (_, theirs), (_, ours) = both(cap, cuda, functions["kimi"], make)
    assert declared(ours, "linear_attn_decode_backend") == declared(theirs, "linear_attn_decode_backend")


@settings(**SETTINGS)
@given(machine=machines, algorithm=st.sampled_from([None, "EAGLE"]), verify=st.sampled_from([None, "triton"]))
def test_glm5_verify_default_equals_upstream(functions, both, machine, algorithm, verify):
    cap, cuda = machine

    def make():
        return Args(speculative_algorithm=algorithm, linear_attn_verify_backend=verify)

    (_, theirs), (_, ours) = both(cap, cuda, functions["glm5"], make)
    assert declared(ours, "linear_attn_verify_backend") == declared(theirs, "linear_attn_verify_backend")


def _execution(base="triton", prefill=None, deterministic=False, tbo=False, full_graph=False):
    from sglang.srt.model_executor.cuda_graph_config import Backend

    prefill_graph = SimpleNamespace(backend=Backend.FULL if full_graph else Backend.DISABLED)
    return SimpleNamespace(
        mamba=SimpleNamespace(linear_attn_backend=base, linear_attn_prefill_backend=prefill),
        deterministic=SimpleNamespace(enable_deterministic_inference=deterministic),
        overlap=SimpleNamespace(enable_two_batch_overlap=tbo),
        graph=SimpleNamespace(cuda_graph_config=SimpleNamespace(prefill=prefill_graph)),
    )


@settings(**SETTINGS)
@given(machine=machines, base=st.sampled_from(["triton", "flashinfer"]), prefill=st.sampled_from([None, "triton"]),
       deterministic=st.booleans(), chunk=st.sampled_from([None, 4096, 8192, 16384, 65536]),
       dynamic=st.booleans(), head=st.sampled_from([128, 64]), state=st.sampled_from(["float32", "bfloat16"]))
def test_gdn_prefill_default_equals_upstream(functions, both, monkeypatch, machine, base, prefill, deterministic,
                                             chunk, dynamic, head, state):
    import torch
    from sglang.srt.layers.attention.linear.kernels import gdn_flashinfer

    gdn = importlib.import_module(_GDN)
    monkeypatch.setattr(gdn, "get_exec", lambda: _execution(base, prefill, deterministic))
    monkeypatch.setattr(gdn, "get_schedule",
                        lambda: SimpleNamespace(chunked_prefill_size=chunk, enable_dynamic_chunking=dynamic))
    monkeypatch.setattr(gdn, "hybrid_gdn_config",
                        lambda _: SimpleNamespace(linear_key_head_dim=head, linear_value_head_dim=128))
    monkeypatch.setattr(gdn, "rank0_log", lambda *_: None)
    monkeypatch.setattr(gdn_flashinfer, "is_flashinfer_gdn_prefill_available", lambda: True)
    cache = SimpleNamespace(temporal=SimpleNamespace(dtype=getattr(torch, state)))
    runner = SimpleNamespace(model_config=None,
                             req_to_token_pool=SimpleNamespace(mamba_pool=SimpleNamespace(mamba_cache=cache)))
    cap, cuda = machine
    (theirs, _), (ours, _) = both(cap, cuda, functions["gdn"], lambda: runner)
    # The routed answer "triton" is SGLang's None: prefill keeps the Triton base backend.
    assert (None if ours == "triton" else ours) == theirs, (cap, cuda)


@settings(**SETTINGS)
@given(machine=machines, lower=st.sampled_from([None, -5.0]), base=st.sampled_from(["triton", "flashinfer"]),
       deterministic=st.booleans(), tbo=st.booleans(), full_graph=st.booleans())
def test_kda_prefill_default_equals_upstream(functions, both, monkeypatch, machine, lower, base, deterministic,
                                             tbo, full_graph):
    from sglang.srt.configs import hybrid_arch

    kda = importlib.import_module(_KDA)
    monkeypatch.setattr(kda, "get_exec", lambda: _execution(base, None, deterministic, tbo, full_graph))
    monkeypatch.setattr(hybrid_arch, "hybrid_kda_config",
                        lambda _: SimpleNamespace(linear_attn_config={"gate_lower_bound": lower}))
    cap, cuda = machine
    (theirs, _), (ours, _) = both(cap, cuda, functions["kda"], lambda: SimpleNamespace(model_config=None))
    assert (None if ours == "triton" else ours) == theirs, (cap, cuda)


def test_the_properties_see_both_answers(functions, both, monkeypatch):
    """Not vacuous: on 10.0 both sides default GLM-5-Next's verify to nv_cutedsl, on 9.0 neither."""
    def make():
        return Args(speculative_algorithm="EAGLE", linear_attn_verify_backend=None)

    (_, theirs), (_, ours) = both("10.0", (13, 0), functions["glm5"], make)
    assert declared(theirs, "linear_attn_verify_backend") == declared(ours, "linear_attn_verify_backend") == "nv_cutedsl"
    (_, theirs), (_, ours) = both("9.0", (13, 0), functions["glm5"], make)
    assert declared(theirs, "linear_attn_verify_backend") is declared(ours, "linear_attn_verify_backend") is None
