"""Property-based fuzzing of every input: override documents (JSON and TOML),
CLI argument vectors, environment values, and the parsers under them.

Every generated input must end in exit 0 or 2 (2: exactly one line on stderr), never a
traceback, within a time bound per call, and nothing built from it may pass a limit of
``arch/validate.py``.  In-process calls of ``cli.main`` keep it fast; a few subprocess
checks at the end cover the real entry point.  ``FUZZ_EXAMPLES`` (the sum of the
``max_examples`` below) is asserted to be at least 10,000, and each fuzz test to run all of
its ``max_examples``, so a run covers at least 10,000 inputs.
"""

import importlib
import json
import os
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_arch.arch import (
    TOPOLOGIES,
    TableError,
    build_registry,
    parse_capability,
    parse_topology,
    runtime,
)
from sglang_arch.arch.profile import _KNOWN_FIELDS, parse_version
from sglang_arch.arch.registry import load_override_file
from sglang_arch.arch.validate import (
    CUDA_MAX_MAJOR,
    MAX_GPUS_PER_NODE,
    MAX_ITEMS,
    MAX_TEXT,
    SMEM_MAX_KIB,
    SYMM_MEM_MAX_MIB,
)
from sglang_arch.cli import main

detect_module = importlib.import_module("sglang_arch.arch.detect")

CALL_SECONDS = 30.0  # per generated input: a hang or a blow-up, not load (typical: milliseconds; a first `show` importing torch took 12 s on a 2-core machine at load 11-13)
EXAMPLES = {"parsers": 3600, "json": 2000, "toml": 1000, "config_cli": 300, "argv": 2400, "env": 1000}
FUZZ_EXAMPLES = sum(EXAMPLES.values())
RAN = {}


def fuzz(name):
    apply = settings(max_examples=EXAMPLES[name], deadline=None, database=None, print_blob=True,
                     suppress_health_check=list(HealthCheck))

    def decorate(test):
        test = apply(test)
        test.fuzz_name = name
        return test

    return decorate


@pytest.fixture(autouse=True)
def _every_input_ran(request):
    """A fuzz test passes only once all its ``max_examples`` inputs ran, so that the run's
    10,000 hold wherever each test runs (pytest-xdist spreads them over processes)."""
    name = getattr(request.function, "fuzz_name", None)
    before = RAN.get(name, 0)
    yield
    if name is not None:
        ran = RAN.get(name, 0) - before
        assert ran >= EXAMPLES[name], f"{request.node.name} ran {ran} of its {EXAMPLES[name]} inputs"


@pytest.fixture(autouse=True, scope="module")
def _no_real_gpu_probe():
    """Detection on this machine answers 'no GPU' at once (NVML and torch are not asked)."""
    saved = detect_module._nvml_node, detect_module._torch_node
    detect_module._nvml_node = lambda: None
    detect_module._torch_node = lambda: None
    yield
    detect_module._nvml_node, detect_module._torch_node = saved
    runtime.reset()


@pytest.fixture(autouse=True, scope="module")
def _quiet_env():
    keys = [k for k in os.environ if k.startswith("SGLANG_ARCH_")]
    saved = {k: os.environ.pop(k) for k in keys}
    os.environ["SGLANG_ARCH_CUDA"] = "13.0"  # torch is not imported for its CUDA version
    yield
    os.environ.pop("SGLANG_ARCH_CUDA", None)
    os.environ.update(saved)


