"""The upstream series: what each PR adds to an SGLang tree and which call sites it edits.

The series is the mission's core only, on SGLang's own seams: kernel windows as
``CapabilityRequirement`` sets in ``sglang.kernels`` (``kernels/backend_windows.py``), one
architecture table in the platform layer (``srt/platforms/cuda_arch.py``), and the call
sites that read them (symm-mem and custom all-reduce sizes, FlashInfer all-reduce fusion,
the attention default and the explicit-backend checks).  The files under ``series/`` are
written once, by hand, in SGLang's style, and copied as they are; each call-site edit is
an exact text replacement of SGLang's release code (a later step may edit a file an
earlier step added, the same way).

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
    tests: Tuple[str, ...] = ()  # files under series/test/registered/unit/platforms/
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
        status, detail, new = _apply_site(site, texts, step)
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


def as_later_steps_leave(path: str, text: str, number: int) -> str:
    """``text`` (of ``path``) as the steps after step ``number`` leave it: a later step may
    edit what an earlier one wrote (step 3 a message of step 1's ``_resolve_backend``),
    so a tree the whole series has patched holds the earlier text in that form."""
    for step in STEPS:
        if step.number <= number:
            continue
        for site in step.sites:
            for edit in site.edits:
                if edit.path == path and edit.new is not None and text.count(edit.old) == 1:
                    text = text.replace(edit.old, edit.new, 1)
    return text


def _apply_site(site: Site, texts: Dict[str, Optional[str]], step: Optional[Step] = None):
    edits = [_in_file_endings(edit, texts[edit.path]) for edit in site.edits]
    number = step.number if step is not None else len(STEPS)
    done = all(_already(edit, texts[edit.path]) or (
        edit.new is not None and _already(replace(edit, new=as_later_steps_leave(edit.path, edit.new, number)),
                                          texts[edit.path])) for edit in edits)
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
                "values you changed (move them into srt/platforms/cuda_arch.py by hand)")
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

_WINDOWS = "kernels/backend_windows.py"
_ARCH_TABLE = "srt/platforms/cuda_arch.py"
_SYMM_MEM = "srt/distributed/device_communicators/torch_symm_mem.py"
_SYMM_MEM_SIZES = "srt/distributed/device_communicators/all_reduce_utils.py"
_CUSTOM_AR_V2 = "srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
_FUSION = "srt/layers/flashinfer_comm_fusion.py"
_FUSION_HELP = "srt/arg_groups/fields/exec_.py"
_ADD_NORM = "srt/layers/layer_boundary/residual/add_norm.py"
_OVERRIDES = "srt/arg_groups/overrides.py"
_DEFAULT_ATTN = "srt/arg_groups/model_override_base.py"
_ATTN_REGISTRY = "srt/layers/attention/attention_registry.py"
_INKLING_COMM = "srt/models/inkling_common/kernels/comm.py"


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
from sglang.srt.environ import envs
""", """from sglang.srt.environ import envs
from sglang.srt.platforms.cuda_arch import get_cuda_arch_config
"""),
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
""", """        self.device_capability = torch.cuda.get_device_capability(device)
        config = get_cuda_arch_config(self.device_capability)
        if config is None or not config.torch_symm_mem_max_sizes:
"""),
        ("""            return
        if self.world_size not in supported_max_sizes:
""", """            return
        supported_max_sizes = config.torch_symm_mem_max_sizes
        if self.world_size not in supported_max_sizes:
"""),
        ("""        self.max_size = supported_max_sizes[self.world_size]
