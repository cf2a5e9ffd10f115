"""The DeepSeek family's GEMM picks: the plugin's hooks against SGLang 0.5.23's own functions
on every exact tier and on 10.5, 11.5, 12.3 and 13.0 (and 6.1).

- ``deepseek_common/utils.tiny_router_gemm_max_tokens``: the rows up to which the router
  takes SGLang's tiny BF16 GEMM (-1: cuBLAS).  SGLang reads the device's SM bound at import
  (``_device_sm < 90``); upstream's side runs with that value set to the capability's, the
  routed side is the plugin's hook with the registry routed to the capability.
- ``kernels/ops/gemm/fused_a_gemm.dsv3_fused_a_gemm``: ``backend="auto"`` becomes
  ``_AUTO_BACKEND``, bound at import (the CuTe DSL kernel where ``is_sm120_supported()``, else
  the JIT one).  Upstream's side binds it as SGLang's import would for the capability (the
  probe's fact for it); the kernels are stand-ins naming which one was called.
"""

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

import torch  # noqa: E402
from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

ROUTER = "sglang.srt.models.deepseek_common.utils.tiny_router_gemm_max_tokens"
UNKNOWN = ("10.5", "11.5", "12.3", "13.0", "6.1")
CUDA = (12, 9)
# (num_experts, hidden_size, weight dtype): DeepSeek-V3's router, a shape the kernel does not
# serve (hidden 100), an FP32 router
SHAPES = ((256, 7168, torch.bfloat16), (256, 100, torch.bfloat16), (256, 7168, torch.float32))


def _cap(text):
    return Capability(*map(int, text.split(".")))


@pytest.fixture(scope="module")
def router():
    own, hook = upstream_and_hook(ROUTER)
    from sglang.srt.models.deepseek_common import utils

    mp = pytest.MonkeyPatch()
    for k in [k for k in os.environ if k.startswith("SGLANG_ARCH_")]:
        mp.delenv(k)
    mp.setattr(utils, "_is_cuda", True)
    try:
        yield own, hook, utils
    finally:
        mp.undo()


def _both(router, cap):
    """{shape: (upstream's rows, the routed rows)} on ``cap``."""
    from sglang.srt.runtime_context import override_platform

    own, hook, utils = router
    ctx = runtime.machine(capability=cap, cuda=CUDA)
    out = {}
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(utils, "_device_sm", _cap(cap).sm)
        with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), CUDA)):
            for n, k, dtype in SHAPES:
                kwargs = dict(num_experts=n, hidden_size=k, weight_dtype=dtype)
                upstream = own(**kwargs)
                mp.setattr(glue, "current", lambda: ctx)
                routed = hook(own, **kwargs)
                mp.setattr(glue, "current", lambda: SimpleNamespace(resolution=None))
                out[(n, k, dtype)] = upstream, routed
    finally:
        mp.undo()
    return out


@pytest.mark.parametrize("tier", TIERS)
def test_router_gemm_on_every_exact_tier_is_upstreams(router, tier):
    assert resolve(tier).match == "exact"
    for shape, (upstream, routed) in _both(router, tier).items():
        assert routed == upstream, (tier, shape)


def test_router_gemm_premise_sm90_takes_the_tiny_gemm_for_16_rows(router):
    v3 = SHAPES[0]
    assert _both(router, "9.0")[v3] == (16, 16)
    assert _both(router, "8.9")[v3] == (-1, -1)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_router_gemm_on_unknown_gpus_follows_the_tier(router, cap):
    res = resolve(cap)
    assert res.match != "exact"
    tier = _both(router, str(res.resolved))
    for shape, (upstream, routed) in _both(router, cap).items():
        assert routed == tier[shape][1] == upstream, (cap, shape)


def test_router_gemm_off_is_the_registrys_answer(router, monkeypatch):
    """Where the registry keeps cuBLAS the hook answers -1 whatever the device reads (the hook
    is the registry's decision, not SGLang's floor)."""
    from sglang_arch.arch.policies import deepseek

    monkeypatch.setattr(deepseek, "tiny_router_gemm", lambda res, cuda=None: deepseek.RouterGemm(False, "off"))
    from sglang_arch.integrations.sglang.glue import moe

    moe._tiny_router.clear()
    try:
        assert _both(router, "10.0")[SHAPES[0]] == (16, -1)
    finally:
        moe._tiny_router.clear()


