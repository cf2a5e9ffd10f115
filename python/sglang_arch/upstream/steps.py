"""The upstream series: what each PR adds to an SGLang tree and which call sites it edits.

The series is the mission's core only (symm-mem and custom all-reduce sizes, FlashInfer
all-reduce fusion, the attention default and the explicit-backend check), as code SGLang
owns: the files under ``series/`` are written once, by hand, in SGLang's style, and copied
as they are; each call-site edit is an exact text replacement of SGLang's release code.

A *site* is one decision: its replacements (in one or more files) land together or not at
all.  A site whose texts are not in the tree (a release without that code, or a local
edit) is left out with one line in the report and in that PR's text; the rest of its step
lands.  A site whose new texts are already there is "already routed", so a second run
changes nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Dict, List, Optional, Sequence, Tuple

REGISTRY_IMPORT = "from sglang.srt.arch import registry as arch_registry\n"
SERIES_PACKAGE = "series"  # package data: the files the series adds, under their SGLang paths

REWRITTEN = "rewritten"
ALREADY = "already routed"
LEFT_OUT = "left out"


@dataclass(frozen=True)
class Edit:
    """Replace ``old`` (exactly once in the file) by ``new``; ``new is None`` deletes the
    file, whose whole text must then be ``old``."""

    path: str  # relative to the sglang package
    old: str
    new: Optional[str]


@dataclass(frozen=True)
class Site:
    name: str  # what the report calls it
    edits: Tuple[Edit, ...]
    # Tables the site deletes: a local change of their values is named when it is left out.
    tables: Tuple[str, ...] = ()
    # For the audit (``sglang-arch audit``'s patched column), as ``module:qualname``:
    # functions the site edits in part (what it answers are the lines its edits rewrite),
    # and names whose whole definition it replaces or deletes.
    routes: Tuple[str, ...] = ()
    replaces: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    number: int
    key: str
    title: str
    pr_name: str  # templates/pr/<pr_name>
    adds: Tuple[str, ...] = ()  # files under series/package/ (relative to the sglang package)
    tests: Tuple[str, ...] = ()  # files under series/test/registered/unit/arch/
    sites: Tuple[Site, ...] = ()


@dataclass
class SiteOutcome:
    site: str
    status: str  # REWRITTEN | ALREADY | LEFT_OUT
    detail: str = ""


@dataclass
class StepPlan:
    outcomes: List[SiteOutcome] = field(default_factory=list)
    # path -> new text (None: delete), for the sites that land
    files: Dict[str, Optional[str]] = field(default_factory=dict)


def series_file(rel: str) -> str:
    """A file the series adds, by its path under ``series/``."""
    node = resources.files(__package__).joinpath(SERIES_PACKAGE)
    for part in rel.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def plan_sites(step: Step, read) -> StepPlan:
    """Apply ``step``'s sites to the texts ``read(path)`` returns (None: no such file)."""
    plan = StepPlan()
    for site in step.sites:
        texts: Dict[str, Optional[str]] = {}
        for edit in site.edits:
            if edit.path not in texts:
                texts[edit.path] = plan.files[edit.path] if edit.path in plan.files else read(edit.path)
        status, detail, new = _apply_site(site, texts)
        plan.outcomes.append(SiteOutcome(site.name, status, detail))
        if status == REWRITTEN:
            plan.files.update(new)
    return plan


def _in_file_endings(edit: Edit, text: Optional[str]) -> Edit:
    """``edit`` with the line endings of the file it edits: a checkout with CRLF endings
    (``core.autocrlf``, ``eol=crlf``) holds the release's lines ending in ``\r\n``."""
    if text is None or "\r\n" not in text:
        return edit
    crlf = lambda t: None if t is None else t.replace("\r\n", "\n").replace("\n", "\r\n")  # noqa: E731
    return replace(edit, old=crlf(edit.old), new=crlf(edit.new))


def _apply_site(site: Site, texts: Dict[str, Optional[str]]):
    edits = [_in_file_endings(edit, texts[edit.path]) for edit in site.edits]
    done = all(_already(edit, texts[edit.path]) for edit in edits)
    if done:
        return ALREADY, "", {}
    new = dict(texts)
    for edit in edits:
        text = new[edit.path]
        if text is None:
            return LEFT_OUT, f"{edit.path} is not in this tree", {}
        if edit.new is None:
            if text != edit.old:
                return LEFT_OUT, _differs(site, edit.path, text, edit.old), {}
            new[edit.path] = None
            continue
        count = text.count(edit.old)
        if count != 1:
            if count == 0:
                return LEFT_OUT, _differs(site, edit.path, text, edit.old), {}
            return LEFT_OUT, f"{edit.path}: the text it replaces occurs {count} times", {}
        new[edit.path] = text.replace(edit.old, edit.new, 1)
    return REWRITTEN, "", {path: text for path, text in new.items() if text != texts[path]}


