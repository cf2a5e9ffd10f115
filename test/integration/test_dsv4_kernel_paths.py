"""DeepSeek-V4's Blackwell / Hopper kernel paths: the plugin's hooks against SGLang 0.5.23's
own functions, on every exact tier and on 10.5, 11.5, 12.3 and 13.0.

Five functions read ``get_platform().is_blackwell`` / ``is_sm90`` inline to take Triton paths
tuned on those architectures: ``deepseek_v4._apply_wo_a_bf16_matmul`` (the wo_a GEMV, small
batch and token-major paths), ``MQALayer._normalize_q_lora`` (V4.1's fused q RMSNorm + MXFP8),
``deepseek_v4_mhc._mix_stats_impl`` (fused mHC stats, BF16x3 projection) and ``_combine``
(fused combine-norm), and the V4.1 indexer's ``scoring.decode_scores`` (paged decode scoring).
Routed, one registry decision (``policies/deepseek.dsv4_kernel_paths``) answers every read.

Upstream's side runs under SGLang's own ``override_platform`` with the facts its probes
compute for the GPU; the routed side is the plugin's AROUND hook over the same function
with the registry routed to the capability.  The kernels are stand-ins that name the path
taken (the functions' own shape, dtype and stride checks run on meta tensors or small
stand-ins): the test reads which path each function takes, not the kernels.
"""

import importlib.util
import sys
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

import torch  # noqa: E402
from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

DSV4 = "sglang.srt.models.deepseek_v4"
MHC = "sglang.srt.models.deepseek_v4_mhc"
SCORING = "sglang.srt.layers.attention.dsv4.v41_indexer.scoring"
WO_A, Q_NORM = f"{DSV4}._apply_wo_a_bf16_matmul", f"{DSV4}.MQALayer._normalize_q_lora"
MIX, COMBINE, DECODE = f"{MHC}._mix_stats_impl", f"{MHC}._combine", f"{SCORING}.decode_scores"
UNKNOWN = ("10.5", "11.5", "12.3", "13.0")
CUDAS = ((12, 4), (12, 9))


class Taken(Exception):
    """Raised by a stand-in kernel: the path the function took."""


def _taking(name):
    def kernel(*args, **kwargs):
        raise Taken(name)

    return kernel


def _cap(text):
    return Capability(*map(int, text.split(".")))


_machines = {}


def _path(call, cap, cuda):
    from sglang.srt.runtime_context import override_platform

    with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), cuda)):
        try:
            result = call()
        except Taken as taken:
            return str(taken)
    return "einsum" if isinstance(result, torch.Tensor) else result  # wo_a's generic path, on meta tensors


def _both(own, hook, call, cap, cuda):
    """(upstream's path, the routed path) for ``call(function)`` on ``cap``."""
    upstream = _path(lambda: call(own), cap, cuda)
    ctx = _machines.get((cap, cuda)) or _machines.setdefault((cap, cuda), runtime.machine(capability=cap, cuda=cuda))
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(glue, "current", lambda: ctx)
        routed = _path(lambda: call(lambda *a, **k: hook(own, *a, **k)), cap, cuda)
    finally:
        mp.undo()
    return upstream, routed


@pytest.fixture(scope="module")
def kernels():
    """The functions' kernels as stand-ins naming their path, for the module's tests."""
    import sglang.kernels.ops.layernorm.hc_combine_norm as combine_norm
    import sglang.kernels.ops.layernorm.mhc as mhc_kernels
    import sglang.kernels.ops.layernorm.rmsnorm_mxfp8 as rmsnorm_mxfp8
    from sglang.srt import runtime_context
    from sglang.srt.models import deepseek_v4, deepseek_v4_mhc  # noqa: F401
    from sglang.srt.layers.attention.dsv4.v41_indexer import scoring

    mp = pytest.MonkeyPatch()
    mp.setenv("SGLANG_OPT_DEEPGEMM_HC_PRENORM", "1")
    v4 = sys.modules[DSV4]
    mp.setattr(v4, "_is_cuda", True)
    mp.setattr(v4, "_is_hip", False)
    mp.setattr(v4, "_wo_a_aiter_batched_gemm_enabled", False)
    for name in ("wo_a_bf16_gemv", "wo_a_bf16_small_batch", "_wo_a_bf16_bmm_token_major"):
        mp.setattr(v4, name, _taking(name))
    mp.setattr(v4, "wo_a_bf16_small_batch_mxfp8", _taking("wo_a_bf16_small_batch_mxfp8"))
    mp.setattr(rmsnorm_mxfp8, "rmsnorm_mxfp8", _taking("rmsnorm_mxfp8"))
    mp.setattr(runtime_context, "get_exec", lambda: SimpleNamespace(
        deterministic=SimpleNamespace(enable_deterministic_inference=False)))
    for name in ("hc_mix_stats_sinkhorn_bf16x3", "hc_mix_stats_sinkhorn_deepgemm", "hc_mix_stats_sinkhorn",
                 "hc_mix_stats", "mhc_combine"):
        mp.setattr(mhc_kernels, name, _taking(name))
    for name in ("hc_combine_norm", "hc_combine_norm_mxfp8"):
        mp.setattr(combine_norm, name, _taking(name))
    mp.setattr(scoring, "fp4_index_logits_paged", _taking("fp4_index_logits_paged"))
    mp.setattr(scoring, "fp4_index_logits_decode", _taking("fp4_index_logits_decode"))
    mp.setattr(scoring, "plan_topk_v2", lambda lens: None)
    try:
        yield
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def sides(kernels):
    return {path: upstream_and_hook(path) for path in (WO_A, Q_NORM, MIX, COMBINE, DECODE)}


