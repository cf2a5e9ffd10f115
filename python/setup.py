"""Ships ``sglang_arch_early.pth`` at the top of site-packages (see ``_sglang_arch_early.py``).

Everything else is in pyproject.toml.  A ``.pth`` file is not part of any package, so
setuptools needs two small commands to put it in the wheel: ``build_py`` for a normal
install and ``editable_wheel`` for ``pip install -e``.
"""

import os

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "sglang_arch_early.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


class build_py_with_pth(build_py):
    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH), preserve_mode=0)

    def get_outputs(self, include_bytecode=True):
        return list(super().get_outputs(include_bytecode)) + [os.path.join(self.build_lib, PTH)]


class _WithPth:
    """An editable strategy that also writes the early-routing ``.pth`` file."""

    def __init__(self, inner):
        self._inner = inner

    def __call__(self, wheel, files, mapping):
        self._inner(wheel, files, mapping)
        with open(os.path.join(HERE, PTH), encoding="utf-8") as fh:
            wheel.writestr(PTH, fh.read())

    def __enter__(self):
        self._inner.__enter__()
        return self

    def __exit__(self, *exc):
        return self._inner.__exit__(*exc)


class editable_wheel_with_pth(editable_wheel):
    def _select_strategy(self, *args, **kwargs):
        return _WithPth(super()._select_strategy(*args, **kwargs))


setup(cmdclass={"build_py": build_py_with_pth, "editable_wheel": editable_wheel_with_pth})
