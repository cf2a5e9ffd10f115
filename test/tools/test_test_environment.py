"""The test run itself: no test module leaves variables behind for other tests.

test/gpu/gpu_env.py used to set the multicast-off variables at import, so in a full run
(test/gpu is collected first) every unit and integration test saw multicast off and a
bug in their handling could not show.  Now a fixture sets them per GPU test only.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WATCHED = ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


def test_multicast_variables_are_as_the_shell_left_them(request):
    now = {name: os.environ.get(name) for name in WATCHED}
    assert now == request.config.env_at_start
    if os.environ.get("SGLANG_ARCH_TEST_LEAK_CHECK") == "1":  # started without them (below)
        assert now == {name: None for name in WATCHED}


def test_collecting_the_gpu_tests_leaks_nothing_into_a_unit_test():
    """A run that collects (imports) every GPU test module, then runs the check above."""
    env = {k: v for k, v in os.environ.items() if k not in WATCHED}
    env["SGLANG_ARCH_TEST_LEAK_CHECK"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test/gpu",
                          "test/tools/test_test_environment.py", "-k", "shell_left_them", "-p", "no:randomly"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 passed" in out.stdout


def test_gpu_tests_get_multicast_off_from_their_fixture():
    sys.path.insert(0, str(ROOT / "test" / "gpu"))
    try:
        import gpu_env
    finally:
        sys.path.remove(str(ROOT / "test" / "gpu"))
    assert gpu_env.MULTICAST_OFF == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                                     "NVSHMEM_DISABLE_NVLS": "1"}
    source = (ROOT / "test" / "gpu" / "conftest.py").read_text()
    assert "def multicast_off(monkeypatch)" in source and "autouse=True" in source
