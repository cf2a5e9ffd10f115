"""``sglang-arch upstream`` on a copy of the installed SGLang: the patch series, end to end.

The installed ``sglang`` package is copied into a temporary git clone layout
(``tmp/python/sglang``), the series is committed into it, and the patched tree must
decide exactly what the plugin decides: the decision suite run against it
(``--runtime sglang.srt.arch.runtime``, plugin excluded) equals ``suites["routed"]``,
which test_equivalence.py compares with SGLang alone and the documented differences.
"""

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)
pytest.importorskip("libcst", reason="the upstream rewriter needs libcst: pip install -e 'python[upstream]'")

from helpers import clean_env  # noqa: E402
from sglang_arch.upstream import texts  # noqa: E402
from sglang_arch.upstream.sites import STEPS  # noqa: E402

INSTALLED = Path(importlib.util.find_spec("sglang").submodule_search_locations[0])


def IGNORE(directory: str, names: list) -> set:
    """No caches, no multimodal_gen, no nested test folders; ``sglang/test`` itself is kept
    (the series' tests import its ``ci_register`` and ``test_utils``, as in a clone)."""
    ignored = {n for n in names if n in ("__pycache__", "multimodal_gen")}
    if Path(directory) != INSTALLED and "test" in names:
        ignored.add("test")
    return ignored


SUBJECTS = [
    "[arch] Add sglang.srt.arch, one GPU architecture registry",
    "[arch] Torch symm mem and custom all-reduce v2: read the registry, delete the capability tables",
    "[arch] FlashInfer all-reduce fusion: read the registry, delete the SM90/SM100 checks",
    "[arch] Attention: the default backend from the registry, explicit backends checked",
    "[arch] MoE runner, FP8 / FP4 GEMM backends and DeepGEMM from the registry",
]
PATCHED_SUITE = Path(__file__).resolve().parent / "patched_suite.py"
TARGET_FILES = sorted({plan.path for step in STEPS for plan in step.modules})
TESTS_DIR = "test/registered/unit/arch"
TEST_FILES = {1: f"{TESTS_DIR}/test_arch_registry.py", 4: f"{TESTS_DIR}/test_arch_call_sites.py"}
# The written tests, run as SGLang's CPU CI would: the patched tree only, sglang_arch refused.
RUN_TESTS = textwrap.dedent("""
    import sys

    import pytest

    class NoPlugin:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "sglang_arch":
                raise ImportError(f"{name}: sglang_arch is not on the path here")

    sys.meta_path.insert(0, NoPlugin())
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-W", "ignore", *sys.argv[1:]])
    import sglang.srt.arch
    print("REGISTRY", sglang.srt.arch.__file__)
    sys.exit(code)
""")


def _copy(src: str, dst: str) -> None:
    """Hard-link what the series never writes (compiled extensions, data); copy the rest."""
    if not src.endswith(".py"):
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


def _copy_sglang(dest: Path) -> Path:
    shutil.copytree(INSTALLED, dest, ignore=IGNORE, copy_function=_copy)
    return dest


def _env(tmp: Path, **extra: str) -> dict:
    """No user or system git config: the series must fall back to its own identity."""
    (tmp / "gitconfig").touch()
    return clean_env(GIT_CONFIG_GLOBAL=str(tmp / "gitconfig"), GIT_CONFIG_NOSYSTEM="1", **extra)


def _upstream(src: Path, *flags: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sglang_arch", "upstream", str(src), *flags],
                          capture_output=True, text=True, env=env)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout


def _patched_env(python_dir: Path, *more: Path, **extra: str) -> dict:
    path = os.pathsep.join(str(p) for p in (python_dir, *more))
    return clean_env(PYTHONPATH=path, SGLANG_PLUGINS="none", SGLANG_ARCH_DISABLE="1", **extra)


def _patched_suite(python_dir: Path) -> dict:
    out = subprocess.run([sys.executable, str(PATCHED_SUITE)], capture_output=True, text=True,
                         env=_patched_env(python_dir, Path(__file__).resolve().parents[2] / "python"))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


