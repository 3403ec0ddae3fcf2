"""Training cost (analysis/training.py): requires-grad propagation, totals, the step's memory
worked by hand, the JSON contract, the CLI flags."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnxcost_testing import analyze_text, parse
from typer.testing import CliRunner

import onnxcost
from onnxcost.analysis.records import TrainingTotals
from onnxcost.cli.app import app
from onnxcost.errors import UsageError

# x [2,3] -> MatMul W1 [3,4] -> Add b1 [4] -> Relu -> MatMul W2 [4,2] -> y [2,2]
# params: 12 + 4 + 8 = 24, all float32.
MLP = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,2] y)
  <float[3,4] w1 = {1.0}, float[4] b1 = {0.0, 0.0, 0.0, 0.0}, float[4,2] w2 = {1.0}> {
  h = MatMul (x, w1)
  a = Add (h, b1)
  r = Relu (a)
  y = MatMul (r, w2)
}"""


def training(a: onnxcost.Analysis) -> TrainingTotals:
    assert a.totals.training is not None
    return a.totals.training


def by_name(a: onnxcost.Analysis) -> dict[str, tuple[int | None, int | None]]:
    return {n.outputs[0]: (n.backward_macs, n.backward_flops) for n in a.nodes}


def test_mlp_backward_per_node_and_totals() -> None:
    a = analyze_text(MLP, training=True)
    # h = x W1: x needs no gradient (a graph input), so dW1 only: 2 x 4 x 3 = 24 MACs.
    # a = h + b1: db1 = g summed over 2 rows: 8 - 4 = 4 adds. r: 8 compares.
    # y = r W2: r needs a gradient (W1 is upstream) and W2 is trained: 2 x 16 = 32 MACs.
    assert by_name(a) == {"h": (24, 48), "a": (0, 4), "r": (0, 8), "y": (32, 64)}
    t = training(a)
    # forward: MACs 24 + 16 = 40, FLOPs 80 + 8 (Add) + 8 (Relu) = 96
    # backward: MACs 56, FLOPs 112 + 4 + 8 = 124; training = 96 + 124 = 220
    assert (t.backward_macs, t.backward_flops, t.training_flops) == (56, 124, 220)
    assert t.trainable_params == 24


def test_torch_convention_counts_the_contractions_only() -> None:
    # torch's FlopCounterMode: 2 x MACs of mm/bmm/conv. Forward 2 x 40 = 80, backward
    # 2 x 56 = 112 (mm for dW1; mm for dr and mm for dW2): 192.
    t = training(analyze_text(MLP, training=True, convention="torch"))
    assert (t.backward_flops, t.training_flops) == (112, 192)


def test_grad_inputs_gives_the_first_layer_its_input_gradient() -> None:
    a = analyze_text(MLP, training=True, grad_inputs=True)
    # dx = g W1^T: 24 MACs more on the first MatMul.
    assert by_name(a)["h"] == (48, 96)
    assert training(a).backward_macs == 80


@pytest.mark.parametrize(
    ("optimizer", "mixed", "weights", "grads", "state"),
    [
        # 24 fp32 params: weights 96 B, one fp32 gradient each 96 B; Adam(W) two fp32 moments
        # 8 x 24 = 192, SGD with momentum 4 x 24 = 96, SGD 0.
        ("adamw", None, 96, 96, 192),
        ("adam", None, 96, 96, 192),
        ("sgd-momentum", None, 96, 96, 96),
        ("sgd", None, 96, 96, 0),
        # Mixed precision: half-precision weights 2 x 24 = 48 and gradients 48; Adam's state
        # (4 + 4) plus the fp32 master copy (4) per param: 12 x 24 = 288 (ZeRO's 2 + 2 + 12).
        ("adamw", "fp16", 48, 48, 288),
        ("sgd", "bf16", 48, 48, 96),
    ],
)
def test_step_memory_by_hand(
    optimizer: str, mixed: str | None, weights: int, grads: int, state: int
) -> None:
    m = training(
        analyze_text(MLP, training=True, optimizer=optimizer, mixed_precision=mixed)
    ).training_memory
    assert (m.weights_bytes, m.gradient_bytes, m.optimizer_bytes) == (weights, grads, state)