def _already(edit: Edit, text: Optional[str]) -> bool:
    if edit.new is None:
        return text is None
    return text is not None and edit.new in text and (edit.old not in text or edit.old in edit.new)


def _differs(site: Site, path: str, text: str, expected: str) -> str:
    changed = [f"{name} {diff}" for name in site.tables
               for diff in [_table_change(name, text, expected)] if diff]
    if changed:
        return (f"{path}: {'; '.join(changed)} differ from SGLang's release; the series never replaces "
                "values you changed (move them into the registry's tier table by hand)")
    first = next((line.strip() for line in expected.splitlines() if line.strip() and line not in text), None)
    if first:
        where = f"first line not found: {first!r}"
    else:  # every line is there, in another order or with lines between: name where the release's run breaks
        lines = expected.splitlines(keepends=True)
        run = next((k for k in range(len(lines), 0, -1) if "".join(lines[:k]) in text), 0)
        after = next((line.strip() for line in reversed(lines[:run]) if line.strip()), None)
        expected_next = next((line.strip() for line in lines[run:] if line.strip()), None)
        where = (f"after {after!r} the release has {expected_next!r}" if after and expected_next else
                 f"its lines are there, but not in the release's order from {expected_next or after!r}")
    return f"{path}: its code differs from the releases the series was written for ({where})"


def _table_change(name: str, text: str, expected: str) -> str:
    """``name``'s entries that differ between the tree's text and the release's, or ''."""
    mine, release = _table(name, text), _table(name, expected)
    if mine is None or release is None or mine == release:
        return "" if mine == release or release is None else "(not found)"
    keys = sorted(set(mine) | set(release), key=repr)
    return ", ".join(f"[{k!r}]: {release.get(k)!r} -> {mine.get(k)!r}" for k in keys if mine.get(k) != release.get(k))


def _table(name: str, text: str) -> Optional[dict]:
    """The literal value of a module or class level ``name = {...}`` in ``text`` (names
    bound to integer literals earlier in the same text, such as ``MiB``, are resolved)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    constants: Dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = node.targets[0].id
            value = _literal(node.value, constants)
            if target == name:
                return value if isinstance(value, dict) else None
            if isinstance(value, int):
                constants[target] = value
    return None


def _literal(node: ast.AST, constants: Dict[str, int]):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _literal(node.left, constants), _literal(node.right, constants)
        if isinstance(left, int) and isinstance(right, int) and abs(left) < 2**40 and abs(right) < 2**40:
            return left * right
        return None
    if isinstance(node, (ast.List, ast.Tuple)):
        return tuple(_literal(e, constants) for e in node.elts)
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_literal(k, constants): _literal(v, constants) for k, v in zip(node.keys, node.values)}
    return None


# --- the sites ------------------------------------------------------------------------

_SYMM_MEM = "srt/distributed/device_communicators/torch_symm_mem.py"
_SYMM_MEM_SIZES = "srt/distributed/device_communicators/all_reduce_utils.py"
_CUSTOM_AR_V2 = "srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
_FUSION = "srt/layers/flashinfer_comm_fusion.py"
_ADD_NORM = "srt/layers/layer_boundary/residual/add_norm.py"
_OVERRIDES = "srt/arg_groups/overrides.py"
_DEFAULT_ATTN = "srt/arg_groups/model_override_base.py"
_ATTN_REGISTRY = "srt/layers/attention/attention_registry.py"


def _edits(path: str, *pairs: Tuple[str, Optional[str]]) -> Tuple[Edit, ...]:
    return tuple(Edit(path, old, new) for old, new in pairs)


_SYMM_MEM_TABLE = """MiB = 1024 * 1024

TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES = {
    9: {
        2: 64 * MiB,  # 64 MB
        4: 64 * MiB,  # 64 MB
        6: 128 * MiB,  # 128 MB
        8: 128 * MiB,  # 128 MB
    },
    10: {
        2: 64 * MiB,  # 64 MB
        4: 64 * MiB,  # 64 MB
        6: 128 * MiB,  # 128 MB
        8: 128 * MiB,  # 128 MB
    },
}
"""

SYMM_MEM_SIZES = Site(
    "torch symm mem sizes and kernel (TorchSymmMemCommunicator)",
    (Edit(_SYMM_MEM_SIZES, _SYMM_MEM_TABLE, None),) + _edits(
        _SYMM_MEM,
        ("""from sglang.srt.distributed.device_communicators.all_reduce_utils import (
    TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES,
)
""", REGISTRY_IMPORT),
        ("""
    # Mapping: compute capability major -> supported world sizes for multimem
    # If the current (cc_major, world_size) is not listed, we fall back
    # to the two-shot path.
    _WORLD_SIZES_MULTIMEM = {
        9: [4, 6, 8],
        10: [4, 6, 8],
    }
