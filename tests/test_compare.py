"""onnxcost compare: totals side by side, layer alignment, findings, exit codes.

The shipped models/ exports (see models/README.md) are compared with each other; small
pairs written in ONNX text isolate one difference each (padding, BatchNorm, size).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from onnxcost_testing import parse
from typer.testing import CliRunner

from onnxcost.cli.app import app
from onnxcost.compare import BenchSettings, Comparison, MetricRow, compare
from onnxcost.errors import ModelLoadError, ShapeError, UsageError

MODELS = Path(__file__).resolve().parents[1] / "models"
runner = CliRunner()


def model(name: str) -> str:
    return str(MODELS / f"{name}.onnx")


@pytest.fixture(scope="module")
def resnet() -> Comparison:
    return compare([model("resnet20_torch_dynamo"), model("resnet20_keras")])


@pytest.fixture(scope="module")
def mlp() -> Comparison:
    return compare([model("mlp_torch_dynamo"), model("mlp_keras")])


@pytest.fixture(scope="module")
def encoder() -> Comparison:
    return compare([model("encoder_torch_dynamo"), model("encoder_keras")])


def save(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(parse(text).SerializeToString())
    return str(path)


def conv_model(pads: str, strides: str = "[1,1]", c_out: int = 4, out_hw: int = 8) -> str:
    return f"""
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] x) => (float[1,{c_out},{out_hw},{out_hw}] y)
  <float[{c_out},3,3,3] w = {{1.0}}, float[{c_out}] b = {{0.5}}> {{
  y = Conv <pads={pads}, strides={strides}> (x, w, b)
}}"""


BN_KEPT = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] x) => (float[1,4,8,8] y)
  <float[4,3,3,3] w = {1.0}, float[4] s = {1.0}, float[4] t = {0.0}, float[4] m = {0.0},
   float[4] v = {1.0}> {
  c = Conv <pads=[1,1,1,1]> (x, w)
  y = BatchNormalization (c, s, t, m, v)
}"""


# --- the shipped exports: same MACs, aligned layers, findings --------------------------------


@pytest.mark.parametrize(
    ("torch_file", "keras_file", "macs"),
    [
        # 784*128 + 128*32 + 32*10
        ("mlp_torch_dynamo", "mlp_keras", 104_768),
        # 40,812,544 conv + 64*10 fc (models/README.md)
        ("resnet20_torch_dynamo", "resnet20_keras", 40_813_184),
        # 128*256*768 + 2*4*128*128*64 + 128*256*256 + 2*128*256*1024
        ("encoder_torch_dynamo", "encoder_keras", 109_051_904),
    ],
)
def test_exports_of_one_architecture_have_the_same_macs(
    torch_file: str, keras_file: str, macs: int
) -> None:
    c = compare([model(torch_file), model(keras_file)])
    row = next(r for r in c.totals if r.key == "macs")
    assert row.values == (macs, macs)
    assert row.diff_percent == (None, 0.0)
    assert f"the same MACs ({macs:,})" in " ".join(c.findings)


def test_resnet_alignment_pairs_21_convs_and_the_dense_layer(resnet: Comparison) -> None:
    (al,) = resnet.alignments
    assert (al.count("match"), al.count("merge"), al.count("only_a"), al.count("only_b")) == (
        22,
        0,
        0,
        0,
    )
    ops = [(p.a[0].op_type, p.b[0].op_type) for p in al.pairs]
    assert ops == [("Conv", "Conv")] * 21 + [("Gemm", "MatMul")]
    assert all(p.macs_a == p.macs_b for p in al.pairs)
    # Each side in its own file order: the first conv is 32*32*16*3*9 = 442,368 MACs, and the
    # stage-2 shortcut (1x1, 16*16*32*16 = 131,072) comes after that block's second conv.
    assert [p.macs_a for p in al.pairs[:3]] == [442_368, 2_359_296, 2_359_296]
    assert [p.macs_a for p in al.pairs[7:10]] == [1_179_648, 2_359_296, 131_072]
    assert (al.pairs[0].a[0].name, al.pairs[0].b[0].name) == ("node_Conv_306", "Conv__95")
    # All 3x3 convs pad 1 on every side in both files: no attribute differs.
    assert all(p.differences == () for p in al.pairs[:21])
    assert "weight 10x64 vs 64x10 (transposed)" in al.pairs[21].differences


