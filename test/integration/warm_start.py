"""A warm start for the integration tests' child interpreters (``helpers.run_python``).

Most of a fresh interpreter that imports SGLang is spent in third-party modules (torch,
Transformers, FlashInfer, CuTe DSL, pydantic, ...: about 27 of 30 s of CPU for
``sglang.srt.managers.scheduler`` on the 2-core CI machine), not in SGLang or sglang-arch.
This process imports those once (``THIRD_PARTY``, never a module of ``sglang`` or
``sglang_arch``) and then serves each child run with a fork: the child takes the run's
environment, ``sys.path``, working directory and arguments, re-runs the interpreter's
start-up hook (``sglang_arch_early.pth``, under the run's environment) and runs the
program as ``python`` would, so that SGLang and sglang-arch are imported, routed and
decided in the child exactly as in a fresh interpreter.  What differs: the listed
third-party modules were imported before SGLang rather than by it (they read no
``SGLANG_*`` variable; ``helpers.run_python`` sends a run here only when its environment
differs from this process's in ``SGLANG_*`` and ``helpers.WARM_FREE`` alone).  Each test file that
uses it keeps one run in a truly fresh interpreter and compares the two.

Protocol (a Unix socket, one connection per run): the client sends one JSON request
(``argv`` after the interpreter, ``env``, ``cwd``, ``stdout``/``stderr`` file paths) and
closes its side; the child answers its pid, then, when the program ends, its exit status
and the CPU seconds it used (the server's own: on its "ready" line).
The server exits when its standard input closes (the test process ended).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys

# The third-party modules SGLang 0.5.23's scheduler imports directly (the roots of its
# import tree outside SGLang costing >= 30 ms, from ``python -X importtime``), in that
# order.  A name that fails to import is skipped: only the saving is lost.
THIRD_PARTY = (
    "numpy", "psutil", "requests", "torch", "triton", "packaging.version", "PIL.Image", "starlette.routing",
    "pydantic_core", "torchcodec.decoders", "zmq", "transformers", "transformers.generation.configuration_utils",
    "transformers.modeling_gguf_pytorch_utils", "transformers.activations", "transformers.modeling_layers",
    "transformers.image_processing_utils", "IPython.display", "pydantic", "pydantic._internal._decorators",
    "pydantic._internal._model_construction", "aiohttp", "tvm_ffi", "torch._dynamo.repro.after_dynamo",
    "torch._inductor.compile_fx", "transformers.models.auto.tokenization_auto", "compressed_tensors.config",
    "flashinfer", "gguf", "openai.types.responses", "xgrammar", "opentelemetry.propagate", "aiohttp.web", "fsspec",
    "uvicorn", "fastapi", "triton_kernels.tensor", "triton_kernels.topk", "flashinfer.comm", "pydantic.v1",
    "tabulate",
)

EARLY = "_sglang_arch_early"  # the start-up hook's module (python/sglang_arch_early.pth)


def ours(name: str) -> bool:
    top = name.split(".")[0]
    return top in ("sglang", "sglang_arch") or top.startswith("__editable__")


def warm() -> None:
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in THIRD_PARTY:
            try:
                importlib.import_module(name)
            except Exception:
                pass
    loaded = sorted(m for m in sys.modules if ours(m) and not m.startswith("__editable__"))
    if loaded:  # a third-party module imported SGLang: this start would not be fresh
        raise SystemExit(f"warm start refused: {loaded[:5]} imported")


def run_child(conn: socket.socket, site_path: list) -> None:
    """In the forked child: become the requested program; never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()  # a timeout kills the run's whole process group, as the client asks
        data = b""
        while chunk := conn.recv(1 << 16):
            data += chunk
        req = json.loads(data)
        conn.sendall(f"{os.getpid()}\n".encode())
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        if req.get("cwd"):
            os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        argv = req["argv"]
        if argv[0] == "-c":
            first = ""
        elif argv[0] == "-m":
            first = os.getcwd()
        else:
            first = os.path.dirname(os.path.realpath(argv[0]))
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [first] + [os.path.abspath(p) for p in extra] + site_path
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        import importlib

        importlib.invalidate_caches()  # folders written since this server started
        # The start-up hook, as site runs it, under this run's environment.
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__ != EARLY]
        sys.modules.pop(EARLY, None)
        try:
            import _sglang_arch_early

            _sglang_arch_early.install()
        except Exception:
            pass
        code = run_program(argv)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
        try:
            import resource

            used = sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
                       for f in ("ru_utime", "ru_stime"))
            conn.sendall(f"{code} {used:.3f}\n".encode())
        except BaseException:
            pass
        os._exit(code)


def run_program(argv: list) -> int:
    import runpy
    import types

    try:
        if argv[0] == "-c":
            sys.argv = ["-c", *argv[2:]]
            main = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = __builtins__
            sys.modules["__main__"] = main
            exec(compile(argv[1], "<string>", "exec"), main.__dict__)
        elif argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None:
            return 0
        if isinstance(exc.code, int):
            return exc.code
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        import traceback

        traceback.print_exc()
        return 1
    return 0


def main() -> None:
    path = sys.argv[1]
    script_dir = os.path.dirname(os.path.realpath(__file__))
    extra = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    site_path = [p for p in sys.path[1:] if os.path.abspath(p) not in extra and p != script_dir]
    warm()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(f"ready {usage.ru_utime + usage.ru_stime:.3f}", flush=True)
    while True:
        ready, _, _ = select.select([server, sys.stdin], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1):
            return
        if server in ready:
            conn, _ = server.accept()
            sys.stdout.flush()
            sys.stderr.flush()
            if os.fork() == 0:
                server.close()
                run_child(conn, site_path)
            conn.close()


if __name__ == "__main__":
    main()
