"""The source bounds checked before libcst parses a file (``sglang_arch.bounds``).

libcst's native parser nests each ``and`` / ``or`` operand and each adjacent string literal
one level below the previous one; CPython keeps them flat, so its own parser lets them
through.  The bound is checked over generated chains against what it says, and one case
past it is run through libcst in a child process: the child overflowed its stack (exit 139,
SIGSEGV) where the bound refuses, and parses what the bound accepts."""

import ast
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_arch import bounds


def chain(word, n, line=1):
    return "\n" * (line - 1) + "x = " + f" {word} ".join(f"a{i}" for i in range(n)) + "\n"


@settings(max_examples=60, deadline=None)
@given(word=st.sampled_from(["and", "or"]), n=st.integers(2, 3 * bounds.MAX_BOOL_OPERANDS),
       line=st.integers(1, 40))
def test_a_chain_is_refused_exactly_past_the_bound(word, n, line):
    found = bounds.expression_problem(chain(word, n, line))
    if n <= bounds.MAX_BOOL_OPERANDS:
        assert found is None
    else:
        assert found == (line, f"one expression of {n} '{word}' operands; accepted: at most "
                               f"{bounds.MAX_BOOL_OPERANDS} operands in one 'and' / 'or' chain")


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 3 * bounds.MAX_ADJACENT_STRINGS), sep=st.sampled_from([" ", "\n  ", "  # c\n  "]),
       line=st.integers(1, 10))
def test_adjacent_literals_are_refused_exactly_past_the_bound(n, sep, line):
    text = "\n" * (line - 1) + "x = (" + sep.join(["'a'"] * n) + ")\ny = 'b'\n"
    found = bounds.expression_problem(text)
    assert (found is None) is (n <= bounds.MAX_ADJACENT_STRINGS)
    if found:
        assert found[0] == line and "adjacent string literals" in found[1]


def test_separate_literals_and_flat_nodes_stay_within_the_bounds():
    # many literals, but never adjacent; a long tuple and a long comparison (flat in libcst too)
    text = "\n".join(f"s{i} = 'a'" for i in range(3000)) + "\nt = (" + ", ".join(["'a'"] * 3000) + ")\n"
    text += "c = " + " < ".join(["a"] * 3000) + "\n"
    assert bounds.expression_problem(text) is None


def test_nested_chains_are_found_wherever_they_sit():
    inner = " or ".join(f"b{i}" for i in range(bounds.MAX_BOOL_OPERANDS + 1))
    text = f"def f():\n    if g(x, [1, {{2: ({inner})}}]):\n        pass\n"
    assert bounds.expression_problem(text)[0] == 2
    assert bounds.expression_refusal("srt/x.py", text).startswith("srt/x.py:2: one expression of 1001 'or' operands")


def test_source_python_cannot_parse_is_left_to_the_callers_syntax_check():
    assert bounds.expression_problem("x = (") is None
    assert bounds.expression_problem("x = 1\0") is None


CHILD = "import sys, libcst; libcst.parse_module(sys.stdin.read()); print('parsed')"


def test_libcst_overflows_past_the_bound_and_parses_within_it():
    """Why the bound exists, measured on the libcst this project installs."""
    pytest.importorskip("libcst")
    past = chain("and", 8000)
    assert bounds.expression_problem(past) is not None
    ast.parse(past)  # CPython takes it
    crashed = subprocess.run([sys.executable, "-c", CHILD], input=past, capture_output=True, text=True)
    assert crashed.returncode != 0 and "parsed" not in crashed.stdout
    within = chain("and", bounds.MAX_BOOL_OPERANDS)
    assert bounds.expression_problem(within) is None
    ok = subprocess.run([sys.executable, "-c", CHILD], input=within, capture_output=True, text=True)
    assert ok.returncode == 0 and "parsed" in ok.stdout
