"""``sglang-arch audit`` on small synthetic SGLang trees (no sglang needed)."""

from __future__ import annotations

import json
import os
import textwrap
from unit.timing import grows_at_most

import pytest
from sglang_arch import cli
from sglang_arch.audit import AuditError, Routed, audit, classify, gates, report
from sglang_arch.audit import scan as scan_mod
from sglang_arch.integrations.sglang import targets as targets_mod

COMMON = """\
from functools import lru_cache, partial
import torch

def _check_cuda_device_version(device_capability_majors, cuda_version):
    return torch.cuda.get_device_capability()[0] in device_capability_majors

is_sm90_supported = lru_cache(maxsize=1)(partial(_check_cuda_device_version, device_capability_majors=[9], cuda_version=(12, 3)))

def get_device_capability(device_id=0):
    return torch.cuda.get_device_capability(device_id)
"""

FILES = {
    "srt/utils/common.py": COMMON,
    "srt/utils/__init__.py": "from sglang.srt.utils.common import *\n",
    "srt/runtime_context.py": """\
        _PLATFORM_PROBES = {"is_cuda": "is_cuda", "is_sm90": "is_sm90_supported", "is_sm100": "is_sm100_supported"}
        _PLATFORM_VALUES = {"device_capability": "get_device_capability"}
        def get_platform():
            pass
        """,
    # collectives: the symm-mem communicator, whose __init__ the plugin hooks
    "srt/distributed/device_communicators/torch_symm_mem.py": """\
        import torch
        from sglang.srt.distributed.device_communicators.all_reduce_utils import TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES

        class TorchSymmMemCommunicator:
            _WORLD_SIZES_MULTIMEM = {9: [4, 6, 8], 10: [4, 6, 8]}

            def __init__(self, group, device):
                self.device_capability = torch.cuda.get_device_capability(device)[0]

            def all_reduce(self, inp):
                return self.world_size in self._WORLD_SIZES_MULTIMEM.get(self.device_capability, ())
        """,
    "srt/distributed/device_communicators/all_reduce_utils.py": """\
        TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES = {
            9: {2: 1, 4: 2},
            10: {2: 1, 4: 2},
        }
        """,
    # fusion: an import-time flag used at call time
    "srt/layers/layer_boundary/residual/add_norm.py": """\
        from sglang.srt.utils import is_sm90_supported

        _is_sm90_supported = is_sm90_supported()

        def flashinfer_ar_fusion_applies(batch):
            # is_sm90_supported() in a comment is no site
            text = "torch.cuda.get_device_capability() in a string is no site"
            return _is_sm90_supported and batch <= 128

        def other_gate(batch):
            return _is_sm90_supported and batch > 0
        """,
    # attention: each kind of site
    "srt/layers/attention/flashinfer_mla_backend.py": """\
        import torch
        from sglang.srt.runtime_context import get_platform
        from sglang.srt.utils import get_device_capability

        def choose(x):
            major, minor = torch.cuda.get_device_capability()
            if major >= 10:
                return "flashmla"
            props = torch.cuda.get_device_properties(0)
            if props.major == 12:
                return "cutlass_mla"
            if get_platform().is_sm100:
                return "trtllm_mla"
            cap = get_device_capability()
            return cap >= (9, 0)

        def untraced(sm_version):
            return sm_version == 90

        def local():
            return _is_sm10x()

        def _is_sm10x():
            return False
        """,
    "kernels/ops/thing.py": """\
        from sglang.kernels.spec import CapabilityRequirement
        REQ = CapabilityRequirement.cuda(min_sm=(9, 0), max_sm=(9, 9))
        """,
    # skipped: the registry's copy in a patched tree, and tests
    "srt/arch/table.py": "import torch\nX = torch.cuda.get_device_capability()\n",
    "srt/test/test_x.py": "import torch\nX = torch.cuda.get_device_capability()\n",
    "srt/layers/test_y.py": "import torch\nX = torch.cuda.get_device_capability()\n",
}


def write_tree(base, files=FILES, version="9.9.9"):
    root = base / "sglang"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "__init__.py").write_text("")
    (root / "srt" / "__init__.py").write_text("")
    (root / "version.py").write_text(f'__version__ = "{version}"\n')
    return root


@pytest.fixture
def tree(tmp_path):
    return write_tree(tmp_path)


def by_line(rep, file):
    return {s.line: s for s in rep.sites if s.file == file}


ATTN = "srt/layers/attention/flashinfer_mla_backend.py"
SYMM = "srt/distributed/device_communicators/torch_symm_mem.py"
FUSION = "srt/layers/layer_boundary/residual/add_norm.py"


def test_each_source_of_site_one_per_line(tree):
    rep = audit(str(tree))
    sites = by_line(rep, ATTN)
    # line: what it reads (the read and the comparison of its value on one line count once)
    assert {ln: s.source for ln, s in sites.items()} == {
        6: "read", 7: "read", 10: "read", 12: "platform", 14: "probe", 15: "probe", 18: "compare", 21: "probe"}
    assert sites[6].code == "major, minor = torch.cuda.get_device_capability()"
    assert all(s.evaluated == "call" for s in sites.values())
    assert sites[18].scope == "untraced"
    kernel = by_line(rep, "kernels/ops/thing.py")
    assert kernel[2].source == "window" and kernel[2].kind == "gate" and kernel[2].evaluated == "import"
    tables = by_line(rep, "srt/distributed/device_communicators/all_reduce_utils.py")
    assert list(tables) == [1] and tables[1].source == "table" and tables[1].kind == "decision"


def test_kind_decision_gate_fact(tree):
    """Binding the capability is a fact (its uses are sites); a branch picking a backend is
    a decision; a window is a gate; a probe's own definition is a fact."""
    rep = audit(str(tree))
    attn = by_line(rep, ATTN)
    assert (attn[6].kind, attn[14].kind) == ("fact", "fact")  # major, minor = ...; cap = ...
    assert {attn[ln].kind for ln in (7, 10, 12, 15, 18, 21)} == {"decision"}
    assert all(attn[ln].concern == "attention/mla" for ln in (7, 10, 12))  # flashmla / cutlass_mla / trtllm_mla
    common = by_line(rep, "srt/utils/common.py")
    assert common[7].kind == "fact" and common[7].concern == "platform"  # is_sm90_supported = ...(window)
    assert by_line(rep, FUSION)[3].kind == "fact"  # _is_sm90_supported = is_sm90_supported()


