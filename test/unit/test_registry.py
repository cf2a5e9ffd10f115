import json

import pytest
from hypothesis import given
from sglang_arch.arch import (
    FEATURES,
    Capability,
    TableError,
    UnknownCapabilityError,
    build_registry,
    default_registry,
    reset_default_registry,
    resolve,
)
from sglang_arch.arch.registry import load_override_file

from unit.strategies import capabilities

KNOWN = default_registry().known


def test_known_tiers_cover_the_issue_list():
    expected = {"7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "11.0", "12.0", "12.1"}
    assert expected <= {str(c) for c in KNOWN}


def test_every_entry_names_its_source():
    for cap in KNOWN:
        assert default_registry().profile(cap).sources, cap


def test_siblings_inherit():
    reg = default_registry()
    assert reg.profile("10.3").torch_symm_mem == reg.profile("10.0").torch_symm_mem
    assert reg.profile("12.1").features == reg.profile("12.0").features
    assert reg.profile("12.1").topology == "single" != reg.profile("12.0").topology


@given(capabilities)
def test_resolution_is_total_and_never_upward(cap):
    res = resolve(cap)
    assert res.requested == cap
    assert res.match in ("exact", "family", "generation", "portable")
    assert res.resolved <= cap
    assert res.reason


@given(capabilities)
def test_exact_capabilities_resolve_to_themselves(cap):
    res = resolve(cap)
    assert (res.match == "exact") == (cap in KNOWN)
    if cap in KNOWN:
        assert res.resolved == cap


# The fallback rule (README, "The fallback rule") worked out by hand for capabilities
# around every tier: requested -> (resolved tier, match).
FALLBACK = {
    "0.0": (None, "portable"), "6.1": (None, "portable"), "6.9": (None, "portable"),
    "7.0": ("7.0", "exact"), "7.1": ("7.0", "family"), "7.4": ("7.0", "family"), "7.5": ("7.5", "exact"),
    "7.9": ("7.5", "family"), "8.0": ("8.0", "exact"), "8.5": ("8.0", "family"), "8.6": ("8.6", "exact"),
    "8.8": ("8.7", "family"), "8.9": ("8.9", "exact"), "9.0": ("9.0", "exact"), "9.5": ("9.0", "family"),
    "9.9": ("9.0", "family"), "10.0": ("10.0", "exact"), "10.1": ("10.0", "family"), "10.2": ("10.0", "family"),
    "10.3": ("10.3", "exact"), "10.4": ("10.3", "family"), "10.6": ("10.3", "family"), "10.7": ("10.7", "exact"),
    "10.9": ("10.7", "family"), "11.0": ("11.0", "exact"), "11.5": ("11.0", "family"), "12.0": ("12.0", "exact"),
    "12.1": ("12.1", "exact"), "12.2": ("12.1", "family"), "12.9": ("12.1", "family"),
    "13.0": ("12.1", "generation"), "14.2": ("12.1", "generation"), "99.9": ("12.1", "generation"),
}


@pytest.mark.parametrize("cap", sorted(FALLBACK, key=lambda c: tuple(map(int, c.split(".")))))
def test_fallback_worked_examples(cap):
    tier, match = FALLBACK[cap]
    res = resolve(cap)
    assert res.match == match, res.reason
    assert str(res.requested) == cap
    assert str(res.resolved) == (tier or cap)  # portable: the device itself, with no tier's paths
    if match == "portable":
        assert res.profile.name == "portable" and not any(res.features.values())


@given(capabilities)
def test_fallback_is_the_nearest_known_tier_below(cap):
    """Invariants of the rule: never upward, nothing known in between, the match names
    whether the tier shares the device's major."""
    res = resolve(cap)
    if res.match == "exact":
        assert res.resolved == cap
        return
    assert cap not in KNOWN
    if res.match == "portable":
        assert all(k > cap for k in KNOWN)
        return
    assert res.resolved < cap and res.resolved in KNOWN
    assert not [k for k in KNOWN if res.resolved < k < cap]
    assert res.match == ("family" if res.resolved.major == cap.major else "generation")


@given(capabilities)
def test_arch_specific_features_never_cross_a_family_or_an_exact_match(cap):
    res = resolve(cap)
    for feature in FEATURES:
        scope = res.profile.features.get(feature)
        if res.has(feature):
            assert scope is not None
            if scope == "arch":
                assert res.match == "exact"
            if scope == "family":
                assert res.resolved.major == cap.major
        if res.match == "portable":
            assert not res.has(feature)


def test_issue_examples():
    r = resolve("13.0")
    assert (str(r.resolved), r.match) == ("12.1", "generation")
    assert not r.has("tcgen05") and not r.has("wgmma")
    r = resolve("9.5")
    assert (str(r.resolved), r.match) == ("9.0", "family")
    assert not r.has("wgmma") and r.has("tma")
    r = resolve("10.5")
    assert (str(r.resolved), r.match) == ("10.3", "family") and r.has("tcgen05")
    r = resolve("6.1")
    assert r.match == "portable" and not any(r.features.values())


def test_strict_mode_refuses_fallback(monkeypatch):
    with pytest.raises(UnknownCapabilityError, match="strict mode: 13.0 is not a known tier"):
        resolve("13.0", strict=True)
    assert resolve("12.0", strict=True).match == "exact"
    monkeypatch.setenv("SGLANG_ARCH_STRICT", "1")
    reset_default_registry()
    with pytest.raises(UnknownCapabilityError):
        resolve("9.5")
    assert resolve("9.5", strict=False).match == "family"


def test_strict_env_with_a_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_STRICT", "maybe")
    reset_default_registry()
    with pytest.raises(ValueError, match="SGLANG_ARCH_STRICT='maybe' is not a boolean"):
        resolve("9.0")


def test_resolve_as_override(monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_RESOLVE_AS", "9.0")
    reset_default_registry()
    res = resolve("12.0")
    assert res.match == "override" and str(res.resolved) == "9.0" and res.has("wgmma")
    monkeypatch.setenv("SGLANG_ARCH_RESOLVE_AS", "9.5")
    reset_default_registry()
    with pytest.raises(ValueError, match="not a known tier"):
        resolve("9.0")


def test_override_file_patches_and_adds(tmp_path, monkeypatch):
    path = tmp_path / "arch.json"
    path.write_text(json.dumps({
        "12.0": {"torch_symm_mem": {"2": 32, "4": 32}},
        "13.0": {"inherits": "12.0", "name": "Next", "topology": "pcie-p2p"},
    }))
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    reset_default_registry()
    r12 = resolve("12.0")
    assert r12.match == "override" and str(path) in r12.reason
    assert r12.profile.torch_symm_mem == {2: 32 << 20, 4: 32 << 20}
    assert r12.profile.name == "Blackwell (RTX)"  # untouched fields kept
    r13 = resolve("13.0")
    assert r13.match == "override" and r13.profile.name == "Next" and r13.has("fp4")
    assert resolve("13.5").match == "family" and str(resolve("13.5").resolved) == "13.0"


def test_override_file_toml(tmp_path):
    path = tmp_path / "arch.toml"
    path.write_text('[architectures."12.0"]\nname = "Tuned"\ntorch_symm_mem = { "8" = 256 }\n')
    reg = build_registry(load_override_file(str(path)), override_source=str(path))
    assert reg.resolve("12.0").profile.torch_symm_mem == {8: 256 << 20}


@pytest.mark.parametrize("content,message", [
    ({"12.0": {"torch_symm_mem": {"8": -1}}}, r"entry 12.0: field 'torch_symm_mem.8': expected an integer 1-1024 \(MiB\), or a string"),
    ({"12.0": {"features": {"warp_magic": "arch"}}}, r"entry 12.0: field 'features': unknown feature 'warp_magic'"),
    ({"12.0": {"features": {"fp8": "sometimes"}}}, r"field 'features.fp8': unknown scope 'sometimes'"),
    ({"12.0": {"topology": "ring"}}, r"field 'topology': unknown 'ring'; accepted: single, nvswitch"),
    ({"12.0": {"colour": "green"}}, r"entry 12.0: unknown field\(s\) \['colour'\]"),
    ({"twelve": {"name": "x"}}, r"invalid compute capability 'twelve'"),
    ({"13.0": {"inherits": "14.0", "name": "x"}}, r"field 'inherits' names '14.0', which has no entry"),
    ({"13.0": {"topology": "pcie"}}, r"entry 13.0: field 'name' is required"),
    ({"12.0": {"allreduce_fusion": ["nccl"]}}, r"field 'allreduce_fusion': unknown backend\(s\) \['nccl'\]"),
    ({"12.0": "fast"}, r"entry '12.0' must be a table of fields"),
])
def test_malformed_override_names_file_and_field(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(content))
    with pytest.raises(TableError, match=message) as err:
        build_registry(load_override_file(str(path)), override_source=str(path))
    assert str(path) in str(err.value)


def test_unreadable_or_unparsable_override(tmp_path):
    with pytest.raises(TableError, match="cannot read override file"):
        load_override_file(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(TableError, match="not valid JSON"):
        load_override_file(str(bad))
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("= =")
    with pytest.raises(TableError, match="not valid TOML"):
        load_override_file(str(bad_toml))


def test_inheritance_cycle_is_reported():
    with pytest.raises(TableError, match="cycle"):
        build_registry({"13.0": {"inherits": "13.1", "name": "a"}, "13.1": {"inherits": "13.0", "name": "b"}})


def test_resolution_is_cached_and_cheap():
    reg = default_registry()
    assert reg.resolve("12.0") is reg.resolve((12, 0))
    assert isinstance(reg.resolve(120).requested, Capability)


@pytest.mark.parametrize("value,size", [("512 KiB", 512 << 10), ("1536KiB", 1536 << 10), ("4096 B", 4096),
                                        ("4 B", 4), ("2 MiB", 2 << 20), (3, 3 << 20)])
def test_a_symm_mem_size_is_whole_4_byte_words_in_one_spelling(value, size):
    from sglang_arch.arch.profile import symm_size_bytes

    assert symm_size_bytes(value, "field 'torch_symm_mem.8'") == size


@pytest.mark.parametrize("value", ["5 B", "6 B", "2 B", " 1 MiB", "1 MiB ", "1  MiB", "1\tMiB", "0 B", "1025 MiB"])
def test_a_symm_mem_size_off_the_words_or_the_spelling_is_refused(value):
    from sglang_arch.arch.profile import symm_size_bytes

    with pytest.raises(TableError) as err:
        symm_size_bytes(value, "field 'torch_symm_mem.8'")
    assert "multiple of 4 bytes" in str(err.value) and "torch_symm_mem.8" in str(err.value)


def test_an_inherits_cycle_names_every_entry_of_it():
    from sglang_arch.arch.profile import flatten_entries

    with pytest.raises(TableError) as err:
        flatten_entries({"12.0": {"inherits": "12.1"}, "12.1": {"inherits": "12.0"}}, "arch.toml")
    assert "12.0 -> 12.1 -> 12.0" in str(err.value) or "12.1 -> 12.0 -> 12.1" in str(err.value)
