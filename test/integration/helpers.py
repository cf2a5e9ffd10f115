"""Helpers shared by the integration tests."""

import atexit
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "test" / "fixtures" / "models"
SUITE = Path(__file__).with_name("decision_suite.py")


# The known tiers (docs/support-matrix.md), as data: the routed-vs-upstream tests run SGLang's
# own function and the routed one on each (each must resolve exactly).
TIERS = ("7.0", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "10.7", "11.0", "12.0", "12.1")


def uncached(probe):
    """SGLang's probe without its caches (the partial of ``_check_cuda_device_version``)."""
    import functools

    while not isinstance(probe, functools.partial):
        probe = probe.__wrapped__
    return probe


def simulator(monkeypatch, common, cuda=(12, 9)):
    """``simulate(cap)``: this process as one GPU of capability ``cap`` for SGLang's
    ``get_device_sm`` (module ``common``) and for the plugin's glue (its machine context)."""
    from sglang_arch.arch import runtime
    from sglang_arch.arch.capability import Capability
    from sglang_arch.integrations.sglang import glue

    def simulate(cap: str) -> Capability:
        c = Capability(*map(int, cap.split(".")))
        monkeypatch.setattr(common, "get_device_sm", lambda: c.major * 10 + c.minor)
        ctx = runtime.machine(capability=cap, cuda=cuda)
        monkeypatch.setattr(glue, "current", lambda: ctx)
        return c

    return simulate


