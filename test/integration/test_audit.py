"""docs/capability-sites.md is the audit of the installed SGLang release (drift test), the
audit's classification of SGLang 0.5.23's sites, and its linear time on generated files.

The audit reads the installed tree's source only (``ast``); sglang is located, not
imported.  About half a minute on a loaded 2-core machine.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import os
import re
import tokenize
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_arch.audit import audit, gates, report
from unit.timing import grows_at_most
from sglang_arch.audit.scan import scan_source

_SPEC = importlib.util.find_spec("sglang")
SGLANG = list(_SPEC.submodule_search_locations)[0] if _SPEC and _SPEC.submodule_search_locations else None
DOC = Path(__file__).resolve().parents[2] / "docs" / "capability-sites.md"


@pytest.fixture(scope="module")
def installed():
    if SGLANG is None:
        pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'")
    return audit(SGLANG)


def test_doc_is_the_audit_of_the_installed_release(installed):
    assert installed.sglang == "0.5.23", "the doc is generated from the tested release"
    expected = report.render_markdown(installed)
    assert DOC.read_text() == expected, (
        f"docs/capability-sites.md drifted; regenerate: sglang-arch audit {SGLANG} --markdown > {DOC}")


def test_every_file_that_may_hold_a_site_was_scanned(installed):
    assert not installed.unparsed and not installed.notes


def test_the_plugin_targets_are_routed_sites(installed):
    routed = {(s.file, s.scope) for s in installed.sites if s.plugin == "routed"}
    assert ("srt/distributed/device_communicators/torch_symm_mem.py", "TorchSymmMemCommunicator.__init__") in routed
    assert ("srt/arg_groups/overrides.py", "_dsa_split_backend_resolution") in routed
    assert ("srt/arg_groups/overrides.py", "_dsa_kv_cache_dtype_default") in routed
    symm = [s for s in installed.sites if s.file.endswith("all_reduce_utils.py") and s.source == "table"]
    assert [(s.kind, s.plugin) for s in symm] == [("decision", "routed")]
    assert all(os.path.exists(os.path.join(SGLANG, s.file)) for s in installed.sites)


# The linear-attention kernel defaults, routed by the plugin's targets
# (policies/linear_attention.py); the series carries none of them.
LINEAR_ATTENTION_DEFAULTS = [
    ("srt/arg_groups/attention_hook.py", "handle_linear_attn_backend"),
    ("srt/arg_groups/glm5_next_hook.py", "apply_glm5_next_spec_backend_defaults"),
    ("srt/arg_groups/kimi_k3_hook.py", "apply_kimi_k3_linear_attn_defaults"),
    ("srt/layers/attention/linear/gdn_backend.py", "flashinfer_gdn_prefill_default"),
    ("srt/layers/attention/linear/kda_backend.py", "flashinfer_kda_prefill_default"),
]


@pytest.mark.parametrize("file, scope", LINEAR_ATTENTION_DEFAULTS)
def test_the_linear_attention_defaults_are_routed_by_the_plugin(installed, file, scope):
    decisions = [s for s in installed.sites if s.file == file and s.scope == scope and s.kind == "decision"]
    assert decisions and all((s.plugin, s.patched) == ("routed", "unrouted") for s in decisions), \
        [(s.line, s.plugin, s.patched) for s in decisions]


# Per-model decisions: every decision site of these functions (or the module-level
# table) is routed by the plugin; the series carries no per-model rule.
ROUTED_HERE = [
    ("srt/models/gemma4_vision.py", "Gemma4VisionAttention._select_backend"),
    ("srt/models/kimi_k3_vl.py", "_resolve_mm_attention_backend"),
    ("srt/models/mimo_audio.py", "AudioEncoderMixin.build_audio_encoder"),
    ("srt/models/beam.py", "BeamModel._all_reduce_limits"),
    ("srt/models/beam.py", ""),  # _FLASHINFER_AR_TOKEN_BAND
]


@pytest.mark.parametrize("file, scope", ROUTED_HERE)
def test_per_model_backend_sites_are_routed_by_the_plugin(installed, file, scope):
    decisions = [s for s in installed.sites if s.file == file and s.scope == scope and s.kind == "decision"
                 and s.concern != "gemm"]
    assert decisions
    assert [(s.line, s.plugin, s.patched) for s in decisions] == [(s.line, "routed", "unrouted") for s in decisions]


def _function(tree, name):
    return next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == name)


def test_the_nvfp4_load_time_pick_runs_only_for_auto(installed):
    """targets.MOE_LOAD_TIME_COVERS: ``create_moe_runner``'s capability check sits
    under ``moe_runner_backend.is_auto()``, the runner the MoE guard leaves ``auto`` only
    where its decision is SGLang's own pick."""
    tree = ast.parse((Path(SGLANG) / "srt/layers/quantization/modelopt_quant.py").read_text())
    method = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
                  and node.name == "ModelOptNvFp4FusedMoEMethod")
    create = _function(method, "create_moe_runner")
    autos = [branch for branch in ast.walk(create) if isinstance(branch, ast.If)
             and ast.unparse(branch.test) == "moe_runner_backend.is_auto()"]
    assert len(autos) == 1
    inner = [ast.unparse(branch.test) for branch in ast.walk(autos[0]) if isinstance(branch, ast.If)]
    assert "is_cuda() and (8, 0) <= get_device_capability() < (10, 0)" in inner
    checks = [ast.unparse(branch.test) for branch in ast.walk(create) if isinstance(branch, ast.If)
              and "get_device_capability" in ast.unparse(branch.test)]
    assert checks == ["is_cuda() and (8, 0) <= get_device_capability() < (10, 0)"], checks
    site = [s for s in installed.sites if s.file == "srt/layers/quantization/modelopt_quant.py"
            and s.scope == "ModelOptNvFp4FusedMoEMethod.create_moe_runner" and s.kind == "decision"]
    assert [(s.plugin, s.patched) for s in site] == [("routed", "unrouted")]


