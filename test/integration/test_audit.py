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
