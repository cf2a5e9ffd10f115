"""Override files that say one thing twice are refused, naming both occurrences:
two spellings of one capability ("12.0", "sm_120", "120", "(12, 0)"), two
spellings of one world size ("2", "02", " 2"), the same JSON key twice in one object (which
json.loads would read as the last one), a world size listed twice in a list."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_arch.arch.profile import TableError
from sglang_arch.arch.registry import build_registry, load_override_file
from sglang_arch.tune.collectives import toml_string


@st.composite
def two_spellings(draw):
    major = draw(st.integers(1, 29))
    minor = draw(st.integers(0, 9))
    forms = [f"{major}.{minor}", f"sm_{major}{minor}", f"sm{major}{minor}a", f"compute_{major}{minor}f",
             f"({major}, {minor})", f" {major}.{minor} ", f"SM_{major}{minor}"]
    if major * 10 + minor >= 30:
        forms.append(f"{major}{minor}")
    if minor == 0:
        forms.append(f"{major}")
    first, second = draw(st.lists(st.sampled_from(forms), min_size=2, max_size=2, unique=True))
    return f"{major}.{minor}", first, second


def write(folder, suffix, doc):
    path = folder / f"arch{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(doc))
    else:
        lines = []
        for key, fields in doc.items():
            lines.append(f"[architectures.{toml_string(key)}]")
            lines.extend(f"{toml_string(k)} = {json.dumps(v)}" for k, v in fields.items())
        path.write_text("\n".join(lines) + "\n")
    return str(path)


def refused(path):
    with pytest.raises(TableError) as e:
        build_registry(load_override_file(path), override_source=path)
    message = str(e.value)
    assert "\n" not in message and message.startswith(path)
    return message


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(caps=two_spellings(), suffix=st.sampled_from([".json", ".toml"]))
def test_one_capability_spelled_twice_is_refused_naming_both(tmp_path_factory, caps, suffix):
    cap, first, second = caps
    path = write(tmp_path_factory.mktemp("dup"), suffix, {first: {"name": "a"}, second: {"name": "b"}})
    assert refused(path) == (f"{path}: entries {first!r} and {second!r} both name capability {cap} (listed twice); "
                             f"accepted: one entry per capability")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ws=st.integers(2, 72), pads=st.lists(st.sampled_from(["", "0", " ", "00"]), min_size=2, max_size=2,
                                             unique=True), suffix=st.sampled_from([".json", ".toml"]))
def test_one_world_size_spelled_twice_is_refused_naming_both(tmp_path_factory, ws, pads, suffix):
    first, second = (f"{p}{ws}" for p in pads)
    doc = {"12.0": {"torch_symm_mem": {first: 64, second: 32}}}
    path = write(tmp_path_factory.mktemp("dup"), suffix, doc) if suffix == ".json" else None
    if path is None:  # TOML inline table of the two keys
        path = str(tmp_path_factory.mktemp("dup") / "arch.toml")
        with open(path, "w") as fh:
            fh.write(f'[architectures."12.0"]\ntorch_symm_mem = {{ {toml_string(first)} = 64, '
                     f'{toml_string(second)} = 32 }}\n')
    assert refused(path) == (f"{path}: entry 12.0: field 'torch_symm_mem': keys {first!r} and {second!r} both name "
                             f"world size {ws} (listed twice); accepted: one size per world size")


@pytest.mark.parametrize("text,key", [
    ('{"12.0": {"name": "a", "name": "b"}}', "name"),
    ('{"12.0": {"name": "a"}, "12.0": {"name": "b"}}', "12.0"),
    ('{"architectures": {"9.0": {"torch_symm_mem": {"2": 64, "2": 1}}}}', "2"),
])
def test_the_same_json_key_twice_is_refused(tmp_path, text, key):
    path = tmp_path / "arch.json"
    path.write_text(text)
    with pytest.raises(TableError) as e:
        load_override_file(str(path))
    assert str(e.value) == (f"{path}: not valid JSON: key {key!r} is given twice in one object (both occurrences "
                            f"would be read as one, the last winning); accepted: each key once")


def test_a_world_size_listed_twice_is_refused_naming_both():
    with pytest.raises(TableError) as e:
        build_registry({"12.0": {"symm_mem_multimem_world_sizes": [4, 2, "4"]}}, override_source="o.json")
    assert str(e.value) == ("o.json: entry 12.0: field 'symm_mem_multimem_world_sizes': items 4 and '4' both name 4 "
                            "(listed twice); accepted: each value once")
