"""SGLang releases as package trees, for the series' tests: the installed one, and the
Python files of earlier releases' wheels (fetched once with pip into a cache folder;
``SGLANG_ARCH_WHEELS`` names another folder, e.g. one filled by hand where PyPI is out
of reach)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

INSTALLED = Path(importlib.util.find_spec("sglang").submodule_search_locations[0])
WHEELS = Path(os.environ.get("SGLANG_ARCH_WHEELS", Path.home() / ".cache" / "sglang-arch" / "wheels"))
# Big subpackages no routed site lives in (copying them costs seconds per tree).
SKIP = ("multimodal_gen", "__pycache__")


def wheel(version: str) -> Path:
    found = sorted(WHEELS.glob(f"sglang-{version}-*.whl"))
    if not found:
        WHEELS.mkdir(parents=True, exist_ok=True)
        out = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(WHEELS),
                              f"sglang=={version}"], capture_output=True, text=True, timeout=600)
        found = sorted(WHEELS.glob(f"sglang-{version}-*.whl"))
        if not found:
            raise RuntimeError(f"sglang {version}'s wheel is not in {WHEELS} and pip could not fetch it: "
                               f"{out.stderr.strip()[-500:]}")
    return found[-1]


def package_tree(version: str, dest: Path) -> Path:
    """``dest/sglang``: the package of ``version`` (the installed one for its own version)."""
    from importlib.metadata import version as installed_version

    target = dest / "sglang"
    if version == installed_version("sglang"):
        shutil.copytree(INSTALLED, target, ignore=lambda d, names: {n for n in names if n in SKIP})
        return target
    with zipfile.ZipFile(wheel(version)) as archive:
        for name in archive.namelist():
            parts = name.split("/")
            if parts[0] == "sglang" and not any(p in SKIP for p in parts):
                archive.extract(name, dest)
    return target
