"""SGLang 0.5.23 alone, in a process of its own: what its own code answers.

The upstream side of the equivalence properties (test_equivalence_properties.py) and of
test_sources_upstream.py.  It shares no process, cache or environment with the routed
side: it runs with ``SGLANG_ARCH_DISABLE=1`` and no other ``SGLANG_ARCH_*`` variable,
imports nothing of sglang-arch's plugin, refuses to run if any function it calls was
wrapped, and gets each GPU the way SGLang's probes see one: torch's device queries and
``torch.version.cuda`` stand in for the device (there is none on a CPU machine), every
probe cache is cleared, and SGLang's own ``get_platform()`` answers.  Nothing is given to
SGLang through ``override_platform`` but ``has_flashinfer`` (an input of the property)
and that this is a CUDA machine that is not ROCm/NPU/XPU/MUSA/MPS.

Prints one JSON object: the platform facts, default attention backends and fusion
backends over the whole finite input domain of the properties, and SGLang's tables that
test/unit/test_sources.py writes down as data.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import sys
from types import SimpleNamespace

# The whole finite domain of the equivalence properties (test_equivalence_properties.py):
# the tiers SGLang 0.5.23 decides for (docs/differences.md "where upstream decides"),
# torch CUDA versions around every minimum and every SGLang fact rule (12.3, 12.8), and for
# the identity facts every tier, its neighbours, unknown majors on either side.
KNOWN = ["7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1"]
CUDAS = [(11, 8), (12, 0), (12, 2), (12, 3), (12, 4), (12, 7), (12, 8), (12, 9), (13, 0), (13, 1)]
FACT_CAPS = sorted({(ma, mi) for ma in range(5, 15) for mi in range(10)} | {(0, 0), (20, 0), (99, 9)})
DOMAIN = {"fact_capabilities": FACT_CAPS, "capabilities": [tuple(int(x) for x in c.split(".")) for c in KNOWN],
          "cudas": CUDAS}

FACTS = ["is_sm90", "is_sm100", "is_sm100_or_sm110", "is_sm110", "is_sm120", "is_blackwell",
         "is_hopper_with_cuda_12_3", "device_capability", "device_sm"]
NOT_CUDA_ALIKE = {"is_hip": False, "is_npu": False, "is_xpu": False, "is_musa": False, "is_mps": False}
FUSION_REQUESTS = ["auto", "trtllm", "mnnvl", "cutedsl"]
# (MLA, speculative top-k or None, page size, asymmetric K/V, attention sinks, Whisper)
MODELS = list(itertools.product([False, True], [None, 1, 2, 4], [1, 16], [False, True], [False, True],
                                [False, True]))


def model_key(m) -> str:
    return ",".join(str(x) for x in m)


def server_args(topk, page):
    return SimpleNamespace(speculative_algorithm="EAGLE" if topk else None, speculative_eagle_topk=topk,
                           page_size=page, tp_size=1)


def model_config(asym, sinks, whisper):
    arch = ["WhisperForConditionalGeneration"] if whisper else ["LlamaForCausalLM"]
    return SimpleNamespace(hf_config=SimpleNamespace(architectures=arch), has_asymmetric_kv=asym,
                           has_attention_sinks=sinks)


def call(fn, *args):
    try:
        return fn(*args)
    except ValueError:
        return "ValueError"


@contextlib.contextmanager
def device(cap, cuda, num_sms=132):
    """A CUDA GPU of capability ``cap`` under torch CUDA ``cuda``, the way SGLang's probes see
    one: torch's device queries answer for it and every probe cache is cleared around it."""
    from unittest import mock

    import torch
    from sglang.srt.runtime_context import _PLATFORM_PROBES, _PLATFORM_VALUES, override_platform
    from sglang.srt.utils import common

    probes = [getattr(common, n) for n in list(_PLATFORM_PROBES.values()) + list(_PLATFORM_VALUES.values())]
    props = SimpleNamespace(multi_processor_count=num_sms)
    with mock.patch.object(torch.cuda, "is_available", lambda: True), \
            mock.patch.object(torch.cuda, "is_initialized", lambda: True), \
            mock.patch.object(torch.cuda, "get_device_capability", lambda *a, **k: tuple(cap)), \
            mock.patch.object(torch.cuda, "get_device_properties", lambda *a, **k: props), \
            mock.patch.object(torch.version, "cuda", f"{cuda[0]}.{cuda[1]}"):
        # is_initialized: so that get_device_sm asks torch, not NVML
        for fn in probes + [common.is_cuda]:
            getattr(fn, "cache_clear", lambda: None)()
        try:
            with override_platform(**NOT_CUDA_ALIKE):
                yield
        finally:
            for fn in probes + [common.is_cuda]:
                getattr(fn, "cache_clear", lambda: None)()