""", """        self.max_size = supported_max_sizes[self.world_size]
        self.use_multimem = (
            self.world_size in config.torch_symm_mem_multimem_world_sizes
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
        ("import torch\n\n", "import torch\n\nfrom sglang.srt.platforms.cuda_arch import get_cuda_arch_config\n\n"),
        ("""    cuda_major, cuda_minor = torch.cuda.get_device_capability()
    num_sm = torch.cuda.get_device_properties().multi_processor_count
    if cuda_major == 9:
        return _sm90_configs(num_sm)
    if cuda_major == 10:
        if cuda_minor >= 7:
            return _sm107_configs(num_sm)
        return _sm100_configs(num_sm)
""", """    config = get_cuda_arch_config(torch.cuda.get_device_capability())
    num_sm = torch.cuda.get_device_properties().multi_processor_count
    table = config.custom_all_reduce_v2_table if config else None
    if table == "sm90":
        return _sm90_configs(num_sm)
    if table == "sm100":
        return _sm100_configs(num_sm)
    if table == "sm107":
        return _sm107_configs(num_sm)
"""),
    ),
    routes=("sglang.srt.distributed.device_communicators.configs.custom_all_reduce_v2:_get_all_reduce_configs",),
)

FUSION_BACKEND = Site(
    "fusion backend resolution (_resolve_backend), resolved once per workspace",
    _edits(
        _FUSION,
        ("from sglang.srt.distributed.parallel_state import in_the_same_node_as\n",
         "from sglang.srt.distributed.parallel_state import in_the_same_node_as\n"
         "from sglang.srt.platforms.cuda_arch import (\n    allreduce_fusion_auto_backend,\n"
         "    allreduce_fusion_backends,\n)\n"),
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
    if not allreduce_fusion_backends():
        raise ValueError(
            "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs."
        )
    if backend == "auto":
        resolved = allreduce_fusion_auto_backend(is_multi_node)
        if resolved is None:
            raise ValueError(
                "FlashInfer allreduce fusion does not support multi-node on "
                "non-Blackwell systems."
            )
        return resolved
    if backend not in allreduce_fusion_backends(is_multi_node):
        nodes = "multi-node" if is_multi_node else "single-node"
        raise ValueError(
            f"FlashInfer allreduce fusion {backend} backend is not supported "
            f"{nodes} on this GPU."
        )
    return backend
'''),
        ("""    effective_dtype = dtype or torch.bfloat16
    backend = resolve_flashinfer_allreduce_fusion_backend()
    if backend is None:
        return False

""", """    effective_dtype = dtype or torch.bfloat16

"""),
        ("""    ):
        workspace_manager.initialize(
            world_size=world_size,
""", """    ):
        # Resolved when the workspace is (re)built, not on every fused call.
        backend = resolve_flashinfer_allreduce_fusion_backend()
        if backend is None:
            return False
        workspace_manager.initialize(
            world_size=world_size,
"""),
    ),
    routes=("sglang.srt.layers.flashinfer_comm_fusion:ensure_workspace_initialized",),
    replaces=("sglang.srt.layers.flashinfer_comm_fusion:_resolve_backend",
              "sglang.srt.layers.flashinfer_comm_fusion:_mnnvl_supported"),
)

FUSION_GATE = Site(
    "fusion kernel gate (flashinfer_ar_fusion_applies)",
    _edits(
        _ADD_NORM,
        ("from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode\n"
         "from sglang.srt.runtime_context import get_exec, get_parallel, get_platform\n",
         "from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode\n"
         "from sglang.srt.platforms.cuda_arch import allreduce_fusion_backends\n"
         "from sglang.srt.runtime_context import get_exec, get_parallel\n"),
        ("""_is_sm90_supported = _is_cuda and get_platform().is_sm90
_is_sm100_supported = _is_cuda and get_platform().is_sm100
""", """_has_allreduce_fusion = _is_cuda and bool(allreduce_fusion_backends())
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
        ("from sglang.srt.model_executor.cuda_graph_config import Backend\n",
         "from sglang.srt.model_executor.cuda_graph_config import Backend\n"
         "from sglang.srt.platforms.cuda_arch import allreduce_fusion_auto_enable\n"),
        ("""        and (get_platform().is_sm90 or get_platform().is_sm100)
        and view.tp_size > 1
""", """        and allreduce_fusion_auto_enable(view.nnodes > 1)
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
         "from sglang.srt.platforms import current_platform\n"
         "from sglang.srt.platforms.cuda_arch import default_attention_backend\n"),
        ("""    if not use_mla_backend:
        # MHA architecture

        if get_platform().is_hopper_with_cuda_12_3 and is_no_spec_infer_or_topk_one(
""", """    preferred = default_attention_backend(use_mla_backend)
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

TWO_SHOT_TABLE = Site(
    "two-shot sizes without multicast (CudaArchConfig)",
    _edits(
        _ARCH_TABLE,
        ("""    torch_symm_mem_multimem_world_sizes: Tuple[int, ...] = ()
""", """    torch_symm_mem_multimem_world_sizes: Tuple[int, ...] = ()
    # Without multicast: world size -> largest two-shot all-reduce measured
    # faster than NCCL there; a world size not listed keeps it off.
    torch_symm_mem_two_shot_max_sizes: Dict[int, int] = msgspec.field(
        default_factory=dict
    )
"""),
        ("""    torch_symm_mem_multimem_world_sizes=(4, 6, 8),
    custom_all_reduce_v2_table="sm90",
""", """    torch_symm_mem_multimem_world_sizes=(4, 6, 8),
    # 2x H200, NVLink with multicast off, CUDA graphs: two-shot beats NCCL
    # from 512 KiB to 8 MiB and is no faster from 16 MiB.
    torch_symm_mem_two_shot_max_sizes={2: 16 * MiB},
    custom_all_reduce_v2_table="sm90",
"""),
        ("""    _SM90,
    custom_all_reduce_v2_table="sm100",
""", """    _SM90,
    torch_symm_mem_two_shot_max_sizes={},
    custom_all_reduce_v2_table="sm100",
"""),
    ),
)

TWO_SHOT = Site(
    "two-shot without multicast, peers checked first (TorchSymmMemCommunicator)",
    _edits(
        _SYMM_MEM,
        # Needs step 1's table entry: an edit that changes nothing, found only there.
        ("        config = get_cuda_arch_config(self.device_capability)\n",
         "        config = get_cuda_arch_config(self.device_capability)\n"),
        ("""        self.disabled = True
        self.buffer = None
        self.max_size = 0
""", """        self.disabled = True
        self.multicast = False
        self.buffer = None
        self.max_size = 0
"""),
        ("""        self.buffer = torch_symm_mem.empty(
            self.max_size // self.dtype.itemsize,
            device=self.device,
            dtype=self.dtype,
        )
        handle = torch_symm_mem.rendezvous(self.buffer, self.group.group_name)
        if handle.multicast_ptr == 0:
            logger.warning(
                "TorchSymmMemCommunicator: torch symmetric memory "
                "multicast operations are not supported."
            )
            self.buffer = None
            self.disabled = True
            return
        self.disabled = False
""", """        from sglang.srt.distributed.parallel_state import in_the_same_node_as

        single_node = all(in_the_same_node_as(self.group, source_rank=0))
        if single_node and not self._has_peer_access():
            logger.warning(
                "TorchSymmMemCommunicator: no peer-to-peer access between the "
                "GPUs of this group, communicator is not available."
            )
            return
        self.buffer = torch_symm_mem.empty(
            self.max_size // self.dtype.itemsize,
            device=self.device,
            dtype=self.dtype,
        )
        try:
            handle = torch_symm_mem.rendezvous(self.buffer, self.group.group_name)
        except RuntimeError as e:
            logger.warning(
                "TorchSymmMemCommunicator: rendezvous failed (%s), "
                "communicator is not available.",
                e,
            )
            self.buffer = None
            return
        self.multicast = handle.multicast_ptr != 0
        two_shot_max_size = config.torch_symm_mem_two_shot_max_sizes.get(
            self.world_size
        )
        if not self.multicast and not (single_node and two_shot_max_size):
            logger.warning(
                "TorchSymmMemCommunicator: torch symmetric memory "
                "multicast operations are not supported."
            )
            self.buffer = None
            return
        if not self.multicast:
            # Two-shot needs peer-to-peer access only, not multicast.
            self.use_multimem = False
            self.max_size = two_shot_max_size
        self.disabled = False

    def _has_peer_access(self) -> bool:
        \"\"\"Whether every GPU of the group can access every other's memory, agreed
        by all ranks: a rendezvous without it crashes (SIGFPE, #40485).\"\"\"
        index = self.device.index
        access = [
            peer == index or torch.cuda.can_device_access_peer(self.device, peer)
            for peer in range(torch.cuda.device_count())
        ]
        ranks = [None] * self.world_size
        dist.all_gather_object(ranks, (index, access), group=self.group)
        return all(row[peer] for _, row in ranks for peer, _ in ranks)
"""),
    ),
    routes=("sglang.srt.distributed.device_communicators.torch_symm_mem:TorchSymmMemCommunicator.__init__",),
)

INKLING_MULTICAST = Site(
    "Inkling's multimem consumers read the multicast fact (comm.py)",
    _edits(
        _INKLING_COMM,
        ("""        and not comm.disabled
        and group.world_size in _INKLING_AR_WORLD_SIZES
    ):
        _get_inkling_ar_resources(comm)
""", """        and comm.multicast
        and group.world_size in _INKLING_AR_WORLD_SIZES
    ):
        _get_inkling_ar_resources(comm)
"""),
        ("""        or comm.disabled
        or group.world_size not in _INKLING_AR_WORLD_SIZES
        or dtype != comm.dtype
    ):
        return False
""", """        or not comm.multicast
        or group.world_size not in _INKLING_AR_WORLD_SIZES
        or dtype != comm.dtype
    ):
        return False
"""),
        ("""        or comm.disabled
        or group.world_size not in _INKLING_AR_WORLD_SIZES
        or dtype != comm.dtype
    ):
        return None
""", """        or not comm.multicast
        or group.world_size not in _INKLING_AR_WORLD_SIZES
        or dtype != comm.dtype
    ):
        return None
"""),
        ("""        and not comm.disabled
        and group.world_size in _INKLING_AR_WORLD_SIZES
        and comm.should_torch_symm_mem_allreduce(input)
""", """        and comm.multicast
        and group.world_size in _INKLING_AR_WORLD_SIZES
        and comm.should_torch_symm_mem_allreduce(input)
"""),
        ("""    if comm is None or comm.disabled:
        return None
""", """    if comm is None or not comm.multicast:
        return None
"""),
        ("""        or comm.disabled
        or group.world_size not in (4, 8)  # kernel static_asserts power-of-two
""", """        or not comm.multicast
        or group.world_size not in (4, 8)  # kernel static_asserts power-of-two
"""),
        ("""        or comm.disabled
        or group.world_size not in (4, 8)
        or dtype != comm.dtype
""", """        or not comm.multicast
        or group.world_size not in (4, 8)
        or dtype != comm.dtype
"""),
    ),
    routes=("sglang.srt.models.inkling_common.kernels.comm:ensure_inkling_ar_resources",
            "sglang.srt.models.inkling_common.kernels.comm:ar_sconv_norm_fusable",
            "sglang.srt.models.inkling_common.kernels.comm:get_ar_buffer",
            "sglang.srt.models.inkling_common.kernels.comm:symm_mem_all_reduce",
            "sglang.srt.models.inkling_common.kernels.comm:_symm_mem_comm",
            "sglang.srt.models.inkling_common.kernels.comm:scattered_ar_sconv_fusable",
            "sglang.srt.models.inkling_common.kernels.comm:fullwidth_ar_sconv_fusable"),
)

FUSION_SM12X = Site(
    "trtllm fusion on SM120 / SM121 when asked for (kernel window, table entry)",
    _edits(
        _WINDOWS,
        ("""# FlashInfer all-reduce fusion (flashinfer.comm) on one node, by backend.
ALLREDUCE_FUSION = {
    "trtllm": _SM9X | _SM10X,
""", """# FlashInfer all-reduce fusion (flashinfer.comm) on one node, by backend.
# FlashInfer builds its trtllm comm module for majors 9, 10 and 12.
ALLREDUCE_FUSION = {
    "trtllm": _SM9X | _SM10X | _SM12X,
"""),
    ) + _edits(
        _ARCH_TABLE,
        ("""    (10, 7): msgspec.structs.replace(_SM100, custom_all_reduce_v2_table="sm107"),
}
""", """    (10, 7): msgspec.structs.replace(_SM100, custom_all_reduce_v2_table="sm107"),
    # PCIe: all-reduce fusion only when asked for; auto-selecting trtllm here
    # regressed at TP4 over PCIe (#32330).
    (12, 0): CudaArchConfig(allreduce_fusion_backend="trtllm"),
}
"""),
    ) + _edits(
        _FUSION,
        ("""            "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs."
""", """            "FlashInfer allreduce fusion requires SM90, SM10X, SM120 or SM121 "
            "NVIDIA GPUs."
"""),
    ),
)

FUSION_PREFLIGHT = Site(
    "fusion workspace preflight without multicast granularity",
    _edits(
        _FUSION,
        ("""        allocation_size = ceil_align(buffer_size + signal_pad_size, alloc_granularity)

        mc_prop = cuda_driver.CUmulticastObjectProp()
        mc_prop.numDevices = world_size
        mc_prop.size = allocation_size
        mc_prop.handleTypes = prop.requestedHandleTypes

        err, mc_granularity = cuda_driver.cuMulticastGetGranularity(
            mc_prop,
            cuda_driver.CUmulticastGranularity_flags.CU_MULTICAST_GRANULARITY_RECOMMENDED,
        )
        if err != cuda_driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(
                "cuMulticastGetGranularity failed for FlashInfer "
                f"workspace preflight: {err}"
            )

        allocation_size = ceil_align(allocation_size, mc_granularity)
        allocation_sizes.append(allocation_size)
""", """        # FlashInfer maps this workspace without multicast
        # (enable_multicast=False), so there is no multicast granularity to
        # align to; asking for one fails on GPUs without multicast.
        allocation_size = ceil_align(buffer_size + signal_pad_size, alloc_granularity)
        allocation_sizes.append(allocation_size)
"""),
    ),
    routes=("sglang.srt.layers.flashinfer_comm_fusion:_flashinfer_trtllm_workspace_allocation_sizes",),
)

FUSION_TEXTS = Site(
    "fusion help text and support matrix",
    _edits(
        _FUSION,
        ("""#   Backend   | SM103 | SM100 | SM90        | Single-Node | Multi-Node |
#   --------- | ----- | ----- | ----------- | ----------- | ---------- |
#   trtllm    | Yes   | Yes   | Yes         | Yes         | No         |
#   mnnvl     | Yes   | Yes   | Single-node | Yes         | Blackwell  |
#
# FlashInfer allreduce fusion requires SM90 or SM10X. auto resolves to mnnvl
""", """#   Backend   | SM103 | SM100 | SM90        | SM12x | Single-Node | Multi-Node |
#   --------- | ----- | ----- | ----------- | ----- | ----------- | ---------- |
#   trtllm    | Yes   | Yes   | Yes         | Yes   | Yes         | No         |
#   mnnvl     | Yes   | Yes   | Single-node | No    | Yes         | Blackwell  |
#
# FlashInfer allreduce fusion requires SM90, SM10X or SM12x (SM120/SM121:
# trtllm on one node, when asked for; never enabled unasked, and it needs
# peer-to-peer access between the GPUs). auto resolves to mnnvl
"""),
    ) + _edits(
        _FUSION_HELP,
        ("""                "Requires SM90 or SM10X NVIDIA GPUs. "
""", """                "Requires SM90, SM10X, SM120 or SM121 NVIDIA GPUs; on SM120/SM121 "
                "only trtllm on one node, with peer-to-peer access, and only when "
                "asked for. "
"""),
    ),
)

TRTLLM_MLA_PREFILL = Site(
    "trtllm_mla prefill gate at argument resolution (_mla_kv_cache_dtype_checks)",
    _edits(
        _WINDOWS,
        ("""    ("trtllm_mha", "mha"): _SM9X | _SM10X | _SM12X,
}
""", """    ("trtllm_mha", "mha"): _SM9X | _SM10X | _SM12X,
}
# Where a backend's prefill kernels run on fewer GPUs than its decode: the
# trtllm-gen MLA prefill cubins are SM100/SM103 only (#24633), while decode
# also runs on SM12x through FlashInfer's XQA MLA kernels.
ATTENTION_PREFILL = {
    "trtllm_mla": _SM10X,
}
"""),
    ) + _edits(
        _ARCH_TABLE,
        ("""def default_attention_backend(use_mla: bool) -> Optional[str]:""",
         """def attention_prefill_runs(backend: str) -> bool:
    \"\"\"False only where ``backend``'s prefill window does not admit this GPU.\"\"\"
    window = backend_windows.ATTENTION_PREFILL.get(backend)
    major, minor = get_platform().device_capability
    return window is None or major is None or _window_admits(window, (major, minor))


def default_attention_backend(use_mla: bool) -> Optional[str]:"""),
    ) + _edits(
        _OVERRIDES,
        ("from sglang.srt.platforms.cuda_arch import allreduce_fusion_auto_enable\n",
         "from sglang.srt.platforms.cuda_arch import (\n    allreduce_fusion_auto_enable,\n"
         "    attention_prefill_runs,\n)\n"),
        ("""                "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto."
            )
""", """                "TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, bf16, or auto."
            )
    if attention_backends_of(view)[0] == "trtllm_mla" and not (
        attention_prefill_runs("trtllm_mla")
    ):
        raise ValueError(
            "TRTLLM MLA prefill is only supported on SM100/SM103 (decode also "
            "runs on SM12x). Please use --prefill-attention-backend flashinfer."
        )
"""),
    ),
    routes=("sglang.srt.arg_groups.overrides:_mla_kv_cache_dtype_checks",),
)

FA3_CHECK = Site(
    "fa3 kernel window as a ValueError (create_flashattention_v3_backend)",
    _edits(
        _ATTN_REGISTRY,
        ("from sglang.srt.runtime_context import (\n",
         "from sglang.srt.platforms.cuda_arch import attention_backend_runs\n"
         "from sglang.srt.runtime_context import (\n"),
        ("""        assert (major == 8 and not runner.use_mla_backend) or major == 9, (
            "FlashAttention v3 Backend requires SM>=80 and SM<=90. "
            "Please use `--attention-backend flashinfer`."
        )
""", """        if not attention_backend_runs("fa3", runner.use_mla_backend, (major, minor)):
            raise ValueError(
                "FlashAttention v3 Backend requires SM>=80 and SM<=90 (SM90 for "
                "MLA). Please use `--attention-backend flashinfer`."
            )
"""),
    ),
    routes=("sglang.srt.layers.attention.attention_registry:create_flashattention_v3_backend",),
)

STEPS: Tuple[Step, ...] = (
    Step(1, "platform-table", "kernel windows and the CUDA architecture table, with their consumers",
         "PR-1-platform-table.md",
         adds=(_WINDOWS, _ARCH_TABLE, "test/platform_utils.py"),
         tests=("test_cuda_arch_table.py", "test_cuda_arch_consumers.py"),
         sites=(SYMM_MEM_SIZES, CUSTOM_AR_V2, FUSION_BACKEND, FUSION_GATE, FUSION_AUTO_ENABLE,
                ATTENTION_DEFAULT)),
    Step(2, "two-shot", "torch symm mem two-shot without multicast, and its multicast consumers",
         "PR-2-two-shot.md", tests=("test_torch_symm_mem_two_shot.py",),
         sites=(TWO_SHOT_TABLE, TWO_SHOT, INKLING_MULTICAST)),
    Step(3, "fusion-sm12x", "FlashInfer all-reduce fusion on SM12x when asked for", "PR-3-fusion-sm12x.md",
         tests=("test_allreduce_fusion_sm12x.py",), sites=(FUSION_SM12X, FUSION_PREFLIGHT, FUSION_TEXTS)),
    Step(4, "attention-checks", "trtllm_mla prefill gate and the fa3 check as a ValueError",
         "PR-4-attention-checks.md", tests=("test_attention_backend_checks.py",),
         sites=(TRTLLM_MLA_PREFILL, FA3_CHECK)),
)

def step_sites(steps: Sequence[Step] = STEPS) -> List[Site]:
    return [site for step in steps for site in step.sites]
