"""The plugin inside the real SGLang: loading, opting out, guards, CLI start-up."""

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from helpers import clean_env  # noqa: E402

PROBE = textwrap.dedent("""
    import json, logging, sys
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s|%(message)s")
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang.srt.runtime_context import get_platform
    p = get_platform()
    print(json.dumps({"is_sm120": p.is_sm120, "capability": list(p.device_capability or ())}))
""")


def python(code, **env):
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(**env))
    assert out.returncode == 0, out.stderr[-2000:]
    return out


def facts(out):
    import json

    return json.loads(out.stdout.strip().splitlines()[-1])


def test_loads_through_the_entry_point_in_a_fresh_interpreter():
    out = python(PROBE, SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="8")
    assert facts(out) == {"is_sm120": True, "capability": [12, 0]}
    line = [line for line in out.stderr.splitlines() if line.startswith("sglang_arch|sglang-arch: 8x")]
    assert len(line) == 1, out.stderr[-2000:]
    text = line[0][len("sglang_arch|"):]
    assert len(text) <= 200
    assert text.startswith("sglang-arch: 8x sm_120 ") and "tier 12.0 [exact]" in text
    for decision in ("symm-mem ", "custom-AR ", "fusion ", "attn MHA "):
        assert decision in text
    assert "; routed" not in out.stderr  # the hook list is DEBUG


def test_unknown_gpu_keeps_its_identity_through_sglang():
    """docs/fallback.md: 13.0 takes 12.1's decisions, but SGLang's probes see 13.0."""
    out = python(PROBE, SGLANG_ARCH_CAPABILITY="13.0")
    assert facts(out) == {"is_sm120": False, "capability": [13, 0]}
    assert "tier 12.1 [generation]" in out.stderr


def test_loads_in_a_spawned_child():
    code = textwrap.dedent("""
        import json, multiprocessing as mp

        def child(q):
            from sglang.srt.plugins import load_plugins
            load_plugins()  # what SGLang's scheduler and detokenizer do first
            from sglang.srt.runtime_context import get_platform
            q.put(get_platform().is_sm120)

        if __name__ == "__main__":
            ctx = mp.get_context("spawn")
            q = ctx.Queue()
            p = ctx.Process(target=child, args=(q,))
            p.start(); p.join(120)
            print(json.dumps({"child_is_sm120": q.get(timeout=5), "exit": p.exitcode}))
    """)
    import json
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(code)
    out = subprocess.run([sys.executable, fh.name], capture_output=True, text=True,
                         env=clean_env(SGLANG_ARCH_CAPABILITY="12.0"))
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"child_is_sm120": True, "exit": 0}


@pytest.mark.parametrize("env", [{"SGLANG_PLUGINS": "some_other_plugin"}, {"SGLANG_ARCH_DISABLE": "1"}])
def test_opting_out_leaves_sglang_alone(env):
    # With the GPU simulated only for the registry, SGLang alone sees a CPU machine.
    out = python(PROBE, SGLANG_ARCH_CAPABILITY="12.0", **env)
    assert facts(out)["is_sm120"] is False
    assert "sglang-arch: 12.0" not in out.stderr and "tier 12.0" not in out.stderr
    if "SGLANG_ARCH_DISABLE" in env:
        assert "disabled by SGLANG_ARCH_DISABLE" in out.stderr


def test_bad_registry_environment_warns_and_leaves_upstream_behaviour():
    out = python(PROBE, SGLANG_ARCH_CAPABILITY="banana")
    assert facts(out)["is_sm120"] is False
    warnings = [line for line in out.stderr.splitlines() if "plugin not active" in line]
    assert len(warnings) == 1 and "invalid compute capability 'banana'" in warnings[0]


