"""Every decision for one device, topology and world size, in one value.

This is what ``sglang-arch explain`` prints and what the plugin logs; its ``to_dict``
keys are a contract for tools (``requested``, ``resolved``, ``match``, ``reason``,
``topology``, ``features``, ``collectives``, ``attention``, ``moe_gemm``).  Every decision that
picks among candidates carries ``dropped``: each candidate left out, with why (the kernel
catalog has no build for the device, the topology, the model).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, List, Optional, Tuple

from .capability import CapabilityLike, parse_capability
from .policies import (attention, collectives, deepseek, deterministic, dsa, gemm, minicpm, minimax_m3, moe, quant,
                       speculative, vision)
from .registry import Resolution, resolve
from .topology import Topology, default_topology, parse_topology


DETERMINISTIC_CHOICES = ("ascend", "fa3", "fa4", "flashinfer", "intel_xpu", "triton")


@dataclass(frozen=True)
class Decisions:
    resolution: Resolution
    topology: Topology
    world_size: int
    nnodes: int
    symm_mem: collectives.SymmMemDecision
    custom_allreduce: collectives.CustomAllReduceDecision
    fusion: collectives.FusionDecision
    pcie_ipc: collectives.PcieIpcDecision
    mha: attention.AttentionDecision
    mla: attention.AttentionDecision
    deterministic_mha: deterministic.DeterministicDecision
    deterministic_mla: deterministic.DeterministicDecision
    dsa_fp8: dsa.DsaDecision
    dsa_bf16: dsa.DsaDecision
    vision: vision.VisionDecision
    hybrid_linear_draft: speculative.DraftDecision

    moe_runner: Optional[Dict[str, moe.Choice]] = None  # per quantization kind of the experts
    deep_gemm: Optional[moe.Choice] = None
    fp8_gemm: Optional[moe.Choice] = None
    fp4_gemm: Optional[moe.Choice] = None
    # The page size a server gets with FA4 for a non-MLA model, no speculative top-k > 1
    fa4_page_size: Optional[attention.PageSizeDecision] = None
    # What DeepSeek-V4.1's --dsv4-attn-backend auto may become (SGLang's other conditions apart)
    dsv4_attention: Optional[dsa.Dsv4MegaDecision] = None
    # MiniCPM's sparse backend (no backend set) and M3.1 NVFP4's arm (their model overrides)
    minicpm_sparse: Optional[minicpm.SparseDecision] = None
    minimax_m3_nvfp4: Optional[minimax_m3.ArmDecision] = None
    # Whether dense block-FP8 weights take DeepGEMM's UE8M0 scales at load (D26)
    fp8_dense_scales: Optional[quant.RequantDecision] = None
    # Tuned GEMM / GEMV paths SGLang keys to one GPU (K3 split-K table, GEMV window, ...)
    gemm_paths: Optional[gemm.GemmPaths] = None
    # DeepSeek-V4's Blackwell / Hopper kernel paths and the fused QKV-A GEMM's auto backend
    dsv4_paths: Optional[deepseek.Dsv4Paths] = None
    fused_a_gemm: Optional[deepseek.FusedAGemm] = None
    # the NVFP4 KV cache's dequantize and FlashInfer's FP4 / MXFP8 quantize backends
    kv_dequant: Optional[quant.KvDequant] = None
    quantize_backends: Optional[Dict[str, quant.QuantizeBackend]] = None
    # DeepSeek-V4.1's indexer (DeepGEMM's MQA logits or torch) and its index logits' dtype
    dsv41_indexer: Optional[deepseek.IndexerPath] = None
    dsv41_index_logits: Optional[deepseek.IndexLogits] = None

    def plan(self, symm_mem_flag: bool = False) -> collectives.AllReducePlan:
        """The all-reduce path of each phase, in SGLang's dispatch order, for a launch with
        (``symm_mem_flag``) or without --enable-torch-symm-mem."""
        c, s = self.custom_allreduce, self.symm_mem
        return collectives.allreduce_plan(
            c.max_bytes if c.enabled else 0, self.pcie_ipc.enabled, s.max_bytes if s.enabled else 0, s.algorithm,
            symm_mem_flag, {"custom all-reduce": c.reason, "PCIe-IPC": self.pcie_ipc.reason,
                            "torch symm mem": s.reason})

    def evidence(self) -> Tuple[str, ...]:
        """The ledger ids behind this machine's collective decisions that differ from stock."""
        ids = []
        for d in (self.pcie_ipc, self.symm_mem, self.fusion):
            if d.enabled:
                ids += [i for i in d.evidence if i not in ids]
        return tuple(ids)

    def gemm_rows(self) -> Dict[str, moe.Choice]:
        """The MoE / GEMM decisions as rows (name -> choice), in display order."""
        rows = {f"MoE runner {kind}": choice for kind, choice in (self.moe_runner or {}).items()}
        for name, choice in (("FP8 block GEMM", self.fp8_gemm), ("FP4 GEMM", self.fp4_gemm),
                             ("DeepGEMM", self.deep_gemm)):
            if choice is not None:
                rows[name] = choice
        return rows

    def named(self) -> Tuple[Tuple[str, str, str, Tuple[Tuple[str, str], ...]], ...]:
        """(label, value, reason, dropped) of every backend decision, as ``explain`` prints them."""
        def pair(d: Any) -> str:
            return "-" if d.prefill is None and d.decode is None else f"{d.prefill} / {d.decode}"
        return (
            ("attention MHA", pair(self.mha), self.mha.reason, self.mha.dropped),
            ("attention MLA", pair(self.mla), self.mla.reason, self.mla.dropped),
            ("deterministic MHA", self.deterministic_mha.backend or "-", self.deterministic_mha.reason,
             self.deterministic_mha.dropped),
            ("deterministic MLA", self.deterministic_mla.backend or "-", self.deterministic_mla.reason,
             self.deterministic_mla.dropped),
            ("DSA FP8 KV cache", pair(self.dsa_fp8), self.dsa_fp8.reason, self.dsa_fp8.dropped),
            ("DSA bf16 KV cache", pair(self.dsa_bf16), self.dsa_bf16.reason, self.dsa_bf16.dropped),
            ("vision attention", self.vision.backend, self.vision.reason, self.vision.dropped),
            ("hybrid linear draft", self.hybrid_linear_draft.backend or "-", self.hybrid_linear_draft.reason,
             self.hybrid_linear_draft.dropped),
        ) + _paths_row(self.gemm_paths) + (
            (("FA4 page size", _page(self.fa4_page_size), self.fa4_page_size.reason, ()),)
            if self.fa4_page_size is not None else ()) + (
            (("DeepSeek-V4.1 auto", _dsv4(self.dsv4_attention), self.dsv4_attention.reason, ()),)
            if self.dsv4_attention is not None else ()) + (
            (("MiniCPM sparse", self.minicpm_sparse.backend or f"SGLang's ({self.minicpm_sparse.preferred})",
              self.minicpm_sparse.reason, ()),) if self.minicpm_sparse is not None else ()) + (
            (("M3.1 NVFP4 arm", _arm(self.minimax_m3_nvfp4), self.minimax_m3_nvfp4.reason, ()),)
            if self.minimax_m3_nvfp4 is not None else ()) + (
            (("FP8 dense scales", _scales(self.fp8_dense_scales), self.fp8_dense_scales.reason, ()),)
            if self.fp8_dense_scales is not None else ()) + (
            (("DeepSeek-V4 paths", _paths(self.dsv4_paths), self.dsv4_paths.reason, ()),)
            if self.dsv4_paths is not None else ()) + (
            (("fused QKV-A GEMM auto", self.fused_a_gemm.backend, self.fused_a_gemm.reason, ()),)
            if self.fused_a_gemm is not None else ()) + (
            (("NVFP4 KV dequantize", "flashinfer" if self.kv_dequant.flashinfer else "SGLang's fallback",
              self.kv_dequant.reason, ()),) if self.kv_dequant is not None else ()) + tuple(
            (f"FlashInfer {which.upper()} quantize", q.backend or "SGLang's own", q.reason, ())
            for which, q in (self.quantize_backends or {}).items()) + (
            (("DeepSeek-V4.1 indexer", "DeepGEMM" if self.dsv41_indexer.deep_gemm else "torch",
              self.dsv41_indexer.reason, ()),) if self.dsv41_indexer is not None else ()) + (
            (("V4.1 index logits", "bf16" if self.dsv41_index_logits.bf16 else "fp32",
              self.dsv41_index_logits.reason, ()),) if self.dsv41_index_logits is not None else ())

    def to_dict(self) -> Dict[str, Any]:
        res = self.resolution
        return {
            "requested": str(res.requested),
            "resolved": str(res.resolved),
            "match": res.match,
            "reason": res.reason,
            "name": res.profile.name,
            "topology": self.topology.name,
            "world_size": self.world_size,
            "nnodes": self.nnodes,
            "features": res.features,
            "collectives": {
                "torch_symm_mem": {
                    "enabled": self.symm_mem.enabled,
                    "max_bytes": self.symm_mem.max_bytes,
                    "algorithm": self.symm_mem.algorithm,
                    "reason": self.symm_mem.reason,
                    "evidence": list(self.symm_mem.evidence) if self.symm_mem.enabled else [],
                },
                "pcie_ipc": {
                    "enabled": self.pcie_ipc.enabled,
                    "reason": self.pcie_ipc.reason,
                    "evidence": list(self.pcie_ipc.evidence) if self.pcie_ipc.enabled else [],
                },
                "plan": {flag: _plan(self.plan(flag == "with_symm_mem_flag"))
                         for flag in ("default", "with_symm_mem_flag")},
                "custom_allreduce": {
                    "enabled": self.custom_allreduce.enabled,
                    "max_bytes": self.custom_allreduce.max_bytes,
                    "table": self.custom_allreduce.table,
                    "reason": self.custom_allreduce.reason,
                },
                "allreduce_fusion": {
                    "enabled": self.fusion.enabled,
                    "backend": self.fusion.backend,
                    "reason": self.fusion.reason,
                    "dropped": _dropped(self.fusion.dropped),
                    "evidence": list(self.fusion.evidence) if self.fusion.enabled else [],
                },
            },
            "attention": {
                **{kind: {"prefill": d.prefill, "decode": d.decode, "reason": d.reason, "dropped": _dropped(d.dropped)}
                   for kind, d in (("mha", self.mha), ("mla", self.mla))},
                "deterministic": {
                    kind: {"backend": d.backend, "upstream_rule": d.upstream, "reason": d.reason,
                           "dropped": _dropped(d.dropped)}
                    for kind, d in (("mha", self.deterministic_mha), ("mla", self.deterministic_mla))},
                "dsa": {
                    kv: {"prefill": d.prefill, "decode": d.decode, "reason": d.reason, "dropped": _dropped(d.dropped)}
                    for kv, d in (("fp8_e4m3", self.dsa_fp8), ("bfloat16", self.dsa_bf16))},
                "vision": {"backend": self.vision.backend, "reason": self.vision.reason,
                           "dropped": _dropped(self.vision.dropped)},
                "hybrid_linear_draft": {"backend": self.hybrid_linear_draft.backend,
                                        "reason": self.hybrid_linear_draft.reason,
                                        "dropped": _dropped(self.hybrid_linear_draft.dropped)},
                "fa4_page_size": None if self.fa4_page_size is None else {
                    "page_size": self.fa4_page_size.page_size, "reason": self.fa4_page_size.reason},
                "dsv4_attention": None if self.dsv4_attention is None else {
                    "auto": _dsv4(self.dsv4_attention), "reason": self.dsv4_attention.reason},
                "minicpm_sparse": None if self.minicpm_sparse is None else {
                    "backend": self.minicpm_sparse.backend, "upstream_rule": self.minicpm_sparse.preferred,
                    "reason": self.minicpm_sparse.reason},
                "minimax_m3_nvfp4": None if self.minimax_m3_nvfp4 is None else {
                    "blackwell_arm": self.minimax_m3_nvfp4.blackwell, "runs": self.minimax_m3_nvfp4.runs,
                    "reason": self.minimax_m3_nvfp4.reason},
            },
            "moe_gemm": {
                "moe_runner": {kind: _choice(c) for kind, c in (self.moe_runner or {}).items()},
                "fp8_gemm": _choice(self.fp8_gemm),
                "fp4_gemm": _choice(self.fp4_gemm),
                "deep_gemm": _choice(self.deep_gemm),
                "fp8_dense_scales": None if self.fp8_dense_scales is None else {
                    "ue8m0": self.fp8_dense_scales.dense, "reason": self.fp8_dense_scales.reason},
                "tuned_paths": None if self.gemm_paths is None else self.gemm_paths.to_dict(),
                "dsv4_paths": None if self.dsv4_paths is None else {
                    "blackwell": self.dsv4_paths.blackwell, "hopper": self.dsv4_paths.hopper,
                    "reason": self.dsv4_paths.reason},
                "fused_a_gemm": None if self.fused_a_gemm is None else {
                    "auto": self.fused_a_gemm.backend, "reason": self.fused_a_gemm.reason},
                "kv_dequant": None if self.kv_dequant is None else {
                    "flashinfer": self.kv_dequant.flashinfer, "reason": self.kv_dequant.reason},
                "quantize_backends": {which: {"backend": q.backend, "reason": q.reason}
                                      for which, q in (self.quantize_backends or {}).items()},
                "dsv41_indexer": None if self.dsv41_indexer is None else {
                    "deep_gemm": self.dsv41_indexer.deep_gemm, "reason": self.dsv41_indexer.reason},
                "dsv41_index_logits": None if self.dsv41_index_logits is None else {
                    "bf16": self.dsv41_index_logits.bf16, "reason": self.dsv41_index_logits.reason},
            },
        }


