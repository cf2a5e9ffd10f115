"""DeepSeek-V4.1's indexer: DeepGEMM's MQA logits only where DeepGEMM has a build.

SGLang 0.5.23's ``v41_indexer.is_sm100_or_newer`` (``major >= 10``) picks DeepGEMM for every
V4.1 index layer's decode and prefill (``make_full_topk_indexer``), the candidate indexer's
sparse table and the fused index store; on 10.7, 11.0 or 13.0, where the kernel catalog (and
``sglang-arch explain``) says DeepGEMM has no build, it still took DeepGEMM.  The registry's
answer (``glue.moe.dsv41_indexer_deep_gemm``), applied in the plugin's ``answer`` form over
SGLang's own function, is compared here with the catalog on every tier and on unknown
capabilities, and SGLang's own ``make_full_topk_indexer`` builds its indexer from it.
"""

import importlib.util
import sys

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import TIERS  # noqa: E402
from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.glue import moe  # noqa: E402
from sglang_arch.integrations.sglang.hooks import answer  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

INDEXER = "sglang.srt.layers.attention.dsv4.v41_indexer"
CAPS = TIERS + ("10.5", "11.5", "12.3", "13.0")
CUDA = (13, 0)


def _cap(text):
    return Capability(*map(int, text.split(".")))


@pytest.fixture(scope="module")
def indexer_module():
    import importlib

    return importlib.import_module(INDEXER)


def _routed(cap, indexer_module, monkeypatch):
    """SGLang's ``make_full_topk_indexer`` on ``cap`` with ``is_sm100_or_newer`` answered by
    the registry, as the plugin's hook answers it; upstream's rule where the glue keeps it."""
    from sglang.srt.runtime_context import override_platform

    ctx = runtime.machine(capability=cap, cuda=CUDA)
    monkeypatch.setattr(glue, "current", lambda: ctx)
    moe._dsv41_indexer.clear()
    upstream = lambda: _cap(cap).major >= 10  # noqa: E731 - the original's rule on the simulated device
    hooked = answer(moe.dsv41_indexer_deep_gemm)
    with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), CUDA)):
        monkeypatch.setattr(indexer_module, "is_sm100_or_newer", lambda: hooked(upstream))
        monkeypatch.setattr(indexer_module, "_use_deep_gemm_prefill", lambda: indexer_module.is_sm100_or_newer())
        monkeypatch.setattr(sys.modules[f"{INDEXER}.full_topk"], "is_deep_select_supported", lambda: False)
        built = indexer_module.make_full_topk_indexer(token_to_kv_pool=None, req_to_token=None)
    return built


@pytest.mark.parametrize("cap", CAPS)
def test_the_indexer_takes_deep_gemm_only_where_it_has_a_build(cap, indexer_module, monkeypatch):
    built = _routed(cap, indexer_module, monkeypatch)
    res = resolve(_cap(cap))
    verdict = catalog.choice_runs("deep_gemm", "jit", res.identities, CUDA)
    runs = verdict is not None and verdict.runs
    upstream = _cap(cap).major >= 10
    # never DeepGEMM where the catalog has no build; SGLang's own pick wherever it runs
    assert built.use_deep_gemm_decode == (upstream and runs)
    assert built.use_deep_gemm_prefill == (upstream and runs)
    if cap in ("10.7", "11.0", "13.0"):
        assert not built.use_deep_gemm_decode and not built.use_deep_gemm_prefill


@pytest.mark.parametrize("cap", ["9.0", "10.0", "10.3", "12.0", "12.1"])
def test_sglangs_own_pick_is_kept_where_deep_gemm_runs(cap, indexer_module, monkeypatch):
    built = _routed(cap, indexer_module, monkeypatch)
    assert built.use_deep_gemm_decode == (_cap(cap).major >= 10)


def test_without_a_routed_machine_sglang_decides(monkeypatch):
    monkeypatch.setattr(glue, "routed_context", lambda: None)
    monkeypatch.setattr(moe, "routed_context", lambda: None)
    assert moe.dsv41_indexer_deep_gemm() is None
