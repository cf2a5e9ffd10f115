"""``sglang-arch explain`` as text that fits a terminal: at most :data:`WIDTH` columns.

By default the decisions the plugin exists for (torch symmetric memory, custom
all-reduce, FlashInfer all-reduce fusion, the attention defaults), each beside stock
SGLang's answer (``stock.py``) and the flag it needs, and one line for MoE / GEMM;
``--all`` adds the model-specific rows.  Reasons wrap under their row.
"""

from __future__ import annotations

import textwrap
from typing import Iterable, List, Optional, Sequence, Tuple

from . import stock
from .arch import evidence as ledger
from .arch.decisions import Decisions
from .arch.policies.collectives import PLAN_DECODE_TOKENS, PLAN_HIDDEN, PLAN_PREFILL_TOKENS, AllReducePlan
from .arch.profile import MIB

WIDTH = 100
LABEL_W = 22  # the row's name
CELL_W = 30  # each of the two answers
MARK = "differs"
# What each group of explain's rows depends on: the collectives on no model, fusion on the
# model (SGLang turns it on for some), attention on the model's kind, MoE / GEMM on the
# weights' quantization.
SCOPE_EVERY_MODEL = "for every model (the collectives do not depend on it):"
SCOPE_FUSION = "for the models SGLang's auto-enable pass turns fusion on for (DeepSeek, Qwen MoE, GLM and others):"
SCOPE_ATTENTION = "by the model's attention (MHA or MLA), for a model without its own rule:"
SCOPE_QUANTIZATION = "by the weights' quantization, for every model:"
MODEL_HEADING = "model-specific decisions (for the models that have them)"
QUANTIZATION_HEADING = "MoE / GEMM choices (for every model, by the weights' quantization)"
SYMM_MEM_FLAG = "--enable-torch-symm-mem"
FUSION_FLAG = "--flashinfer-allreduce-fusion-backend"
PCIE_IPC_VARIABLE = "SGLANG_ENABLE_PCIE_IPC_ALLREDUCE"


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


def size_text(nbytes: int) -> str:
    """A size in the largest unit that holds it whole (``64 MiB``, ``512 KiB``, ``4100 B``), as
    an override spells it."""
    if nbytes % MIB == 0:
        return f"{nbytes // MIB} MiB"
    return f"{nbytes // 1024} KiB" if nbytes % 1024 == 0 else f"{nbytes} B"



def _wrap(text: str, indent: int, first: str = "", width: int = WIDTH) -> List[str]:
    """``text`` under a row, from column ``indent``, ``first`` before its first line."""
    pad = " " * indent
    return textwrap.wrap(" ".join(text.split()), width=width, initial_indent=pad + first,
                         subsequent_indent=pad + " " * len(first), break_on_hyphens=False) or [pad + first]


def _cell(text: str) -> List[str]:
    return textwrap.wrap(text, width=CELL_W - 2, break_on_hyphens=False) or ["-"]


def _row(label: str, ours: Sequence[str], theirs: Sequence[str], differs: bool) -> List[str]:
    """One decision over as many lines as its longest cell needs; the mark on the first."""
    left = [line for part in ours for line in _cell(part)]
    right = [line for part in theirs for line in _cell(part)]
    lines = []
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        mark = MARK if differs and i == 0 else ""
        lines.append(f"{label if i == 0 else '':<{LABEL_W}}{a:<{CELL_W}}{b:<{CELL_W}}{mark}".rstrip())
    return lines


def _symm(d: Decisions) -> str:
    s = d.symm_mem
    return f"{size_text(s.max_bytes)} {s.algorithm}" if s.enabled else "off"


def _car(d: Decisions) -> str:
    c = d.custom_allreduce
    return f"{size_text(c.max_bytes)} {c.table or 'default'}" if c.enabled else "off"


def _phases(prefill: str, decode: str) -> List[str]:
    return [f"prefill {prefill}", f"decode  {decode}"]


def _paths(p: AllReducePlan) -> List[str]:
    return [f"decode  {p.decode}", f"prefill {p.prefill}"]


def evidence_lines(ids: Sequence[str], indent: int = LABEL_W) -> List[str]:
    """Each ledger entry behind a decision: what was seen, where (``arch/evidence.py``)."""
    lines: List[str] = []
    for evidence_id in ids:
        lines.extend(_wrap(f"[{evidence_id}] {ledger.entry(evidence_id).short()}", indent, "evidence: "))
    return lines