PROBE_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from types import SimpleNamespace

    import sglang
    import sglang.srt.arch.runtime as runtime
    from sglang.srt.arg_groups import overrides
    from sglang.srt.runtime_context import override_platform

    overrides.use_mla_backend = lambda view: False  # a plain MHA model
    checks = {}
    for capability in ("12.0", "9.0", None):
        if capability:
            os.environ["SGLANG_ARCH_CAPABILITY"] = capability
        else:  # no NVIDIA GPU, even on a machine that has one
            os.environ.pop("SGLANG_ARCH_CAPABILITY", None)
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        runtime.reset()
        results = checks[capability or "none"] = {}
        for backend in ("fa3", "triton"):
            view = SimpleNamespace(attention_backend=backend, prefill_attention_backend=None,
                                   decode_attention_backend=None)
            with override_platform(is_cuda=True, is_hip=False):
                try:
                    results[backend] = overrides._attention_backend_default(view)
                except ValueError as exc:
                    results[backend] = str(exc)
    print(json.dumps({"sglang": sglang.__file__, "runtime": runtime.__file__,
                      "plugin_loaded": sorted(m for m in sys.modules if m.startswith("sglang_arch.")
                                             ), "checks": checks}))
""")


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A git clone layout holding the installed SGLang, with the series committed by the CLI.

    The two slow runs of the patched tree (the decision suite, the probe script; SGLang
    takes seconds to import) start in the background at once, next to the plugin's.
    """
    root = tmp_path_factory.mktemp("sglang-clone")
    _copy_sglang(root / "python" / "sglang")
    # As SGLang's repository does: the bytecode its interpreters write is not the tree's.
    (root / ".gitignore").write_text("__pycache__/\n*.py[cod]\n", encoding="utf-8")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=base", "-c", "user.email=base@localhost", "commit", "-qm", "SGLang as installed")
    base = _git(root, "rev-parse", "HEAD").strip()
    env = _env(tmp_path_factory.mktemp("home"))
    run = _upstream(root, "--into-git", env=env)
    python = root / "python"
    with ThreadPoolExecutor(2) as pool:
        suite = pool.submit(_patched_suite, python)
        probe = pool.submit(subprocess.run, [sys.executable, "-c", PROBE_SCRIPT], capture_output=True, text=True,
                            env=_patched_env(python), cwd=root)
        yield SimpleNamespace(root=root, python=python, base=base, run=run, env=env, suite=suite, probe=probe)


@pytest.fixture(scope="module")
def probed(clone):
    out = clone.probe.result()
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_one_commit_per_concern_with_the_pr_texts(clone):
    assert clone.run.returncode == 0, clone.run.stdout + clone.run.stderr
    log = _git(clone.root, "log", "--reverse", "--format=%H|%an|%s", f"{clone.base}..HEAD").splitlines()
    commits = [line.split("|", 2) for line in log]
    assert [c[2] for c in commits] == SUBJECTS == [texts.pr_text(step)[0] for step in STEPS]
    assert {c[1] for c in commits} == {"sglang-arch"}  # no identity configured: the series' own
    for (sha, _, _), step in zip(commits, STEPS):
        body = _git(clone.root, "log", "-1", "--format=%b", sha)
        assert texts.pr_text(step)[1] in body
        files = set(_git(clone.root, "show", "--name-only", "--format=", sha).split())
        tests = {TEST_FILES[step.number]} if step.number in TEST_FILES else set()
        assert tests <= files
        files -= tests
        if step.glue is None:
            assert files and all(f.startswith("python/sglang/srt/arch/") for f in files)
            assert "python/sglang/srt/arch/glue/__init__.py" in files
        else:
            expected = {f"python/sglang/{plan.path}" for plan in step.modules}
            assert files == expected | {f"python/sglang/srt/arch/glue/{step.glue}.py"}
    assert _git(clone.root, "status", "--porcelain") == ""


