"""Run SGLang's own unit tests of the series' areas on each release, unpatched and
patched; print the table.

A manual step (docs/upstreaming.md, "SGLang's own unit tests"): SGLang's tests live in
its git repository, not in the wheel, so they are never committed here; DIR is a tree
with SGLang's ``test/registered/unit/`` layout (a checkout, or the files copied out of
one):

    python test/integration/sglang_unit_tests.py --tests DIR [--releases 0.5.21,0.5.22,0.5.23]

For each release it builds two package trees (``releases.package_tree``): ``unpatched``,
and ``patched`` by ``sglang-arch upstream``. Each selected test file runs on its own
(pytest, one process per file and tree, in sequence) with only that tree's ``sglang``
on the path, ``SGLANG_PLUGINS=none`` and ``SGLANG_ARCH_DISABLE=1``. A test file from a
newer SGLang may fail on an older release unpatched; what counts is that every test that
passes unpatched passes patched, on the same release. The exit status is 1 when one
does not.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from releases import package_tree  # noqa: E402

RELEASES = ("0.5.21", "0.5.22", "0.5.23")
KINDS = ("unpatched", "patched")
UNIT = "test/registered/unit"
# Taken by name whatever they hold (the tests of the areas the series edits).
FILES = (
    "layers/test_flashinfer_comm_fusion.py",
    "distributed/test_custom_all_reduce_v2_capability.py",
    "runtime_context/test_split_attention_backend_decisions.py",
    "layers/attention/test_attention_backend_registry.py",
    "test_model_overrides.py",
)
# Any other unit-test file that simulates a GPU and names a decision the series edits.
SIMULATES = re.compile(r"override_platform\(|is_sm\d+_supported|get_device_capability")
CONCERNS = re.compile(
    r"_resolve_backend|flashinfer_allreduce_fusion|flashinfer_ar_fusion_applies"
    r"|get_default_attn_backend|_attention_backend_default|attention_registry"
    r"|TorchSymmMem|TORCH_SYMM_MEM|custom_all_reduce_v2|_get_all_reduce_configs"
)
RANK = {"failed": 3, "error": 2, "passed": 1, "skipped": 0}


def select(tests: Path) -> List[Path]:
    unit = tests / UNIT
    found = {unit / f for f in FILES if (unit / f).is_file()}
    for path in unit.rglob("test_*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        if SIMULATES.search(text) and CONCERNS.search(text):
            found.add(path)
    return sorted(found)


def build(version: str, kind: str, work: Path) -> Path:
    """The directory to put on the path: ``work/<version>-<kind>/sglang``."""
    root = work / f"{version}-{kind}"
    package = package_tree(version, root)
    if kind == "patched":
        cli = Path(sys.executable).with_name("sglang-arch")
        out = subprocess.run([str(cli if cli.exists() else "sglang-arch"), "upstream", str(package)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"sglang-arch upstream {package} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    return root


def environment(tree: Path) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    env.update(PYTHONPATH=str(tree), SGLANG_PLUGINS="none", SGLANG_ARCH_DISABLE="1")
    return env


def check_import(tree: Path, tests: Path) -> None:
    code = "import sglang, sys; sys.stdout.write(sglang.__file__)"
    out = subprocess.run([sys.executable, "-c", code], env=environment(tree), cwd=tests,
                         capture_output=True, text=True)
    if out.returncode != 0 or not Path(out.stdout).resolve().is_relative_to(tree.resolve()):
        sys.exit(f"import sglang does not resolve to {tree}: {out.stdout or out.stderr[-1000:]}")


def run_file(path: Path, tree: Path, tests: Path, report: Path) -> Dict[str, str]:
    """Outcome per test id (``file::Class::test``, file relative to the unit folder)."""
    rel = path.relative_to(tests / UNIT).as_posix()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                    f"--junitxml={report}", f"--rootdir={tests}", str(path)],
                   cwd=tests, env=environment(tree), capture_output=True, text=True, timeout=1800)
    if not report.is_file():
        return {f"{rel}::(run)": "error"}
    module = path.relative_to(tests).with_suffix("").as_posix().replace("/", ".")
    outcomes: Dict[str, str] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        tags = {child.tag for child in case}
        outcome = ("failed" if "failure" in tags else "error" if "error" in tags
                   else "skipped" if "skipped" in tags else "passed")
        owner = case.get("classname", "")
        test = (f"{rel}::(collection)" if not owner
                else "::".join([rel, *filter(None, [owner.removeprefix(module).lstrip(".")]), case.get("name")]))
        # unittest subtests report the same test more than once: the worst stands.
        if RANK[outcome] >= RANK.get(outcomes.get(test, "skipped"), 0):
            outcomes[test] = outcome
    return outcomes


def columns(releases) -> List[str]:
    return [f"{v} {k}" for v in releases for k in KINDS]


def table(results: Dict[str, Dict[str, str]], releases) -> str:
    cols = columns(releases)
    ids = sorted(set().union(*results.values()))
    files = sorted({t.split("::")[0] for t in ids})
    lines = ["| file | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for f in files:
        cells = []
        for c in cols:
            got = [o for t, o in results[c].items() if t.split("::")[0] == f]
            cells.append(" / ".join(f"{got.count(k)} {k}" for k in ("passed", "failed", "error", "skipped")))
        lines.append(f"| `{f}` | " + " | ".join(cells) + " |")
    lines += ["", "| test | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for test in ids:
        lines.append(f"| `{test}` | " + " | ".join(results[c].get(test, "-") for c in cols) + " |")
    return "\n".join(lines)


def regressions(results: Dict[str, Dict[str, str]], releases) -> List[str]:
    """``release test`` for each test that passes unpatched and not patched."""
    return [f"{v} {test}" for v in releases
            for test, outcome in sorted(results[f"{v} unpatched"].items())
            if outcome == "passed" and results[f"{v} patched"].get(test) != "passed"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, required=True, help=f"a tree with SGLang's {UNIT}/")
    parser.add_argument("--releases", default=",".join(RELEASES), help="comma-separated (default: %(default)s)")
    parser.add_argument("--keep", action="store_true", help="keep the trees and reports")
    options = parser.parse_args(argv)
    tests = options.tests.resolve()
    releases = [v.strip() for v in options.releases.split(",") if v.strip()]
    files = select(tests)
    if not files:
        sys.exit(f"no test files of these areas under {tests / UNIT}")
    print("tests:", *(str(f.relative_to(tests)) for f in files), sep="\n  ", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="sglang-unit-tests-"))
    try:
        results: Dict[str, Dict[str, str]] = {}
        for version in releases:
            for kind in KINDS:
                tree = build(version, kind, work)
                check_import(tree, tests)
                column = results.setdefault(f"{version} {kind}", {})
                for i, path in enumerate(files):
                    column.update(run_file(path, tree, tests, work / f"{version}-{kind}-{i}.xml"))
                print(f"ran {version} {kind}", file=sys.stderr)
        print(table(results, releases))
        bad = regressions(results, releases)
        for line in bad:
            print(f"REGRESSION {line}", file=sys.stderr)
        return 1 if bad else 0
    finally:
        if options.keep:
            print("kept", work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