def _scales(d: quant.RequantDecision) -> str:
    """Dense block-FP8 weights' scales once DeepGEMM's UE8M0 requantization is asked for."""
    return "SGLang's (DeepGEMM off)" if d.dense is None else ("UE8M0" if d.dense else "FP32")


def _paths_row(paths: Optional[gemm.GemmPaths]) -> Tuple[Tuple[str, str, str, Tuple[()]], ...]:
    """The tuned GEMM / GEMV paths taken on this tier, as one ``explain`` row."""
    if paths is None:
        return ()
    taken = [(name, path) for name, path in vars(paths).items() if path.on]
    value = ", ".join(name for name, _ in taken) or "-"
    reason = "; ".join(f"{name}: {path.reason}" for name, path in taken)
    return (("tuned GEMM paths", value, reason or "none of SGLang's one-GPU tunings holds on this tier", ()),)


def _page(d: attention.PageSizeDecision) -> str:
    return "kept" if d.page_size is None else str(d.page_size)


def _dsv4(d: dsa.Dsv4MegaDecision) -> str:
    """What ``auto`` becomes for DeepSeek-V4.1 with an FP8 KV cache, no attention TP and a V4.1 layout."""
    return dsa.DSV4_MEGA if d.allowed else "flashmla"


def _paths(d: deepseek.Dsv4Paths) -> str:
    """Which of DeepSeek-V4's tuned Triton paths the model takes (generic: neither)."""
    return "Blackwell" if d.blackwell else "Hopper" if d.hopper else "generic"


