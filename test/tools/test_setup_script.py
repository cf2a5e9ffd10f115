"""scripts/setup on a machine without uv: it bootstraps the pinned uv into
.venv-tools/ and installs with it; where that fails it says so and installs with pip.

The script runs from a copy of the repository's layout with fakes for the interpreter, uv
and the venv's interpreter that log what they are asked; nothing is downloaded."""

import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATH = "/usr/bin:/bin"

FAKE_PYTHON = r'''#!/bin/bash
echo "python $*" >>"$LOG"
if [ "$1 $2 $3" = "-m pip config" ]; then exit 0; fi
if [ "$1 $2 $3" = "-m pip install" ]; then
    [ "${FAKE_PIP_FAILS:-0}" = 1 ] && exit 1
    while [ $# -gt 0 ]; do [ "$1" = --target ] && target="$2"; shift; done
    mkdir -p "$target/bin" && cp "$FAKES/uv" "$target/bin/uv"
    exit 0
fi
if [ "$1" = -m ] && [ "$2" = venv ]; then mkdir -p "$3/bin" && cp "$FAKES/venv-python" "$3/bin/python"; fi
exit 0
'''
FAKE_UV = r'''#!/bin/bash
echo "uv $*" >>"$LOG"
if [ "$1" = venv ]; then for last; do :; done; mkdir -p "$last/bin" && cp "$FAKES/venv-python" "$last/bin/python"; fi
exit 0
'''
FAKE_VENV_PYTHON = r'''#!/bin/bash
echo "venv-python $*" >>"$LOG"
[ "$1" = -c ] && echo /nonexistent-site
[ "$1" = - ] && { cat >/dev/null; echo "installed with $2"; }
exit 0
'''


@pytest.fixture
def layout(tmp_path):
    if shutil.which("uv", path=PATH):
        pytest.skip("uv is on /usr/bin:/bin here: the machine this test describes has none")
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "python").mkdir()
    shutil.copy(ROOT / "scripts" / "setup", repo / "scripts" / "setup")
    shutil.copy(ROOT / "python" / "pyproject.toml", repo / "python" / "pyproject.toml")
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    for name, text in (("python", FAKE_PYTHON), ("uv", FAKE_UV), ("venv-python", FAKE_VENV_PYTHON)):
        (fakes / name).write_text(text)
        (fakes / name).chmod(0o755 | stat.S_IXUSR)
    return repo, fakes, tmp_path / "log"


def setup(layout, **env):
    repo, fakes, log = layout
    full = {"PATH": PATH, "HOME": str(repo), "PYTHON": str(fakes / "python"), "FAKES": str(fakes), "LOG": str(log),
            "SGLANG_ARCH_VENV": str(repo / "venv"), **env}
    out = subprocess.run(["bash", str(repo / "scripts" / "setup")], capture_output=True, text=True, env=full, timeout=60)
    return out, log.read_text().splitlines() if log.exists() else []


def pinned():
    return re.search(r"^UV_VERSION=(\S+)$", (ROOT / "scripts" / "setup").read_text(), re.M).group(1)


def test_without_uv_the_pinned_uv_is_bootstrapped_and_installs(layout):
    out, log = setup(layout)
    assert out.returncode == 0, out.stderr
    version = pinned()
    assert f"bootstrapping uv=={version} into .venv-tools/uv-{version}" in out.stderr
    target = layout[0] / ".venv-tools" / f"uv-{version}"
    assert any(line.startswith("python -m pip install") and f"uv=={version}" in line and str(target) + ".tmp" in line
               for line in log)
    assert any(line.startswith("uv pip install") for line in log) and "installed with uv" in out.stdout
    assert not any(line.startswith("venv-python -m pip install") for line in log)
    # a second run uses the bootstrapped uv without asking pip again
    again, log2 = setup(layout)
    assert again.returncode == 0 and "bootstrapping" not in again.stderr
    assert len([line for line in log2 if "--target" in line]) == 1


def test_where_the_bootstrap_fails_pip_installs_and_says_why(layout):
    out, log = setup(layout, FAKE_PIP_FAILS="1")
    assert out.returncode == 0, out.stderr
    assert f"could not bootstrap uv=={pinned()}" in out.stderr and "installing with pip" in out.stderr
    assert any(line.startswith("venv-python -m pip install") for line in log) and "installed with pip" in out.stdout
    assert not (layout[0] / ".venv-tools" / f"uv-{pinned()}").exists()


def test_an_explicit_pip_never_bootstraps(layout):
    out, log = setup(layout, SGLANG_ARCH_INSTALLER="pip")
    assert out.returncode == 0 and "installed with pip" in out.stdout
    assert not any("--target" in line for line in log)


def test_the_bootstrap_folder_is_ignored_by_git():
    assert "/.venv-tools/" in (ROOT / ".gitignore").read_text().split()
