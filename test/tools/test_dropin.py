"""The registry core can move to sglang/srt/arch/ unchanged: only relative imports of
itself, the standard library, and nothing heavy at module level."""

import ast
import subprocess
import sys
from pathlib import Path

ARCH = Path(__file__).resolve().parents[2] / "python" / "sglang_arch" / "arch"
STDLIB = set(sys.stdlib_module_names) | {"__future__"}


def _module_level_imports(tree):
    """Imports executed when the module is imported (not those inside functions)."""
    for node in tree.body:
        for sub in ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ():
            if isinstance(sub, (ast.Import, ast.ImportFrom)):
                yield sub


def test_only_relative_and_stdlib_imports():
    offenders = []
    for path in sorted(ARCH.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = name.split(".")[0]
                if top not in STDLIB and top not in ("torch", "pynvml"):
                    offenders.append(f"{path.name}: {name}")
    assert not offenders, offenders


def test_torch_and_nvml_only_inside_functions():
    for path in sorted(ARCH.rglob("*.py")):
        for node in _module_level_imports(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            assert not any(n.split(".")[0] in ("torch", "pynvml") for n in names), path


def test_importing_the_registry_and_the_cli_loads_nothing_heavy():
    code = ("import sys, sglang_arch.arch, sglang_arch.cli; sglang_arch.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'sglang', 'pynvml') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
