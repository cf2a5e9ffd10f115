"""What a capability site decides: its concern and its kind, the rules as data in one place.

Concern: from what the site decides, never from its file's folder.  A site that
picks a dtype (its function's or its bound name ends in ``dtype``) decides a precision:
quantization.  A decision is then filed by what the code it controls selects
(``Context.selects``, ``selected_concern``): a server setting it writes
(``SELECTED_FIELDS``: an assigned attribute, a keyword, a string key), an attention backend it
names as a value; a decision that sets only a kernel's launch parameters (``LAUNCH_FIELDS``)
is ``other``.  An early exit (``if not <cap>: return None``) selects what the code after it
does, and where nothing names that work, its module's name does (the last layer below).
Otherwise the words are read in layers (``concern_for``): the site's own
line; the function it is in; the names it binds; the code its check controls (the
branches of its ``if``, the statement it is in); the class it is in.  The first layer
that names a concern decides (the concern named most often in it; ties go to
``CONCERNS`` order).  Words that name what is none of the concerns (rope, multi-stream
overlap and its batch-size limits; mHC in a function's or bound name) count for
``other`` in the first three layers only.  A site in a function that launches a Triton
kernel (``kernel[grid](...)``) decides how that kernel launches (a tile size, a
``num_warps`` / ``num_stages`` / ``launch_pdl``, a split-K, a variant), not which
backend runs: the words that name what the kernel computes (attention, MoE, a quantized
or a GEMM kernel: ``LAUNCHED``) file it ``other`` there (a dtype it picks stays
quantization, above).
``attn_dp_size`` / ``attn_tp_size`` / ``is_dp_attention_enabled`` are parallel sizes,
not attention.  Words are split
into lower-case tokens (``FlashInferAttnBackend`` -> ``flash infer attn backend``,
``fa3`` -> ``fa 3``, ``gemma`` stays ``gemma``), so a rule matches whole tokens.
Attention sites get their kind (``mha``, ``mla``, ``dsa``, ``linear``, ``other``) from
the backend they name (``ATTENTION_KINDS``), else from the file's name.

Kind (``kind_for``):

``gate``      which compiled kernel can run here, or a requirement check: a site listed
              in ``gates.py`` (file, function, check, SGLang's own words), a kernel's
              capability window, an ``assert``, a check whose only branch raises, a
              check that picks a kernel named for an architecture (``...Sm90``, or
              imported from a module so named: ``decode_attention_sm100``), a
              support check (``_is_fa3_supported``, ``*_available``), a JIT build
``fact``      the identity itself: the definition of a probe, a value bound to a name
              whose uses are sites of their own (a local, a ``self.`` attribute, a
              module-level flag), a value only logged (in a log call's arguments, or a
              check whose branches only log), the value a capability helper returns
              (``..._capability()``) as it is, a check that only registers torch.compile
              metadata (``METADATA_SITES``: a fake implementation, site by site)
``decision``  everything else: the site picks a backend, a size, on/off
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional, Sequence, Tuple

from .scan import COMPILE_ARCH_CALL, IDENTITY_CALLS, PROBE_NAME, RawSite

CONCERNS = ("collectives", "fusion", "attention/mha", "attention/mla", "attention/dsa", "attention/linear",
            "attention/other", "moe", "quantization", "gemm", "speculative", "platform", "other")
THREE = ("collectives", "fusion", "attention/")
# What a kernel launched from a function computes (its words name the kernel, not what the
# site decides): inside a Triton launcher these concerns file a site ``other``.
LAUNCHED = ("attention", "moe", "quantization", "gemm")
KINDS = ("decision", "gate", "fact")

# Concern rules on tokens (first listed wins a tie).  "attention" means attention/<kind>.
CONCERN_RULES: Tuple[Tuple[str, str], ...] = (
    ("fusion", r"\b(all ?reduce|ar|comm) fusion\b|\bfuse[sd]? (all ?reduce|ar)\b|\bflash ?infer (ar|all ?reduce)\b"
               r"|\bar (token|norm|rms ?norm|fusion)\b|\ball ?reduce (add )?(rms ?)?norm\b|\blayer boundary\b"
               r"|\bcutedsl ar\b|\bfused (all ?reduce|ar)\b|\ball ?reduce fusion\b|\bpush plane\b"),
    ("collectives", r"\bsymm mem\b|\bcustom (all ?reduce|ar)\b|\ball ?reduce\b|\bp?y?nccl\b|\bmultimem\b"
                    r"|\ball (gather|to all)\b|\breduce scatter\b|\bsp collective\b|\bcollectives?\b|\bmnnvl\b"
                    r"|\b(one|two) shot\b|\bcommunicator\b|\bnvshmem\b|\bcuda ipc\b"),
    ("attention", r"\battn\b(?! (dp|tp|cp|pp) )|(?<!\bdp )\battention\b|\bfa [234]\b|\bflash (attn|attention|mla)\b|\bflashmla\b"
                  r"|\bcutlass mla\b|\btrtllm (mha|mla|gen)\b|\bmla\b|\bnsa\b|\bdsa\b|\bindexer\b|\bmqa\b"
                  r"|\bsparse (attn|mla|attention|prefill|decode)\b|\bkv cache (dtype|quant)?\b|\bgdn\b|\bkda\b"
                  r"|\bmamba\b|\blinear attn\b|\b(prefill|decode|draft) backend\b|\bsdpa\b"
                  r"|\bflash ?infer (backend|mla|prefill|decode)\b|\bvit\b|\bhpc ops\b"),
    ("moe", r"\bmoe\b|\bexperts?\b|\bdeep ?ep\b|\beplb\b|\bgrouped topk\b|\brouted\b"),
    ("quantization", r"\bquant\w*|\bdequant\w*|\bfp (8|4)\b|\bnvfp 4\b|\bmxfp (4|8)\b|\bint (4|8)\b"
                     r"|\bw (4|8) a (4|8|16)\b|\bawq\b|\bgptq\b|\bmarlin\b|\bue 8 m 0\b|\bmodelopt\b|\bscales?\b"),
    ("gemm", r"\bgemm\b|\bgemv\b|\bcublas\w*|\bmatmul\b|\bbmm\b|\bscaled mm\b|\bcutlass mm\b"),
    ("speculative", r"\bspeculative\b|\beagle\b|\bdraft\b|\bmtp\b|\bspec (decode|decoding|infer)\b"),
    # what is none of the concerns above, named (so its words outvote an attention class
    # or file around it): rope, multi-stream overlap and its batch-size limits, and
    # hyper-connections (mHC, ``MHC`` below: read only in a function's or a bound name)
    ("other", r"\brope\b|\brotary\b|\bmulti stream\b|\balt stream\b|\bbs limit\b|\bstream overlap\b"
              r"|\b(ts|launch|tuned|pinned) config\b|\btactic\b"),
)
# mHC names what a function or a bound name is about; on a line it is often only the
# module a helper comes from (``mhc.fused_mhc_tp_ok(...)`` beside a fused all-reduce).
MHC = re.compile(r"\bm?hc\b|\bhyper connections?\b")
_RULES = tuple((concern, re.compile(rx)) for concern, rx in CONCERN_RULES)

# What a decision selects, read from the structure of the code it controls (``Context.selects``,
# scan.py) before any words: the server setting it writes (an attribute, a keyword, a string
# key; its pattern must match the whole name) or an attention backend it names as a value.
# A concern here is what the value configures, so it holds however the names around the
# check read (``if not <cap>: return {}`` before ``{"decode_attention_backend": ...}``).
SELECTED_FIELDS: Tuple[Tuple[str, str], ...] = (
    ("fusion", r"enable_flashinfer_allreduce_fusion|\w*all_?reduce_fusion\w*|\w*ar_fusion\w*"),
    ("collectives", r"enable_(torch_)?symm_mem|disable_custom_all_reduce|enable_nccl_nvls|\w*custom_all_reduce\w*"
                    r"|\w*symm_mem\w*_sizes?"),
    ("attention", r"(prefill_|decode_|speculative_draft_|draft_|mm_|vit_|dsv4_|linear_)?(attention|attn)_backend"
                  r"|linear_attn_\w*backend|(nsa|dsa)_(prefill|decode)\w*_backend|fa_impl_ver|attn_impl"),
    ("moe", r"moe_runner_backend|moe_a2a_backend|moe_backend"),
    ("gemm", r"(fp8|fp4|bf16|w8a8)_gemm(_runner)?_backend|gemm_backend"),
    ("quantization", r"kv_cache_dtype|quantization"),
)
_SELECTED_FIELDS = tuple((c, re.compile(rx)) for c, rx in SELECTED_FIELDS)
# Attention backends named as values (SGLang's --attention-backend choices that name nothing else:
# ``triton`` and ``flashinfer`` also name MoE runners and fusion backends, so they are not read).
SELECTED_ATTENTION_VALUES = frozenset({
    "fa3", "fa4", "trtllm_mha", "trtllm_mla", "cutlass_mla", "flashmla", "flashmla_sparse", "flashmla_kv",
    "flashmla_auto", "flex_attention", "torch_native", "minicpm_flashattn", "minicpm_flashinfer", "fa3_sparse",
})


# A kernel's launch parameters: a decision that sets only these decides how a kernel launches
# (a cluster size, warps, stages, a tile, a split), not which backend runs: ``other``.
LAUNCH_FIELDS = re.compile(r"(cluster_size|num_warps|num_stages|num_ctas|threads_per_\w+|split_k|\w*block_(m|n|k)|"
                           r"block_size_\w+|tile_\w+|\w*_tile|rows_per_prog|num_sms|launch_pdl|bs_limit)", re.IGNORECASE)


def selected_concern(selects: Sequence[str]) -> Optional[str]:
    """The concern of what ``selects`` configures (``SELECTED_FIELDS``, then the attention
    backends among its values); the one named most often, ties to ``SELECTED_FIELDS`` order.
    ``other`` where every setting it writes is a kernel's launch parameter."""
    fields = [s.partition(":")[2] for s in selects if s.startswith("field:")]
    if fields and all(LAUNCH_FIELDS.fullmatch(f) for f in fields):
        return "other"
    counts = {}
    for item in selects:
        what, _, name = item.partition(":")
        if what == "field":
            for concern, rx in _SELECTED_FIELDS:
                if rx.fullmatch(name):
                    counts[concern] = counts.get(concern, 0) + 1
                    break
        elif name in SELECTED_ATTENTION_VALUES:
            counts["attention"] = counts.get("attention", 0) + 1
    if not counts:
        return None
    order = [c for c, _ in SELECTED_FIELDS]
    return max(counts, key=lambda c: (counts[c], -order.index(c)))


