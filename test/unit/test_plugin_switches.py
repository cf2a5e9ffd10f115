"""The plugin's switch (SGLANG_ARCH_DISABLE by decision), its start-up line, and the
fingerprints that say whether SGLang's code is the code a hook was written for."""

import importlib.util
import textwrap

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sglang_arch.arch import TOPOLOGIES, decide, default_registry, resolve
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.policies import attention
from sglang_arch.integrations.sglang import fingerprint, known_bodies, startup, switches
from sglang_arch.integrations.sglang.targets import all_targets

NAMES = sorted(switches.DECISIONS)


@pytest.mark.parametrize("value,off", [
    (None, set()), ("", set()), (" 0 ", set()), ("off", set()), ("1", switches.ALL), ("TRUE", switches.ALL),
    ("all", switches.ALL), ("fusion", {"fusion"}), (" Fusion , symm_mem ,", {"fusion", "symm_mem"}),
    ("attention,moe,gemm", {"attention", "moe", "gemm"}),
])
def test_values_name_the_decisions_they_turn_off(value, off):
    assert switches.parse(value) == frozenset(off)


@pytest.mark.parametrize("value", ["1,fusion", "all,moe", "0,fusion", "off,moe", "fusion,true"])
def test_all_or_none_stands_alone_never_in_a_list(value):
    with pytest.raises(switches.SwitchError) as err:
        switches.parse(value)
    assert "stands alone" in str(err.value) and "accepted:" in str(err.value)


@pytest.mark.parametrize("value", [",", " , ,", ",,"])
def test_a_list_names_at_least_one_decision(value):
    with pytest.raises(switches.SwitchError):
        switches.parse(value)
    assert switches.parse("fusion,,symm_mem") == switches.parse("fusion,symm_mem")  # empty items are ignored


@given(st.lists(st.sampled_from(NAMES + ["fusoin", "symm-mem", "2", "*"]), min_size=1, max_size=4))
def test_a_name_that_is_no_decision_is_refused_in_one_line_naming_the_accepted_ones(names):
    value = ",".join(names)
    bad = [n for n in names if n not in switches.DECISIONS]
    if not bad:
        assert switches.parse(value) == frozenset(names)
        return
    with pytest.raises(switches.SwitchError) as err:
        switches.parse(value)
    message = str(err.value)
    assert "\n" not in message and all(name in message for name in switches.DECISIONS)
    assert all(b in message for b in bad)
    assert switches.off({"SGLANG_ARCH_DISABLE": value}) == switches.ALL  # inside SGLang: the plugin out


def test_every_target_belongs_to_exactly_one_decision():
    listed = [c for concerns in switches.DECISIONS.values() for c in concerns]
    assert len(listed) == len(set(listed))
    assert {t.concern for t in all_targets()} == set(listed)


MACHINES = st.tuples(
    st.sampled_from([str(c) for c in default_registry().known] + ["13.0", "11.5", "10.7", "12.9", "15.3"]),
    st.sampled_from(sorted(TOPOLOGIES)), st.integers(1, 72), st.integers(1, 2),
    st.frozensets(st.sampled_from(NAMES)), st.integers(0, len(all_targets())), st.booleans())


@settings(max_examples=300, deadline=None)
@given(MACHINES)
# A mixed node with decisions off and kept hooks: once past 200 characters.
@example(("10.0", "nvswitch", 1, 1, frozenset({"custom_all_reduce", "fusion"}), 10, True))
@example(("10.7", "pcie-p2p", 72, 2, frozenset(NAMES) - {"attention"}, 90, True))
def test_the_start_up_line_fits_200_characters_and_says_the_decisions(machine):
    cap, topology, gpus, kinds, off, kept, mixed = machine
    if topology == "single":
        gpus = 1
    elif gpus == 1:
        gpus = 2
    if off >= switches.ALL:
        return  # the plugin is off: no line of decisions
    d = decide(resolve(cap), TOPOLOGIES[topology], gpus, 1, attention.ModelTraits(cuda=(13, 0)))
    requested = resolve(cap).requested
    sms = f"sm_{requested.sm}" + (f"+sm_{Capability(requested.major, (requested.minor + 1) % 10).sm}" if mixed else "")
    text = startup.line(f"{gpus}x {sms} {topology}", d, off, kept)
    assert len(text) <= startup.MAX_LENGTH and "\n" not in text and not text.endswith("...")
    assert f"tier {d.resolution.resolved} [{d.resolution.match}]" in text
    for label, name in (("symm-mem ", "symm_mem"), ("custom-AR ", "custom_all_reduce"), ("fusion ", "fusion"),
                        ("attn ", "attention")):
        assert label + ("SGLang" if name in off else "") in text
    assert ("off: " in text) is bool(off)
    assert (f"{kept} hook" in text) is bool(kept)


