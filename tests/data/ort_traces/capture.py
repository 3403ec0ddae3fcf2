"""Capture the real onnxruntime traces the offline profile tests read.

Run from the repository root: ``python tests/data/ort_traces/capture.py [CASE ...]`` (the
tests quote durations from these files: recapture only the cases you add). It builds small
models with onnx.helper, profiles them through onnxcost's own session code (so node names
are what ``run_bench`` would see), and writes, next to this file:

- ``<model>.onnx``: the source model;
- ``<case>.trace.json``: onnxruntime's profile (1 first run + 2 warm-up + 3 measured runs);
- ``<case>.graph.json``: the optimized graph onnxruntime saved (name, op, domain, tensors).

Cases: cbr_all (ORT_ENABLE_ALL: NCHWc kernels ``r1_nchwc``, ``y_nchwc``, ``ReorderOutput``),
cbr_extended (``FusedConv`` named after the source conv), cbr_basic_noarena (Conv+BN folded,
CPU arena off: no ``mem_arena*`` args), emb_all (unnamed nodes, token ids into a Gather),
if_all (an If whose branch kernels run inside the If kernel's time), res_all (a residual
block: the NCHWc Conv named after conv_b's output also adds the residual and applies Relu).
onnxruntime 1.31 writes no fence events and always writes args, so three variants are
derived from cbr_all by editing events, not by running: ``cbr_all_fences`` (a
``_fence_before``/``_fence_after`` pair around each kernel, as onnxruntime < 1.10 wrote),
``cbr_all_nomem`` (memory args removed) and ``cbr_all_noargs`` (args removed entirely).
"""

from __future__ import annotations

import copy
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxcost.bench.inputs import InputSpec, make_inputs
from onnxcost.bench.join import load_graph_nodes
from onnxcost.bench.session import (
    SessionConfig,
    open_session,
    opt_level,
    plain_runner,
    prepare_model,
)

HERE = Path(__file__).resolve().parent
RUNS = 6
"""1 first run + 2 warm-up + 3 measured: tests parse with skip_runs=3."""