# Attention kind from a backend name, the site's words or the file (first match wins).
ATTENTION_KINDS: Tuple[Tuple[str, str], ...] = (
    (r"nsa|dsa|dsv4|deepseek_v4|v41_indexer|sparse|qsa|index_topk|mqa_logits|msa|indexer", "dsa"),
    (r"mla", "mla"),
    (r"linear|gdn|mamba|fla\b|fla/|lightning|kda|short_conv|sconv|hybrid_linear|causal_conv", "linear"),
    (r"flashinfer|triton|flashattention|\bfa3\b|\bfa4\b|trtllm_mha|aiter|torch_native|torch_flex|wave|"
     r"xpu|hpc_ops|intel_amx|ascend|local_attention|dots_hybrid|hybrid_attn|llada2|vision|minicpm|tbo|"
     r"\bfa\b|flash_attn|sdpa|mha|vit\b", "mha"),
)

# A kernel named for an architecture (``FlashAttentionForwardSm90``, ``_sm100_kernel``,
# ``sm_90a``), or code only an architecture has (tcgen05, wgmma, TMEM).
ARCH_KERNEL = re.compile(r"\bsm (8|9|10|11|12)\d( ?[af])?\b|\bsm (80|86|89|90|100|103|110|120|121)\b"
                         r"|\btcgen 05\b|\bwgmma\b|\btmem\b")
