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


def _pointing(monkeypatch, name):
    """``use(path)``: the module ``name`` read from a file of the test's (the others where they are);
    the checks' caches are emptied before and after."""
    real = targets._module_path

    def use(path):
        monkeypatch.setattr(targets, "_module_path", lambda module: path if module == name else real(module))
        targets._FILES.clear()
        status._CHECKED.clear()

    yield use
    targets._FILES.clear()
    status._CHECKED.clear()


@pytest.fixture
def module_at(monkeypatch):
    """Point the target's module at a file of the test's (the other modules stay where they are)."""
    yield from _pointing(monkeypatch, SYMM)


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
    code = main(["show", "--verbose"])  # the hooks kept, each with its reason
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


# --- the tables a decision reads ----------------------------------------------------------------

TABLES = "sglang.srt.distributed.device_communicators.all_reduce_utils"


@pytest.fixture
def tables_at(monkeypatch):
    """Point the module that writes TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES at a file of the test's."""
    yield from _pointing(monkeypatch, TABLES)


def _edited_tables(tmp_path, old, new):
    root = fingerprint.installed_root()
    source = root and fingerprint.module_file(root, TABLES)
    if source is None:
        pytest.skip("SGLang is not installed")
    text = open(source, encoding="utf-8").read()
    assert text.count(old) >= 1
    path = tmp_path / "all_reduce_utils.py"
    path.write_text(text.replace(old, new, 1) if new is not None else text)
    return path


def test_a_fix_in_the_table_a_decision_reads_keeps_sglangs_code(tmp_path, tables_at, monkeypatch, capsys):
    """SGLang's TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES edited (SM100 at 8 GPUs: 32 MiB): the hook
    over TorchSymmMemCommunicator.__init__, whose body is unchanged, keeps SGLang's code,
    in the plugin's check and in ``show``."""
    path = _edited_tables(tmp_path, "    10: {\n        2: 64 * MiB,  # 64 MB\n        4: 64 * MiB,  # 64 MB\n"
                                    "        6: 128 * MiB,  # 128 MB\n        8: 128 * MiB,",
                          "    10: {\n        2: 64 * MiB,  # 64 MB\n        4: 64 * MiB,  # 64 MB\n"
                          "        6: 128 * MiB,  # 128 MB\n        8: 32 * MiB,")
    tables_at(str(path))
    problem = targets.file_problem(target())
    assert problem and "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES" in problem and TARGET in problem
    assert targets.data_problem(target()) == problem
    monkeypatch.setenv("SGLANG_ARCH_CAPABILITY", "10.0")
    assert main(["show", "--json"]) == 0
    import json

    kept = {item["target"]: item["reason"] for item in json.loads(capsys.readouterr().out)["plugin"]["hooks_kept"]}
    assert "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES" in kept.get(TARGET, "")


def test_the_tables_as_a_release_wrote_them_keep_the_hook(tmp_path, tables_at):
    """Comments and layout are not the table: the same values, written otherwise, still match."""
    path = _edited_tables(tmp_path, "        8: 128 * MiB,  # 128 MB\n", "        8: 128 * MiB,  # the same, said again\n")
    tables_at(str(path))
    assert targets.data_problem(target()) is None and targets.file_problem(target()) is None


def test_a_table_imported_under_another_name_is_followed(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tables.py").write_text("SIZES = {9: 1}\n")
    (tmp_path / "pkg" / "user.py").write_text("from .tables import SIZES as LIMITS\nimport logging\n"
                                              "logger = logging.getLogger(__name__)\n")
    where = lambda module: fingerprint.module_file(str(tmp_path), module)  # noqa: E731
    assert fingerprint.data_source(where, "pkg.user", "LIMITS")[::2] == ("pkg.tables", "SIZES")
    assert fingerprint.data_source(where, "pkg.user", "logger") is None  # made by a call: not a table
    assert fingerprint.data_source(where, "pkg.user", "logging") is None
    assert fingerprint.of_data(where, "pkg.user", "LIMITS") == fingerprint.of_data(where, "pkg.tables", "SIZES")


def test_a_check_that_fails_for_one_target_names_it_and_spares_the_others(monkeypatch):
    """Whatever a target's check raises, that target keeps SGLang's code, named; the plugin
    does not turn off whole with a line that names no hook."""
    def broken(*_args, **_kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(fingerprint, "of_file", broken)
    monkeypatch.setattr(targets, "_recorded", lambda *_: None)
    targets._FILES.clear()
    problem = targets.file_problem(target())
    assert problem.startswith(TARGET) and "RecursionError" in problem and "SGLang's code stays" in problem
