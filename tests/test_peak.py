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
from onnxcost.cli.app import app
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


def _constant_of_shape(side: int, matmuls: int = 0) -> onnx.ModelProto:
    """c0 = ConstantOfShape([side, side]) of 1.0, then c<k+1> = MatMul(c<k>, c0) ``matmuls``
    times; y = x + the last: every c is computed from constants only, so onnxruntime folds it
    while it builds the session."""
    shape = onnx.helper.make_tensor("s", onnx.TensorProto.INT64, [2], [side, side])
    one = onnx.helper.make_tensor("one", onnx.TensorProto.FLOAT, [1], [1.0])
    nodes = [onnx.helper.make_node("ConstantOfShape", ["s"], ["c0"], value=one)]
    nodes += [
        onnx.helper.make_node("MatMul", [f"c{k}", "c0"], [f"c{k + 1}"]) for k in range(matmuls)
    ]
    nodes.append(onnx.helper.make_node("Add", ["x", f"c{matmuls}"], ["y"]))
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, side])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [side, side])],
        [shape],
    )
    return onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8
    )


_MEASURE = """
import json, sys, time
import onnxcost
start = time.perf_counter()
a = onnxcost.analyze(sys.argv[1], ort_peak=True)
seconds = time.perf_counter() - start
with open("/proc/self/status") as status:  # VmHWM: this process's peak RSS (ru_maxrss
    hwm = [line for line in status if line.startswith("VmHWM:")]  # keeps the parent's)
print(json.dumps({
    "seconds": seconds,
    "ort": a.totals.peak_activation_bytes_ort,
    "warnings": list(a.warnings),
    "rss_kib": int(hwm[0].split()[1]),
}))
"""


@pytest.mark.ort
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="peak RSS read from /proc")
@pytest.mark.parametrize(
    ("side", "matmuls", "made", "node"),
    [
        # [16384, 16384] fp32 = 16384 * 16384 * 4 = 1 GiB from a 16-byte shape (took 2.1 GB)
        (16_384, 0, "1.00 GiB", "'ConstantOfShape_0' (ConstantOfShape) makes 1.00 GiB"),
        # [8192, 8192] fp32 = 256 MiB, 9 of them (c0 and 8 MatMuls) = 2.25 GiB (took minutes)
        (8_192, 8, "2.25 GiB", "'ConstantOfShape_0' (ConstantOfShape) makes 256.00 MiB"),
    ],
)
def test_ort_peak_is_left_out_where_onnxruntime_would_fold_gigabytes(
    tmp_path: Path, side: int, matmuls: int, made: str, node: str
) -> None:
    # Over the larger of 256 MiB and 4 x the 16 B of stored weights (the shape): refused
    # before onnxruntime sees the model. In a process of its own, so its peak memory is its own.
    path = tmp_path / "folds.onnx"
    onnx.save(_constant_of_shape(side, matmuls), path)
    assert path.stat().st_size < 400
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path)], capture_output=True, timeout=120, check=True
    )
    got = json.loads(proc.stdout)
    assert got["ort"] is None
    assert got["seconds"] < 10
    assert got["rss_kib"] < 300 * 1024  # the interpreter, onnx and numpy: ~60 MiB
    [warning] = [w for w in got["warnings"] if "--ort-peak" in w]
    assert warning.startswith("--ort-peak left out (peak_activation_bytes_ort is null): ")
    assert f"compute {made} of tensors from constants (node {node})" in warning
    assert "larger of 256.00 MiB and 4 times the model's 16 B of weights" in warning


@pytest.mark.ort
def test_folding_within_the_limit_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    # [64, 64] fp32 = 16 KiB folded; at the limit (16 KiB) it is measured, 1 byte under it not.
    # onnxruntime folds c0 into an initializer, so its order holds x [1, 64] = 256 B and
    # y [64, 64] = 16,384 B: 16,640 B.
    from onnxcost.bench import ort_order

    model = _constant_of_shape(64)
    monkeypatch.setattr(ort_order, "FOLD_MIN_BYTES", 16_384)
    assert onnxcost.analyze(model, ort_peak=True).totals.peak_activation_bytes_ort == 16_640
    monkeypatch.setattr(ort_order, "FOLD_MIN_BYTES", 16_383)
    a = onnxcost.analyze(model, ort_peak=True)
    assert a.totals.peak_activation_bytes_ort is None
    assert any(w.startswith("--ort-peak left out") for w in a.warnings)


@pytest.mark.ort
def test_session_creation_past_its_time_limit_is_stopped_and_the_analysis_completes() -> None:
    # 0.05 s is less than a Python process takes to import onnxruntime: the worker is killed.
    import time

    from onnxcost.bench import ort_order

    start = time.perf_counter()
    with pytest.raises(ort_order.OrtPeakLimitError, match=r"took longer than 0.05 s .* stopped"):
        ort_order.ort_peak_activation(_model(), timeout_s=0.05)
    assert time.perf_counter() - start < 10


@pytest.mark.ort
def test_cli_ort_peak_over_its_limits_warns_and_exits_0(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxcost.bench import ort_order

    monkeypatch.setattr(ort_order, "SESSION_TIMEOUT_S", 0.05)
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    result = CliRunner().invoke(app, ["analyze", str(path), "--ort-peak", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["totals"]["peak_activation_bytes_ort"] is None
    assert data["totals"]["peak_activation_bytes"] == 2_048
    assert any("onnxruntime took longer than 0.05 s" in w for w in data["warnings"])


@pytest.mark.ort
def test_an_error_in_the_session_process_is_raised_as_the_same_error() -> None:
    # An op onnxruntime has no kernel for: the worker's error comes back as an OnnxcostError.
    model = parse("""
<ir_version: 8, opset_import: ["" : 17, "nowhere" : 1]>
g (float[2] x) => (float[2] y) {
  y = nowhere.Mystery (x)
}""")
    with pytest.raises(onnxcost.OnnxcostError) as raised:
        onnxcost.analyze(model, ort_peak=True)
    assert type(raised.value).__name__ != "OrtPeakLimitError"
    assert "Mystery" in str(raised.value)