def stock_gemm(d: Decisions) -> dict:
    """Stock SGLang's MoE / GEMM answer on the device itself (not on the registry's tier: on an
    unknown GPU SGLang's rules read the device's own capability), per ``gemm_rows`` name."""
    cap = d.resolution.requested
    theirs = stock.moe_gemm(cap)
    out = {"FP8 block GEMM": theirs["fp8_gemm"], "FP4 GEMM": theirs["fp4_gemm"], "DeepGEMM": theirs["deep_gemm"]}
    for name in d.gemm_rows():
        if name.startswith("MoE runner "):
            out[name] = stock.moe_runner(cap, name[len("MoE runner "):])
    return out


def _gemm_changed(d: Decisions) -> List[Tuple[str, str, str]]:
    """(name, ours, stock SGLang's on the device) of the MoE / GEMM rows that differ."""
    theirs = stock_gemm(d)
    rows = [(name, c.choice or "refused", theirs.get(name, c.upstream)) for name, c in d.gemm_rows().items()]
    return [row for row in rows if row[1] != row[2]]


def gemm_cells(d: Decisions) -> List[Tuple[str, str, str]]:
    """(name, value, reason) of each MoE / GEMM row: the registry's choice, and stock SGLang's
    answer on the device beside it where that differs (``explain --all`` and ``show``)."""
    changed = {name: theirs for name, _, theirs in _gemm_changed(d)}
    return [(name, (c.choice or "refused") + (f" (stock: {changed[name]})" if name in changed else ""), c.reason)
            for name, c in d.gemm_rows().items()]


def _gemm_summary(d: Decisions) -> str:
    rows = d.gemm_rows()
    changed = _gemm_changed(d)
    if not changed:
        return f"{len(rows)} choices (MoE runners per quantization, FP8 / FP4 GEMM, DeepGEMM), all as stock SGLang"
    listed = "; ".join(f"{name} {ours} (stock {theirs})" for name, ours, theirs in changed)
    verb = "differs" if len(changed) == 1 else "differ"
    return f"{len(rows)} choices, {len(changed)} {verb} from stock SGLang: {listed}"


def header(d: Decisions, note: Optional[str] = None) -> List[str]:
    res = d.resolution
    gpus = f"{d.world_size} GPU{'s' if d.world_size != 1 else ''}"
    nodes = f"{d.nnodes} node{'s' if d.nnodes != 1 else ''}"
    lines = _wrap(f"{res.requested} -> tier {res.resolved} {res.profile.name} [{res.match}]", 0, "device    ")
    lines += _wrap(res.reason, 10)
    lines += _wrap(f"{gpus}, {nodes}, topology {d.topology.name} ({d.topology.description})", 0, "machine   ")
    if note:
        lines += _wrap(note, 10)
    lines += _wrap(", ".join(f"{k} {_yn(v)}" for k, v in res.features.items()), 0, "features  ")
    return lines


