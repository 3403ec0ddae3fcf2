"""The per-node time model on a hand-built device: max(compute, memory) + overhead, the bound,
what onnxruntime removes, and the latency of a whole model."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxcost_testing import parse

from onnxcost.analysis.records import NodeRecord
from onnxcost.api import analyze
from onnxcost.bench.roofline import Ceilings
from onnxcost.predict.device import Curve, Device
from onnxcost.predict.estimate import free_nodes, node_time, op_class
from onnxcost.predict.run import predict, predict_analysis, static_inputs

# peak 1e9 FLOP/s, bandwidth 1e8 bytes/s, 2 us per node, 5 us per run.
DEVICE = Device(
    name="hand",
    ceilings=Ceilings(1e9, 1e8, "CPUExecutionProvider", "hand", "float32"),
    node_overhead_us=2.0,
    run_overhead_us=5.0,
    threads=1,
    source="calibrated",
    curves={
        "matmul": Curve("flops", ((1e3, 0.5), (1e6, 0.25))),
        "elementwise": Curve("bytes", ((1e3, 0.5), (1.5e5, 0.75))),
    },
)
ROOFLINE = Device(
    name="roof",
    ceilings=Ceilings(1e9, 1e8, "CPUExecutionProvider", "roof", "float32"),
    node_overhead_us=2.0,
    run_overhead_us=0.0,
    threads=1,
    source="datasheet",
)


def _node(op: str, flops: int, read: int, written: int, shapes: tuple = ()) -> NodeRecord:  # type: ignore[type-arg]
    return NodeRecord(op, op, "", "ok", 0, flops, 0, read, written, shapes, (), ("a", "b"), ("y",))


def test_compute_bound_node() -> None:
    # MatMul [100, 50] x [50, 100]: 2 x 100 x 50 x 100 = 1,000,000 FLOPs; bytes
    # (5,000 + 5,000 + 10,000) x 4 = 80,000.
    # compute: 1e6 / (1e9 x eff 0.25 at 1e6) = 4e-3 s = 4,000 us.
    # memory: the elementwise curve at 80,000 bytes, log-interpolated between 1e3 (0.5) and
    # 1.5e5 (0.75): t = ln(80) / ln(150) = 4.382027 / 5.010635 = 0.874546, eff = 0.5 + 0.25 t
    # = 0.718637; 80,000 / (1e8 x 0.718637) = 1.113219e-3 s = 1,113.219 us.
    # time: max(4,000, 1,113.219) + 2 = 4,002 us, compute-bound.
    t = node_time(_node("MatMul", 1_000_000, 40_000, 40_000, ((100, 50), (50, 100))), DEVICE)
    assert t.op_class == "matmul"
    assert math.isclose(t.compute_us, 4000.0)
    assert math.isclose(t.memory_us, 1113.219, rel_tol=1e-6)
    assert math.isclose(t.predicted_us, 4002.0)
    assert t.bound == "compute"


def test_memory_bound_node() -> None:
    # Add of two [12,500] tensors: 12,500 FLOPs, 3 x 12,500 x 4 = 150,000 bytes.
    # memory: 150,000 / (1e8 x 0.75, the curve's point at 1.5e5) = 2e-3 s = 2,000 us.
    # compute: 0, the elementwise curve is measured against bytes (its times hold the
    # arithmetic); on a device without it, the peak: 12,500 / 1e9 = 12.5 us.
    # time: 2,000 + 2 = 2,002 us, memory-bound.
    t = node_time(_node("Add", 12_500, 100_000, 50_000), DEVICE)
    assert (t.op_class, t.bound) == ("elementwise", "memory")
    assert t.compute_us == 0.0
    assert math.isclose(node_time(_node("Add", 12_500, 100_000, 50_000), ROOFLINE).compute_us, 12.5)
    assert math.isclose(t.memory_us, 2000.0)
    assert math.isclose(t.predicted_us, 2002.0)


def test_overhead_bound_node_on_a_roofline_device() -> None:
    # Relu of 3 floats: 3 FLOPs, 24 bytes; no curves (every op at the ceilings):
    # compute 3 / 1e9 = 0.003 us, memory 24 / 1e8 = 0.24 us < the 2 us overhead.
    t = node_time(_node("Relu", 3, 12, 12), ROOFLINE)
    assert t.bound == "overhead"
    assert math.isclose(t.memory_us, 0.24)
    assert math.isclose(t.predicted_us, 2.24)


def test_cold_weights_are_read_at_the_weight_bandwidth() -> None:
    # MatMul [1, 1000] x [1000, 1000] with 1e6 weights (4e6 bytes) of 4,008,000 bytes in all,
    # on a roofline device with a weight bandwidth of 5e7 bytes/s: weights 4e6 / 5e7 = 0.08 s,
    # the other 8,000 bytes 8,000 / 1e8 = 80 us: 80,080 us of memory; compute 2e6 / 1e9 = 2,000.
    device = Device(
        "w", ROOFLINE.ceilings, 0.0, 0.0, 1, "calibrated", weight_bandwidth_bytes_per_s=5e7
    )
    node = NodeRecord(
        "mm", "MatMul", "", "ok", 1_000_000, 2_000_000, 1_000_000, 4_004_000, 4_000,
        ((1, 1000), (1000, 1000)), (), ("x", "w"), ("y",),
    )  # fmt: skip
    assert op_class(node) == "gemv"
    assert math.isclose(node_time(node, device, weights_cold=True).memory_us, 80_080.0)
    assert math.isclose(node_time(node, device, weights_cold=False).memory_us, 40_080.0)
    # A matrix-vector product's curve was measured streaming its weights: only cold weights
    # (beyond half the last-level cache) change it, not weights beyond one core's cache.
    streamed = node_time(node, device, weights_streamed=True)
    assert (streamed.memory_us, streamed.weights_us) == (40_080.0, 0.0)


def _weighted(
    op: str, flops: int, params: int, read: int, written: int, shapes: tuple
) -> NodeRecord:  # type: ignore[type-arg]
    return NodeRecord(op, op, "", "ok", flops // 2, flops, params, read, written, shapes, (), ("x", "w"), ("y",))  # fmt: skip


def test_a_matmuls_streamed_weights_add_to_its_time() -> None:
    # MatMul [100, 50] x [50, 100] with 5,000 weights (20,000 bytes), 80,000 bytes in all, on
    # DEVICE with a weight bandwidth of 5e7 bytes/s, its weights beyond one core's cache:
    # compute 1e6 / (1e9 x 0.25) = 4,000 us (as test_compute_bound_node);
    # weights 20,000 / 5e7 = 4e-4 s = 400 us, added: the kernel waits for them;
    # memory: the other 60,000 bytes on the elementwise curve: t = ln(60) / ln(150) =
    # 4.094345 / 5.010635 = 0.817132, eff = 0.5 + 0.25 t = 0.704283; 60,000 / (1e8 x
    # 0.704283) = 851.930 us.
    # time: max(4,000, 851.930) + 400 + 2 = 4,402 us (4,002 with the weights in the cache).
    device = Device(
        "w", DEVICE.ceilings, 2.0, 5.0, 1, "calibrated", curves=DEVICE.curves,
        weight_bandwidth_bytes_per_s=5e7,
    )  # fmt: skip
    node = _weighted("MatMul", 1_000_000, 5_000, 40_000, 40_000, ((100, 50), (50, 100)))
    t = node_time(node, device, weights_streamed=True)
    assert math.isclose(t.weights_us, 400.0)
    assert math.isclose(t.memory_us, 851.930, rel_tol=1e-6)
    assert math.isclose(t.predicted_us, 4402.0)
    assert t.bound == "compute"
    warm = node_time(node, device)
    assert (warm.weights_us, warm.predicted_us) == (0.0, 4002.0)


def test_a_convs_cold_weights_add_to_its_time() -> None:
    # Conv 3x3, 512 -> 512 channels on a 2x2 map (a ResNet's last stage at 64x64):
    # 512 x 512 x 9 = 2,359,296 weights, 9,437,184 bytes; FLOPs 2 x 2,359,296 x 4 =
    # 18,874,368; activations read 512 x 4 x 4 = 8,192 bytes and written 8,192.
    # On the roofline device (1e9 FLOP/s, 1e8 bytes/s, 2 us per node) with a weight bandwidth
    # of 5e7 bytes/s and the weights cold (beyond half the last-level cache):
    # compute 18,874,368 / 1e9 = 18,874.368 us; weights 9,437,184 / 5e7 = 188,743.68 us,
    # added (not max'ed against compute, as a MatMul's non-weight bytes are);
    # memory 16,384 / 1e8 = 163.84 us.
    # time: 18,874.368 + 188,743.68 + 2 = 207,620.048 us, memory-bound (weights).
    device = Device(
        "w", ROOFLINE.ceilings, 2.0, 0.0, 1, "calibrated", weight_bandwidth_bytes_per_s=5e7
    )
    node = _weighted(
        "Conv", 18_874_368, 2_359_296, 9_437_184 + 8_192, 8_192,
        ((1, 512, 2, 2), (512, 512, 3, 3)),
    )  # fmt: skip
    assert op_class(node) == "conv"
    t = node_time(node, device, weights_cold=True)
    assert math.isclose(t.compute_us, 18_874.368)
    assert math.isclose(t.weights_us, 188_743.68)
    assert math.isclose(t.memory_us, 163.84)
    assert math.isclose(t.predicted_us, 207_620.048)
    assert t.bound == "memory"


def _matmul_64x256(device: Device) -> float:
    # x [64, 256] x W [256, 256], W an initializer: 65,536 weights, 262,144 bytes.
    w = numpy_helper.from_array(np.zeros((256, 256), np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 256])],
        [w],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return predict_analysis(analyze(model), device).nodes[0].predicted_us


def test_weights_beyond_one_cores_cache_stream_into_each_matmul() -> None:
    # The MatMul above on the roofline device (1e9 FLOP/s, 1e8 bytes/s, 2 us per node),
    # weight bandwidth 5e7, last-level cache 64 MiB (the 262,144 weight bytes are far below
    # half of it):
    # compute 2 x 64 x 256 x 256 = 8,388,608 FLOPs / 1e9 = 8,388.608 us.
    # One core's cache 128 KiB (131,072 < 262,144 bytes of weights): weights 262,144 / 5e7 =
    # 5,242.88 us added; time 8,388.608 + 5,242.88 + 2 = 13,633.488 us.
    # One core's cache 1 MiB (they fit): 8,388.608 + 2 = 8,390.608 us.
    # Unknown (0, a file from before this figure): 8,390.608 us.
    def device(core: int) -> Device:
        return Device(
            "w", ROOFLINE.ceilings, 2.0, 0.0, 1, "calibrated", cache_bytes=64 << 20,
            weight_bandwidth_bytes_per_s=5e7, core_cache_bytes=core,
        )  # fmt: skip

    assert math.isclose(_matmul_64x256(device(128 << 10)), 13_633.488)
    assert math.isclose(_matmul_64x256(device(1 << 20)), 8_390.608)
    assert math.isclose(_matmul_64x256(device(0)), 8_390.608)


def _conv_bn_relu() -> onnx.ModelProto:
    """Conv -> BatchNormalization -> Relu -> Add of the input; an Unsqueeze of initializers."""
    inits = [
        numpy_helper.from_array(np.zeros(shape, np.float32), name)
        for name, shape in (("w", (8, 8, 3, 3)), ("s", (8,)), ("b", (8,)), ("m", (8,)), ("v", (8,)))
    ] + [numpy_helper.from_array(np.array([0], np.int64), "ax")]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["conv", "s", "b", "m", "v"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Unsqueeze", ["s", "ax"], ["s2"], name="unsqueeze"),
        helper.make_node("Add", ["r", "x"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_onnxruntime_fusions_cost_nothing() -> None:
    a = analyze(_conv_bn_relu())
    names = [n.op_type for n in a.nodes]
    free = {names[i]: why for i, why in free_nodes(a.nodes, ["x"]).items()}
    # BatchNormalization folds into the Conv; the Relu fuses into it; the Unsqueeze of two
    # initializers is computed at load. The residual Add reads the Relu, not the Conv: kept.
    assert free == {
        "BatchNormalization": "folded into conv",
        "Relu": "fused into conv",
        "Unsqueeze": "constant",
    }


SHAPE = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (int64[2] y) {
    y = Shape (x)
}
"""


