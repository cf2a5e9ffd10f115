"""Mutation score of the upstream series' tests at its call sites.

Builds SGLang 0.5.23 patched by ``sglang-arch upstream`` (with the series' tests under
``test/registered/unit/platforms/``), checks that the tests pass, then applies each
mutation below to one changed line of the patched tree, runs the series' tests, and
restores the file.  A mutation is killed when at least one test fails.  Prints one line
per mutation and the score; exits 1 when a mutation survives.

    python scripts/series_mutations.py [--only SUBSTRING]

Each mutation is (operator, file under the sglang package, text in the patched tree,
replacement).  Operators: ``flip`` (a comparison or truth test inverted), ``constant``
(a value or list entry changed), ``drop`` (a condition or statement removed, or made
always true), ``swap`` (an argument replaced by another one in scope).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "test" / "integration"))
sys.path.insert(0, str(ROOT / "python"))

ATTN = "srt/arg_groups/model_override_base.py"
OVR = "srt/arg_groups/overrides.py"
NORM = "srt/layers/layer_boundary/residual/add_norm.py"
FUS = "srt/layers/flashinfer_comm_fusion.py"
SYMM = "srt/distributed/device_communicators/torch_symm_mem.py"
CAR = "srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
TAB = "srt/platforms/cuda_arch.py"
WIN = "kernels/backend_windows.py"
INK = "srt/models/inkling_common/kernels/comm.py"
REG = "srt/layers/attention/attention_registry.py"

MUTATIONS = [
    # PR-1: the attention default
    ("swap", ATTN, "preferred = default_attention_backend(use_mla_backend)",
     "preferred = default_attention_backend(False)"),
    ("drop", ATTN, 'if preferred == "fa3" and is_no_spec', "if preferred and is_no_spec"),
    ("flip", ATTN, 'preferred == "trtllm_mha"', 'preferred != "trtllm_mha"'),
    ("flip", ATTN, "        if preferred is not None:\n            return preferred",
     "        if preferred is None:\n            return preferred"),
    # PR-1: the auto-enable pass
    ("drop", OVR, "allreduce_fusion_auto_enable(view.nnodes > 1)", "allreduce_fusion_auto_enable(False)"),
    ("flip", OVR, "allreduce_fusion_auto_enable(view.nnodes > 1)", "allreduce_fusion_auto_enable(view.nnodes >= 1)"),
    # PR-1: the add-norm gate
    ("swap", NORM, "bool(allreduce_fusion_backends())", "bool(allreduce_fusion_backends(True))"),
    ("drop", NORM, "_is_cuda and bool(allreduce_fusion_backends())", "bool(allreduce_fusion_backends())"),
    ("drop", NORM, "        _has_allreduce_fusion\n", "        True\n"),
    # PR-1: _resolve_backend and the hot path
    ("drop", FUS, "    if not allreduce_fusion_backends():\n", "    if False:\n"),
    ("swap", FUS, "resolved = allreduce_fusion_auto_backend(is_multi_node)",
     "resolved = allreduce_fusion_auto_backend(False)"),
    ("swap", FUS, "if backend not in allreduce_fusion_backends(is_multi_node):",
     "if backend not in allreduce_fusion_backends(False):"),
    ("flip", FUS, "if backend not in allreduce_fusion_backends(is_multi_node):",
     "if backend in allreduce_fusion_backends(is_multi_node):"),
    ("drop", FUS, "    effective_dtype = dtype or torch.bfloat16\n\n",
     "    effective_dtype = dtype or torch.bfloat16\n    resolve_flashinfer_allreduce_fusion_backend()\n\n"),
    # PR-1: the communicator and the v2 table
    ("flip", SYMM, "self.world_size in config.torch_symm_mem_multimem_world_sizes",
     "self.world_size not in config.torch_symm_mem_multimem_world_sizes"),
    ("drop", SYMM, "if config is None or not config.torch_symm_mem_max_sizes:", "if config is None:"),
    ("flip", SYMM, "        if self.use_multimem:\n            torch.ops",
     "        if not self.use_multimem:\n            torch.ops"),
    ("flip", CAR, 'if table == "sm90":', 'if table != "sm90":'),
    ("constant", CAR, 'if table == "sm107":', 'if table == "sm100":'),
    # PR-1: the table and its rule
    ("constant", TAB, 'replace(_SM100, custom_all_reduce_v2_table="sm107")',
     'replace(_SM100, custom_all_reduce_v2_table="sm100")'),
    ("flip", TAB, "c[0] == capability[0] and c <= capability", "c[0] == capability[0] and c >= capability"),
    ("drop", TAB, "c[0] == capability[0] and c <= capability", "c <= capability"),
    ("drop", TAB, "return (major, minor) if targeted else None", "return (major, minor)"),
    ("swap", TAB, "        targeted = platform.is_sm100\n", "        targeted = platform.is_sm90\n"),
    ("constant", TAB, 'mla_attention_backend="flashinfer"', 'mla_attention_backend="trtllm_mha"'),
    ("constant", TAB, '    allreduce_fusion_multi_node_backend="mnnvl",\n', ""),
    ("constant", WIN, '("trtllm_mha", "mha"): _SM9X | _SM10X | _SM12X', '("trtllm_mha", "mha"): _SM10X | _SM12X'),
    ("constant", WIN, '"mnnvl": _SM9X | _SM10X,', '"mnnvl": _SM10X,'),
    ("constant", WIN, 'ALLREDUCE_FUSION_MULTI_NODE = {\n    "mnnvl": _SM10X,',
     'ALLREDUCE_FUSION_MULTI_NODE = {\n    "mnnvl": _SM9X | _SM10X,'),
    ("constant", WIN, '("fa3", "mla"): _SM9X,', '("fa3", "mla"): _SM8X | _SM9X,'),
    # PR-2: two-shot without multicast
    ("flip", SYMM, "self.multicast = handle.multicast_ptr != 0", "self.multicast = handle.multicast_ptr == 0"),
    ("drop", SYMM, "not (single_node and two_shot_max_size)", "not two_shot_max_size"),
    ("drop", SYMM, "if single_node and not self._has_peer_access():", "if False:"),
    ("drop", SYMM, "            self.max_size = two_shot_max_size\n", ""),
    ("drop", SYMM, "            self.use_multimem = False\n", ""),
    ("constant", TAB, "torch_symm_mem_two_shot_max_sizes={2: 16 * MiB}", "torch_symm_mem_two_shot_max_sizes={2: 64 * MiB}"),
    ("constant", TAB, "    torch_symm_mem_two_shot_max_sizes={},\n", ""),
    ("flip", INK, "        and comm.multicast\n        and group.world_size in _INKLING_AR_WORLD_SIZES\n    ):",
     "        and not comm.disabled\n        and group.world_size in _INKLING_AR_WORLD_SIZES\n    ):"),
    ("flip", INK, "        or not comm.multicast\n        or group.world_size not in _INKLING_AR_WORLD_SIZES\n"
                  "        or dtype != comm.dtype\n    ):\n        return False",
     "        or comm.disabled\n        or group.world_size not in _INKLING_AR_WORLD_SIZES\n"
     "        or dtype != comm.dtype\n    ):\n        return False"),
    ("flip", INK, "        or not comm.multicast\n        or group.world_size not in _INKLING_AR_WORLD_SIZES\n"
                  "        or dtype != comm.dtype\n    ):\n        return None",
     "        or comm.disabled\n        or group.world_size not in _INKLING_AR_WORLD_SIZES\n"
     "        or dtype != comm.dtype\n    ):\n        return None"),
    ("flip", INK, "        and comm.multicast\n        and group.world_size in _INKLING_AR_WORLD_SIZES\n        and comm.should",
     "        and not comm.disabled\n        and group.world_size in _INKLING_AR_WORLD_SIZES\n        and comm.should"),
    ("flip", INK, "if comm is None or not comm.multicast:", "if comm is None or comm.disabled:"),
    ("flip", INK, "        or not comm.multicast\n        or group.world_size not in (4, 8)  #",
     "        or comm.disabled\n        or group.world_size not in (4, 8)  #"),
    ("flip", INK, "        or not comm.multicast\n        or group.world_size not in (4, 8)\n",
     "        or comm.disabled\n        or group.world_size not in (4, 8)\n"),
    # PR-3: SM12x fusion when asked for
    ("constant", WIN, '"trtllm": _SM9X | _SM10X | _SM12X,', '"trtllm": _SM9X | _SM10X,'),
    ("constant", TAB, 'CudaArchConfig(allreduce_fusion_backend="trtllm")',
     'CudaArchConfig(allreduce_fusion_backend="trtllm", allreduce_fusion_auto_enable=True)'),
    ("drop", FUS, "        allocation_size = ceil_align(buffer_size + signal_pad_size, alloc_granularity)\n",
     "        allocation_size = ceil_align(buffer_size + signal_pad_size, alloc_granularity)\n"
     "        cuda_driver.cuMulticastGetGranularity(None, None)\n"),
    # PR-4: the trtllm_mla prefill gate and fa3
    ("swap", OVR, 'attention_backends_of(view)[0] == "trtllm_mla"', 'attention_backends_of(view)[1] == "trtllm_mla"'),
    ("drop", OVR, 'attention_prefill_runs("trtllm_mla")\n    ):', "True\n    ):"),
    ("constant", WIN, '"trtllm_mla": _SM10X,', '"trtllm_mla": _SM10X | _SM12X,'),
    ("swap", REG, 'attention_backend_runs("fa3", runner.use_mla_backend, (major, minor))',
     'attention_backend_runs("fa3", False, (major, minor))'),
    ("constant", WIN, '("fa3", "mha"): _SM8X | _SM9X,', '("fa3", "mha"): _SM9X,'),
]


def build(work: Path) -> Path:
    from releases import package_tree

    package = package_tree("0.5.23", work / "tree")
    cli = Path(sys.executable).with_name("sglang-arch")
    subprocess.run([str(cli), "upstream", str(package)], check=True, capture_output=True)
    tests = work / "tests" / "test" / "registered" / "unit" / "platforms"
    shutil.copytree(ROOT / "python/sglang_arch/upstream/series/test/registered/unit/platforms", tests)
    return package


def run_tests(work: Path) -> bool:
    env = {**os.environ, "PYTHONPATH": str(work / "tree"), "SGLANG_PLUGINS": "none", "SGLANG_ARCH_DISABLE": "1"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "-p", "no:warnings", "test/registered/unit/platforms"],
                         cwd=work / "tests", env=env, capture_output=True, text=True, timeout=900)
    return out.returncode == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run the mutations whose replaced text contains this")
    options = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="series-mutations-"))
    try:
        package = build(work)
        if not run_tests(work):
            print("the series' tests fail on the unmutated tree", file=sys.stderr)
            return 2
        killed, survivors, counts = 0, [], {}
        for operator, rel, old, new in MUTATIONS:
            if options.only and options.only not in old:
                continue
            path = package / rel
            text = path.read_text()
            if text.count(old) != 1:
                print(f"NOT FOUND  {operator:8} {rel}: {old.strip()[:70]!r}")
                survivors.append((operator, rel, old))
                continue
            path.write_text(text.replace(old, new, 1))
            try:
                dead = not run_tests(work)
            finally:
                path.write_text(text)
            counts.setdefault(operator, [0, 0])
            counts[operator][0] += dead
            counts[operator][1] += 1
            killed += dead
            if not dead:
                survivors.append((operator, rel, old))
            print(f"{'killed  ' if dead else 'SURVIVED'}  {operator:8} {rel}: {old.strip()[:70]!r}", flush=True)
        total = sum(n for _, n in counts.values())
        print(f"score: {killed} / {total} killed; " + ", ".join(f"{op} {k}/{n}" for op, (k, n) in sorted(counts.items())))
        return 1 if survivors else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
