"""The NVFP4 KV cache's dequantize and FlashInfer's FP4 / MXFP8 quantize backends: the
plugin's hooks against SGLang 0.5.23's own functions, on every exact tier and on 10.5, 11.5,
12.3 and 13.0.

- ``kvfp4_tensor.NVFP4KVQuantizeUtil.dequantize`` reads ``get_platform().is_sm100 or
  is_sm120`` to take FlashInfer's ``nvfp4_kv_dequantize`` (a stand-in naming it here), else
  asserts ``is_sm90`` and runs its PyTorch fallback (on CPU tensors here).
- ``fp4_utils._flashinfer_fp4_quantize_impl`` and ``Mxfp4FlashinferTrtllmMoEMethod.
  quantize_routed_input`` pass FlashInfer a backend bound at import (``"cute-dsl" if
  get_platform().is_sm100 else "cuda"``); upstream's side binds it as SGLang's import would
  for the capability, the FlashInfer calls are stand-ins returning the backend they got.
  ``fp4_quantize``'s custom op holds the function itself, so the target's refresh sets the
  module value: checked to be the hook's answer.
- modelopt's import-time fake registration for ``sgl_kernel::scaled_fp4_quant`` (filed as
  metadata, not a decision): its premise, that the installed sgl_kernel has no such op.

Upstream's side runs under SGLang's own ``override_platform`` with the facts its probes
compute for the GPU; the routed side is the plugin's hook with the registry routed to the
capability.
"""

import importlib.util
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

import torch  # noqa: E402
from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue, targets  # noqa: E402
from sglang_arch.integrations.sglang.glue import moe  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

QUANT = "sglang.srt.layers.quantization"
DEQUANT = f"{QUANT}.kvfp4_tensor.NVFP4KVQuantizeUtil.dequantize"
FP4 = f"{QUANT}.fp4_utils._flashinfer_fp4_quantize_impl"
MXFP8 = f"{QUANT}.mxfp4_flashinfer_trtllm_moe.Mxfp4FlashinferTrtllmMoEMethod.quantize_routed_input"
UNKNOWN = ("10.5", "11.5", "12.3", "13.0")
CUDAS = ((12, 4), (12, 9))
CAPS = [(cap, cuda) for cap in TIERS for cuda in CUDAS] + [(cap, (12, 9)) for cap in UNKNOWN]


class Taken(Exception):
    """Raised by a stand-in kernel: the path the function took."""


def _cap(text):
    return Capability(*map(int, text.split(".")))


_machines = {}


def _routed(cap, cuda):
    ctx = _machines.get((cap, cuda)) or _machines.setdefault((cap, cuda), runtime.machine(capability=cap, cuda=cuda))
    mp = pytest.MonkeyPatch()
    mp.setattr(glue, "current", lambda: ctx)
    moe._kv_dequant.clear()
    moe._quantize_backend.clear()
    return mp


@pytest.fixture(scope="module")
def stand_ins():
    import flashinfer
    from sglang.srt.layers.quantization import fp4_utils, fp8_utils, kvfp4_tensor  # noqa: F401
    from sglang.srt.layers.quantization import mxfp4_flashinfer_trtllm_moe as mxfp4_trtllm

    mp = pytest.MonkeyPatch()

    def dequantize(*args, **kwargs):
        raise Taken("flashinfer")

    def mxfp8_quantize(*args, backend=None, **kwargs):
        raise Taken(backend)

    mp.setattr(flashinfer, "nvfp4_kv_dequantize", dequantize)
    mp.setattr(fp4_utils, "_flashinfer_fp4_quantize", lambda *a, backend=None, **k: backend)
    mp.setattr(fp8_utils, "flashinfer_mxfp8_quantize", mxfp8_quantize, raising=False)  # bound on CUDA only
    try:
        yield SimpleNamespace(fp4_utils=fp4_utils, mxfp4_trtllm=mxfp4_trtllm)
    finally:
        mp.undo()
        moe._kv_dequant.clear()
        moe._quantize_backend.clear()


def _run(call, cap, cuda):
    from sglang.srt.runtime_context import override_platform

    with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), cuda)):
        try:
            result = call()
        except Taken as taken:
            return str(taken)
        except AssertionError:
            return "refused"  # SGLang's is_sm90 assert on the fallback
    return "torch" if isinstance(result, torch.Tensor) else result


# --- the NVFP4 KV cache's dequantize ----------------------------------------------------------

def _dequant_both(stand_ins, cap, cuda):
    own, hook = upstream_and_hook(DEQUANT)
    args = (torch.zeros(1, 2, 8, dtype=torch.uint8), torch.zeros(1, 2, dtype=torch.uint8), 1.0, torch.bfloat16)
    upstream = _run(lambda: own(*args), cap, cuda)
    mp = _routed(cap, cuda)
    try:
        routed = _run(lambda: hook(own, *args), cap, cuda)
    finally:
        mp.undo()
    return upstream, routed


def test_dequant_premise_the_paths_are_flashinfer_torch_and_the_assert(stand_ins):
    assert _dequant_both(stand_ins, "10.0", (12, 9)) == ("flashinfer",) * 2
    assert _dequant_both(stand_ins, "9.0", (12, 9)) == ("torch",) * 2
    assert _dequant_both(stand_ins, "8.9", (12, 9)) == ("refused",) * 2


