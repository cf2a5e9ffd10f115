"""The DeepSeek family's GEMM and MoE picks: the plugin's hooks against SGLang 0.5.23's own functions
on every exact tier and on 10.5, 11.5, 12.3 and 13.0 (and 6.1).

- ``deepseek_common/utils.tiny_router_gemm_max_tokens``: the rows up to which the router
  takes SGLang's tiny BF16 GEMM (-1: cuBLAS).  SGLang reads the device's SM bound at import
  (``_device_sm < 90``); upstream's side runs with that value set to the capability's, the
  routed side is the plugin's hook with the registry routed to the capability.
- ``kernels/ops/gemm/fused_a_gemm.dsv3_fused_a_gemm``: ``backend="auto"`` becomes
  ``_AUTO_BACKEND``, bound at import (the CuTe DSL kernel where ``is_sm120_supported()``, else
  the JIT one).  Upstream's side binds it as SGLang's import would for the capability (the
  probe's fact for it); the kernels are stand-ins naming which one was called.
- ``DeepseekV2ForCausalLM.shared_experts_fusion_disable_reason`` (a class method): an NVFP4
  checkpoint on the Marlin MoE runner keeps its shared expert unfused where
  ``is_sm90_supported()``.  Upstream's side binds that probe to its answer for the capability;
  the MoE and parallelism state it reads is stood in for.
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

import torch  # noqa: E402
from helpers import TIERS, upstream_and_hook  # noqa: E402
from sglang_arch.arch import resolve, runtime  # noqa: E402
from sglang_arch.arch.capability import Capability  # noqa: E402
from sglang_arch.integrations.sglang import glue  # noqa: E402
from sglang_arch.integrations.sglang.plan import SIMULATED_MACHINE, upstream_platform_facts  # noqa: E402

ROUTER = "sglang.srt.models.deepseek_common.utils.tiny_router_gemm_max_tokens"
UNKNOWN = ("10.5", "11.5", "12.3", "13.0", "6.1")
CUDA = (12, 9)
# (num_experts, hidden_size, weight dtype): DeepSeek-V3's router, a shape the kernel does not
# serve (hidden 100), an FP32 router
SHAPES = ((256, 7168, torch.bfloat16), (256, 100, torch.bfloat16), (256, 7168, torch.float32))


def _cap(text):
    return Capability(*map(int, text.split(".")))


@pytest.fixture(scope="module")
def router():
    own, hook = upstream_and_hook(ROUTER)
    from sglang.srt.models.deepseek_common import utils

    mp = pytest.MonkeyPatch()
    mp.setattr(utils, "_is_cuda", True)
    try:
        yield own, hook, utils
    finally:
        mp.undo()


def _both(router, cap):
    """{shape: (upstream's rows, the routed rows)} on ``cap``."""
    from sglang.srt.runtime_context import override_platform

    own, hook, utils = router
    ctx = runtime.machine(capability=cap, cuda=CUDA)
    out = {}
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(utils, "_device_sm", _cap(cap).sm)
        with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), CUDA)):
            for n, k, dtype in SHAPES:
                kwargs = dict(num_experts=n, hidden_size=k, weight_dtype=dtype)
                upstream = own(**kwargs)
                mp.setattr(glue, "current", lambda: ctx)
                routed = hook(own, **kwargs)
                mp.setattr(glue, "current", lambda: SimpleNamespace(resolution=None))
                out[(n, k, dtype)] = upstream, routed
    finally:
        mp.undo()
    return out


@pytest.mark.parametrize("tier", TIERS)
def test_router_gemm_on_every_exact_tier_is_upstreams(router, tier):
    assert resolve(tier).match == "exact"
    for shape, (upstream, routed) in _both(router, tier).items():
        assert routed == upstream, (tier, shape)


def test_router_gemm_premise_sm90_takes_the_tiny_gemm_for_16_rows(router):
    v3 = SHAPES[0]
    assert _both(router, "9.0")[v3] == (16, 16)
    assert _both(router, "8.9")[v3] == (-1, -1)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_router_gemm_on_unknown_gpus_follows_the_tier(router, cap):
    res = resolve(cap)
    assert res.match != "exact"
    tier = _both(router, str(res.resolved))
    for shape, (upstream, routed) in _both(router, cap).items():
        assert routed == tier[shape][1] == upstream, (cap, shape)