def cbr_model() -> onnx.ModelProto:
    """Conv(3->16, 3x3) -> BatchNorm -> Relu -> Conv(16->16, 3x3, no bias) -> Relu on x[N,3,32,32]."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "W"),
        numpy_helper.from_array(np.zeros(16, np.float32), "B"),
        numpy_helper.from_array(np.ones(16, np.float32), "scale"),
        numpy_helper.from_array(np.zeros(16, np.float32), "bias"),
        numpy_helper.from_array(np.zeros(16, np.float32), "mean"),
        numpy_helper.from_array(np.ones(16, np.float32), "var"),
        numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32), "W2"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node(
            "BatchNormalization", ["c1", "scale", "bias", "mean", "var"], ["b1"], name="bn1"
        ),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "W2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["y"], name="relu2"),
    ]
    graph = helper.make_graph(
        nodes,
        "cbr",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, 32, 32])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def emb_model() -> onnx.ModelProto:
    """Unnamed nodes: ids[B] -> Gather(emb[100,16]) -> MatMul(16x16) -> Add -> Relu -> y[B,16]."""
    rng = np.random.default_rng(1)
    inits = [
        numpy_helper.from_array(rng.standard_normal((100, 16)).astype(np.float32), "emb"),
        numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Gather", ["emb", "ids"], ["e"]),
        helper.make_node("MatMul", ["e", "W"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "emb",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["B"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 16])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def res_model() -> onnx.ModelProto:
    """A residual block on x[1,16,16,16]: r = Relu(Conv_a(x)); y = Relu(Conv_b(r) + r)."""
    rng = np.random.default_rng(2)
    inits = [
        numpy_helper.from_array(
            (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32), "Wa"
        ),
        numpy_helper.from_array(
            (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32), "Wb"
        ),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "Wa"], ["ca"], name="conv_a", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["ca"], ["r"], name="relu_a"),
        helper.make_node("Conv", ["r", "Wb"], ["cb"], name="conv_b", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["cb", "r"], ["s"], name="add"),
        helper.make_node("Relu", ["s"], ["y"], name="relu_out"),
    ]
    graph = helper.make_graph(
        nodes,
        "res",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 16, 16])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def if_model() -> onnx.ModelProto:
    """If(c) then Neg(Relu(x)) else Abs(x), on x[4,64]: subgraph kernels nest in the If kernel."""
    then_branch = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["t"], name="then_relu"),
            helper.make_node("Neg", ["t"], ["o"], name="then_neg"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [4, 64])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["o2"], name="else_abs")],
        "else",
        [],
        [helper.make_tensor_value_info("o2", TensorProto.FLOAT, [4, 64])],
    )
    node = helper.make_node(
        "If", ["c"], ["y"], name="the_if", then_branch=then_branch, else_branch=else_branch
    )
    graph = helper.make_graph(
        [node],
        "if",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def capture(
    model_path: Path, case: str, level: str, specs: list[InputSpec], arena: bool = True
) -> None:
    config = SessionConfig(opt_level=opt_level(level), intra_op_threads=1)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "profile")
        optimized = os.path.join(tmp, "optimized.onnx")
        model = prepare_model(str(model_path))
        if arena:
            opened = open_session(
                model, config, profile_prefix=prefix, optimized_model_path=optimized
            )
        else:
            opened = _without_arena(model, config, prefix, optimized)
        run = plain_runner(opened.session, make_inputs(specs))
        for _ in range(RUNS):
            run()
        trace = Path(opened.session.end_profiling())
        events = json.loads(trace.read_text())
        graph = [n.as_dict() for n in load_graph_nodes(optimized)]
    _write(f"{case}.trace.json", events)
    _write(f"{case}.graph.json", graph)


def _without_arena(model: Any, config: SessionConfig, prefix: str, optimized: str) -> Any:
    """Like open_session, with the CPU memory arena off (onnxruntime then writes no mem_arena args)."""
    from onnxcost.bench._ort import import_ort
    from onnxcost.bench.session import OpenedSession, session_options

    ort = import_ort()
    so = session_options(config, profile_prefix=prefix, optimized_model_path=optimized)
    so.enable_cpu_mem_arena = False
    session = ort.InferenceSession(model.source, so, providers=["CPUExecutionProvider"])
    return OpenedSession(session, 0.0, tuple(session.get_providers()), "")


def _write(name: str, data: Any) -> None:
    (HERE / name).write_text(json.dumps(data, indent=0) + "\n", encoding="utf-8")


def derive_variants() -> None:
    events = json.loads((HERE / "cbr_all.trace.json").read_text())
    fenced: list[dict[str, Any]] = []
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            base = e["name"].removesuffix("_kernel_time")
            before = {
                **e,
                "name": f"{base}_fence_before",
                "dur": 0,
                "args": {"op_name": e["args"]["op_name"]},
            }
            after = {
                **e,
                "name": f"{base}_fence_after",
                "ts": e["ts"] + e["dur"],
                "dur": 0,
                "args": {"op_name": e["args"]["op_name"]},
            }
            fenced.extend([before, e, after])
        else:
            fenced.append(e)
    _write("cbr_all_fences.trace.json", fenced)
    nomem = copy.deepcopy(events)
    for e in nomem:
        if e.get("cat") == "Node":
            e["args"] = {
                k: v
                for k, v in e["args"].items()
                if not (k.endswith("_size") or k.startswith("mem_"))
            }
    _write("cbr_all_nomem.trace.json", nomem)
    noargs = copy.deepcopy(events)
    for e in noargs:
        e.pop("args", None)
    _write("cbr_all_noargs.trace.json", noargs)


def main(cases: list[str]) -> int:
    """Capture ``cases`` (all when empty); the source models are always rewritten."""
    cbr, emb, cond, res = HERE / "cbr.onnx", HERE / "emb.onnx", HERE / "if.onnx", HERE / "res.onnx"
    onnx.save(res_model(), res)
    onnx.save(cbr_model(), cbr)
    onnx.save(emb_model(), emb)
    onnx.save(if_model(), cond)
    x = [InputSpec("x", "float32", (1, 3, 32, 32))]
    runs = {
        "cbr_all": lambda: capture(cbr, "cbr_all", "all", x),
        "cbr_extended": lambda: capture(cbr, "cbr_extended", "extended", x),
        "cbr_basic_noarena": lambda: capture(cbr, "cbr_basic_noarena", "basic", x, arena=False),
        "emb_all": lambda: capture(
            emb, "emb_all", "all", [InputSpec("ids", "int64", (4,), high=100)]
        ),
        "res_all": lambda: capture(
            res, "res_all", "all", [InputSpec("x", "float32", (1, 16, 16, 16))]
        ),
        "if_all": lambda: capture(
            cond, "if_all", "all", [InputSpec("c", "bool", ()), InputSpec("x", "float32", (4, 64))]
        ),
    }
    for name in cases or list(runs):
        runs[name]()
    if not cases or "cbr_all" in cases:
        derive_variants()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