# A function whose name says it checks whether something can run here.
SUPPORT_CHECK = re.compile(r"(^|_)(supported|supports?|available|compatible|can_use|can_run|requires?)(_|$)|"
                           r"^_?(is|can|check|has)_.*(supported|available|compatible|ok)$")

# What a site decides when it picks a dtype: the precision a value is stored or computed
# in (``get_..._index_dtype``, ``packed_dtype = ...``) is quantization, whatever attention
# words surround it (the KV-cache dtype it reads is an input, not what it picks).
DTYPE_DECIDED = re.compile(r"(^|_)dtype$")

# A function that returns the capability itself (``convrot_int8_local_capability``): a
# helper whose callers' checks are the sites.
CAPABILITY_HELPER = re.compile(r"(^|_)(capability|compute_capability|cuda_capability|sm_version|device_sm|"
                               r"device_capacity)$")

# A function that builds (JIT-compiles) a kernel for the device.
JIT_BUILD = re.compile(r"(^|_)jit(_|$)|compile")

_IDENT = re.compile(r"[^\W\d]\w*")
_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@lru_cache(maxsize=65536)
def tokens(text: str) -> str:
    """``text``'s words as lower-case tokens split at case changes, digits and ``_``."""
    return " " + " ".join(t.lower() for t in _TOKEN.findall(text)) + " "


