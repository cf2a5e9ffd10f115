"""Bounds on the shape of the SGLang source tree the tools read, checked before a walk that
could run out of stack sees it.

Source nested deeper than CPython's own parser takes is refused by that parser
(``files.python_tree``), and the audit's visit of a syntax tree lists a file it cannot
visit for depth (``audit.scan.scan_file``).  What remains is the tree of folders: one
nested about 1,000 deep made ``os.walk`` (Python 3.11) recurse once per level and raise
RecursionError.  The walk is iterative now (``audit.scan._walk``), and the depth is still
bounded, far above anything SGLang holds (its deepest folder is under 10 levels below
``sglang/``): a tree past it is refused in one line naming the folder.
docs/configuration.md ("Bounds") lists it.
"""

from __future__ import annotations

# Folders below a scanned top folder (``srt``, ``kernels``).
MAX_FOLDER_DEPTH = 64
