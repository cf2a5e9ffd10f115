"""plan.stand_in_if_missing: stand-ins for a kernel package a host cannot carry (used by the
runtime truth probe and the GPU benchmarks, where sgl_kernel is not installed)."""

import sys

import pytest
from sglang_arch.integrations.sglang.plan import stand_in_if_missing


@pytest.fixture
def meta_path(monkeypatch):
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    yield
    for name in [n for n in sys.modules if n == "absent_kernels" or n.startswith("absent_kernels.")]:
        del sys.modules[name]


def test_an_installed_package_is_left_alone(meta_path):
    before = list(sys.meta_path)
    assert stand_in_if_missing("json") is False
    assert sys.meta_path == before


def test_a_missing_package_imports_and_its_constants_read_at_import(meta_path):
    assert stand_in_if_missing("absent_kernels") is True
    from absent_kernels.scalar_type import (
        scalar_types,  # as SGLang's quantization utils do
    )

    assert scalar_types.uint4b8.__name__ == "absent_kernels.scalar_type.scalar_types.uint4b8"
    import absent_kernels

    assert not hasattr(absent_kernels, "__file__")  # dunder names are not stood in for
    with pytest.raises(RuntimeError, match=r"^absent_kernels.int8_scaled_mm is a stand-in "
                                           r"\(absent_kernels is not installed here\)$"):
        absent_kernels.int8_scaled_mm(1, 2)