def test_muse_sparks_nvfp4_experts_pick_for_auto_is_modelopts(installed):
    """targets.MOE_LOAD_TIME_COVERS: Muse Spark's ModelOpt-FP4 experts resolve ``auto``
    themselves (``_resolve_moe_runner_backend``): the capability check comes after an early
    return for any runner but ``auto``, and picks marlin on SM80-SM9x, trtllm-gen elsewhere,
    the NVFP4 rule the registry models; these experts exist only for ``modelopt_fp4``
    checkpoints, which the guard judges as NVFP4."""
    from sglang_arch.arch import parse_capability
    from sglang_arch.arch.policies import moe
    from sglang_arch.integrations.sglang.glue.moe import kind_of

    tree = ast.parse((Path(SGLANG) / "srt/layers/muse_spark/muse_spark_fp4_moe.py").read_text())
    resolve = _function(tree, "_resolve_moe_runner_backend")
    ifs = [node for node in resolve.body if isinstance(node, ast.If)]
    assert [ast.unparse(node.test) for node in ifs] == [
        "not backend.is_auto()", "is_cuda() and (8, 0) <= get_device_capability() < (10, 0)"]
    assert ast.unparse(ifs[0].body[0]) == "return backend"
    assert ast.unparse(ifs[1].body[0]) == "return MoeRunnerBackend.MARLIN"
    assert ast.unparse(resolve.body[-1]) == "return MoeRunnerBackend.FLASHINFER_TRTLLM"
    for cap, runner in (("8.0", "marlin"), ("8.9", "marlin"), ("9.0", "marlin"), ("10.0", "flashinfer_trtllm"),
                        ("10.3", "flashinfer_trtllm")):
        assert moe.upstream_moe_runner(parse_capability(cap), "nvfp4") == runner, cap
    model = ast.parse((Path(SGLANG) / "srt/models/muse_spark.py").read_text())
    uses = _function(model, "_uses_nvfp4_experts")
    assert "_quantization_name(quant_config) != 'modelopt_fp4'" in [
        ast.unparse(node.test) for node in ast.walk(uses) if isinstance(node, ast.If)]
    assert kind_of("modelopt_fp4", {})[0] == "nvfp4"
    site = [s for s in installed.sites if s.file == "srt/layers/muse_spark/muse_spark_fp4_moe.py"
            and s.kind == "decision"]
    assert [(s.plugin, s.patched) for s in site] == [("routed", "unrouted")]


