"""``explain``'s "stock SGLang" column (``sglang_arch/stock.py``, a model of SGLang 0.5.23's
rules that needs no SGLang) against SGLang's own functions on the tiers.

The attention default and the fusion backend come from SGLang alone in its own process
(``upstream_oracle.py``, the plugin disabled); the symmetric-memory and custom all-reduce
answers from SGLang's communicator and its v2 config picker on a simulated device, the
plugin's hooks bypassed (``plan.py``'s helpers, as ``sglang-arch plan`` runs them).
"""

import importlib.util
import itertools

import pytest

if importlib.util.find_spec("sglang") is None:
    pytest.skip("needs the real sglang 0.5.23: pip install -e 'python[serve]'", allow_module_level=True)

from upstream_oracle import CUDAS, KNOWN, model_key  # noqa: E402

from sglang_arch import stock  # noqa: E402
from sglang_arch.arch import parse_capability, parse_topology  # noqa: E402

PLAIN_MODEL = {"mha": (False, None, 1, False, False, False), "mla": (True, None, 1, False, False, False)}
TOPOLOGIES = ["nvswitch", "nvlink", "pcie-p2p", "pcie"]


@pytest.mark.parametrize("cap,cuda", list(itertools.product(KNOWN, CUDAS)))
def test_the_stock_attention_default_is_sglangs(upstream_answers, cap, cuda):
    c = parse_capability(cap)
    for kind, model in PLAIN_MODEL.items():
        key = f"{c.major}.{c.minor}|{cuda[0]}.{cuda[1]}|{model_key(model)}|True"
        expected = upstream_answers["attention"][key]
        got = stock.attention(c, kind, cuda)
        assert (got.prefill, got.decode) == (expected, expected), (cap, cuda, kind)


@pytest.mark.parametrize("cap,cuda", list(itertools.product(KNOWN, CUDAS)))
@pytest.mark.parametrize("multi_node", [False, True])
def test_the_stock_fusion_is_sglangs_auto(upstream_answers, cap, cuda, multi_node):
    """The auto-enable's platform condition is the one ``_resolve_backend`` raises on:
    where it raises, stock SGLang runs without fusion."""
    c = parse_capability(cap)
    answer = upstream_answers["fusion"][f"{c.major}.{c.minor}|{cuda[0]}.{cuda[1]}|auto|{multi_node}"]
    got = stock.fusion(c, 8, 2 if multi_node else 1, cuda).value
    assert got == ("off" if answer == "ValueError" else answer), (cap, cuda, multi_node)


def test_the_stock_tables_are_sglangs(upstream_answers):
    tables = upstream_answers["tables"]
    assert {int(k): {int(w): b for w, b in v.items()} for k, v in tables["symm_mem_max_sizes"].items()} \
        == stock.SYMM_MEM_MAX_BYTES
    assert {int(k): tuple(v) for k, v in tables["multimem_world_sizes"].items()} == stock.MULTIMEM_WORLD_SIZES
    for name, sizes in tables["custom_ar_world_sizes"].items():
        assert tuple(sizes) == stock.CUSTOM_AR_WORLD_SIZES[name]


@pytest.mark.parametrize("cap", KNOWN + ["10.5", "13.0"])
def test_the_stock_custom_ar_table_is_the_one_sglang_picks(cap):
    from sglang_arch.integrations.sglang.plan import custom_ar_table

    c = parse_capability(cap)
    picked = custom_ar_table(c, original=True)
    name = "default" if picked.startswith("default:") else picked
    assert stock.custom_ar_table(c) == name
    if name == "default":
        low, high = stock.CUSTOM_AR_WORLD_SIZES["default"][0], stock.CUSTOM_AR_WORLD_SIZES["default"][-1]
        assert picked.split(":")[1] == f"{low}-{high}"


@pytest.mark.parametrize("cap,world,topology", list(itertools.product(
    ["8.0", "9.0", "10.0", "10.3", "12.0", "13.0"], [2, 4, 6, 8, 3], TOPOLOGIES)))
def test_the_stock_symm_mem_is_sglangs_communicator(cap, world, topology):
    """SGLang's TorchSymmMemCommunicator built on the simulated device and group, with its
    own table (the plugin's hook is not applied in this process)."""
    import os

    from sglang.srt.distributed.device_communicators import all_reduce_utils
    from sglang_arch.integrations.sglang.plan import symm_mem_outcome

    if all_reduce_utils.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES.keys() != {9, 10}:
        pytest.skip("SGLang's symmetric-memory table was changed in this process by the plugin")
    os.environ["SGLANG_OPT_USE_INKLING_CUSTOM_AR"] = "0"
    try:
        c, topo = parse_capability(cap), parse_topology(topology)
        real = symm_mem_outcome(c, world, topo.multicast)
    finally:
        del os.environ["SGLANG_OPT_USE_INKLING_CUSTOM_AR"]
    expected = f"{real['max_bytes'] >> 20} MiB {real['algorithm']}" if real["enabled"] else "off"
    assert stock.symm_mem(c, topo, world).value == expected