def test_router_gemm_off_is_the_registrys_answer(router, monkeypatch):
    """Where the registry keeps cuBLAS the hook answers -1 whatever the device reads (the hook
    is the registry's decision, not SGLang's floor)."""
    from sglang_arch.arch.policies import deepseek

    monkeypatch.setattr(deepseek, "tiny_router_gemm", lambda res, cuda=None: deepseek.RouterGemm(False, "off"))
    from sglang_arch.integrations.sglang.glue import moe

    moe._tiny_router.clear()
    try:
        assert _both(router, "10.0")[SHAPES[0]] == (16, -1)
    finally:
        moe._tiny_router.clear()


# --- the fused QKV-A GEMM's auto backend ------------------------------------------------------

FUSED_A = "sglang.kernels.ops.gemm.fused_a_gemm.dsv3_fused_a_gemm"
CUDAS = ((12, 4), (12, 9), (13, 0))


@pytest.fixture(scope="module")
def fused_a():
    own, hook = upstream_and_hook(FUSED_A)
    from sglang.kernels.ops.gemm import fused_a_gemm as module

    mp = pytest.MonkeyPatch()
    for name in ("dsv3_fused_a_gemm", "cutedsl_dsv3_fused_a_gemm"):
        kernel = ModuleType(f"sglang.kernels.ops.gemm.{name}")
        kernel.dsv3_fused_a_gemm = lambda a, b, out, name=name: name
        mp.setitem(sys.modules, kernel.__name__, kernel)
    try:
        yield own, hook, module, mp
    finally:
        mp.undo()


def _fused_a_both(fused_a, cap, cuda, backend="auto"):
    from sglang.srt.runtime_context import override_platform

    own, hook, module, _ = fused_a
    facts = upstream_platform_facts(_cap(cap), cuda)
    enum = module.FusedAGemmBackend
    ctx = runtime.machine(capability=cap, cuda=cuda)
    mp = pytest.MonkeyPatch()
    try:  # SGLang's import-time pick for this GPU
        mp.setattr(module, "_AUTO_BACKEND", enum.CUTEDSL if facts["is_sm120"] else enum.JIT)
        with override_platform(**SIMULATED_MACHINE, **facts):
            upstream = own(None, None, backend=backend)
            mp.setattr(glue, "current", lambda: ctx)
            routed = hook(own, None, None, backend=backend)
    finally:
        mp.undo()
    return upstream, routed


def test_fused_a_premise_the_import_time_pick_is_sm120s_probe(fused_a):
    source = Path(fused_a[2].__file__).read_text()
    assert "FusedAGemmBackend.CUTEDSL if is_sm120_supported() else FusedAGemmBackend.JIT" in source
    assert _fused_a_both(fused_a, "12.0", (12, 9)) == ("cutedsl_dsv3_fused_a_gemm",) * 2
    assert _fused_a_both(fused_a, "10.0", (12, 9)) == ("dsv3_fused_a_gemm",) * 2


@pytest.mark.parametrize("tier", TIERS)
def test_fused_a_on_every_exact_tier_is_upstreams(fused_a, tier):
    assert resolve(tier).match == "exact"
    for cuda in CUDAS:
        for backend in ("auto", "jit", "cutedsl"):
            upstream, routed = _fused_a_both(fused_a, tier, cuda, backend)
            assert routed == upstream, (tier, cuda, backend)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_fused_a_on_unknown_gpus_takes_the_cutedsl_kernel_only_where_it_builds(fused_a, cap):
    from sglang_arch.arch import catalog

    builds = catalog.choice_runs("fused_a_gemm", "cutedsl", _cap(cap), (12, 9)).runs
    upstream, routed = _fused_a_both(fused_a, cap, (12, 9))
    if cap.startswith("12."):  # SGLang's major-12 rule picks the CuTe DSL kernel, which CuTe DSL cannot build
        assert not builds and upstream == "cutedsl_dsv3_fused_a_gemm"
    assert routed == "dsv3_fused_a_gemm", cap  # the JIT kernel: 12.1's rule where CuTe DSL has no build
    for backend in ("jit", "cutedsl"):  # an explicit backend is the caller's
        assert _fused_a_both(fused_a, cap, (12, 9), backend)[1] == _fused_a_both(fused_a, cap, (12, 9), backend)[0]


# --- DeepSeek's shared-expert fusion under NVFP4 + Marlin ----------------------------------------

FUSION = "sglang.srt.models.deepseek_v2.DeepseekV2ForCausalLM.shared_experts_fusion_disable_reason"