def test_resnet_findings_layout_transpose_and_inputs(resnet: Comparison) -> None:
    assert resnet.inputs_differ
    assert (
        "the models' inputs differ: A input[1,3,32,32] float32, B input[1,32,32,3] float32"
        in resnet.findings
    )
    assert "B has 1 Transpose at the input (perm [0,3,1,2]: NHWC layout), A none" in (
        resnet.findings
    )
    only = {(o.model, o.op_type): o for o in resnet.only_in}
    assert only[("B", "Transpose")].role == "layout"
    assert only[("B", "Transpose")].nodes == ("resnet20_1/bn1_1/batchnorm/mul_1__19",)


def test_mlp_finding_gemm_vs_matmul_add(mlp: Comparison) -> None:
    assert not mlp.inputs_differ
    assert (
        "A uses Gemm (weights [out, in], transB=1) for 3 dense layers, "
        "B MatMul+Add (weights [in, out])" in mlp.findings
    )
    (al,) = mlp.alignments
    assert [p.b[0].op_label for p in al.pairs] == ["MatMul+Add"] * 3
    # The 3 bias Adds are explained by the Gemm finding, not listed again as "only in B".
    assert not any(f.startswith("op types only in B") for f in mlp.findings)


def test_encoder_fused_qkv_and_split_layernorm(encoder: Comparison) -> None:
    (al,) = encoder.alignments
    merges = [p for p in al.pairs if p.kind == "merge"]
    assert len(merges) == 1
    (fused,) = merges[0].a
    # One MatMul 128*256*768 = 25,165,824 against three of 128*256*256 = 8,388,608.
    assert (fused.name, fused.macs) == ("node_MatMul_3", 25_165_824)
    assert [n.macs for n in merges[0].b] == [8_388_608] * 3
    assert (al.count("match"), al.count("only_a"), al.count("only_b")) == (5, 0, 0)
    text = "\n".join(encoder.findings)
    assert "A does in one MatMul (node_MatMul_3, 25,165,824 MACs, weight 256x768)" in text
    assert "B splits LayerNormalization into primitive ops (" in text
    assert "A has 2 LayerNormalization nodes" in text


def test_three_models_align_each_with_the_first() -> None:
    c = compare(
        [model("mlp_torch_dynamo"), model("mlp_torch_script"), model("mlp_keras")],
        labels=["dynamo", "script", "keras"],
    )
    assert [(al.baseline, al.candidate) for al in c.alignments] == [
        ("dynamo", "script"),
        ("dynamo", "keras"),
    ]
    # TorchScript writes only alpha, beta, transB; with schema defaults filled in, the Gemms match.
    assert all(p.differences == () for p in c.alignments[0].pairs)
    assert "dynamo uses Gemm (weights [out, in], transB=1) for 3 dense layers, keras " in (
        " ".join(c.findings)
    )
    d = c.to_dict()
    assert [m["label"] for m in d["models"]] == ["dynamo", "script", "keras"]
    assert len(d["alignment"]) == 6


def test_builtin_model_source() -> None:
    c = compare(["mlp", model("mlp_keras")])
    assert c.models[0].path == "mlp"
    # The built-in MLP is 784-128-32-10 too: 104,768 MACs.
    assert next(r for r in c.totals if r.key == "macs").values == (104_768, 104_768)


def test_dims_apply_to_every_model() -> None:
    c = compare([model("resnet20_torch_dynamo"), model("resnet20_keras")], dims={"batch": 4})
    # 4 x 40,813,184
    assert next(r for r in c.totals if r.key == "macs").values == (163_252_736, 163_252_736)


# --- small pairs in ONNX text ------------------------------------------------------------------


def test_padding_difference_is_a_finding(tmp_path: Path) -> None:
    # Both pad to a 4x4 output at stride 2: (8 + 2 - 3) // 2 + 1 = 4 and (8 + 1 - 3) // 2 + 1 = 4.
    a = save(tmp_path, "a", conv_model("[1,1,1,1]", "[2,2]", out_hw=4))
    b = save(tmp_path, "b", conv_model("[0,0,1,1]", "[2,2]", out_hw=4))
    c = compare([a, b])
    assert "A pads 1 stride-2 Conv [1,1,1,1], B [0,0,1,1]" in c.findings
    (pair,) = c.alignments[0].pairs
    assert pair.differences == ("pads [1,1,1,1] vs [0,0,1,1]",)
    # 4*4 outputs x 4 channels x 3*3*3 = 1,728 MACs each
    assert (pair.macs_a, pair.macs_b) == (1_728, 1_728)