@pytest.mark.parametrize("tier", TIERS)
def test_dequant_on_every_exact_tier_is_upstreams(stand_ins, tier):
    assert resolve(tier).match == "exact"
    for cuda in CUDAS:
        upstream, routed = _dequant_both(stand_ins, tier, cuda)
        assert routed == upstream, (tier, cuda)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_dequant_on_unknown_gpus_never_calls_flashinfer_without_a_build(stand_ins, cap):
    upstream, routed = _dequant_both(stand_ins, cap, (12, 9))
    if cap in ("10.5", "12.3"):  # SGLang's major rule calls FlashInfer, whose check accepts neither
        assert upstream == "flashinfer"
    assert routed == "refused", cap  # SGLang's own assert: FlashInfer has no build, the fallback is SM90's


# --- FlashInfer's quantize backend ------------------------------------------------------------

def _sglang_pick(cap, cuda):
    return "cute-dsl" if upstream_platform_facts(_cap(cap), cuda)["is_sm100"] else "cuda"


def _both(module, value, path, call, cap, cuda, refresh=False):
    """SGLang's function at ``path`` and the plugin's hook over it on ``cap``, each run by
    ``call``, with the module value SGLang binds at import (``value``) as SGLang binds it;
    ``refresh``: also the value once the target's refresh ran (what the op registered at
    import reads once routed)."""
    own, hook = upstream_and_hook(path)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(module, value, _sglang_pick(cap, cuda))  # SGLang's import
        upstream = _run(lambda: call(own), cap, cuda)
        routes = _routed(cap, cuda)
        try:
            routed = _run(lambda: call(lambda *args: hook(own, *args)), cap, cuda)
            if not refresh:
                return upstream, routed
            (target,) = [t for t in targets.all_targets() if t.path == path]
            target.refresh(module)
            return upstream, routed, getattr(module, value)
        finally:
            routes.undo()
    finally:
        mp.undo()


def _fp4_both(stand_ins, cap, cuda):
    x = torch.zeros(2, 32, dtype=torch.bfloat16)
    return _both(stand_ins.fp4_utils, "_flashinfer_fp4_quantize_backend", FP4, lambda fn: fn(x), cap, cuda,
                 refresh=True)


def _mxfp8_both(stand_ins, cap, cuda):
    x = torch.zeros(2, 32, dtype=torch.bfloat16)
    return _both(stand_ins.mxfp4_trtllm, "_MXFP8_QUANTIZE_BACKEND", MXFP8, lambda fn: fn(None, x, 32), cap, cuda)


def test_quantize_premise_sglangs_import_time_pick_is_the_sm100_fact(stand_ins):
    import inspect

    rule = '"cute-dsl" if get_platform().is_sm100 else "cuda"'
    assert rule in inspect.getsource(stand_ins.fp4_utils) and rule in inspect.getsource(stand_ins.mxfp4_trtllm)
    assert _fp4_both(stand_ins, "10.0", (12, 9)) == ("cute-dsl",) * 3
    assert _mxfp8_both(stand_ins, "12.0", (12, 9)) == ("cuda",) * 2


@pytest.mark.parametrize("tier", TIERS)
def test_quantize_backend_on_every_exact_tier_is_upstreams(stand_ins, tier):
    for cuda in CUDAS:
        upstream, routed, refreshed = _fp4_both(stand_ins, tier, cuda)
        assert routed == refreshed == upstream, (tier, cuda)
        upstream, routed = _mxfp8_both(stand_ins, tier, cuda)
        assert routed == upstream, (tier, cuda)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_quantize_backend_on_unknown_gpus_takes_cute_dsl_only_where_it_builds(stand_ins, cap):
    from sglang_arch.arch import catalog

    cute = catalog.choice_runs("flashinfer_mxfp8_quantize", "cute-dsl", _cap(cap), (12, 9)).runs
    upstream, routed = _mxfp8_both(stand_ins, cap, (12, 9))
    if cap == "10.5":  # SGLang's SM100 rule takes CuTe DSL, which has no build for 10.5
        assert not cute and upstream == "cute-dsl"
    assert routed == "cuda", cap
    fp4 = _fp4_both(stand_ins, cap, (12, 9))
    assert fp4[1] == fp4[2] == ("cute-dsl" if cap == "10.5" else "cuda")  # 10.5: no CUDA FP4 module either


# --- modelopt's fake registration (filed as metadata) -----------------------------------------

def test_modelopt_fake_registration_premise_sgl_kernel_has_no_scaled_fp4_quant():
    """sgl_kernel loads its ops library only with a GPU: its builds are read instead."""
    from pathlib import Path

    from sglang_arch.audit import classify

    package = Path(importlib.util.find_spec("sgl_kernel").submodule_search_locations[0])
    builds = sorted(package.glob("sm*/common_ops*.so"))
    assert builds, package
    for build in builds:
        assert b"scaled_fp4_quant" not in build.read_bytes(), build
    line = "if is_cuda() and (not get_platform().is_sm120) and (fp4_quantize is not None):"
    site = SimpleNamespace(file="srt/layers/quantization/modelopt_quant.py", scope="", code=line)
    assert classify.metadata_reason(site)