# --- the fused QKV-A GEMM's auto backend ------------------------------------------------------

FUSED_A = "sglang.kernels.ops.gemm.fused_a_gemm.dsv3_fused_a_gemm"
CUDAS = ((12, 4), (12, 9), (13, 0))


@pytest.fixture(scope="module")
def fused_a():
    own, hook = upstream_and_hook(FUSED_A)
    from sglang.kernels.ops.gemm import fused_a_gemm as module

    mp = pytest.MonkeyPatch()
    for k in [k for k in os.environ if k.startswith("SGLANG_ARCH_")]:
        mp.delenv(k)
    for name in ("dsv3_fused_a_gemm", "cutedsl_dsv3_fused_a_gemm"):
        kernel = ModuleType(f"sglang.kernels.ops.gemm.{name}")
        kernel.dsv3_fused_a_gemm = lambda a, b, out, name=name: name
        mp.setitem(sys.modules, kernel.__name__, kernel)
    try:
        yield own, hook, module, mp
    finally:
        mp.undo()


def _fused_a_both(fused_a, cap, cuda, backend="auto"):
    from sglang.srt.runtime_context import override_platform

    own, hook, module, _ = fused_a
    facts = upstream_platform_facts(_cap(cap), cuda)
    enum = module.FusedAGemmBackend
    ctx = runtime.machine(capability=cap, cuda=cuda)
    mp = pytest.MonkeyPatch()
    try:  # SGLang's import-time pick for this GPU
        mp.setattr(module, "_AUTO_BACKEND", enum.CUTEDSL if facts["is_sm120"] else enum.JIT)
        with override_platform(**SIMULATED_MACHINE, **facts):
            upstream = own(None, None, backend=backend)
            mp.setattr(glue, "current", lambda: ctx)
            routed = hook(own, None, None, backend=backend)
    finally:
        mp.undo()
    return upstream, routed


def test_fused_a_premise_the_import_time_pick_is_sm120s_probe(fused_a):
    source = Path(fused_a[2].__file__).read_text()
    assert "FusedAGemmBackend.CUTEDSL if is_sm120_supported() else FusedAGemmBackend.JIT" in source
    assert _fused_a_both(fused_a, "12.0", (12, 9)) == ("cutedsl_dsv3_fused_a_gemm",) * 2
    assert _fused_a_both(fused_a, "10.0", (12, 9)) == ("dsv3_fused_a_gemm",) * 2


@pytest.mark.parametrize("tier", TIERS)
def test_fused_a_on_every_exact_tier_is_upstreams(fused_a, tier):
    assert resolve(tier).match == "exact"
    for cuda in CUDAS:
        for backend in ("auto", "jit", "cutedsl"):
            upstream, routed = _fused_a_both(fused_a, tier, cuda, backend)
            assert routed == upstream, (tier, cuda, backend)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_fused_a_on_unknown_gpus_takes_the_cutedsl_kernel_only_where_it_builds(fused_a, cap):
    from sglang_arch.arch import catalog

    builds = catalog.choice_runs("fused_a_gemm", "cutedsl", _cap(cap), (12, 9)).runs
    upstream, routed = _fused_a_both(fused_a, cap, (12, 9))
    if cap.startswith("12."):  # SGLang's major-12 rule picks the CuTe DSL kernel, which CuTe DSL cannot build
        assert not builds and upstream == "cutedsl_dsv3_fused_a_gemm"
    assert routed == "dsv3_fused_a_gemm", cap  # the JIT kernel: 12.1's rule where CuTe DSL has no build
    for backend in ("jit", "cutedsl"):  # an explicit backend is the caller's
        assert _fused_a_both(fused_a, cap, (12, 9), backend)[1] == _fused_a_both(fused_a, cap, (12, 9), backend)[0]
