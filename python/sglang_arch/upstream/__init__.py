"""``sglang-arch upstream``: the registry's core as an SGLang patch series.

``series/`` holds the files the series adds to SGLang (``kernels/backend_windows.py``,
``srt/platforms/cuda_arch.py``, ``test/platform_utils.py`` and the CPU tests of each PR), written by hand in SGLang's style and copied as they are;
``steps.py`` lists the PRs and the exact call-site edits of each; ``series.py`` plans
every step before writing any and writes them in one transaction
(``files.Transaction``), one commit per PR; ``texts.py`` fills each PR text's numbers
from the plan.
"""
