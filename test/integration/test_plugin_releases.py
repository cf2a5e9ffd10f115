"""The plugin on SGLang code other than the release its hooks were written for.

- SGLang 0.5.22: its Python files (unzipped from the release's wheel, fetched once into a
  cache folder) laid over 0.5.23's environment on ``PYTHONPATH`` (0.5.22's own compiled
  dependencies are not installed: the sglang package is 0.5.22's, every other one 0.5.23's);
- a copy of the installed 0.5.23 with one target's body edited and another target's
  docstring and comments edited.

One subprocess per tree; it starts SGLang's launcher (``--help``), imports the scheduler,
loads the plugins and imports every target's module, then reports what is routed.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import clean_env, once_per_run  # noqa: E402
from sglang_arch.integrations.sglang import fingerprint, known_bodies  # noqa: E402
from sglang_arch.integrations.sglang.targets import all_targets  # noqa: E402

OTHER_RELEASE = "0.5.22"
CACHE = Path(os.environ.get("SGLANG_ARCH_RELEASE_CACHE") or Path.home() / ".cache" / "sglang-arch" / "releases")

PROBE = textwrap.dedent("""
    import importlib, json, logging, runpy, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s|%(levelname)s|%(message)s")
    sys.argv = ["sglang.launch_server", "--help"]
    try:
        runpy.run_module("sglang.launch_server", run_name="__main__")
        help_exit = None
    except SystemExit as exc:
        help_exit = exc.code
    import sglang, sglang.srt.managers.scheduler
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang_arch.integrations import sglang as plugin
    from sglang_arch.integrations.sglang import routing
    failed = []
    for target in routing.all_routed_targets():
        try:
            importlib.import_module(target.module)
        except Exception as exc:
            failed.append(target.module)
    from sglang.srt.layers import flashinfer_comm_fusion as f
    from sglang.srt.runtime_context import override_platform
    with override_platform(is_sm90=False, is_sm100=False):
        try:
            f._resolve_backend("auto")
            fusion = "routed"
        except ValueError:
            fusion = "upstream"
    print(json.dumps({
        "sglang_file": sglang.__file__, "help_exit": help_exit,
        "routed": sorted(t.path for t in routing.all_routed_targets() if routing.is_routed(t)),
        "kept": dict(plugin.kept_targets()), "import_failed": failed, "fusion": fusion}))
""")


def _fetch_release(release):
    """The release's wheel, downloaded once into CACHE (pip's own client), and its ``sglang/``
    unzipped beside it; a failure says what to do, it does not skip."""
    tree = CACHE / f"sglang-{release}"
    if (tree / "sglang" / "__init__.py").is_file():
        return tree
    CACHE.mkdir(parents=True, exist_ok=True)
    wheels = sorted(CACHE.glob(f"sglang-{release}-*.whl"))
    if not wheels:
        out = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                              "-d", str(CACHE), f"sglang=={release}"], capture_output=True, text=True, timeout=600)
        wheels = sorted(CACHE.glob(f"sglang-{release}-*.whl"))
        if out.returncode != 0 or not wheels:
            pytest.fail(f"could not download sglang=={release} (pip download: {out.stderr.strip()[-300:]}); put its "
                        f"wheel into {CACHE} or set SGLANG_ARCH_RELEASE_CACHE to a folder that holds it", pytrace=False)
    staging = CACHE / f".sglang-{release}.{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    with zipfile.ZipFile(wheels[-1]) as whl:
        whl.extractall(staging, [n for n in whl.namelist() if n.startswith("sglang/")])
    shutil.rmtree(tree, ignore_errors=True)
    staging.rename(tree)
    return tree


def _run(pythonpath):
    env = clean_env(SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="8", SGLANG_ARCH_TOPOLOGY="pcie-p2p")
    env["PYTHONPATH"] = os.pathsep.join((str(pythonpath), env["PYTHONPATH"]))  # the tree before site-packages
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return {"report": json.loads(out.stdout.strip().splitlines()[-1]), "stderr": out.stderr}


def _expected_routed(root):
    """The targets whose definition in the tree at ``root`` has a recorded fingerprint, read
    from the files (the plugin reads the live functions: two readers, one answer)."""
    found = fingerprint.of_tree(str(root), all_targets())
    return sorted(path for path, value in found.items() if fingerprint.releases_with(path, value))


@pytest.fixture(scope="module")
def other_release(tmp_path_factory):
    def run():
        tree = _fetch_release(OTHER_RELEASE)
        return dict(_run(tree), expected=_expected_routed(tree), tree=str(tree))

    return once_per_run(tmp_path_factory, f"release-{OTHER_RELEASE}", run)


FUSION = "sglang/srt/layers/flashinfer_comm_fusion.py"
RUNNER = "sglang/srt/arg_groups/overrides.py"


@pytest.fixture(scope="module")
def edited_copy(tmp_path_factory):
    """0.5.23 with ``_resolve_backend``'s body edited (one statement added) and
    ``_moe_runner_backend_quant_constraints``' docstring and comments edited."""
    def run():
        root = tmp_path_factory.mktemp("edited")
        installed = Path(fingerprint.installed_root()) / "sglang"
        shutil.copytree(installed, root / "sglang", copy_function=_link_or_copy,
                        ignore=shutil.ignore_patterns("__pycache__"))
        for name, edit in ((FUSION, _edit_body), (RUNNER, _edit_words)):
            path = root / name
            text = path.read_text()
            path.unlink()  # a new file, not the installed one through the link
            path.write_text(edit(text))
        return dict(_run(root), expected=_expected_routed(root), tree=str(root))

    return once_per_run(tmp_path_factory, "edited-0.5.23", run)


