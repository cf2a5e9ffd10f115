"""Run SGLang's own unit tests for the routed concerns on three trees; print the table.

A manual step (docs/upstreaming.md, "SGLang's own unit tests"): SGLang's tests live in
its git repository, not in the wheel, and CI may not reach GitHub.  The tests are never
committed here; they are fetched at run time into a temporary directory:

    python test/integration/sglang_unit_tests.py            # git, tag v0.5.23
    python test/integration/sglang_unit_tests.py --tests DIR  # a checkout (or any tree
                                                               # with SGLang's test/ layout)

The test files are SGLang's ``test/registered/unit/`` files that simulate a GPU with
``override_platform`` (or patch a platform probe) and exercise a concern the registry
routes (symmetric memory, custom all-reduce, all-reduce fusion, attention), plus
``FILES``.  Each runs, with no GPU visible (SGLang's CPU CI), against:

- ``unpatched``: the installed SGLang, sglang-arch disabled (``SGLANG_ARCH_DISABLE=1``);
- ``plugin``: the installed SGLang with this checkout's plugin;
- ``patched``: a copy of the installed SGLang patched by ``sglang-arch upstream``
  (the fixture's own copy and CLI run, ``test_upstream_series.py``), sglang_arch refused
  on the path.

It prints a Markdown table, test -> outcome per tree, and exits 1 when a test that
passes unpatched does not pass patched (or through the plugin) and is not one of
``DIFFERENCES`` (each a documented difference, docs/differences.md).
"""

from __future__ import annotations

import argparse
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

from helpers import clean_env  # noqa: E402

REPOSITORY = "https://github.com/sgl-project/sglang"
REF = "v0.5.23"
UNIT = "test/registered/unit"
# Found by name as well as by the scan below (the ones routed by name).
FILES = (
    f"{UNIT}/layers/test_flashinfer_comm_fusion.py",
    f"{UNIT}/test_model_overrides.py",
)
# A test reads as simulating a GPU when it does one of these...
SIMULATES = re.compile(r"override_platform\(|is_sm\d+_supported|get_device_capability")
# ...and concerns what the registry routes when it names one of these.
CONCERNS = re.compile(
    r"_resolve_backend|_flashinfer_allreduce_fusion_auto_enable|flashinfer_ar_fusion_applies"
    r"|flashinfer_comm_fusion|get_default_attn_backend|_attention_backend_default"
    r"|_dsa_kv_cache_dtype_default|_dsa_split_backend_resolution|TorchSymmMem"
    r"|TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES|custom_all_reduce"
)
TREES = ("unpatched", "plugin", "patched")
# test id -> the difference (docs/differences.md) that explains a pass unpatched that is
# not a pass routed.  Empty: none is expected.
DIFFERENCES: Dict[str, str] = {}


def fetch(ref: str, into: Path) -> Path:
    """SGLang's unit-test tree at ``ref``: a shallow, sparse git checkout."""
    def git(*args: str) -> None:
        subprocess.run(["git", *args], check=True, cwd=into, capture_output=True, text=True)

    git("init", "-q")
    git("remote", "add", "origin", REPOSITORY)
    git("sparse-checkout", "set", "--no-cone", f"/{UNIT}/")
    git("fetch", "-q", "--depth", "1", "--filter=blob:none", "origin", f"refs/tags/{ref}")
    git("checkout", "-q", "FETCH_HEAD")
    return into


def select(tests: Path) -> List[Path]:
    """``FILES`` that exist, and every unit-test file that simulates a GPU and names a
    routed concern."""
    found = {tests / f for f in FILES if (tests / f).is_file()}
    for path in (tests / UNIT).rglob("test_*.py"):
        text = path.read_text(encoding="utf-8", errors="replace")
        if SIMULATES.search(text) and CONCERNS.search(text):
            found.add(path)
    return sorted(found)