def test_the_fp4_experts_flashinfer_mxfp4_split_is_the_catalogs(installed):
    """targets.MOE_LOAD_TIME_COVERS: Fp8Config picks its FP4-expert wrapper for
    flashinfer_mxfp4 only under that runner (which the MoE guard leaves only where the
    catalog runs it for ``fp8_mxfp4``): CUTLASS on is_sm90 / is_sm120 (majors 9 and 12),
    trtllm-gen elsewhere.  Wherever the catalog runs the runner for these experts, the
    kernel it runs is the one this split picks."""
    from sglang_arch.arch import catalog
    from sglang_arch.arch.capability import Capability

    tree = ast.parse((Path(SGLANG) / "srt/layers/quantization/fp8.py").read_text())
    config = next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == "Fp8Config")
    method = _function(config, "get_quant_method")
    outer = [node for node in ast.walk(method) if isinstance(node, ast.If)
             and ast.unparse(node.test) == "self.is_fp4_experts and get_moe_runner_backend().is_flashinfer_mxfp4()"]
    assert len(outer) == 1
    split = [node for node in outer[0].body if isinstance(node, ast.If)]
    assert [ast.unparse(node.test) for node in split] == ["get_platform().is_sm90 or get_platform().is_sm120"]
    assert "Mxfp4FlashinferCutlassMoEMethod" in ast.unparse(split[0].body)
    assert "Mxfp4FlashinferTrtllmMoEMethod" in ast.unparse(outer[0].body[1:])
    cutlass = {"flashinfer_cutlass_moe_sm90", "flashinfer_cutlass_moe_sm120"}
    ran = set()
    for major in range(7, 14):
        for minor in range(10):
            verdict = catalog.choice_runs("moe_runner", "flashinfer_mxfp4", Capability(major, minor), (13, 0),
                                          "fp8_mxfp4")
            if verdict.runs:
                assert (verdict.kernel in cutlass) == (major in (9, 12)), (major, minor, verdict.kernel)
                ran.add(verdict.kernel)
    assert ran == cutlass | {"flashinfer_trtllm_gen_moe"}
    site = [s for s in installed.sites if s.file == "srt/layers/quantization/fp8.py" and s.kind == "decision"
            and s.scope == "Fp8Config.get_quant_method"]
    assert [(s.plugin, s.patched) for s in site] == [("routed", "unrouted")]


def test_the_fp8_gemm_covers_rest_on_conditions_the_registry_decides(installed):
    """targets.FP8_GEMM_COVERS: SGLang's automatic FP8 block GEMM pick runs only while the
    backend is ``auto`` (the FP8 GEMM target names its own backend wherever SGLang's has no
    build here), and the block-32 DeepGEMM pick needs ``ENABLE_JIT_DEEPGEMM`` (the DeepGEMM
    target's).  Read from the installed release: a release that calls the automatic pick
    elsewhere, or drops the DeepGEMM conjunct, fails here."""
    tree = ast.parse((Path(SGLANG) / "srt/layers/quantization/fp8_utils.py").read_text())
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
             and getattr(node.func, "id", None) == "_dispatch_auto_backend"]
    dispatch = _function(tree, "dispatch_w8a8_block_fp8_linear")
    guarded = [branch for branch in ast.walk(dispatch) if isinstance(branch, ast.If)
               and ast.unparse(branch.test) == "not backend.is_auto()"]
    assert len(calls) == 1 and len(guarded) == 1 and calls[0] in list(ast.walk(guarded[0].orelse[0])), \
        "SGLang's automatic FP8 GEMM pick is no longer reached only for --fp8-gemm-backend auto"
    block32 = [branch for branch in ast.walk(dispatch) if isinstance(branch, ast.If)
               and "weight_block_size == [32, 32]" in ast.unparse(branch.test)]
    assert len(block32) == 1 and isinstance(block32[0].test, ast.BoolOp) and isinstance(block32[0].test.op, ast.And)
    assert "deep_gemm_wrapper.ENABLE_JIT_DEEPGEMM" in [ast.unparse(v) for v in block32[0].test.values]
    status = {("sm100" in s.code): (s.plugin, s.patched) for s in installed.sites
              if s.file == "srt/layers/quantization/fp8_utils.py" and s.kind == "decision"
              and s.scope in ("_dispatch_auto_backend", "dispatch_w8a8_block_fp8_linear")}
    # The SM100 block-32 arm (explicit deep_gemm, UE8M0 scales) is not covered: the function is
    # hooked for it (policies/quant.deep_gemm_sm100_block32, the scoped_fact target).
    assert status == {False: ("routed", "unrouted"), True: ("routed", "unrouted")}, status
    from sglang_arch.integrations.sglang import targets

    assert not any(c.endswith("(get_platform().is_sm100 and backend.is_deep_gemm() and act_scale_ue8m0)")
                   for c in targets.FP8_GEMM_COVERS)
    assert any(t.path.endswith("fp8_utils.dispatch_w8a8_block_fp8_linear") for t in targets.all_targets())