def test_a_shape_folds_only_when_the_model_fixes_its_inputs() -> None:
    proto = parse(SHAPE)
    assert not static_inputs(proto)
    a = analyze(proto, dims={"N": 2})
    assert free_nodes(a.nodes, ["x"], static_shapes=False) == {}
    assert free_nodes(a.nodes, ["x"], static_shapes=True) == {0: "constant"}


TWO = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[100, 50] x) => (float[100, 100] z) <float[50, 100] w = {0.0}> {
    y = MatMul (x, w)
    z = Relu (y)
}
"""


def test_latency_is_the_run_overhead_plus_every_node() -> None:
    model = parse(TWO)
    model.graph.initializer[0].ClearField("float_data")
    model.graph.initializer[0].float_data.extend([0.0] * 5000)
    p = predict(model, DEVICE)
    # MatMul: 4,002 us (test_compute_bound_node: 1e6 FLOPs, 80,000 bytes).
    # Relu of [100, 100]: 10,000 FLOPs, 2 x 40,000 = 80,000 bytes: memory 1,113.219 us (the
    # elementwise curve at 80,000 bytes, as above), compute 10 us: 1,115.219 us.
    # Latency: (5 + 4,002 + 1,115.219) / 1,000 = 5.122219 ms; batch 100 (the first dim),
    # throughput 100 x 1,000 / 5.122219 = 19,522.8 per second.
    assert [(n.op_type, n.bound) for n in p.nodes] == [("MatMul", "compute"), ("Relu", "memory")]
    assert math.isclose(p.nodes[1].predicted_us, 1115.219, rel_tol=1e-6)
    assert math.isclose(p.latency_ms, 5.122219, rel_tol=1e-6)
    assert p.batch == 100
    assert math.isclose(p.throughput_per_s, 19522.8, rel_tol=1e-5)
    assert p.by_op_type[0].op_type == "MatMul"


def test_more_inputs_and_outputs_add_their_overheads() -> None:
    device = Device(
        "io", ROOFLINE.ceilings, 0.0, 5.0, 1, "calibrated",
        input_overhead_us=0.5, output_overhead_us=0.25,
    )  # fmt: skip
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1] a, float[1] b, float[1] c) => (float[1] x, float[1] y) {
        x = Identity (a)
        y = Identity (b)
    }
    """
    p = predict_analysis(analyze(parse(text)), device)
    # 5 + (3 - 1) x 0.5 + (2 - 1) x 0.25 = 6.25 us; the Identity nodes are eliminated.
    assert p.run_overhead_us == 6.25
    assert p.free_nodes == 2
    assert p.latency_ms == pytest.approx(0.00625)