def test_the_report_names_every_site_and_each_step_size(clone):
    out = clone.run.stdout
    for step in STEPS:
        for plan in step.modules:
            for site in plan.sites:
                assert re.search(rf"{re.escape(site.label)}\s+rewritten", out), site.label
    sizes = [tuple(map(int, m)) for m in re.findall(r"^\[\d/\d\] .*?\+(\d+) -(\d+)(?: \([^)]*\))?, commit", out, re.M)]
    sites = [tuple(map(int, m)) for m in re.findall(r"\(call sites \+(\d+) -(\d+)[,)]", out)]
    log = _git(clone.root, "log", "--reverse", "--format=%H", f"{clone.base}..HEAD").split()
    numstat = []
    for sha in log:
        rows = [line.split("\t") for line in _git(clone.root, "show", "--numstat", "--format=", sha).splitlines()]
        numstat.append((sum(int(r[0]) for r in rows), sum(int(r[1]) for r in rows)))
    assert sizes == numstat
    # Replace, don't guard: at SGLang's own files (outside srt/arch/) every step removes more than it adds.
    site_numstat = []
    for sha in log[1:]:
        rows = [line.split("\t") for line in _git(clone.root, "show", "--numstat", "--format=", sha).splitlines()]
        rows = [r for r in rows if not r[2].startswith(("python/sglang/srt/arch/", "test/"))]
        site_numstat.append((sum(int(r[0]) for r in rows), sum(int(r[1]) for r in rows)))
    assert sites == site_numstat and len(sites) == len(STEPS) - 1
    # Steps 2-4 replace SGLang's capability branches.  Step 5 (MoE / GEMM) adds a guard at the
    # top of four functions whose ROCm / NPU / MUSA / environment arms stay SGLang's, and deletes
    # nothing yet (docs/upstreaming.md, step 5): it is held to its own size, not to the rule.
    replacing = [size for step, size in zip(STEPS[1:], sites) if step.key != "moe"]
    assert all(removed > added for added, removed in replacing), sites
    # The series' tests are counted apart: "tests +N -0" with the lines each step's commit adds there.
    tests = [int(m) for m in re.findall(r"tests \+(\d+) -0\)", out)]
    assert tests == [int(_git(clone.root, "show", "--numstat", "--format=", log[n - 1], "--", path).split()[0])
                     for n, path in sorted(TEST_FILES.items())]


def test_the_written_tests_pass_on_the_patched_tree(clone):
    """issue 11: the series' own tests, in SGLang's layout, run on the patched tree alone."""
    out = subprocess.run([sys.executable, "-c", RUN_TESTS, *TEST_FILES.values()], capture_output=True, text=True,
                         cwd=clone.root, env=_patched_env(clone.python, PYTHONDONTWRITEBYTECODE="1"), timeout=600)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert re.search(r"^\d+ passed", out.stdout, re.M) and " failed" not in out.stdout, out.stdout[-2000:]
    registry = out.stdout.split("REGISTRY ")[-1].strip()
    assert Path(registry).is_relative_to(clone.python), registry
    assert _git(clone.root, "status", "--porcelain") == ""


def test_the_registry_is_a_byte_for_byte_copy(clone):
    from sglang_arch.upstream.series import registry_source_dir

    source = registry_source_dir()
    copied = clone.root / "python/sglang/srt/arch"
    for path in source.rglob("*.py"):
        if "__pycache__" not in path.parts:
            assert (copied / path.relative_to(source)).read_bytes() == path.read_bytes()


def test_the_patched_tree_imports_its_own_registry(clone, probed):
    assert Path(probed["sglang"]).is_relative_to(clone.root)
    assert Path(probed["runtime"]).is_relative_to(clone.root)
    # Nothing of the plugin or its registry is imported (the wheel's start-up hook is the
    # top-level _sglang_arch_early, which opts out under SGLANG_ARCH_DISABLE=1).
    assert probed["plugin_loaded"] == []


def test_the_patched_tree_decides_exactly_as_the_plugin(clone, suites):
    patched = clone.suite.result()
    assert patched.keys() == suites["routed"].keys()
    diff = [k for k in patched if patched[k] != suites["routed"][k]]
    assert not diff, f"{len(diff)} machines differ, e.g. {diff[0]}: {patched[diff[0]]} vs {suites['routed'][diff[0]]}"
    assert patched != suites["upstream"]  # it is routed, not SGLang alone


def test_the_patched_tree_refuses_an_explicit_backend_that_cannot_run(probed):
    checks = probed["checks"]
    assert checks["12.0"]["fa3"].startswith("--attention-backend fa3: ") and "Valid here: " in checks["12.0"]["fa3"]
    assert checks["9.0"]["fa3"] == {}  # fa3 runs on Hopper
    assert checks["none"]["fa3"] == {}  # no GPU: SGLang decides alone, nothing is checked
    assert all(checks[machine]["triton"] == {} for machine in checks)


