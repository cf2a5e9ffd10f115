"""The table builder (profile.py) field by field, with the expected values and messages
written as data (found by mutation testing: docs/mutation.md).

The ranges are the README's "Limits" table; the messages are what an override file's
author reads, so each must name the file, the entry, the field and the value refused.
The shipped table is built once at import, so these build entries of their own.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sglang_arch.arch.capability import Capability
from sglang_arch.arch.profile import (
    TableError,
    build_profile,
    flatten_entries,
    inherits_of,
    parse_version,
)

W = "over.toml"
CAP = Capability(9, 0)
CTX = "over.toml: entry 9.0"
MIB = 1024 * 1024
VERSION_ACCEPTED = ("'M.m' such as '12.8' or '13.0', or 'M' or 'M.m.p' (ASCII digits without a leading zero; "
                    "major 1-99, minor 0-99, patch 0-9999, dropped)")


def build(**fields):
    return build_profile(CAP, {"name": "Test", **fields}, W)


def refused(**fields):
    with pytest.raises(TableError) as e:
        build(**fields)
    return str(e.value)


# --- flatten_entries / inherits_of -----------------------------------------------------


def test_flatten_inherits_all_but_lead_and_sources():
    raw = {
        "9.0": {"name": "Parent", "examples": ["P"], "lead": ["parent only"], "sources": ["parent source"]},
        "9.1": {"inherits": "9.0", "examples": ["C"]},
    }
    flat = flatten_entries(raw, W)
    assert flat[Capability(9, 1)] == {"name": "Parent", "examples": ["C"]}
    assert flat[Capability(9, 0)] == raw["9.0"]


def test_flatten_keeps_the_childs_own_lead_and_sources():
    raw = {"9.0": {"name": "P", "lead": ["a"]}, "9.1": {"inherits": "9.0", "lead": ["b"], "sources": ["s"]}}
    assert flatten_entries(raw, W)[Capability(9, 1)] == {"name": "P", "lead": ["b"], "sources": ["s"]}


def test_flatten_bad_key_names_the_file():
    with pytest.raises(TableError) as e:
        flatten_entries({"gpu": {"name": "x"}}, W)
    assert str(e.value).startswith("over.toml: invalid compute capability 'gpu'")


def test_flatten_entry_that_is_not_a_table():
    with pytest.raises(TableError) as e:
        flatten_entries({"9.0": 5}, W)
    assert str(e.value) == "over.toml: entry '9.0' must be a table of fields, got int"


def test_flatten_capability_listed_twice():
    with pytest.raises(TableError) as e:
        flatten_entries({"9.0": {"name": "a"}, "sm_90": {"name": "b"}}, W)
    assert str(e.value) == ("over.toml: entries '9.0' and 'sm_90' both name capability 9.0 (listed twice); "
                            "accepted: one entry per capability")


def test_flatten_inherits_that_is_not_a_string():
    with pytest.raises(TableError) as e:
        flatten_entries({"9.0": {"name": "a", "inherits": 8}}, W)
    assert str(e.value) == ("over.toml: entry 9.0: field 'inherits': expected a capability string "
                            "such as '12.0', got 8")


def test_inherits_of_names_the_field():
    assert inherits_of({"inherits": "8.0"}, "ctx") == Capability(8, 0)
    assert inherits_of({"inherits": None}, "ctx") is None
    with pytest.raises(TableError) as e:
        inherits_of({"inherits": "ampere"}, "ctx")
    assert str(e.value).startswith("ctx: field 'inherits': invalid compute capability 'ampere'")


# --- build_profile: defaults and every field ------------------------------------------


def test_minimal_entry_gets_the_documented_defaults():
    p = build()
    assert (p.capability, p.name) == (CAP, "Test")
    assert p.examples == () and p.lead == () and p.sources == ()
    assert p.features == {} and p.topology == "pcie"
    assert (p.smem_per_sm_kib, p.smem_per_block_kib) == (None, None)
    assert (p.min_cuda, p.min_cuda_arch_specific, p.min_cuda_family, p.max_cuda) == (None, None, None, None)
    assert p.torch_symm_mem == {} and p.symm_mem_multimem_world_sizes == ()
    assert p.custom_ar_v2_table is None
    assert p.custom_ar_v2_world_sizes == (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)
    assert p.allreduce_fusion == () and p.allreduce_fusion_multi_node == ()
    assert p.allreduce_fusion_min_cuda is None
    assert p.attention_mha == () and p.attention_mla == ()


def test_null_fields_take_the_defaults():
    p = build(features=None, topology=None, examples=None, attention_mha=None, attention_mla=None,
              smem_per_sm_kib=None)
    assert (p.features, p.topology, p.examples, p.attention_mha, p.attention_mla) == ({}, "pcie", (), (), ())
    assert p.smem_per_sm_kib is None


def test_every_field_is_kept():
    p = build(examples=["H100"], smem_per_sm_kib=228, smem_per_block_kib=227, features={"wgmma": "arch"},
              topology="nvswitch", min_cuda="12.0", min_cuda_arch_specific="12.1", min_cuda_family="12.9",
              max_cuda="13.1", torch_symm_mem={2: 64, 8: 128}, symm_mem_multimem_world_sizes=[4, 8],
              custom_ar_v2_table="sm90", custom_ar_v2_world_sizes=[2, 4], allreduce_fusion=["trtllm", "mnnvl"],
              allreduce_fusion_multi_node=["mnnvl"], allreduce_fusion_min_cuda="12.3",
              attention_mha=["fa3"], attention_mla=["flashmla"], lead=["name"], sources=["s"])
    assert p.examples == ("H100",)
    assert (p.smem_per_sm_kib, p.smem_per_block_kib) == (228, 227)
    assert p.features == {"wgmma": "arch"} and p.topology == "nvswitch"
    assert (p.min_cuda, p.min_cuda_arch_specific, p.min_cuda_family, p.max_cuda) == ((12, 0), (12, 1), (12, 9), (13, 1))
    assert p.torch_symm_mem == {2: 64 * MIB, 8: 128 * MIB}
    assert p.symm_mem_multimem_world_sizes == (4, 8)
    assert (p.custom_ar_v2_table, p.custom_ar_v2_world_sizes) == ("sm90", (2, 4))
    assert (p.allreduce_fusion, p.allreduce_fusion_multi_node) == (("trtllm", "mnnvl"), ("mnnvl",))
    assert p.allreduce_fusion_min_cuda == (12, 3)
    assert (p.attention_mha, p.attention_mla, p.lead, p.sources) == (("fa3",), ("flashmla",), ("name",), ("s",))


@pytest.mark.parametrize("field, low, high", [
    ("smem_per_sm_kib", 1, 1024),
    ("smem_per_block_kib", 1, 1024),
])
def test_smem_range(field, low, high):
    assert getattr(build(**{field: low}), field) == low
    assert getattr(build(**{field: high}), field) == high
    for bad in (low - 1, high + 1):
        assert refused(**{field: bad}) == f"{CTX}: field '{field}': expected an integer >= 1 and <= 1024, got {bad}"


def test_world_size_lists_range():
    # README "Limits": 2-72 for symm_mem_multimem_world_sizes, 1-72 for custom_ar_v2_world_sizes
    assert build(symm_mem_multimem_world_sizes=[2, 72]).symm_mem_multimem_world_sizes == (2, 72)
    assert build(custom_ar_v2_world_sizes=[1, 72]).custom_ar_v2_world_sizes == (1, 72)
    assert refused(symm_mem_multimem_world_sizes=[1]) == (
        f"{CTX}: field 'symm_mem_multimem_world_sizes': expected an integer >= 2 and <= 72, got 1")
    assert refused(custom_ar_v2_world_sizes=[0]) == (
        f"{CTX}: field 'custom_ar_v2_world_sizes': expected an integer >= 1 and <= 72, got 0")
    assert refused(symm_mem_multimem_world_sizes=4) == (
        f"{CTX}: field 'symm_mem_multimem_world_sizes': expected a list of integers 2-72, got 4")


def test_unknown_fields_show_the_first_five():
    msg = refused(f1=1, f2=1, f3=1, f4=1, f5=1, f6=1)
    assert msg.startswith(f"{CTX}: unknown field(s) ['f1', 'f2', 'f3', 'f4', 'f5']; accepted: [")
    assert "'f6'" not in msg


def test_features_and_symm_mem_must_be_tables():
    assert refused(features=["tma"]) == f"{CTX}: field 'features' must map feature -> scope, got ['tma']"
    assert refused(torch_symm_mem=[2]) == f"{CTX}: field 'torch_symm_mem' must map world size -> MiB, got [2]"


def test_custom_ar_table_must_be_one_of_upstreams():
    # sglang 0.5.23 configs/custom_all_reduce_v2.py: _sm90_configs, _sm100_configs, _sm107_configs
    for table in ("sm90", "sm100", "sm107"):
        assert build(custom_ar_v2_table=table).custom_ar_v2_table == table
    for bad in ("sm91", 90):
        assert refused(custom_ar_v2_table=bad) == (
            f"{CTX}: field 'custom_ar_v2_table': unknown {bad!r}; accepted: ['sm90', 'sm100', 'sm107'] or none")


def test_fusion_backend_errors_name_the_field():
    assert refused(allreduce_fusion=["a", "b", "c", "d"]) == (
        f"{CTX}: field 'allreduce_fusion': unknown backend(s) ['a', 'b', 'c']; "
        f"accepted: ['trtllm', 'mnnvl', 'cutedsl']")
    assert refused(allreduce_fusion=["trtllm"], allreduce_fusion_multi_node=["nccl"]) == (
        f"{CTX}: field 'allreduce_fusion_multi_node': unknown backend(s) ['nccl']; "
        f"accepted: ['trtllm', 'mnnvl', 'cutedsl']")
    assert refused(allreduce_fusion=["trtllm"], allreduce_fusion_multi_node=["mnnvl"]) == (
        f"{CTX}: field 'allreduce_fusion_multi_node' lists backends missing from 'allreduce_fusion'")


@pytest.mark.parametrize("field", ["min_cuda", "min_cuda_arch_specific", "min_cuda_family", "max_cuda",
                                   "allreduce_fusion_min_cuda"])
def test_bad_version_names_its_field(field):
    assert refused(**{field: "twelve"}) == f"{CTX}: field '{field}': invalid version 'twelve'; accepted: {VERSION_ACCEPTED}"


@pytest.mark.parametrize("field", ["examples", "attention_mha", "attention_mla", "lead", "sources"])
def test_bad_string_list_names_its_field(field):
    assert refused(**{field: [7]}) == f"{CTX}: field '{field}': expected a string of 1-1000 characters, got 7"
    assert refused(**{field: "fa3"}) == f"{CTX}: field '{field}': expected a list of strings, got 'fa3'"


def test_string_and_list_lengths():
    # README "Limits": strings 1-1000 characters, lists at most 64 items
    assert build(name="n" * 1000).name == "n" * 1000
    assert refused(name="") == f"{CTX}: field 'name': expected a string of 1-1000 characters, got ''"
    assert refused(name="n" * 1001).startswith(f"{CTX}: field 'name': expected a string of 1-1000 characters, got 'nnn")
    assert len(build(examples=["e"] * 64).examples) == 64
    assert refused(examples=["e"] * 65) == f"{CTX}: field 'examples': expected at most 64 strings, got 65"


# --- parse_version ----------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    ("12.8", (12, 8)), ("13", (13, 0)), ("12.8.1", (12, 8)), (" 12.4 ", (12, 4)),
    ((12, 8), (12, 8)), ([12, 8, 1], (12, 8)), ((1, 0), (1, 0)), ((99, 99), (99, 99)), ("12.0", (12, 0)),
    (" " * 16 + "12.8", (12, 8)),  # 20 characters: the longest accepted
    ("12.10", (12, 10)), ("12.8.0", (12, 8)), ("12.8.9999", (12, 8)), ("10", (10, 0)), ("1.0", (1, 0)),
])
def test_parse_version_accepts(value, expected):
    assert parse_version(value) == expected


@pytest.mark.parametrize("value", [
    "twelve", "", (12,), (12, 8, 1, 0), (True, 0), (12.5, 8), ("12", "8"), 12, None, (0, 5), (100, 0), (12, 100),
    " " * 17 + "12.8",  # 21 characters
    "12.08", "012.8", "12.8.01", "12.00", "00.0", "1.2.3.4", "12.", ".8", "12.8.", "12.8.10000",
])
def test_parse_version_refuses(value):
    with pytest.raises(ValueError) as e:
        parse_version(value)
    assert str(e.value) == f"invalid version {value!r}; accepted: {VERSION_ACCEPTED}"


@given(major=st.integers(1, 99), minor=st.integers(0, 99), patch=st.one_of(st.none(), st.integers(0, 9999)),
       zeros=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_parse_version_grammar(major, minor, patch, zeros):
    # 'M.m[.p]' without a leading zero in any part ('12.08' is not 12.8).
    parts = [str(major), str(minor)] + ([] if patch is None else [str(patch)])
    padded = ["0" + p if z else p for p, z in zip(parts, zeros)]
    text = ".".join(padded)
    if padded == parts:
        assert parse_version(text) == (major, minor)
    else:
        with pytest.raises(ValueError) as e:
            parse_version(text)
        assert str(e.value) == f"invalid version {text!r}; accepted: {VERSION_ACCEPTED}"
