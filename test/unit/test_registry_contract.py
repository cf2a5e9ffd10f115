"""The registry's smaller promises, each pinned down (found by mutation testing:
docs/mutation.md).  Messages are checked for what they must tell a user, not word for
word."""

import json
import logging

import pytest
from sglang_arch.arch import (
    Capability,
    TableError,
    UnknownCapabilityError,
    build_registry,
    resolve,
)
from sglang_arch.arch.detect import node_resolution
from sglang_arch.arch.registry import Registry, env_flag, load_override_file

KNOWN = "7.0, 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, 10.3, 10.7, 11.0, 12.0, 12.1"


def test_an_unknown_feature_names_itself_and_the_known_ones():
    with pytest.raises(ValueError, match=r"^unknown feature 'warp'; accepted: tma, wgmma, tcgen05, fp8, fp4$"):
        resolve("9.0").has("warp")


def test_portable_resolution_is_the_device_with_no_tier():
    res = resolve("6.1")
    p = res.profile
    assert (p.capability, p.name, p.topology, p.sources) == (Capability(6, 1), "portable", "pcie", ("registry rule 4",))
    assert res.reason == "6.1 is older than every known tier (7.0); every custom path is off"


def test_registry_needs_tiers_and_a_known_resolve_as():
    with pytest.raises(ValueError, match=r"^a registry needs at least one architecture$"):
        Registry({})
    with pytest.raises(ValueError, match=rf"^SGLANG_ARCH_RESOLVE_AS=9\.5 is not a known tier; accepted: {KNOWN}$"):
        build_registry(resolve_as="9.5")


def test_a_registry_is_lenient_unless_asked():
    assert build_registry().strict is False and build_registry().resolve("13.0").match == "generation"
    reg = build_registry()
    assert Registry(dict((c, reg.profile(c)) for c in reg.known)).resolve("13.0").match == "generation"


def test_unknown_profile_is_a_key_error_naming_the_capability():
    with pytest.raises(KeyError) as err:
        build_registry().profile("9.5")
    assert err.value.args == (Capability(9, 5),)


def test_with_strict_keeps_overrides_and_resolve_as():
    reg = build_registry({"12.0": {"name": "Tuned"}}, override_source="site.toml")
    strict = reg.with_strict(True)
    assert strict is not reg and strict.strict and reg.with_strict(False) is reg
    res = strict.resolve("12.0")
    assert (res.match, res.profile.name, res.reason) == ("override", "Tuned",
                                                         "12.0 is defined by the override file site.toml")
    with pytest.raises(UnknownCapabilityError):
        strict.resolve("12.5")
    as9 = build_registry(resolve_as="9.0").with_strict(True)
    assert as9.resolve("12.0").resolved == Capability(9, 0) and as9.resolve("12.0").match == "override"


def test_resolve_as_and_override_keep_the_requested_device():
    res = build_registry(resolve_as="9.0").resolve("12.0")
    assert res.requested == Capability(12, 0) and res.reason == (
        "SGLANG_ARCH_RESOLVE_AS=9.0: every device resolves as 9.0")
    res = build_registry({"12.0": {"name": "Tuned"}}).resolve("12.0")
    assert res.requested == Capability(12, 0) and res.reason == "12.0 is defined by the override file <overrides>"


def test_strict_error_lists_every_known_tier():
    with pytest.raises(UnknownCapabilityError) as err:
        build_registry(strict=True).resolve("13.0")
    assert str(err.value) == (f"strict mode: 13.0 is not a known tier (would resolve as generation of 12.1); "
                              f"known tiers: {KNOWN}; add it to the table or an override file (SGLANG_ARCH_CONFIG)")


@pytest.mark.parametrize("cap,warned", [("13.0", True), ("6.1", True), ("9.5", False), ("9.0", False)])
def test_only_generation_and_portable_fallbacks_warn(caplog, cap, warned):
    reg = build_registry()
    with caplog.at_level(logging.WARNING, logger="sglang_arch"):
        res = reg.resolve(cap)
    messages = [r.getMessage() for r in caplog.records if r.name == "sglang_arch"]
    assert messages == ([f"sglang-arch: {res.reason}"] if warned else [])


def test_override_files_must_hold_a_table(tmp_path):
    with pytest.raises(TableError, match=r"^site: expected a table of capability -> fields, got \['12.0'\]$"):
        build_registry(["12.0"], override_source="site")
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(TableError, match=rf"^{path}: expected a table of capability -> fields at the top level, got list$"):
        load_override_file(str(path))


