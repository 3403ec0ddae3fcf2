"""The key contract of onnxcost.predict/1."""

from __future__ import annotations

import json

from onnxcost_testing import key_paths, parse

from onnxcost.predict.device import BUILTIN
from onnxcost.predict.result import SCHEMA
from onnxcost.predict.run import predict

MODEL = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 8] x, float[8, 3] w) => (float[4, 3] y) {
    m = MatMul (x, w)
    y = Relu (m)
}
"""


def test_predict_json_keys_in_order() -> None:
    data = predict(parse(MODEL), "A100").to_dict()
    assert data["schema"] == SCHEMA == "onnxcost.predict/1"
    assert key_paths(data) == [
        "schema",
        "model",
        "device",
        "device.name",
        "device.source",
        "device.roofline_bound",
        "device.provider",
        "device.threads",
        "device.dtype",
        "device.peak_flops_per_s",
        "device.bandwidth_bytes_per_s",
        "device.node_overhead_us",
        "device.run_overhead_us",
        "device.note",
        "batch",
        "latency_ms",
        "run_overhead_us",
        "throughput_per_s",
        "by_bound",
        "by_bound.compute",
        "by_bound.compute.nodes",
        "by_bound.compute.predicted_us",
        "by_bound.memory",
        "by_bound.memory.nodes",
        "by_bound.memory.predicted_us",
        "by_bound.overhead",
        "by_bound.overhead.nodes",
        "by_bound.overhead.predicted_us",
        "by_bound.free",
        "by_bound.free.nodes",
        "by_bound.free.predicted_us",
        "by_op_type",
        "by_op_type[].op_type",
        "by_op_type[].count",
        "by_op_type[].predicted_us",
        "by_op_type[].share",
        "nodes",
        "nodes[].name",
        "nodes[].op_type",
        "nodes[].op_class",
        "nodes[].bound",
        "nodes[].predicted_us",
        "nodes[].compute_us",
        "nodes[].memory_us",
        "nodes[].weights_us",
        "nodes[].overhead_us",
        "nodes[].flops",
        "nodes[].bytes",
        "nodes[].note",
        "warnings",
    ]
    json.dumps(data)  # plain JSON


def test_a_datasheet_prediction_warns_it_is_a_bound() -> None:
    p = predict(parse(MODEL), "L4")
    # MatMul [4, 8] x [8, 3]: 2 x 4 x 8 x 3 = 192 FLOPs at 60e12: 3.2e-6 us; bytes
    # (32 + 24 + 12) x 4 = 272 at 300e9: 9.0667e-4 us; no overhead on a datasheet device.
    assert abs(p.nodes[0].predicted_us - 272 / 300e9 * 1e6) < 1e-12
    assert p.nodes[0].bound == "memory"
    assert p.warnings[-1].startswith("L4: L4 datasheet figures")
    assert p.device is BUILTIN["L4"]
