"""A simulated CUDA GPU for unit tests: every platform fact of one device."""

from sglang.srt.runtime_context import (
    _PLATFORM_PROBES,
    _PLATFORM_VALUES,
    override_platform,
)


def simulate_cuda_gpu(capability, cuda=(12, 9), has_flashinfer=True):
    """``override_platform`` for a CUDA GPU of ``capability`` whose torch is
    built with CUDA ``cuda``: no fact is left to the real device."""
    major, minor = capability

    def targets(majors, floor):
        return major in majors and tuple(cuda) >= floor

    facts = dict(
        is_cuda=True,
        is_hip=False,
        is_npu=False,
        is_xpu=False,
        is_musa=False,
        is_mps=False,
        is_sm90=targets((9,), (12, 3)),
        is_hopper_with_cuda_12_3=targets((9,), (12, 3)),
        is_sm100=targets((10,), (12, 8)),
        is_sm100_or_sm110=targets((10, 11), (12, 8)),
        is_sm110=targets((11,), (12, 8)),
        is_sm120=targets((12,), (12, 8)),
        is_blackwell=targets((10, 11, 12), (12, 8)),
        has_amx=False,
        has_flashinfer=has_flashinfer,
        device_sm=major * 10 + minor,
        device_capability=(major, minor),
    )
    known = set(_PLATFORM_PROBES) | set(_PLATFORM_VALUES)
    missing = set(known) - set(facts)
    assert (
        not missing
    ), f"platform facts simulate_cuda_gpu does not set: {sorted(missing)}"
    return override_platform(**{k: v for k, v in facts.items() if k in known})
