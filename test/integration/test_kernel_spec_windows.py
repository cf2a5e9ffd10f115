"""The kernel catalog against SGLang 0.5.23's own declarations, read from the installed
release at run time (never restated): a catalog entry naming a ``kernel_spec`` has the
window SGLang's ``KernelSpec`` / ``CapabilityRequirement`` declares for that op, on every
capability; and DeepGEMM's arch checks, read from its shared object, name the majors the
catalog gives it.  Where the two disagree on purpose, the disagreement is listed here and
in docs/differences.md (D12-D15 name the kernels)."""

import re
import sysconfig
from pathlib import Path

import pytest
from sglang_arch.arch import catalog
from sglang_arch.arch.capability import Capability

SPECS = sorted((k.name, k.kernel_spec) for k in catalog.CATALOG.values() if k.kernel_spec)


def _window(op):
    import sglang.kernels.ops.gemm  # noqa: F401  (registers the gemm specs)
    import sglang.kernels.ops.moe  # noqa: F401
    from sglang.kernels.registry import registry

    specs = registry.get(op)
    assert specs, f"SGLang 0.5.23 registers no KernelSpec for {op}"
    return [req for spec in specs for req in spec.capabilities if req.device.name == "CUDA"]


def _in_window(reqs, cap):
    for req in reqs:
        lo, hi = req.min_cuda_arch, req.max_cuda_arch
        if (lo is None or cap.as_tuple() >= tuple(lo)) and (hi is None or cap.as_tuple() <= tuple(hi)):
            return True
    return False


@pytest.mark.parametrize("name, op", SPECS)
def test_catalog_window_is_sglangs_kernel_spec(name, op):
    reqs = _window(op)
    kernel = catalog.CATALOG[name]
    for major in range(7, 16):
        for minor in range(10):
            cap = Capability(major, minor)
            assert kernel.runs_on(cap).runs == _in_window(reqs, cap), (name, op, str(cap))


def test_deep_gemm_arch_checks_are_the_catalogs_majors():
    so = Path(sysconfig.get_path("purelib")) / "deep_gemm" / "_C.so"
    text = so.read_bytes().decode("latin-1")
    majors = {int(m) for m in re.findall(r"arch_major == (\d+)", text)}
    assert majors == {9, 10, 12}  # no 11: DeepGEMM has no SM110 kernels (D14)
    catalog_majors = {t.capability.major for t in catalog.CATALOG["deep_gemm"].targets}
    assert catalog_majors == majors
    # MXFP8's 1x32 scale blocks (gran_k == 32) are accepted on arch 10 only
    assert "(arch_major == 10 and (gran_k == 32 or gran_k == 128)" in text
    assert {t.capability.major for t in catalog.CATALOG["deep_gemm_mxfp8"].targets} == {10}
