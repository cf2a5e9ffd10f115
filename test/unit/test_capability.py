import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch import Capability, parse_capability

from unit.strategies import capabilities


@pytest.mark.parametrize("spelling", [(12, 0), [12, 0], "12.0", "12", " 12.0 ", "sm_120", "sm120", "sm120a",
                                      "SM_120A", "sm_120f", "compute_120", "compute_120a", "120", 120, 12,
                                      Capability(12, 0)])
def test_every_documented_spelling_of_12_0(spelling):
    assert parse_capability(spelling) == Capability(12, 0)


@pytest.mark.parametrize("spelling,expected", [("9", (9, 0)), ("90", (9, 0)), ("sm_90a", (9, 0)), ("10.3", (10, 3)),
                                               ("103", (10, 3)), ("sm_103f", (10, 3)), ("121", (12, 1)),
                                               ("7.5", (7, 5)), ("75", (7, 5)), ("29", (29, 0)), ("30", (3, 0)),
                                               (0, (0, 0))])
def test_other_spellings(spelling, expected):
    assert parse_capability(spelling).as_tuple() == expected


@pytest.mark.parametrize("bad", ["", "12.x", "sm_", "sm_1", "12.10", "1.2.3", "abc", "-1", -1, 1000, "sm_1200",
                                 True, None, 12.0, (12,), (12, 0, 1), ("12", "0"), (12, 10), (-1, 0), (100, 0)])
def test_bad_input_is_a_value_error_naming_input_and_forms(bad):
    with pytest.raises(ValueError) as err:
        parse_capability(bad)
    text = str(err.value)
    assert repr(bad) in text or "out of range" in text
    assert "accepted" in text and "sm_120" in text


@given(capabilities)
def test_round_trip_through_every_spelling(cap):
    assert parse_capability(str(cap)) == cap
    assert parse_capability(cap.as_tuple()) == cap
    if cap.major >= 1:
        assert parse_capability(f"sm_{cap.sm}a") == cap


# Hardware generations, oldest first (CUDA C++ Programming Guide, compute capabilities):
# numeric, not textual ("10.0" sorts before "9.0" as text), minor within a major.
GENERATIONS = ["0.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "9.5", "10.0", "10.3", "10.7",
               "11.0", "12.0", "12.1", "13.0", "20.0", "99.9"]


def test_order_follows_generations():
    caps = [parse_capability(c) for c in GENERATIONS]
    for i, a in enumerate(caps):
        for j, b in enumerate(caps):
            assert (a < b) is (i < j) and (a <= b) is (i <= j) and (a == b) is (i == j), (a, b)
    assert sorted(reversed(caps)) == caps and max(caps) == Capability(99, 9) and min(caps) == Capability(0, 0)


@given(capabilities, capabilities)
def test_order_is_major_first_then_minor(a, b):
    if a.major != b.major:
        assert (a < b) is (a.major < b.major)
    else:
        assert (a < b) is (a.minor < b.minor)
    assert (a == b) is (a.major == b.major and a.minor == b.minor)


@pytest.mark.parametrize("cap,sm,text", [((12, 0), 120, "12.0"), ((9, 0), 90, "9.0"), ((10, 3), 103, "10.3"),
                                         ((0, 0), 0, "0.0"), ((99, 9), 999, "99.9")])
def test_sm_number_and_text(cap, sm, text):
    c = Capability(*cap)
    assert c.sm == sm and str(c) == text and c.as_tuple() == cap


@given(st.integers(0, 2 ** 16))
def test_integers_never_raise_anything_but_value_error(n):
    try:
        cap = parse_capability(n)
    except ValueError:
        return
    assert 0 <= cap.major <= 99 and 0 <= cap.minor <= 9