# The misfilings: sites that pick an attention backend or all-reduce sizes, filed
# before by their folder under model, other, speculative, quantization or gemm, or counted
# as kernel gates.  Each (file, function) holds a decision of the three concerns.
MISFILED = [
    ("srt/arg_groups/model_overrides/gpt_oss.py", "_gpt_oss_overrides", "attention/"),
    ("srt/arg_groups/model_overrides/olmo2.py", "_olmo2_overrides", "attention/"),
    ("srt/arg_groups/model_overrides/minimax_m3.py", "_minimax_m3_overrides", "attention/"),
    ("srt/arg_groups/overrides.py", "_deterministic_attention_backend", "attention/"),
    ("srt/arg_groups/speculative_hook.py", "_resolve_dflash_draft_attention_backend", "attention/"),
    ("srt/speculative/draft_utils.py", "DraftBackendFactory._create_hybrid_linear_attn_decode_backend", "attention/"),
    ("srt/layers/attention/vision.py", "VisionAttention._determine_attention_backend", "attention/"),
    ("srt/models/gemma4_vision.py", "Gemma4VisionAttention._select_backend", "attention/"),
    ("srt/models/kimi_k3_vl.py", "_resolve_mm_attention_backend", "attention/"),
    ("srt/models/beam.py", "BeamModel._all_reduce_limits", "collectives"),
    ("srt/models/beam.py", "", "fusion"),  # _FLASHINFER_AR_TOKEN_BAND = {((10, 3), 4): ...}
    ("srt/layers/attention/dsa/dsa_backend_kpool.py", "DeepseekSparseAttnBackendKPoolMixin._resolve_kpool_tail_backend",
     "attention/dsa"),  # trtllm-gen vs FA3 by a capability range: a decision, not a gate
    ("srt/layers/attention/linear/gdn_backend.py", "flashinfer_gdn_prefill_default", "attention/linear"),
    ("srt/layers/attention/linear/kda_backend.py", "flashinfer_kda_prefill_default", "attention/linear"),
]


@pytest.mark.parametrize("file, scope, concern", MISFILED)
def test_decisions_are_filed_by_what_they_decide(installed, file, scope, concern):
    found = [(s.line, s.kind, s.concern) for s in installed.sites if s.file == file and s.scope == scope]
    assert any(kind == "decision" and c.startswith(concern) for _, kind, c in found), found