def test_a_second_run_changes_nothing(clone):
    head = _git(clone.root, "rev-parse", "HEAD")
    again = _upstream(clone.root, "--into-git", env=clone.env)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing to do" in again.stdout and " rewritten" not in again.stdout
    assert _git(clone.root, "rev-parse", "HEAD") == head and _git(clone.root, "status", "--porcelain") == ""
    check = _upstream(clone.root, "--check", env=clone.env)
    assert check.returncode == 0 and "nothing to do" in check.stdout


def _repository_state(root: Path) -> dict:
    """The work tree (every change git sees), the index and HEAD of a clean checkout."""
    return {args[0]: _git(root, *args) for args in (("status", "--porcelain", "--untracked-files=all"),
                                                   ("diff",), ("diff", "--cached"), ("rev-parse", "HEAD"))}


def test_a_refused_commit_changes_nothing_and_a_registry_only_tree_takes_the_rest(clone, tmp_path):
    """Issue 21, items 1 and 2, on the installed SGLang 0.5.23: signing that fails (gpg.program
    false) at the first commit leaves the tree, the index and HEAD as they were; a tree that
    carries only the registry (SGLang merged PR-1) gets steps 2-4, the same tree as the series."""
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(clone.root), str(other)], check=True)
    _git(other, "checkout", "-q", clone.base)
    _git(other, "config", "commit.gpgsign", "true")
    _git(other, "config", "gpg.program", "false")
    before = _repository_state(other)
    run = _upstream(other, "--into-git", env=clone.env)
    assert run.returncode == 2 and "git commit of step 1 failed" in run.stderr, run.stdout + run.stderr
    assert _repository_state(other) == before
    assert len(run.stderr.strip().splitlines()) == 1 and "everything written was undone" in run.stderr
    _git(other, "config", "--unset", "commit.gpgsign")
    _git(other, "checkout", "-q", _git(clone.root, "rev-parse", "HEAD~3").strip())  # the registry alone
    run = _upstream(other, "--into-git", env=clone.env)
    assert run.returncode == 0 and run.stdout.count(", commit ") == 3, run.stdout + run.stderr
    assert _git(other, "rev-parse", "HEAD^{tree}") == _git(clone.root, "rev-parse", "HEAD^{tree}")