@pytest.mark.parametrize(
    ("conv", "expected"),
    [
        ("Conv <group = 8, pads = [1, 1, 1, 1]> (x, wd)", "conv_depthwise"),
        ("Conv (x, w1)", "conv_1x1"),
        ("Conv <pads = [1, 1, 1, 1]> (x, w3)", "conv"),
        ("Conv <group = 2, pads = [1, 1, 1, 1]> (x, wg)", "conv_grouped"),
    ],
)
def test_conv_classes(conv: str, expected: str) -> None:
    text = f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 8, 8, 8] x, float[8, 1, 3, 3] wd, float[8, 8, 1, 1] w1, float[8, 8, 3, 3] w3,
       float[8, 4, 3, 3] wg) => (float[1, 8, 8, 8] y) {{
        y = {conv}
    }}
    """
    (node,) = analyze(parse(text)).nodes
    assert op_class(node) == expected


def test_a_reshape_takes_no_longer_for_more_bytes() -> None:
    # onnxruntime's Reshape aliases its input: its time is the view curve's smallest point's,
    # 256 bytes at 0.02 of 1e8 bytes/s = 128 us, for 256 bytes or 4 MB alike.
    device = Device(
        "v", ROOFLINE.ceilings, 0.0, 0.0, 1, "calibrated",
        curves={"view": Curve("bytes", ((256, 0.02), (65536, 5.12)))},
    )  # fmt: skip
    small = node_time(_node("Reshape", 0, 128, 128), device)
    large = node_time(_node("Reshape", 0, 2_000_000, 2_000_000), device)
    assert small.op_class == large.op_class == "view"
    assert math.isclose(small.memory_us, 128.0)
    assert math.isclose(large.memory_us, 128.0)


def test_a_class_overhead_replaces_the_devices() -> None:
    # The Relu of test_overhead_bound_node_on_a_roofline_device (0.24 us of memory) where
    # elementwise nodes cost 7 us each instead of the device's 2: 7.24 us.
    device = Device(
        "c", ROOFLINE.ceilings, 2.0, 0.0, 1, "datasheet",
        curves={"elementwise": Curve("bytes", (), overhead_us=7.0)},
    )  # fmt: skip
    t = node_time(_node("Relu", 3, 12, 12), device)
    assert math.isclose(t.predicted_us, 7.24)
