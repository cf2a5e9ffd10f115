"""Which CUDA toolkit a build on this machine would use, found as torch's extension builds find it.

SGLang's JIT kernels and ``torch.utils.cpp_extension`` take the toolkit from
``_find_cuda_home``: ``CUDA_HOME``, else ``CUDA_PATH`` (an empty value counts as unset), else
the folder above the ``nvcc`` on PATH, else ``/usr/local/cuda`` where it exists.  ``gencode``
must name the targets of that same toolkit, so it asks in the same order; an ``nvcc`` first on
PATH does not win over ``CUDA_HOME``.
"""

from __future__ import annotations

import os
import shutil
from typing import Callable, Mapping, Optional, Tuple

DEFAULT_CUDA_HOME = "/usr/local/cuda"


def find_cuda_home(environ: Optional[Mapping[str, str]] = None,
                   which: Callable[[str], Optional[str]] = shutil.which,
                   exists: Callable[[str], bool] = os.path.exists) -> Optional[str]:
    """torch's ``_find_cuda_home`` (torch/utils/cpp_extension.py), without its warning and
    without importing torch.  Like torch, a CUDA_HOME or CUDA_PATH that is set is returned as
    given (not checked); only the last guess is checked for existence."""
    env = os.environ if environ is None else environ
    home = env.get("CUDA_HOME") or env.get("CUDA_PATH")
    if home is None:
        nvcc = which("nvcc")
        if nvcc is not None:
            return os.path.dirname(os.path.dirname(nvcc))
        return DEFAULT_CUDA_HOME if exists(DEFAULT_CUDA_HOME) else None
    return home


def find_nvcc(environ: Optional[Mapping[str, str]] = None,
              which: Callable[[str], Optional[str]] = shutil.which,
              exists: Callable[[str], bool] = os.path.exists) -> Tuple[Optional[str], str]:
    """``(nvcc, where)``: the ``nvcc`` of the toolkit ``find_cuda_home`` names (``<home>/bin/nvcc``;
    the ``nvcc`` on PATH itself where PATH named the toolkit) and where that toolkit came from
    (``CUDA_HOME``, ``CUDA_PATH``, ``PATH`` or ``/usr/local/cuda``); or ``(None, why)`` where
    no toolkit is named."""
    env = os.environ if environ is None else environ
    home = find_cuda_home(env, which, exists)
    if not home:
        return None, f"CUDA_HOME and CUDA_PATH unset, no nvcc on PATH and no {DEFAULT_CUDA_HOME}"
    if env.get("CUDA_HOME"):
        where = "CUDA_HOME"
    elif env.get("CUDA_PATH"):
        where = "CUDA_PATH"
    else:
        on_path = which("nvcc")
        if on_path is not None:  # torch's home is the folder above it: for an install's bin/, this file
            return on_path, "PATH"
        where = DEFAULT_CUDA_HOME
    return os.path.join(home, "bin", "nvcc"), where