def clean_env(**extra):
    """The environment for a subprocess: no SGLANG_ARCH_* of this process, and this
    checkout's sglang_arch first on the path (whatever the venv has installed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    env.pop("SGLANG_PLUGINS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "python"), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


WARM_START = Path(__file__).with_name("warm_start.py")
# Besides SGLANG_*: read at start-up (the warm start's child applies them as the interpreter
# would), or only when CUDA is first used (never before the child runs).
WARM_FREE = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "CUDA_VISIBLE_DEVICES")
WARM_SERVERS = 3  # at most, per test process: one per environment (see _warm_key)
# "servers": the environment's key -> (server, socket path), or None where it could not start;
# "cpu": CPU seconds of the servers and their runs (a forked run is not this process's child).
_warm = {"servers": {}, "cpu": 0.0}
_warm_lock = threading.Lock()


def _warm_key(env):
    """What a warm start must have been started under to serve a run under ``env``: every
    variable but SGLANG_* and WARM_FREE (importing SGLang sets a few, e.g. TRITON_CACHE_DIR,
    which a later child inherits: those runs get a server of their own)."""
    return frozenset((k, v) for k, v in env.items() if not k.startswith("SGLANG_") and k not in WARM_FREE)


def _warm_server(env):
    """The socket of the warm start's server for runs under ``env`` (started on first use), or
    None where there is none (then a run is a plain fresh interpreter)."""
    key = _warm_key(env)
    with _warm_lock:
        servers = _warm["servers"]
        if key not in servers:
            if len(servers) >= WARM_SERVERS:
                return None
            servers[key] = None
            folder = tempfile.mkdtemp(prefix="sglang-arch-warm-")
            sock = os.path.join(folder, "s")
            server_env = {k: v for k, v in env.items() if not k.startswith("SGLANG_")}
            server = subprocess.Popen([sys.executable, str(WARM_START), sock], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=server_env, cwd=folder)
            ready = server.stdout.readline().split()
            if ready[:1] != [b"ready"]:
                server.kill()
                server.wait()
                return None
            servers[key] = (server, sock)
            if not _warm.get("cleanup"):
                _warm["cleanup"] = True
                atexit.register(_stop_warm_servers)
            _warm["cpu"] += float(ready[1])
        return servers[key][1] if servers[key] else None


def _stop_warm_servers():
    """At exit: every warm start stopped and its folder (the socket's) removed."""
    for entry in _warm["servers"].values():
        if not entry:
            continue
        server, sock = entry
        try:
            server.stdin.close()
            server.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            server.kill()
            server.wait()
        shutil.rmtree(os.path.dirname(sock), ignore_errors=True)


def run_python(args, env, cwd=None, timeout=None, warm=True):
    """``subprocess.run([sys.executable, *args], capture_output=True, text=True, ...)``, from
    the warm start (warm_start.py: the third-party modules SGLang imports are imported
    already; SGLang and sglang-arch start fresh in the child).  ``args`` begins with a script,
    ``-c CODE`` or ``-m MODULE``.  ``warm=False`` runs a fresh interpreter."""
    cmd = [sys.executable, *args]
    env = dict(os.environ) if env is None else env
    sock = _warm_server(env) if warm else None
    if sock is None:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    folder = tempfile.mkdtemp(prefix="sglang-arch-run-")
    out, err = os.path.join(folder, "out"), os.path.join(folder, "err")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            try:
                conn.connect(sock)
                conn.sendall(json.dumps({"argv": [str(a) for a in args], "env": env, "cwd": str(cwd or os.getcwd()),
                                         "stdout": out, "stderr": err}).encode())
                conn.shutdown(socket.SHUT_WR)
                reply = conn.makefile("rb")
                pid = int(reply.readline())
            except (OSError, ValueError):  # the server is gone: a fresh interpreter, as without it
                _warm["servers"][_warm_key(env)] = None
                return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
            conn.settimeout(timeout)
            try:
                status = reply.readline()
            except (socket.timeout, TimeoutError):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                raise subprocess.TimeoutExpired(cmd, timeout) from None
        code, used = status.split() if status.strip() else (-signal.SIGKILL, 0)  # killed before it answered
        code = int(code)
        with _warm_lock:
            _warm["cpu"] += float(used)
        with open(out, encoding="utf-8", errors="replace") as o, open(err, encoding="utf-8", errors="replace") as e:
            return subprocess.CompletedProcess(cmd, code, o.read(), e.read())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def routed_target(path):
    """The plugin's target whose SGLang path is ``path``."""
    from sglang_arch.integrations.sglang import routing

    return next(t for t in routing.all_routed_targets() if t.path == path)


@contextlib.contextmanager
def routed(*paths):
    """The plugin's targets at ``paths`` routed in this process for the block; the ones this
    call routed (not those already routed, e.g. by early routing) are unrouted after it."""
    from sglang_arch.integrations.sglang import routing

    here = []
    try:
        for path in paths:
            target = routed_target(path)
            if routing.route(target):
                here.append(target)
        yield
    finally:
        for target in reversed(here):
            routing.unroute(target)


ORACLE = Path(__file__).with_name("upstream_oracle.py")


def run_upstream_oracle(spec):
    """SGLang alone in its own process (upstream_oracle.py): the plugin disabled, nothing
    of this process's environment that names sglang-arch."""
    out = run_python([str(ORACLE), json.dumps(spec)], env=clean_env(SGLANG_ARCH_DISABLE="1"), timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_suite(mode, runtime="sglang_arch.arch.runtime", env=None, cwd=None):
    out = run_python([str(SUITE), "--mode", mode, "--runtime", runtime], env=env or clean_env(), cwd=cwd)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def once_per_run(tmp_path_factory, name, compute):
    """``compute()`` (a JSON value) once per test run: under pytest-xdist every worker
    that asks waits for the first one's result instead of computing it again."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return compute()
    shared = tmp_path_factory.getbasetemp().parent  # the run's folder, above each worker's
    path = shared / f"{name}.json"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
        value = compute()
        path.with_suffix(".part").write_text(json.dumps(value), encoding="utf-8")
        path.with_suffix(".part").replace(path)
        return value


def memoize_struct_fields():
    """Memoize ``msgspec.structs.fields`` per class, in a harness process that resolves
    SGLang's arguments many times: it re-evaluates a class's annotations on every call (about
    7 ms for ``ServerArgs``; ``prepare_server_args`` calls it 7 times, about 45% of a
    resolution's CPU).  A class's fields do not change in a process; instances (not cached)
    still go to msgspec.  Harness only: the plugin never does this."""
    import msgspec.structs

    original = msgspec.structs.fields
    if getattr(original, "memoized", False):
        return
    cache = {}

    def fields(type_or_instance):
        if not isinstance(type_or_instance, type):
            return original(type_or_instance)
        if type_or_instance not in cache:
            cache[type_or_instance] = original(type_or_instance)
        return cache[type_or_instance]

    fields.memoized = True
    msgspec.structs.fields = fields


def upstream_and_hook(path):
    """(SGLang's own function at ``path``, the plugin's hook for it), for tests that call
    both: the original through ``__wrapped__`` whether or not the plugin is applied; fails
    where the release no longer has the shape the hook expects."""
    import pkgutil

    from sglang_arch.integrations.sglang import targets

    import inspect

    owner, attr = path.rsplit(".", 1)
    holder = pkgutil.resolve_name(owner)
    raw = inspect.getattr_static(holder, attr, None)
    if isinstance(raw, classmethod):  # SGLang's function, bound to the class it is named on
        function = raw.__func__
        own = getattr(function, "__wrapped__", function).__get__(holder)
    else:
        own = getattr(holder, attr)
        own = getattr(own, "__wrapped__", own)
    (target,) = [t for t in targets.all_targets() if t.path == path]
    assert own.__module__ == target.module, (own.__module__, target.module)
    assert targets.check_target(target) is None
    return own, target.hook
