"""Compile-target rules of ``policies/build.py`` with expected values written as data
from the table's toolkit ranges (found by mutation testing: docs/mutation.md).
sm_70: CUDA 9.0 to 12.9; sm_90: CUDA >= 11.8, sm_90a from 12.0; sm_100: CUDA >= 12.8,
sm_100a from 12.8, sm_100f from 12.9."""

from dataclasses import replace

import pytest
from sglang_arch.arch import resolve
from sglang_arch.arch.policies.build import plan_targets


def prof(cap):
    return resolve(cap).profile


def test_specific_targets_are_the_default():
    plan = plan_targets([prof("9.0")], (12, 8))
    assert plan.render("flashinfer") == "9.0a"
    assert plan.cuda == (12, 8)
    assert plan.notes == ()


def test_arch_specific_from_its_first_toolkit():
    assert plan_targets([prof("9.0")], (12, 0)).render("flashinfer") == "9.0a"


def test_without_specific_only_plain_targets_and_no_notes():
    plan = plan_targets([prof("9.0"), prof("10.0")], (12, 8), specific=False)
    assert plan.render("flashinfer") == "9.0 10.0"
    assert plan.notes == ()


def test_toolkit_too_old_for_a_or_f_falls_back_to_plain_with_a_note():
    plan = plan_targets([prof("9.0")], (11, 8))
    assert plan.render("flashinfer") == "9.0"
    assert plan.notes == ("sm_90a/f need CUDA >= 12.0; plain sm_90 only",)


def test_family_target_where_only_a_family_minimum_is_known():
    # an override that gives only min_cuda_family: sm_XYf from that toolkit on
    p = replace(prof("10.0"), min_cuda_arch_specific=None, min_cuda_family=(12, 9))
    assert plan_targets([p], (12, 9)).render("flashinfer") == "10.0f"
    plan = plan_targets([p], (12, 8))
    assert plan.render("flashinfer") == "10.0"
    assert plan.notes == ("sm_100a/f need CUDA >= 12.9; plain sm_100 only",)


def test_toolkit_range_bounds_are_inclusive():
    assert plan_targets([prof("10.0")], (12, 8)).render("flashinfer") == "10.0a"
    assert plan_targets([prof("7.0")], (12, 9)).render("flashinfer") == "7.0"


@pytest.mark.parametrize("caps, cuda, message", [
    ([], (12, 8), "no capability given; pass at least one"),
    (["10.0"], (12, 4), "sm_100 needs CUDA >= 12.8; toolkit is 12.4"),
    (["7.0"], (13, 0), "sm_70 offline compilation was removed after CUDA 12.9; toolkit is 13.0"),
])
def test_plan_errors(caps, cuda, message):
    with pytest.raises(ValueError) as e:
        plan_targets([prof(c) for c in caps], cuda)
    assert str(e.value) == message


def test_render_rejects_an_unknown_format():
    with pytest.raises(ValueError) as e:
        plan_targets([prof("9.0")], (12, 8)).render("bazel")
    assert str(e.value) == "invalid format 'bazel'; accepted: gencode, torch, cmake, flashinfer"
