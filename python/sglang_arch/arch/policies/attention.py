"""Attention backends: what each one needs, and the default for a tier and a model.

Requirements are declared next to each backend (as FlashInfer's
``@supported_compute_capability`` does) in terms of the resolution's features and
family, so a fallback automatically drops a backend whose kernels would not run.
The default is the first backend of the tier's preference list, then the portable
tail, that passes its own check for this model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional, Tuple

from ..capability import Capability
from ..registry import Resolution

MODEL_KINDS = ("mha", "mla")
PHASES = ("prefill", "decode")
_BOTH = frozenset(PHASES)


@dataclass(frozen=True)
class Need:
    """One way a backend can run; a backend runs where any of its needs holds."""

    feature: Optional[str] = None  # a feature the resolution keeps
    family: Optional[int] = None  # the tier's major, with family code kept
    min_cc: Optional[Capability] = None  # on the resolved tier
    max_cc: Optional[Capability] = None
    kinds: FrozenSet[str] = frozenset(MODEL_KINDS)
    min_cuda: Optional[Tuple[int, int]] = None

    def holds(self, res: Resolution, kind: str, cuda: Optional[Tuple[int, int]]) -> bool:
        if res.match == "portable" or kind not in self.kinds:
            return False
        if self.feature is not None and not res.has(self.feature):
            return False
        if self.family is not None and not (res.resolved.major == self.family and res.keeps_family_code):
            return False
        if self.min_cc is not None and res.resolved < self.min_cc:
            return False
        if self.max_cc is not None and res.resolved > self.max_cc:
            return False
        if self.min_cuda is not None and (cuda is None or cuda < self.min_cuda):
            return False
        return True

    def describe(self) -> str:
        parts = []
        if self.feature:
            parts.append(self.feature)
        if self.family is not None:
            parts.append(f"SM{self.family}x")
        if self.min_cc or self.max_cc:
            parts.append(f"SM {self.min_cc or ''}..{self.max_cc or ''}")
        if self.kinds != frozenset(MODEL_KINDS):
            parts.append("/".join(sorted(self.kinds)).upper() + " only")
        if self.min_cuda:
            parts.append(f"CUDA >= {self.min_cuda[0]}.{self.min_cuda[1]}")
        return " + ".join(parts) or "any CUDA GPU"


@dataclass(frozen=True)
class BackendSpec:
    name: str
    needs: Tuple[Need, ...]
    phases: FrozenSet[str] = _BOTH
    portable: bool = False  # runs on every GPU (and without one)


def _cc(text: str) -> Capability:
    major, minor = text.split(".")
    return Capability(int(major), int(minor))


# Sources: ARCH-FACTS.md "Attention backends"; FlashInfer utils (7.5 to 12.1);
# sglang 0.5.23 model_override_base.py (fa3 on Hopper needs CUDA 12.3; SM100 paths 12.8);
# sglang issue #24633 (trtllm_mla fails on SM120).
BACKENDS: Dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec("fa3", (Need(feature="wgmma", min_cuda=(12, 3)),
                            Need(min_cc=_cc("8.0"), max_cc=_cc("8.9"), kinds=frozenset({"mha"})))),
        BackendSpec("fa4", (Need(feature="tcgen05"), Need(family=12))),
        BackendSpec("trtllm_mha", (Need(feature="wgmma"), Need(feature="tcgen05", min_cuda=(12, 8)),
                                   Need(family=12, min_cuda=(12, 8))), ),
        BackendSpec("trtllm_mla", (Need(feature="tcgen05", family=10, kinds=frozenset({"mla"}), min_cuda=(12, 8)),)),
        BackendSpec("cutedsl_mla", (Need(feature="tcgen05", family=10, kinds=frozenset({"mla"})),),
                    phases=frozenset({"decode"})),
        BackendSpec("flashinfer", (Need(min_cc=_cc("7.5"), max_cc=_cc("12.1")),)),
        BackendSpec("triton", (Need(),), portable=True),
        BackendSpec("torch_native", (Need(),), portable=True),
    )
}


@dataclass(frozen=True)
class ModelTraits:
    """What the attention default depends on besides the GPU."""

    kind: str = "mha"  # "mha" | "mla"
    asymmetric_kv: bool = False  # K and V head sizes differ
    attention_sinks: bool = False
    speculative_multi_branch: bool = False  # speculative top-k > 1 (or top-k 1 with pages > 1)
    speculative_topk_pending: bool = False  # speculative on, top-k not decided yet
    cross_attention_needs_flashinfer: bool = False  # Whisper-style cross attention
    flashinfer_available: bool = True
    cuda: Optional[Tuple[int, int]] = (13, 0)

    def __post_init__(self) -> None:
        if self.kind not in MODEL_KINDS:
            raise ValueError(f"invalid model kind {self.kind!r}; accepted: {', '.join(MODEL_KINDS)}")


@dataclass(frozen=True)
class Validity:
    valid: Optional[bool]  # None: a backend this registry has no requirements for
    reason: str
    alternatives: Tuple[str, ...] = ()


@dataclass(frozen=True)
class AttentionDecision:
    prefill: str
    decode: str
    reason: str


def check_backend(res: Resolution, name: str, kind: str = "mha", phase: str = "prefill",
                  cuda: Optional[Tuple[int, int]] = (13, 0)) -> Validity:
    """Whether ``name`` can run here; when not, which backends can."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"invalid model kind {kind!r}; accepted: {', '.join(MODEL_KINDS)}")
    if phase not in PHASES:
        raise ValueError(f"invalid phase {phase!r}; accepted: {', '.join(PHASES)}")
    spec = BACKENDS.get(name)
    if spec is None:
        return Validity(None, f"{name!r} has no requirements in this registry; not checked")
    ok, why = _runs(spec, res, kind, phase, cuda)
    if ok:
        return Validity(True, f"{name} runs on tier {res.resolved} ({res.match}): {why}")
    alternatives = tuple(b for b, s in BACKENDS.items() if _runs(s, res, kind, phase, cuda)[0])
    return Validity(False, f"{name} cannot run {kind.upper()} {phase} on {res.requested} "
                           f"(tier {res.resolved}, {res.match}): needs {why}", alternatives)


