"""Gencode's look at nvcc: a bounded wait, and an answer that says what happened.

Each case puts a fake ``nvcc`` (a shell script) first on PATH; torch is made to report no
CUDA so that the error names nvcc's fate rather than falling back.
"""

import os
import stat
import sys
import time
import types

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_arch import commands, toolkit


def _fake_nvcc(folder, body: str):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "nvcc"
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def no_cuda_torch(monkeypatch):
    fake = types.ModuleType("torch")
    fake.version = types.SimpleNamespace(cuda=None)
    monkeypatch.setitem(sys.modules, "torch", fake)
    _no_toolkit_but_path(monkeypatch)
    return monkeypatch


def _no_toolkit_but_path(monkeypatch):
    """Only PATH names a toolkit: no CUDA_HOME or CUDA_PATH, and no /usr/local/cuda."""
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(toolkit, "DEFAULT_CUDA_HOME", "/nonexistent/cuda")


def test_the_wait_is_bounded_well_below_30_s():
    assert commands.NVCC_TIMEOUT_S <= 10


def test_a_slow_nvcc_is_reported_as_timed_out_not_as_missing(tmp_path, no_cuda_torch):
    # The script's child (sleep) holds nvcc's output open: the wait must not follow it.
    nvcc = _fake_nvcc(tmp_path / "bin", "sleep 30 & wait")
    no_cuda_torch.setenv("PATH", f"{nvcc.parent}{os.pathsep}{os.environ['PATH']}")
    no_cuda_torch.setattr(commands, "NVCC_TIMEOUT_S", 0.5)
    start = time.monotonic()
    with pytest.raises(ValueError) as e:
        commands.toolkit_version(None)
    assert time.monotonic() - start < 5
    assert str(e.value) == (f"no CUDA toolkit found: {nvcc} --version did not answer within 0.5 s (timed out); "
                            f"torch has no CUDA; pass --cuda X.Y")


def test_missing_nvcc_says_not_found(tmp_path, no_cuda_torch):
    no_cuda_torch.setenv("PATH", str(tmp_path))
    with pytest.raises(ValueError) as e:
        commands.toolkit_version(None)
    assert str(e.value) == ("no CUDA toolkit found: CUDA_HOME and CUDA_PATH unset, no nvcc on PATH and no "
                            "/nonexistent/cuda; torch has no CUDA; "
                            "pass --cuda X.Y")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=st.integers(0, 5), text=st.text(st.characters(codec="ascii", exclude_characters="'\x00"), max_size=30))
def test_any_nvcc_answer_is_named_precisely(tmp_path_factory, no_cuda_torch, code, text):
    """Whatever nvcc prints and however it exits: its release, or one line saying which."""
    folder = tmp_path_factory.mktemp("nvcc")
    nvcc = _fake_nvcc(folder, f"printf '%s' '{text}'\nexit {code}")
    no_cuda_torch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    try:
        version, source = commands.toolkit_version(None)
    except ValueError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(f"no CUDA toolkit found: {nvcc} --version ")
        if code:
            assert message.endswith(f"exited with status {code}; torch has no CUDA; pass --cuda X.Y")
        else:
            assert "printed no 'release X.Y'" in message or "invalid version" in message
    else:
        assert code == 0 and source == str(nvcc) and f"release {version[0]}.{version[1]}" in text


@pytest.mark.parametrize("body, said", [
    # endless output: read up to NVCC_OUTPUT_BYTES, then killed at the bound (it hung, then MemoryError)
    ("yes 'no version here'", "did not answer within 0.5 s (timed out)"),
    # a detached child (its own session) keeps the pipe open after nvcc answered: the answer counts
    ('echo "Cuda compilation tools, release 12.8, V12.8.93"; setsid sleep 30 & exit 0', None),
])
def test_endless_output_or_a_detached_child_never_holds_gencode(tmp_path, no_cuda_torch, body, said):
    """Neither may hold gencode past its bound (both once did: rc 124 at 30 s)."""
    nvcc = _fake_nvcc(tmp_path / "bin", body)
    no_cuda_torch.setenv("PATH", f"{nvcc.parent}{os.pathsep}{os.environ['PATH']}")
    no_cuda_torch.setattr(commands, "NVCC_TIMEOUT_S", 0.5)
    start = time.monotonic()
    if said is None:
        assert commands.toolkit_version(None) == ((12, 8), str(nvcc))
    else:
        with pytest.raises(ValueError) as e:
            commands.toolkit_version(None)
        assert said in str(e.value)
    assert time.monotonic() - start < 5