def mission(d: Decisions, s: stock.StockDecisions) -> List[str]:
    """The mission's decisions, each beside stock SGLang's, with its flag, both reasons and
    the evidence behind a difference; then the all-reduce path of each phase."""
    lines = [f"{'':<{LABEL_W}}{'with sglang-arch':<{CELL_W}}{'stock SGLang ' + stock.RELEASE:<{CELL_W}}".rstrip()]

    def decision(label: str, ours: Sequence[str], theirs: Sequence[str], why: str, stock_why: str,
                 flag: Optional[str] = None, dropped: Iterable[Tuple[str, str]] = (),
                 evidence: Sequence[str] = ()) -> None:
        differs = list(ours) != list(theirs)
        lines.extend(_row(label, ours, theirs, differs))
        if flag:
            lines.extend(_wrap(flag, LABEL_W, "flag: "))
        lines.extend(_wrap(why, LABEL_W, "why: "))
        for choice, reason in dropped:
            lines.extend(_wrap(f"{choice}: {reason}", LABEL_W, "dropped "))
        if differs:
            lines.extend(evidence_lines(evidence))
        lines.extend(_wrap(stock_why, LABEL_W, "stock: "))

    symm_flag = (f"{SYMM_MEM_FLAG} (without it SGLang uses no symmetric memory, with or without the plugin)"
                 if d.world_size > 1 else None)
    lines.append(SCOPE_EVERY_MODEL)
    decision("torch symm mem", [_symm(d)], [s.symm_mem.value], d.symm_mem.reason, s.symm_mem.reason, symm_flag,
             evidence=d.symm_mem.evidence)
    decision("PCIe-IPC all-reduce", ["on (decode-sized)" if d.pcie_ipc.enabled else "off"], [s.pcie_ipc.value],
             d.pcie_ipc.reason, s.pcie_ipc.reason, evidence=d.pcie_ipc.evidence)
    decision("custom all-reduce", [_car(d)], [s.custom_allreduce.value], d.custom_allreduce.reason,
             s.custom_allreduce.reason)
    if d.world_size > 1:
        lines.extend(plan_rows(d))
    lines.append(SCOPE_FUSION)
    fusion_flag = (f"{FUSION_FLAG} auto for a model SGLang's auto-enable pass does not list (it lists DeepSeek V3 "
                   f"/ V3.2 / V4, GPT-OSS, GLM-4 MoE, Qwen3 MoE / Next / 3.5, Kimi K2.5, Nemotron-H, MiMo and a "
                   f"few more, TP > 1)"
                   if d.fusion.enabled or s.fusion.value != "off" else None)
    decision("all-reduce fusion", [d.fusion.backend if d.fusion.enabled else "off"], [s.fusion.value],
             d.fusion.reason, f"{s.fusion.reason} (for the models SGLang turns fusion on for)", fusion_flag,
             dropped=d.fusion.dropped, evidence=d.fusion.evidence)
    lines.append(SCOPE_ATTENTION)
    for label, ours, theirs in (("attention MHA", d.mha, s.mha), ("attention MLA", d.mla, s.mla)):
        decision(label, _phases(ours.prefill, ours.decode), _phases(theirs.prefill, theirs.decode), ours.reason,
                 theirs.reason, dropped=ours.dropped)
    lines.append(SCOPE_QUANTIZATION)
    lines.extend(_wrap(_gemm_summary(d), 0, f"{'MoE / GEMM':<{LABEL_W}}"))
    return lines


def plan_rows(d: Decisions) -> List[str]:
    """Which path takes a decode-sized and a prefill-sized reduction, in SGLang's dispatch order
    (custom all-reduce, PCIe-IPC, quick all-reduce, mscclpp, torch symm mem, NCCL), beside stock's;
    then the same with --enable-torch-symm-mem where that changes a path."""
    res = d.resolution
    ours, theirs = d.plan(), stock.plan(res.requested, d.topology, d.world_size)
    lines = _row("all-reduce path", _paths(ours), _paths(theirs), _paths(ours) != _paths(theirs))
    lines += _wrap(f"a decode batch of {PLAN_DECODE_TOKENS} tokens ({size_text(ours.decode_bytes)}) and a prefill "
                   f"chunk of {PLAN_PREFILL_TOKENS} ({size_text(ours.prefill_bytes)}) at hidden {PLAN_HIDDEN} bf16, "
                   f"through SGLang's dispatch order", LABEL_W, "sizes: ")
    flagged, flagged_stock = d.plan(True), stock.plan(res.requested, d.topology, d.world_size, True)
    if _paths(flagged) != _paths(ours) or _paths(flagged_stock) != _paths(theirs):
        lines += _wrap(f"decode {flagged.decode}, prefill {flagged.prefill} (stock: decode {flagged_stock.decode}, "
                       f"prefill {flagged_stock.prefill})", LABEL_W, f"with {SYMM_MEM_FLAG}: ")
    return lines


def _with_stock(value: str, theirs: Optional[str]) -> str:
    """A row's value with stock SGLang's beside it: ``(same)``, or ``(stock: X)`` where it differs."""
    if theirs is None:
        return value
    return f"{value} (same)" if value == theirs else f"{value} (stock: {theirs})"