# --- the calls: each function over the row counts and modes its bands name ---------------------

def _wo_a_calls():
    wo_a = torch.empty((2, 1024, 4096), dtype=torch.bfloat16, device="meta")
    for rows, mode in ((1, "is_decode"), (8, "is_decode"), (1, "is_target_verify"), (8, "is_target_verify"),
                       (300, "is_target_verify"), (500, "is_target_verify"), (100, "is_prefill"),
                       (4096, "is_prefill"), (70000, "is_prefill")):
        o = torch.empty((rows, 2, 4096), dtype=torch.bfloat16, device="meta")
        flags = {"is_decode": mode == "is_decode", mode: True}
        yield (rows, mode), (lambda f, o=o, flags=flags: f(o, wo_a, **flags, fast_path=True))


class _Rows:
    """A CUDA activation of ``rows`` x ``shape`` for the mHC functions' own checks."""

    is_cuda = True
    dtype = torch.bfloat16

    def __init__(self, *shape):
        self.shape = shape

    def flatten(self, dim):
        return _Rows(self.shape[0], self.shape[1] * self.shape[2])

    def is_contiguous(self):
        return True

    def stride(self, dim):
        return 1


def _mhc():
    cfg = SimpleNamespace(mult=4, hidden=5120, sinkhorn_iters=20, rms_eps=1e-6, eps=1e-6)
    norm = SimpleNamespace(weight=SimpleNamespace(dtype=torch.bfloat16), cast_x_before_out_mul=False,
                           variance_size_override=None, variance_epsilon=1e-6)
    return SimpleNamespace(cfg=cfg, norm=norm, tf32_parts="tf32", bf16_parts="bf16", fn=None, scale=None,
                           base=None)


ROWS = (1, 16, 32, 96, 500, 4096, 70000)


def _mix_calls():
    hc = _mhc()
    for rows in ROWS:
        yield rows, (lambda f, rows=rows: f(hc, _Rows(rows, 4, 5120)))


def _combine_calls():
    hc = _mhc()
    for rows in ROWS:
        for quantize in (False, True):
            state = SimpleNamespace(residual=_Rows(rows, 4, 5120), pre=_Rows(rows, 4), input=None)
            yield (rows, quantize), (lambda f, s=state, q=quantize: f(hc, s, [] if q else None))


def _q_norm_calls():
    backend = sys.modules[DSV4].Mxfp8DenseGemmBackend.FLASHINFER_CUTEDSL

    def q_norm(q):
        return "q_norm"

    q_norm.weight, q_norm.variance_epsilon = SimpleNamespace(dtype=torch.bfloat16), 1e-6
    layer = SimpleNamespace(is_dsv41=True, q_norm=q_norm, wq_b=SimpleNamespace(
        quant_method=SimpleNamespace(mxfp8_dense_backend=backend, use_mxfp8=True)))
    q = torch.empty((4, 1280), dtype=torch.bfloat16, device="meta")
    return [("v4.1", lambda f: f(layer, q))]


