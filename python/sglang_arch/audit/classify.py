"""Which concern a capability site belongs to: the rules, as data, in one place.

``concern_for(file, scope, code)`` walks ``PATH_RULES`` (first match wins) and, for
files whose lines serve several concerns (server arguments, the model runner), the
``LINE_RULES`` that look at the site's line and its enclosing function.  Attention
sites get their kind (``mha``, ``mla``, ``dsa``, ``linear``, ``other``) from the file
name (``ATTENTION_KINDS``) or from the backend named on the line.

``file`` is relative to the sglang package root (``srt/...``, ``kernels/...``).
"""

from __future__ import annotations

import re
from typing import Optional, Tuple

CONCERNS = ("collectives", "fusion", "attention/mha", "attention/mla", "attention/dsa", "attention/linear",
            "attention/other", "moe", "quantization", "gemm", "speculative", "model", "jit", "platform", "other")

# Attention kind from a path or a backend name (first match wins).
ATTENTION_KINDS: Tuple[Tuple[str, str], ...] = (
    (r"nsa|dsa|dsv4|deepseek_v4|v41_indexer|sparse|qsa|index_topk|mqa_logits|msa", "dsa"),
    (r"mla", "mla"),
    (r"linear|gdn|mamba|fla\b|fla/|lightning|kda|short_conv|sconv|hybrid_linear|causal_conv", "linear"),
    (r"flashinfer|triton|flashattention|\bfa3\b|\bfa4\b|trtllm_mha|aiter|torch_native|torch_flex|wave|"
     r"xpu|hpc_ops|intel_amx|ascend|local_attention|dots_hybrid|hybrid_attn|llada2|vision|minicpm|tbo", "mha"),
)

# Path rules: (regex on the file, concern).  "attention" means attention/<kind>.
PATH_RULES: Tuple[Tuple[str, str], ...] = (
    (r"^srt/layers/flashinfer_comm_fusion\.py$", "fusion"),
    (r"^srt/layers/layer_boundary/", "fusion"),
    (r"^srt/layers/communicator\.py$", "fusion"),
    (r"^srt/distributed/", "collectives"),
    (r"^srt/layers/communication/", "collectives"),
    (r"^srt/layers/attention/", "attention"),
    (r"^srt/layers/moe/|^srt/layers/muse_spark/.*moe|^srt/eplb/|^srt/lora/moe/", "moe"),
    (r"^srt/layers/quantization/|^srt/layers/muse_spark/", "quantization"),
    (r"^srt/layers/deep_gemm_wrapper/|gemm", "gemm"),
    (r"^srt/speculative/", "speculative"),
    (r"^srt/models/", "model"),
    (r"^kernels/|^jit_kernel/|^srt/compilation/", "jit"),
    (r"^srt/platforms/|^srt/utils/common\.py$|^srt/runtime_context\.py$|^srt/hardware_backend/", "platform"),
)

# Lines of files that decide for several concerns: (regex on the file, regex on
# "<scope> <code>", concern).  Checked before PATH_RULES.
_ATTN_WORDS = r"attn|attention|mla|nsa|dsa|flashinfer_backend|fa3|fa4|flashmla|cutlass_mla|trtllm_m|prefill_backend|decode_backend"
MIXED_FILES = r"^srt/(arg_groups/|server_args\.py$|model_executor/|managers/|configs/model_config\.py$)"
LINE_RULES: Tuple[Tuple[str, str, str], ...] = (
    (MIXED_FILES, r"allreduce_fusion|all_reduce_fusion|ar_fusion|comm_fusion", "fusion"),
    (MIXED_FILES, r"symm_mem|custom_all_reduce|custom_ar|all_reduce|allreduce|pynccl|nccl", "collectives"),
    (MIXED_FILES, _ATTN_WORDS, "attention"),
    (MIXED_FILES, r"moe|expert|deepep|mega_moe", "moe"),
    (MIXED_FILES, r"quant|fp8|fp4|nvfp4|mxfp4|w4a|awq|gptq|marlin", "quantization"),
    (MIXED_FILES, r"gemm", "gemm"),
    (MIXED_FILES, r"speculative|eagle|spec_|draft|mtp", "speculative"),
)


def attention_kind(text: str) -> str:
    low = text.lower()
    for pattern, kind in ATTENTION_KINDS:
        if re.search(pattern, low):
            return kind
    return "other"


def concern_for(file: str, scope: str = "", code: str = "") -> str:
    """The concern of a site in ``file`` (relative to the package root)."""
    context = f"{scope} {code}"
    for path_re, line_re, concern in LINE_RULES:
        if re.search(path_re, file) and re.search(line_re, context, re.IGNORECASE):
            return _attention(concern, context)
    for path_re, concern in PATH_RULES:
        if re.search(path_re, file):
            return _attention(concern, file[len("srt/layers/attention/"):] if concern == "attention" else "")
    return "other"


def _attention(concern: str, text: str) -> str:
    return f"attention/{attention_kind(text)}" if concern == "attention" else concern


def evaluated(function: Optional[str]) -> str:
    """``call`` inside a function (or lambda), ``import`` at module level or in a class body."""
    return "call" if function else "import"