def test_the_installed_package_layout(clone, tmp_path):
    package = _copy_sglang(tmp_path / "sglang")
    env = _env(tmp_path)
    check = _upstream(package, "--check", env=env)
    assert check.returncode == 1 and "installed sglang package" in check.stdout
    assert "would be rewritten" in check.stdout and not (package / "srt/arch").exists()
    done = _upstream(package, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no commits: --into-git not given" in done.stdout
    assert _upstream(package, "--check", env=env).returncode == 0
    patched = clone.root / "python" / "sglang"
    for rel in TARGET_FILES:  # a module the series empties is removed in both layouts
        assert (package / rel).exists() == (patched / rel).exists(), rel
        if (package / rel).exists():
            assert (package / rel).read_bytes() == (patched / rel).read_bytes(), rel
    arch = sorted(p.relative_to(package).as_posix() for p in (package / "srt/arch").rglob("*") if p.is_file())
    assert arch == sorted(p.relative_to(patched).as_posix() for p in (patched / "srt/arch").rglob("*")
                          if p.is_file() and "__pycache__" not in p.parts)


def test_a_changed_call_site_is_reported_and_its_file_left_byte_identical(tmp_path):
    package = tmp_path / "sglang"
    (package / "srt").mkdir(parents=True)
    shutil.copy2(INSTALLED / "__init__.py", package / "__init__.py")
    for rel in TARGET_FILES:
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(INSTALLED / rel, package / rel)
    fusion = package / "srt/layers/flashinfer_comm_fusion.py"
    text = fusion.read_text()
    old = "def _resolve_backend(backend: str, is_multi_node: bool = False) -> str:"
    assert old in text
    fusion.write_text(text.replace(old, old.replace("False)", "False, world_size: int = 1)")))
    before = fusion.read_bytes()
    overrides_before = (package / "srt/arg_groups/overrides.py").read_text()

    run = _upstream(package, env=_env(tmp_path))
    assert run.returncode == 1, run.stdout + run.stderr
    line = next(line for line in run.stdout.splitlines() if line.strip().startswith("_resolve_backend "))
    assert "left untouched: parameters are (backend, is_multi_node, world_size)" in line
    assert "[3/5] fusion: FlashInfer all-reduce fusion backend, auto-enable and runtime gate: skipped, nothing written" in run.stdout
    assert fusion.read_bytes() == before
    assert not (package / "srt/arch/glue/fusion.py").exists()
    overrides = (package / "srt/arg_groups/overrides.py").read_text()
    assert "arch_fusion" not in overrides and "arch_attention.attention_backend_default(view)" in overrides
    guards = [
        "# sglang-arch: routed through sglang.srt.arch\nfrom sglang.srt.arch.glue import attention as arch_attention\n",
    ] + [f"    # sglang-arch: routed through sglang.srt.arch\n"
         f"    if (arch_answer := arch_attention.{call}(view)) is not None:\n        return arch_answer\n"
         for call in ("attention_backend_default", "dsa_kv_cache_dtype_default", "dsa_split_backends",
                      "fa4_page_size")] + [
        "# sglang-arch: routed through sglang.srt.arch\nfrom sglang.srt.arch.glue import moe as arch_moe\n",
        "    # sglang-arch: routed through sglang.srt.arch\n"
        "    if (arch_answer := arch_moe.moe_runner_backend(view)) is not None:\n        return arch_answer\n"]
    for guard in guards:  # step 4's guards (attention) and its one replaced body, step 5's MoE guard
        assert guard in overrides, guard
        overrides = overrides.replace(guard, "")
    deterministic = re.compile(r"def _deterministic_attention_backend\(view: Any\) -> dict:\n.*?(?=\n\n\n)", re.S)
    replaced = deterministic.search(overrides).group(0)
    assert replaced.endswith("return arch_attention.deterministic_backend_here(view)"), replaced
    assert "is_sm100" in deterministic.search(overrides_before).group(0) and "is_sm100" not in replaced
    assert overrides == deterministic.sub(lambda _: replaced, overrides_before)
    for step in ("[2/5]", "[4/5]"):
        assert re.search(rf"^{re.escape(step)} .*commit|^{re.escape(step)} .*file\(s\)", run.stdout, re.M), step


# --- runtime truth on the patched tree (no plugin) ------------------------------------

TRUTH = Path(__file__).resolve().parent / "runtime_truth.py"
TRUTH_MACHINES = [("12.0", 8, "pcie-p2p"), ("9.0", 2, "nvlink"), ("13.0", 8, "pcie-p2p")]


@pytest.fixture(scope="module")
def patched_truth(clone):
    def one(machine):
        cap, gpus, topology = machine
        env = _patched_env(clone.python, Path(__file__).resolve().parents[2] / "python",
                           SGLANG_ARCH_CAPABILITY=cap, SGLANG_ARCH_GPU_COUNT=str(gpus),
                           SGLANG_ARCH_TOPOLOGY=topology, SGLANG_ARCH_CUDA="13.0")
        out = subprocess.run([sys.executable, str(TRUTH), "--cpu", "--patched"], capture_output=True, text=True,
                             env=env, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    with ThreadPoolExecutor(2) as pool:
        return dict(zip(TRUTH_MACHINES, pool.map(one, TRUTH_MACHINES)))


@pytest.mark.parametrize("machine", TRUTH_MACHINES, ids=lambda m: f"{m[1]}x{m[0]}-{m[2]}")
def test_the_patched_tree_runs_what_the_registry_decides(patched_truth, machine):
    """issue 11: SGLang's own runtime gates in the patched tree, scheduler import order, no plugin."""
    result = patched_truth[machine]
    assert result["gate_routed_by_plugin"] is False and result["gate_references_one_function"] is True
    assert result["add_norm_import_flags"] == {"is_sm90": None, "is_sm100": None}  # deleted by step 3
    fusion = result["fusion"]
    assert fusion["gate_at_64"] is fusion["registry"]["enabled"]
    symm = result["symm_mem"]
    assert symm["sglang"]["enabled"] is symm["registry"]["enabled"]
    if symm["registry"]["enabled"]:
        assert (symm["sglang"]["kernel"], symm["sglang"]["max_bytes"]) == (
            symm["registry"]["algorithm"], symm["registry"]["max_bytes"])
    mha = result["attention"]["mha"]
    assert [mha["prefill"], mha["decode"]] == result["registry_attention"]["mha"]
    dsa = result["attention"]["dsa"]  # the --dsa-* and KV-cache defaults (D10 on 13.0: tilelang)
    assert dsa["dsa_args"] == dsa["registry_dsa"]
    assert dsa["dsa_args"]["prefill"] == {"12.0": "tilelang", "9.0": "flashmla_sparse", "13.0": "tilelang"}[machine[0]]  # 12.0: D11


def test_the_patched_sm120_fuses_and_keeps_its_identity(patched_truth):
    sm120 = patched_truth[("12.0", 8, "pcie-p2p")]
    assert sm120["fusion"]["registry"] == {"enabled": True, "backend": "trtllm"} and sm120["fusion"]["gate_at_64"]
    assert (sm120["symm_mem"]["sglang"]["kernel"], sm120["symm_mem"]["sglang"]["max_bytes"]) == ("two_shot", 128 << 20)
    assert patched_truth[("13.0", 8, "pcie-p2p")]["identity"]["device_capability"] == [13, 0]


# --- SGLang's testing contract: override_platform describes the GPU (issue 19) ----------

CONTRACT = Path(__file__).resolve().parent / "platform_contract.py"
_NONE = {"one node": {}, "tp 1": {}, "two nodes": {}}
_AUTO = {"flashinfer_allreduce_fusion_backend": "auto"}
# SGLang 0.5.23's own answers with no GPU (its _resolve_backend and auto-enable pass under
# the overrides its test_flashinfer_comm_fusion.py and test_model_overrides.py use);
# the test below also asks the installed SGLang, so this literal stays upstream's.
CONTRACT_EXPECTED = {
    "sm100": {
        "resolve": {"auto/single": "mnnvl", "auto/multi": "mnnvl", "mnnvl/single": "mnnvl",
                    "mnnvl/multi": "mnnvl", "trtllm/single": "trtllm", "trtllm/multi": "ValueError"},
        "auto_enable": {"one node": _AUTO, "two nodes": _AUTO, "tp 1": {}},
    },
    "sm90": {
        "resolve": {"auto/single": "trtllm", "auto/multi": "ValueError", "mnnvl/single": "mnnvl",
                    "mnnvl/multi": "ValueError", "trtllm/single": "trtllm", "trtllm/multi": "ValueError"},
        "auto_enable": {"one node": _AUTO, "two nodes": {}, "tp 1": {}},
    },
    "neither": {
        "resolve": {f"{b}/{n}": "ValueError" for b in ("auto", "mnnvl", "trtllm") for n in ("single", "multi")},
        "auto_enable": _NONE,
    },
}


def test_the_patched_tree_answers_sglangs_simulated_gpus_as_sglang(clone):
    """SGLang's unit tests simulate a GPU with override_platform; on a host without one
    (its CPU CI) the patched _resolve_backend and auto-enable pass must answer as
    SGLang 0.5.23 does, which means the registry decides for the GPU SGLang's platform
    context describes (glue.routed_context)."""
    def contract(env):
        out = subprocess.run([sys.executable, str(CONTRACT)], capture_output=True, text=True, env=env,
                             cwd=clone.root, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    no_gpu = {"CUDA_VISIBLE_DEVICES": ""}
    with ThreadPoolExecutor(2) as pool:
        patched = pool.submit(contract, _patched_env(clone.python, **no_gpu))
        upstream = pool.submit(contract, clean_env(SGLANG_ARCH_DISABLE="1", SGLANG_PLUGINS="none", **no_gpu))
        patched, upstream = patched.result(), upstream.result()
    assert (patched["registry"], upstream["registry"]) == ("sglang.srt.arch", None)
    assert patched["sglang"].startswith(str(clone.python)) and not upstream["sglang"].startswith(str(clone.python))
    assert upstream["answers"] == CONTRACT_EXPECTED
    assert patched["answers"] == CONTRACT_EXPECTED