def _runs(spec: BackendSpec, res: Resolution, kind: str, phase: str,
          cuda: Optional[Tuple[int, int]]) -> Tuple[bool, str]:
    if phase not in spec.phases:
        return False, f"{'/'.join(sorted(spec.phases))} only"
    for need in spec.needs:
        if (spec.portable and kind in need.kinds) or need.holds(res, kind, cuda):
            return True, need.describe()
    return False, " or ".join(n.describe() for n in spec.needs)


def default_backend(res: Resolution, traits: ModelTraits) -> AttentionDecision:
    """The attention backend a server picks when none is given."""
    prefs = res.profile.attention_mla if traits.kind == "mla" else res.profile.attention_mha
    skipped = []
    if traits.cross_attention_needs_flashinfer:
        # Whisper's cross attention needs flashinfer for CUDA graphs; where flashinfer
        # cannot run, the normal choice below is the only one that works.
        check = check_backend(res, "flashinfer", traits.kind, "prefill", traits.cuda)
        if check.valid:
            return AttentionDecision("flashinfer", "flashinfer", "cross attention needs flashinfer")
        skipped.append("flashinfer for cross attention (cannot run here)")
    for name in prefs:
        blocked = _model_blocks(name, traits)
        if blocked:
            skipped.append(f"{name} ({blocked})")
            continue
        if traits.kind == "mha" and name == "trtllm_mha" and traits.asymmetric_kv:
            name = "fa4"  # carries v_head_dim through; trtllm_mha needs equal K/V widths
        check = check_backend(res, name, traits.kind, "prefill", traits.cuda)
        if check.valid:
            note = f"; skipped {', '.join(skipped)}" if skipped else ""
            return AttentionDecision(name, name, f"tier {res.resolved} prefers {name}{note}")
        skipped.append(f"{name} (cannot run: {check.reason.split(': needs ')[-1]})")
    tail = _portable_tail(res, traits)
    note = f" after {', '.join(skipped)}" if skipped else ""
    return AttentionDecision(tail, tail, f"tier {res.resolved} ({res.match}): portable default {tail}{note}")


def _model_blocks(name: str, traits: ModelTraits) -> Optional[str]:
    """Model and speculative settings that rule a preferred MHA backend out."""
    if traits.kind != "mha":
        return None
    if name in ("fa3", "trtllm_mha") and traits.speculative_multi_branch:
        return "speculative top-k > 1"
    if name == "trtllm_mha" and traits.speculative_topk_pending:
        return "speculative top-k not decided"
    return None


def _portable_tail(res: Resolution, traits: ModelTraits) -> str:
    """MLA: triton.  MHA: flashinfer where it is installed, runs here and the model has
    no attention sinks (FlashInfer has none), else triton."""
    if (traits.kind == "mha" and traits.flashinfer_available and not traits.attention_sinks
            and check_backend(res, "flashinfer", "mha", "prefill", traits.cuda).valid):
        return "flashinfer"
    return "triton"
