"""SGLang 0.5.23's own platform probe rule, written here as data from its source
(``srt/utils/common.py`` lines 292-337: each ``is_sm*`` probe is
``_check_cuda_device_version(device_capability_majors=[...], cuda_version=(..))``), not
imported from the registry under test: the oracle the rule tests compare with.
``test/integration/test_sources_upstream.py`` checks the table against the installed SGLang."""

# fact -> (majors, minimum torch CUDA)
UPSTREAM_PROBES = {
    "is_hopper_with_cuda_12_3": ((9,), (12, 3)),
    "is_blackwell": ((10, 11, 12), (12, 8)),
    "is_sm120": ((12,), (12, 8)),
    "is_sm100": ((10,), (12, 8)),
    "is_sm100_or_sm110": ((10, 11), (12, 8)),
    "is_sm110": ((11,), (12, 8)),
    "is_sm90": ((9,), (12, 3)),
}


def upstream_fact(name, cap, cuda):
    """What SGLang's probe ``name`` answers on a device of capability ``cap`` (a Capability or a
    (major, minor) tuple) with torch CUDA ``cuda``."""
    majors, need = UPSTREAM_PROBES[name]
    return (cap[0] if isinstance(cap, tuple) else cap.major) in majors and cuda >= need


def upstream_facts(cap, cuda):
    """Every probe's answer, and the identity values, for a (major, minor) tuple."""
    facts = {name: upstream_fact(name, cap, cuda) for name in UPSTREAM_PROBES}
    facts.update(device_capability=cap, device_sm=cap[0] * 10 + cap[1])
    return facts