def test_a_missing_or_changed_target_is_one_warning_and_upstream_behaviour():
    code = textwrap.dedent("""
        import logging, sys
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s|%(message)s")
        from sglang_arch.integrations.sglang import hooks, targets
        from sglang_arch.integrations.sglang.glue import attention, fusion
        real = targets.all_targets
        def patched():
            out = real()
            out.append(targets.Target("attention backend", "sglang.srt.arg_groups.overrides._no_such_pass",
                                      hooks.check(attention.check_explicit_backends), ("view",)))
            out.append(targets.Target("attention backend", "sglang.srt.layers.flashinfer_comm_fusion._resolve_backend",
                                      hooks.answer(fusion.resolve_backend), ("backend", "is_multi_node", "group")))
            out = [t for t in out if not (t.path.endswith("_resolve_backend") and len(t.params) == 2)]
            return out
        targets.all_targets = patched
        from sglang.srt.plugins import load_plugins
        load_plugins()
        from sglang.srt.layers import flashinfer_comm_fusion as f
        from sglang.srt.runtime_context import override_platform
        with override_platform(is_sm90=False, is_sm100=False):
            try:
                f._resolve_backend("auto")
                print("routed")
            except ValueError:
                print("upstream")
    """)
    out = python(code, SGLANG_ARCH_CAPABILITY="12.0")
    assert out.stdout.strip().splitlines()[-1] == "upstream"  # SM120 without the hook: upstream raises
    warnings = [line for line in out.stderr.splitlines() if "keep SGLang's own code" in line]
    assert len(warnings) == 1, out.stderr[-2000:]
    # counted when plugins load: the target whose module is there; the other's module loads
    # later, where its parameters are read, and is said then on its own line
    assert warnings[0].startswith("sglang_arch|sglang-arch: 1 of ") and "sglang-arch show" in warnings[0], warnings
    late = [line for line in out.stderr.splitlines() if "left to SGLang" in line]
    assert len(late) == 1 and "_resolve_backend changed: parameters ('backend', 'is_multi_node')" in late[0]
    assert "Traceback" not in out.stderr


def test_every_target_matches_the_installed_release():
    from sglang_arch.integrations.sglang.targets import all_targets, check_target

    problems = [p for p in (check_target(t) for t in all_targets()) if p]
    assert not problems


