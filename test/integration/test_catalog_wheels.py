"""The kernel catalog against the installed packages: a catalog fact read from a binary or
from the code that generates a kernel is checked here against that binary or code.

- ``binary``: ``cuobjdump --list-elf`` / ``--list-ptx`` (the ``nvidia-cuda-cuobjdump``
  wheel, a test dependency) on the file the wheel installed; the SASS and PTX targets of
  every kernel naming that file, together, equal what the file ships.
- ``declared_in: "pkg/file.py:generator"``: the ``supported_major_versions`` that FlashInfer's
  generator passes to its nvcc flags equal the catalog's ``jit:X.x`` majors.
- ``declared_in: "cutlass-dsl"``: every ``jit:X.Y`` target is one CuTe DSL compiles for.
"""

import ast
import subprocess
import sysconfig
from collections import defaultdict
from pathlib import Path

import pytest
from sglang_arch.arch import catalog

SITE = Path(sysconfig.get_path("purelib"))


def _cuobjdump() -> Path:
    import nvidia

    for root in nvidia.__path__:
        for found in sorted(Path(root).glob("cu*/bin/cuobjdump")):
            return found
    pytest.fail("cuobjdump not found: the test extra installs nvidia-cuda-cuobjdump (scripts/setup)")


def _listed(tool: Path, flag: str, binary: Path) -> set:
    out = subprocess.run([str(tool), flag, str(binary)], capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    if out.returncode != 0 and "does not contain" not in text:
        pytest.fail(f"cuobjdump {flag} {binary}: exit {out.returncode}: {text[-300:]}")
    names = set()
    for line in text.splitlines():
        for word in line.replace(".", " ").split():
            if word.startswith("sm_") and word[3:4].isdigit():
                names.add(word)
    return names


BINARIES = defaultdict(list)
for _kernel in catalog.CATALOG.values():
    if _kernel.binary:
        BINARIES[_kernel.binary].append(_kernel)


@pytest.mark.parametrize("binary", sorted(BINARIES))
def test_binary_targets_are_what_the_wheel_ships(binary):
    path = SITE / binary
    assert path.is_file(), f"{binary} is not installed (sglang==0.5.23's wheels install it)"
    tool = _cuobjdump()
    sass = {t.text for k in BINARIES[binary] for t in k.targets if t.kind in ("arch", "family", "sass")}
    ptx = {"sm_" + t.text.split("_", 1)[1] for k in BINARIES[binary] for t in k.targets if t.kind == "ptx"}
    assert _listed(tool, "--list-elf", path) == sass
    assert _listed(tool, "--list-ptx", path) == ptx


def _majors_declared(file: Path, function: str) -> list:
    tree = ast.parse(file.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for call in ast.walk(node):
                for kw in getattr(call, "keywords", ()):
                    if kw.arg == "supported_major_versions":
                        return sorted(ast.literal_eval(kw.value))
    pytest.fail(f"{file}:{function} declares no supported_major_versions")


DECLARED = sorted((k.name, k.declared_in) for k in catalog.CATALOG.values() if k.declared_in)


@pytest.mark.parametrize("name, declared_in", DECLARED)
def test_jit_targets_are_what_the_generator_declares(name, declared_in):
    kernel = catalog.CATALOG[name]
    if declared_in == "cutlass-dsl":
        from cutlass.base_dsl.enums import Arch

        cute = {(a.major, a.minor) for a in Arch}
        exact = [t for t in kernel.targets if t.kind == "jit_exact"]
        assert exact and len(exact) == len(kernel.targets)
        assert {t.capability.as_tuple() for t in exact} <= cute
        return
    file, function = declared_in.split(":")
    majors = _majors_declared(SITE / file, function)
    assert all(t.kind == "jit_major" for t in kernel.targets)
    assert sorted(t.capability.major for t in kernel.targets) == majors


def test_a_planted_difference_is_seen(tmp_path):
    """The comparison can fail: a generator declaring other majors than the catalog's."""
    planted = tmp_path / "gen.py"
    planted.write_text("def gen():\n    f(supported_major_versions=[9, 11])\n")
    assert _majors_declared(planted, "gen") == [9, 11] != [9, 10, 12]


def _capabilities_decorated(file: Path, function: str) -> list:
    """The compute capabilities of ``@supported_compute_capability([...])`` on ``function``."""
    tree = ast.parse(file.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "supported_compute_capability":
                    return sorted(ast.literal_eval(deco.args[0]))
    pytest.fail(f"{file}:{function} has no @supported_compute_capability")


def test_cutedsl_mxfp8_gemm_targets_are_flashinfers_supported_capabilities():
    """``--fp8-gemm-backend flashinfer_cutedsl`` runs FlashInfer's ``mm_mxfp8`` with the
    ``cute-dsl`` backend (sglang 0.5.23 fp8_utils.dispatch_block_fp8_mxfp8_linear), which
    FlashInfer declares for the capabilities its requirement function lists."""
    declared = _capabilities_decorated(SITE / "flashinfer/gemm/gemm_base.py", "_cute_dsl_gemm_mxfp8_requirement")
    kernel = catalog.CATALOG["flashinfer_cutedsl_gemm_mxfp8"]
    assert all(t.kind == "jit_exact" for t in kernel.targets)
    assert sorted(t.capability.major * 10 + t.capability.minor for t in kernel.targets) == declared


# --- one kernel inside a binary: which of the file's builds carry its code ---------------------
#
# A binary's SASS list says which GPUs load the file, not which of its kernels have code for
# each: FlashMLA's legacy file ships sm_90a for its Hopper kernels, and its sm_90a build of
# MegaAttention is a stub (compiled out by the kernel's own arch guard: 768 bytes, 24
# registers, no shared memory).  A kernel named here is checked in each file that holds it:
# the builds where its code uses shared memory (the real kernel's tiles) are its catalog
# targets.
KERNEL_SYMBOLS = {
    # catalog kernel: (mangled-name fragment of its kernel, the files that hold it)
    "flashmla_mega": ("fused_norm_rope_attn_rope_cast_fwd9core_attn",
                      ("flash_mla/cuda.abi3.so", "flash_mla/_C_legacy.abi3.so")),
}


def _builds_with_code(tool: Path, binary: Path, fragment: str) -> dict:
    """arch -> whether any function whose name holds ``fragment`` uses shared memory there
    (``cuobjdump --dump-resource-usage``)."""
    out = subprocess.run([str(tool), "--dump-resource-usage", str(binary)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-300:]
    builds, arch, function = {}, None, None
    for line in out.stdout.splitlines():
        words = line.split()
        if line.startswith("arch = "):
            arch = words[-1]
        elif line.strip().startswith("Function "):
            function = line
        elif function is not None and "SHARED:" in line:
            if fragment in function:
                shared = int(line.split("SHARED:")[1].split()[0])
                builds[arch] = builds.get(arch, False) or shared > 0
            function = None
    return builds


@pytest.mark.parametrize("name", sorted(KERNEL_SYMBOLS))
def test_a_kernel_has_code_exactly_on_its_catalog_targets(name):
    fragment, binaries = KERNEL_SYMBOLS[name]
    kernel = catalog.CATALOG[name]
    assert kernel.binary in binaries
    targets = {t.text for t in kernel.targets}
    assert all(t.kind == "arch" for t in kernel.targets)
    tool = _cuobjdump()
    for binary in binaries:
        builds = _builds_with_code(tool, SITE / binary, fragment)
        assert builds, f"{binary} holds no function named like {fragment}"
        assert {arch for arch, code in builds.items() if code} == targets, (binary, builds)


def test_a_stub_build_is_not_counted(tmp_path):
    """The parser counts a build only where the kernel uses shared memory."""
    planted = ("arch = sm_90a\n Function _Zfused_norm_rope_attn_rope_cast_fwd9core_attnX:\n"
               " REG:24 STACK:0 SHARED:0 LOCAL:0\narch = sm_100a\n Function _Zfused_norm_rope_attn_rope_cast_fwd9"
               "core_attnX:\n REG:128 STACK:0 SHARED:1024 LOCAL:0\n")
    tool = tmp_path / "cuobjdump"
    tool.write_text(f"#!/bin/sh\ncat <<'END'\n{planted}END\n")
    tool.chmod(0o755)
    assert _builds_with_code(tool, tmp_path / "x.so", "fused_norm_rope_attn_rope_cast_fwd9core_attn") == {
        "sm_90a": False, "sm_100a": True}
