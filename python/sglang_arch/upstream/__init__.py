"""``sglang-arch upstream``: the registry and its routed call sites as an SGLang patch series.

``sites.py`` lists the steps and the call sites each routes (the plugin's targets are
the spec), ``rewriter.py`` rewrites a module with libcst (additive, formatting and
comments kept, idempotent, all-or-nothing per module) and ``replace.py`` makes the edits
that delete what the registry replaces (both on the helpers of ``nodes.py``),
``series.py`` plans every step before writing any and writes them in one transaction
(``files.Transaction``), one commit per concern, ``imports.py`` tells whether a module
still imports one a step removes, ``glue.py`` copies the plugin's glue
modules into ``sglang/srt/arch/glue/`` (translating their registry imports), and
``texts.py`` serves the templates: the PR descriptions used as commit messages and the
registry README.  libcst is imported only when the command runs.
"""