def test_launch_server_help_works_with_the_plugin():
    out = subprocess.run([sys.executable, "-m", "sglang.launch_server", "--help"], capture_output=True, text=True,
                         env=clean_env(SGLANG_ARCH_CAPABILITY="12.0"), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--enable-torch-symm-mem" in out.stdout
    assert "sglang-arch: 1x sm_120 single -> tier 12.0 [exact]" in out.stderr


def test_symm_mem_through_the_plugin_publishes_the_routed_table_in_both_sglang_modules():
    """The communicator is initialised by the glue; SGLang's table then reads as the registry's (what plan reports)."""
    code = textwrap.dedent("""
        import json, os
        os.environ["SGLANG_OPT_USE_INKLING_CUSTOM_AR"] = "0"
        from sglang.srt.plugins import load_plugins
        from sglang.srt.plugins.hook_registry import HookRegistry
        load_plugins()
        HookRegistry.apply_hooks()
        from sglang.srt.distributed.device_communicators import all_reduce_utils, torch_symm_mem
        from sglang_arch.arch import parse_capability
        from sglang_arch.arch.runtime import current
        from sglang_arch.integrations.sglang.plan import symm_mem_outcome
        before = all_reduce_utils.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES
        outcome = symm_mem_outcome(parse_capability("9.0"), 2, multicast=False)
        print(json.dumps({"outcome": outcome, "routed": current().symm_mem_table(),
                          "upstream_had_9": 9 in before,
                          "utils": all_reduce_utils.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES,
                          "module": torch_symm_mem.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES}))
    """)
    # 2x H200 over NVLink without multicast: stock turns the communicator off; the registry keeps
    # two-shot below the bound measured there (ledger: two-shot-ws2-sm90-no-multicast)
    out = python(code, SGLANG_ARCH_CAPABILITY="9.0", SGLANG_ARCH_GPU_COUNT="2", SGLANG_ARCH_TOPOLOGY="nvlink")
    d = facts(out)
    assert d["outcome"] == {"enabled": True, "max_bytes": 16 << 20, "algorithm": "two_shot"}
    assert d["upstream_had_9"] is True
    assert d["routed"] == d["utils"] == d["module"] == {"9": {"2": 16 << 20}}


def test_a_target_imported_after_load_plugins_is_routed_on_import():
    """The entry point imports no target module itself; the early finder routes it on import."""
    code = textwrap.dedent("""
        import sys
        from sglang.srt.plugins import load_plugins
        load_plugins()
        name = "sglang.srt.distributed.device_communicators.torch_symm_mem"
        before = name in sys.modules
        import importlib
        module = importlib.import_module(name)
        print(before, getattr(module.TorchSymmMemCommunicator.__init__, "__sglang_arch_target__", None))
    """)
    out = python(code, SGLANG_ARCH_CAPABILITY="12.0")
    before, target = out.stdout.split()[-2:]
    assert before == "False"
    assert target == "sglang.srt.distributed.device_communicators.torch_symm_mem.TorchSymmMemCommunicator.__init__"


def test_the_wheel_ships_the_early_hook(tmp_path):
    """`pip install` puts sglang_arch_early.pth and its top-level module into site-packages."""
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                          "-w", str(tmp_path), str(root / "python")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("sglang_arch-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "sglang_arch_early.pth" in names and "_sglang_arch_early.py" in names
    pth = zipfile.ZipFile(wheel).read("sglang_arch_early.pth").decode()
    assert "import _sglang_arch_early" in pth and "sglang_arch." not in pth


def test_start_up_imports_only_the_hook_module():
    """Every interpreter of the venv runs the .pth: it must not pin the sglang_arch package."""
    out = python("import sys, json; print(json.dumps(sorted(m for m in sys.modules if 'sglang_arch' in m)))")
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    # (an editable install adds setuptools' own finder module, __editable___sglang_arch_*)
    assert [m for m in loaded if not m.startswith("__editable__")] == ["_sglang_arch_early"]


OPT_OUT_IN_PROCESS = textwrap.dedent("""
    import json, os, sys
    os.environ.update(json.loads(sys.argv[1]))  # set in-process, after the interpreter started
    from sglang.srt.plugins import load_plugins
    import sglang.srt.layers.flashinfer_comm_fusion as f
    import sglang.srt.distributed.device_communicators.torch_symm_mem as s
    early = [getattr(x, "__sglang_arch_target__", None) is not None
             for x in (f._resolve_backend, s.TorchSymmMemCommunicator.__init__)]
    load_plugins()
    late = [getattr(x, "__sglang_arch_target__", None) is not None
            for x in (f._resolve_backend, s.TorchSymmMemCommunicator.__init__)]
    print(json.dumps({"early": early, "late": late}))
""")


@pytest.mark.parametrize("env,routed", [
    ({"SGLANG_ARCH_DISABLE": "1"}, [False, False]),
    ({"SGLANG_PLUGINS": "other"}, [False, False]),
    ({"SGLANG_ARCH_DISABLE": "fusion"}, [False, True]),
    ({"SGLANG_ARCH_DISABLE": "symm_mem, fusion"}, [False, False]),
    ({"SGLANG_ARCH_DISABLE": "fusoin"}, [False, False]),
])
def test_switches_set_in_process_before_import_hold_early_and_late(env, routed):
    out = subprocess.run([sys.executable, "-c", OPT_OUT_IN_PROCESS, json.dumps(env)], capture_output=True, text=True,
                         env=clean_env(SGLANG_ARCH_CAPABILITY="12.0", SGLANG_ARCH_GPU_COUNT="8"))
    assert out.returncode == 0, out.stderr[-2000:]
    assert facts(out) == {"early": routed, "late": routed}
    if env.get("SGLANG_ARCH_DISABLE") == "fusion":
        line = [x for x in out.stderr.splitlines() if "sglang-arch: 8x" in x]
        assert len(line) == 1 and "fusion SGLang" in line[0] and line[0].endswith("off: fusion")
    if env.get("SGLANG_ARCH_DISABLE") == "fusoin":
        bad = [x for x in out.stderr.splitlines() if "plugin not active" in x]
        assert len(bad) == 1 and "accepted: 1 (all off), 0 (none), or a comma-separated list of: symm_mem" in bad[0]


def test_a_switch_set_after_sglang_loaded_its_modules_takes_the_hooks_off_when_plugins_load():
    code = textwrap.dedent("""
        import json, os
        import sglang.srt.layers.flashinfer_comm_fusion as f
        before = getattr(f._resolve_backend, "__sglang_arch_target__", None) is not None
        os.environ["SGLANG_ARCH_DISABLE"] = "fusion"
        from sglang.srt.plugins import load_plugins
        load_plugins()
        print(json.dumps([before, getattr(f._resolve_backend, "__sglang_arch_target__", None) is not None]))
    """)
    out = python(code, SGLANG_ARCH_CAPABILITY="12.0")
    assert facts(out) == [True, False]