def patched_tree(work: Path) -> Path:
    """The installed SGLang copied and patched as test_upstream_series.py's fixture does;
    returns the directory to put on the path."""
    import test_upstream_series as series

    root = work / "sglang-clone"
    series._copy_sglang(root / "python" / "sglang")
    run = series._upstream(root, env=series._env(work))
    if run.returncode != 0:
        sys.exit(f"sglang-arch upstream failed:\n{run.stdout}{run.stderr}")
    return root / "python"


def run(tree: str, files: List[Path], tests: Path, work: Path, patched: Path) -> Dict[str, str]:
    """Outcome per test id (``path::Class::test``) on one tree."""
    import test_upstream_series as series

    report = work / f"{tree}.xml"
    # No GPU visible: an index no host has (CUDA then shows none; SGLang's test_utils
    # reads the variable's first character as a digit, so it cannot be empty).
    hide_gpu = {"CUDA_VISIBLE_DEVICES": "9"}
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:xdist", f"--junitxml={report}",
            f"--rootdir={tests}", *map(str, files)]
    if tree == "patched":  # the patched tree alone, sglang_arch refused (SGLang's CPU CI)
        env = series._patched_env(patched, **hide_gpu)
        command = [sys.executable, "-c", series.RUN_TESTS, *args]
    else:
        env = clean_env(**hide_gpu)
        if tree == "unpatched":
            env.update(SGLANG_ARCH_DISABLE="1", SGLANG_PLUGINS="none")
        command = [sys.executable, "-m", "pytest", "-W", "ignore", *args]
    subprocess.run(command, cwd=tests, env=env, capture_output=True, text=True)
    if not report.is_file():
        sys.exit(f"{tree}: pytest wrote no report")
    outcomes = {}
    prefix = UNIT.replace("/", ".") + "."
    for case in ElementTree.parse(report).iter("testcase"):
        where = case.get("classname", "").removeprefix(prefix)
        kinds = {child.tag for child in case}
        outcome = ("failed" if kinds & {"failure", "error"} else
                   "skipped" if "skipped" in kinds else "passed")
        outcomes[f"{where}::{case.get('name')}"] = outcome
    return outcomes


def table(results: Dict[str, Dict[str, str]]) -> str:
    ids = sorted(set().union(*results.values()))
    lines = ["| test | " + " | ".join(TREES) + " |", "|---|" + "---|" * len(TREES)]
    for test in ids:
        lines.append(f"| `{test}` | " + " | ".join(results[t].get(test, "-") for t in TREES) + " |")
    return "\n".join(lines)


def regressions(results: Dict[str, Dict[str, str]]) -> List[str]:
    """Tests passing unpatched that do not pass routed and are not listed differences."""
    return [test for test, outcome in sorted(results["unpatched"].items())
            if outcome == "passed" and test not in DIFFERENCES
            and any(results[t].get(test) != "passed" for t in ("plugin", "patched"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, help="a tree with SGLang's test/ layout (default: git, --ref)")
    parser.add_argument("--ref", default=REF, help=f"the tag to fetch (default {REF})")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sglang-unit-tests-"))
    try:
        tests = options.tests.resolve() if options.tests else fetch(options.ref, work / "sglang")
        files = select(tests)
        if not files:
            sys.exit(f"no SGLang unit tests for the routed concerns under {tests / UNIT}")
        print("tests:", *(str(f.relative_to(tests)) for f in files), sep="\n  ", file=sys.stderr)
        patched = patched_tree(work)
        results = {tree: run(tree, files, tests, work, patched) for tree in TREES}
        print(table(results))
        bad = regressions(results)
        for test in bad:
            print(f"REGRESSION {test}: " + ", ".join(f"{t} {results[t].get(test)}" for t in TREES),
                  file=sys.stderr)
        return 1 if bad else 0
    except subprocess.CalledProcessError as exc:
        sys.exit(f"could not fetch SGLang's tests ({' '.join(exc.cmd)}: {exc.stderr.strip()}); "
                 "pass --tests DIR with a checkout of SGLang")
    finally:
        if options.keep:
            print("kept", work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