""", ""),
        ("""        self.device_capability = torch.cuda.get_device_capability(device)[0]
        supported_max_sizes = TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES.get(
            self.device_capability
        )
        if supported_max_sizes is None:
            logger.warning(
                "TorchSymmMemCommunicator: Device capability %s not supported, "
                "communicator is not available.",
                self.device_capability,
            )
            return
        if self.world_size not in supported_max_sizes:
            logger.warning(
                "TorchSymmMemCommunicator: World size %d not supported, "
                "communicator is not available.",
                self.world_size,
            )
            return
        self.max_size = supported_max_sizes[self.world_size]
""", """        self.device_capability = torch.cuda.get_device_capability(device)
        self.max_size = arch_registry.symm_mem_max_size(
            self.world_size, self.device_capability
        )
        if self.max_size == 0:
            logger.warning(
                "TorchSymmMemCommunicator: world size %d on compute capability "
                "%d.%d not supported, communicator is not available.",
                self.world_size,
                *self.device_capability,
            )
            return
        self.use_multimem = arch_registry.symm_mem_uses_multimem(
            self.world_size, self.device_capability
        )
"""),
        ("""        if self.world_size in self._WORLD_SIZES_MULTIMEM.get(
            self.device_capability, ()
        ):
""", """        if self.use_multimem:
"""),
    ),
    tables=("TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES", "_WORLD_SIZES_MULTIMEM"),
    routes=("sglang.srt.distributed.device_communicators.torch_symm_mem:TorchSymmMemCommunicator.__init__",
            "sglang.srt.distributed.device_communicators.torch_symm_mem:TorchSymmMemCommunicator.all_reduce"),
    replaces=("sglang.srt.distributed.device_communicators.all_reduce_utils:TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES",
              "sglang.srt.distributed.device_communicators.torch_symm_mem:"
              "TorchSymmMemCommunicator._WORLD_SIZES_MULTIMEM"),
)

CUSTOM_AR_V2 = Site(
    "custom all-reduce v2 tuned table (_get_all_reduce_configs)",
    _edits(
        _CUSTOM_AR_V2,
        ("import torch\n\n", "import torch\n\n" + REGISTRY_IMPORT + "\n"),
        ("""    cuda_major, cuda_minor = torch.cuda.get_device_capability()
    num_sm = torch.cuda.get_device_properties().multi_processor_count
    if cuda_major == 9:
        return _sm90_configs(num_sm)
    if cuda_major == 10:
        if cuda_minor >= 7:
            return _sm107_configs(num_sm)
        return _sm100_configs(num_sm)
""", """    num_sm = torch.cuda.get_device_properties().multi_processor_count
    table = arch_registry.custom_all_reduce_v2_table(torch.cuda.get_device_capability())
    tuned = {"sm90": _sm90_configs, "sm100": _sm100_configs, "sm107": _sm107_configs}
    if table in tuned:
        return tuned[table](num_sm)
