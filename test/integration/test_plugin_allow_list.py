"""``SGLANG_PLUGINS`` read exactly as SGLang 0.5.23's loader reads it.

One SGLang process answers, for each generated value, whether SGLang's own
``load_plugins_by_group`` would load the plugin (its ``entry_points`` replaced by the
plugin's real entry point and two others, so nothing else is loaded); the early router
(``_sglang_arch_early.opted_out``) and the entry point (``register``) must agree with it.
"""

import json
import subprocess
import sys
import textwrap

import _sglang_arch_early as _early
import pytest
from helpers import clean_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("sglang")

CHILD = textwrap.dedent("""
    import json, os, sys, warnings
    from importlib.metadata import entry_points
    import sglang.srt.plugins as plugins

    real = [ep for ep in entry_points(group=plugins.GENERAL_PLUGINS_GROUP) if ep.value.startswith("sglang_arch")]

    class Fake:
        def __init__(self, name):
            self.name, self.value, self.dist = name, "fake:register", None
        def load(self):
            return lambda: None

    eps = real + [Fake("other"), Fake("SGLANG_ARCH")]
    plugins.entry_points = lambda group: eps
    print(json.dumps({"real": [ep.name for ep in real]}), flush=True)
    for line in sys.stdin:
        value = json.loads(line)
        if value is None:
            os.environ.pop("SGLANG_PLUGINS", None)
        else:
            os.environ["SGLANG_PLUGINS"] = value
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = plugins.load_plugins_by_group(plugins.GENERAL_PLUGINS_GROUP)
        print(json.dumps(sorted(loaded)), flush=True)
""")


@pytest.fixture(scope="module")
def sglang_loader():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=clean_env(SGLANG_ARCH_DISABLE="1"))
    first = json.loads(child.stdout.readline() or "null")
    assert first == {"real": [_early.PLUGIN_NAME]}, first  # the installed entry point has the name _early uses

    def loads(value):
        child.stdin.write(json.dumps(value) + "\n")
        child.stdin.flush()
        return json.loads(child.stdout.readline())

    yield loads
    child.stdin.close()
    child.wait(timeout=60)


PIECES = ["sglang_arch", "SGLANG_ARCH", "sglang-arch", "sglang_arch_x", "other", "none", "", " ", "\t", "\n",
          ",", ",,", "\u00a0", "\u2003", "\u200b", "\x1c", "\x85"]
values = st.one_of(
    st.none(),
    st.lists(st.sampled_from(PIECES), max_size=8).map("".join),
    st.text(max_size=12),
).filter(lambda v: v is None or "\x00" not in v)  # an environment value cannot hold NUL


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values)
def test_the_early_router_and_the_entry_point_agree_with_sglangs_loader(sglang_loader, monkeypatch, value):
    env = {} if value is None else {"SGLANG_PLUGINS": value}
    sglang_loads = _early.PLUGIN_NAME in sglang_loader(value)
    assert _early.allowed_by_sglang(env) is sglang_loads, value
    assert _early.opted_out(env) is (not sglang_loads), value


@pytest.mark.parametrize("value,loads", [(" ", False), ("", True), (",", False), ("other", False),
                                         ("other, sglang_arch ", True), ("SGLANG_ARCH", False)])
def test_examples_against_sglangs_loader(sglang_loader, value, loads):
    assert (_early.PLUGIN_NAME in sglang_loader(value)) is loads
    assert _early.allowed_by_sglang({"SGLANG_PLUGINS": value}) is loads
