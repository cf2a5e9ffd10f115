"""What one SGLang tree decides for the series' concerns, over simulated GPUs: run it with
that tree first on ``PYTHONPATH`` (the installed release, or a tree patched by
``sglang-arch upstream``) and sglang-arch's plugin off.  Prints one JSON object
``{decision key: answer}``; test_upstream_series.py compares the patched tree's with the
release's, key by key.

Each GPU is seen the way SGLang's probes see one (torch's device queries and
``torch.version.cuda`` stand in for the device, every probe cache cleared), over every
tier SGLang names, unknown minors and majors beside them, and CUDA versions around the
12.3 and 12.8 floors.  The decisions: the default attention backend (the model domain of
upstream_oracle.py), the fusion backend for every request on one node and several, the
fusion auto-enable pass (Qwen3-MoE, TP 2 to 8, one node and two), the fusion kernel gate
of the residual add-norm (its module re-run per GPU), the custom all-reduce v2 table,
and the torch symmetric-memory communicator (disabled or not, size, multimem or two-shot)
at world sizes 2 to 8 with and without multicast.
"""

from __future__ import annotations

import importlib
import itertools
import json
import logging
import os
import sys
from types import SimpleNamespace
from unittest import mock

from upstream_oracle import FUSION_REQUESTS, MODELS, call, device, model_config, model_key, server_args

CAPABILITIES = [(6, 1), (7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (9, 5), (10, 0), (10, 3), (10, 5), (10, 7),
                (10, 9), (11, 0), (11, 5), (12, 0), (12, 1), (12, 5), (13, 0)]
CUDAS = [(12, 2), (12, 4), (12, 9), (13, 0)]


def main() -> int:
    logging.disable(logging.CRITICAL)
    import torch
    from sglang.srt.arg_groups import model_override_base, overrides
    from sglang.srt.distributed.device_communicators import torch_symm_mem
    from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2 as car
    from sglang.srt.layers import flashinfer_comm_fusion
    from sglang.srt.layers.layer_boundary.residual import add_norm
    from sglang.srt.runtime_context import override_platform

    tables = {name: getattr(car, f"_{name}_configs")(132) for name in ("sm90", "sm100", "sm107")}

    def symm_mem(world_size, multicast):
        handle = SimpleNamespace(multicast_ptr=multicast)
        fake = mock.MagicMock()
        fake.rendezvous.return_value = handle
        envs = mock.MagicMock()
        envs.SGLANG_OPT_USE_INKLING_CUSTOM_AR.get.return_value = False
        def gather(ranks, _obj, group=None):  # one node, every peer reachable (the series checks before rendezvous)
            ranks[:] = [(i, [True] * world_size) for i in range(world_size)]

        with mock.patch.object(torch_symm_mem, "torch_symm_mem_available", True), \
                mock.patch.object(torch_symm_mem, "torch_symm_mem", fake, create=True), \
                mock.patch.object(torch_symm_mem, "envs", envs), \
                mock.patch.object(torch.cuda, "set_device"), \
                mock.patch.object(torch.cuda, "device_count", return_value=world_size), \
                mock.patch.object(torch.cuda, "can_device_access_peer", return_value=True), \
                mock.patch("torch.distributed.all_gather_object", gather), \
                mock.patch("sglang.srt.distributed.parallel_state.in_the_same_node_as",
                           lambda group, source_rank=0: [True] * world_size), \
                mock.patch("torch.distributed.get_world_size", return_value=world_size):
            comm = torch_symm_mem.TorchSymmMemCommunicator(SimpleNamespace(group_name="tp"), 0)
        if comm.disabled:
            return "disabled"
        multimem = getattr(comm, "use_multimem", None)
        if multimem is None:  # SGLang's own pick, made per call
            multimem = comm.world_size in comm._WORLD_SIZES_MULTIMEM.get(comm.device_capability, ())
        return [comm.max_size, "multimem" if multimem else "two_shot"]

    def auto_enable(tp, nnodes):
        model = SimpleNamespace(hf_config=SimpleNamespace(architectures=["Qwen3MoeForCausalLM"],
                                                          model_type="qwen3_moe", hidden_size=2048))
        view = SimpleNamespace(flashinfer_allreduce_fusion_backend=None, tp_size=tp, nnodes=nnodes,
                               moe_a2a_backend="none", disable_custom_all_reduce=False, attn_dp_size=1, dp_size=1,
                               attn_cp_size=1, ep_join_mode=None, encoder_only=False, enable_pdmux=False,
                               enable_dp_attention=False, _model_config=model, model_path="/series/qwen3-moe")
        return call(overrides._flashinfer_allreduce_fusion_auto_enable, view)

    out = {}
    for cap, cuda in itertools.product(CAPABILITIES, CUDAS):
        key = f"{cap[0]}.{cap[1]}|{cuda[0]}.{cuda[1]}"
        with device(cap, cuda):
            for m, has_flashinfer in itertools.product(MODELS, (False, True)):
                mla, topk, page, asym, sinks, whisper = m
                with override_platform(has_flashinfer=has_flashinfer):
                    out[f"attention|{key}|{model_key(m)}|{has_flashinfer}"] = call(
                        model_override_base.get_default_attn_backend, server_args(topk, page), mla,
                        model_config(asym, sinks, whisper))
            for req, multi in itertools.product(FUSION_REQUESTS, (False, True)):
                out[f"fusion|{key}|{req}|{multi}"] = call(flashinfer_comm_fusion._resolve_backend, req, multi)
            for tp, nnodes in itertools.product((2, 4, 8), (1, 2)):
                out[f"fusion_auto_enable|{key}|{tp}|{nnodes}"] = auto_enable(tp, nnodes)
            importlib.reload(add_norm)  # its flags are computed at import
            out[f"fusion_gate|{key}"] = bool(add_norm._is_cuda and _gate(add_norm))
            car._get_all_reduce_configs.cache_clear()
            got = car._get_all_reduce_configs()
            out[f"custom_ar_v2|{key}"] = next((n for n, t in tables.items() if t == got), "default")
            for world_size, multicast in itertools.product(range(2, 9), (0, 1)):
                out[f"symm_mem|{key}|{world_size}|{multicast}"] = symm_mem(world_size, multicast)
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


def _gate(add_norm) -> bool:
    """The capability part of ``flashinfer_ar_fusion_applies``: the module-level flag(s) it reads."""
    if hasattr(add_norm, "_has_allreduce_fusion"):
        return add_norm._has_allreduce_fusion
    return add_norm._is_sm90_supported or add_norm._is_sm100_supported


if __name__ == "__main__":
    if os.environ.get("SGLANG_ARCH_DISABLE") != "1":
        sys.exit("series_oracle: run with SGLANG_ARCH_DISABLE=1")
    sys.exit(main())
