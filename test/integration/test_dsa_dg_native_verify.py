"""DSA's MTP verify layout: the plugin's hooks against SGLang 0.5.23's own methods.

``DeepseekSparseAttnBackend._build_paged_mqa_schedule_2d_ctx_lens`` (per verify batch) builds
DeepGEMM's native ``[B, next_n]`` context-length schedule only where
``get_platform().is_sm100``, and ``_apply_cuda_graph_metadata`` (per CUDA-graph replay) hands
the captured 2-D schedule to the fused verify metadata only where the same check holds.  Both
are driven here without a GPU: the device is simulated through SGLang's own probe
(``utils.common.get_device_sm`` answers the capability; ``is_sm100_supported`` is asked anew on
it), the registry is routed to the same capability, and each method is called as SGLang's own
and through the plugin's hook (over the same original).  On every known tier they build the
same schedule and replay the same way, except on 10.7 (docs/differences.md D22: DeepGEMM's SM100
paged-MQA kernel has no build there); on unknown GPUs the native layout is taken only where the
kernel has a build for the device.
"""

import functools
import importlib.util
import inspect
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from helpers import TIERS, simulator, uncached, upstream_and_hook  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.glue import attention as ga  # noqa: E402

MODULE = "sglang.srt.layers.attention.dsa_backend"
BUILD = f"{MODULE}.DeepseekSparseAttnBackend._build_paged_mqa_schedule_2d_ctx_lens"
REPLAY = f"{MODULE}.DeepseekSparseAttnBackend._apply_cuda_graph_metadata"
UNKNOWN = ("9.5", "10.5", "11.5", "12.3", "13.0")
DIFFERENT = {"10.7": (True, False)}  # D22: (SGLang's native layout, the registry's)
NEXT_N = 3
BS = 2


@pytest.fixture(scope="module")
def sides():
    build, build_hook = upstream_and_hook(BUILD)
    replay, replay_hook = upstream_and_hook(REPLAY)
    # The hooks' premise: each method reads its module's get_platform() for is_sm100.
    for own in (build, replay):
        assert "get_platform().is_sm100" in inspect.getsource(own)
    return (build, build_hook), (replay, replay_hook)


@pytest.fixture
def device(monkeypatch):
    """Simulate a GPU for SGLang's probes and the registry alike: ``device(cap)``."""
    import torch
    from sglang.srt.utils import common

    monkeypatch.delenv("SGLANG_FP8_PAGED_MQA_LOGITS_TORCH", raising=False)
    monkeypatch.setattr(glue, "_warned", set())
    monkeypatch.setattr(ga, "_dg_native", {})
    monkeypatch.setattr(torch.version, "cuda", "12.9")
    monkeypatch.setattr(common, "is_cuda", lambda: True)
    monkeypatch.setattr(f"{MODULE}.is_cuda", lambda: True)
    monkeypatch.setattr(common, "is_sm100_supported", uncached(common.is_sm100_supported))

    simulate = simulator(monkeypatch, common)
    yield simulate
    runtime.reset()



def _built_native(sides) -> tuple:
    """Whether SGLang's method, and the hook over it, build the [B, next_n] schedule."""
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    (own, hook), _ = sides
    self = SimpleNamespace(speculative_num_draft_tokens=NEXT_N)
    cache = torch.tensor([5, 7], dtype=torch.int32)
    expanded = torch.arange(1, BS * NEXT_N + 1, dtype=torch.int32)
    out = []
    for call in (lambda: own(self, ForwardMode.TARGET_VERIFY, cache, expanded, BS),
                 lambda: hook(own, self, ForwardMode.TARGET_VERIFY, cache, expanded, BS)):
        schedule = call()
        native = tuple(schedule.shape) == (BS, NEXT_N) and bool((schedule == cache.view(-1, 1)).all())
        assert native or tuple(schedule.shape) == (BS * NEXT_N, 1), schedule.shape  # the per-token layout
        out.append(native)
    # Outside target_verify both stay per token.
    decode = hook(own, self, ForwardMode.DECODE, cache, expanded, BS)
    assert tuple(decode.shape) == (BS, 1)
    return tuple(out)