def test_skips_comments_strings_registry_copy_and_tests(tree):
    rep = audit(str(tree))
    files = {s.file for s in rep.sites}
    assert not any(f.startswith("srt/arch/") or "test" in f for f in files)
    assert sorted(by_line(rep, FUSION)) == [3, 8, 11]  # not the comment (6), not the string (7)
    assert len({(s.file, s.line) for s in rep.sites}) == len(rep.sites)


def test_status_derived_from_targets_and_steps(tree):
    rep = audit(str(tree))
    attn = by_line(rep, ATTN)
    assert (attn[6].plugin, attn[6].patched) == ("device", "device")  # a fact read from the device
    assert "torch.cuda.get_device_capability" in attn[6].plugin_reason
    # A decision is the registry's only when routed: reading a routed probe does not make it so.
    assert (attn[12].plugin, attn[12].patched) == ("unrouted", "unrouted")
    assert "is_sm100" in attn[12].plugin_reason
    assert attn[14].plugin == "probe" and attn[14].patched == "probe"  # a fact from get_device_capability()
    assert attn[18].plugin == "unrouted" and "sm_version" in attn[18].plugin_reason
    assert attn[21].plugin == "unrouted" and "_is_sm10x() (defined here)" in attn[21].plugin_reason
    symm = by_line(rep, SYMM)
    assert symm[8].plugin == "routed" and "TorchSymmMemCommunicator.__init__" in symm[8].plugin_reason
    # The series' edits are exact texts of SGLang's releases: on this stand-in tree they do
    # not apply (the series would leave the site out), so the patched column keeps its status.
    assert symm[8].patched == "device"
    # A table the series deletes whole is routed in the patched tree, whatever its text.
    assert symm[5].patched == "routed" and "step 2" in symm[5].patched_reason
    assert symm[5].plugin == "routed" and symm[5].evaluated == "import"  # class table, instance set by __init__
    assert symm[11].plugin == "routed"  # self.device_capability, set by the routed __init__
    tables = by_line(rep, "srt/distributed/device_communicators/all_reduce_utils.py")
    assert tables[1].plugin == "routed" and "read by the glue" in tables[1].plugin_reason
    common = by_line(rep, "srt/utils/common.py")
    assert common[7].plugin == "routed"  # is_sm90_supported's own definition
    assert common[10].plugin == "routed"  # inside get_device_capability, a fact target
    assert common[5].plugin == "device"  # _check_cuda_device_version itself reads torch


def test_import_time_flag_and_early_routing(tree):
    early = by_line(audit(str(tree)), FUSION)
    assert (early[3].source, early[3].evaluated, early[3].plugin) == ("cached_flag", "import", "probe")
    assert (early[8].source, early[8].evaluated, early[8].plugin) == ("flag", "call", "routed")  # a target
    assert (early[11].kind, early[11].plugin) == ("decision", "unrouted")
    late = by_line(audit(str(tree), early_routing=False), FUSION)
    assert late[3].plugin == "device" and "before the plugin's probes" in late[3].plugin_reason
    assert late[8].plugin == "routed"
    assert late[11].plugin == "unrouted" and "_is_sm90_supported" in late[11].plugin_reason
    # The series deletes the flag; its edit of the gate's condition is SGLang's exact text,
    # which this stand-in does not have (the series would leave that site out).
    assert (late[3].patched, late[8].patched) == ("routed", "unrouted")


def test_a_new_target_changes_the_status(tree, monkeypatch):
    path = "sglang.srt.layers.layer_boundary.residual.add_norm.other_gate"
    before = by_line(audit(str(tree), early_routing=False), FUSION)[11]
    assert before.plugin == "unrouted"
    original = targets_mod.all_targets
    monkeypatch.setattr(targets_mod, "all_targets",
                        lambda: original() + [targets_mod.Target("all-reduce fusion", path, None, ("batch",))])
    after = by_line(audit(str(tree), early_routing=False), FUSION)[11]
    assert after.plugin == "routed" and path in after.plugin_reason
    assert after.patched == "unrouted"  # the series does not rewrite it
    extra = by_line(audit(str(tree), early_routing=False, extra=[Routed(path, "on purpose", plugin=False)]), FUSION)
    assert extra[11].patched == "routed" and extra[11].patched_reason == "on purpose"


# A module value bound at import from the device and read where no Python runs (a Triton
# constexpr): the plugin's value target binds it from the
# registry, so the decisions reading it are routed; a flag beside it that nothing binds is not.
VALUE = "kernels/ops/lora/q.py"
VALUE_FILES = {**FILES, VALUE: """\
    import torch
    import triton.language as tl

    _FAST = tl.constexpr(torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0))
    _OTHER = torch.cuda.get_device_capability() == (9, 0)

    def k(x):
        if _FAST:
            return x / 448.0
        if _FAST and _OTHER:
            return x
        return x * 2
    """, "kernels/ops/lora/r.py": """\
    from sglang.kernels.ops.lora.q import _FAST

    def k2(x):
        if _FAST:
            return x / 448.0
        return x
    """}


# A routed function whose own body still runs (a scoped hook, a replace edit): its decision
# is the registry's; a gate or fact in it is only where it reads what the hook answers.
BODY = "srt/layers/quantization/q.py"
BODY_FILES = {**FILES, BODY: """\
    import torch
    from sglang.srt.runtime_context import get_platform

    def dequant(x):
        if get_platform().is_sm100:
            return "flashinfer"
        if get_platform().is_blackwell:
            return "trtllm"
        assert get_platform().is_sm90, "needs SM90"
        if not get_platform().is_sm100:
            raise RuntimeError("SM100 only")
        logger.info("on %s", torch.cuda.get_device_capability())
        return x
    """}


# A model override in the shape of SGLang's (written here): two arms whose backends the
# attention guards judge (the real targets' ``covers`` name them by their checks), and a
# decision beside them that no guard lists.
OVERRIDE = "srt/arg_groups/model_overrides/gpt_oss.py"
OVERRIDE_FILES = {**FILES, OVERRIDE: """\
    from sglang.srt.runtime_context import get_platform

    def _gpt_oss_overrides(server_args, hf_config):
        overrides = {}
        if get_platform().is_sm100:
            overrides["attention_backend"] = "trtllm_mha"
        elif get_platform().is_sm90:
            overrides["attention_backend"] = "fa3"
        if get_platform().is_sm100 and hf_config.sliding_window:
            overrides["attention_backend"] = "flashinfer"
        return overrides
    """}


