"""DSA's per-batch prefill pick: the plugin's hook against SGLang 0.5.23's own method.

``DeepseekSparseAttnBackend.set_dsa_prefill_impl`` (``srt/layers/attention/dsa_backend.py``)
reads two probes it binds at the backend's init, ``self._get_device_sm`` (the MHA one-shot
band) and ``self._is_blackwell`` (``flashmla_auto``'s FlashMLA variant).  Here the device is
simulated through SGLang's own probes: ``utils.common.get_device_sm`` answers the tier's SM
and SGLang's ``is_blackwell`` (its uncached ``_check_cuda_device_version``) is asked on it;
``override_platform`` reaches neither (they are not read through ``get_platform()``).
Upstream is called with them on each known tier, and the plugin's AROUND hook (over the
same original) with the registry routed to the tier: they set the same ``use_mha`` and
``dsa_prefill_impl``.  On unknown GPUs, where the hook keeps MHA one-shot, the kernel the
device runs it with has a build for the device.
"""

import importlib.util
import inspect
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from helpers import TIERS, simulator, uncached, upstream_and_hook  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.glue import attention as ga  # noqa: E402

MODULE = "sglang.srt.layers.attention.dsa_backend"
PATH = f"{MODULE}.DeepseekSparseAttnBackend.set_dsa_prefill_impl"
UNKNOWN = ("9.5", "10.5", "11.5", "12.3", "13.0")
PROBES = ("_get_device_sm", "_is_blackwell")


@pytest.fixture(scope="module")
def sides():
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    own, hook = upstream_and_hook(PATH)
    assert own.__module__ == MODULE
    # The hook's premise: the method reads its two probes from the instance.
    source = inspect.getsource(own)
    assert all(f"self.{name}" in source for name in PROBES)
    return own, hook, torch, ForwardMode


@pytest.fixture
def device(monkeypatch):
    """Simulate a GPU for SGLang's probes and the registry alike: ``device(cap)``."""
    import torch
    from sglang.srt.utils import common

    monkeypatch.setattr(glue, "_warned", set())
    monkeypatch.setattr(ga, "_prefill", {})
    monkeypatch.setattr(f"{MODULE}.is_dsa_enable_prefill_cp", lambda: False)
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    monkeypatch.setattr(common, "is_cuda", lambda: True)

    simulate = simulator(monkeypatch, common)
    yield simulate
    runtime.reset()



def _backend(fp8: bool):
    import torch
    from sglang.srt.utils import common

    return SimpleNamespace(
        _is_in_breakable_cuda_graph=lambda: False, _is_in_tc_piecewise_cuda_graph=lambda: False,
        _get_device_sm=lambda: common.get_device_sm(),  # SGLang's probe, on the simulated device
        _is_blackwell=uncached(common.is_blackwell),  # SGLang's is_blackwell, asked anew
        token_to_kv_pool=SimpleNamespace(dtype=torch.bfloat16),
        supports_mha_one_shot=True, hisparse_coordinator=None, enable_auto_select_prefill_impl=True,
        dsa_kv_cache_store_fp8=fp8, dsa_prefill_impl="flashmla_auto", use_mha=None)


def _batches(torch, ForwardMode):
    from sglang.srt.environ import envs

    long_kv = envs.SGLANG_DSA_PREFILL_DENSE_ATTN_KV_LEN_THRESHOLD.get() + 1
    for kv, q in ((128, 128), (long_kv, long_kv), (long_kv, 1)):  # MHA-short, sparse-heuristic, kv-heavy
        yield SimpleNamespace(forward_mode=ForwardMode.EXTEND, seq_lens_cpu=torch.tensor([kv]),
                              get_max_chunk_capacity=lambda: 1 << 30, seq_lens_sum=kv, extend_num_tokens=q)
    yield None


def _both(sides, fp8, batch):
    own, hook, _, _ = sides
    upstream, routed = _backend(fp8), _backend(fp8)
    probes = (routed._get_device_sm, routed._is_blackwell)
    own(upstream, batch)
    hook(own, routed, batch)
    assert (routed._get_device_sm, routed._is_blackwell) == probes  # the scoped probes are put back
    return (upstream.use_mha, upstream.dsa_prefill_impl), (routed.use_mha, routed.dsa_prefill_impl)


@pytest.mark.parametrize("tier", TIERS)
def test_on_every_known_tier_the_hook_is_upstreams_method(sides, device, tier):
    assert resolve(tier).match == "exact"
    device(tier)
    _, _, torch, ForwardMode = sides
    picks = set()
    for fp8 in (True, False):
        for batch in _batches(torch, ForwardMode):
            upstream, routed = _both(sides, fp8, batch)
            assert routed == upstream, (fp8, batch, upstream, routed)
            picks.add(upstream)
    assert len(picks) > 1  # the batches reach more than one of the method's answers


def test_the_tiers_reach_each_answer_of_the_method(sides, device):
    """Both probes matter across the tiers: MHA one-shot and flashmla_sparse each occur and
    each is absent somewhere (so the equality above covers both decisions)."""
    _, _, torch, ForwardMode = sides
    seen = {}
    for tier in TIERS:
        device(tier)
        seen[tier] = {_both(sides, True, b)[1] for b in _batches(torch, ForwardMode)}
    assert {t for t, s in seen.items() if any(mha for mha, _ in s)} == {"9.0", "10.0", "10.3", "10.7"}
    assert {t for t, s in seen.items() if (False, "flashmla_sparse") in s} == {"10.0", "10.3", "10.7", "11.0",
                                                                             "12.0", "12.1"}


@pytest.mark.parametrize("cap", UNKNOWN)
def test_on_unknown_gpus_the_routed_pick_runs_where_sglang_could_run_one(sides, device, cap):
    c = device(cap)
    _, _, torch, ForwardMode = sides
    for fp8 in (True, False):
        for batch in _batches(torch, ForwardMode):
            upstream, (mha, impl) = _both(sides, fp8, batch)
            if mha:  # _forward_standard_mha runs trtllm-gen's ragged kernel on major >= 10, FA3 below
                assert catalog.choice_runs("dsa", "trtllm" if c.major >= 10 else "fa3", c).runs, (cap, upstream)
            else:
                assert impl in ("flashmla_sparse", "flashmla_kv")
                # Both variants are one FlashMLA build: the routed variant runs wherever the one
                # SGLang picked does (neither does off sm_90a / sm_100a / sm_103a / sm_107a).
                assert catalog.choice_runs("dsa", impl, c).runs == catalog.choice_runs("dsa", upstream[1], c).runs
            if upstream[0] and not mha:  # upstream's band only where its kernel has no build
                assert not catalog.choice_runs("dsa", "trtllm" if c.major >= 10 else "fa3", c).runs


def test_a_9x_device_on_tier_9_0_keeps_mla(sides, device):
    """Tier 9.0 is in the band, but FA3 is sm_90a only: the hook keeps MLA on a 9.5 (as
    SGLang does, whose band excludes SM 95)."""
    device("9.5")
    _, _, torch, ForwardMode = sides
    batch = next(_batches(torch, ForwardMode))
    assert ga.dsa_prefill_probes(None) == (0, False)
    assert _both(sides, True, batch)[1][0] is False