def test_batchnorm_kept_against_folded(tmp_path: Path) -> None:
    a = save(tmp_path, "kept", BN_KEPT)
    b = save(tmp_path, "folded", conv_model("[1,1,1,1]"))
    c = compare([a, b])
    assert "A keeps 1 BatchNormalization node (not folded into the convs); B has none" in (
        c.findings
    )
    only = [o for o in c.only_in if o.op_type == "BatchNormalization"]
    assert [(o.model, o.count, o.other_count, o.role) for o in only] == [
        ("A", 1, 0, "unfused BatchNorm")
    ]
    # The convs still align: 8*8 outputs x 4 channels x 27 = 6,912 MACs each.
    (pair,) = c.alignments[0].pairs
    assert (pair.kind, pair.macs_a, pair.macs_b) == ("match", 6_912, 6_912)


def test_load_failure_names_the_model(tmp_path: Path) -> None:
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"not an onnx file")
    with pytest.raises(ModelLoadError, match=r"^model B \(second, .*broken\.onnx\): "):
        compare([model("mlp_keras"), str(bad)])
    with pytest.raises(ModelLoadError, match=r"^model A \(first, .*missing\.onnx\): "):
        compare([str(tmp_path / "missing.onnx"), model("mlp_keras")])


def test_usage_errors() -> None:
    with pytest.raises(UsageError, match="at least two models"):
        compare([model("mlp_keras")])
    with pytest.raises(UsageError, match="labels"):
        compare([model("mlp_keras"), model("mlp_keras")], labels=["x", "x"])
    with pytest.raises(ShapeError, match="no model has"):
        compare([model("mlp_keras"), model("mlp_torch_dynamo")], input_shapes={"x": (1, 784)})


def test_worse_than_lists_each_metric_over_the_threshold(tmp_path: Path) -> None:
    small = save(tmp_path, "small", conv_model("[1,1,1,1]", c_out=4))
    big = save(tmp_path, "big", conv_model("[1,1,1,1]", c_out=8))
    c = compare([small, big])
    # MACs 8*8*4*27 = 6,912 -> 8*8*8*27 = 13,824 (+100%); FLOPs 2*MACs + one bias add per
    # output: 14,080 -> 28,160 (+100%); params 4*27+4 = 112 -> 224 (+100%); peak activation:
    # input 3*64*4 = 768 bytes + output 4*64*4 = 1,024 -> 768 + 2,048: 1,792 -> 2,816 (+57.14%).
    assert c.worse_than(60) == (
        "B MACs 13,824 vs A 6,912: +100.00%, worse by more than 60%",
        "B FLOPs 28,160 vs A 14,080: +100.00%, worse by more than 60%",
        "B params 224 vs A 112: +100.00%, worse by more than 60%",
    )
    assert len(c.worse_than(50)) == 4
    assert c.worse_than(100) == ()
    # Latency counts when benchmarked: a median of 2 ms against 1 ms is +100%.
    timed = dataclasses.replace(
        c, totals=(*c.totals, MetricRow("latency_ms", "latency (median)", "ms", (1.0, 2.0)))
    )
    assert timed.worse_than(99)[-1] == (
        "B latency (median) 2.000 ms vs A 1.000 ms: +100.00%, worse by more than 99%"
    )


# --- the command line ----------------------------------------------------------------------------


