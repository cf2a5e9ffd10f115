"""Reading a user's source tree (``sglang_arch.files``): what CPython's parser refuses, and how files
are named."""

import pytest
from sglang_arch.files import (
    SourceError,
    python_tree,
    read_source,
)


@pytest.mark.parametrize("text, problem", [
    ("x = " + "(" * 300 + "1" + ")" * 300, "too many nested parentheses"),
    ("if 1:\n" + "".join(" " * i + "if 1:\n" for i in range(1, 120)) + " " * 120 + "pass\n",
     "too many levels of indentation"),
    ("x = a" + ".b" * 100_000, "nested too deeply"),  # CPython: RecursionError
    ("x = " + "-" * 100_000 + "1", "nested too deeply"),
])
def test_source_nested_past_cpythons_parser_is_one_line(text, problem):
    tree, why = python_tree(text)
    assert tree is None and problem in why.lower()


def test_other_syntax_errors_are_left_to_the_caller():
    """A syntax error that is not about depth: no reason here; the caller reports the parser's message."""
    assert python_tree("def f(:\n") == (None, None)
    tree, problem = python_tree("x = (1 + 2)\n")
    assert problem is None and tree.body


def test_read_source_names_the_file_and_escapes_it(tmp_path):
    path = tmp_path / "esc\x1b[31m.py"
    path.write_bytes(b"x = '\xff'\n")
    with pytest.raises(SourceError) as exc:
        read_source(path)
    message = str(exc.value)
    assert "\x1b" not in message and "esc\\x1b[31m.py" in message and "not UTF-8 (byte 5)" in message
    assert read_source(path, errors="replace") == "x = '\ufffd'\n"


def test_a_file_written_twice_in_one_run_expects_each_text_in_turn(tmp_path):
    """Two steps edit one file (the series' steps 2 and 5): the first write expects the file
    as read, the second the first's text; an edit by another program in between stops it."""
    from sglang_arch.files import Transaction, Write

    target = tmp_path / "m.py"
    target.write_text("v0\n")
    first, second = Write(str(target), "v1\n", expect="v0\n"), Write(str(target), "v2\n", expect="v1\n")
    with Transaction([first, second], distinct=False) as tx:
        tx.put([first])
        tx.put([second])
    assert target.read_text() == "v2\n" and sorted(p.name for p in tmp_path.iterdir()) == ["m.py"]
    target.write_text("v0\n")
    first, second = Write(str(target), "v1\n", expect="v0\n"), Write(str(target), "v2\n", expect="v1\n")
    with pytest.raises(ValueError, match="changed by another program"):
        with Transaction([first, second], distinct=False) as tx:
            tx.put([first])
            target.write_text("v1\n# an editor's line\n")
            tx.put([second])
    assert target.read_text() == "v1\n# an editor's line\n"  # neither overwritten nor rolled back over