# The DSA / DeepSeek-V4 / Kimi-K3 / MiniMax internals that decide no attention
# backend, an all-reduce size or a fusion: (file, line, function) -> (kind, concern) by what
# the line decides, read in SGLang 0.5.23 (each reason is the rule or gate entry that files it).
INTERNALS = [
    ("kernels/ops/attention/minimax_sparse/decode/topk_sparse.py", 459, "flash_decode_with_gqa_share_sparse",
     "decision", "other"),  # the pinned launch config vs the autotuned one of one Triton kernel
    ("kernels/ops/attention/prefill_attention.py", 180, "context_attention_fwd", "decision", "other"),  # BLOCK
    ("srt/layers/attention/deepseek_v4_backend.py", 1538, "DeepseekV4AttnBackend.init_forward_metadata_indexer",
     "gate", "attention/dsa"),  # metadata matching the SM120 FP4 indexer kernel's split_kv
    ("srt/layers/attention/deepseek_v4_backend.py", 2927, "DeepseekV4AttnBackend._use_sparse_prefill",
     "gate", "attention/dsa"),  # FlashMLA sparse prefill: no SM120 build
    ("srt/layers/attention/deepseek_v4_backend.py", 4305, "DeepseekV4AttnBackend._forward_attention",
     "gate", "attention/dsa"),  # decode_attention_sm100.swapab_attention
    ("srt/layers/attention/dsv4/metadata.py", 241, "PagedIndexerMetadata.__post_init__", "gate", "attention/dsa"),
    ("srt/layers/attention/qwen_sparse_attn_backend.py", 72, "_resolve_trtllm_sparse_decode", "gate",
     "attention/dsa"),  # corrupts long-context decode on SM121
    ("srt/layers/attention/qwen_sparse_attn_backend.py", 1788, "QwenSparseAttnBackend._forward_trtllm_sparse",
     "gate", "quantization"),  # the KV dtype the kernel that runs takes
    ("srt/mem_cache/memory_pool.py", 5839, "get_minimax_sparse_index_dtype", "decision", "quantization"),
    ("srt/models/deepseek_v4.py", 1447, "MQALayer.__init__", "decision", "other"),  # multi-stream bs limit
    ("srt/models/deepseek_v4.py", 3285, "DeepseekV4DecoderLayerBase.refresh_mhc_norm_weight_cache", "decision",
     "other"),
    ("srt/models/deepseek_v4.py", 3293, "DeepseekV4DecoderLayerBase.refresh_mhc_norm_weight_cache", "decision",
     "other"),
    ("srt/models/deepseek_v4_dspark.py", 140, "DSparkAttention.__init__", "decision", "other"),
    ("srt/models/deepseek_v4_mhc.py", 624, "can_fuse_post", "decision", "other"),
    ("srt/models/deepseek_v4_mhc.py", 714, "_post_fusion", "decision", "other"),
    ("srt/models/gemma4_diffusion.py", 177, "DiffusionGemmaAttention.forward", "decision", "other"),  # rope fusion
    ("srt/models/gemma4_diffusion.py", 215, "DiffusionGemmaAttention.forward", "decision", "other"),
    ("srt/models/kimi_k3.py", 1523, "KimiK3DeltaAttention.__init__", "decision", "other"),  # side-stream bs limit
    ("srt/models/kimi_k3.py", 2292, "KimiK3MLAAttention.__init__", "decision", "other"),
    ("srt/models/minimax_m3.py", 1677, "_uses_push_plane_fusion", "gate", "fusion"),  # cluster launch: SM90+
]


@pytest.mark.parametrize("file, line, scope, kind, concern", INTERNALS)
def test_attention_internals_are_filed_by_what_they_decide(installed, file, line, scope, kind, concern):
    site = {(s.file, s.line): s for s in installed.sites}[(file, line)]
    assert (site.scope, site.kind, site.concern) == (scope, kind, concern), site


def test_the_scanner_sees_jit_arch_device_names_and_nested_keys(installed):
    reads = {(s.file, s.line): s for s in installed.sites}
    jit = [s for s in installed.sites if "get_jit_cuda_arch" in s.code]
    assert any(s.file == "kernels/ops/communication/all_reduce_fusion.py" for s in jit)
    names = [s for s in installed.sites if "get_device_name" in s.code]
    assert any(s.file == "srt/layers/attention/qsa/sparse_attn.py" and s.kind == "decision" for s in names)
    band = reads[("srt/models/beam.py", 178)]
    assert (band.source, band.kind, band.concern) == ("table", "decision", "fusion")