def test_cli_table_and_markdown(tmp_path: Path) -> None:
    r = runner.invoke(app, ["compare", model("resnet20_torch_dynamo"), model("resnet20_keras")])
    assert r.exit_code == 0, r.output
    assert "40,813,184" in r.stdout
    assert "Findings" in r.stdout
    out = tmp_path / "c.md"
    r = runner.invoke(
        app,
        [
            "compare",
            model("mlp_torch_dynamo"),
            model("mlp_keras"),
            "-f",
            "markdown",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0
    text = out.read_text()
    assert text.startswith("# Comparing 2 models; baseline A")
    assert "## Findings" in text


def test_cli_json_contract() -> None:
    r = runner.invoke(
        app,
        ["compare", model("resnet20_torch_dynamo"), model("resnet20_keras"), "--format", "json"],
    )
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    assert d["schema"] == "onnxcost.compare/1"
    assert d["inputs_differ"] is True
    assert [m["label"] for m in d["models"]] == ["A", "B"]
    assert d["models"][1]["inputs"] == [
        {"name": "input", "dtype": "float32", "shape": [1, 32, 32, 3]}
    ]
    # 52 and 54 nodes (models/README.md)
    assert [m["node_count"] for m in d["models"]] == [52, 54]
    macs = next(t for t in d["totals_diff"] if t["metric"] == "macs")
    assert macs["values"] == [40_813_184, 40_813_184]
    assert macs["diff_percent"] == [None, 0.0]
    assert len(d["alignment"]) == 22
    first = d["alignment"][0]
    assert (first["kind"], first["a"][0]["name"], first["b"][0]["name"]) == (
        "match",
        "node_Conv_306",
        "Conv__95",
    )
    assert first["a"][0]["attributes"]["pads"] == [1, 1, 1, 1]
    assert {"model": "B", "op_type": "Transpose"}.items() <= next(
        o for o in d["only_in"] if o["op_type"] == "Transpose"
    ).items()
    assert isinstance(d["findings"], list)
    assert {"totals_diff", "by_op_type", "alignment", "only_in", "findings"} <= d.keys()


def test_cli_fail_if_worse_exit_codes(tmp_path: Path) -> None:
    small = save(tmp_path, "small", conv_model("[1,1,1,1]", c_out=4))
    big = save(tmp_path, "big", conv_model("[1,1,1,1]", c_out=8))
    r = runner.invoke(app, ["compare", small, big, "--fail-if-worse", "60"])
    assert r.exit_code == 1
    lines = [x for x in r.stderr.splitlines() if x.startswith("onnxcost: worse: ")]
    assert [x.split(":")[2].split()[1] for x in lines] == ["MACs", "FLOPs", "params"]
    assert "Totals" in r.stdout  # the report still comes first
    # The smaller model as the candidate is no worse.
    assert runner.invoke(app, ["compare", big, small, "--fail-if-worse", "0"]).exit_code == 0
    # Identical models are never worse, even at 0%.
    assert runner.invoke(app, ["compare", small, small, "--fail-if-worse", "0"]).exit_code == 0


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["compare", "MODEL"], 2, "at least two models"),
        (["compare", "MODEL", "MODEL", "--provider", "cpu"], 2, "only apply with --bench"),
        (["compare", "MODEL", "MODEL", "--fail-if-worse", "-1"], 2, "0 or more"),
        (["compare", "MODEL", "MODEL", "-l", "only-one"], 2, "labels"),
        (["compare", "MODEL", "BROKEN"], 1, "model B (second, "),
        (["compare", "NOPE", "MODEL"], 1, "model A (first, "),
    ],
)
def test_cli_errors(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x00garbage")
    subst = {"MODEL": model("mlp_keras"), "BROKEN": str(broken), "NOPE": str(tmp_path / "no.onnx")}
    r = runner.invoke(app, [subst.get(a, a) for a in args])
    assert r.exit_code == code
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_rejects_csv() -> None:
    r = runner.invoke(app, ["compare", model("mlp_keras"), model("mlp_keras"), "-f", "csv"])
    assert r.exit_code == 2


@pytest.mark.ort
def test_bench_adds_latency_and_kernel_times() -> None:
    c = compare(
        [model("mlp_torch_dynamo"), model("mlp_keras")],
        bench=BenchSettings(runs=5, warmup=1, min_seconds=0.0),
    )
    keys = [r.key for r in c.totals]
    assert keys[-2:] == ["latency_ms", "throughput_per_s"]
    latency = c.totals[-2].values
    assert all(v is not None and v > 0 for v in latency)
    assert c.time_by_op_type  # profiled: kernel op types with a mean time per model
    assert any(f.startswith("median latency on CPUExecutionProvider: A ") for f in c.findings)
    d = c.to_dict()
    assert d["models"][0]["bench"]["provider"] == "CPUExecutionProvider"
    assert "bench_by_op_type" in d


@pytest.mark.ort
def test_cli_bench_flags() -> None:
    r = runner.invoke(
        app,
        [
            "compare",
            model("mlp_torch_dynamo"),
            model("mlp_keras"),
            "--bench",
            "--runs",
            "3",
            "--warmup",
            "1",
            "-f",
            "json",
        ],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert [t["metric"] for t in d["totals_diff"]][-2:] == ["latency_ms", "throughput_per_s"]