def test_saved_activations_and_peak_by_hand() -> None:
    m = training(analyze_text(MLP, training=True)).training_memory
    # Kept for backward: x by the first MatMul (for dW1; 2 x 3 x 4 = 24 B), r by Relu (its
    # output) and by the second MatMul (for dW2): once, 2 x 4 x 4 = 32 B. W2, which the second
    # MatMul keeps for dr, is a weight, not an activation. Saved: 56 B.
    assert m.saved_activation_bytes == 56
    # Forward liveness with x and r kept to the end: step 0 x 24 + h 32 = 56; step 1 x + h +
    # a = 88; step 2 x + a + r = 88; step 3 x + r + y 16 = 72: 88. Backward: the kept 56 plus
    # the most gradient bytes in flight at one node, Add's and Relu's 32 + 32 = 64: 120.
    # Peak = weights 96 + gradients 96 + Adam 192 + max(88, 120) = 504.
    assert m.peak_bytes == 504
    half = training(analyze_text(MLP, training=True, mixed_precision="fp16")).training_memory
    # fp16 activations: 12 + 16 = 28 B kept.
    assert half.saved_activation_bytes == 28


def test_frozen_base_with_a_lora_adapter() -> None:
    # y = x W + (x A) B with W frozen: x W needs no backward at all; x A needs dA only
    # ([2,4] @ [4,2]: numel(Y) 4 x K 4 = 16 MACs); (x A) B needs dB and the gradient of x A:
    # 2 x ([2,2] @ [2,3]: numel(Y) 6 x K 2 = 12) = 24; the Add passes g on for free.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x) => (float[2,3] y)
  <float[4,3] base_weight = {1.0}, float[4,2] lora_A = {1.0}, float[2,3] lora_B = {1.0}> {
  base = MatMul (x, base_weight)
  xa = MatMul (x, lora_A)
  xab = MatMul (xa, lora_B)
  y = Add (base, xab)
}"""
    a = analyze_text(text, training=True, frozen=r"^base_")
    assert by_name(a) == {"base": (0, 0), "xa": (16, 32), "xab": (24, 48), "y": (0, 0)}
    t = training(a)
    # trainable: lora_A 8 + lora_B 6 = 14; frozen base 12 still stored: weights 26 x 4 B.
    assert t.trainable_params == 14
    assert t.training_memory.weights_bytes == 104
    assert t.training_memory.gradient_bytes == 56


def test_integer_initializers_are_not_trainable() -> None:
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[2,3] ids) => (float[2,3,4] y) <float[10,4] table = {1.0}, int64[2,3] offset = {1}> {
  shifted = Add (ids, offset)
  y = Gather (table, shifted)
}"""
    t = training(analyze_text(text, training=True))
    assert t.trainable_params == 40  # the table only


def test_everything_frozen_warns_and_costs_no_backward() -> None:
    a = analyze_text(MLP, training=True, frozen=".")
    t = training(a)
    assert (t.backward_macs, t.backward_flops, t.trainable_params) == (0, 0, 0)
    assert any("no trainable parameter" in w for w in a.warnings)


def test_no_training_keys_without_training() -> None:
    a = analyze_text(MLP)
    data = a.to_dict()
    assert "backward_flops" not in data["totals"]
    assert "training_memory" not in data["totals"]
    assert all("backward_macs" not in n for n in data["nodes"])
    assert all(n.backward_macs is None for n in a.nodes)


def test_json_contract_keys() -> None:
    data = analyze_text(MLP, training=True).to_dict()
    totals = data["totals"]
    for key in ("backward_macs", "backward_flops", "training_flops", "trainable_params"):
        assert isinstance(totals[key], int)
    assert list(totals["training_memory"]) == [
        "weights_bytes",
        "gradient_bytes",
        "optimizer_bytes",
        "saved_activation_bytes",
        "peak_bytes",
    ]
    assert all({"backward_macs", "backward_flops"} <= n.keys() for n in data["nodes"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"training": True, "optimizer": "lamb"}, "optimizer must be one of"),
        ({"training": True, "mixed_precision": "fp8"}, "mixed precision must be one of"),
        ({"training": True, "frozen": "("}, "not a valid regular expression"),
        ({"optimizer": "sgd"}, "needs training=True"),
    ],
)
def test_bad_training_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        analyze_text(MLP, **kwargs)  # type: ignore[arg-type]


runner = CliRunner()


@pytest.fixture
def mlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp.onnx"
    onnx.save(parse(MLP), path)
    return path


