"""What someone deciding whether to adopt the project reads: its license, its changelog, the
SGLang releases it supports (``--version``, the README), and the package's description."""

import os
import re
import subprocess
import sys
from pathlib import Path

from sglang_arch import __version__
from sglang_arch.integrations.sglang.known_bodies import SUPPORTED

ROOT = Path(__file__).resolve().parents[2]


def cli(*argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    env["PYTHONPATH"] = str(ROOT / "python")
    return subprocess.run([sys.executable, "-m", "sglang_arch", *argv], capture_output=True, text=True, env=env,
                          timeout=60)


def test_version_names_the_supported_sglang_releases():
    out = cli("--version")
    text = " ".join(out.stdout.split())
    assert out.returncode == 0 and text.startswith(f"sglang-arch {__version__}; supports sglang ")
    assert f"supports sglang {', '.join(SUPPORTED)} " in text


def test_the_readme_states_the_window_of_supported_releases_as_recorded():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- supported:begin[^>]*-->\n(.*?)\n<!-- supported:end -->", readme, re.S).group(1)
    assert block == "sglang " + ", ".join(SUPPORTED) + "."
    assert "semantic versioning" in readme and "[CHANGELOG.md](CHANGELOG.md)" in readme


def test_the_readme_says_exactly_what_the_plugin_refuses_beside_never_stopping_a_server():
    readme = " ".join((ROOT / "README.md").read_text().split())
    at = readme.index("**What the plugin refuses, by design.**")
    section = readme[at:readme.index("## Versions", at)]
    assert "never stops a server from starting because of itself" in section
    for flag in ("--attention-backend", "--moe-runner-backend", "--fp8-gemm-backend", "--fp4-gemm-backend",
                 "--speculative-draft-attention-backend"):
        assert f"`{flag}`" in section, flag
    assert "exactly two cases" in section and "SGLANG_ARCH_DISABLE=1` lifts every refusal" in section


def test_license_is_apache_2_with_the_projects_copyright():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    assert "   Copyright 2026 The sglang-arch authors\n" in text
    assert (ROOT / "python" / "LICENSE").read_text() == text  # the package ships it


def test_the_changelog_keeps_a_changelog_and_names_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert sections[0] == ("Unreleased", "") and (__version__, sections[1][1]) == sections[1] and sections[1][1]
    assert set(re.findall(r"^### (\w+)$", text, re.M)) <= {"Added", "Changed", "Deprecated", "Removed", "Fixed",
                                                          "Security"}
    assert f"[{__version__}]: " in text and "[Unreleased]: " in text


def test_the_package_long_description_is_the_readme():
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    cwd = os.getcwd()
    os.chdir(ROOT / "python")
    try:
        dist = apply_configuration(Distribution(), "pyproject.toml")
    finally:
        os.chdir(cwd)
    assert dist.metadata.long_description == (ROOT / "README.md").read_text()
    assert dist.metadata.long_description_content_type == "text/markdown"
    assert list(dist.metadata.license_files) == ["LICENSE"]