def attention_kind(text: str) -> str:
    low = text.lower()
    for pattern, kind in ATTENTION_KINDS:
        if re.search(pattern, low):
            return kind
    return "other"


def _concern_in(text: str, named_other: bool = True, mhc: bool = False) -> Optional[str]:
    """The concern ``text`` names most often; without ``named_other``, the ``other`` rule
    is not read (the code a check controls may use a rope or stream helper beside what it
    decides); with ``mhc``, mHC's names count for ``other``."""
    toks = tokens(text)
    best, score = None, 0
    for concern, rx in _RULES:
        if concern == "other" and not named_other:
            continue
        n = len(rx.findall(toks)) + (len(MHC.findall(toks)) if concern == "other" and mhc else 0)
        if n > score:
            best, score = concern, n
    return best


def concern_for(site: RawSite, kind: str = "decision") -> str:
    """The concern of ``site``: what it decides (module docstring)."""
    scope = site.scope.split(".")
    function = scope[-1] if site.function else ""
    if kind == "fact" and _defines_identity(site):
        return "platform"
    if site.context.role in ("test", "return", "bind") and any(
            DTYPE_DECIDED.search(n) for n in (function,) + site.context.binds):
        return "quantization"
    layers = (site.code, function, " ".join(site.context.binds), site.context.words,
              " ".join(scope[:-1] if site.function else scope))
    if site.context.exits and site.function:
        # an early exit decides whether its function's work happens: where nothing above names
        # that work, the module the function serves does (``k3_ar_fusion._get_state``)
        layers += (site.file.rsplit("/", 1)[-1][:-3],)
    selected = selected_concern(site.context.selects) if kind == "decision" else None
    if selected is not None:
        if selected != "attention":
            return selected
        values = " ".join(v.partition(":")[2] for v in site.context.selects)
        return _attention_concern(site, values + " " + " ".join(layers))
    for i, layer in enumerate(layers):
        concern = _concern_in(layer, named_other=i < 3, mhc=i in (1, 2))
        if concern is not None:
            if site.launcher and concern in LAUNCHED:
                return "other"
            if concern != "attention":
                return concern
            return _attention_concern(site, " ".join(layers))
    return "platform" if kind == "fact" else "other"


def _attention_concern(site: RawSite, text: str) -> str:
    """``attention/<kind>``: the kind ``text`` names (``ATTENTION_KINDS``), else the file's."""
    sub = attention_kind(text)
    return f"attention/{sub if sub != 'other' else attention_kind(site.file.rsplit('/', 1)[-1])}"


def _defines_identity(site: RawSite) -> bool:
    """Inside the definition of an identity probe (``is_sm90_supported``, ``get_device_sm``,
    ``get_jit_cuda_arch``...) or of a platform class's capability method."""
    names = (site.scope.split(".") if site.scope else []) + list(site.context.binds if not site.function else ())
    return any(PROBE_NAME.match(n) or n in IDENTITY_CALLS or n in ("_check_cuda_device_version", "get_device_sm",
                                                                     "_init_jit_cuda_arch_once")
               for n in names)


