"""Override files' messages, the environment's resolve-as message, and the symmetric-memory
guard for hand-made profiles, case by case (found by mutation testing: docs/mutation.md).

The messages are what an override file's author or an operator reads: each must name the
file or the variable, and what was refused.  The symmetric-memory range is the README's
"Limits" (1-1024 MiB per world size).
"""

import json
from dataclasses import replace

import pytest
from sglang_arch.arch import TOPOLOGIES, resolve
from sglang_arch.arch import registry as r
from sglang_arch.arch.capability import Capability, parse_capability
from sglang_arch.arch.policies.collectives import SymmMemDecision, torch_symm_mem
from sglang_arch.arch.profile import TableError
from sglang_arch.arch.registry import Resolution

MIB = 1024 * 1024


def with_symm_mem(cap, table):
    res = resolve(cap)
    return Resolution(res.requested, replace(res.profile, torch_symm_mem=table), res.match, res.reason)


# --- torch_symm_mem: profiles built by hand skip the builder's checks ------------------


def with_two_shot(cap, table):
    res = resolve(cap)
    return Resolution(res.requested, replace(res.profile, symm_mem_two_shot=table), res.match, res.reason)


@pytest.mark.parametrize("max_bytes", [1, 1024 * MIB])
def test_symm_mem_guard_accepts_the_bounds(max_bytes):
    d = torch_symm_mem(with_symm_mem("9.0", {8: max_bytes}), TOPOLOGIES["nvswitch"], 8)
    assert (d.enabled, d.max_bytes, d.algorithm) == (True, max_bytes, "multimem")
    d = torch_symm_mem(with_two_shot("9.0", {8: max_bytes}), TOPOLOGIES["nvlink"], 8)
    assert (d.enabled, d.max_bytes, d.algorithm) == (True, max_bytes, "two_shot")


@pytest.mark.parametrize("max_bytes", [0, 1024 * MIB + 1])
def test_symm_mem_guard_refuses_outside_the_bounds(max_bytes):
    d = torch_symm_mem(with_symm_mem("9.0", {8: max_bytes}), TOPOLOGIES["nvswitch"], 8)
    assert d == SymmMemDecision(False, 0, None, "tier 9.0: the size for world size 8 is outside 1 B-1024 MiB")
    d = torch_symm_mem(with_two_shot("9.0", {8: max_bytes}), TOPOLOGIES["nvlink"], 8)
    assert d == SymmMemDecision(False, 0, None, "tier 9.0: the two-shot bound for world size 8 is outside 1 B-1024 MiB")


# --- load_override_file -----------------------------------------------------------------


def test_a_missing_file_names_the_system_error(tmp_path):
    path = str(tmp_path / "absent.json")
    with pytest.raises(TableError) as e:
        r.load_override_file(path)
    assert str(e.value) == f"{path}: cannot read override file: No such file or directory"


def test_unknown_keys_beside_architectures(tmp_path):
    p = tmp_path / "o.json"
    p.write_text(json.dumps({"architectures": {"9.0": {"name": "x"}}, "zeta": 1, "alpha": 2, "beta": 3, "gamma": 4}))
    with pytest.raises(TableError) as e:
        r.load_override_file(str(p))
    assert str(e.value) == (f"{p}: unknown top-level key(s) [\"'alpha'\", \"'beta'\", \"'gamma'\"] beside "
                            f"'architectures'; accepted: 'architectures' alone, or capability keys")


def test_architectures_alone_is_unwrapped(tmp_path):
    p = tmp_path / "o.json"
    p.write_text(json.dumps({"architectures": {"9.0": {"name": "x"}}}))
    assert r.load_override_file(str(p)) == {"9.0": {"name": "x"}}


def test_invalid_toml_names_the_error(tmp_path):
    p = tmp_path / "o.toml"
    p.write_text("[9.0\nname = 1\n")
    with pytest.raises(TableError) as e:
        r.load_override_file(str(p))
    msg = str(e.value)
    assert msg.startswith(f"{p}: not valid TOML: ")
    assert "line 1" in msg  # tomllib's position of the error, not a placeholder


def test_an_out_of_range_json_number_is_quoted_up_to_20_characters(tmp_path):
    p = tmp_path / "o.json"
    p.write_text('{"9.0": {"smem_per_sm_kib": 1234567890123456e999999}}')
    with pytest.raises(TableError) as e:
        r.load_override_file(str(p))
    assert str(e.value).startswith(f"{p}: not valid JSON: number 1234567890123456e999 is out of range")


