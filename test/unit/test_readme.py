"""README.md and docs/ say what the code does: the two commands first, the launch table
from the registry and the stock SGLang model, the compatibility table from the plugin's
recorded releases, the switches' names from the plugin, one repository URL, links that
resolve, and no line about how the project was made."""

import importlib.util
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from sglang_arch.explain_text import launch_table

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
FIRST_COMMANDS = ["bash scripts/setup && .venv/bin/sglang-arch show && .venv/bin/sglang-arch explain 12.0 "
                  "--world-size 8 --topology pcie-p2p", "bash scripts/test"]
MAX_README_LINES = 250
# The upstream series' own documents, checked with the series.
ELSEWHERE = ("docs/upstreaming.md", "docs/upstream/")


def between(text, name):
    match = re.search(rf"<!-- {name}:begin[^\n]*-->\n(.*?)<!-- {name}:end -->", text, re.S)
    assert match, f"README has no {name} block"
    return match.group(1)


def test_the_readme_is_short_and_starts_with_the_two_commands():
    lines = README.splitlines()
    assert len(lines) <= MAX_README_LINES
    assert lines[0].startswith("# ") and lines[2] == "```bash" and lines[3:5] == FIRST_COMMANDS and lines[5] == "```"
    assert "bash scripts/test" in (ROOT / ".ci" / "run").read_text()  # what CI runs is the second command


def test_the_launch_table_is_the_registrys_and_stock_sglangs():
    assert between(README, "launch-table") == launch_table(), (
        "README's launch table drifted; replace it with sglang_arch.explain_text.launch_table()")


def test_the_launch_table_marks_the_differences_in_bold():
    rows = [line for line in launch_table().splitlines()[2:]]
    assert len(rows) == 5
    sm120 = rows[0]
    assert "**PCIe-IPC / NCCL** (stock: NCCL / NCCL)" in sm120  # the reference machine's all-reduce paths
    assert "| off (same) |" in sm120  # no torch symm mem over PCIe: nothing measured it there
    h100 = rows[3]
    assert "**" not in h100  # where SGLang decides, the plugin keeps its answer


def test_the_compatibility_table_names_the_recorded_releases():
    block = between(README, "compatibility")
    rows = {line.split("|")[1].strip(): line for line in block.splitlines() if re.match(r"\| \d", line)}
    supported = [release for release, row in rows.items() if row.split("|")[2].strip().startswith("yes")]
    if not importlib.util.find_spec("sglang_arch.integrations.sglang.known_bodies"):
        assert supported == ["0.5.23"]
        return
    from sglang_arch.integrations.sglang import known_bodies

    assert supported == list(known_bodies.SUPPORTED)
    def targets(release):  # the recorded bodies, less the tables the decisions read
        return len(set(known_bodies.BODIES[release]) - set(getattr(known_bodies, "DATA", {}).get(release, {})))

    for release in known_bodies.SUPPORTED:
        assert f"all {targets(release)} targets" in rows[release]
    # a release measured but not supported: the numbers docs/configuration.md gives for it
    config = " ".join((ROOT / "docs" / "configuration.md").read_text().split())
    for release, row in rows.items():
        if release in known_bodies.SUPPORTED:
            continue
        routed, total, kept = map(int, re.search(r"(\d+) of (\d+) targets.*?the other (\d+)", row).groups())
        assert routed + kept == total == targets(known_bodies.SUPPORTED[0])
        assert f"| {release} | not supported" in config and f"{routed} of {total}" in config
        assert f"the other {kept} keep {release}'s code" in config
    assert "| any other | no |" in block


def test_the_per_decision_switch_names_are_the_plugins():
    if not importlib.util.find_spec("sglang_arch.integrations.sglang.switches"):
        pytest.skip("the per-decision switch is not in this tree")
    from sglang_arch.integrations.sglang import switches

    row = next(line for line in README.splitlines() if "leave some decisions to SGLang" in line)
    assert re.findall(r"`([a-z_]+)`", row.split("(names:")[1]) == list(switches.DECISIONS)
    example = re.search(r"`SGLANG_ARCH_DISABLE=([a-z_,]+)`", row).group(1)
    assert switches.parse(example) == frozenset(example.split(","))


def test_the_repository_url_is_written_once_and_the_readme_uses_it():
    project = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())["project"]
    url = project["urls"]["Repository"]
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", url)
    installs = re.findall(r'pip install "sglang-arch(\[serve\])? @ git\+(\S+)#subdirectory=python"', README)
    assert [extra for extra, _ in installs] == ["", "[serve]"]
    assert {found for _, found in installs} == {url}
    assert "[project.urls]" in README and "<fork>" not in README


def _links(path):
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
        if not re.match(r"[a-z]+://", target):
            yield target


@pytest.mark.parametrize("path", ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")
                                                       if not str(p.relative_to(ROOT)).startswith(ELSEWHERE)))
def test_every_relative_link_resolves(path):
    doc = ROOT / path
    missing = [t for t in _links(doc) if not (doc.parent / t).exists()]
    assert not missing, missing


# Words that say how the project was made, not what it does.
HISTORY = re.compile(
    r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|this|previous|"
    r"earlier|later|last|next) sessions?\b|\bother agents?\b|\b(?:four|five|three|two|several) agents\b|"
    r"(?<!libcst )(?<!its )\bissue (?:#?\d+)|\bissues \d+|\bround \d+\b", re.I)
SCOPES = ("README.md", "docs", "python", "test", "scripts", "benchmark")


def test_no_file_says_how_the_project_was_made():
    files = subprocess.run(["git", "ls-files", "--", *SCOPES], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    found = []
    for name in files:
        if name.startswith(ELSEWHERE) or not name.endswith((".md", ".py", ".sh", ".toml", ".txt", ".yml")):
            continue
        for number, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1):
            if HISTORY.search(line):
                found.append(f"{name}:{number}: {line.strip()[:120]}")
    assert not found, "\n".join(found[:40]) + f"\n({len(found)} lines)"