def test_every_kernel_gate_is_one_check_of_the_release(installed):
    """Each entry of audit/gates.py names a check that is still in the installed release,
    and the sites it matches are gates; no entry names a module or a class."""
    used = set()
    for s in installed.sites:
        gate = gates.gate_for(s.file, s.scope, s.code)
        if gate is not None:
            used.add(gate)
            assert s.kind == "gate" and s.kind_reason == gate.reason, (s.file, s.line)
    assert used == set(gates.KERNEL_GATES)
    functions = {(s.file, s.scope) for s in installed.sites if s.scope}
    assert all(g.function == "" or (g.file, g.function) in functions for g in gates.KERNEL_GATES)


def test_probe_and_device_are_only_gates_and_facts(installed):
    assert all(s.kind != "decision" for s in installed.sites
               for st_ in (s.plugin, s.patched) if st_ in ("probe", "device"))


def _assigned(site):
    """A module-level site's assigned name (``TABLE = {...}``): what a covers entry names."""
    head = site.code.split("=", 1)[0].strip() if not site.scope and "=" in site.code else ""
    return (head,) if head.isidentifier() else ()


def test_every_covers_entry_takes_one_decision_of_the_release(installed):
    """Each ``covers`` entry of the plugin's targets names a check still in the installed
    release, and takes exactly one site there, a decision (a stale entry, or one that would
    swallow a gate or a second site, fails here).  The series has none: it edits each site."""
    from sglang_arch.audit.routing import Routing, patched_routing, plugin_routing
    from sglang_arch.audit.scan import package_module

    assert not patched_routing().covers
    for routing in (plugin_routing(),):
        assert routing.covers, routing.name
        for sel in routing.covers:
            one = Routing("one", covers={sel: "x"})
            hit = [s for s in installed.sites if (s.scope or _assigned(s))
                   and one.covered(package_module(s.file), s.scope, _assigned(s), s.code) is not None]
            assert [s.kind for s in hit] == ["decision"], (routing.name, sel, [(s.file, s.line) for s in hit])
            assert getattr(hit[0], routing.name) == "routed"


def test_no_unrouted_decision_in_the_three_concerns(installed):
    """The plugin's bar: 0 decisions in collectives, fusion and attention/* that the
    registry does not take.  The patched tree routes the mission's core: every decision
    site in what the series edits or replaces is routed there."""
    from sglang_arch.audit.routing import _rewrites_no_decision, changed_lines
    from sglang_arch.audit.scan import package_module
    from sglang_arch.upstream.steps import step_sites

    assert not [(s.file, s.line) for s in installed.unrouted_decisions("plugin")]
    core = []
    for site in step_sites():
        for edit in site.edits:
            if (edit.new is not None and (Path(SGLANG) / edit.path).is_file()
                    and not _rewrites_no_decision(edit)):
                lines = changed_lines((Path(SGLANG) / edit.path).read_text(), (edit,))
                core += [s for s in installed.sites if s.file == edit.path and s.kind == "decision" and s.line in lines]
        for route in site.replaces:
            module, name = route.split(":")
            core += [s for s in installed.sites if s.kind == "decision" and package_module(s.file) == module
                     and (s.scope == name or s.scope.startswith(name + ".") or _assigned(s) == (name.split(".")[-1],))]
    assert len(core) >= 8, [(s.file, s.line) for s in core]
    assert [(s.file, s.line, s.patched) for s in core if s.patched != "routed"] == []


# --- an independent sample: SGLang's capability reads found by grep, not by the scanner ---
#
# What the scanner finds is checked against a plain reading of the source that shares none
# of its rules: every code token (comments and strings dropped by ``tokenize``) that calls a
# probe or reads the device's capability or name, outside imports and ``def`` lines.  Each
# such line must be a site of the audit (anywhere in its innermost statement), classified,
# and, where it is a decision in the three concerns or MoE / quantization / GEMM, routed.
GREP = re.compile(r"\b_?(is_sm\d+\w*|is_blackwell\w*|is_hopper\w*)\b|\bget_device_capability\(|\bget_device_sm\("
                  r"|\bget_device_name\(|\bget_jit_cuda_arch\(|\.device_capability\b|\.device_sm\b")