# Checks that register torch.compile metadata for an op (a fake, shape-only implementation),
# not a kernel: whichever way they go, the same kernel runs or none.  Site by site, as
# (file, function ("" at module level), text of the site's line, reason in SGLang's words).
METADATA_SITES: Tuple[Tuple[str, str, str, str], ...] = (
    ("srt/layers/quantization/modelopt_quant.py", "", "(fp4_quantize is not None)",
     "registers torch.compile metadata, not a kernel: the fake of sgl_kernel::scaled_fp4_quant through "
     "register_fake_if_exists ('Registers the fake if present; otherwise, returns the function unchanged', "
     "utils/patch_torch.py:116), a body that returns nothing; sglang-kernel 0.4.10 defines no such op in "
     "either build (sm90 / sm100 common_ops.abi3.so), so no kernel is picked either way"),
)


def metadata_reason(site: RawSite) -> Optional[str]:
    for file, function, check, reason in METADATA_SITES:
        if site.file == file and site.scope == function and check in site.code:
            return reason
    return None


def kind_for(site: RawSite, gate_reason: Optional[str] = None) -> Tuple[str, str]:
    """(kind, why) of ``site``; ``gate_reason``: the site is listed in ``gates.py``."""
    ctx = site.context
    kinds = {e.kind for e in site.exprs}
    if gate_reason:
        return "gate", gate_reason
    if _defines_identity(site):
        return "fact", "defines an identity probe"
    metadata = metadata_reason(site)
    if metadata:
        return "fact", metadata
    if "window" in kinds:
        return "gate", "a kernel's capability window: what it is built for"
    if site.exprs and all(e.name == f"{COMPILE_ARCH_CALL}()" for e in site.exprs):
        return "gate", "the architecture a CuTe DSL kernel is compiled for: code generation for its target"
    if ctx.role == "assert":
        return "gate", "asserts a requirement of the code it guards"
    if ctx.role == "test" and ctx.raises:
        return "gate", "a requirement check: its only branch raises"
    if ctx.role in ("test", "return", "bind") and ARCH_KERNEL.search(tokens(ctx.controls)):
        return "gate", "picks the kernel built for the device's architecture (an arch-named kernel)"
    function = site.scope.rsplit(".", 1)[-1] if site.function else ""
    if ctx.role in ("return", "test") and SUPPORT_CHECK.search(function):
        return "gate", f"a support check ({function}): whether its kernel can run here"
    if JIT_BUILD.search(function):
        return "gate", f"builds a kernel for the device ({function}: JIT, what it compiles for)"
    checks = [w for w in _IDENT.findall(site.code) if SUPPORT_CHECK.search(w.lstrip("_")) and not PROBE_NAME.match(w)]
    if ctx.role in ("test", "return") and checks:
        return "gate", f"uses the support check {', '.join(dict.fromkeys(checks))}: whether its kernel can run here"
    if ctx.role == "test" and ctx.logs:
        return "fact", "only in a message: a check whose branches only log"
    if "table" in kinds or ctx.conditional:
        return "decision", ""
    if site.cached_flag:
        return "fact", "the identity cached at import; its uses are sites"
    if ctx.role == "bind":
        return "fact", f"binds the identity to {', '.join(ctx.binds) or 'a name'}; its uses are sites"
    if ctx.role == "return" and CAPABILITY_HELPER.search(function):
        return "fact", f"returns the identity ({function}): a helper that reports the capability"
    if ctx.log:
        return "fact", "only in a message (a log call, an error, an f-string)"
    if ctx.role == "pass":
        return "fact", "passed on as it is to a call (the callee's sites decide)"
    return "decision", ""


def in_three(concern: str) -> bool:
    return concern.startswith(THREE)


def evaluated(function: Optional[str]) -> str:
    """``call`` inside a function (or lambda), ``import`` at module level or in a class body."""
    return "call" if function else "import"


def concerns_in(sites: Sequence) -> Tuple[str, ...]:
    present = {s.concern for s in sites}
    return tuple(c for c in CONCERNS if c in present)