def test_the_line_is_debug_on_ranks_other_than_zero(monkeypatch):
    class Code:
        co_name = "run_scheduler_process"

    class Frame:
        f_code = Code()

        def __init__(self, **ranks):
            self.f_locals = ranks

    monkeypatch.delenv("RANK", raising=False)
    assert startup.is_rank_zero([Frame(tp_rank=0, pp_rank=0, dp_rank=None)])
    assert not startup.is_rank_zero([Frame(tp_rank=3, pp_rank=0, dp_rank=None)])
    assert not startup.is_rank_zero([Frame(tp_rank=0, pp_rank=0, dp_rank=1)])
    assert startup.is_rank_zero([])  # the launcher, the detokenizer
    monkeypatch.setenv("RANK", "2")
    assert not startup.is_rank_zero([])


BODY = '''
@lru_cache(maxsize=1)
def probe(x: int, y=2) -> bool:
    """What it says."""
    # a comment
    return x > y
'''


def test_the_fingerprint_ignores_words_and_layout_but_not_code():
    same = fingerprint.of_module_source(BODY, "probe")
    assert same == fingerprint.of_module_source(textwrap.dedent('''
        @lru_cache(
            maxsize=1
        )
        def probe(x: int, y = 2) -> bool:
            """Other words."""
            return (x >
                    y)
    '''), "probe")
    assert same == fingerprint.of_module_source("class A:\n    " + BODY.replace("\n", "\n    "), "A.probe")
    for changed in (BODY.replace("x > y", "x >= y"), BODY.replace("y=2", "y=3"), BODY.replace("maxsize=1", "maxsize=2"),
                    BODY.replace("return", "z = 1\n    return")):
        assert fingerprint.of_module_source(changed, "probe") != same
    assert fingerprint.of_module_source(BODY, "other") is None


def test_a_module_value_and_a_probe_bound_by_assignment_have_fingerprints():
    source = "FAST = constexpr(True)\nis_a = is_b = lru_cache(1)(partial(f, majors=[9]))\n"
    assert fingerprint.of_module_source(source, "FAST") != fingerprint.of_module_source(
        source.replace("True", "False"), "FAST")
    assert fingerprint.of_module_source(source, "is_a") == fingerprint.of_module_source(source, "is_b") is not None


installed = pytest.mark.skipif(importlib.util.find_spec("sglang") is None, reason="needs the installed sglang")


@installed
def test_the_quick_reader_agrees_with_the_whole_module_parse_and_the_record():
    """``of_file`` (the definition's lines only, what start-up and ``show`` use) gives the whole
    parse's answer for every target in the installed SGLang, and that is what is recorded."""
    from importlib.metadata import version

    root = fingerprint.installed_root()
    targets = all_targets()
    whole = fingerprint.of_tree(root, targets)
    cache = {}
    quick = {t.path: fingerprint.of_file(fingerprint.module_file(root, t.module), t.attr, cache) for t in targets}
    assert quick == whole and None not in whole.values()
    if version("sglang") in known_bodies.SUPPORTED:
        recorded = known_bodies.BODIES[version("sglang")]
        assert {path: recorded[path] for path in whole} == whole
        # the rest: the tables the decisions read, each where the release writes it
        tables = {path: value for path, value in recorded.items() if path not in whole}
        where = known_bodies.DATA[version("sglang")]
        assert tables and set(tables) == set(where)
        for key, value in tables.items():
            module, _, name = key.rpartition(".")
            assert fingerprint.of_data(lambda m: fingerprint.module_file(root, m), module, name, cache) == value


@installed
def test_show_names_what_is_off_and_refuses_a_bad_name(capsys, monkeypatch):
    from sglang_arch.cli import main

    monkeypatch.setenv("SGLANG_ARCH_DISABLE", "fusion,symm_mem")
    assert main(["show", "--capability", "12.0", "--gpus", "2", "--topology", "pcie-p2p"]) == 0
    out = capsys.readouterr().out
    assert "Left to SGLang (SGLANG_ARCH_DISABLE): symm_mem, fusion; the rest is routed." in out
    monkeypatch.setenv("SGLANG_ARCH_DISABLE", "fusoin")
    assert main(["show", "--capability", "12.0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a decision: fusoin; accepted:" in err[0]
