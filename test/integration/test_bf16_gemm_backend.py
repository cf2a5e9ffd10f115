"""The BF16 GEMM's auto pick: the plugin's hook against SGLang 0.5.23's own
``initialize_bf16_gemm_config`` (``srt/layers/quantization/unquant.py``).

SGLang turns ``--bf16-gemm-backend auto`` into ``cutedsl`` (``torch`` under deterministic
inference) where ``get_platform().is_sm100``, i.e. on any major-10 GPU.  Routed, that read
answers whether the registry's BF16 GEMM is SGLang's CuTe DSL kernel, which the catalog
builds for 10.0, 10.3 and 10.7 only.  Upstream's side runs under SGLang's own
``override_platform`` with the facts its probes compute for the GPU; the routed side is the
plugin's AROUND hook over the same function, with the registry routed to the capability and
the same facts.  The kernel module is a stand-in (its import needs CUDA): the test reads
which backend the function sets, not the kernel.  ``gemv`` is left out: its check reads
torch's device, not the platform.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import catalog, resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

PATH = "sglang.srt.layers.quantization.unquant.initialize_bf16_gemm_config"
UNKNOWN = ("10.5", "11.5", "12.3", "13.0")
CUDAS = ((12, 4), (12, 8), (12, 9), (13, 0))
BACKENDS = ("auto", "torch", "cutedsl")


@pytest.fixture(scope="module")
def sides():
    return upstream_and_hook(PATH)


@pytest.fixture
def unquant(monkeypatch):
    from sglang.srt.layers.quantization import unquant as module

    kernel = ModuleType("sglang.kernels.ops.gemm.cutedsl_bf16_gemm")
    kernel.cutedsl_bf16_gemm = kernel.use_cutedsl_bf16_gemm = object()
    monkeypatch.setitem(sys.modules, kernel.__name__, kernel)
    monkeypatch.setenv("SGLANG_ENABLE_BF16_SPLITK_GEMM", "false")
    monkeypatch.setattr(module, "_BF16_GEMM_BACKEND", None)
    return module


def _run(module, call, cap, cuda, backend, deterministic):
    """The backend ``call`` sets for this configuration (or the ValueError it raises)."""
    from sglang.srt.runtime_context import override_platform

    config = SimpleNamespace(kernel=SimpleNamespace(bf16_gemm_backend=backend),
                             deterministic=SimpleNamespace(enable_deterministic_inference=deterministic))
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(module, "get_exec", lambda: config)
        module._BF16_GEMM_BACKEND = None
        with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), cuda)):
            try:
                call()
            except ValueError as exc:
                return f"ValueError: {exc}"
        return module._BF16_GEMM_BACKEND.value
    finally:
        mp.undo()


def _cap(text):
    major, minor = text.split(".")
    return Capability(int(major), int(minor))


_machines = {}


def _both(sides, module, cap, cuda, backend, deterministic):
    own, hook = sides
    upstream = _run(module, own, cap, cuda, backend, deterministic)
    ctx = _machines.get((cap, cuda)) or _machines.setdefault((cap, cuda), runtime.machine(capability=cap, cuda=cuda))
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(glue, "current", lambda: ctx)
        routed = _run(module, lambda: hook(own), cap, cuda, backend, deterministic)
    finally:
        mp.undo()
    return upstream, routed


@pytest.mark.parametrize("tier", TIERS)
def test_on_every_exact_tier_the_hook_is_upstreams_function(sides, unquant, tier):
    assert resolve(tier).match == "exact"
    for cuda in CUDAS:
        for backend in BACKENDS:
            for deterministic in (False, True):
                upstream, routed = _both(sides, unquant, tier, cuda, backend, deterministic)
                assert routed == upstream, (tier, cuda, backend, deterministic)


def test_upstream_picks_cutedsl_on_every_major_10(sides, unquant):
    """The premise: SGLang's auto arm is the major, not the kernel's builds."""
    for cap in ("10.0", "10.5"):
        upstream, _ = _both(sides, unquant, cap, (13, 0), "auto", False)
        assert upstream == "cutedsl", cap


@pytest.mark.parametrize("cap", UNKNOWN)
def test_on_unknown_capabilities_cutedsl_only_where_the_catalog_builds_it(sides, unquant, cap):
    assert resolve(cap).match != "exact"
    runs = catalog.choice_runs("bf16_gemm", "cutedsl", _cap(cap), (13, 0)).runs
    for deterministic in (False, True):
        upstream, routed = _both(sides, unquant, cap, (13, 0), "auto", deterministic)
        assert not runs
        assert routed == "auto", (cap, deterministic)  # cuBLAS through torch, as upstream's non-SM100 arm
        if cap.startswith("10."):  # upstream's major-10 rule picks a kernel with no build for 10.5
            assert upstream == ("torch" if deterministic else "cutedsl")
        else:
            assert upstream == routed
        # an explicit backend stays SGLang's, checks included
        upstream, routed = _both(sides, unquant, cap, (13, 0), "cutedsl", deterministic)
        assert routed == upstream, (cap, deterministic)


def test_the_catalog_builds_are_the_kernels_mma_archs_within_sglangs_guard():
    """``sglang_cutedsl_bf16_gemm``'s targets: the archs CuTe DSL admits its tcgen05 BF16 MMA
    for, of major 10 (the kernel's runs raise unless ``is_sm100_supported``)."""
    from cutlass.cute.nvgpu.tcgen05.mma import MmaF16BF16Op

    spec = importlib.util.find_spec("sglang")
    source = (Path(spec.origin).parent / "kernels/ops/gemm/cutedsl_bf16_gemm.py").read_text()
    assert source.count("if not is_sm100_supported():") == 2
    assert "sm100_utils.make_trivial_tiled_mma(" in source
    admitted = {(a.major, a.minor) for a in MmaF16BF16Op.admissible_archs}
    kernel = catalog.CATALOG["sglang_cutedsl_bf16_gemm"]
    assert {(t.capability.major, t.capability.minor) for t in kernel.targets} == {
        arch for arch in admitted if arch[0] == 10}
    assert kernel.min_cuda == (12, 8)
