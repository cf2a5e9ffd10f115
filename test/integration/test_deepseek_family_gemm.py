"""The DeepSeek family's GEMM picks: the plugin's hooks against SGLang 0.5.23's own functions
on every exact tier and on 10.5, 11.5, 12.3 and 13.0 (and 6.1).

- ``deepseek_common/utils.tiny_router_gemm_max_tokens``: the rows up to which the router
  takes SGLang's tiny BF16 GEMM (-1: cuBLAS).  SGLang reads the device's SM bound at import
  (``_device_sm < 90``); upstream's side runs with that value set to the capability's, the
  routed side is the plugin's hook with the registry routed to the capability.
"""

import importlib.util
import os
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
