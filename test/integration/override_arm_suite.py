"""Child process of ``test_override_arms.py``: SGLang 0.5.23's own argument resolution for
the two model overrides whose arm is a platform fact read inline (MiniCPM's sparse
backend, ``model_overrides/minicpm.py:60``; MiniMax-M3.1 NVFP4's arm,
``model_overrides/minimax_m3.py:94``), with SGLang's own provider and with the plugin's.

One interpreter for every case: per capability, ``prepare_server_args`` + ``resolve_once``
under SGLang's own ``override_platform`` (the simulated GPU's facts, as ``sglang-arch plan``
gives them), once with SGLang's override registry holding the provider as released, once
holding the plugin's routed provider (what early routing rebinds there).  Everything else
is the plugin's in both, so a difference is this site's.  ``narrow`` cases also resolve
with a kernel catalog in which named kernels have no build.  Prints one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures" / "models"

# name -> (fixture, the provider's module and name, extra server arguments, kernels narrowed)
CASES = {
    "minicpm_sparse": ("minicpm-sala-tiny", "minicpm._minicpm_sala_overrides", (), ()),
    "minicpm_sparse_no_flashinfer": ("minicpm-sala-tiny", "minicpm._minicpm_sala_overrides", (),
                                     ("flashinfer_fa2",)),
    "minimax_m3_nvfp4": ("minimax-m3-nvfp4", "minimax_m3._minimax_m3_overrides", (), ()),
}
FIELDS = ("attention_backend", "moe_runner_backend", "moe_a2a_backend", "kv_cache_dtype", "page_size",
          "quantization")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--caps", required=True)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    sys.path.insert(0, str(HERE))
    from helpers import memoize_struct_fields

    memoize_struct_fields()

    import importlib

    from sglang.srt.arg_groups import model_override_base, overrides
    from sglang.srt.runtime_context import override_platform
    from sglang.srt.server_args import prepare_server_args
    from sglang_arch.arch import catalog, parse_capability, runtime
    from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts

    real_runs = catalog.choice_runs
    providers = {}
    for name, (_, provider, _, _) in CASES.items():
        module, attr = provider.split(".")
        routed = getattr(importlib.import_module(f"sglang.srt.arg_groups.model_overrides.{module}"), attr)
        original = getattr(routed, "__wrapped__", None)
        assert original is not None, f"the plugin did not route {provider} in this interpreter"
        registered = [fn for fns in model_override_base._MODEL_OVERRIDE_FNS.values() for fn in fns]
        assert routed in registered and original not in registered, f"{provider} is not rebound in the registry"
        providers[name] = (original, routed)

    def use(old, new):
        for fns in model_override_base._MODEL_OVERRIDE_FNS.values():
            fns[:] = [new if fn is old else fn for fn in fns]

    def resolve(name, fn, narrow):
        fixture, _, extra, _ = CASES[name]
        original, routed = providers[name]
        if fn is original:
            use(routed, original)
        catalog.choice_runs = real_runs
        if narrow:
            def choice_runs(decision, choice, identities, cuda, *rest, **kw):
                verdict = real_runs(decision, choice, identities, cuda, *rest, **kw)
                if verdict is not None and verdict.runs and any(k in verdict.reason for k in narrow):
                    return dataclasses.replace(verdict, runs=False, reason=f"no build of {choice} (narrowed)")
                return verdict
            catalog.choice_runs = choice_runs
        try:
            server_args = prepare_server_args(["--model-path", str(FIXTURES / fixture), "--device", "cuda", *extra])
            server_args.resolve_once()
            view = overrides.resolved_view(server_args)
            return {field: getattr(view, field) for field in FIELDS}
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]}
        finally:
            catalog.choice_runs = real_runs
            use(original, routed)

    results = {}
    for cap_text in args.caps.split(","):
        os.environ.update(SGLANG_ARCH_CAPABILITY=cap_text, SGLANG_ARCH_GPU_COUNT="1", SGLANG_ARCH_TOPOLOGY="single")
        runtime.reset()
        cap = parse_capability(cap_text)
        facts = dict(SIMULATED_MACHINE, **upstream_platform_facts(cap, (13, 0)))
        with override_platform(**facts):
            for name, (_, _, _, narrow) in CASES.items():
                original, routed = providers[name]
                results[f"{name}|{cap_text}"] = {"upstream": resolve(name, original, ()),
                                                 "routed": resolve(name, routed, narrow)}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
