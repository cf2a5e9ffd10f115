"""``plan``'s upstream facts read each SGLang probe's ``partial`` through every wrapper.

SGLang 0.5.23's probes are ``lru_cache(partial(_check, device_capability_majors=...,
cuda_version=...))``; with the plugin's hooks applied a probe is wrapped once more.  The
facts used to read one ``__wrapped__`` link only, so under the hooks every ``is_sm*`` fact
fell silently through (found while routing the linear-attention defaults).
"""

import functools

from sglang_arch.integrations.sglang.plan import _probe_keywords


def _check(device_capability_majors=(), cuda_version=(0, 0)):
    return True


def _hooked(fn):
    @functools.wraps(fn)
    def hook(*a, **k):
        return fn(*a, **k)
    return hook


def test_the_partial_is_found_through_every_wrapper():
    probe = functools.lru_cache(maxsize=1)(functools.partial(_check, device_capability_majors=[10], cuda_version=(12, 8)))
    want = {"device_capability_majors": [10], "cuda_version": (12, 8)}
    assert _probe_keywords(probe) == want
    assert _probe_keywords(_hooked(probe)) == want
    assert _probe_keywords(_hooked(_hooked(probe))) == want


def test_no_partial_is_no_keywords_and_a_cycle_ends():
    assert _probe_keywords(None) == {} and _probe_keywords(len) == {}

    def loop():
        pass
    loop.__wrapped__ = loop
    assert _probe_keywords(loop) == {}
