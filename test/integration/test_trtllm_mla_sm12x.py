"""trtllm_mla on SM12x, judged against FlashInfer 0.7.2's own dispatch code.

SGLang's trtllm_mla backend decodes through ``flashinfer.decode.trtllm_batch_decode_with_kv_cache_mla``
and prefills through ``flashinfer.prefill.trtllm_ragged_attention_deepseek``.  FlashInfer's
decode entry sends ``backend="auto"`` on every major but 10 to its XQA MLA kernels (built for
major 12), so decode runs on SM12x; its prefill entry has one path, trtllm-gen's FMHA cubins
(sm_100f, sm_103a, sm_107a).  The catalog (``xqa_mla``: decode only) and the registry's check
must say the same: decode accepted, prefill refused at argument resolution.
"""

import ast
import importlib.util
import inspect
import textwrap

import pytest

if importlib.util.find_spec("flashinfer") is None:
    pytest.skip("needs flashinfer 0.7.2 (the [serve] extra)", allow_module_level=True)

import torch  # noqa: E402

from sglang_arch.arch import resolve  # noqa: E402
from sglang_arch.arch.policies.attention import check_backend  # noqa: E402


def _decode_with(monkeypatch, capability):
    """Run FlashInfer's own MLA decode entry as on a GPU of ``capability``; which kernel it takes."""
    import flashinfer.mla._core as core

    taken = []
    monkeypatch.setattr(core, "get_compute_capability", lambda device: capability)
    monkeypatch.setattr(core, "is_sm12x_supported", lambda device: capability[0] == 12)
    monkeypatch.setattr(core, "xqa_batch_decode_with_kv_cache_mla", lambda *a, **k: taken.append("xqa"))
    query = torch.zeros(2, 1, 16, 576, dtype=torch.bfloat16)  # batch, q_len 1, heads, kv_lora + rope
    kv_cache = torch.zeros(4, 1, 64, 576, dtype=torch.bfloat16)
    block_tables, seq_lens = torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, dtype=torch.int32)
    try:
        core.trtllm_batch_decode_with_kv_cache_mla(query, kv_cache, torch.zeros(1024, dtype=torch.uint8), 128, 512,
                                                   64, block_tables, seq_lens, 128, bmm1_scale=1.0, bmm2_scale=1.0)
    except Exception:  # the trtllm-gen path needs a GPU past the point that names it
        pass
    return taken


@pytest.mark.parametrize("capability", [(12, 0), (12, 1)])
def test_flashinfer_decodes_mla_through_xqa_on_sm12x_and_the_registry_accepts_decode(monkeypatch, capability):
    assert _decode_with(monkeypatch, capability) == ["xqa"]
    res = resolve(f"{capability[0]}.{capability[1]}")
    assert check_backend(res, "trtllm_mla", "mla", "decode").valid is True


def test_flashinfer_does_not_take_xqa_on_sm100(monkeypatch):
    assert _decode_with(monkeypatch, (10, 0)) == []  # trtllm-gen's cubins (which need the GPU) instead


def test_flashinfer_prefills_mla_on_trtllm_gen_alone_and_the_registry_refuses_prefill_on_sm12x():
    import flashinfer.prefill as prefill

    tree = ast.parse(textwrap.dedent(inspect.getsource(prefill.trtllm_ragged_attention_deepseek)))
    called = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert "get_trtllm_gen_fmha_module" in called  # its one kernel family
    assert not any("xqa" in name for name in names)  # no XQA path for prefill
    for cap in ("12.0", "12.1"):
        assert check_backend(resolve(cap), "trtllm_mla", "mla", "prefill").valid is False


def test_the_catalogs_xqa_mla_targets_are_flashinfers():
    import flashinfer.jit.xqa as xqa

    source = "".join(inspect.getsource(xqa.gen_xqa_module_mla).split())
    assert "supported_major_versions=[12]" in source