def main() -> int:
    if os.environ.get("SGLANG_ARCH_DISABLE") != "1" or [k for k in os.environ if k.startswith("SGLANG_ARCH_")
                                                        and k != "SGLANG_ARCH_DISABLE"]:
        sys.exit("upstream_oracle: run with SGLANG_ARCH_DISABLE=1 and no other SGLANG_ARCH_* variable")
    spec = json.loads(sys.argv[1])
    logging.disable(logging.CRITICAL)
    from sglang.srt.arg_groups import model_override_base
    from sglang.srt.distributed.device_communicators import (
        all_reduce_utils,
        torch_symm_mem,
    )
    from sglang.srt.distributed.device_communicators.configs import (
        custom_all_reduce_v2 as car,
    )
    from sglang.srt.layers import flashinfer_comm_fusion
    from sglang.srt.runtime_context import (
        _PLATFORM_PROBES,
        _PLATFORM_VALUES,
        get_platform,
        override_platform,
    )
    from sglang.srt.utils import common

    attn, fusion = model_override_base.get_default_attn_backend, flashinfer_comm_fusion._resolve_backend
    probes = [getattr(common, name) for name in list(_PLATFORM_PROBES.values()) + list(_PLATFORM_VALUES.values())]
    for fn in [attn, fusion] + probes:
        if hasattr(fn, "__wrapped__") and "sglang_arch" in repr(getattr(fn, "__wrapped__")):
            sys.exit(f"upstream_oracle: {fn} is wrapped by sglang-arch")
        if "sglang_arch" in getattr(fn, "__module__", ""):
            sys.exit(f"upstream_oracle: {fn} comes from sglang-arch")
    # The early router reads the kill switch (``switches``: the environment, nothing else)
    # at SGLang's first import; no other module of the plugin or the registry may load.
    switch = {"sglang_arch.integrations", "sglang_arch.integrations.sglang", "sglang_arch.integrations.sglang.switches"}
    loaded = [m for m in sys.modules if (m.startswith("sglang_arch.integrations") or m.startswith("sglang_arch.arch"))
              and m not in switch]
    if loaded:
        sys.exit(f"upstream_oracle: sglang-arch's plugin or registry is loaded: {loaded[:5]}")


    out = {"facts": {}, "attention": {}, "fusion": {}}
    for cap, cuda in itertools.product(spec["fact_capabilities"], spec["cudas"]):
        with device(cap, cuda):
            p = get_platform()
            out["facts"][f"{cap[0]}.{cap[1]}|{cuda[0]}.{cuda[1]}"] = {
                n: list(v) if isinstance(v, tuple) else v for n, v in ((n, getattr(p, n)) for n in FACTS)}
    for cap, cuda in itertools.product(spec["capabilities"], spec["cudas"]):
        key = f"{cap[0]}.{cap[1]}|{cuda[0]}.{cuda[1]}"
        with device(cap, cuda):
            for m, has_flashinfer in itertools.product(MODELS, (False, True)):
                mla, topk, page, asym, sinks, whisper = m
                with override_platform(has_flashinfer=has_flashinfer):
                    out["attention"][f"{key}|{model_key(m)}|{has_flashinfer}"] = call(
                        attn, server_args(topk, page), mla, model_config(asym, sinks, whisper))
            for req, multi in itertools.product(FUSION_REQUESTS, (False, True)):
                out["fusion"][f"{key}|{req}|{multi}"] = call(fusion, req, multi)

    fact_rules = {}
    for fact, helper in _PLATFORM_PROBES.items():
        keywords = getattr(getattr(getattr(common, helper), "__wrapped__", None), "keywords", None)
        if keywords and "device_capability_majors" in keywords:
            fact_rules[fact] = [list(keywords["device_capability_majors"]), list(keywords["cuda_version"])]
    from sglang.srt.environ import envs

    out["tables"] = {
        "fact_rules": fact_rules,
        "symm_mem_max_sizes": {str(k): {str(w): b for w, b in v.items()}
                               for k, v in all_reduce_utils.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES.items()},
        "multimem_world_sizes": {str(k): list(v)
                                 for k, v in torch_symm_mem.TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM.items()},
        "custom_ar_world_sizes": {"sm90": sorted(car._sm90_configs(132)), "sm100": sorted(car._sm100_configs(148)),
                                  "sm107": sorted(car._sm107_configs(148))},
        "custom_ar_max_bytes": envs.SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB.get() * 1024,
    }
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
