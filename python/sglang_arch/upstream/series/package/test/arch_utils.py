"""Simulated GPUs for the tests of ``sglang.srt.arch``."""

from sglang.srt.runtime_context import override_platform


def simulate_gpu(capability, cuda=True):
    """SGLang's platform context for a CUDA GPU of ``capability`` (off CUDA with
    ``cuda=False``) whose toolkit meets every CUDA floor."""
    major = capability[0]
    return override_platform(
        is_cuda=cuda,
        device_capability=capability,
        is_sm90=cuda and major == 9,
        is_sm100=cuda and major == 10,
        is_sm120=cuda and major == 12,
    )