@pytest.fixture(scope="module")
def fusion():
    own, hook = upstream_and_hook(FUSION)
    from sglang.srt.models import deepseek_v2 as module

    mp = pytest.MonkeyPatch()
    mp.setattr(module, "quant_blocks_shared_experts_fusion", lambda quant_config: False)
    mp.setattr(module, "get_exec", lambda: SimpleNamespace(moe=SimpleNamespace(enforce_shared_experts_fusion=False)))
    for name in ("is_sbo_enabled", "is_tbo_enabled", "is_deepep_class_backend"):
        mp.setattr(module, name, lambda: False)
    try:
        yield own, hook, module, mp
    finally:
        mp.undo()


def _fusion_both(fusion, cap, cuda, quant, marlin):
    from sglang.srt.runtime_context import override_platform

    own, hook, module, _ = fusion
    facts = upstream_platform_facts(_cap(cap), cuda)
    ctx = runtime.machine(capability=cap, cuda=cuda)
    hf_config = SimpleNamespace(architectures=["NotFused"])
    quant_config = None if quant is None else SimpleNamespace(get_name=lambda: quant)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(module, "is_sm90_supported", lambda: facts["is_sm90"])  # SGLang's probe on this GPU
        mp.setattr(module, "get_moe_runner_backend", lambda: SimpleNamespace(is_marlin=lambda: marlin))
        with override_platform(**SIMULATED_MACHINE, **facts):
            upstream = own(hf_config, quant_config)
            mp.setattr(glue, "current", lambda: ctx)
            routed = hook(own, hf_config, quant_config)
    finally:
        mp.undo()
    return upstream, routed


FUSION_CASES = [(quant, marlin) for quant in ("modelopt_fp4", "fp8", None) for marlin in (True, False)]


def test_fusion_premise_hopper_nvfp4_marlin_is_held(fusion):
    upstream, routed = _fusion_both(fusion, "9.0", (12, 9), "modelopt_fp4", True)
    assert upstream == routed and upstream.startswith("Hopper modelopt_fp4 with moe_runner_backend=marlin")
    assert _fusion_both(fusion, "10.0", (12, 9), "modelopt_fp4", True)[0] == \
        "Config does not support fused shared expert(s)."


@pytest.mark.parametrize("tier", TIERS)
def test_fusion_on_every_exact_tier_is_upstreams(fusion, tier):
    for cuda in ((12, 2), (12, 9)):
        for quant, marlin in FUSION_CASES:
            upstream, routed = _fusion_both(fusion, tier, cuda, quant, marlin)
            assert routed == upstream, (tier, cuda, quant, marlin)


@pytest.mark.parametrize("cap", UNKNOWN + ("9.5",))
def test_fusion_on_unknown_gpus_follows_the_tier(fusion, cap):
    tier = str(resolve(cap).resolved)
    for quant, marlin in FUSION_CASES:
        routed = _fusion_both(fusion, cap, (12, 9), quant, marlin)[1]
        assert routed == _fusion_both(fusion, tier, (12, 9), quant, marlin)[1], (cap, quant, marlin)


def test_the_class_method_stays_one_when_routed(fusion):
    """Routed by the plugin, the hook is a class method over SGLang's function: a subclass's
    call passes the subclass (its own fused architecture name)."""
    import inspect

    from helpers import routed

    module = fusion[2]
    cls = module.DeepseekV2ForCausalLM
    with routed(FUSION):
        assert isinstance(inspect.getattr_static(cls, "shared_experts_fusion_disable_reason"), classmethod)
        seen = []

        class Sub(cls):
            fused_shared_experts_architecture = "NotFused"

        hf_config = SimpleNamespace(architectures=["NotFused"], n_routed_experts=256, n_shared_experts=1)
        mp = pytest.MonkeyPatch()
        try:
            mp.setattr(module, "get_moe_runner_backend", lambda: SimpleNamespace(is_marlin=lambda: False))
            mp.setattr(module, "is_wint4afp8_or_wint4a16_config", lambda q: seen.append(q) or False)
            mp.setattr(module, "get_parallel", lambda: SimpleNamespace(moe_ep_size=1))
            mp.setattr(module, "_is_cuda", True)
            mp.setattr(module.torch.cuda, "get_device_capability", lambda *a: (9, 0))
            assert Sub.shared_experts_fusion_disable_reason(hf_config, None) is None  # Sub's architecture matched
            assert seen == [None]
        finally:
            mp.undo()
    assert isinstance(inspect.getattr_static(cls, "shared_experts_fusion_disable_reason"), classmethod)


