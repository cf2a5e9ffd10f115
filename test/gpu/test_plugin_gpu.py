"""The plugin inside the real sglang 0.5.23 on the real GPU (no simulation)."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest
from gpu_env import GPUS

if importlib.util.find_spec("sglang") is None:  # located, not imported: each SGLang import costs seconds
    pytest.skip("sglang is not installed on this GPU machine (scripts/gpu-test carries it)", allow_module_level=True)

ROUTED_VS_UPSTREAM = textwrap.dedent("""
    import json, os, sys
    from types import SimpleNamespace
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang.srt.runtime_context import get_platform
    from sglang.srt.utils import common
    from sglang.srt.arg_groups import model_override_base as base
    from sglang.srt.layers import flashinfer_comm_fusion as fusion
    from sglang.srt.distributed.device_communicators.configs import custom_all_reduce_v2 as car
    import torch

    def orig(fn):
        return getattr(fn, "__wrapped__", fn)

    out = {"routed": {}, "upstream": {}}
    for fact, helper in [("is_sm90", "is_sm90_supported"), ("is_sm100", "is_sm100_supported"),
                         ("is_sm120", "is_sm120_supported"), ("is_blackwell", "is_blackwell_supported"),
                         ("is_hopper_with_cuda_12_3", "is_hopper_with_cuda_12_3")]:
        out["routed"][fact] = getattr(get_platform(), fact)
        out["upstream"][fact] = orig(getattr(common, helper))()
    out["routed"]["device_capability"] = list(get_platform().device_capability)
    out["upstream"]["device_capability"] = list(orig(common.get_device_capability)())
    sa = SimpleNamespace(speculative_algorithm=None, speculative_eagle_topk=None, page_size=1)
    mc = SimpleNamespace(hf_config=SimpleNamespace(architectures=["LlamaForCausalLM"]), has_asymmetric_kv=False,
                         has_attention_sinks=False)
    for kind, mla in (("mha", False), ("mla", True)):
        out["routed"]["attention_" + kind] = base.get_default_attn_backend(sa, mla, mc)
        out["upstream"]["attention_" + kind] = orig(base.get_default_attn_backend)(sa, mla, mc)
    if torch.cuda.device_count() > 1:  # fusion only exists for TP > 1
        out["routed"]["fusion_auto"] = fusion._resolve_backend("auto", False)
        out["upstream"]["fusion_auto"] = orig(fusion._resolve_backend)("auto", False)
    num_sm = torch.cuda.get_device_properties().multi_processor_count
    out["routed"]["car_is_sm90_table"] = car._get_all_reduce_configs() is car._sm90_configs(num_sm)
    out["upstream"]["car_is_sm90_table"] = orig(car._get_all_reduce_configs)() is car._sm90_configs(num_sm)
    from sglang_arch.integrations.sglang import routed_concerns
    out["routed_concerns"] = routed_concerns()
    print(json.dumps(out))
