"""``sglang-arch explain`` at a glance: the mission's decisions beside stock SGLang's, every
line within 100 columns, and a simulated machine of several GPUs never on ``single``."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from sglang_arch import explain_text, stock
from sglang_arch.arch import TOPOLOGIES, resolve
from sglang_arch.arch.decisions import decide, explain
from sglang_arch.arch.table import ARCHITECTURES
from sglang_arch.arch.topology import MULTI_GPU_STAND_IN, default_topology
from sglang_arch.arch.validate import MAX_GPUS_PER_NODE
from sglang_arch.cli import main

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@st.composite
def machines(draw):
    cap = f"{draw(st.integers(1, 20))}.{draw(st.integers(0, 9))}"
    nnodes = draw(st.sampled_from([1, 1, 1, 2, 4]))
    world = nnodes * draw(st.integers(1, MAX_GPUS_PER_NODE))
    names = [n for n in TOPOLOGIES if world == 1 or n != "single"]
    topology = draw(st.one_of(st.none(), st.sampled_from(names)))
    cuda = draw(st.sampled_from(["11.8", "12.2", "12.3", "12.8", "12.9", "13.0"]))
    argv = ["explain", cap, "--world-size", str(world), "--nnodes", str(nnodes), "--cuda", cuda]
    argv += ["--topology", topology] if topology else []
    argv += ["--all"] if draw(st.booleans()) else []
    return argv


@given(argv=machines())
@settings(max_examples=150, **SETTINGS)
def test_every_explain_line_fits_100_columns(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    widest = max(out.splitlines(), key=len)
    assert len(widest) <= explain_text.WIDTH, (argv, widest)


@pytest.mark.parametrize("cap", list(ARCHITECTURES) + ["13.0", "10.5", "6.1"])
@pytest.mark.parametrize("world", range(1, MAX_GPUS_PER_NODE + 1))
def test_a_machine_of_several_gpus_never_gets_single(cap, world):
    res = resolve(cap)
    topology = decide(res, None, world).topology
    if world == 1:
        assert topology.name == "single"
    else:
        assert topology.name != "single"
        expected = MULTI_GPU_STAND_IN if res.profile.topology == "single" else res.profile.topology
        assert topology.name == expected == default_topology(res.profile.topology, world).name


def test_an_unknown_gpu_on_eight_gpus_is_shown_on_a_multi_gpu_topology(capsys):
    code, out, _ = run(capsys, "explain", "13.0", "--world-size", "8")
    machine = next(line for line in out.splitlines() if line.startswith("machine"))
    assert code == 0 and "topology pcie (PCIe without peer-to-peer access)" in machine
    assert "typically a single GPU" in out and "--topology" in out  # the stand-in is said
    code, out, _ = run(capsys, "explain", "12.1", "--world-size", "2", "--nnodes", "2")
    assert code == 0 and "topology pcie " in out


def test_the_stand_in_is_not_said_where_the_topology_is_the_tiers_own(capsys):
    assert "typically a single GPU" not in run(capsys, "explain", "12.0", "--world-size", "8")[1]
    assert "typically a single GPU" not in run(capsys, "explain", "12.1", "--world-size", "8",
                                               "--topology", "pcie-p2p")[1]


@pytest.mark.parametrize("world", [2, 8, 72])
def test_single_with_several_gpus_is_refused_in_one_line(capsys, world):
    code, out, err = run(capsys, "explain", "12.0", "--topology", "single", "--world-size", str(world))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.strip() == (f"sglang-arch explain: error: topology single is one GPU, but {world} GPUs are given; "
                           f"accepted: one of nvswitch, nvlink, pcie-p2p, pcie for more than one GPU, or single "
                           f"with one GPU")
    assert run(capsys, "explain", "12.0", "--topology", "single")[0] == 0


def test_the_reference_pcie_box_shows_what_differs_from_stock_sglang(capsys):
    code, out, _ = run(capsys, "explain", "12.0", "--world-size", "8", "--topology", "pcie-p2p")
    lines = out.splitlines()
    symm = next(line for line in lines if line.startswith("torch symm mem"))
    assert symm.split()[3:] == ["off", "off"]  # nothing measured torch's kernels over PCIe
    at = lines.index(symm)
    assert lines[at + 1].split()[:2] == ["flag:", "--enable-torch-symm-mem"]
    assert "stock: no size for major 12" in out
    ipc = next(line for line in lines if line.startswith("PCIe-IPC all-reduce"))
    assert ipc.split()[2:] == ["on", "(decode-sized)", "off", "differs"]
    assert "evidence: [pcie-ipc-tp8-sm120] TP 8, 8k context: NCCL only 1910 ms TTFT / 21.14 ms TPOT" in " ".join(
        line.strip() for line in lines)
    path = lines.index(next(line for line in lines if line.startswith("all-reduce path")))
    assert lines[path].split()[2:] == ["decode", "PCIe-IPC", "decode", "NCCL", "differs"]
    assert lines[path + 1].split() == ["prefill", "NCCL", "prefill", "NCCL"]
    mha = next(i for i, line in enumerate(lines) if line.startswith("attention MHA"))
    assert lines[mha].split()[2:] == ["prefill", "flashinfer", "prefill", "flashinfer"]
    assert lines[mha + 1].split() == ["decode", "flashinfer", "decode", "flashinfer"]
    moe = next(line for line in lines if line.startswith("MoE / GEMM"))
    assert "differs from stock SGLang: MoE runner mxfp8 refused" in moe
    # only the mission by default; the model rows with --all
    assert "DeepSeek-V4.1 auto" not in out and "--all adds" in " ".join(lines[-2:])
    assert "DeepSeek-V4.1 auto" in run(capsys, "explain", "12.0", "--world-size", "8", "--all")[1]


def test_an_h100_box_differs_from_stock_sglang_nowhere_in_the_mission(capsys):
    out = run(capsys, "explain", "9.0", "--world-size", "8", "--topology", "nvswitch")[1]
    head = out.splitlines().index(next(line for line in out.splitlines() if "with sglang-arch" in line))
    mission = out.splitlines()[head:]
    assert not [line for line in mission if line.endswith(explain_text.MARK)]


def test_json_keeps_every_key_and_adds_stock_sglangs_answers(capsys):
    code, out, _ = run(capsys, "explain", "12.0", "--world-size", "8", "--topology", "pcie-p2p", "--json")
    d = json.loads(out)
    today = explain("12.0", world_size=8, topology="pcie-p2p").to_dict()
    assert code == 0 and {k: d[k] for k in today} == today
    assert d["topology_note"] is None
    s = d["stock_sglang"]
    assert s["release"] == stock.RELEASE and s["symm_mem"]["value"] == "off"
    assert s["fusion"]["value"] == "off" and (s["mha"]["prefill"], s["mla"]["decode"]) == ("flashinfer", "triton")
    assert s["moe_gemm"] == {"deep_gemm": "on", "fp8_gemm": "cutlass", "fp4_gemm": "flashinfer_cutlass"}
    d = json.loads(run(capsys, "explain", "13.0", "--world-size", "8", "--json")[1])
    assert d["topology"] == "pcie" and "typically a single GPU" in d["topology_note"]


@pytest.mark.parametrize("cap,topology,world,symm,fusion", [
    ("9.0", "nvswitch", 8, "128 MiB multimem", "trtllm"),
    ("9.0", "nvswitch", 2, "64 MiB two_shot", "trtllm"),
    ("10.3", "nvswitch", 8, "128 MiB multimem", "mnnvl"),
    ("10.0", "nvlink", 8, "off", "mnnvl"),
    ("12.0", "pcie-p2p", 8, "off", "off"),
    ("8.0", "nvlink", 8, "off", "off"),
])
def test_the_stock_model_on_reference_machines(cap, topology, world, symm, fusion):
    s = stock.decide(resolve(cap).requested, TOPOLOGIES[topology], world)
    assert (s.symm_mem.value, s.fusion.value) == (symm, fusion)


def test_a_long_override_name_still_fits(tmp_path, capsys, monkeypatch):
    path = tmp_path / "o.json"
    path.write_text(json.dumps({"12.0": {"name": "N" * 300 + " RTX " * 100}}))
    monkeypatch.setenv("SGLANG_ARCH_CONFIG", str(path))
    code, out, err = run(capsys, "explain", "12.0", "--world-size", "8", "--all")
    assert code == 0, err
    assert max(len(line) for line in out.splitlines()) <= explain_text.WIDTH
    assert out.startswith("device    12.0 -> tier 12.0 NNNN")


@pytest.mark.parametrize("cap", ["13.0", "10.5", "11.5", "12.3", "12.0", "9.0"])
def test_the_moe_gemm_stock_is_sglangs_on_the_device_as_json_says(capsys, cap):
    """The text's "stock" for FP8 / FP4 GEMM and DeepGEMM is stock SGLang's answer on the device
    itself (what ``--json``'s ``stock_sglang`` and ``plan`` say), never the fallback tier's."""
    d = json.loads(run(capsys, "explain", cap, "--all", "--json")[1])
    theirs = d["stock_sglang"]["moe_gemm"]
    out = run(capsys, "explain", cap, "--all")[1]
    for label, key in (("FP8 block GEMM", "fp8_gemm"), ("FP4 GEMM", "fp4_gemm"), ("DeepGEMM", "deep_gemm")):
        row = next(line for line in out.splitlines() if line.startswith(label))
        ours = row[explain_text.LABEL_W:].split(" (stock: ")[0].split(" (same)")[0].strip()
        assert f"(stock: {theirs[key]})" in row if ours != theirs[key] else row.endswith(" (same)"), (cap, row)


@given(cap=st.sampled_from(list(ARCHITECTURES) + ["13.0", "10.5", "15.2"]))
@settings(max_examples=30, **SETTINGS)
def test_a_long_row_name_never_runs_into_its_value(capsys, cap):
    out = run(capsys, "explain", cap, "--all")[1].splitlines()
    footer = len(out) - 1 - out[::-1].index("")  # the note on (same) / (stock: X) after the last blank line
    rows = [line for line in out[out.index(explain_text.MODEL_HEADING) + 1:footer]
            if line != explain_text.QUANTIZATION_HEADING]
    d = explain(cap)
    labels = sorted([row[0] for row in d.named()] + list(d.gemm_rows()), key=len, reverse=True)
    assert rows
    for line in rows:
        if line[:1].strip():  # a row's first line: its name alone, or its name, a blank and its value
            label = next(name for name in labels if line.startswith(name))
            assert line == label or line[len(label)] == " ", line


def test_explain_takes_sglang_arch_topology_as_the_server_would_and_refuses_a_bad_one(capsys, monkeypatch):
    monkeypatch.setenv("SGLANG_ARCH_TOPOLOGY", "pcie")
    code, out, _ = run(capsys, "explain", "9.0", "--world-size", "8")
    assert code == 0 and "topology pcie" in out
    code, out, _ = run(capsys, "explain", "9.0", "--world-size", "8", "--topology", "nvswitch")
    assert code == 0 and "topology nvswitch" in out  # the argument wins
    for name, value in (("SGLANG_ARCH_TOPOLOGY", "bogus"), ("SGLANG_ARCH_GPU_COUNT", "73")):
        monkeypatch.setenv(name, value)
        code, _, err = run(capsys, "explain", "9.0", "--world-size", "8", "--topology", "nvswitch")
        assert code == 2 and name in err and "accepted" in err, err
        monkeypatch.delenv(name)


@pytest.mark.parametrize("nbytes, text", [(64 << 20, "64 MiB"), (64 << 10, "64 KiB"), (1536 << 10, "1536 KiB"),
                                          (4100, "4100 B"), (4, "4 B")])
def test_a_size_is_shown_in_the_largest_unit_that_holds_it_as_an_override_spells_it(nbytes, text):
    from sglang_arch.arch.profile import symm_size_bytes

    assert explain_text.size_text(nbytes) == text
    assert symm_size_bytes(text, "size") == nbytes  # what is shown reads back as the same size


def test_explain_says_which_rows_do_not_depend_on_the_model(capsys):
    out = run(capsys, "explain", "12.0", "--world-size", "8", "--topology", "pcie-p2p")[1].splitlines()
    every = out.index(explain_text.SCOPE_EVERY_MODEL)
    fusion = out.index(explain_text.SCOPE_FUSION)
    attention = out.index(explain_text.SCOPE_ATTENTION)
    quantization = out.index(explain_text.SCOPE_QUANTIZATION)
    assert out[every + 1].startswith("torch symm mem") and every < fusion < attention < quantization
    assert any(line.startswith("custom all-reduce") for line in out[every:fusion])
    assert out[fusion + 1].startswith("all-reduce fusion") and out[attention + 1].startswith("attention MHA")
    assert out[quantization + 1].startswith("MoE / GEMM")


@pytest.mark.parametrize("cap, indexer, stock_indexer", [("10.7", "torch", "DeepGEMM"), ("13.0", "torch", "DeepGEMM"),
                                                          ("10.0", "DeepGEMM", "DeepGEMM"), ("9.0", "torch", "torch")])
def test_explain_all_lists_the_v41_indexer_with_stock_sglangs_pick(capsys, cap, indexer, stock_indexer):
    out = run(capsys, "explain", cap, "--all")[1].splitlines()
    row = next(line for line in out if line.startswith("DeepSeek-V4.1 indexer"))
    want = f"{indexer} (same)" if indexer == stock_indexer else f"{indexer} (stock: {stock_indexer})"
    assert row[explain_text.LABEL_W:] == want
    assert any(line.startswith("V4.1 index logits") for line in out)
    d = json.loads(run(capsys, "explain", cap, "--all", "--json")[1])
    assert d["moe_gemm"]["dsv41_indexer"]["deep_gemm"] is (indexer == "DeepGEMM")


def test_explain_all_gives_stock_sglangs_value_on_its_rows(capsys):
    out = run(capsys, "explain", "12.0", "--all")[1].splitlines()
    quantization = out.index(explain_text.QUANTIZATION_HEADING)
    model = out.index(explain_text.MODEL_HEADING)
    assert model < quantization
    footer = len(out) - 1 - out[::-1].index("")
    firsts = [line for line in out[quantization + 1:footer] if line[:1].strip()]
    values = [line[explain_text.LABEL_W:] for line in firsts if len(line) > explain_text.LABEL_W]
    assert values and all(v.endswith(" (same)") or "(stock: " in v for v in values), values
    rows = {line[:explain_text.LABEL_W].strip(): line[explain_text.LABEL_W:] for line in out[model + 1:quantization]
            if line[:1].strip()}
    assert rows["vision attention"] == "triton_attn (same)"
    assert rows["deterministic MHA"] == "flashinfer (same)"
    assert rows["DeepSeek-V4.1 indexer"] == "DeepGEMM (same)"