# --- DeepSeek's NVFP4 shared expert: the fused GEMM + SwiGLU + quant -------------------------------
#
# The decision is one condition inside ``DeepseekV2MoE.__init__``, which builds a whole MoE layer;
# the test compiles SGLang's own condition (read from the installed source) as a function of the
# module and runs it bare and under the plugin's hook over ``__init__`` (the same scoped_fact, so
# the same module-level get_platform() swap), every other operand true.

MOE_INIT = "sglang.srt.models.deepseek_v2.DeepseekV2MoE.__init__"


@pytest.fixture(scope="module")
def swiglu_condition():
    import ast
    import inspect

    from sglang.srt.models import deepseek_v2 as module

    _, hook = upstream_and_hook(MOE_INIT)
    source = inspect.getsource(module)
    tree = ast.parse(source)
    (init,) = [f for c in tree.body if isinstance(c, ast.ClassDef) and c.name == "DeepseekV2MoE"
               for f in c.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
    tests = [n.test for n in ast.walk(init) if isinstance(n, ast.If) and "get_platform().is_sm100" in ast.unparse(n.test)]
    assert len(tests) == 1  # the premise: one SM100 read in the constructor, this condition
    text = ast.unparse(tests[0])
    assert "_interleave_for_swiglu_fusion" in ast.unparse([n for n in ast.walk(init) if isinstance(n, ast.If)
                                                          and n.test is tests[0]][0])
    namespace = {}
    code = ("def h24_swiglu_condition(self, get_fp4_gemm_runner_backend, ModelOptFp4LinearMethod, fc1_n):\n"
            f"    return bool({text})\n")
    exec(compile(code, module.__file__, "exec"), module.__dict__, namespace)
    condition = namespace["h24_swiglu_condition"]
    assert condition.__module__ == module.__name__
    return condition, hook, module


def _swiglu_both(swiglu_condition, cap, cuda):
    from sglang.srt.runtime_context import override_platform

    condition, hook, module = swiglu_condition
    facts = upstream_platform_facts(_cap(cap), cuda)
    ctx = runtime.machine(capability=cap, cuda=cuda)

    class Method:
        quant_mode = "w4a4"

    proj = SimpleNamespace(quant_method=Method())
    layer = SimpleNamespace(shared_experts=SimpleNamespace(gate_up_proj=proj, down_proj=proj, swiglu_limit=None))
    backend = lambda: SimpleNamespace(supports_swiglu_fusion=lambda: True)  # noqa: E731
    args = (layer, backend, Method, 256)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(module, "get_lora", lambda: SimpleNamespace(enable_lora=False, lora_paths=None))
        mp.setattr(module, "check_cuda_graph_backend", lambda *a: False)
        with override_platform(**SIMULATED_MACHINE, **facts):
            upstream = condition(*args)
            mp.setattr(glue, "current", lambda: ctx)
            routed = hook(condition, *args)
    finally:
        mp.undo()
    return upstream, routed


@pytest.mark.parametrize("tier", TIERS)
def test_swiglu_fusion_on_every_exact_tier_is_upstreams(swiglu_condition, tier):
    for cuda in ((12, 4), (12, 9)):
        upstream, routed = _swiglu_both(swiglu_condition, tier, cuda)
        assert routed == upstream, (tier, cuda)


def test_swiglu_fusion_premise_sm100_fuses(swiglu_condition):
    assert _swiglu_both(swiglu_condition, "10.0", (12, 9)) == (True, True)
    assert _swiglu_both(swiglu_condition, "11.0", (12, 9)) == (False, False)


@pytest.mark.parametrize("cap", UNKNOWN)
def test_swiglu_fusion_on_unknown_gpus_only_where_the_kernel_builds(swiglu_condition, cap):
    upstream, routed = _swiglu_both(swiglu_condition, cap, (12, 9))
    assert routed is False, cap  # 10.5: tier 10.3 fuses, CuTe DSL has no build; elsewhere not SM100
    if cap == "10.5":
        assert upstream is True  # SGLang's major-10 rule would take a kernel with no build


# --- DSA's MHA one-shot kernel: covered by the routed prefill band ------------------------------

def test_dsa_mha_kernel_premises_hold_in_the_installed_release():
    """``_forward_standard_mha``'s kernel check (TRT-LLM ragged from major 10, FA3 varlen
    below) runs only under ``use_mha``, which only ``set_dsa_prefill_impl`` sets (True only from
    the band the registry decides there); the band keeps MHA only where the kernel this check
    picks for the device has a build (targets.DSA_MHA_KERNEL_COVERS)."""
    import ast
    import inspect

    from sglang.srt.layers.attention import dsa_backend
    from sglang_arch.arch import catalog
    from sglang_arch.arch.policies import dsa
    from sglang_arch.integrations.sglang import targets

    tree = ast.parse(inspect.getsource(dsa_backend))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "DeepseekSparseAttnBackend")
    methods = {f.name: f for f in cls.body if isinstance(f, ast.FunctionDef)}
    setters = {name for name, f in methods.items() for n in ast.walk(f) if isinstance(n, ast.Assign)
               and any(ast.unparse(t) == "self.use_mha" for t in n.targets)
               and not (isinstance(n.value, ast.Constant) and n.value.value is False)}
    assert setters == {"set_dsa_prefill_impl"}
    guarded = calls = 0
    for f in methods.values():
        for node in ast.walk(f):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "self._forward_standard_mha":
                calls += 1
        for node in ast.walk(f):  # the calls inside an ``if self.use_mha:`` body
            if isinstance(node, ast.If) and ast.unparse(node.test) == "self.use_mha":
                guarded += sum(isinstance(c, ast.Call) and ast.unparse(c.func) == "self._forward_standard_mha"
                               for stmt in node.body for c in ast.walk(stmt))
    assert calls and guarded == calls
    body = ast.unparse(methods["_forward_standard_mha"])
    check = targets.DSA_MHA_KERNEL_COVERS[0].split(":", 1)[1]
    assert check.rstrip(":").removeprefix("if ") in body
    assert body.index("trtllm_ragged_attention_deepseek") < body.index("flash_attn_varlen_func")
    for cap in TIERS + UNKNOWN:
        res = resolve(cap)
        bands = dsa.prefill_bands(res, (12, 9))
        assert bands.mha_kernel == ("trtllm" if res.requested.major >= 10 else "fa3"), cap
        if bands.mha_one_shot:
            assert catalog.choice_runs("dsa", bands.mha_kernel, res.requested, (12, 9)).runs, cap