def test_cli_training_json_and_table(mlp_file: Path) -> None:
    r = runner.invoke(
        app, ["analyze", str(mlp_file), "--training", "--optimizer", "sgd", "-f", "json"]
    )
    assert r.exit_code == 0, r.output
    totals = json.loads(r.stdout)["totals"]
    assert (totals["training_flops"], totals["training_memory"]["optimizer_bytes"]) == (220, 0)
    r = runner.invoke(app, ["analyze", str(mlp_file), "--training"], env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    assert "Training" in r.stdout
    assert "training FLOPs (forward + backward)" in r.stdout
    assert "bwd FLOPs" in r.stdout
    r = runner.invoke(app, ["analyze", str(mlp_file), "--training", "-f", "csv"])
    assert r.stdout.splitlines()[0].endswith(",backward_macs,backward_flops")


@pytest.mark.parametrize(
    "args",
    [
        ["--training", "--frozen", "("],
        ["--training", "--optimizer", "lamb"],
        ["--optimizer", "sgd"],
    ],
)
def test_cli_bad_training_flags(mlp_file: Path, args: list[str]) -> None:
    r = runner.invoke(app, ["analyze", str(mlp_file), *args])
    assert r.exit_code == 2
    assert "Traceback" not in r.output
    original = parse(MLP).SerializeToString()
    assert mlp_file.read_bytes() == original


def test_compare_shows_training_rows_only_when_both_have_them() -> None:
    from onnxcost.compare import compare
    from onnxcost.prepare import prepare

    model = parse(MLP)
    trained = [onnxcost.analyze(prepare(model), training=True) for _ in range(2)]
    keys = [r.key for r in compare(trained).totals]
    assert keys[keys.index("peak_activation_bytes") + 1 :][:5] == [
        "backward_flops",
        "training_flops",
        "trainable_params",
        "saved_activation_bytes",
        "training_peak_bytes",
    ]
    rows = {r.key: r.values for r in compare(trained).totals}
    # The MLP's figures worked by hand above: 124, 220, 24 params, 56 B kept, 504 B peak.
    assert rows["backward_flops"] == (124, 124)
    assert rows["training_flops"] == (220, 220)
    assert rows["training_peak_bytes"] == (504, 504)
    plain = [trained[0], onnxcost.analyze(prepare(model))]
    assert "training_flops" not in [r.key for r in compare(plain).totals]


def test_markdown_and_html_carry_the_training_section(mlp_file: Path, tmp_path: Path) -> None:
    r = runner.invoke(app, ["analyze", str(mlp_file), "--training", "-f", "markdown"])
    assert "## Training" in r.stdout
    assert "| training FLOPs (forward + backward) | 220 (220) |" in r.stdout
    page = tmp_path / "m.html"
    r = runner.invoke(app, ["analyze", str(mlp_file), "--training", "-f", "html", "-o", str(page)])
    assert r.exit_code == 0, r.output
    html = page.read_text(encoding="utf-8")
    assert '<table id="training-table">' in html
    plain = tmp_path / "p.html"
    runner.invoke(app, ["analyze", str(mlp_file), "-f", "html", "-o", str(plain)])
    assert "training-table" not in plain.read_text(encoding="utf-8")


def test_cli_compare_training(mlp_file: Path) -> None:
    r = runner.invoke(app, ["compare", str(mlp_file), str(mlp_file), "--training", "-f", "json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    rows = {row["metric"]: row["values"] for row in data["totals_diff"]}
    assert rows["training_flops"] == [220, 220]
    assert data["models"][0]["totals"]["training_memory"]["peak_bytes"] == 504
    r = runner.invoke(app, ["compare", str(mlp_file), str(mlp_file), "-f", "json"])
    assert "training_flops" not in {row["metric"] for row in json.loads(r.stdout)["totals_diff"]}


def test_an_op_with_no_float_output_sends_no_gradient_and_no_warning() -> None:
    # QuantizeLinear's output is uint8: no gradient goes back through it, nothing to warn of.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (uint8[2,3] q) <float[2,3] w = {1.0}, float s = {0.5}, uint8 z = {0}> {
  h = Mul (x, w)
  q = QuantizeLinear (h, s, z)
}"""
    a = analyze_text(text, training=True)
    assert not [w for w in a.warnings if w.startswith("training")]
    # Mul still costs its weight gradient: g x, 6 multiplies.
    assert by_name(a) == {"h": (0, 6), "q": (0, 0)}


def test_simplified_layer_norm_backward() -> None:
    # RMS norm over [2,4] (rows 2, D 4, n 8), scale trained, X too: x^ n = 8; dScale 2n - D =
    # 12; dX 6n = 48: 68.
    text = """
<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2,4] x) => (float[2,4] y) <float[4] s = {1.0, 1.0, 1.0, 1.0}> {
  y = com.microsoft.SimplifiedLayerNormalization <axis = -1> (x, s)
}"""
    a = analyze_text(text, training=True, grad_inputs=True)
    assert by_name(a) == {"y": (0, 68)}
