"""docs/capability-sites.md is the audit of the installed SGLang release (drift test).

The audit reads the installed tree's source only (libcst); sglang is located, not
imported.  About a minute on a loaded 2-core machine.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from sglang_arch.audit import audit, report

_SPEC = importlib.util.find_spec("sglang")
if _SPEC is None or not _SPEC.submodule_search_locations:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

SGLANG = list(_SPEC.submodule_search_locations)[0]
DOC = Path(__file__).resolve().parents[2] / "docs" / "capability-sites.md"


@pytest.fixture(scope="module")
def installed():
    return audit(SGLANG)


def test_doc_is_the_audit_of_the_installed_release(installed):
    assert installed.sglang == "0.5.23", "the doc is generated from the tested release"
    expected = report.render_markdown(installed)
    assert DOC.read_text() == expected, (
        f"docs/capability-sites.md drifted; regenerate: sglang-arch audit {SGLANG} --markdown > {DOC}")


def test_the_plugin_targets_are_routed_sites(installed):
    routed = {(s.file, s.scope) for s in installed.sites if s.plugin == "routed"}
    assert ("srt/distributed/device_communicators/torch_symm_mem.py", "TorchSymmMemCommunicator.__init__") in routed
    symm = [s for s in installed.sites if s.file.endswith("all_reduce_utils.py") and s.kind == "table"]
    assert [s.plugin for s in symm] == ["routed"]
    assert all(os.path.exists(os.path.join(SGLANG, s.file)) for s in installed.sites)


def test_no_unrouted_site_in_the_three_concerns(installed):
    """Issue 9's bar: collectives, fusion and attention/* have no unrouted site, for the
    plugin and for the patched tree."""
    left = [(s.file, s.line, who) for s in installed.sites if s.concern.startswith(report.THREE)
            for who, st in (("plugin", s.plugin), ("patched", s.patched)) if st == "unrouted"]
    assert not left
    routed = {(s.file, s.scope) for s in installed.sites if s.plugin == "routed" and s.patched == "routed"}
    assert ("srt/arg_groups/overrides.py", "_dsa_split_backend_resolution") in routed
    assert ("srt/arg_groups/overrides.py", "_dsa_kv_cache_dtype_default") in routed


def test_every_kernel_gate_still_gates_sites(installed):
    """Each entry of audit/gates.py matches sites of the installed release, and only sites
    that would otherwise be unrouted: a gate never hides a routed decision or a probe."""
    from sglang_arch.audit import gates
    from sglang_arch.audit.scan import package_module

    used = set()
    for s in installed.sites:
        gate = gates.gate_for(package_module(s.file), s.scope)
        if gate is None:
            assert s.plugin != "device", (s.file, s.line)
            continue
        used.add(gate.path)
        assert s.plugin in ("device", "probe", "routed"), (s.file, s.line)
    assert used == {g.path for g in gates.KERNEL_GATES}