def test_override_of_a_known_tier_patches_it_and_drops_its_lead_marks():
    reg = build_registry({"10.7": {"name": "Rubin"}})
    p = reg.profile("10.7")
    assert p.name == "Rubin" and p.custom_ar_v2_table == "sm107"  # the rest kept
    assert p.lead == ()  # the table's "only one source" marks do not survive an override


def test_override_with_inherits_starts_from_the_named_tier_only():
    reg = build_registry({"12.0": {"inherits": "9.0", "name": "Like Hopper"}})
    p = reg.profile("12.0")
    assert p.name == "Like Hopper" and p.topology == "nvswitch" and p.custom_ar_v2_table == "sm90"


def test_errors_in_the_built_in_table_and_in_overrides_name_where(monkeypatch):
    with pytest.raises(TableError, match=r"^site\.json: entry 13\.0: field 'name' is required"):
        build_registry({"13.0": {"topology": "pcie"}}, override_source="site.json")
    from sglang_arch.arch import registry

    broken = dict(registry.ARCHITECTURES, **{"13.0": {"inherits": "14.0", "name": "x"}})
    monkeypatch.setattr(registry, "ARCHITECTURES", broken)
    for overrides in (None, {"12.0": {"name": "x"}}):
        with pytest.raises(TableError, match=r"^built-in table: entry 13\.0: field 'inherits' names '14\.0'"):
            build_registry(overrides, override_source="site.json")


@pytest.mark.parametrize("value,expected", [
    ("", False), ("0", False), ("false", False), ("no", False), ("off", False), ("FALSE", False), (" No ", False),
    ("Off", False), ("1", True), ("true", True), ("yes", True), ("on", True), ("TRUE", True), (" Yes", True),
    ("ON", True),
])
def test_env_flag_words(monkeypatch, value, expected):
    monkeypatch.setenv("SGLANG_ARCH_STRICT", value)
    assert env_flag("SGLANG_ARCH_STRICT") is expected


def test_env_flag_unset_is_false(monkeypatch):
    monkeypatch.delenv("SGLANG_ARCH_STRICT", raising=False)
    assert env_flag("SGLANG_ARCH_STRICT") is False


@pytest.mark.parametrize("major,minor", [(True, 0), (0, True), (True, True), ("9", 0), (9, "0"), (9.0, 0), (9, 0.0)])
def test_capability_parts_must_be_plain_integers(major, minor):
    with pytest.raises(ValueError, match=r"^capability parts must be integers, got "):
        Capability(major, minor)


@pytest.mark.parametrize("major,minor", [(100, 0), (-1, 0), (0, 10), (0, -1)])
def test_capability_out_of_range(major, minor):
    with pytest.raises(ValueError, match=rf"^capability {major}\.{minor} is out of range; accepted: "):
        Capability(major, minor)


def test_capability_range_ends_are_accepted():
    assert Capability(99, 9).sm == 999 and Capability(0, 0).sm == 0


def test_mixed_node_demotion_keeps_the_stronger_loss():
    fam = node_resolution([Capability(10, 3), Capability(10, 0), Capability(10, 0)])
    assert (str(fam.resolved), fam.match) == ("10.0", "family")
    assert fam.reason == "mixed node (10.0, 10.3): tier 10.0 as family, so every GPU can honour it"
    # already weaker than the demotion: unchanged
    gen = node_resolution([Capability(13, 0), Capability(13, 5)])
    assert gen.match == "generation" and gen.reason == resolve("13.0").reason
    port = node_resolution([Capability(6, 1), Capability(9, 0)])
    assert port.match == "portable"
    one = node_resolution([Capability(9, 5), Capability(9, 5)])
    assert one == resolve("9.5")
    with pytest.raises(ValueError, match=r"^no GPU to resolve$"):
        node_resolution(())


def test_json_override_round_trip(tmp_path):
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"architectures": {"12.0": {"name": "é"}}}), encoding="utf-8")
    assert load_override_file(str(path)) == {"12.0": {"name": "é"}}


def test_mixed_node_demotion_compares_the_lowest_and_the_highest_gpu():
    res = node_resolution([Capability(10, 0), Capability(10, 3), Capability(12, 0)])
    assert res.match == "generation"  # 10.x and 12.0 share no family
    same = node_resolution([Capability(10, 5), Capability(10, 6)])
    assert same.match == "family" and same.reason == resolve("10.5").reason  # already family: unchanged
