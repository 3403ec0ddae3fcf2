"""Peak activation memory: where it happens and what is live there, in the topological order
and (``ort_peak=True``) in onnxruntime's own execution order."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnxcost_testing import parse
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli import app
from onnxcost.prepare import prepare

# x [1,3,8,8] fp32 = 768 B; Conv (4 filters 3x3, pad 1) -> c [1,4,8,8] = 1,024 B; BatchNorm
# -> b 1,024 B; Relu -> r 1,024 B; MaxPool 2x2 stride 2 -> y [1,4,4,4] = 256 B.
CONV_BN_RELU = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] x) => (float[1,4,4,4] y)
  <float[4,3,3,3] w = {0.1}, float[4] s = {1.0, 1.0, 1.0, 1.0}, float[4] o = {0.0, 0.0, 0.0, 0.0},
   float[4] m = {0.0, 0.0, 0.0, 0.0}, float[4] v = {1.0, 1.0, 1.0, 1.0}> {
  c = Conv <pads = [1, 1, 1, 1]> (x, w)
  b = BatchNormalization (c, s, o, m, v)
  r = Relu (b)
  y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
}"""


def _model() -> onnx.ModelProto:
    """The model, its weight filled to its shape (onnxruntime runs it)."""
    model = parse(CONV_BN_RELU)
    w = onnx.numpy_helper.from_array(np.full((4, 3, 3, 3), 0.1, dtype=np.float32), "w")
    model.graph.initializer[0].CopyFrom(w)
    return model


def test_peak_says_where_and_what_is_live() -> None:
    # Live per step: Conv x + c = 1,792; BatchNorm c + b = 2,048; Relu b + r = 2,048;
    # MaxPool r + y = 1,280. The peak, 2,048, is first reached at the BatchNorm (step 1).
    a = onnxcost.analyze(_model())
    peak = a.peak_activation
    assert (peak.bytes, peak.node_index, peak.node, peak.live_count) == (
        2_048,
        1,
        "BatchNormalization_1",
        2,
    )
    assert [(t.tensor, t.producer, t.bytes) for t in peak.live] == [
        ("b", "BatchNormalization_1", 1_024),
        ("c", "Conv_0", 1_024),
    ]
    d = a.to_dict()
    assert d["peak_activation"]["live"][0] == {
        "tensor": "b",
        "producer": "BatchNormalization_1",
        "bytes": 1_024,
    }
    # not asked for: present, and null
    assert d["totals"]["peak_activation_bytes_ort"] is None
    assert d["peak_activation_ort"] is None


def test_graph_inputs_are_live_from_the_start() -> None:
    # x [1024] fp32 = 4,096 B is read by the last node only: live at every step
    a = onnxcost.analyze(
        parse("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[1024] x, float[16] z) => (float[1024] y) {
  t = Neg (z)
  u = Relu (t)
  y = Add (x, u)
}""")
    )
    # at Add: x 4,096 + u 64 + y 4,096 = 8,256
    assert a.totals.peak_activation_bytes == 8_256
    assert [(t.tensor, t.producer) for t in a.peak_activation.live] == [
        ("x", "(graph input)"),
        ("y", "Add_2"),
        ("u", "Relu_1"),
    ]


@pytest.mark.ort
def test_onnxruntime_order_after_its_fusions() -> None:
    # onnxruntime folds the BatchNorm into the Conv and fuses the Relu (FusedConv writing r):
    # FusedConv x 768 + r 1,024 = 1,792; MaxPool r + y 256 = 1,280 -> 1,792 (the topological
    # order of the unfused graph: 2,048)
    a = onnxcost.analyze(_model(), ort_peak=True)
    assert (a.totals.peak_activation_bytes, a.totals.peak_activation_bytes_ort) == (2_048, 1_792)
    assert a.peak_activation_ort is not None
    assert [(t.tensor, t.bytes) for t in a.peak_activation_ort.live] == [("r", 1_024), ("x", 768)]


@pytest.mark.ort
def test_ort_peak_of_a_model_prepared_without_weights_says_how_to_keep_them() -> None:
    # resnet18 built without weights has initializers that point at no data: onnxruntime
    # cannot be given it, and the error says which prepare() keeps them.
    prepared = prepare("resnet18")
    with pytest.raises(onnxcost.OnnxcostError, match=r"resnet18 .*weights=True"):
        onnxcost.analyze(prepared, ort_peak=True)
    assert onnxcost.analyze(prepare("resnet18", weights=True), ort_peak=True).totals


@pytest.mark.ort
def test_cli_ort_peak(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    result = CliRunner().invoke(app, ["analyze", str(path), "--ort-peak", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["totals"]["peak_activation_bytes_ort"] == 1_792
    assert data["peak_activation_ort"]["bytes"] == 1_792
