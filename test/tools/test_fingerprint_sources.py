"""A hooked SGLang module read as Python reads it, whatever its encoding or depth.

* A module with a UTF-8 byte-order mark, or in latin-1 with its coding declaration, is the
  same module to Python: its definitions have the fingerprints of the UTF-8 text, and
  ``show`` (which reads the file) agrees with the plugin (which reads the function).
* A hooked function holding a valid expression thousands of terms deep is fingerprinted
  (it differs from the release's, so its hook keeps SGLang's code); ``show`` answers,
  with no RecursionError, and the plugin's check names the target.
"""

import os
import sys
import types

import pytest

from sglang_arch.cli import main
from sglang_arch.integrations.sglang import fingerprint, status, targets

SYMM = "sglang.srt.distributed.device_communicators.torch_symm_mem"
TARGET = f"{SYMM}.TorchSymmMemCommunicator.__init__"


def installed_file():
    root = fingerprint.installed_root()
    path = root and fingerprint.module_file(root, SYMM)
    if path is None:
        pytest.skip("SGLang is not installed")
    return path


def target():
    return next(t for t in targets.all_targets() if t.path == TARGET)


@pytest.fixture
def module_at(monkeypatch):
    """Point the target's module at a file of the test's (the other modules stay where they are)."""
    real = targets._module_path

    def use(path):
        monkeypatch.setattr(targets, "_module_path", lambda module: path if module == SYMM else real(module))
        targets._FILES.clear()
        status._CHECKED.clear()

    yield use
    targets._FILES.clear()
    status._CHECKED.clear()


@pytest.mark.parametrize("encoding", ["bom", "latin-1"])
def test_a_module_in_another_encoding_python_reads_is_the_same_module(tmp_path, module_at, encoding):
    text = open(installed_file(), encoding="utf-8").read()
    path = tmp_path / "sglang" / "srt" / "distributed" / "device_communicators" / "torch_symm_mem.py"
    path.parent.mkdir(parents=True)
    if encoding == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    else:
        path.write_bytes(("# -*- coding: latin-1 -*-\n# caf\u00e9\n" + text).encode("latin-1"))
    expected = fingerprint.of_file(installed_file(), "TorchSymmMemCommunicator.__init__")
    assert expected is not None
    assert fingerprint.of_file(str(path), "TorchSymmMemCommunicator.__init__") == expected
    assert fingerprint.of_tree(str(tmp_path), [target()]) == {TARGET: expected}  # the whole module parsed
    module_at(str(path))
    assert targets.file_problem(target()) is None


def test_show_and_the_plugin_agree_on_a_module_in_latin_1(tmp_path, module_at, monkeypatch, capsys):
    text = open(installed_file(), encoding="utf-8").read()
    path = tmp_path / "torch_symm_mem.py"
    path.write_bytes(("# -*- coding: latin-1 -*-\n# caf\u00e9\n" + text).encode("latin-1"))
    module_at(str(path))
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "9.0")
    assert main(["show", "--json"]) == 0
    import json

    kept = [item["target"] for item in json.loads(capsys.readouterr().out)["plugin"]["hooks_kept"]]
    assert TARGET not in kept


DEEP = "        _deep = " + " + ".join(["1"] * 2000) + "\n"


def _deep_module(tmp_path):
    text = open(installed_file(), encoding="utf-8").read()
    head = "    def __init__("
    assert text.count(head) >= 1
    start = text.index(head)
    body = text.index(":\n", text.index(")", start)) + 2  # after the signature's line
    path = tmp_path / "torch_symm_mem.py"
    path.write_text(text[:body] + DEEP + text[body:])
    return path


def test_a_deep_expression_in_a_hooked_function_is_fingerprinted(tmp_path, module_at):
    path = _deep_module(tmp_path)
    deep = fingerprint.of_file(str(path), "TorchSymmMemCommunicator.__init__")
    assert deep is not None and deep != fingerprint.of_file(installed_file(), "TorchSymmMemCommunicator.__init__")
    module_at(str(path))
    problem = targets.file_problem(target())
    assert problem and TARGET in problem and "differs" in problem


def test_show_answers_over_a_deep_expression(tmp_path, module_at, monkeypatch, capsys):
    module_at(str(_deep_module(tmp_path)))
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "9.0")
    code = main(["show"])
    out, err = capsys.readouterr()
    assert code == 0 and "RecursionError" not in out + err, err
    assert TARGET in out


def test_the_plugins_check_of_a_live_deep_function_names_the_target(tmp_path):
    source = "def f(x):\n    return " + " + ".join(["x"] * 2000) + "\n"
    path = tmp_path / "deep_module.py"
    path.write_text(source)
    module = types.ModuleType("deep_module")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    assert fingerprint.of_object(module.f) is not None
    problem = targets.body_problem(target(), module.f)
    assert problem and TARGET in problem
    assert sys.getrecursionlimit() < fingerprint.DEEP_RECURSION  # restored after the deep pass
    assert os.path.exists(path)