""")


def _run(code, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_routed_equals_upstream_on_this_gpu(report):
    out = _run(ROUTED_VS_UPSTREAM)
    d = json.loads(out.stdout.strip().splitlines()[-1])
    assert d["routed"] == d["upstream"]
    # every concern of integrations/sglang/targets.py, as the start-up line names them
    from sglang_arch.integrations.sglang.targets import all_targets

    assert set(d["routed_concerns"]) == {t.concern for t in all_targets()}
    report("routed", json.dumps(d["routed"]))
    import torch

    if torch.cuda.get_device_capability(0) == (9, 0):
        assert d["routed"]["attention_mha"] == d["routed"]["attention_mla"] == "fa3"
        assert d["routed"].get("fusion_auto", "trtllm") == "trtllm"
        assert d["routed"]["is_sm90"] is True and d["routed"]["car_is_sm90_table"] is True


SYMM_MEM = textwrap.dedent("""
    import json, os, sys
    import torch, torch.distributed as dist
    import torch.multiprocessing as mp

    def rank_main(rank, world, port, plugin, q):
        os.environ["SGLANG_OPT_USE_INKLING_CUSTOM_AR"] = "0"  # compare the tables, not the inkling floor
        if plugin:
            from sglang.srt.plugins import load_plugins
            load_plugins()
        torch.cuda.set_device(rank)
        dist.init_process_group("nccl", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
        from sglang.srt.distributed.device_communicators.torch_symm_mem import TorchSymmMemCommunicator
        comm = TorchSymmMemCommunicator(dist.group.WORLD, rank)
        result = {"disabled": comm.disabled, "max_size": comm.max_size}
        if not comm.disabled:
            x = torch.full((1 << 20,), float(rank + 1), dtype=torch.bfloat16, device=f"cuda:{rank}")
            y = comm.all_reduce(x)
            result["sum_ok"] = bool(y is not None and torch.all(y == sum(range(1, world + 1))).item())
            result["multimem"] = world in comm._WORLD_SIZES_MULTIMEM.get(comm.device_capability, ())
        q.put((rank, result))
        dist.destroy_process_group()

    if __name__ == "__main__":
        plugin = sys.argv[1] == "plugin"
        ctx = mp.get_context("spawn")
        q = ctx.SimpleQueue()
        import socket
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        procs = [ctx.Process(target=rank_main, args=(r, 2, port, plugin, q)) for r in range(2)]
        [p.start() for p in procs]
        res = dict(q.get() for _ in procs)
        [p.join(120) for p in procs]
        print(json.dumps(res[0]))
""")


@pytest.mark.skipif(GPUS < 2, reason="needs 2 GPUs (torch symmetric memory across a real group)")
def test_symm_mem_two_shot_runs_where_upstream_gives_up(tmp_path, report):
    script = tmp_path / "symm.py"
    script.write_text(SYMM_MEM)
    results = {}
    for mode in ("upstream", "plugin"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
        if mode == "upstream":  # the wheel's early routing is active in every interpreter unless disabled
            env["SGLANG_ARCH_DISABLE"] = "1"
        out = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=600,
                             env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    report("symm_mem", json.dumps(results))
    assert results["upstream"]["disabled"] is True  # multicast is off: 0.5.23 disables the communicator
    assert results["plugin"] == {"disabled": False, "max_size": 64 << 20, "sum_ok": True, "multimem": False}


def test_launch_server_help_on_the_gpu_machine():
    out = _run("import runpy, sys; sys.argv = ['sglang.launch_server', '--help']; runpy.run_module('sglang.launch_server', run_name='__main__')")
    assert "--enable-torch-symm-mem" in out.stdout
    # the start-up line names the decisions (docs/configuration.md), and no hook keeps SGLang's code
    line = next(line for line in out.stderr.splitlines() if "sglang-arch: " in line and " -> tier " in line)
    assert "symm-mem" in line and "attn MHA" in line and "kept SGLang's" not in line, line
    assert "keep SGLang's own code" not in out.stderr, out.stderr[-2000:]


# The LoRA MoE's FP8 quantizer reads _WHOLE_ROW_FAST_DIV, a Triton constexpr SGLang binds at
# import; the plugin binds it from the registry (a value target).  What Triton compiles is the
# proof: a kernel calling SGLang's quantizer divides with div.rn.f32 where the value is off.
LORA_FP8 = textwrap.dedent("""
    import json, re
    import torch, triton, triton.language as tl
    from sglang.kernels.ops.lora.moe import fp8_quant
    from sglang.kernels.ops.lora.moe.fp8_quant import quantize_fp8_groups

    @triton.jit
    def quantize_rows(x_ptr, q_ptr, s_ptr, N: tl.constexpr):
        rows = tl.arange(0, 16)
        offs = rows[:, None] * N + tl.arange(0, N)[None, :]
        q, s = quantize_fp8_groups(tl.load(x_ptr + offs), WHOLE_ROW=True)
        tl.store(q_ptr + offs, q)
        tl.store(s_ptr + rows, s)

    torch.manual_seed(0)
    x = torch.randn(16, 128, device="cuda") * torch.logspace(-3, 3, 16, device="cuda")[:, None]
    q, s = torch.empty_like(x), torch.empty(16, device="cuda")
    kernel = quantize_rows[(1,)](x, q, s, N=128)
    torch.cuda.synchronize()
    rounded = (x.abs().amax(dim=1).double() / 448.0).float()  # the correctly rounded quotient
    from sglang_arch.integrations.sglang import routing
    early = routing.early_state()["routed"]  # bound by the early finder as the module loaded
    print(json.dumps({"early": "sglang.kernels.ops.lora.moe.fp8_quant._WHOLE_ROW_FAST_DIV" in early,
                      "fast": bool(fp8_quant._WHOLE_ROW_FAST_DIV.value),
                      "divisions": sorted(set(re.findall(r"\\bdiv\\.[a-z0-9.]+", kernel.asm["ptx"]))),
                      "scales_rounded": bool(torch.equal(s, rounded))}))
""")


def test_the_lora_fp8_division_the_registry_binds_is_what_triton_compiles(tmp_path, report):
    import torch

    script = tmp_path / "lora_fp8.py"  # a file: Triton reads the kernel's source
    script.write_text(LORA_FP8)
    results = {}
    for mode, extra in (("upstream", {"SGLANG_ARCH_DISABLE": "1"}), ("plugin", {}),
                        ("plugin_tier_12.0", {"SGLANG_ARCH_RESOLVE_AS": "12.0"})):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_ARCH_")}
        env.update(extra, TRITON_CACHE_DIR=str(tmp_path / f"triton-{mode}"))  # one compile per mode
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    report("lora_fp8", json.dumps(results))
    sm90 = torch.cuda.get_device_capability(0) == (9, 0)
    assert results["upstream"].pop("early") is False  # SGLANG_ARCH_DISABLE=1: nothing routed
    assert results["plugin"].pop("early") is True and results["plugin_tier_12.0"].pop("early") is True
    assert results["upstream"]["fast"] is sm90 and results["plugin"] == results["upstream"]
    # resolved as tier 12.0 on this GPU: the value is off, and the kernel Triton compiled from
    # SGLang's quantizer divides otherwise and rounds each scale correctly (libdevice's div_rn)
    tier_12 = results["plugin_tier_12.0"]
    assert tier_12["fast"] is False and tier_12["scales_rounded"] is True
    assert any(d.startswith("div.rn") for d in tier_12["divisions"]), tier_12
    if sm90:  # SGLang's fast math on the H200: div.full.f32 (seen 2026-12-02), not correctly rounded
        assert not any(d.startswith("div.rn") for d in results["upstream"]["divisions"]), results["upstream"]


def test_sglangs_chain_builds_and_times_on_the_gpu(report):
    """``tune collectives --sglang``'s chain (``sglang_chain.measure``) on this GPU: SGLang's
    GroupCoordinator built by the model runner's calls with the plugin loaded, its dispatch
    checked against torch.distributed and timed eagerly and under CUDA-graph replay inside
    SGLang's graph_capture().  One GPU: TP 1 builds no communicator, so the dispatch is what
    is timed (several GPUs add custom all-reduce and PCIe-IPC: scripts/gpu-test)."""
    from sglang_arch.tune import collectives as tc
    from sglang_arch.tune import sglang_chain

    with tc.multicast_off():
        result = sglang_chain.measure(1, [4096, 1 << 20], iters=5, trials=3, modes=("eager", "graph"), cpu=False,
                                      timeout=540)
    assert "fatal" not in result and "fatal_ranks" not in result, (result.get("fatal"), result.get("traceback"))
    rows = {row["bytes"]: row for row in result["rows"]}
    assert set(rows) == {4096, 1 << 20}
    for row in rows.values():
        assert row["errors"] == {}, row["errors"]
        assert row["eager"]["sglang"]["median"] > 0 and row["graph"]["sglang"]["median"] > 0
    cells = [tc.Measurement(1, size) for size in rows]
    sglang_chain.into_cells(result, cells)
    assert all(c.sglang_methods.keys() == {"eager", "graph"} for c in cells)
    report("chain", json.dumps({str(b): {m: r[m]["sglang"]["median"] for m in ("eager", "graph")}
                                for b, r in rows.items()}))


SETTLED_CAPABILITY = textwrap.dedent("""
    import json, torch
    from sglang_arch.integrations.sglang.plan import stand_in_if_missing
    stand_in_if_missing("sgl_kernel")  # the runner's module imports it; the decision reads none of it
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang_arch.integrations.sglang import routing
    path = "sglang.srt.lora.marlin_lora_temp.moe_runner._use_multi_shared_outer_decode_factorization"
    target = next(t for t in routing.all_routed_targets() if t.path == path)
    import importlib
    module = importlib.import_module(target.module)
    routing.route(target)
    original = routing.current_function(target).__wrapped__
    answer = tuple(target.hook.glue())  # the registry's, resolving as SGLANG_ARCH_RESOLVE_AS
    real = tuple(torch.cuda.get_device_capability())
    bound = target.hook.specialize(original)
    name = "_sglang_arch_get_device_capability_%d_%d" % answer
    x = torch.zeros(1, device="cuda", dtype=torch.bfloat16)
    print(json.dumps({"answer": answer, "real": real, "renamed": name in bound.__code__.co_names,
                      "reads": list(getattr(torch.cuda, name)(x.device)), "torch_is_torch": bound.__globals__["torch"] is torch,
                      "device_still": list(torch.cuda.get_device_capability(x.device))}))
""")


def test_a_capability_read_inline_settles_on_the_real_torch_cuda(report):
    """The registry resolving every device as another tier (``SGLANG_ARCH_RESOLVE_AS``): the
    settled body reads that tier's capability under its own name on the real torch.cuda,
    while torch.cuda.get_device_capability still answers the device's."""
    import torch

    other = "10.0" if tuple(torch.cuda.get_device_capability()) != (10, 0) else "9.0"
    out = json.loads(_run(SETTLED_CAPABILITY, SGLANG_ARCH_RESOLVE_AS=other).stdout.strip().splitlines()[-1])
    report("settled_capability", json.dumps(out))
    assert out["answer"] == [int(v) for v in other.split(".")] != out["real"]
    assert out["renamed"] and out["torch_is_torch"]
    assert out["reads"] == out["answer"] and out["device_still"] == out["real"]
