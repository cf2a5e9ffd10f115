"""The evidence ledger: why each decision that differs from stock SGLang differs, as data.

Beside the tier table (``table.py``) and the kernel catalog (``kernels.py``).  Every value
of the table that makes a decision differ from SGLang 0.5.23's own (a size, a path turned
on by default, a refusal) names one of these entries in its tier's ``evidence`` field, and
every entry names the tests that pin the decision it supports.  ``explain`` and ``show``
print the entry beside the decision; docs/differences.md renders the whole ledger
(``ledger_markdown``, checked by ``test/unit/test_evidence.py``).

What counts as evidence: a measurement (the hardware, the software, the numbers, where
it is published: an SGLang source file or pull request, a vLLM pull request, this
project's ``benchmark/results/`` with its command), a fact read from a kernel's build (the
targets a wheel ships, the architectures a generator compiles for), or an upstream
maintainer's stated rule.  No entry, no difference: a value without one is stock
behaviour or an explicit opt-in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

MEASUREMENT = "measurement"
KERNEL_BUILD = "kernel build"
MAINTAINER_RULE = "maintainer rule"
KINDS = (MEASUREMENT, KERNEL_BUILD, MAINTAINER_RULE)


@dataclass(frozen=True)
class Evidence:
    id: str
    kind: str  # one of KINDS
    supports: str  # the decision it carries, as a user would ask it
    hardware: str
    software: str
    numbers: str  # the figures, as published
    source: str  # where it is published (file, pull request, results file with its command)
    tests: Tuple[str, ...]  # "path::test" of the tests that pin the decision
    limits: str = ""  # what it does not show (where a reader could over-read it)

    def short(self) -> str:
        """One line for ``explain`` / ``show``: what was seen, and where."""
        return f"{self.numbers} ({self.hardware}; {self.source})"


# The decision suite's equality with SGLang's own functions, and its documented differences
_EQUIVALENCE = ("test/integration/test_equivalence.py::"
                "test_routed_equals_upstream_where_upstream_decides_except_documented")
_PCIE_IPC_SOURCE = ("SGLang 0.5.23 srt/distributed/device_communicators/pcie_ipc_ar.py, its module docstring "
                    "(sgl-project/sglang#34528)")

ENTRIES: Tuple[Evidence, ...] = (
    Evidence(
        id="pcie-ipc-tp8-sm120",
        kind=MEASUREMENT,
        supports="SGLang's FlashInfer PCIe-IPC all-reduce on by default at TP 8 on SM 12.0 over PCIe with "
                 "peer-to-peer access on one node, with its decode-sized workspace: decode-sized reductions go "
                 "to it, prefill-sized ones stay on NCCL",
        hardware="one host with 8x SM120 over PCIe (GPUs 0-3 and 4-7 on separate NUMA nodes)",
        software="SGLang 0.5.23 with FlashInfer 0.7.2 pcie_ipc_comm, bf16",
        numbers="TP 8, 8k context: NCCL only 1910 ms TTFT / 21.14 ms TPOT / 35.02 tok/s; decode-sized "
                "workspace 1849 ms / 13.62 ms / 48.05 tok/s; prefill-sized workspace 3176 ms (+66% TTFT) / "
                "13.64 ms / 38.43 tok/s; per call at hidden 6144: 12 KiB 5.3 vs 205.1 us, 384 KiB 34.6 vs "
                "1169.3 us against NCCL",
        source=_PCIE_IPC_SOURCE,
        tests=("test/unit/test_allreduce_plan.py::test_sm120_tp8_pcie_p2p_decode_on_pcie_ipc_prefill_on_nccl",
               "test/integration/test_pcie_ipc_default.py::test_eligible_group_on_by_default_at_tp8_on_sm120"),
        limits="measured at TP 8 only: TP 2 and TP 4 keep SGLang's opt-in (SGLANG_ENABLE_PCIE_IPC_ALLREDUCE=1); "
               "on one host, so no other SM120 board or NUMA layout is covered",
    ),
    Evidence(
        id="two-shot-ws2-sm90-no-multicast",
        kind=MEASUREMENT,
        supports="torch symmetric memory's two-shot kernel without NVLink multicast on SM 9.0 at world size 2, "
                 "for reductions below 16 MiB (stock SGLang turns the communicator off without multicast)",
        hardware="2x H200 (NV18 NVLink, multicast off)",
        software="torch 2.11, CUDA 13, bf16, 20 calls per CUDA graph replay, 7 trials",
        numbers="graph replay medians, two-shot vs NCCL: 512 KiB 11.4 vs 14.8 us, 1 MiB 14.9 vs 18.9, 4 MiB "
                "29.1 vs 39.7, 8 MiB 42.4 vs 50.2; from 16 MiB NCCL is as fast or faster (16 MiB 79.4 vs "
                "77.1, 64 MiB 283.1 vs 253.7)",
        source="benchmark/results/h200x2-collectives.json (sglang-arch tune collectives --world-sizes 2 on the "
               "host; quartiles in the file), corroborated by vllm-project/vllm#42324 (on SM90 two-shot loses "
               "to NCCL from about 16 MiB)",
        tests=("test/unit/test_allreduce_plan.py::test_two_shot_without_multicast_only_where_measured",
               _EQUIVALENCE),
        limits="world size 2 only; no PCIe host and no world size 4 or 8 was measured, so those keep stock's "
               "behaviour (off) unless `sglang-arch tune collectives` on the node measures them",
    ),
    Evidence(
        id="fusion-sm12x-opt-in",
        kind=MAINTAINER_RULE,
        supports="FlashInfer all-reduce fusion (trtllm) runs on SM 12.x when asked for, and is never turned on "
                 "there by default",
        hardware="SM120 / SM121 on one node over PCIe",
        software="FlashInfer's trtllm comm module, built for majors 9, 10 and 12",
        numbers="auto-selecting trtllm on single-node SM120/SM121 regressed substantially at TP 4 over PCIe; "
                "8x RTX PRO 6000 at TP 8 (SGLang v0.5.9): 92.6 -> 92.7 tok/s with fusion added",
        source="sgl-project/sglang#32330 (closed: future changes explicit opt-in, validated at TP 2, 4 and 8); "
               "flashinfer-ai/flashinfer#3903 (the module's majors); a user's published debugging report for the "
               "TP 8 figures",
        tests=("test/unit/test_tune_fusion.py::test_explicit_fusion_runs_on_12x_with_p2p_and_is_off_by_default_"
               "with_the_evidence",
               "test/unit/test_glue_rules.py::test_auto_enable_leaves_fusion_off_on_12x_without_a_measured_win"),
        limits="+0.1 tok/s at TP 8 is within run-to-run noise: no world size is measured to gain, so fusion is "
               "on by default only where `sglang-arch tune fusion` on the node measured a win",
    ),
    Evidence(
        id="fusion-trtllm-workspace-no-multicast",
        kind=KERNEL_BUILD,
        supports="an asked-for trtllm fusion workspace is sized without NVLink multicast where the node has none "
                 "(SGLang 0.5.23's preflight queries multicast granularity for every backend and turns fusion "
                 "off there)",
        hardware="any node without NVLink multicast (SM12x over PCIe; H100 / H200 / B200 hosts with multicast "
                 "off)",
        software="FlashInfer 0.7.2 comm/trtllm_ar.py creates the trtllm IPC workspace with enable_multicast=False",
        numbers="the trtllm workspace maps peer memory only; the multicast query fails with "
                "CUDA_ERROR_NOT_SUPPORTED on such nodes",
        source="flashinfer 0.7.2 comm/trtllm_ar.py; sgl-project/sglang#32330 (removed the preflight: it "
               "'rejects valid non-multicast configurations')",
        tests=("test/integration/test_fusion_workspace_preflight.py::test_trtllm_preflight_proceeds_without_multicast",
               "test/unit/test_glue_rules.py::test_the_trtllm_workspace_is_sized_without_multicast_where_the_query_"
               "fails"),
    ),
    Evidence(
        id="trtllm-fusion-needs-p2p",
        kind=KERNEL_BUILD,
        supports="trtllm all-reduce fusion is off (and refused when asked) without peer-to-peer access",
        hardware="PCIe GPUs without P2P (typical of GeForce boards)",
        software="FlashInfer 0.7.2 trtllm IPC workspace (CUDA IPC peer mappings)",
        numbers="the workspace maps every peer's buffer; without P2P the mapping fails at the first forward",
        source="flashinfer 0.7.2 comm/trtllm_ar.py trtllm_create_ipc_workspace_for_all_reduce_fusion",
        tests=(_EQUIVALENCE,),
    ),
    Evidence(
        id="mnnvl-needs-nvlink",
        kind=KERNEL_BUILD,
        supports="mnnvl all-reduce fusion is off (and refused when asked) without NVLink multicast: on PCIe and "
                 "on NVLink nodes with multicast off",
        hardware="PCIe nodes of SM 9.0 / 10.x; NVLink nodes with multicast off",
        software="FlashInfer 0.7.2 comm/mnnvl.py (fabric memory over NVLink, a multicast buffer)",
        numbers="the workspace maps memory over the NVLink fabric and binds it to a multicast object "
                "(McastGPUBuffer), which refuses a device without multicast",
        source="flashinfer 0.7.2 comm/mnnvl.py SymmDeviceMemory / McastGPUBuffer",
        tests=("test/unit/test_hostile.py::test_mnnvl_needs_nvlink_multicast",),
    ),
    Evidence(
        id="kernel-catalog",
        kind=KERNEL_BUILD,
        supports="a backend, runner or GEMM is chosen, kept or accepted only where its kernels have a build for "
                 "the device (never a kernel built for another architecture, on known or unknown GPUs)",
        hardware="the wheels sglang==0.5.23 installs",
        software="sglang-kernel 0.4.10, flashinfer-python 0.7.2, sgl-flash-mla 1.0.0, nvidia-cutlass-dsl 4.8.0",
        numbers="cuobjdump --list-elf / --list-ptx of each binary (e.g. FA3 flash_ops: sm_80 sm_86 sm_90a, no "
                "PTX; trtllm-gen FMHA cubins: sm_100f sm_103a sm_107a) and the architectures each generator "
                "compiles for",
        source="python/sglang_arch/arch/kernels.py (each entry names its binary or generator), read again from "
               "the installed packages by test/integration/test_catalog_wheels.py",
        tests=("test/integration/test_catalog_wheels.py",
               "test/integration/test_equivalence.py::test_unknown_capabilities_take_their_nearest_tier"),
    ),
    Evidence(
        id="trtllm-mla-sm12x-decode-only",
        kind=KERNEL_BUILD,
        supports="trtllm_mla on SM 12.x: decode runs (FlashInfer's XQA MLA kernels), prefill is refused at "
                 "argument resolution, before any weight loads",
        hardware="SM120 / SM121",
        software="FlashInfer 0.7.2: mla/_core.py routes MLA decode on majors other than 10 to xqa; "
                 "jit/xqa.py gen_xqa_module_mla builds for major 12; the trtllm-gen prefill cubins are sm_100f, "
                 "sm_103a and sm_107a only",
        numbers="prefill fails on SM120 in TllmGenFmhaRunner (sgl-project/sglang#24633)",
        source="sgl-project/sglang#28837 (gates prefill at argument resolution); #24848 (a blanket SM12x refusal, "
               "closed to keep SM12x decode)",
        tests=("test/unit/test_attention_rules.py::test_trtllm_mla_on_sm12x_decodes_and_refuses_prefill",),
    ),
)

LEDGER: Dict[str, Evidence] = {e.id: e for e in ENTRIES}


def entry(evidence_id: str) -> Evidence:
    """The ledger entry ``evidence_id``; ValueError naming the known ids otherwise."""
    try:
        return LEDGER[evidence_id]
    except (KeyError, TypeError):
        raise ValueError(f"unknown evidence {evidence_id!r}; accepted: {', '.join(LEDGER)}") from None


def ledger_markdown() -> str:
    """The ledger as docs/differences.md shows it: one block per entry."""
    lines = []
    for e in ENTRIES:
        lines += [f"### `{e.id}` ({e.kind})", "",
                  f"- Supports: {e.supports}.",
                  f"- Seen on: {e.hardware}; {e.software}.",
                  f"- Numbers: {e.numbers}.",
                  f"- Source: {e.source}."]
        if e.limits:
            lines.append(f"- Does not show: {e.limits}.")
        lines.append("- Pinned by: " + ", ".join(f"`{t}`" for t in e.tests) + ".")
        lines.append("")
    return "\n".join(lines)