@pytest.fixture
def torch_imported():
    """An empty ``SGLANG_ARCH_CUDA`` has the runtime read torch's CUDA version: torch is
    imported here, before the inputs, not inside a timed call (the bound is per input; a
    first import takes seconds on a loaded machine, e.g. in a fresh pytest-xdist worker)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        pass


def count(name):
    RAN[name] = RAN.get(name, 0) + 1


def check_limits(registry):
    """No profile built from any input passes a documented limit."""
    for cap in registry.known:
        p = registry.profile(cap)
        assert all(2 <= ws <= MAX_GPUS_PER_NODE and 0 < b <= SYMM_MEM_MAX_MIB << 20 for ws, b in p.torch_symm_mem.items())
        assert all(2 <= ws <= MAX_GPUS_PER_NODE for ws in p.symm_mem_multimem_world_sizes)
        assert all(1 <= ws <= MAX_GPUS_PER_NODE for ws in p.custom_ar_v2_world_sizes)
        for kib in (p.smem_per_sm_kib, p.smem_per_block_kib):
            assert kib is None or (type(kib) is int and 1 <= kib <= SMEM_MAX_KIB)
        for v in (p.min_cuda, p.min_cuda_arch_specific, p.min_cuda_family, p.max_cuda, p.allreduce_fusion_min_cuda):
            assert v is None or 1 <= v[0] <= CUDA_MAX_MAJOR
        for texts in (p.examples, p.sources, p.lead, p.attention_mha, p.attention_mla):
            assert len(texts) <= MAX_ITEMS and all(0 < len(t) <= MAX_TEXT for t in texts)
        assert 0 < len(p.name) <= MAX_TEXT


def call_main(argv, capsys):
    start = time.monotonic()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's --help / --version
        code = exc.code
    elapsed = time.monotonic() - start
    out, err = capsys.readouterr()
    assert elapsed < CALL_SECONDS, (argv, elapsed)
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    if code == 2:
        assert len(err.strip().splitlines()) == 1, (argv, err)
        assert len(err) < 2100, (argv, len(err))
    return code, out, err


# --- the parsers -----------------------------------------------------------------------

SPELLING_PARTS = st.sampled_from(["sm", "sm_", "compute_", "(", ")", ",", " ", ".", "a", "f", "12", "0", "9",
                                  "120", "１２", "٠", "-", "1e3", "\n", "\x00", "99", "100"])
spellings = st.one_of(st.text(max_size=12), st.lists(SPELLING_PARTS, max_size=6).map("".join),
                      st.integers(-10 ** 6, 10 ** 6), st.tuples(st.integers(-5, 200), st.integers(-5, 20)),
                      st.none(), st.floats(), st.booleans())


@fuzz("parsers")
@given(value=spellings)
def test_fuzz_parsers(value):
    count("parsers")
    for parse in (parse_capability, parse_topology, parse_version):
        start = time.monotonic()
        try:
            out = parse(value)
        except ValueError as exc:
            assert len(str(exc)) < 600 and "\n" not in str(exc)
        else:
            if parse is parse_capability:
                assert 0 <= out.major <= 99 and 0 <= out.minor <= 9
                text = str(value)
                assert text.isascii() or isinstance(value, (int, tuple)), value
                assert parse_capability(str(out)) == out
            elif parse is parse_version:
                assert 1 <= out[0] <= CUDA_MAX_MAJOR and 0 <= out[1] <= 99
            else:
                assert out in TOPOLOGIES.values()
        assert time.monotonic() - start < CALL_SECONDS


# --- override documents ------------------------------------------------------------------

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=False),
                    st.text(max_size=20), st.sampled_from(["12.0", "9.0", "13.0", "pcie", "nvswitch", "fp8", "arch",
                                                           "family", "mnnvl", "trtllm", "sm90", "12.8", "64"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                      max_leaves=12)
field_names = st.one_of(st.sampled_from(sorted(_KNOWN_FIELDS)), st.text(max_size=8))
symm_tables = st.dictionaries(st.one_of(st.sampled_from(["2", "4", "8", "72", "73", "0", "x"]), st.text(max_size=3)),
                              st.one_of(st.integers(-5, 5000), st.floats(), st.text(max_size=4)), max_size=4)
entries = st.dictionaries(field_names, st.one_of(values, symm_tables), max_size=6)
cap_keys = st.one_of(st.sampled_from(["12.0", "12.1", "13.0", "9.0", "10.0", "7.0", "sm_120", "(12, 0)", "12"]),
                     st.text(max_size=6))
documents = st.one_of(
    st.dictionaries(cap_keys, st.one_of(entries, values), max_size=4),
    st.dictionaries(st.just("architectures"), st.one_of(st.dictionaries(cap_keys, entries, max_size=3), values),
                    min_size=1, max_size=1),
    values,
)


def fresh(path: str) -> str:
    """``path``, removed first: each input is a new file.  Rewriting one file in place
    (O_TRUNC) costs milliseconds per call on ext4, which flushes a truncated file on close."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    return path


