"""``tune``'s --sizes / --world-sizes: a value given twice is refused (`--sizes 4,4` measured the cell twice and wrote a results file that
`tune --from-results` then refused)."""

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch import args

SPELLINGS = {4096: ["4096", "4K", "4k", "4KiB", "4096B"], 1048576: ["1M", "1048576", "1MiB", "1024K"], 8: ["8", "8B"]}


@given(st.lists(st.sampled_from(sorted(SPELLINGS)), min_size=1, max_size=6), st.data())
def test_a_size_given_twice_in_any_spelling_is_refused(values, data):
    text = ",".join(data.draw(st.sampled_from(SPELLINGS[v])) for v in values)
    if len(set(values)) == len(values):
        assert args.tune_sizes(text) == values
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="is given twice; accepted: each once"):
            args.tune_sizes(text)


@given(st.lists(st.integers(2, 8), min_size=1, max_size=8))
def test_a_world_size_given_twice_is_refused(values):
    text = ",".join(map(str, values))
    if len(set(values)) == len(values):
        assert args.tune_world_sizes(text) == values
    else:
        with pytest.raises(argparse.ArgumentTypeError, match="world size .* is given twice"):
            args.tune_world_sizes(text)
