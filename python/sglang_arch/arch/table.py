"""The architecture table: every GPU tier the registry knows, as data.

One entry per compute capability.  ``inherits`` names a sibling whose fields are taken
first (10.3 from 10.0, 12.1 from 12.0, as NVIDIA CCCL's per-arch traits do), so an
entry lists only what differs.  Adding a GPU is an entry here plus a test; no code.

Field reference (the same schema is accepted in override files, see ``overrides.py``):

- ``name``, ``examples``: what people call it.
- ``smem_per_sm_kib`` / ``smem_per_block_kib``: shared memory per SM and the opt-in
  maximum per block, in KiB.
- ``features``: feature -> scope.  ``portable`` survives any fallback, ``family`` only a
  fallback inside the same major (the ``f`` compile targets), ``arch`` only an exact
  match (the ``a`` targets, e.g. wgmma on sm_90a).
- ``topology``: the interconnect such a machine usually has when none is given.
- ``min_cuda`` / ``min_cuda_arch_specific`` / ``min_cuda_family`` / ``max_cuda``: the
  toolkit range for ``sm_XY``, ``sm_XYa`` and ``sm_XYf`` targets.
- ``torch_symm_mem``: world size -> max all-reduce bytes in MiB (torch symmetric
  memory) where the node has NVLink multicast (SGLang's own table, which turns the
  communicator off without multicast), and ``symm_mem_multimem_world_sizes``: where
  multimem is preferred.
- ``symm_mem_two_shot``: world size -> max bytes for torch's two-shot kernel where the
  node has no multicast (peer-to-peer access only): bounds of their own, each measured on
  the tier (``evidence``); absent: off without multicast, as stock SGLang.
- ``pcie_ipc_world_sizes``: the TP sizes at which SGLang's FlashInfer PCIe-IPC all-reduce
  (opt-in upstream, ``SGLANG_ENABLE_PCIE_IPC_ALLREDUCE``) is turned on by default, one node
  over PCIe with peer-to-peer access, with SGLang's decode-sized workspace: where it was
  measured to win on the tier.
- ``custom_ar_v2_table``: which tuned table of SGLang's JIT custom all-reduce applies
  (``None``: its conservative default), ``custom_ar_v2_world_sizes`` the sizes it lists.
- ``allreduce_fusion``: the FlashInfer all-reduce fusion backends that run here, the
  one ``auto`` picks first; ``allreduce_fusion_multi_node``: those that span nodes;
  ``allreduce_fusion_min_cuda``: the torch CUDA version its kernels need;
  ``allreduce_fusion_auto_world_sizes``: the world sizes where fusion is turned on
  without being asked (absent: wherever it runs, SGLang's rule on SM90 / SM100; a list:
  those measured to win, from ``sglang-arch tune fusion`` on the node).
- ``attention_mha`` / ``attention_mla``: preferred attention backends, best first;
  the policy appends the portable tail and skips what fails its validity check.
- ``evidence``: field -> the ids of the evidence ledger (``evidence.py``) that carry the
  field's value where it makes a decision differ from stock SGLang.
- ``lead``: fields whose value has only one source so far.
- ``sources``: where the values come from.
"""

from __future__ import annotations

from typing import Any, Dict

_CUDA_GUIDE = "CUDA C++ Programming Guide, compute capabilities table"
_CCCL = "NVIDIA CCCL libcudacxx/include/cuda/__device/arch_traits.h"
_SGLANG = "sglang 0.5.23: srt/distributed/device_communicators/{all_reduce_utils,torch_symm_mem}.py"
_SGLANG_CAR = "sglang 0.5.23: srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
_SGLANG_FUSION = "sglang 0.5.23: srt/layers/flashinfer_comm_fusion.py _resolve_backend"
_SGLANG_ATTN = "sglang 0.5.23: srt/arg_groups/model_override_base.py get_default_attn_backend"
_SGLANG_PCIE_IPC = "sglang 0.5.23: srt/distributed/device_communicators/pcie_ipc_ar.py (sgl-project/sglang#34528)"
_CUDA_NOTES = "CUDA 12.8 / 12.9 / 13.0 release notes (sm_100/120; sm_103/121 and f targets; sm_110)"

# Sizes in MiB; the policy turns them into bytes.
_SYMM_MEM_UPSTREAM = {2: 64, 4: 64, 6: 128, 8: 128}