# Names the grep matches that read no device: (file, name) -> why.
NOT_A_READ = {
    ("kernels/ops/attention/flash_attn/cute/interface.py", "is_sm90_range"):
        "a head-dimension range FA4's SM90 kernel accepts ('8 <= head_dim <= 256'), named for the kernel",
}
ROUTED_CONCERNS = ("collectives", "fusion", "attention/", "moe", "quantization", "gemm")


def _statement_spans(tree):
    spans, skip = [], set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip.update(range(node.lineno, node.end_lineno + 1))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            skip.update(range(node.lineno, node.body[0].lineno))
        if isinstance(node, (ast.If, ast.While)):
            spans.append((node.test.lineno, node.test.end_lineno))
        elif isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                                 ast.For, ast.With, ast.Try)):
            spans.append((node.lineno, node.end_lineno))
    return spans, skip


def _grep_hits(root):
    """(file, line, (first, last) line of its innermost statement, the name matched)."""
    for base in ("srt", "kernels"):
        for folder, dirs, files in os.walk(os.path.join(root, base)):
            dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "test", "tests", "testing"))
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                text = Path(path).read_text(encoding="utf-8", errors="replace")
                if not GREP.search(text):
                    continue
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                spans, skip = _statement_spans(ast.parse(text))
                code = {}
                for tok in tokenize.generate_tokens(io.StringIO(text).readline):
                    if tok.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER):
                        code[tok.start[0]] = code.get(tok.start[0], "") + " " + tok.string
                for line, joined in sorted(code.items()):
                    match = GREP.search(re.sub(r" ?([.(]) ?", r"\1", joined))
                    if match is None or line in skip:
                        continue
                    inner = [sp for sp in spans if sp[0] <= line <= sp[1]]
                    span = min(inner, key=lambda sp: sp[1] - sp[0]) if inner else (line, line)
                    yield rel, line, span, match.group(0).strip(".(")


@pytest.fixture(scope="module")
def grep_hits(installed):
    return list(_grep_hits(SGLANG))


def test_every_capability_read_a_grep_finds_is_a_classified_site(installed, grep_hits):
    from sglang_arch.audit.classify import CONCERNS, KINDS

    by_line = {(s.file, s.line): s for s in installed.sites}
    missed, found = [], []
    for file, line, (first, last), name in grep_hits:
        if (file, name) in NOT_A_READ:
            continue
        sites = [by_line[(file, n)] for n in range(first, last + 1) if (file, n) in by_line]
        if not sites:
            missed.append(f"{file}:{line} {name}")
        found += sites
    assert len(grep_hits) > 500  # the grep reads the release, not an empty tree
    assert missed == []
    assert all(s.kind in KINDS and s.concern in CONCERNS for s in found)
    unrouted = {(s.file, s.line, s.concern) for s in found
                if s.kind == "decision" and s.concern.startswith(ROUTED_CONCERNS) and s.plugin != "routed"}
    assert unrouted == set()


# The server settings a decision can write, read from the text of the block under its ``if``
# (indentation, no ``ast``): a decision that writes settings of one concern only is filed there.
SETTINGS = (
    ("attention/", re.compile(r"^(prefill_|decode_|speculative_draft_|mm_|dsv4_)?attention_backend$")),
    ("moe", re.compile(r"^moe_(runner|a2a)_backend$")),
    ("gemm", re.compile(r"^fp[48]_gemm(_runner)?_backend$")),
    ("fusion", re.compile(r"^enable_flashinfer_allreduce_fusion$")),
    ("collectives", re.compile(r"^(enable_torch_symm_mem|disable_custom_all_reduce)$")),
)
_WRITES = re.compile(r"[.\[\"' ](\w+)[\"']?\]?\s*=(?!=)|[\"'](\w+)[\"']\s*:|\b(\w+)=(?!=)")


def _written_concerns(lines, line):
    head = lines[line - 1]
    indent = len(head) - len(head.lstrip())
    block = []
    for text in lines[line:line + 40]:
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            break
        block.append(text)
    names = {n for m in _WRITES.finditer("\n".join(block)) for n in m.groups() if n}
    return {concern for concern, rx in SETTINGS for n in names if rx.match(n)}