def _link_or_copy(src, dst):
    try:
        os.link(src, dst)
    except OSError:  # another file system
        shutil.copy2(src, dst)


def _edit_body(text):
    head = "def _resolve_backend("
    start = text.index(head)
    colon = text.index(":\n", text.index(")", start)) + 2
    return text[:colon] + "    _unused = None\n" + text[colon:]


def _edit_words(text):
    """Another docstring, a comment and a blank line: the same code."""
    head = "def _moe_runner_backend_quant_constraints("
    start = text.index(head)
    doc = text.index('"""', start)
    end = text.index('"""', doc + 3) + 3
    line_end = text.index("\n", end) + 1
    indent = " " * (doc - text.rindex("\n", 0, doc) - 1)
    return (text[:doc] + '"""Other words,\n' + indent + 'on two lines."""\n' + indent + "# a comment\n\n"
            + text[line_end:])


def test_the_other_release_starts_with_the_plugin(other_release):
    report = other_release["report"]
    assert report["sglang_file"].startswith(other_release["tree"])  # 0.5.22's files, not the installed ones
    assert report["help_exit"] in (0, None)
    assert "--enable-torch-symm-mem" in other_release["stderr"] or report["help_exit"] in (0, None)
    assert "Traceback" not in other_release["stderr"]


def test_the_other_release_routes_exactly_the_targets_whose_bodies_match(other_release):
    report = other_release["report"]
    expected = set(other_release["expected"])
    routed = set(report["routed"])
    assert OTHER_RELEASE not in known_bodies.SUPPORTED
    not_loaded = {t.path for t in all_targets() if t.module in report["import_failed"]}
    # A body that matches is kept only where the module lacks a name the glue reads.
    attributes = {path for path, why in report["kept"].items() if "its module no longer has" in why}
    assert routed == expected - not_loaded - attributes
    assert attributes <= expected
    differ = {t.path for t in all_targets()} - expected
    assert differ and set(report["kept"]) >= differ - not_loaded
    assert all("differs from sglang 0.5.23's" in report["kept"][p] or "is missing" in report["kept"][p]
               or "cannot be found" in report["kept"][p] for p in differ - not_loaded)
    # one warning with the count, and the start-up line counts them too
    warnings = [line for line in other_release["stderr"].splitlines() if "keep SGLang's own code" in line]
    assert len(warnings) == 1 and f"{len(report['kept'])} of {len(all_targets())} hooks" in warnings[0]
    line = [line for line in other_release["stderr"].splitlines() if "sglang_arch|INFO|sglang-arch: 8x" in line]
    assert len(line) == 1 and f"{len(report['kept'])} hooks kept SGLang's" in line[0]


def test_an_edited_body_keeps_sglangs_function_and_edited_words_do_not(edited_copy):
    report = edited_copy["report"]
    resolve = "sglang.srt.layers.flashinfer_comm_fusion._resolve_backend"
    runner = "sglang.srt.arg_groups.overrides._moe_runner_backend_quant_constraints"
    assert report["sglang_file"].startswith(edited_copy["tree"])
    assert resolve not in report["routed"] and resolve in report["kept"]
    assert "differs from sglang 0.5.23's" in report["kept"][resolve]
    assert report["fusion"] == "upstream"  # SM120 without the hook: SGLang's function raises
    assert runner in report["routed"]
    assert set(report["kept"]) == {resolve}
    assert set(report["routed"]) == set(edited_copy["expected"]) - {
        t.path for t in all_targets() if t.module in report["import_failed"]}