def _build_from(path):
    start = time.monotonic()
    try:
        overrides = load_override_file(path)
        registry = build_registry(overrides, override_source=path)
    except (TableError, ValueError) as exc:
        message = str(exc)
        assert path in message and "\n" not in message and len(message) < 1500, message
    else:
        check_limits(registry)
        for cap in registry.known:
            registry.resolve(cap)
    assert time.monotonic() - start < CALL_SECONDS


@fuzz("json")
@given(doc=documents, allow_constants=st.booleans())
def test_fuzz_json_override_documents(tmp_path_factory, doc, allow_constants):
    count("json")
    path = fresh(str(tmp_path_factory.getbasetemp() / "fuzz.json"))
    try:
        text = json.dumps(doc, allow_nan=allow_constants)
    except ValueError:
        text = json.dumps(doc, default=str, allow_nan=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    _build_from(path)


TOML_LINES = st.sampled_from([
    '[architectures."12.0"]', '[architectures."13.0"]', '[architectures.12.0]', '["12.0"]', 'name = "x"',
    'inherits = "12.0"', 'inherits = "99.9"', 'torch_symm_mem = { "8" = 2000 }', 'torch_symm_mem = { "8" = 64 }',
    'torch_symm_mem = { "8" = inf }', 'torch_symm_mem = { "1000000" = 1 }', 'topology = ["pcie"]',
    'topology = "nvswitch"', 'smem_per_sm_kib = nan', 'smem_per_sm_kib = 1e300', 'min_cuda = "12.8"',
    'min_cuda = 12.8', 'features = { fp8 = "arch" }', 'features = { fp8 = [1] }', 'examples = ["a", 1]',
    'allreduce_fusion = ["mnnvl"]', 'architectures = 5', 'x = [[[[[]]]]]', 'name = """', '=', '[[architectures]]',
    'custom_ar_v2_world_sizes = [1, 2, 99999999999999999999]', 'lead = ["name"]', 'sources = []',
])


@fuzz("toml")
@given(lines=st.lists(st.one_of(TOML_LINES, st.text(max_size=15)), max_size=8))
def test_fuzz_toml_override_documents(tmp_path_factory, lines):
    count("toml")
    path = fresh(str(tmp_path_factory.getbasetemp() / "fuzz.TOML"))
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
        fh.write("\n".join(lines))
    _build_from(path)


@fuzz("config_cli")
@given(doc=documents, command=st.sampled_from([["explain", "12.0", "--world-size", "8"], ["show", "--json"],
                                               ["matrix", "--format", "json"], ["explain", "13.0", "--json"]]))
def test_fuzz_override_documents_through_the_cli(tmp_path_factory, capsys, doc, command):
    count("config_cli")
    path = fresh(str(tmp_path_factory.getbasetemp() / "cli.json"))
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, default=str)
    os.environ["SGLANG_ARCH_CONFIG"] = path
    try:
        runtime.reset()
        code, _, err = call_main(command, capsys)
        if code == 2:
            assert path in err
    finally:
        del os.environ["SGLANG_ARCH_CONFIG"]
        runtime.reset()


# --- argument vectors ------------------------------------------------------------------

WORDS = st.sampled_from([
    "show", "explain", "matrix", "gencode", "plan", "tune", "collectives", "upstream", "--json", "--strict",
    "--world-size", "--tp", "--nnodes", "--topology", "--cuda", "--capability", "--gpus", "--format", "--detected",
    "--no-specific", "--model-path", "--iters", "--sizes", "--world-sizes", "--from-results", "--check", "-v",
    "--", "12.0", "(12, 0)", "sm_120a", "１２.０", "9.0", "13.0", "7.0", "0", "1", "2", "8", "72", "73", "1000000",
    str(10 ** 20), "-1", "nvswitch", "pcie", "pcie-p2p", "nvlink", "single", "ring", "12.8", "99.99", "markdown",
    "json", "cmake", "torch", "flashinfer", "4K", "1G", "3", "missing-dir", "/dev/zero", "", " ", "\x00", "-",
])
argvs = st.lists(st.one_of(WORDS, WORDS, st.text(max_size=10)), max_size=8)