def test_the_guards_cover_the_overrides_they_judge_and_nothing_beside(tmp_path):
    """The real targets and series: an override arm whose backend the guards judge is routed,
    its reason naming each guard; a new decision in the same function stays unrouted in
    both columns (a covers entry is one check, never the whole function)."""
    rep = audit(str(write_tree(tmp_path, OVERRIDE_FILES)))
    sites = by_line(rep, OVERRIDE)
    for line in (5, 7):
        site = sites[line]
        # Model overrides are per-model rules: the plugin's, never the series'.
        assert (site.kind, site.plugin, site.patched) == ("decision", "routed", "unrouted"), line
        assert "_attention_backend_default" in site.plugin_reason
        assert "attention_backend_setup.resolve_attention_backend_strs" in site.plugin_reason
    beside = sites[9]
    assert (beside.kind, beside.plugin, beside.patched) == ("decision", "unrouted", "unrouted")
    assert beside.concern.startswith("attention/")
    assert beside in rep.unrouted_decisions("plugin") and beside in rep.unrouted_decisions("patched")


def test_a_listed_gate_covers_only_its_check(tree, monkeypatch):
    """A gate names one check of one function: a decision beside it stays a decision."""
    monkeypatch.setattr(gates, "KERNEL_GATES", (gates.KernelGate(ATTN, "choose", "props.major == 12",
                                                                 "test kernels (sm_120a)"),))
    attn = by_line(audit(str(tree)), ATTN)
    assert (attn[10].kind, attn[10].plugin, attn[10].patched) == ("gate", "device", "device")
    assert attn[10].kind_reason == "test kernels (sm_120a)"
    assert (attn[7].kind, attn[7].plugin) == ("decision", "unrouted")  # same function, not the check
    assert gates.gate_for(ATTN, "choose", "if props.major == 12:") is not None
    assert gates.gate_for(ATTN, "choose.inner", "if props.major == 12:") is None


def test_src_forms_relative_paths_and_version(tmp_path):
    clone = tmp_path / "clone"
    root = write_tree(clone / "python")
    for src in (root, clone / "python", clone):
        rep = audit(str(src))
        assert rep.sglang == "9.9.9"
        assert all(not s.file.startswith("/") and s.file.startswith(("srt/", "kernels/")) for s in rep.sites)