"""),
    ),
    routes=("sglang.srt.distributed.device_communicators.configs.custom_all_reduce_v2:_get_all_reduce_configs",),
)

FUSION_BACKEND = Site(
    "fusion backend resolution (_resolve_backend)",
    _edits(
        _FUSION,
        ("import torch.distributed as dist\nfrom torch.distributed import ProcessGroup\n\n",
         "import torch.distributed as dist\nfrom torch.distributed import ProcessGroup\n\n" + REGISTRY_IMPORT),
        ("from sglang.srt.runtime_context import (\n    get_exec,\n    get_parallel,\n    get_platform,\n"
         "    get_resources,\n)\n",
         "from sglang.srt.runtime_context import get_exec, get_parallel, get_resources\n"),
        ('''def _mnnvl_supported(is_multi_node: bool) -> bool:
    """Whether the mnnvl backend is usable on the current system."""
    if get_platform().is_sm100:
        return True
    return get_platform().is_sm90 and not is_multi_node


def _resolve_backend(backend: str, is_multi_node: bool = False) -> str:
    """Resolve the requested FlashInfer allreduce fusion backend."""
    if not (get_platform().is_sm90 or get_platform().is_sm100):
        raise ValueError(
            "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs."
        )

    if backend == "cutedsl":
        if not get_platform().is_sm100:
            raise ValueError(
                "FlashInfer allreduce fusion cutedsl backend requires a "
                "Blackwell system."
            )
        return backend

    if backend == "auto":
        if is_multi_node:
            if get_platform().is_sm100:
                return "mnnvl"
            raise ValueError(
                "FlashInfer allreduce fusion does not support multi-node on "
                "non-Blackwell systems."
            )
        if get_platform().is_sm100:
            return "mnnvl"
        return "trtllm"

    if backend == "trtllm" and is_multi_node:
        raise ValueError(
            "FlashInfer allreduce fusion trtllm backend supports single-node only."
        )

    if backend == "mnnvl" and not _mnnvl_supported(is_multi_node):
        raise ValueError(
            "FlashInfer allreduce fusion mnnvl backend requires a Blackwell "
            "system, or SM90 single-node."
        )
    return backend
''', '''def _resolve_backend(backend: str, is_multi_node: bool = False) -> str:
    """Resolve the requested FlashInfer allreduce fusion backend."""
    capability = arch_registry.device_capability()
    if not arch_registry.allreduce_fusion_backends():
        raise ValueError(
            "FlashInfer allreduce fusion is not supported on compute capability "
            f"{capability}."
        )
    if backend == "auto":
        resolved = arch_registry.allreduce_fusion_auto_backend(is_multi_node)
        if resolved is None:
            raise ValueError(
                "FlashInfer allreduce fusion does not support multi-node on compute "
                f"capability {capability}."
            )
        return resolved
    supported = arch_registry.allreduce_fusion_backends(is_multi_node)
    if backend not in supported:
        nodes = "multi-node" if is_multi_node else "single-node"
        raise ValueError(
            f"FlashInfer allreduce fusion {backend} backend is not supported "
            f"{nodes} on compute capability {capability}; supported: "
            f"{', '.join(supported) or 'none'}."
        )
    return backend
'''),
    ),
    replaces=("sglang.srt.layers.flashinfer_comm_fusion:_resolve_backend",
              "sglang.srt.layers.flashinfer_comm_fusion:_mnnvl_supported"),
)

FUSION_GATE = Site(
    "fusion kernel gate (flashinfer_ar_fusion_applies)",
    _edits(
        _ADD_NORM,
        ("from sglang.srt.layers.dp_attention import is_dp_attention_enabled\n",
         REGISTRY_IMPORT + "from sglang.srt.layers.dp_attention import is_dp_attention_enabled\n"),
        ("from sglang.srt.runtime_context import get_exec, get_parallel, get_platform\n",
         "from sglang.srt.runtime_context import get_exec, get_parallel\n"),
        ("""_is_sm90_supported = _is_cuda and get_platform().is_sm90
_is_sm100_supported = _is_cuda and get_platform().is_sm100
""", """_has_allreduce_fusion = _is_cuda and bool(arch_registry.allreduce_fusion_backends())
"""),
        ("        (_is_sm90_supported or _is_sm100_supported)\n", "        _has_allreduce_fusion\n"),
    ),
    routes=("sglang.srt.layers.layer_boundary.residual.add_norm:flashinfer_ar_fusion_applies",),
    replaces=("sglang.srt.layers.layer_boundary.residual.add_norm:_is_sm90_supported",
              "sglang.srt.layers.layer_boundary.residual.add_norm:_is_sm100_supported"),
)

FUSION_AUTO_ENABLE = Site(
    "fusion auto-enable (_flashinfer_allreduce_fusion_auto_enable)",
    _edits(
        _OVERRIDES,
        ("from sglang.srt.arg_groups import model_override_base\n",
         REGISTRY_IMPORT + "from sglang.srt.arg_groups import model_override_base\n"),
        ("""        and (get_platform().is_sm90 or get_platform().is_sm100)
        and view.tp_size > 1
""", """        and arch_registry.allreduce_fusion_auto_enable(view.nnodes > 1)
        and view.tp_size > 1
