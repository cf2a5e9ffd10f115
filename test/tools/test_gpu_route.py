"""The GPU route a new user takes: with the wheels of a plain
``scripts/gpu-wheels`` the runtime-truth tests failed with ``ModuleNotFoundError:
setproctitle``; they now skip naming the module (``gpu_env.missing_requirement``), and
benchmark/README.md gives one command that reproduces the committed GPU report."""

import re
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "gpu"))
try:
    import gpu_env
finally:
    sys.path.remove(str(ROOT / "test" / "gpu"))

REPORTED = """Traceback (most recent call last):
  File "test/integration/runtime_truth.py", line 59, in main
    import sglang.srt.managers.scheduler  # noqa: F401
  File ".../sglang/srt/utils/common.py", line 61, in <module>
    import setproctitle
ModuleNotFoundError: No module named 'setproctitle'
"""


def test_the_reported_failure_is_a_skip_naming_the_module():
    assert gpu_env.missing_requirement(REPORTED) == "setproctitle"


names = st.from_regex(r"[a-z_][a-z0-9_]{0,10}(\.[a-z_][a-z0-9_]{0,6}){0,2}", fullmatch=True)


@given(name=names, own=st.sampled_from(gpu_env.OWN_MODULES), sub=st.sampled_from(["", ".srt.x", ".arch"]))
def test_only_a_third_party_module_is_a_reason_to_skip(name, own, sub):
    third_party = name.split(".")[0] not in gpu_env.OWN_MODULES
    assert gpu_env.missing_requirement(f"ModuleNotFoundError: No module named '{name}'\n") == (
        name if third_party else None)
    # a module of SGLang or of this project missing is a broken probe: never skipped
    assert gpu_env.missing_requirement(f"ModuleNotFoundError: No module named '{own}{sub}'\n") is None
    assert gpu_env.missing_requirement("AssertionError: x\n") is None


def test_the_runtime_truth_probe_skips_before_it_asserts():
    source = (ROOT / "test" / "gpu" / "test_runtime_truth_gpu.py").read_text()
    probe = source[source.index("def _probe("):source.index("def _check(")]
    assert probe.index("missing_requirement(out.stderr)") < probe.index("pytest.skip(") < probe.index(
        "assert out.returncode == 0")


def test_one_command_reproduces_the_gpu_report():
    text = (ROOT / "benchmark" / "README.md").read_text()
    commands = re.findall(r"^bash scripts/gpu-wheels --server && OUT=\S+ bash scripts/gpu-test\b", text, re.M)
    assert len(commands) == 1
    assert "setproctitle" in (ROOT / "scripts" / "gpu-requirements.txt").read_text()  # what --server carries
