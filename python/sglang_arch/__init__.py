"""sglang-arch: one GPU architecture registry for SGLang.

``sglang_arch.arch`` is the registry (pure Python, drop-in as ``sglang/srt/arch``);
``sglang_arch.integrations.sglang`` routes a real SGLang through it as a plugin;
``sglang_arch.upstream`` writes the same change into an SGLang source tree.
"""

__version__ = "0.1.0"