"""),
        ("        and (view.nnodes == 1 or get_platform().is_sm100)\n", ""),
    ),
    routes=("sglang.srt.arg_groups.overrides:_flashinfer_allreduce_fusion_auto_enable",),
)

ATTENTION_DEFAULT = Site(
    "attention default (get_default_attn_backend)",
    _edits(
        _DEFAULT_ATTN,
        ("from sglang.srt.platforms import current_platform\n",
         REGISTRY_IMPORT + "from sglang.srt.platforms import current_platform\n"),
        ("""    if not use_mla_backend:
        # MHA architecture

        if get_platform().is_hopper_with_cuda_12_3 and is_no_spec_infer_or_topk_one(
""", """    preferred = arch_registry.attention_backend(use_mla_backend)
    if not use_mla_backend:
        # MHA architecture

        if preferred == "fa3" and is_no_spec_infer_or_topk_one(
"""),
        ("""        elif (
            get_platform().is_sm100
            and is_no_spec_infer_or_topk_one(resolved_view(server_args))
""", """        elif (
            preferred == "trtllm_mha"
            and is_no_spec_infer_or_topk_one(resolved_view(server_args))
"""),
        ("""        if get_platform().is_hopper_with_cuda_12_3:
            return "fa3"
        elif get_platform().is_sm100:
            return "flashinfer"
        elif get_platform().is_hip:
""", """        if preferred is not None:
            return preferred
        elif get_platform().is_hip:
"""),
    ),
    routes=("sglang.srt.arg_groups.model_override_base:get_default_attn_backend",),
)

ATTENTION_CHECK = Site(
    "explicit attention backend check (fa3, trtllm_mha, trtllm_mla)",
    _edits(
        _ATTN_REGISTRY,
        ("from sglang.srt.arg_groups.overrides import (\n",
         REGISTRY_IMPORT + "from sglang.srt.arg_groups.overrides import (\n"),
        ("""        raise ValueError("trtllm_mla backend can only be used with MLA models.")
""", """        raise ValueError("trtllm_mla backend can only be used with MLA models.")
    arch_registry.check_attention_backend("trtllm_mla", use_mla=True)
"""),
        ("""        assert (major == 8 and not runner.use_mla_backend) or major == 9, (
            "FlashAttention v3 Backend requires SM>=80 and SM<=90. "
            "Please use `--attention-backend flashinfer`."
        )
""", """        arch_registry.check_attention_backend("fa3", runner.use_mla_backend)
"""),
        ("""        raise ValueError("trtllm_mha backend can only be used with non-MLA models.")
""", """        raise ValueError("trtllm_mha backend can only be used with non-MLA models.")
    arch_registry.check_attention_backend("trtllm_mha", use_mla=False)
"""),
    ),
    routes=("sglang.srt.layers.attention.attention_registry:create_flashattention_v3_backend",
            "sglang.srt.layers.attention.attention_registry:create_trtllm_mha_backend",
            "sglang.srt.layers.attention.attention_registry:create_trtllm_mla_backend"),
)

TWO_SHOT = Site(
    "two-shot without multicast (TorchSymmMemCommunicator)",
    _edits(
        _SYMM_MEM,
        # Needs step 2's kernel choice: an edit that changes nothing, found only there.
        ("        if self.use_multimem:\n", "        if self.use_multimem:\n"),
        ("""        if handle.multicast_ptr == 0:
            logger.warning(
                "TorchSymmMemCommunicator: torch symmetric memory "
                "multicast operations are not supported."
            )
            self.buffer = None
            self.disabled = True
            return
""", """        if handle.multicast_ptr == 0 and self.use_multimem:
            # Two-shot needs peer-to-peer access only, not NVLS multicast.
            logger.info(
                "TorchSymmMemCommunicator: multicast is not supported, "
                "using two-shot all-reduce."
            )
            self.use_multimem = False
"""),
    ),
    routes=("sglang.srt.distributed.device_communicators.torch_symm_mem:TorchSymmMemCommunicator.__init__",),
)

STEPS: Tuple[Step, ...] = (
    Step(1, "registry", "GPU architecture registry", "PR-1-registry.md",
         adds=("srt/arch/__init__.py", "srt/arch/registry.py", "test/arch_utils.py"),
         tests=("test_arch_registry.py",)),
    Step(2, "collectives", "torch symm mem and custom all-reduce v2", "PR-2-collectives.md",
         tests=("test_arch_collectives.py",), sites=(SYMM_MEM_SIZES, CUSTOM_AR_V2)),
    Step(3, "fusion", "FlashInfer all-reduce fusion", "PR-3-fusion.md",
         tests=("test_arch_fusion.py",), sites=(FUSION_BACKEND, FUSION_GATE, FUSION_AUTO_ENABLE)),
    Step(4, "attention", "attention default and explicit-backend check", "PR-4-attention.md",
         tests=("test_arch_attention.py",), sites=(ATTENTION_DEFAULT, ATTENTION_CHECK)),
    Step(5, "two-shot", "torch symm mem two-shot without multicast", "PR-5-two-shot.md",
         tests=("test_arch_two_shot.py",), sites=(TWO_SHOT,)),
)


def step_sites(steps: Sequence[Step] = STEPS) -> List[Site]:
    return [site for step in steps for site in step.sites]
