"""``sglang-arch audit`` on small synthetic SGLang trees (no sglang needed)."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
from sglang_arch import cli
from sglang_arch.audit import AuditError, Routed, audit, classify, report
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
                return "a"
            props = torch.cuda.get_device_properties(0)
            if props.major == 12:
                return "b"
            if get_platform().is_sm100:
                return "c"
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


def test_each_kind_of_site_one_per_line(tree):
    rep = audit(str(tree))
    sites = by_line(rep, ATTN)
    # line: kind (the read and the comparison of its value on one line count once)
    assert {ln: s.kind for ln, s in sites.items()} == {
        6: "read", 7: "read", 10: "read", 12: "platform", 14: "probe", 15: "probe", 18: "compare", 21: "probe"}
    assert sites[6].code == "major, minor = torch.cuda.get_device_capability()"
    assert all(s.evaluated == "call" and s.concern == "attention/mla" for s in sites.values())
    assert sites[18].scope == "untraced"
    kernel = by_line(rep, "kernels/ops/thing.py")
    assert kernel[2].kind == "window" and kernel[2].concern == "jit" and kernel[2].evaluated == "import"
    tables = by_line(rep, "srt/distributed/device_communicators/all_reduce_utils.py")
    assert list(tables) == [1] and tables[1].kind == "table"


def test_skips_comments_strings_registry_copy_and_tests(tree):
    rep = audit(str(tree))
    files = {s.file for s in rep.sites}
    assert not any(f.startswith("srt/arch/") or "test" in f for f in files)
    assert sorted(by_line(rep, FUSION)) == [3, 8, 11]  # not the comment (6), not the string (7)
    assert len({(s.file, s.line) for s in rep.sites}) == len(rep.sites)


def test_status_derived_from_targets_and_steps(tree):
    rep = audit(str(tree))
    attn = by_line(rep, ATTN)
    assert (attn[6].plugin, attn[6].patched) == ("unrouted", "unrouted")
    assert "torch.cuda.get_device_capability" in attn[6].plugin_reason
    # get_platform().is_sm100 reads is_sm100_supported: an identity probe, routed by the plugin
    # and SGLang's own in the patched tree, the same answer in both (docs/fallback.md).
    assert (attn[12].plugin, attn[12].patched) == ("probe", "probe")
    assert attn[14].plugin == "probe" and attn[14].patched == "probe"  # get_device_capability()
    assert attn[18].plugin == "unrouted" and "sm_version" in attn[18].plugin_reason
    assert attn[21].plugin == "unrouted" and "_is_sm10x() (defined here)" in attn[21].plugin_reason
    symm = by_line(rep, SYMM)
    assert symm[8].plugin == "routed" and "TorchSymmMemCommunicator.__init__" in symm[8].plugin_reason
    assert symm[8].patched == "routed" and "step 2" in symm[8].patched_reason
    assert symm[5].plugin == "routed" and symm[5].evaluated == "import"  # class table, instance set by __init__
    assert symm[11].plugin == "routed"  # self.device_capability, set by the routed __init__
    tables = by_line(rep, "srt/distributed/device_communicators/all_reduce_utils.py")
    assert tables[1].plugin == "routed" and "read by the glue" in tables[1].plugin_reason
    common = by_line(rep, "srt/utils/common.py")
    assert common[7].plugin == "routed" and common[7].kind == "window"  # is_sm90_supported's own definition
    assert common[10].plugin == "routed"  # inside get_device_capability, a fact target
    assert common[5].plugin == "unrouted"  # _check_cuda_device_version itself reads torch


def test_import_time_flag_and_early_routing(tree):
    early = by_line(audit(str(tree)), FUSION)
    assert (early[3].kind, early[3].evaluated, early[3].plugin) == ("cached_flag", "import", "probe")
    assert (early[8].kind, early[8].evaluated, early[8].plugin) == ("flag", "call", "routed")  # a target
    assert (early[11].kind, early[11].evaluated, early[11].plugin) == ("flag", "call", "probe")
    late = by_line(audit(str(tree), early_routing=False), FUSION)
    assert late[3].plugin == "unrouted" and "before the plugin's probes" in late[3].plugin_reason
    assert late[8].plugin == "routed"
    assert late[11].plugin == "unrouted" and "_is_sm90_supported" in late[11].plugin_reason
    # The series deletes the flag and rewrites the gate.
    assert (late[3].patched, late[8].patched) == ("routed", "routed")


def test_a_new_target_changes_the_status(tree, monkeypatch):
    path = "sglang.srt.layers.layer_boundary.residual.add_norm.other_gate"
    before = by_line(audit(str(tree), early_routing=False), FUSION)[11]
    assert before.plugin == "unrouted"
    original = targets_mod.all_targets
    monkeypatch.setattr(targets_mod, "all_targets",
                        lambda: original() + [targets_mod.Target("all-reduce fusion", path, None, ("batch",))])
    after = by_line(audit(str(tree), early_routing=False), FUSION)[11]
    assert after.plugin == "routed" and path in after.plugin_reason
    assert after.patched == "probe"  # the series does not rewrite it
    extra = by_line(audit(str(tree), early_routing=False, extra=[Routed(path, "on purpose", plugin=False)]), FUSION)
    assert extra[11].patched == "routed" and extra[11].patched_reason == "on purpose"


def test_a_kernel_gate_turns_unrouted_sites_into_device(tree, monkeypatch):
    """Only sites that would be unrouted become ``device``; the reason names the kernels."""
    from sglang_arch.audit import gates

    before = by_line(audit(str(tree)), ATTN)[6]
    assert before.plugin == "unrouted" and before.patched == "unrouted"
    module = "sglang.srt.layers.attention.flashinfer_mla_backend"
    monkeypatch.setattr(gates, "KERNEL_GATES", (gates.KernelGate(module, "test kernels (sm_90a)", "a test"),))
    after = audit(str(tree))
    site = by_line(after, ATTN)[6]
    assert (site.plugin, site.patched) == ("device", "device")
    assert "kernel gate (test kernels (sm_90a))" in site.plugin_reason
    assert after.summary["total"]["device"] == sum(s.plugin == "device" for s in after.sites) >= 1
    routed_before = {(s.file, s.line) for s in audit(str(tree)).sites if s.plugin in ("routed", "probe")}
    assert all(s.plugin in ("routed", "probe") for s in after.sites if (s.file, s.line) in routed_before)
    assert gates.gate_for(module, "") is not None and gates.gate_for(module + "x", "f") is None


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
    assert set(data) >= {"sglang", "sites", "summary"}
    assert data["sglang"] == "9.9.9"
    assert set(data["sites"][0]) >= {"file", "line", "code", "concern", "evaluated", "plugin", "plugin_reason",
                                     "patched", "patched_reason"}
    assert data["summary"]["collectives"] == {
        "total": 4, "routed": 4, "probe": 0, "device": 0, "unrouted": 0,
        "plugin": {"routed": 4, "probe": 0, "device": 0, "unrouted": 0},
        "patched": {"routed": 4, "probe": 0, "device": 0, "unrouted": 0}}
    assert data["summary"]["total"]["total"] == len(data["sites"])
    for e in data["summary"].values():
        assert e["routed"] + e["probe"] + e["device"] + e["unrouted"] == e["total"]


def test_table_and_markdown(tree, capsys):
    assert cli.main(["audit", str(tree)]) == 0
    out = capsys.readouterr().out
    assert "collectives" in out and "plugin unrouted" in out
    md = report.render_markdown(audit(str(tree)))
    assert md.startswith("# Capability sites")
    assert report.DOC_COMMAND in md
    assert f"| `{ATTN}:6` | `major, minor = torch.cuda.get_device_capability()` | read | call | unrouted |" in md


@pytest.mark.parametrize("src", ["/nonexistent/sglang", "."])
def test_bad_src_exits_2_with_one_line(src, capsys, tmp_path):
    assert cli.main(["audit", src if src != "." else str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sglang-arch audit:" in err and "Traceback" not in err
    with pytest.raises(AuditError):
        audit(str(tmp_path))


@pytest.mark.parametrize("file, code, concern", [
    ("srt/distributed/parallel_state.py", "", "collectives"),
    ("srt/layers/flashinfer_comm_fusion.py", "", "fusion"),
    ("srt/layers/layer_boundary/residual/add_norm.py", "", "fusion"),
    ("srt/layers/attention/nsa/nsa_indexer.py", "", "attention/dsa"),
    ("srt/layers/attention/dsa_backend.py", "", "attention/dsa"),
    ("srt/layers/attention/trtllm_mla_backend.py", "", "attention/mla"),
    ("srt/layers/attention/linear/kernels/gdn_flashinfer.py", "", "attention/linear"),
    ("srt/layers/attention/mamba/mamba.py", "", "attention/linear"),
    ("srt/layers/attention/flashattention_backend.py", "", "attention/mha"),
    ("srt/layers/attention/merge_state.py", "", "attention/other"),
    ("srt/arg_groups/overrides.py", "if server_args.attention_backend == 'fa3':", "attention/mha"),
    ("srt/arg_groups/overrides.py", "enable_flashinfer_allreduce_fusion = True", "fusion"),
    ("srt/server_args.py", "self.enable_torch_symm_mem = False", "collectives"),
    ("srt/model_executor/model_runner.py", "self.x = 1", "other"),
    ("srt/layers/moe/fused_moe_triton/layer.py", "", "moe"),
    ("srt/layers/quantization/fp8_utils.py", "", "quantization"),
    ("srt/layers/deep_gemm_wrapper/configurer.py", "", "gemm"),
    ("srt/speculative/eagle_worker.py", "", "speculative"),
    ("srt/models/deepseek_v2.py", "", "model"),
    ("kernels/ops/attention/dsa/x.py", "", "jit"),
    ("srt/platforms/cuda.py", "", "platform"),
    ("srt/utils/common.py", "", "platform"),
    ("srt/managers/scheduler.py", "x = 1", "other"),
])
def test_concern_rules(file, code, concern):
    assert classify.concern_for(file, "", code) == concern


# --- hostile trees: one line naming the file, no hang, nothing outside the tree --------

def _audit_cli(root, capsys):
    code = cli.main(["audit", str(root)])
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("make, problem", [
    (lambda p: os.mkfifo(p), "not a regular file"),  # opened, it would block forever
    (lambda p: os.symlink("/dev/zero", p), "not a regular file"),  # read, it would never end
    (lambda p: open(p, "wb").truncate(8 * 1024 * 1024), "larger than 4194304 bytes"),  # sparse
])
def test_a_file_that_is_not_bounded_source_is_named(tree, capsys, make, problem):
    path = tree / "srt" / "layers" / "hostile.py"
    make(str(path))
    code, err = _audit_cli(tree, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and str(path) in err and problem in err, err


def test_a_symlinked_srt_is_refused_not_walked(tmp_path, capsys):
    root = tmp_path / "sglang"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "srt").symlink_to(os.path.dirname(os.path.abspath(__file__)))
    code, err = _audit_cli(root, capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "is a symlink" in err, err


def test_nesting_python_refuses_is_skipped_not_handed_to_libcst(tree):
    """libcst's native parser segfaults on such a file; CPython cannot import it, so no site runs there."""
    deep = "import torch\nif torch.cuda.get_device_capability()[0] == 9:\n    x = " + "(" * 2000 + "1" + ")" * 2000 + "\n"
    (tree / "srt" / "layers" / "deep.py").write_text(deep)
    rep = audit(str(tree))
    assert not by_line(rep, "srt/layers/deep.py")
    assert by_line(rep, ATTN)  # the rest of the tree is scanned as before


def test_line_provider_agrees_with_libcsts_positions():
    """The audit's LineProvider gives every node PositionProvider's start line (decorators,
    parentheses over lines, comments, backslashes, CRLF, CR, strings holding newlines)."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider
    from sglang_arch.audit.scan import LineProvider

    source = textwrap.dedent('''\
        # leading comment

        @decorator(
            arg,
        )
        def f(a,
              b=(1 +
                 2)):
            """doc
            string"""
            x = (  # comment
                a.b.c(
                    d
                )
            )
            if (a and
                    b):
                return [i for i in
                        range(3)]
            y = 1 + \\
                2
            return f"""{x}
        """


        class C(Base):

            # a block whose first statement follows a blank line and a comment
            z: int = (
                3
            )
        ''')
    for text in (source, source.replace("\n", "\r\n"), source.replace("\n", "\r")):
        wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
        positions, lines = wrapper.resolve(PositionProvider), wrapper.resolve(LineProvider)
        assert len(positions) > 100
        assert {node: p.start.line for node, p in positions.items()} == dict(lines)