def test_one_line_joins_and_cuts_at_200_characters():
    assert r._one_line(ValueError("a\n  b\tc")) == "a b c"
    assert r._one_line(ValueError("x" * 200)) == "x" * 200
    assert r._one_line(ValueError("y" * 201)) == "y" * 197 + "..."


# --- the environment ----------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch):
    r.reset_default_registry()
    yield monkeypatch
    r.reset_default_registry()


def test_resolve_as_names_the_variable(clean_env):
    clean_env.setenv("SGLANG_ARCH_RESOLVE_AS", "hopper")
    with pytest.raises(ValueError) as e:
        r.default_registry()
    assert str(e.value).startswith("SGLANG_ARCH_RESOLVE_AS: invalid compute capability 'hopper'")


def test_architectures_must_hold_a_table(tmp_path):
    p = tmp_path / "o.json"
    p.write_text(json.dumps({"architectures": [1]}))
    with pytest.raises(TableError) as e:
        r.load_override_file(str(p))
    assert str(e.value) == f"{p}: field 'architectures': expected a table of capability -> fields, got list"


# --- tiers that inherit from an overridden one ----------------------------------------------
# The built-in table's chain (table.py "inherits"): 8.9 -> 8.6 -> 8.0 -> 7.5 -> 7.0, 8.7 -> 8.0.


def test_an_overridden_tier_is_reported_as_the_override():
    reg = r.build_registry({"8.0": {"name": "Mine"}}, override_source="o.json")
    res = reg.resolve("8.0")
    assert (res.requested, res.match) == (Capability(8, 0), "override")
    assert res.reason == "8.0 is defined by the override file o.json"


def test_grandchildren_of_an_overridden_tier_report_it():
    reg = r.build_registry({"8.0": {"name": "Mine"}}, override_source="o.json")
    for cap, via in (("8.6", "8.0"), ("8.7", "8.0"), ("8.9", "8.0")):
        res = reg.resolve(cap)
        assert (res.requested, res.match) == (parse_capability(cap), "override"), cap
        assert res.reason == f"{cap} inherits from {via}, which the override file o.json patches"
    assert reg.resolve("7.5").match == "exact"  # the parent of the overridden tier is not touched


def test_an_overridden_tier_that_inherits_does_not_end_the_search():
    # an override entry with its own "inherits" is a tier of the chain too: the tiers after
    # it in the table are still checked
    reg = r.build_registry({"8.0": {"inherits": "7.5", "name": "Mine"}}, override_source="o.json")
    assert reg.resolve("8.0").match == "override"
    assert reg.resolve("8.9").reason == "8.9 inherits from 8.0, which the override file o.json patches"


# --- override entries for known tiers ---------------------------------------------------------


def test_an_override_entry_that_is_not_a_table():
    with pytest.raises(TableError) as e:
        r.build_registry({"9.0": 5}, override_source="o.json")
    assert str(e.value) == "o.json: entry '9.0' must be a table of fields, got int"


def test_an_override_capability_listed_twice():
    with pytest.raises(TableError) as e:
        r.build_registry({"9.0": {"name": "a"}, "sm_90": {"name": "b"}}, override_source="o.json")
    assert str(e.value) == ("o.json: entries '9.0' and 'sm_90' both name capability 9.0 (listed twice); "
                            "accepted: one entry per capability")


def test_a_patch_sets_a_field_it_names_to_null():
    # docs/configuration.md: an entry for a known capability patches the fields it names.
    # Volta's last CUDA is 12.9 (CUDA 13.0 release notes): a null max_cuda lifts it.
    assert r.build_registry().resolve("7.0").profile.max_cuda == (12, 9)
    reg = r.build_registry({"7.0": {"max_cuda": None}}, override_source="o.json")
    assert reg.resolve("7.0").profile.max_cuda is None
    assert reg.resolve("7.0").profile.name == "Volta"  # the rest of the tier is kept


# --- capability spellings -------------------------------------------------------------------


def test_capability_text_of_40_characters_is_read():
    # capability.py: no spelling is longer than 40 characters; longer input is refused unread
    assert parse_capability("9.0".rjust(40)) == Capability(9, 0)
    with pytest.raises(ValueError):
        parse_capability("9.0".rjust(41))


@pytest.mark.parametrize("major, minor, shown_as", [
    (True, 0, "True.0"), (9, False, "9.False"),  # booleans are not capability parts
    ("9", 0, "'9'.0"), (9, 1.5, "9.1.5"),
])
def test_capability_parts_must_be_integers(major, minor, shown_as):
    with pytest.raises(ValueError) as e:
        Capability(major, minor)
    assert str(e.value) == f"capability parts must be integers, got {shown_as}"