def _decode_calls():
    indexer = SimpleNamespace(queries=lambda q, f: None, head_weights=lambda x: None)
    pool = SimpleNamespace(get_index_k_with_scale_buffer=lambda layer: torch.zeros((1, 68)))
    inputs = SimpleNamespace(compress_ratio=4, indexer=indexer, req_rows=torch.zeros(2, dtype=torch.int64),
                             positions=torch.tensor([7, 11]), paged_metadata=SimpleNamespace(max_compressed_seq_len=4),
                             q_lora=None, freqs_cis=torch.zeros(16), x=None, layer_id=0, reset_outputs=lambda: None)
    req_to_token = torch.zeros((2, 16), dtype=torch.int32)
    return [("decode", lambda f: f(inputs=inputs, token_to_kv_pool=pool, req_to_token=req_to_token))]


CALLS = {WO_A: _wo_a_calls, MIX: _mix_calls, COMBINE: _combine_calls, Q_NORM: _q_norm_calls, DECODE: _decode_calls}


def _paths(sides, path, cap, cuda):
    own, hook = sides[path]
    return {case: _both(own, hook, call, cap, cuda) for case, call in CALLS[path]()}


@pytest.mark.parametrize("path", list(CALLS))
@pytest.mark.parametrize("tier", TIERS)
def test_on_every_exact_tier_each_hook_is_upstreams_function(sides, path, tier):
    assert resolve(tier).match == "exact"
    for cuda in CUDAS:
        for case, (upstream, routed) in _paths(sides, path, tier, cuda).items():
            assert routed == upstream, (path, tier, cuda, case)


def test_the_paths_differ_by_architecture_as_upstreams_facts_say(sides):
    """The premise: these reads choose paths (the stand-ins see different kernels per GPU)."""
    wo_a = {cap: _paths(sides, WO_A, cap, (12, 9)) for cap in ("8.0", "9.0", "10.0")}
    assert wo_a["10.0"][(300, "is_target_verify")][0] == "_wo_a_bf16_bmm_token_major"
    assert wo_a["9.0"][(300, "is_target_verify")][0] == "einsum"
    assert wo_a["9.0"][(1, "is_decode")][0] == "wo_a_bf16_gemv" == wo_a["10.0"][(1, "is_decode")][0]
    assert wo_a["8.0"][(1, "is_decode")][0] == "einsum"
    decode = {cap: _paths(sides, DECODE, cap, (12, 9))["decode"][0] for cap in ("9.0", "10.0")}
    assert decode == {"9.0": "fp4_index_logits_paged", "10.0": "fp4_index_logits_decode"}
    combine = {cap: _paths(sides, COMBINE, cap, (12, 9))[(500, False)][0] for cap in ("8.0", "9.0", "12.0")}
    assert combine == {"8.0": "mhc_combine", "9.0": "mhc_combine", "12.0": "hc_combine_norm"}
    assert _paths(sides, Q_NORM, "10.0", (12, 9))["v4.1"][0] == "rmsnorm_mxfp8"
    assert _paths(sides, Q_NORM, "9.0", (12, 9))["v4.1"][0] == ("q_norm", "q_norm")
    mix = {cap: _paths(sides, MIX, cap, (12, 9)) for cap in ("8.0", "9.0", "10.0", "12.0")}
    assert {cap: mix[cap][500][0] for cap in mix} == {
        "8.0": "hc_mix_stats", "9.0": "hc_mix_stats_sinkhorn_bf16x3",
        "10.0": "hc_mix_stats_sinkhorn_deepgemm",  # the DeepGEMM parts load builds where DeepGEMM is on
        "12.0": "hc_mix_stats_sinkhorn"}


@pytest.mark.parametrize("path", list(CALLS))
@pytest.mark.parametrize("cap", UNKNOWN)
def test_on_unknown_gpus_the_nearest_tiers_paths_are_taken(sides, path, cap):
    """10.5, 11.5 and 12.3 are Blackwell to SGLang and to their tiers alike; 13.0 takes 12.1's
    Blackwell paths (Triton kernels, compiled for the device), where SGLang's majors-10-12 rule
    takes the generic ones."""
    res = resolve(cap)
    assert res.match != "exact"
    tier = str(res.resolved)
    paths = _paths(sides, path, cap, (12, 9))
    for case, (upstream, routed) in paths.items():
        assert routed == _paths(sides, path, tier, (12, 9))[case][0], (path, cap, case)
        if cap != "13.0":
            assert routed == upstream, (path, cap, case)
    if cap == "13.0" and path != DECODE:  # the decode scoring's Hopper read is off on both
        assert any(upstream != routed for upstream, routed in paths.values()), path
