"""SGLang's testing contract for simulated GPUs, asked of whichever SGLang is on the path.

SGLang's unit tests simulate a GPU with ``override_platform(is_sm90=..., is_sm100=...)``
(``srt/runtime_context.py``) and expect its decision functions to answer for that GPU.
This script asks the routed decisions under the overrides those tests use and prints
one JSON line: ``{"sglang": <file>, "registry": <module or null>, "answers": {...}}``.

Run it with the installed SGLang alone (``SGLANG_ARCH_DISABLE=1``), through the plugin,
and on a tree patched by ``sglang-arch upstream``; ``test_upstream_series.py`` checks
that the three print the same answers, and that those are SGLang 0.5.23's (``EXPECTED``
there).  A host without a GPU is the case that matters (SGLang's CPU CI): set
``CUDA_VISIBLE_DEVICES=""``.
"""

import json
import sys
from types import SimpleNamespace

import sglang
from sglang.srt.arg_groups import overrides
from sglang.srt.layers import flashinfer_comm_fusion as fusion
from sglang.srt.runtime_context import override_platform

# The platforms SGLang's tests describe: Blackwell, Hopper, and neither (before SM90 or
# after SM10x; the tests expect both to fail closed).
PLATFORMS = {
    "sm100": {"is_sm100": True},
    "sm90": {"is_sm100": False, "is_sm90": True},
    "neither": {"is_sm100": False, "is_sm90": False},
}
RESOLVE = [
    (backend, multi_node)
    for backend in ("auto", "trtllm", "mnnvl")
    for multi_node in (False, True)
]


def resolve(backend, multi_node):
    try:
        return fusion._resolve_backend(backend, multi_node)
    except ValueError:
        return "ValueError"


def view(**settings):
    """What the auto-enable pass reads, for a model it auto-enables fusion for."""
    fields = dict(
        flashinfer_allreduce_fusion_backend=None,
        tp_size=2,
        attn_dp_size=1,
        ep_join_mode=None,
        nnodes=1,
        moe_a2a_backend="none",
        enforce_disable_flashinfer_allreduce_fusion=False,
        enable_deterministic_inference=False,
    )
    fields.update(settings)
    hf = SimpleNamespace(architectures=["Qwen3MoeForCausalLM"])
    return overrides.ResolvedView(
        SimpleNamespace(_model_config=SimpleNamespace(hf_config=hf), **fields)
    )


def main():
    answers = {}
    for name, facts in PLATFORMS.items():
        with override_platform(**facts):
            answers[name] = {
                "resolve": {
                    f"{backend}/{'multi' if multi else 'single'}": resolve(backend, multi)
                    for backend, multi in RESOLVE
                },
                "auto_enable": {
                    "one node": overrides._flashinfer_allreduce_fusion_auto_enable(view()),
                    "two nodes": overrides._flashinfer_allreduce_fusion_auto_enable(
                        view(nnodes=2)
                    ),
                    "tp 1": overrides._flashinfer_allreduce_fusion_auto_enable(view(tp_size=1)),
                },
            }
    registry = sys.modules.get("sglang.srt.arch") or sys.modules.get("sglang_arch.arch")
    print(json.dumps({"sglang": sglang.__file__, "registry": registry and registry.__name__,
                      "answers": answers}, sort_keys=True))


if __name__ == "__main__":
    main()