def _arm(d: minimax_m3.ArmDecision) -> str:
    return ("Blackwell" if d.blackwell else "other GPUs") + ("" if d.runs else " (cannot run)")


def _choice(c: Optional[moe.Choice]) -> Optional[Dict[str, Any]]:
    if c is None:
        return None
    return {"choice": c.choice, "upstream": c.upstream, "changed": c.changed, "reason": c.reason}


def _plan(p: collectives.AllReducePlan) -> Dict[str, Any]:
    return {"decode": p.decode, "prefill": p.prefill, "decode_bytes": p.decode_bytes, "prefill_bytes": p.prefill_bytes,
            "steps": [{"path": st.path, "on": st.on, "admits": st.admits, "reason": st.reason} for st in p.steps]}


def _dropped(dropped: Tuple[Tuple[str, str], ...]) -> List[Dict[str, str]]:
    return [{"choice": choice, "reason": why} for choice, why in dropped]


def decide(
    res: Resolution,
    topology: Optional[Topology] = None,
    world_size: int = 1,
    nnodes: int = 1,
    traits: Optional[attention.ModelTraits] = None,
) -> Decisions:
    """All decisions; ``topology`` defaults to the tier's typical one (single for one GPU,
    never single for more: ``topology.default_topology``)."""
    if topology is None:
        topology = default_topology(res.profile.topology, world_size)
    traits = traits or attention.ModelTraits()
    return Decisions(
        resolution=res,
        topology=topology,
        world_size=world_size,
        nnodes=nnodes,
        symm_mem=collectives.torch_symm_mem(res, topology, world_size, nnodes),
        custom_allreduce=collectives.custom_allreduce(res, topology, world_size),
        fusion=collectives.allreduce_fusion(res, topology, world_size, nnodes, cuda=traits.cuda),
        pcie_ipc=collectives.pcie_ipc(res, topology, world_size, nnodes),
        mha=attention.default_backend(res, replace(traits, kind="mha")),
        mla=attention.default_backend(res, replace(traits, kind="mla")),
        # SGLang 0.5.23's DETERMINISTIC_ATTENTION_BACKEND_CHOICES (arg_groups/choices.py), the
        # DeepSeek family for MLA (its deterministic pass's model test)
        deterministic_mha=deterministic.default_backend(res, DETERMINISTIC_CHOICES, "mha", False, traits.cuda),
        deterministic_mla=deterministic.default_backend(res, DETERMINISTIC_CHOICES, "mla", True, traits.cuda),
        dsa_fp8=dsa.split_backends(res, "fp8_e4m3", "DeepseekV32ForCausalLM", traits.cuda),
        dsa_bf16=dsa.split_backends(res, "bfloat16", "DeepseekV32ForCausalLM", traits.cuda),
        vision=vision.backend(res, None, traits.cuda),
        hybrid_linear_draft=speculative.hybrid_linear_draft_backend(res, "decode", traits.cuda),
        moe_runner={kind: moe.moe_runner(res, kind, traits.cuda) for kind in moe.QUANT_KINDS},
        deep_gemm=moe.deep_gemm(res, traits.cuda),
        fp8_gemm=moe.fp8_gemm(res, traits.cuda),
        fp4_gemm=moe.fp4_gemm(res, traits.cuda),
        fa4_page_size=attention.fa4_page_size(res, cuda=traits.cuda),
        dsv4_attention=dsa.dsv4_mega_default(res, traits.cuda),
        minicpm_sparse=minicpm.sparse_backend(res, traits.cuda),
        minimax_m3_nvfp4=minimax_m3.nvfp4_arm(res, traits.cuda),
        fp8_dense_scales=quant.dense_ue8m0_requant(res, traits.cuda),
        gemm_paths=gemm.gemm_paths(res, traits.cuda),
        dsv4_paths=deepseek.dsv4_kernel_paths(res, traits.cuda),
        fused_a_gemm=deepseek.fused_a_gemm_auto(res, traits.cuda),
        kv_dequant=quant.nvfp4_kv_dequant(res, traits.cuda),
        quantize_backends={which: quant.flashinfer_quantize_backend(res, which, traits.cuda)
                           for which in quant.QUANTIZE_DECISIONS},
        dsv41_indexer=deepseek.dsv41_indexer_deep_gemm(res, traits.cuda),
        dsv41_index_logits=deepseek.dsv41_bf16_index_logits(res, traits.cuda),
    )


def explain(capability: CapabilityLike, world_size: int = 1, topology: Optional[str] = None,
            nnodes: int = 1, cuda: Optional[Tuple[int, int]] = (13, 0)) -> Decisions:
    """Convenience entry: parse everything, resolve, decide."""
    res = resolve(parse_capability(capability))
    topo = parse_topology(topology) if topology is not None else None
    return decide(res, topo, world_size, nnodes, attention.ModelTraits(cuda=cuda))
