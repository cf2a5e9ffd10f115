"""The CUDA toolkit gencode builds for is the one torch's extension builds use.

``sglang_arch.toolkit.find_cuda_home`` is compared with torch's own
``torch.utils.cpp_extension._find_cuda_home`` over generated environments: CUDA_HOME and
CUDA_PATH set, empty or unset, an ``nvcc`` on PATH or not, ``/usr/local/cuda`` there or not.
"""

import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglang_arch import toolkit

cpp_extension = pytest.importorskip("torch.utils.cpp_extension")

homes = st.one_of(st.none(), st.just(""), st.sampled_from(["/opt/cuda-12.8", "/opt/cuda 13", "relative/cuda"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuda_home=homes, cuda_path=homes, nvcc_on_path=st.sampled_from([None, "/opt/other/bin/nvcc", "/usr/bin/nvcc"]),
       default_exists=st.booleans())
def test_the_toolkit_is_found_in_torchs_order(monkeypatch, cuda_home, cuda_path, nvcc_on_path, default_exists):
    for name, value in (("CUDA_HOME", cuda_home), ("CUDA_PATH", cuda_path)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    which = lambda name: nvcc_on_path if name == "nvcc" else None  # noqa: E731
    real_exists = os.path.exists
    exists = lambda path: default_exists if path == "/usr/local/cuda" else real_exists(path)  # noqa: E731
    # torch's function reads shutil.which and os.path.exists through its module's globals
    monkeypatch.setattr(cpp_extension.shutil, "which", which)
    monkeypatch.setattr(cpp_extension.os.path, "exists", exists)
    try:
        theirs = cpp_extension._find_cuda_home()
    finally:
        monkeypatch.setattr(cpp_extension.shutil, "which", shutil.which)
        monkeypatch.setattr(cpp_extension.os.path, "exists", real_exists)
    assert toolkit.find_cuda_home(os.environ, which, exists) == theirs
    nvcc, where = toolkit.find_nvcc(os.environ, which, exists)
    if theirs:
        assert where in ("CUDA_HOME", "CUDA_PATH", "PATH", "/usr/local/cuda")
        if where == "PATH":  # the nvcc torch's home was taken from
            assert nvcc == nvcc_on_path and os.path.dirname(os.path.dirname(nvcc)) == theirs
        else:
            assert nvcc == os.path.join(theirs, "bin", "nvcc")
    else:
        assert nvcc is None and "\n" not in where


def test_cuda_home_wins_over_an_nvcc_on_path():
    """Before, gencode asked PATH first: an older nvcc on PATH decided the targets while the
    build used CUDA_HOME's."""
    which = lambda name: "/usr/bin/nvcc"  # noqa: E731
    assert toolkit.find_nvcc({"CUDA_HOME": "/opt/cuda-13.0"}, which) == ("/opt/cuda-13.0/bin/nvcc", "CUDA_HOME")
    assert toolkit.find_nvcc({"CUDA_PATH": "/opt/cuda-12.9"}, which) == ("/opt/cuda-12.9/bin/nvcc", "CUDA_PATH")
    assert toolkit.find_nvcc({}, which) == ("/usr/bin/nvcc", "PATH")
    nowhere = lambda name: None  # noqa: E731
    assert toolkit.find_nvcc({}, nowhere, lambda p: True) == ("/usr/local/cuda/bin/nvcc", "/usr/local/cuda")
    assert toolkit.find_nvcc({}, nowhere, lambda p: False)[0] is None