# --- DeepSeek-V4.1's index logits dtype ------------------------------------------------------------

LOGITS = "sglang.kernels.ops.attention.dsv4.index_logits.index_logits_dtype"


@pytest.fixture(scope="module")
def logits():
    import inspect

    own, hook = upstream_and_hook(LOGITS)
    from sglang.kernels.ops.attention.dsv4 import index_logits as module

    return inspect.unwrap(own), hook, module  # SGLang's function without its per-process cache


def _logits_both(logits, cap, forced=None):
    own, hook, module = logits
    ctx = runtime.machine(capability=cap, cuda=CUDA)
    mp = pytest.MonkeyPatch()
    try:
        if forced is None:
            mp.delenv("SGLANG_OPT_DSV41_BF16_INDEX_LOGITS", raising=False)
        else:
            mp.setenv("SGLANG_OPT_DSV41_BF16_INDEX_LOGITS", forced)
        mp.setattr(module, "_is_sm100", lambda: _cap(cap).major == 10)  # SGLang's probe on this GPU
        from sglang.srt.runtime_context import override_platform

        with override_platform(**SIMULATED_MACHINE, **upstream_platform_facts(_cap(cap), CUDA)):
            upstream = own()
            mp.setattr(glue, "current", lambda: ctx)
            routed = hook(own)
    finally:
        mp.undo()
    return str(upstream), str(routed)


def test_logits_premise_sm100_scores_in_bf16(logits):
    assert _logits_both(logits, "10.0") == ("torch.bfloat16",) * 2
    assert _logits_both(logits, "9.0") == ("torch.float32",) * 2


@pytest.mark.parametrize("cap", TIERS + UNKNOWN)
def test_logits_dtype_is_upstreams_on_every_gpu(logits, cap):
    """Equal on every exact tier; on 10.5, 11.5, 12.3, 13.0 and 6.1 the tier's major agrees
    with the device's, so equal there too.  The environment override stays SGLang's."""
    for forced in (None, "1", "0"):
        upstream, routed = _logits_both(logits, cap, forced)
        assert routed == upstream, (cap, forced)


def test_logits_dtype_is_the_registrys_answer(logits, monkeypatch):
    from sglang_arch.arch.policies import deepseek
    from sglang_arch.integrations.sglang.glue import moe

    monkeypatch.setattr(deepseek, "dsv41_bf16_index_logits", lambda res, cuda=None: deepseek.IndexLogits(False, "x"))
    moe._index_logits.clear()
    try:
        assert _logits_both(logits, "10.0") == ("torch.bfloat16", "torch.float32")
    finally:
        moe._index_logits.clear()