def test_json_schema_and_summary(tree, capsys):
    assert cli.main(["audit", str(tree), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) >= {"sglang", "sites", "summary", "unparsed", "notes"}
    assert data["sglang"] == "9.9.9"
    assert set(data["sites"][0]) >= {"file", "line", "code", "kind", "kind_reason", "source", "concern", "evaluated",
                                     "plugin", "plugin_reason", "patched", "patched_reason"}
    assert data["summary"]["collectives"] == {
        "sites": 4, "decision": 3, "gate": 0, "fact": 1,
        # all_reduce's multimem pick is the series' exact edit of SGLang's text, which this
        # stand-in does not have: the series would leave it out.
        "plugin": {"routed": 3, "unrouted": 0}, "patched": {"routed": 2, "unrouted": 1}}
    assert data["summary"]["total"]["sites"] == len(data["sites"])
    for e in data["summary"].values():
        assert e["decision"] + e["gate"] + e["fact"] == e["sites"]
        assert e["plugin"]["routed"] + e["plugin"]["unrouted"] == e["decision"]


def test_table_and_markdown(tree, capsys):
    assert cli.main(["audit", str(tree)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("concern "))
    assert lines[head].split()[-4:] == ["routed", "unrouted", "routed", "unrouted"]
    assert lines[head - 1].split() == ["plugin", "patched"]  # each group named over its columns
    top, columns = lines[head - 1], lines[head]
    ends = [i + len(w) for i, w in ((columns.index(" unrouted") + 1, "unrouted"),
                                      (columns.rindex(" unrouted") + 1, "unrouted"))]
    assert [top.index("plugin") + len("plugin"), top.index("patched") + len("patched")] == ends  # over its columns
    assert "collectives" in out and max(len(line) for line in lines) <= 100
    assert f"{ATTN}:12  choose: if get_platform().is_sm100:" in out  # an unrouted attention decision, listed
    md = report.render_markdown(audit(str(tree)))
    assert md.startswith("# Capability sites")
    assert report.DOC_COMMAND in md
    assert (f"| `{ATTN}:6` | `major, minor = torch.cuda.get_device_capability()` | fact | read | call | device |"
            in md)
    assert f"| `{ATTN}:12` | `choose` | `if get_platform().is_sm100:` | attention/mla | unrouted | unrouted |" in md


@pytest.mark.parametrize("src", ["/nonexistent/sglang", "."])
def test_bad_src_exits_2_with_one_line(src, capsys, tmp_path):
    assert cli.main(["audit", src if src != "." else str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sglang-arch audit:" in err and "Traceback" not in err
    with pytest.raises(AuditError):
        audit(str(tmp_path))


# --- what a site decides -----------------------------------------------------------------

DECIDES = {
    # The misfilings: attention backends and all-reduce sizes outside attention/ and distributed/
    # (a model override no guard lists: gpt_oss's own arms are covered, see OVERRIDE above)
    "srt/arg_groups/model_overrides/example.py": """\
        from sglang.srt.runtime_context import get_platform
        def _example_overrides(cfg):
            if get_platform().is_sm100:
                cfg.attention_backend = "trtllm_mha"
            elif get_platform().is_sm90:
                cfg.attention_backend = "fa3"
        """,
    "srt/models/gemma3_mm.py": """\
        from sglang.srt.runtime_context import get_platform
        class Gemma3Attention:
            def __init__(self):
                self.mm_attention_backend = "fa3" if get_platform().is_sm90 else "triton_attn"
        def gemma_rope():
            return 4 if get_platform().is_sm100 else 2
        """,
    "srt/models/beam.py": """\
        import torch
        _FLASHINFER_AR_TOKEN_BAND = {((10, 3), 4): (96, 640)}
        def _all_reduce_limits(tp_size):
            capability = torch.cuda.get_device_capability()
            return (32, 64) if capability[0] == 9 else (64, 64)
        """,
    "srt/speculative/draft_utils.py": """\
        from sglang.srt.utils import is_blackwell
        def create_draft_attn_backend():
            if is_blackwell():
                return "trtllm_mha"
            return "flashinfer"
        """,
    "kernels/ops/communication/all_reduce_fusion.py": """\
        from sglang.kernels.jit.utils import get_jit_cuda_arch
        def fused_allreduce_rmsnorm_max_tokens():
            return 256 if get_jit_cuda_arch().major >= 10 else 128
        """,
    "srt/layers/qsa/sparse_attn.py": """\
        import torch
        _CONFIGS = {"NVIDIA H20": (64, 4), "NVIDIA L20": (32, 4)}
        def _get_best_attn_config():
            return (64, 4, 2) if "H20" in torch.cuda.get_device_name(0) else (32, 4, 2)
        """,
}


@pytest.fixture
def decides_tree(tmp_path):
    return write_tree(tmp_path, {**FILES, **DECIDES})


@pytest.mark.parametrize("file, line, concern, kind", [
    ("srt/arg_groups/model_overrides/example.py", 3, "attention/mha", "decision"),
    ("srt/arg_groups/model_overrides/example.py", 5, "attention/mha", "decision"),
    ("srt/models/gemma3_mm.py", 4, "attention/mha", "decision"),
    ("srt/models/gemma3_mm.py", 6, "other", "decision"),  # "gemma" is no GEMM
    ("srt/models/beam.py", 2, "fusion", "decision"),  # capability nested in a tuple key
    ("srt/models/beam.py", 4, "collectives", "fact"),
    ("srt/models/beam.py", 5, "collectives", "decision"),
    ("srt/speculative/draft_utils.py", 3, "attention/mha", "decision"),
    ("kernels/ops/communication/all_reduce_fusion.py", 3, "fusion", "decision"),  # get_jit_cuda_arch()
    ("srt/layers/qsa/sparse_attn.py", 2, "other", "decision"),  # a table keyed by GPU name
    ("srt/layers/qsa/sparse_attn.py", 4, "attention/dsa", "decision"),  # get_device_name()
])
def test_concern_is_what_the_site_decides(decides_tree, file, line, concern, kind):
    site = by_line(audit(str(decides_tree)), file)[line]
    assert (site.concern, site.kind) == (concern, kind), site
    if kind == "decision":
        # The stand-in beam.py's module-level band table has the real one's name: the Beam
        # band target's covers entry takes it (targets.BEAM_BAND_TABLE) in the plugin; the
        # series carries no per-model rule.
        want = "routed" if (file, line) == ("srt/models/beam.py", 2) else "unrouted"
        assert (site.plugin, site.patched) == (want, "unrouted"), site


def test_gemm_pattern_does_not_match_gemma():
    assert classify.tokens("gemma3_rope") == " gemma 3 rope "
    assert classify._concern_in("gemma3_rope", named_other=False) is None  # no gemm in gemma
    assert classify._concern_in("gemma3_rope") == "other"  # a rope names what is none of the concerns
    assert classify._concern_in("deep_gemm_wrapper") == "gemm"
    assert classify._concern_in("FlashInferAttnBackend prefill_backend") == "attention"


@pytest.mark.parametrize("code, kind", [
    ("if major >= 10:\n    raise ValueError('needs SM100')", "gate"),
    ("assert major >= 9, 'needs SM90'", "gate"),
    ("if major == 9:\n    kernel = FlashAttentionForwardSm90()", "gate"),
    ("if major == 9:\n    backend = 'fa3'", "decision"),
    ("logger.info('capability %s', major)", "fact"),
    ("use_fa3 = major == 9", "fact"),
    ("limit = 128 if major >= 10 else 64", "decision"),
    ("run(major)", "fact"),
])
def test_kind_rules(tmp_path, code, kind):
    body = textwrap.indent(code, "    ")
    files = {**FILES, "srt/layers/x.py": f"import torch\ndef f():\n    major = torch.cuda.get_device_capability()[0]\n"
                                          f"{body}\n"}
    site = by_line(audit(str(write_tree(tmp_path, files))), "srt/layers/x.py")[4]
    assert site.kind == kind, site


@pytest.mark.parametrize("file, concern", [
    ("srt/distributed/parallel_state.py", "other"),  # the folder decides nothing
    ("srt/layers/attention/flashattention_backend.py", "other"),
    ("srt/models/deepseek_v2.py", "other"),
])
def test_concern_never_from_the_folder(tmp_path, file, concern):
    files = {**FILES, file: "from sglang.srt.utils import is_sm90_supported\ndef f():\n"
                            "    return 3 if is_sm90_supported() else 4\n"}
    assert by_line(audit(str(write_tree(tmp_path, files))), file)[3].concern == concern


# What a site inside an attention kernel, backend or layer decides when it is not the
# attention backend (DSA / DeepSeek-V4 / Kimi-K3 / MiniMax internals, in small):
# each case failed on the previous rules, which filed it under attention/* by the words
# around it (the launcher's, the class's, a parallel size's name).
NOT_THE_BACKEND = {
    # a Triton launcher's tile size (prefill_attention.py context_attention_fwd)
    "kernels/ops/attention/context_attention.py": """\
        import torch
        CUDA_CAPABILITY = torch.cuda.get_device_capability()
        def context_attention_fwd(q, k, grid_n):
            if CUDA_CAPABILITY[0] > 8:
                BLOCK = 128
            else:
                BLOCK = 64
            _fwd_kernel[(q.shape[0], grid_n)](q, k, BLOCK=BLOCK)
        def select_attention_kernel(q):
            if CUDA_CAPABILITY[0] > 8:
                return "fa3"
            return HANDLERS[q](q)
        """,
    # multi-stream overlap limits, an mHC weight cache, a rope fusion, mHC's post fusion
    "srt/models/toy_v4.py": """\
        from sglang.srt.runtime_context import get_platform
        from sglang.srt.utils import is_sm100_supported
        class ToyMLAAttention:
            def __init__(self, alt):
                self._multi_stream_bs_limit = 128 if get_platform().is_blackwell else 64
                self._gate_bs_limit = (128 if get_platform().is_blackwell else 64) if alt is not None else 0
            def refresh_mhc_norm_weight_cache(self):
                if get_platform().is_sm90:
                    self._hc_attn_parts = split(self.hc_attn_fn)
            def forward(self, q, k):
                fuse_rope = q.is_cuda and is_sm100_supported()
                if fuse_rope:
                    toy_qkv_norm_rope(q, k)
                return self.attn(q, k)
        def can_fuse_post(cfg):
            return get_platform().is_blackwell and cfg.mult == 4 and get_parallel().attn_dp_size == 1
        def _uses_toy_push_plane_fusion(parallel):
            return get_platform().device_sm >= 90 and parallel.attn_tp_size == parallel.tp_size
        def get_toy_sparse_index_dtype(kv_cache_dtype, model_dtype):
            if get_platform().is_sm90 and kv_cache_dtype == torch.float8_e4m3fn:
                return kv_cache_dtype
            return model_dtype
        """,
    # a branch that loads its kernel from a module built for one architecture
    "srt/layers/attention/toy_v4_backend.py": """\
        from sglang.srt.runtime_context import get_platform
        class ToyV4AttnBackend:
            def forward(self, q):
                if get_platform().is_sm100:
                    from sglang.kernels.ops.attention.dsv4.decode_attention_sm100 import swapab_attention
                    return swapab_attention(q)
                return self.fallback(q)
        """,
}


@pytest.mark.parametrize("file, line, concern, kind", [
    ("kernels/ops/attention/context_attention.py", 4, "other", "decision"),  # BLOCK of a Triton launch
    ("kernels/ops/attention/context_attention.py", 10, "attention/mha", "decision"),  # no launch: a backend pick
    ("srt/models/toy_v4.py", 5, "other", "decision"),  # multi-stream batch-size limit
    ("srt/models/toy_v4.py", 6, "other", "decision"),  # the name bound says it, not the MLA class
    ("srt/models/toy_v4.py", 8, "other", "decision"),  # mHC norm-weight cache
    ("srt/models/toy_v4.py", 12, "other", "decision"),  # rope fusion
    ("srt/models/toy_v4.py", 16, "other", "decision"),  # mHC post fusion; attn_dp_size is a parallel size
    ("srt/models/toy_v4.py", 18, "fusion", "decision"),  # the push-plane all-reduce fusion
    ("srt/models/toy_v4.py", 20, "quantization", "decision"),  # a dtype, read from the KV-cache dtype
    ("srt/layers/attention/toy_v4_backend.py", 4, "attention/other", "gate"),  # kernel from an sm100 module
])
def test_a_site_is_filed_by_what_it_decides_not_the_attention_around_it(tmp_path, file, line, concern, kind):
    site = by_line(audit(str(write_tree(tmp_path, {**FILES, **NOT_THE_BACKEND}))), file)[line]
    assert (site.concern, site.kind) == (concern, kind), site
    if kind == "gate":
        assert "arch-named kernel" in site.kind_reason


def test_a_triton_launch_is_a_call_over_a_grid():
    import ast
    launch = [ast.parse(src).body[0].value for src in ("k[grid](x)", "self._k[(b, h)](x)", "k[lambda m: (1,)](x)",
                                                        "k[triton.cdiv(n, 64),](x)")]
    other = [ast.parse(src).body[0].value for src in ("handlers[key](x)", "k[grid]()", "fns[0](x)")]
    assert all(scan_mod._is_triton_launch(c) for c in launch)
    assert not any(scan_mod._is_triton_launch(c) for c in other)


def test_attention_dp_and_tp_sizes_are_not_attention():
    assert classify._concern_in("attn_dp_size attn_tp_size is_dp_attention_enabled") is None
    assert classify._concern_in("attn_backend") == "attention"
    assert classify._concern_in("is_dp_attention_enabled and attention_backend") == "attention"


# --- hostile trees: one line naming the file, no hang, nothing outside the tree --------

def _audit_cli(root, capsys):
    code = cli.main(["audit", str(root)])
    out = capsys.readouterr()
    return code, out.err, out.out


@pytest.mark.parametrize("make, problem", [
    (lambda p: os.mkfifo(p), "not a regular file"),  # opened, it would block forever
    (lambda p: os.symlink("/dev/zero", p), "not a regular file"),  # read, it would never end
    (lambda p: open(p, "wb").truncate(8 * 1024 * 1024), "larger than 4194304 bytes"),  # sparse
])
@pytest.mark.parametrize("where", ["srt/layers/hostile.py", "_version.py", "srt/runtime_context.py"])
def test_a_file_that_is_not_bounded_source_is_named(tree, capsys, make, problem, where):
    """Every file the audit reads, the tree's version and runtime context included, is read
    within the source bounds and named when refused (a 1 GB _version.py took 2 GB)."""
    path = tree / where
    if path.exists():
        path.unlink()
    make(str(path))
    code, err, out = _audit_cli(tree, capsys)
    if where.startswith("srt/") and os.path.islink(path):
        # A link out of the tree is not followed: listed as not scanned
        assert code == 0 and not err and f"{where}: not scanned: a symlink to '/dev/zero', outside the tree" in out
        return
    assert code == 2 and len(err.splitlines()) == 1 and str(path) in err and problem in err, err


@pytest.mark.parametrize("text", [
    "def get_platform(:\n",  # a syntax error
    "print 'python 2'\n_PLATFORM_PROBES = {}\n",  # a Python 2 file
    "_PLATFORM_PROBES = {1: ['is_sm90_supported']}\n",  # not a dict of strings
    "_PLATFORM_PROBES = [1, 2]\n_PLATFORM_VALUES = dict(a=1)\n",
    "_PLATFORM_PROBES = {'is_sm90': 'is_sm90_supported', **{}}\n",
    "_PLATFORM_PROBES = " + "[" * 150 + "]" * 150 + "\n",
    "_PLATFORM_PROBES = {'is_sm90': 'x' * 10 ** 10}\n",
])
def test_an_odd_runtime_context_is_a_note_not_an_internal_error(tree, capsys, text):
    (tree / "srt" / "runtime_context.py").write_text(text)
    code, err, out = _audit_cli(tree, capsys)
    assert code == 0 and not err, err
    assert "note: srt/runtime_context.py" in out and "FACT_HELPERS" in out
    rep = audit(str(tree))
    assert by_line(rep, ATTN)[14].plugin == "probe"  # get_device_capability() from the plugin's own map


def test_a_symlinked_srt_is_refused_not_walked(tmp_path, capsys):
    root = tmp_path / "sglang"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "srt").symlink_to(os.path.dirname(os.path.abspath(__file__)))
    code, err, _ = _audit_cli(root, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "is a symlink" in err, err


@pytest.mark.parametrize("text, problem", [
    ("import torch\nif torch.cuda.get_device_capability()[0] == 9:\n    x = " + "(" * 2000 + "1" + ")" * 2000 + "\n",
     "too many nested parentheses"),
    ("import torch\nprint 'sm', torch.cuda.get_device_capability()\n", "SyntaxError"),
])
def test_a_file_python_cannot_parse_is_listed_not_counted_as_0(tree, capsys, text, problem):
    (tree / "srt" / "layers" / "bad.py").write_text(text)
    rep = audit(str(tree))
    assert not by_line(rep, "srt/layers/bad.py")
    assert [(u.file, problem in u.problem) for u in rep.unparsed] == [("srt/layers/bad.py", True)]
    assert by_line(rep, ATTN)  # the rest of the tree is scanned as before
    code, err, out = _audit_cli(tree, capsys)
    assert code == 0 and "srt/layers/bad.py" in out and "not scanned" in out
    assert "Files not scanned" in report.render_markdown(rep)


def test_valid_python_libcst_cannot_parse_is_scanned(tree, capsys):
    """``return(lambda: 1)`` is valid Python that libcst 1.x refuses (its issue #1061: a
    TypeError, "internal error, exit 1"); the audit reads CPython's syntax tree."""
    (tree / "srt" / "layers" / "lam.py").write_text(
        "import torch\ndef f():\n    return(lambda: 1)\ndef g():\n"
        "    return 'fa3' if torch.cuda.get_device_capability()[0] == 9 else 'triton'\n")
    code, err, out = _audit_cli(tree, capsys)
    assert code == 0 and not err, err
    site = by_line(audit(str(tree)), "srt/layers/lam.py")[5]
    assert site.kind == "decision" and site.concern == "attention/mha"


def test_lines_are_pythons_lines():
    """Form feeds and other separators ``str.splitlines`` splits at are not line ends."""
    text = "a = 1\x0c\nb = 2\x1c3\r\nc = 4\rd = 5\n"
    assert scan_mod.source_lines(text) == ["a = 1\x0c", "b = 2\x1c3", "c = 4", "d = 5"]
    assert scan_mod.LineFilter().hits("x = 1\x0c\nif cap == 9:\n") == [2]


# --- linear time (the fast tier's part; test/integration/test_audit.py generates more) ----

@pytest.mark.parametrize("unit", [" ", "\n", " \t \n", "{ ", "x = cap" + " " * 64 + "== 9\n", "cap\n   "])
def test_whitespace_is_linear(unit):
    """A 30 KB file of spaces took 20-40 s in the prefilter (two adjacent optional runs of
    ``\\s`` backtracked against each other across lines); 4x the text now takes about 4x."""
    def text(size):
        return "import torch\nx = torch.cuda.get_device_capability()\n" + unit * (size // len(unit)) + "\n"

    small, large = text(16 * 1024), text(64 * 1024)
    ok, seen = grows_at_most(lambda: scan_mod.scan_source("srt/layers/x.py", small),
                             lambda: scan_mod.scan_source("srt/layers/x.py", large), factor=6)
    assert ok, seen


def test_cached_flag_chains_are_linear():
    """Flags defined from flags, in reverse order: a worklist, not a pass per flag."""
    def chain(n):
        return "".join(f"flag_{i} = flag_{i + 1}\n" for i in range(n)) + f"flag_{n} = is_sm90_supported()\n"

    def closed(text):
        flags = scan_mod.module_flags(text)
        scan = scan_mod.scan_file("/nowhere", "srt/x.py", text, scan_mod.LineFilter(flags))
        scan_mod._close_flags({"srt/x.py": scan})
        return flags

    short, long = chain(500), chain(2000)
    assert len(closed(short)) == 501 and len(closed(long)) == 2001
    ok, seen = grows_at_most(lambda: closed(short), lambda: closed(long), factor=6)
    assert ok, seen


def test_a_file_with_a_utf8_bom_is_scanned_as_cpython_reads_it(tree):
    """A valid file starting with a UTF-8 byte-order mark was
    listed as 'not scanned' (U+FEFF) and its sites dropped; CPython runs such files."""
    (tree / "srt" / "layers" / "bom.py").write_bytes(
        b"\xef\xbb\xbfimport torch\n"
        b"def f():\n    return 'fa3' if torch.cuda.get_device_capability()[0] == 9 else 'triton'\n")
    rep = audit(str(tree))
    assert not [u for u in rep.unparsed if u.file == "srt/layers/bom.py"]
    assert by_line(rep, "srt/layers/bom.py")


# --- .py symlinks inside the tree ---------------------------------------

LINKED = "from sglang.srt.utils import is_sm90_supported\ndef f():\n    return 3 if is_sm90_supported() else 4\n"


def _not_scanned(rep):
    return {u.file: u.problem for u in rep.unparsed}


def test_a_dangling_py_symlink_is_listed_and_the_audit_goes_on(tree, capsys):
    # It stopped the audit: "srt/layers/gone.py: cannot be read (No such file or directory)".
    (tree / "srt" / "layers" / "gone.py").symlink_to("nowhere.py")
    (tree / "srt" / "layers" / "loop_a.py").symlink_to("loop_b.py")
    (tree / "srt" / "layers" / "loop_b.py").symlink_to("loop_a.py")
    rep = audit(str(tree))
    problems = _not_scanned(rep)
    assert problems["srt/layers/gone.py"] == ("a dangling symlink (to 'nowhere.py', which resolves to no file: "
                                              "missing, or a loop of links)")
    assert problems["srt/layers/loop_a.py"].startswith("a dangling symlink (to 'loop_b.py'")
    assert by_line(rep, ATTN)  # every other file is still audited
    code, err, out = _audit_cli(tree, capsys)
    assert code == 0 and not err and "srt/layers/gone.py: not scanned: a dangling symlink" in out


@pytest.mark.parametrize("target", ["outside", "outside_via_link"])
def test_a_py_symlink_leaving_the_tree_is_not_followed(tree, tmp_path, capsys, target):
    # It was read as part of the tree: a file outside SRC was audited (and counted).
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.py").write_text(LINKED)
    link = tree / "srt" / "layers" / "out.py"
    if target == "outside":
        link.symlink_to(outside / "secret.py")
    else:  # an in-tree link to a link that leaves
        (tree / "srt" / "layers" / "hop.py").symlink_to(outside / "secret.py")
        link.symlink_to("hop.py")
    rep = audit(str(tree))
    assert _not_scanned(rep)["srt/layers/out.py"] == (f"a symlink to {str(outside / 'secret.py')!r}, outside the "
                                                      f"tree: not followed")
    assert not [s for s in rep.sites if s.file == "srt/layers/out.py"]
    code, err, out = _audit_cli(tree, capsys)
    assert code == 0 and "srt/layers/out.py: not scanned: a symlink to" in out


def test_a_py_symlink_inside_the_tree_is_still_read(tree):
    (tree / "srt" / "layers" / "real.py").write_text(LINKED)
    (tree / "srt" / "layers" / "alias.py").symlink_to("real.py")
    rep = audit(str(tree))
    assert "srt/layers/alias.py" not in _not_scanned(rep)
    assert {s.file for s in rep.sites} >= {"srt/layers/real.py", "srt/layers/alias.py"}


def test_names_and_code_from_the_tree_cannot_drive_the_terminal_or_break_the_table(tree):
    """A file named with ESC sequences, a newline
    and a '|' was printed raw by the text report and split the markdown table's row."""
    name = "e\x1b[2J\x1b[31mvil|x\nfake.py"
    (tree / "srt" / "layers" / name).write_text(
        "import torch\ndef f():\n    return 'fa3' if torch.cuda.get_device_capability()[0] == 9 else '\x1b[31m'\n")
    (tree / "srt" / "layers" / "bad\x1b].py").write_bytes(b"import torch\nx = torch.cuda.get_device_capability(\n")
    rep = audit(str(tree))
    assert by_line(rep, f"srt/layers/{name}")  # scanned under its real name
    text, md = report.render_table(rep), report.render_markdown(rep)
    for out in (text, md):
        assert "\x1b" not in out and all(line.isprintable() for line in out.splitlines())
    assert "e\\x1b[2J\\x1b[31mvil|x\\nfake.py" in text and "bad\\x1b].py" in text
    rows = [line for line in md.splitlines() if "vil" in line]
    assert rows and all("vil\\|x\\nfake.py" in row for row in rows)


# A Triton launcher's words name the kernel it launches (a MoE, an FP8,
# a GEMM kernel), not what its sites decide: the launch parameters it keys on the
# architecture are tuning (``other``), as an attention launcher's are; a check whose
# branches only log (``logger.info_once``, ``print_warning_once``) decides nothing.  Each
# case failed on the previous rules (moe decision; quantization and gemm decisions).
LAUNCH_AND_LOG = {
    "kernels/ops/moe/toy_fused_moe.py": """\
        import torch
        def fused_moe_fp8(a, b, grid):
            if torch.cuda.get_device_capability()[0] == 9:
                num_stages = 3
            else:
                num_stages = 4
            _fused_moe_fp8_kernel[grid](a, b, num_stages=num_stages)
        def select_moe_runner(a):
            if torch.cuda.get_device_capability()[0] == 9:
                return "deep_gemm_moe"
            return "triton_moe"
        def warn_marlin(dtype):
            if torch.cuda.get_device_capability()[0] < 9 and dtype == torch.bfloat16:
                logger.info_once("Marlin with bf16 is slower before Hopper")
        def warn_gemv(flag):
            if flag and torch.cuda.get_device_capability() != (10, 3):
                print_warning_once("the decode GEMV is unused here")
        """,
    # the capability read as it is behind a presence guard is the identity, not a pick:
    # its uses are the sites (the old rules filed the binding a decision and lost its uses)
    "srt/layers/toy_guarded.py": """\
        import torch
        def f(x):
            cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
            if cap is not None and cap[0] >= 9:
                return "fast_path"
            return None
        def g():
            t = torch.cuda.get_device_capability()
            c = -1 if t is None else t[0] * 10 + t[1]
            if c < 80:
                raise ValueError("needs 8.0")
        def h():
            size = 128 if torch.cuda.get_device_capability()[0] >= 9 else 64
        def toy_local_capability():
            return torch.cuda.get_device_capability()
        def toy_fast():
            return torch.cuda.get_device_capability()[0] >= 9
        """,
}


@pytest.fixture(scope="module")
def launch_and_log(tmp_path_factory):
    return audit(str(write_tree(tmp_path_factory.mktemp("launch"), {**FILES, **LAUNCH_AND_LOG})))


@pytest.mark.parametrize("line, concern, kind", [
    (3, "other", "decision"),  # num_stages of a MoE FP8 Triton launch (was moe)
    (9, "moe", "decision"),  # no launch: a MoE runner pick
    (13, "quantization", "fact"),  # only logs (was a decision)
    (16, "gemm", "fact"),  # print_warning_once is a log call (was a decision)
])
def test_launch_parameters_are_tuning_and_log_only_checks_are_facts(launch_and_log, line, concern, kind):
    site = by_line(launch_and_log, "kernels/ops/moe/toy_fused_moe.py")[line]
    assert (site.concern, site.kind) == (concern, kind), site


@pytest.mark.parametrize("line, kind", [
    (3, "fact"),  # cap() if is_available() else None: the identity (was a decision)
    (4, "decision"),  # its use picks a path
    (9, "fact"),  # -1 if t is None else t[0] * 10 + t[1] (was a decision)
    (10, "gate"),  # its use, a requirement (was no site: c was not followed)
    (13, "decision"),  # a size picked by the capability stays a decision
    (15, "fact"),  # a capability helper returns the identity (was a decision)
    (17, "decision"),  # a function that returns what the capability picks
])
def test_a_guarded_read_or_a_capability_helper_is_the_identity(launch_and_log, line, kind):
    site = by_line(launch_and_log, "srt/layers/toy_guarded.py")[line]
    assert site.kind == kind, site


def test_a_check_whose_branches_only_log_is_read_as_such():
    import ast
    only = ast.parse("if x:\n    logger.info('a')\nelse:\n    print_warning_once('b')").body[0]
    mixed = ast.parse("if x:\n    logger.info('a')\n    y = 1").body[0]
    assert scan_mod._only_logs(only.body, only.orelse)
    assert not scan_mod._only_logs(mixed.body, mixed.orelse)
    assert not scan_mod._only_logs([], [])


# --- bounds: long chains, deep folders, folders that cannot be listed -----------------------

def test_a_long_operand_chain_is_scanned(tmp_path, capsys):
    """8,000 'and' operands and 5,000 adjacent string literals: CPython's syntax tree keeps
    them flat, so the audit reads the file and finds its site."""
    long = "import torch\n\nX = torch.cuda.get_device_capability()[0] == 9 and " + \
        " and ".join(f"a{i}" for i in range(8000)) + "\nY = (" + "\n".join(["'s'"] * 5000) + ")\n"
    root = write_tree(tmp_path, {**FILES, "srt/layers/long.py": long})
    rep = audit(str(root))
    assert not [u for u in rep.unparsed if u.file == "srt/layers/long.py"]
    assert [s.line for s in rep.sites if s.file == "srt/layers/long.py"] == [3]


def test_a_tree_nested_past_the_folder_bound_is_one_line(tmp_path, capsys):
    """Before: os.walk recursed per level and raised RecursionError about 1,000 folders deep."""
    from sglang_arch.bounds import MAX_FOLDER_DEPTH

    root = write_tree(tmp_path)
    deep = root / "srt"
    for _ in range(1000):  # one level at a time: os.makedirs recurses per missing level
        deep = deep / "d"
        deep.mkdir()
    try:
        assert cli.main(["audit", str(root)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err and "RecursionError" not in err
        assert f"more than {MAX_FOLDER_DEPTH} folders below" in err and f"accepted: at most {MAX_FOLDER_DEPTH} levels" in err
        with pytest.raises(ValueError, match="folders below"):
            audit(str(root))
    finally:  # bottom up: pytest's own clean-up of old temporary folders recurses per level
        while deep != root / "srt":
            deep.rmdir()
            deep = deep.parent


def test_a_tree_at_the_folder_bound_is_read(tmp_path):
    from sglang_arch.bounds import MAX_FOLDER_DEPTH

    root = write_tree(tmp_path)
    deep = root / "srt" / os.path.join(*["d"] * MAX_FOLDER_DEPTH)
    deep.mkdir(parents=True)
    (deep / "m.py").write_text("import torch\nX = torch.cuda.get_device_capability()\n")
    rep = audit(str(root))
    assert any(s.file.endswith("/d/m.py") for s in rep.sites)


def test_a_folder_that_cannot_be_listed_fails_naming_it(tmp_path, capsys, monkeypatch):
    """Before: os.walk skipped it silently and the audit reported the rest, exit 0."""
    root = write_tree(tmp_path)
    hidden = root / "srt" / "layers" / "attention"
    real_scandir = os.scandir

    def scandir(path):
        if os.fspath(path) == str(hidden):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)

    monkeypatch.setattr(scan_mod.os, "scandir", scandir)
    assert cli.main(["audit", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{hidden}: cannot list this folder (Permission denied)" in err
    assert "accepted: a tree whose every folder under srt, kernels can be read" in err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads a folder of mode 000")
def test_an_unreadable_folder_fails_naming_it(tmp_path, capsys):
    root = write_tree(tmp_path)
    hidden = root / "srt" / "layers"
    hidden.chmod(0)
    try:
        assert cli.main(["audit", str(root)]) == 2
    finally:
        hidden.chmod(0o755)
    assert f"{hidden}: cannot list this folder" in capsys.readouterr().err


# What a decision selects files it before any words; sources the scanner follows.
SELECTS = {
    # a nameless override: the settings it returns are attention backends
    "srt/arg_groups/model_overrides/plain.py": """\
        from sglang.srt.runtime_context import get_platform
        def _plain_overrides(cfg):
            if not get_platform().is_sm100:
                return {}
            return {"decode_attention_backend": "trtllm_mla", "prefill_attention_backend": "trtllm_mla"}
        """,
    # an early exit whose work is named only by its module (file name)
    "srt/layers/communication/k9_ar_fusion.py": """\
        def _get_state():
            from sglang.srt.utils.common import get_device_sm
            if get_device_sm() not in (100, 103):
                return None
            return object()
        """,
    # a draft backend written through a keyword: attention, not speculative
    "srt/arg_groups/spec_hook.py": """\
        from sglang.srt.runtime_context import get_platform
        def apply_spec_defaults(server_args, cfg):
            if cfg.speculative_algorithm == "X" and get_platform().is_sm100:
                declare(server_args, speculative_draft_attention_backend="trtllm_mha")
        """,
    # only launch parameters: how a kernel launches, whatever the words around it
    "srt/layers/moe/launch.py": """\
        from sglang.srt.utils import get_device_sm
        def moe_finalize(x):
            cluster_size = 1
            if get_device_sm() >= 90:
                cluster_size = 8
            return cluster_size
        """,
    # a capability helper's value and a probe aliased onto self are followed to their uses
    "kernels/ops/gemm/helper.py": """\
        import torch
        def get_compute_capability(device):
            return torch.cuda.get_device_capability(device)
        def pick(a):
            major, minor = get_compute_capability(a.device)
            if major != 10:
                raise RuntimeError("needs SM100")
        """,
    "srt/layers/attention/alias.py": """\
        from sglang.srt.utils import is_blackwell
        class Backend:
            def __init__(self):
                self._is_blackwell = is_blackwell
            def forward(self):
                is_blackwell = self._is_blackwell
                if is_blackwell():
                    self.attention_backend = "fa4"
        """,
    # identity functions under other names: imported as, or bound to a local name
    "srt/layers/renamed.py": """\
        import torch
        from sglang.srt.utils import is_sm90_supported as hopper
        def pick(server_args):
            if hopper():
                server_args.attention_backend = "fa3"
        def pick3(server_args):
            cc = torch.cuda.get_device_capability
            if cc()[0] >= 10:
                server_args.moe_runner_backend = "flashinfer_trtllm"
        """,
    # an elif chain longer than the interpreter's recursion limit would allow a naive visit
    "srt/layers/chain.py": "import torch\ndef pick():\n    major = torch.cuda.get_device_capability()[0]\n"
                           "    if major == 0:\n        b = 'a0'\n"
                           + "".join(f"    elif major == {i}:\n        b = 'a{i}'\n" for i in range(1, 300))
                           + "    return b\n",
}


@pytest.fixture(scope="module")
def selects_report(tmp_path_factory):
    """The audit of the tree above, made once for every case below."""
    return audit(str(write_tree(tmp_path_factory.mktemp("selects"), {**FILES, **SELECTS})))


@pytest.mark.parametrize("file, line, concern, kind", [
    ("srt/arg_groups/model_overrides/plain.py", 3, "attention/mla", "decision"),
    ("srt/layers/communication/k9_ar_fusion.py", 3, "fusion", "decision"),
    ("srt/arg_groups/spec_hook.py", 3, "attention/mha", "decision"),
    ("srt/layers/moe/launch.py", 4, "other", "decision"),
    ("kernels/ops/gemm/helper.py", 5, "platform", "fact"),  # the helper's value, bound: its uses are sites
    ("kernels/ops/gemm/helper.py", 6, "other", "gate"),  # the use: a requirement (its only branch raises)
    ("srt/layers/attention/alias.py", 4, "platform", "fact"),  # the probe under another name
    ("srt/layers/attention/alias.py", 7, "attention/mha", "decision"),
    ("srt/layers/renamed.py", 4, "attention/mha", "decision"),
    ("srt/layers/renamed.py", 7, "platform", "fact"),
    ("srt/layers/renamed.py", 8, "moe", "decision"),
    ("srt/layers/chain.py", 4, "other", "decision"),
    ("srt/layers/chain.py", 4 + 2 * 299, "other", "decision"),  # the last elif of 300
])
def test_a_decision_is_filed_by_what_it_selects(selects_report, file, line, concern, kind):
    site = by_line(selects_report, file)[line]
    assert (site.concern, site.kind) == (concern, kind), site


@pytest.mark.parametrize("selects, concern", [
    (("field:attention_backend", "value:fa3"), "attention"),
    (("field:moe_runner_backend", "value:triton"), "moe"),
    (("field:fp8_gemm_runner_backend",), "gemm"),
    (("field:enable_flashinfer_allreduce_fusion",), "fusion"),
    (("field:num_warps", "field:num_stages"), "other"),
    (("field:cluster_size", "field:attention_backend"), "attention"),  # not only launch parameters
    (("value:triton", "value:flashinfer"), None),  # names of several things: words decide
    (("field:speculative_draft_attention_backend", "value:trtllm_mha"), "attention"),
    ((), None),
])
def test_selected_concern(selects, concern):
    assert classify.selected_concern(selects) == concern
