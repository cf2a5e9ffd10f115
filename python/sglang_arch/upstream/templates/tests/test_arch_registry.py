"""sglang.srt.arch: the registry's properties, on every capability (CPU only).

Written by ``sglang-arch upstream`` (step 1). No GPU and no hypothesis needed: every
capability from 0.0 to 20.9 is checked.

Run: python -m pytest test/registered/unit/arch/test_arch_registry.py
"""

import unittest

from sglang.srt.arch import Capability, build_registry
from sglang.srt.arch.policies.collectives import torch_symm_mem
from sglang.srt.arch.policies.platform import platform_facts
from sglang.srt.arch.topology import TOPOLOGIES
from sglang.test.ci.ci_register import register_cpu_ci
from sglang.test.test_utils import CustomTestCase

register_cpu_ci(5, "base-a-test-cpu")

ALL_CAPABILITIES = [Capability(major, minor) for major in range(21) for minor in range(10)]
CUDA_VERSIONS = [(11, 8), (12, 2), (12, 3), (12, 8), (12, 9), (13, 0)]

# SGLang's own probes, as data: fact -> (device majors, minimum torch CUDA version).
# Source: python/sglang/srt/utils/common.py, _check_cuda_device_version and the
# is_*_supported partials (is_sm90 / is_sm100 / ... on the platform are those probes).
SGLANG_PROBES = {
    "is_sm90": ((9,), (12, 3)),
    "is_sm100": ((10,), (12, 8)),
    "is_sm100_or_sm110": ((10, 11), (12, 8)),
    "is_sm110": ((11,), (12, 8)),
    "is_sm120": ((12,), (12, 8)),
    "is_blackwell": ((10, 11, 12), (12, 8)),
    "is_hopper_with_cuda_12_3": ((9,), (12, 3)),
}
SYMM_MEM_MAX_BYTES = 1024 << 20


class TestArchResolution(CustomTestCase):
    @classmethod
    def setUpClass(cls):
        cls.registry = build_registry()  # the shipped table: no override file, not strict
        cls.known = cls.registry.known

    def test_every_capability_resolves(self):
        for cap in ALL_CAPABILITIES:
            res = self.registry.resolve(cap)
            self.assertEqual(res.requested, cap)
            self.assertIn(res.match, ("exact", "family", "generation", "portable"), cap)

    def test_known_tiers_resolve_to_themselves(self):
        for tier in self.known:
            res = self.registry.resolve(tier)
            self.assertEqual((res.match, res.resolved), ("exact", tier))

    def test_fallback_is_the_nearest_lower_tier_never_upward(self):
        for cap in ALL_CAPABILITIES:
            if cap in self.known:
                continue
            res = self.registry.resolve(cap)
            below = [tier for tier in self.known if tier < cap]
            if not below:
                self.assertEqual(res.match, "portable", cap)
                continue
            self.assertEqual(res.resolved, below[-1], cap)
            self.assertLessEqual(res.resolved, cap)
            family = res.resolved.major == cap.major
            self.assertEqual(res.match, "family" if family else "generation", cap)

    def test_worked_examples(self):
        for cap, match, tier in (
            ("13.0", "generation", "12.1"),
            ("12.3", "family", "12.1"),
            ("9.5", "family", "9.0"),
            ("6.1", "portable", "6.1"),
        ):
            res = self.registry.resolve(cap)
            self.assertEqual((res.match, str(res.resolved)), (match, tier), cap)


class TestArchPlatformFacts(CustomTestCase):
    def test_identity_facts_equal_sglangs_probes(self):
        registry = build_registry()
        for cap in ALL_CAPABILITIES:
            res = registry.resolve(cap)
            for cuda in CUDA_VERSIONS:
                facts = platform_facts(res, cuda)
                for name, (majors, min_cuda) in SGLANG_PROBES.items():
                    expected = cap.major in majors and cuda >= min_cuda
                    self.assertIs(facts[name], expected, (str(cap), cuda, name))
                self.assertEqual(facts["device_capability"], (cap.major, cap.minor))

    def test_no_gpu_claims_nothing(self):
        facts = platform_facts(None, None)
        self.assertFalse(any(facts[name] for name in SGLANG_PROBES))


class TestArchSymmMemSizes(CustomTestCase):
    def test_sizes_are_bounded_wherever_enabled(self):
        registry = build_registry()
        for cap in ALL_CAPABILITIES:
            res = registry.resolve(cap)
            for topology in TOPOLOGIES.values():
                for world_size in range(1, 17):
                    decision = torch_symm_mem(res, topology, world_size)
                    if decision.enabled:
                        self.assertGreater(decision.max_bytes, 0)
                        self.assertLessEqual(decision.max_bytes, SYMM_MEM_MAX_BYTES)
                        self.assertIn(decision.algorithm, ("multimem", "two_shot"))
                    else:
                        self.assertEqual(decision.max_bytes, 0)


if __name__ == "__main__":
    unittest.main()