def test_decisions_that_write_one_concerns_settings_are_filed_there(installed, grep_hits):
    by_line = {(s.file, s.line): s for s in installed.sites}
    texts, checked, wrong = {}, 0, []
    for file, line, _, _ in grep_hits:
        site = by_line.get((file, line))
        if site is None or site.kind != "decision":
            continue
        lines = texts.setdefault(file, Path(SGLANG, file).read_text(errors="replace").splitlines())
        if not lines[line - 1].lstrip().startswith(("if ", "elif ")):
            continue
        written = _written_concerns(lines, line)
        if len(written) != 1:
            continue
        checked += 1
        (concern,) = written
        if not site.concern.startswith(concern):
            wrong.append(f"{file}:{line} filed {site.concern}, writes {concern}")
    assert checked >= 10, checked
    assert wrong == []


# --- linear time over generated pathological files (no sglang needed) -------------------

# Pieces of pathological files; a file is a few of them repeated to the size asked.  The
# header puts a capability token in the file, so the prefilter lets it through to the parser.
PIECES = {
    "spaces": " ",
    "blank lines": "\n",
    "whitespace lines": " \t \n",
    "spaces in a comparison": "x = cap" + " " * 64 + "== 9\n",
    "brace keys": "{ " * 8 + "\n",
    "dict of capabilities": "T = {9: 1, 10: 2, (12, 0): 3, ((10, 3), 4): 5}\n",
    "nested brackets": "x = " + "[" * 90 + "9" + "]" * 90 + "\n",
    "parentheses": "y = " + "(" * 90 + "cap" + ")" * 90 + " >= 9\n",
    "huge literal": "s = '" + "a" * 4000 + "'\n",
    "long int": "n = 0x" + "f" * 4000 + "\n",
    "many statements": "if torch.cuda.get_device_capability()[0] == 9:\n    y = 1\n",
    "underscores": "_" * 200 + " = 1\n",
    "functions": "def f():\n    return get_platform().is_sm100\n",
    "names": "GB200 = H100 = cap_major = arch = 1\n",
}
HEADER = "import torch\nx = torch.cuda.get_device_capability()\n"


def _file(pieces, size):
    unit = "".join(PIECES[p] for p in pieces)
    if not unit.endswith("\n"):
        unit += "\n"
    return HEADER + unit * max(1, size // len(unit))


def _machine_seconds():
    """Seconds a plain Python loop of 10^6 additions takes here (the machine's speed)."""
    started = time.perf_counter()
    total = 0
    for i in range(1_000_000):
        total += i
    return time.perf_counter() - started


# Per MiB of source, at most this many times the loop above.  Measured on a 2-core
# machine shared with four other jobs: the loop 0.06-0.15 s; typical SGLang source about
# 10 loops per MiB; the slowest piece, 90-deep brackets (CPython's own parser), about 150.
MAX_LOOPS_PER_MIB = 400


@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(pieces=st.lists(st.sampled_from(sorted(PIECES)), min_size=1, max_size=3, unique=True))
def test_per_file_time_is_linear_in_its_size(pieces):
    """4x a pathological file takes at most about 4x the time (quadratic would be 16x; the
    bound is 8x, since a loaded 2-core machine was seen at 9x on one sample of 2), and
    a MiB at most MAX_LOOPS_PER_MIB plain loops (a 30 KB file of spaces took 20-40 s in the
    prefilter; one of 4 MiB would have taken days)."""
    size = 24 * 1024
    small, large = _file(pieces, size), _file(pieces, 4 * size)
    ok, seen = grows_at_most(lambda: scan_source("srt/layers/x.py", small),
                             lambda: scan_source("srt/layers/x.py", large), factor=8, slack=0.2)
    assert ok, (pieces, seen)
    per_mib = min(t_large for _, t_large in seen) / (len(large) / 2 ** 20)
    assert per_mib <= MAX_LOOPS_PER_MIB * _machine_seconds(), (pieces, per_mib)