def model_rows(d: Decisions, cuda: Optional[Tuple[int, int]] = (13, 0)) -> List[str]:
    """``--all``: the rows for particular models, then the MoE / GEMM choices every model's
    weights take by their quantization; each value beside stock SGLang's where this project
    models SGLang's rule for it, reasons under it."""
    theirs = stock.named(d.resolution.requested, cuda)
    named = [(label, _with_stock(value, theirs.get(label)), reason, dropped) for label, value, reason, dropped
             in d.named() if label not in ("attention MHA", "attention MLA")]
    gemm = [(name, value if "(stock:" in value else f"{value} (same)", reason, ())
            for name, value, reason in gemm_cells(d)]
    lines = []
    for heading, rows in ((MODEL_HEADING, named), (QUANTIZATION_HEADING, gemm)):
        lines += ["", heading]
        for label, value, reason, dropped in rows:
            if len(label) >= LABEL_W:  # a long name on a line of its own: never run into its value
                lines.append(label)
                lines.extend(_wrap(value, LABEL_W))
            else:
                lines.extend(_wrap(value, 0, f"{label:<{LABEL_W}}"))
            for choice, why in dropped:
                lines.extend(_wrap(f"{choice}: {why}", LABEL_W, "dropped "))
            lines.extend(_wrap(reason, LABEL_W, "why: "))
    lines += [""] + _wrap("(same): stock SGLang picks the same; (stock: X): it picks X; a value without either "
                          "has no model of SGLang's rule here (sglang-arch plan runs SGLang's own code).", 0)
    return lines


def render(d: Decisions, s: stock.StockDecisions, note: Optional[str] = None, everything: bool = False,
           cuda: Optional[Tuple[int, int]] = (13, 0)) -> str:
    lines = header(d, note) + [""] + mission(d, s)
    if everything:
        lines += model_rows(d, cuda)
    else:
        lines += [""] + _wrap("--all adds the model-specific rows (DeepSeek, MiniCPM, MiniMax, DSA, vision, the "
                              "V4.1 indexer) and each MoE / GEMM choice, with stock SGLang's.", 0)
    return "\n".join(lines)


# The machines the README's launch table describes: (label, capability, GPUs, topology or
# None for the default a simulated node of that tier gets).
REFERENCE_MACHINES = (
    ("8x RTX PRO 6000 (SM120), PCIe with P2P", "12.0", 8, "pcie-p2p"),
    ("1x DGX Spark (SM121)", "12.1", 1, None),
    ("8x B300 (SM103), NVSwitch", "10.3", 8, "nvswitch"),
    ("8x H100 (SM90), NVSwitch", "9.0", 8, "nvswitch"),
    ("8x unknown 13.0 (default topology: PCIe, no P2P)", "13.0", 8, None),
)


def launch_table() -> str:
    """The README's "what changes at launch" table: per reference machine, each mission
    decision with stock SGLang's answer beside it.  ``test_readme.py`` compares the README
    with this, so the table follows the registry and the stock model."""
    from .arch import TOPOLOGIES, resolve
    from .arch.decisions import decide

    def cell(ours: str, theirs: str) -> str:
        return f"**{ours}** (stock: {theirs})" if ours != theirs else f"{ours} (same)"

    head = ["machine", "all-reduce decode / prefill", "torch symm mem", "custom all-reduce", "all-reduce fusion",
            "attention MHA", "attention MLA"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, cap, gpus, topology in REFERENCE_MACHINES:
        res = resolve(cap)
        d = decide(res, TOPOLOGIES[topology] if topology else None, gpus)
        s = stock.decide(res.requested, d.topology, gpus)

        def attn(ours, theirs) -> str:
            a = ours.prefill if ours.prefill == ours.decode else f"{ours.prefill} / {ours.decode}"
            b = theirs.prefill if theirs.prefill == theirs.decode else f"{theirs.prefill} / {theirs.decode}"
            return cell(a, b)

        ours, theirs = d.plan(), stock.plan(res.requested, d.topology, gpus)
        lines.append("| " + " | ".join([
            label, (cell(f"{ours.decode} / {ours.prefill}", f"{theirs.decode} / {theirs.prefill}") if gpus > 1
                    else "none: one GPU"),
            cell(_symm(d), s.symm_mem.value), cell(_car(d), s.custom_allreduce.value),
            cell(d.fusion.backend if d.fusion.enabled else "off", s.fusion.value),
            attn(d.mha, s.mha), attn(d.mla, s.mla)]) + " |")
    return "\n".join(lines) + "\n"