ARCHITECTURES: Dict[str, Dict[str, Any]] = {
    "7.0": {
        "name": "Volta",
        "examples": ["V100"],
        "smem_per_sm_kib": 96,
        "smem_per_block_kib": 96,
        "features": {},
        "topology": "nvlink",
        "min_cuda": "9.0",
        "max_cuda": "12.9",
        "attention_mha": [],
        "attention_mla": [],
        "sources": [_CUDA_GUIDE, "CUDA 13.0 release notes: offline compilation for sm_70 removed"],
    },
    "7.5": {
        "inherits": "7.0",
        "name": "Turing",
        "examples": ["T4", "RTX 2080"],
        "smem_per_sm_kib": 64,
        "smem_per_block_kib": 64,
        "topology": "pcie",
        "min_cuda": "10.0",
        "max_cuda": None,
        "sources": [_CUDA_GUIDE],
    },
    "8.0": {
        "inherits": "7.5",
        "name": "Ampere",
        "examples": ["A100"],
        "smem_per_sm_kib": 164,
        "smem_per_block_kib": 163,
        "topology": "nvlink",
        "min_cuda": "11.0",
        "sources": [_CUDA_GUIDE, "NVIDIA A100 datasheet: NVLink3 + NVSwitch, no multicast"],
    },
    "8.6": {
        "inherits": "8.0",
        "examples": ["A10", "RTX 3090"],
        "smem_per_sm_kib": 100,
        "smem_per_block_kib": 99,
        "topology": "pcie",
        "min_cuda": "11.1",
        "sources": [_CUDA_GUIDE],
    },
    "8.7": {
        "inherits": "8.0",
        "name": "Ampere (Jetson)",
        "examples": ["Jetson AGX Orin"],
        "topology": "single",
        "min_cuda": "11.4",
        "lead": ["smem_per_sm_kib", "smem_per_block_kib"],
        "sources": [_CUDA_GUIDE],
    },
    "8.9": {
        "inherits": "8.6",
        "name": "Ada Lovelace",
        "examples": ["L4", "L40S", "RTX 4090"],
        "features": {"fp8": "portable"},
        "min_cuda": "11.8",
        "sources": [_CUDA_GUIDE, "ARCH-FACTS: GeForce Ada often without P2P"],
    },
    "9.0": {
        "name": "Hopper",
        "examples": ["H100", "H200", "GH200"],
        "smem_per_sm_kib": 228,
        "smem_per_block_kib": 227,
        "features": {"tma": "portable", "wgmma": "arch", "fp8": "portable"},
        "topology": "nvswitch",
        "min_cuda": "11.8",
        "min_cuda_arch_specific": "12.0",
        "max_cuda": None,
        "torch_symm_mem": _SYMM_MEM_UPSTREAM,
        "symm_mem_multimem_world_sizes": [4, 6, 8],
        # Without multicast, below 16 MiB at world size 2 (2x H200, NVLink, multicast off).
        "symm_mem_two_shot": {2: 16},
        "custom_ar_v2_table": "sm90",
        "custom_ar_v2_world_sizes": [2, 3, 4, 5, 6, 7, 8],
        "allreduce_fusion": ["trtllm", "mnnvl"],
        "allreduce_fusion_multi_node": [],
        "allreduce_fusion_min_cuda": "12.3",  # sglang gates SM90 paths at CUDA 12.3
        "attention_mha": ["fa3"],
        "attention_mla": ["fa3"],
        "evidence": {"symm_mem_two_shot": ["two-shot-ws2-sm90-no-multicast"]},
        "sources": [_CUDA_GUIDE, _SGLANG, _SGLANG_CAR, _SGLANG_FUSION, _SGLANG_ATTN,
                    "benchmark/results/h200x2-collectives.json: 2x H200 (NVLink, multicast off), graph replay: "
                    "two-shot faster than NCCL from 512 KiB through 8 MiB, as fast from 16 MiB, slower from "
                    "64 MiB"],
    },
    "10.0": {
        "name": "Blackwell (datacenter)",
        "examples": ["B200", "GB200"],
        "smem_per_sm_kib": 228,
        "smem_per_block_kib": 227,
        "features": {"tma": "portable", "tcgen05": "family", "fp8": "portable", "fp4": "family"},
        "topology": "nvswitch",
        "min_cuda": "12.8",
        "min_cuda_arch_specific": "12.8",
        "min_cuda_family": "12.9",
        "max_cuda": None,
        "torch_symm_mem": _SYMM_MEM_UPSTREAM,
        "symm_mem_multimem_world_sizes": [4, 6, 8],
        "custom_ar_v2_table": "sm100",
        "custom_ar_v2_world_sizes": [2, 3, 4, 5, 6, 7, 8, 16],
        "allreduce_fusion": ["mnnvl", "trtllm", "cutedsl"],
        "allreduce_fusion_min_cuda": "12.8",
        # sglang 0.5.23 _resolve_backend lets cutedsl through on any node count.
        "allreduce_fusion_multi_node": ["mnnvl", "cutedsl"],
        "attention_mha": ["trtllm_mha"],
        "attention_mla": ["flashinfer"],
        "sources": [_CUDA_GUIDE, _CCCL, "CUTLASS sm100_smem_capacity_bytes = 232448", _SGLANG,
                    _SGLANG_CAR, _SGLANG_FUSION, _SGLANG_ATTN],
    },
    "10.3": {
        "inherits": "10.0",
        "name": "Blackwell Ultra",
        "examples": ["B300", "GB300"],
        "min_cuda": "12.9",
        "min_cuda_arch_specific": "12.9",
        "sources": [_CUDA_NOTES, _CCCL],
    },
    "10.7": {
        "inherits": "10.3",
        "name": "Rubin (VR)",
        "examples": ["VR200"],
        "custom_ar_v2_table": "sm107",
        "min_cuda": "13.0",
        "min_cuda_arch_specific": "13.0",
        "lead": ["name", "examples", "smem_per_sm_kib", "smem_per_block_kib", "features", "min_cuda",
                 "min_cuda_arch_specific", "torch_symm_mem", "allreduce_fusion", "attention_mha"],
        "sources": [_SGLANG_CAR + " (tuned table for SM107, 'Rubin, VR')"],
    },
    "11.0": {
        "name": "Blackwell (Jetson Thor)",
        "examples": ["Jetson AGX Thor"],
        "smem_per_sm_kib": 228,
        "smem_per_block_kib": 227,
        "features": {"tma": "portable", "tcgen05": "family", "fp8": "portable", "fp4": "family"},
        "topology": "single",
        "min_cuda": "13.0",
        "min_cuda_arch_specific": "13.0",
        "min_cuda_family": "13.0",
        "max_cuda": None,
        "attention_mha": [],
        "attention_mla": [],
        "lead": ["smem_per_sm_kib", "smem_per_block_kib", "features"],
        "sources": [_CUDA_NOTES + " (sm_110, named sm_101 before CUDA 13.0)"],
    },
    "12.0": {
        "name": "Blackwell (RTX)",
        "examples": ["RTX PRO 6000 Blackwell", "RTX 5090"],
        "smem_per_sm_kib": 100,
        "smem_per_block_kib": 99,
        "features": {"tma": "portable", "fp8": "portable", "fp4": "family"},
        "topology": "pcie-p2p",
        "min_cuda": "12.8",
        "min_cuda_arch_specific": "12.8",
        "min_cuda_family": "12.9",
        "max_cuda": None,
        # No torch symmetric-memory sizes: SGLang 0.5.23 has none for major 12 and nothing
        # measured torch's kernels over PCIe.  What was measured there is SGLang's own
        # PCIe-IPC all-reduce (8x SM120, TP 8): on by default at that size.
        "symm_mem_multimem_world_sizes": [],
        "pcie_ipc_world_sizes": [8],
        "allreduce_fusion": ["trtllm"],
        "allreduce_fusion_multi_node": [],
        "allreduce_fusion_min_cuda": "12.8",
        # Explicit opt-in only (sgl-project/sglang#32330): no world size is measured to gain.
        # A node's own `sglang-arch tune fusion` override lists where it won.
        "allreduce_fusion_auto_world_sizes": [],
        "evidence": {"pcie_ipc_world_sizes": ["pcie-ipc-tp8-sm120"], "allreduce_fusion": ["fusion-sm12x-opt-in"]},
        "attention_mha": [],
        "attention_mla": [],
        "sources": [_CUDA_GUIDE, "CUTLASS sm120_smem_capacity_bytes = 101376",
                    "FlashInfer PR #3903: trtllm comm module built for majors 9, 10, 12",
                    _SGLANG_PCIE_IPC,
                    "a user's published report, 8x RTX PRO 6000 TP8, SGLang v0.5.9, CUDA 13.0.1: 89.5 -> 92.6 "
                    "tok/s from the FlashInfer attention backend, 92.7 with FlashInfer all-reduce fusion added",
                    "sgl-project/sglang#32330 (closed): trtllm all-reduce auto-selected on single-node SM120/SM121 "
                    "regressed at TP4 over PCIe; explicit opt-in or a TP-gated rule validated at TP2/4/8"],
    },
    "12.1": {
        "inherits": "12.0",
        "name": "Blackwell (GB10)",
        "examples": ["DGX Spark"],
        "topology": "single",
        # The PCIe-IPC measurement is of SM120 boards; GB10 is another machine.
        "pcie_ipc_world_sizes": [],
        "min_cuda": "12.9",
        "min_cuda_arch_specific": "12.9",
        "sources": [_CUDA_NOTES],
    },
}
