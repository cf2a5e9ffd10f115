"""docs/ say what the code does: the example error, the module lists, the fallback
examples and the limits are checked against the code here."""

import re
from pathlib import Path

import pytest

from sglang_arch.arch import resolve, validate
from sglang_arch.arch.decisions import explain
from sglang_arch.arch.table import ARCHITECTURES
from sglang_arch.cli import main

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "python" / "sglang_arch"


def code_blocks(text, after):
    """The fenced blocks that follow ``after`` in ``text``."""
    return re.findall(r"```[a-z]*\n(.*?)```", text[text.index(after):], re.S)


def test_configurations_example_error_is_what_the_cli_prints(tmp_path, capsys, monkeypatch):
    doc = (DOCS / "configuration.md").read_text()
    toml, printed = code_blocks(doc, "A malformed file is an error naming")[:2]
    (tmp_path / "arch.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", "arch.toml")
    assert "`SGLANG_ARCH_CONFIG=arch.toml sglang-arch explain 12.0`" in doc
    assert main(["explain", "12.0"]) == 2
    assert capsys.readouterr().err == printed


def _architecture_paths():
    doc = (DOCS / "architecture.md").read_text()
    table = doc[doc.index("| module | job |"):]
    table = table[:table.index("\n\n")]
    return {path for row in table.splitlines()[2:] for path in re.findall(r"`([\w./]+)`", row.split("|")[1])}


def test_every_module_architecture_md_lists_exists():
    for path in _architecture_paths():
        where = ROOT / "python" / path if path.startswith(("_sglang", "sglang_arch_early")) else PACKAGE / path
        assert where.exists(), path


@pytest.mark.parametrize("folder", ["", "arch/", "integrations/sglang/"])
def test_architecture_md_lists_every_module(folder):
    listed = _architecture_paths()
    for module in sorted((PACKAGE / folder).glob("*.py")):
        name = folder + module.name
        if module.name == "__main__.py" or (module.name == "__init__.py" and folder != "integrations/sglang/"):
            continue
        assert name in listed, f"docs/architecture.md does not list {name}"
    for sub in sorted(p for p in (PACKAGE / folder).iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        prefix = folder + sub.name + "/"
        assert any(path.startswith(prefix) for path in listed), f"docs/architecture.md does not list {prefix}"


def test_architecture_md_names_every_glue_module():
    doc = " ".join((DOCS / "architecture.md").read_text().split())
    named = re.search(r"`integrations/sglang/glue/`: one module per concern \(([^)]*)\)", doc).group(1)
    modules = sorted(p.stem for p in (PACKAGE / "integrations" / "sglang" / "glue").glob("*.py") if p.stem != "__init__")
    assert re.findall(r"`(\w+)`", named) == modules


def test_the_fallback_examples_hold():
    doc = " ".join((DOCS / "fallback.md").read_text().split())
    assert "`explain 13.0` is `generation` of 12.1 (no tcgen05, no wgmma)" in doc
    r = resolve("13.0")
    assert (str(r.resolved), r.match, r.features["tcgen05"], r.features["wgmma"]) == ("12.1", "generation", False, False)
    r = resolve("9.5")
    assert (str(r.resolved), r.match, r.features["wgmma"]) == ("9.0", "family", False)
    assert explain("9.5").mha.prefill != "fa3"
    oldest = min(ARCHITECTURES, key=lambda c: tuple(int(x) for x in c.split(".")))
    assert f"below the oldest tier ({oldest}) every custom path is off (`portable`)" in doc
    assert resolve("6.1").match == "portable"
    assert "assumed on `pcie` without peer-to-peer access" in doc
    assert explain("13.0", world_size=8).topology.name == "pcie"


def test_the_limits_are_validates():
    doc = " ".join((DOCS / "limits.md").read_text().split())
    assert f"| GPUs of one node (`show --gpus`, `SGLANG_ARCH_GPU_COUNT`) | 1-{validate.MAX_GPUS_PER_NODE} " in doc
    assert f"| nodes (`--nnodes`) | 1-{validate.MAX_NODES}," in doc
    assert f"| world size (`--world-size`/`--tp`) | 1-{validate.MAX_WORLD_SIZE}," in doc
    assert f"at most {validate.MAX_GPUS_PER_NODE} per node" in doc
    assert f"1-{validate.SMEM_MAX_KIB} |" in doc and f"to {validate.SYMM_MEM_MAX_MIB} MiB" in doc
    assert f"1-{validate.MAX_TEXT} characters" in doc and f"lists at most {validate.MAX_ITEMS} items" in doc
    assert f"at most {validate.MAX_FILE_BYTES >> 20} MiB" in doc


def test_every_variable_the_code_reads_is_in_the_configuration_table():
    """A setting a user can set (test hooks included: SGLANG_ARCH_PAUSE_AT) is a row of
    docs/configuration.md's table, named as the code spells it."""
    read = set()
    for path in PACKAGE.rglob("*.py"):
        read |= set(re.findall(r'"(SGLANG_ARCH_[A-Z_]+)"', path.read_text(encoding="utf-8")))
    rows = set(re.findall(r"^\| `(SGLANG_ARCH_[A-Z_]+)` \|", (DOCS / "configuration.md").read_text(), re.M))
    assert read and read <= rows, sorted(read - rows)