@fuzz("argv")
@given(argv=argvs)
def test_fuzz_cli_argument_vectors(tmp_path_factory, capsys, monkeypatch, argv):
    count("argv")
    if "upstream" in argv or "plan" in argv:
        # Their paths are resolved from the working folder: an empty one, so nothing real is touched.
        monkeypatch.chdir(tmp_path_factory.getbasetemp())
    call_main(argv, capsys)


# --- environment values ----------------------------------------------------------------

ENV_VALUES = {
    "SGLANG_ARCH_CAPABILITY": st.one_of(st.sampled_from(["12.0", "(9, 0)", "１２.０", "13.7", "banana", ""]), st.text(max_size=8)),
    "SGLANG_ARCH_GPU_COUNT": st.one_of(st.sampled_from(["1", "8", "72", "73", "0", str(10 ** 20), "８", " 4 "]),
                                       st.text(max_size=6)),
    "SGLANG_ARCH_TOPOLOGY": st.one_of(st.sampled_from(sorted(TOPOLOGIES) + ["NVSwitch", "ring"]), st.text(max_size=6)),
    "SGLANG_ARCH_CUDA": st.one_of(st.sampled_from(["12.8", "13.0", "12.4", "999.0", "１３.０", "12.8.1"]), st.text(max_size=6)),
    "SGLANG_ARCH_STRICT": st.one_of(st.sampled_from(["1", "0", "maybe", "TRUE", " on "]), st.text(max_size=5)),
    "SGLANG_ARCH_RESOLVE_AS": st.one_of(st.sampled_from(["9.0", "13.0", "x"]), st.text(max_size=5)),
    "SGLANG_ARCH_CONFIG": st.sampled_from(["/dev/zero", "/dev/null", "/nonexistent.json", "/", "/proc/self/status"]),
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": st.sampled_from(["1", "0", "yes"]),
}
environments = st.fixed_dictionaries({}, optional={k: v.filter(lambda s: "\x00" not in s) for k, v in ENV_VALUES.items()})


@fuzz("env")
@given(env=environments, command=st.sampled_from([["show", "--json"], ["show"], ["explain", "12.0"],
                                                  ["matrix", "--format", "json"]]))
def test_fuzz_environment_values(capsys, torch_imported, env, command):
    count("env")
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        runtime.reset()
        code, out, err = call_main(command, capsys)
        runtime.reset()
        start = time.monotonic()
        try:  # what the plugin's register() reads first: it must answer, or fail with one line
            ctx = runtime.current()
        except ValueError as exc:
            assert "\n" not in str(exc)
            assert code == 2 or command[0] != "show", (env, command)  # show checks all the plugin reads
        else:
            assert len(ctx.node.gpus) <= MAX_GPUS_PER_NODE
            if code == 0 and command == ["show", "--json"] and ctx.resolution is not None:
                assert json.loads(out)["node"] == ctx.decisions().to_dict()  # show == the plugin
        assert time.monotonic() - start < CALL_SECONDS
    finally:
        os.environ.clear()
        os.environ.update(saved)
        runtime.reset()


def test_fuzz_ran_at_least_10000_inputs():
    assert FUZZ_EXAMPLES >= 10_000  # each fuzz test runs all of its share (_every_input_ran)
    if set(RAN) == set(EXAMPLES):  # every fuzz test ran in this process
        assert sum(RAN.values()) >= 10_000, RAN


# --- the real entry point, a few times ---------------------------------------------------

@pytest.mark.parametrize("argv,env", [
    (["explain", "１２.０"], {}),
    (["show"], {"SGLANG_ARCH_CONFIG": "/dev/zero"}),
    (["show"], {"SGLANG_ARCH_CAPABILITY": "12.0", "SGLANG_ARCH_GPU_COUNT": str(10 ** 20)}),
    (["explain", "12.0", "--world-size", "1000000"], {}),
])
def test_subprocess_entry_point_one_line(argv, env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    # A hang fails here (subprocess.TimeoutExpired after 60 s).
    out = subprocess.run([sys.executable, "-m", "sglang_arch", *argv], capture_output=True, text=True,
                         env={**clean, **env}, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