@pytest.fixture
def cuda_torch(monkeypatch):
    fake = types.ModuleType("torch")
    fake.version = types.SimpleNamespace(cuda="12.8")
    monkeypatch.setitem(sys.modules, "torch", fake)
    _no_toolkit_but_path(monkeypatch)
    return monkeypatch


@pytest.mark.parametrize("body, said", [
    ("sleep 30 & wait", "--version did not answer within 0.5 s (timed out)"),
    ("yes 'no version here'", "--version did not answer within 0.5 s (timed out)"),
    ("exit 3", "--version exited with status 3"),
])
def test_a_fallback_to_torch_after_nvcc_failed_is_said_in_one_line(tmp_path, cuda_torch, capsys, body, said):
    # A timed-out nvcc fell back to torch's CUDA without a word.
    nvcc = _fake_nvcc(tmp_path / "bin", body)
    cuda_torch.setenv("PATH", f"{nvcc.parent}{os.pathsep}{os.environ['PATH']}")
    cuda_torch.setattr(commands, "NVCC_TIMEOUT_S", 0.5)
    start = time.monotonic()
    assert commands.toolkit_version(None) == ((12, 8), "torch.version.cuda")
    assert time.monotonic() - start < 5  # the bounded reader and wait are kept
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (f"sglang-arch: warning: {nvcc} {said}; using torch's CUDA 12.8 (torch.version.cuda) instead; "
                   f"pass --cuda X.Y to choose\n")


def test_gencode_says_so_and_still_prints_only_the_value(tmp_path, cuda_torch, capsys):
    from sglang_arch.cli import main
    nvcc = _fake_nvcc(tmp_path / "bin", "sleep 30 & wait")
    cuda_torch.setenv("PATH", f"{nvcc.parent}{os.pathsep}{os.environ['PATH']}")
    cuda_torch.setattr(commands, "NVCC_TIMEOUT_S", 0.5)
    assert main(["gencode", "--capability", "9.0", "--format", "torch"]) == 0
    out, err = capsys.readouterr()
    assert len(err.splitlines()) == 1 and f"{nvcc} --version did not answer within 0.5 s (timed out)" in err
    assert "9.0" in out and "warning" not in out


def test_no_nvcc_falls_back_to_torch_without_a_warning(tmp_path, cuda_torch, capsys):
    cuda_torch.setenv("PATH", str(tmp_path))
    assert commands.toolkit_version(None) == ((12, 8), "torch.version.cuda")
    assert capsys.readouterr().err == ""


def test_cuda_home_wins_over_the_nvcc_on_path(tmp_path, no_cuda_torch):
    """torch's extension builds (``_find_cuda_home``) take CUDA_HOME first: gencode names that
    toolkit's targets, not those of an older nvcc first on PATH."""
    home = tmp_path / "cuda-13.0"
    _fake_nvcc(home / "bin", 'echo "Cuda compilation tools, release 13.0, V13.0.48"')
    older = _fake_nvcc(tmp_path / "bin", 'echo "Cuda compilation tools, release 12.4, V12.4.131"')
    no_cuda_torch.setenv("PATH", f"{older.parent}{os.pathsep}{os.environ['PATH']}")
    assert commands.toolkit_version(None) == ((12, 4), str(older))
    no_cuda_torch.setenv("CUDA_HOME", str(home))
    assert commands.toolkit_version(None) == ((13, 0), str(home / "bin" / "nvcc"))
    no_cuda_torch.delenv("CUDA_HOME")
    no_cuda_torch.setenv("CUDA_PATH", str(home))
    assert commands.toolkit_version(None) == ((13, 0), str(home / "bin" / "nvcc"))