class _Stop(Exception):
    pass


class _Metadata(SimpleNamespace):
    def __getattr__(self, name):  # the buffers the fused call is handed: not read here
        return None


def _replayed_native(sides) -> tuple:
    """Whether SGLang's replay, and the hook over it, hand the captured 2-D schedule on."""
    import torch
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    _, (own, hook) = sides
    seen = []

    def fused(**kwargs):
        seen.append(kwargs["paged_mqa_ctx_lens_2d"] is not None)
        raise _Stop

    metadata = _Metadata(paged_mqa_ctx_lens_2d=torch.zeros((BS, NEXT_N), dtype=torch.int32))
    self = SimpleNamespace(
        decode_cuda_graph_metadata={BS: metadata}, set_dsa_prefill_impl=lambda forward_batch: None,
        _graph_page_table_width=lambda m: 64, dsa_index_kpool=1, experimental_kpool_metadata_fusion=False,
        speculative_num_draft_tokens=NEXT_N, _fused_verify_metadata=fused, req_to_token=None,
        dsa_index_topk=2048, physical_page_size=64)
    seq_lens = torch.tensor([5, 7], dtype=torch.int32)
    for call in (own, functools.partial(hook, own)):
        with pytest.raises(_Stop):
            call(self, BS, torch.zeros(BS, dtype=torch.int64), seq_lens, seq_lens, ForwardMode.TARGET_VERIFY, None)
    return tuple(seen)


def _kernel_runs(c: Capability) -> bool:
    return catalog.choice_runs("dsa_indexer", "dg_native", c).runs


@pytest.mark.parametrize("tier", TIERS)
def test_on_every_known_tier_the_hooks_are_upstreams_methods(sides, device, tier):
    assert resolve(tier).match == "exact"
    device(tier)
    upstream, routed = _built_native(sides)
    assert _replayed_native(sides) == (upstream, routed)  # the replay follows the same decision
    assert (upstream, routed) == DIFFERENT.get(tier, (upstream, upstream))


def test_the_tiers_reach_both_layouts(sides, device):
    """SGLang's own methods take the native layout on SM 10.x only: the equality above covers both."""
    native = set()
    for tier in TIERS:
        device(tier)
        if _built_native(sides)[0]:
            native.add(tier)
    assert native == {"10.0", "10.3", "10.7"}


def test_d22_the_native_layout_only_where_deepgemms_sm100_kernel_has_a_build(sides, device):
    """D22: SGLang's is_sm100 takes the native layout on 10.7, where DeepGEMM's SM100 paged-MQA
    kernel (JIT for 10.0 / 10.3) has no build; the registry keeps the per-token layout there."""
    c = device("10.7")
    assert not _kernel_runs(c)
    assert _built_native(sides) == (True, False) and _replayed_native(sides) == (True, False)
    assert "deep_gemm_paged_mqa_sm100 has no build for 10.7" in glue.current().dsa_dg_native_verify().reason


@pytest.mark.parametrize("cap", UNKNOWN)
def test_on_unknown_gpus_the_native_layout_needs_a_build_for_the_device(sides, device, cap):
    c = device(cap)
    upstream, routed = _built_native(sides)
    assert _replayed_native(sides) == (upstream, routed)
    if routed:
        assert _kernel_runs(c), cap
    if cap == "10.5":  # tier 10.3 would take it, but the kernel is JIT for 10.0 / 10.3 only
        assert (upstream, routed) == (True, False)


def test_without_a_registry_answer_the_hooks_are_sglangs(sides, device, monkeypatch):
    """No NVIDIA GPU for the registry: the hooks leave SGLang's own get_platform in place."""
    device("10.0")
    monkeypatch.setattr(glue, "current", lambda: SimpleNamespace(resolution=None))
    assert ga.dsa_dg_native_verify() is None
    assert _built_native(sides) == (True, True)
