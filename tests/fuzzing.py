"""Structure-aware fuzzing of onnxcost (issue 11): Hypothesis strategies that build and mutate
ONNX models, a byte-level mutator, and a pool of worker processes that run each case against
``onnxcost.analyze`` in-process or through the CLI under a time and memory bound.

What a case must do: end in a result or an ``OnnxcostError`` (CLI: exit 0, 1 or 2 and no
traceback), within ``timeout_s`` and the worker's address-space limit, leaving every input
file as it was. Anything else is a finding, named by a signature (exception type and the
innermost onnxcost frame) so that thousands of failures of one bug count as one.

Used by tests/test_fuzz.py (a few hundred derandomized cases) and scripts/fuzz.py (as many
as asked). Seeds: small models of every op family the issue lists, and every model in
models/ and tests/data/.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import itertools
import multiprocessing
import multiprocessing.connection
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

ROOT = Path(__file__).resolve().parents[1]
FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
MS = "com.microsoft"

# --- seeds ----------------------------------------------------------------------------------


def _vi(name: str, elem: int = FLOAT, shape: Sequence[int | str] | None = None) -> Any:
    return helper.make_tensor_value_info(name, elem, shape)


def _weight(name: str, dims: Sequence[int], elem: int = FLOAT) -> TensorProto:
    n = int(np.prod(dims)) if dims else 1
    values = np.arange(n, dtype=np.float32 if elem == FLOAT else np.int64) % 7
    return helper.make_tensor(name, elem, list(dims), values)


def _model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[Any],
    outputs: Sequence[Any],
    inits: Sequence[TensorProto] = (),
    *,
    opset: int = 21,
    ms: bool = False,
    functions: Sequence[onnx.FunctionProto] = (),
) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", opset)]
    if ms:
        opsets.append(helper.make_opsetid(MS, 1))
    if functions:
        opsets.append(helper.make_opsetid("local", 1))
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), list(inits))
    return helper.make_model(graph, opset_imports=opsets, functions=list(functions), ir_version=10)


def _recurrent(op: str, gates: int) -> onnx.ModelProto:
    node = helper.make_node(op, ["x", "w", "r", "b"], ["y", "y_h"], hidden_size=4)
    inits = [
        _weight("w", [1, gates * 4, 3]),
        _weight("r", [1, gates * 4, 4]),
        _weight("b", [1, 2 * gates * 4]),
    ]
    return _model([node], [_vi("x", FLOAT, [5, 2, 3])], [_vi("y"), _vi("y_h")], inits)


def _branch(name: str, n: int) -> onnx.GraphProto:
    node = helper.make_node("MatMul", ["x", f"w_{name}"], [f"o_{name}"])
    return helper.make_graph([node], name, [], [_vi(f"o_{name}")], [_weight(f"w_{name}", [3, n])])


def _seed_if() -> onnx.ModelProto:
    node = helper.make_node(
        "If", ["c"], ["y"], then_branch=_branch("then", 4), else_branch=_branch("else", 5)
    )
    return _model([node], [_vi("c", BOOL, []), _vi("x", FLOAT, [2, 3])], [_vi("y")])


def seed_loop(trip_count: int = 3) -> onnx.ModelProto:
    """A Loop of ``trip_count`` iterations whose body multiplies a [4, 4] matrix by itself."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("MatMul", ["a", "a"], ["a_out"]),
        ],
        "body",
        [_vi("i", INT64, []), _vi("cond", BOOL, []), _vi("a", FLOAT, [4, 4])],
        [_vi("cond_out", BOOL, []), _vi("a_out", FLOAT, [4, 4])],
    )
    nodes = [
        helper.make_node(
            "Constant", [], ["n"], value=helper.make_tensor("n", INT64, [], [trip_count])
        ),
        helper.make_node("Loop", ["n", "", "a0"], ["y"], body=body),
    ]
    return _model(nodes, [_vi("a0", FLOAT, [4, 4])], [_vi("y")])


def _seed_scan() -> onnx.ModelProto:
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "xi"], ["s_out"]), helper.make_node("Relu", ["xi"], ["yi"])],
        "body",
        [_vi("s", FLOAT, [3]), _vi("xi", FLOAT, [3])],
        [_vi("s_out", FLOAT, [3]), _vi("yi", FLOAT, [3])],
    )
    node = helper.make_node("Scan", ["s0", "x"], ["s", "y"], num_scan_inputs=1, body=body)
    return _model([node], [_vi("s0", FLOAT, [3]), _vi("x", FLOAT, [6, 3])], [_vi("s"), _vi("y")])


def _seed_reshape_chain() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "i0"], ["d0"], axis=0),
        helper.make_node("Unsqueeze", ["d0", "ax"], ["d0u"]),
        helper.make_node("Concat", ["d0u", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Expand", ["r", "shape"], ["e"]),
        helper.make_node("ConstantOfShape", ["shape2"], ["c"]),
        helper.make_node("Range", ["zero", "d0", "one"], ["rg"]),
        helper.make_node("Tile", ["r", "reps"], ["t"]),
    ]
    inits = [
        helper.make_tensor("i0", INT64, [], [0]),
        helper.make_tensor("ax", INT64, [1], [0]),
        helper.make_tensor("minus1", INT64, [1], [-1]),
        helper.make_tensor("shape2", INT64, [2], [2, 3]),
        helper.make_tensor("zero", INT64, [], [0]),
        helper.make_tensor("one", INT64, [], [1]),
        helper.make_tensor("reps", INT64, [2], [1, 2]),
    ]
    outs = [_vi(n) for n in ("e", "c", "t")] + [_vi("rg", INT64)]
    return _model(nodes, [_vi("x", FLOAT, [2, 3, 4])], outs, inits)


def _seed_function() -> onnx.ModelProto:
    body = [
        helper.make_node("MatMul", ["a", "b"], ["m"]),
        helper.make_node("Relu", ["m"], ["y"]),
    ]
    fn = helper.make_function(
        "local", "MatRelu", ["a", "b"], ["y"], body, [helper.make_opsetid("", 21)]
    )
    call = helper.make_node("MatRelu", ["x", "w"], ["y"], domain="local")
    return _model(
        [call], [_vi("x", FLOAT, [2, 3])], [_vi("y")], [_weight("w", [3, 4])], functions=[fn]
    )


def _seed_contrib() -> onnx.ModelProto:
    nodes = [
        helper.make_node("FusedConv", ["x", "w"], ["c"], domain=MS, activation="Relu"),
        helper.make_node("Gelu", ["c"], ["g"], domain=MS),
        helper.make_node("MultiHeadAttention", ["q", "q", "q"], ["a"], domain=MS, num_heads=2),
        helper.make_node(
            "SkipLayerNormalization", ["q", "q", "gamma"], ["s"], domain=MS, epsilon=1e-5
        ),
        helper.make_node(
            "MatMulNBits", ["q", "qw", "qs"], ["n"], domain=MS, K=8, N=4, bits=4, block_size=16
        ),
    ]
    inits = [
        _weight("w", [4, 3, 3, 3]),
        _weight("gamma", [8]),
        helper.make_tensor("qw", TensorProto.UINT8, [4, 1, 8], [1] * 32),
        _weight("qs", [4]),
    ]
    inputs = [_vi("x", FLOAT, [1, 3, 8, 8]), _vi("q", FLOAT, [1, 4, 8])]
    return _model(nodes, inputs, [_vi(n) for n in ("g", "a", "s", "n")], inits, ms=True)


def _seed_attention() -> onnx.ModelProto:
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=2, kv_num_heads=2)
    io = [_vi(n, FLOAT, [1, 4, 8]) for n in ("q", "k", "v")]
    return _model([node], io, [_vi("y")], opset=23)


def _seed_misc() -> onnx.ModelProto:
    nodes = [
        helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("LRN", ["p"], ["l"], size=3),
        helper.make_node("AveragePool", ["l"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Einsum", ["m", "m"], ["e"], equation="ij,jk->ik"),
        helper.make_node(
            "TfIdfVectorizer",
            ["t"],
            ["tf"],
            min_gram_length=1,
            max_gram_length=2,
            max_skip_count=0,
            mode="TF",
            ngram_counts=[0],
            ngram_indexes=[0],
            pool_int64s=[1],
        ),
        helper.make_node("Constant", [], ["k"], value_ints=[2, 3]),
        helper.make_node("Softmax", ["e"], ["sm"]),
    ]
    inputs = [_vi("x", FLOAT, [1, 4, 8, 8]), _vi("m", FLOAT, [3, 3]), _vi("t", INT64, [2, 5])]
    return _model(nodes, inputs, [_vi(n) for n in ("a", "sm", "tf")] + [_vi("k", INT64)])


def _seeds() -> dict[str, onnx.ModelProto]:
    conv = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], group=1)
    return {
        "conv": _model(
            [conv],
            [_vi("x", FLOAT, ["N", 3, 8, 8])],
            [_vi("y")],
            [_weight("w", [4, 3, 3, 3]), _weight("b", [4])],
        ),
        "matmul": _model(
            [helper.make_node("MatMul", ["a", "w"], ["y"])],
            [_vi("a", FLOAT, ["batch", 5, 3])],
            [_vi("y")],
            [_weight("w", [3, 6])],
        ),
        "gemm": _model(
            [helper.make_node("Gemm", ["a", "w", "c"], ["y"], transB=1, alpha=2.0)],
            [_vi("a", FLOAT, [2, 3])],
            [_vi("y")],
            [_weight("w", [4, 3]), _weight("c", [4])],
        ),
        "lstm": _recurrent("LSTM", 4),
        "gru": _recurrent("GRU", 3),
        "rnn": _recurrent("RNN", 1),
        "if": _seed_if(),
        "loop": seed_loop(),
        "scan": _seed_scan(),
        "attention": _seed_attention(),
        "reshape_chain": _seed_reshape_chain(),
        "function": _seed_function(),
        "contrib": _seed_contrib(),
        "misc": _seed_misc(),
    }


SEEDS: dict[str, bytes] = {name: m.SerializeToString() for name, m in _seeds().items()}
"""The small seed models, serialized (the structure mutators start from a parse of these)."""

EXTERNAL_SEED = "external"
"""A seed whose weight lives in ``weights.bin`` beside the model (written with each case)."""


def _external_seed() -> tuple[bytes, bytes]:
    model = _seeds()["matmul"]
    weight = model.graph.initializer[0]
    data = weight.raw_data or np.array(weight.float_data, dtype=np.float32).tobytes()
    weight.ClearField("float_data")
    weight.ClearField("raw_data")
    weight.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(len(data)))):
        entry = weight.external_data.add()
        entry.key, entry.value = key, value
    return model.SerializeToString(), data


def file_seeds(
    dirs: Sequence[Path] = (ROOT / "models", ROOT / "tests" / "data"),
) -> dict[str, bytes]:
    """Every .onnx model under ``dirs`` (their external data is not carried along)."""
    out: dict[str, bytes] = {}
    for d in dirs:
        for path in sorted(d.rglob("*.onnx")):
            out[str(path.relative_to(ROOT))] = path.read_bytes()
    return out


# --- cases ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One fuzz input: a model file (and files beside it), run in-process or through the CLI."""

    label: str
    """Seed and mutations, for the report (``conv+attr+dims``)."""
    model: bytes
    files: tuple[tuple[str, bytes], ...] = ()
    """Other files written beside the model: external data."""
    cli: tuple[str, ...] | None = None
    """CLI arguments, with ``{model}`` and ``{dir}`` placeholders; None: in-process analyze."""
    process: bool = False
    """Run the CLI as a real ``python -m onnxcost`` process (else typer's CliRunner)."""
    model_path: str = "model.onnx"
    """Where the model is written in the case folder, or a hostile path ("fifo", "/dev/zero")."""
    api: str = "analyze"
    """In-process: the library call, ``analyze`` or ``llm`` (``onnxcost.llm.cost.llm_report``)."""
    kwargs: tuple[tuple[str, Any], ...] = ()
    """In-process: keyword arguments of that call (``dims``, ``symbolic``, ``prompt``)."""


class _Draw:
    """The choices a mutation makes, drawn from Hypothesis (shrinkable, reproducible)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self._draw = draw

    def int(self, lo: int, hi: int) -> int:
        return int(self._draw(st.integers(lo, hi)))

    def pick(self, items: Sequence[Any]) -> Any:
        return self._draw(st.sampled_from(list(items)))

    def chance(self, p: float = 0.5) -> bool:
        return self.int(0, 999) < int(p * 1000)


ABSURD_INTS = (0, -1, -5, 1, 3, 2**31, 2**40, 2**62, 2**63 - 1, -(2**63))
ABSURD_FLOATS = (float("inf"), float("-inf"), float("nan"), 1.5, -0.0, 1e308)
ABSURD_STRINGS = ("", "abc", "\x1b[31mred", "[bold]x[/]", "=HYPERLINK(1)", "a\nb", "ü" * 50, "\x00")
DIMS = (0, 1, 2, 3, -1, -7, 2**31, 2**62, "N", "batch", "")
LOCATIONS = (
    "weights.bin",
    "../weights.bin",
    "/etc/passwd",
    "",
    ".",
    "a\x00b",
    "fifo",
    "loop",
    "/dev/zero",
    "missing.bin",
    "sub/../../weights.bin",
    "x" * 300,
)
OFFSETS = ("0", "abc", "1.5", "1e3", "-1", "-8", "99999999999999999999", " 4", "")
DOMAINS = ("", "ai.onnx", MS, "com.unknown", "ai.onnx.ml", "local", "\x00")
OP_TYPES = ("Conv", "Relu", "Foo", "", "If", "Loop", "Scan", "MatMul", "Constant", "Ré", "\x1b[2J")


def _all_graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    out = [graph]
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                out += _all_graphs(a.g)
            for g in a.graphs:
                out += _all_graphs(g)
    return out


def _value_infos(model: onnx.ModelProto) -> list[Any]:
    out: list[Any] = []
    for g in _all_graphs(model.graph):
        out += [*g.input, *g.output, *g.value_info]
    return out


def _nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for g in _all_graphs(model.graph) for n in g.node]


def _tensor_names(model: onnx.ModelProto) -> list[str]:
    names = [vi.name for vi in _value_infos(model)]
    names += [o for n in _nodes(model) for o in n.output]
    return names or ["x"]


def _mutate_dims(m: onnx.ModelProto, d: _Draw) -> None:
    vis = [vi for vi in _value_infos(m) if vi.type.HasField("tensor_type")]
    if not vis:
        return
    shape = d.pick(vis).type.tensor_type.shape
    if shape.dim and d.chance(0.8):
        dim = shape.dim[d.int(0, len(shape.dim) - 1)]
        value = d.pick(DIMS)
        if isinstance(value, str):
            dim.dim_param = value
        else:
            dim.dim_value = value
    elif d.chance():
        shape.dim.add().dim_value = d.pick(DIMS[:4])  # one rank more
    elif shape.dim:
        del shape.dim[-1]  # one rank less


def _mutate_dtype(m: onnx.ModelProto, d: _Draw) -> None:
    elem = d.pick((0, 1, 2, 6, 7, 8, 9, 10, 11, 16, 21, 22, 23, 25, 40, 999))
    if d.chance() and m.graph.initializer:
        m.graph.initializer[d.int(0, len(m.graph.initializer) - 1)].data_type = elem
    else:
        vis = [vi for vi in _value_infos(m) if vi.type.HasField("tensor_type")]
        if vis:
            d.pick(vis).type.tensor_type.elem_type = elem


def _mutate_attribute(m: onnx.ModelProto, d: _Draw) -> None:
    nodes = _nodes(m)
    if not nodes:
        return
    node = d.pick(nodes)
    if node.attribute and d.chance(0.3):
        del node.attribute[d.int(0, len(node.attribute) - 1)]
        return
    if node.attribute and d.chance(0.7):
        attr = d.pick(list(node.attribute))
        name = attr.name
    else:
        name = d.pick(
            (
                *("group", "num_heads", "K", "N", "axis", "kernel_shape", "strides", "pads"),
                *("size", "hidden_size", "direction", "value", "value_int", "to", "perm", "x"),
            )
        )
        attr = None
    kind = d.pick(("int", "ints", "float", "string", "graph", "tensor"))
    if kind == "int":
        new = helper.make_attribute(name, d.pick(ABSURD_INTS))
    elif kind == "ints":
        new = helper.make_attribute(name, [d.pick(ABSURD_INTS) for _ in range(d.int(0, 5))])
    elif kind == "float":
        new = helper.make_attribute(name, d.pick(ABSURD_FLOATS))
    elif kind == "string":
        new = helper.make_attribute(name, d.pick(ABSURD_STRINGS))
    elif kind == "graph":
        new = helper.make_attribute(name, helper.make_graph([], "empty", [], []))
    else:
        dims = [d.pick((0, 1, 2, 2**31)) for _ in range(d.int(0, 2))]
        tensor = helper.make_tensor(
            "t", d.pick((FLOAT, INT64)), dims, bytes(d.int(0, 17)), raw=True
        )
        new = helper.make_attribute(name, tensor)
    if attr is not None:
        attr.CopyFrom(new)
    else:
        node.attribute.append(new)


def _mutate_wiring(m: onnx.ModelProto, d: _Draw) -> None:
    """Cycles, dangling inputs, duplicate outputs, dropped or shuffled nodes."""
    graph = d.pick(_all_graphs(m.graph))
    nodes = graph.node
    if not nodes:
        return
    what = d.pick(("cycle", "dangling", "duplicate", "drop", "shuffle", "empty_name", "io"))
    node = nodes[d.int(0, len(nodes) - 1)]
    if what == "cycle" and node.input:
        later = nodes[d.int(0, len(nodes) - 1)]
        if later.output:
            node.input[d.int(0, len(node.input) - 1)] = later.output[0]
    elif what == "dangling" and node.input:
        node.input[d.int(0, len(node.input) - 1)] = d.pick(("nowhere", "", "x", "w"))
    elif what == "duplicate" and node.output:
        node.output[d.int(0, len(node.output) - 1)] = d.pick(_tensor_names(m))
    elif what == "drop":
        del nodes[d.int(0, len(nodes) - 1)]
    elif what == "shuffle":
        order = list(nodes)
        order.reverse()
        del nodes[:]
        nodes.extend(order)
    elif what == "empty_name":
        node.name = d.pick(("", "dup", node.op_type, "a/b/c", "\x1b]8;;http://x\x07y"))
    elif graph.input:
        if d.chance():
            graph.input.append(graph.input[0])  # a duplicate input
        else:
            del graph.output[:]


def _mutate_op(m: onnx.ModelProto, d: _Draw) -> None:
    """Unknown domains and ops, opsets absurd or missing."""
    if d.chance(0.4):
        opsets = m.opset_import
        if opsets and d.chance(0.3):
            del opsets[d.int(0, len(opsets) - 1)]
        elif opsets:
            opsets[d.int(0, len(opsets) - 1)].version = d.pick((0, -1, 1, 6, 99, 2**31, 2**40))
        else:
            opsets.add().version = 21
        return
    nodes = _nodes(m)
    if nodes:
        node = d.pick(nodes)
        if d.chance():
            node.domain = d.pick(DOMAINS)
        else:
            node.op_type = d.pick(OP_TYPES)


def _nest(m: onnx.ModelProto, d: _Draw) -> None:
    """Wrap the graph's nodes in control flow (If or Loop), nested 1 to 40 deep."""
    graph = m.graph
    if not graph.output:
        return
    depth = d.int(1, 40)
    out = graph.output[0]
    body = helper.make_graph(list(graph.node), "inner", [], [out], list(graph.initializer))
    leaf = helper.make_graph(
        [helper.make_node("Identity", ["cond"], [out.name])], "leaf", [], [out]
    )
    kind = d.pick(("If", "Loop"))
    both = d.chance(0.1)  # the same body in both branches: the tree doubles per level
    graph.ClearField("initializer")
    for level in range(depth):
        if kind == "If":
            node = helper.make_node(
                "If", ["cond"], [out.name], then_branch=body, else_branch=body if both else leaf
            )
        else:
            loop_body = helper.make_graph(
                [helper.make_node("Identity", ["c_in"], ["c_out"]), *body.node],
                "loop",
                [_vi("i", INT64, []), _vi("c_in", BOOL, [])],
                [_vi("c_out", BOOL, []), out],
            )
            node = helper.make_node("Loop", ["trip", "cond"], [out.name], body=loop_body)
        node.name = f"{kind}{level}"
        body = helper.make_graph([node], f"level{level}", [], [out])
        if body.ByteSize() > 1 << 15:
            break
    trip = helper.make_tensor("trip", INT64, [], [d.pick((-5, 0, 3, 10**12, 2**62))])
    del graph.node[:]
    graph.node.extend(body.node)
    graph.initializer.append(trip)
    graph.input.append(_vi("cond", BOOL, []))


def _mutate_tensor_data(m: onnx.ModelProto, d: _Draw) -> None:
    inits = [t for g in _all_graphs(m.graph) for t in g.initializer]
    constants = [
        a.t for n in _nodes(m) if n.op_type == "Constant" for a in n.attribute if a.name == "value"
    ]
    tensors = inits + constants
    if not tensors:
        return
    t = d.pick(tensors)
    what = d.pick(("raw", "dims", "values", "type"))
    if what == "raw":
        t.ClearField("float_data")
        t.ClearField("int64_data")
        t.raw_data = bytes(d.int(0, 3) * 8 + d.int(0, 7))
    elif what == "dims":
        del t.dims[:]
        t.dims.extend(d.pick((0, 1, 2, 3, -1, -7, 2**31, 2**62)) for _ in range(d.int(0, 3)))
    elif what == "values":
        t.ClearField("raw_data")
        t.data_type = INT64
        t.ClearField("int64_data")
        t.int64_data.extend(d.pick(ABSURD_INTS) for _ in range(d.int(0, 4)))
        del t.dims[:]
        t.dims.append(len(t.int64_data))
    else:
        t.data_type = d.pick((0, 8, 16, 999))


def _mutate_external(m: onnx.ModelProto, d: _Draw) -> None:
    """Move an initializer (of the graph or a subgraph) to a hostile external location."""
    inits = [t for g in _all_graphs(m.graph) for t in g.initializer]
    if not inits:
        return
    t = d.pick(inits)
    t.ClearField("raw_data")
    t.ClearField("float_data")
    t.ClearField("int64_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    for key, values in (("location", LOCATIONS), ("offset", OFFSETS), ("length", OFFSETS)):
        if key == "location" or d.chance(0.7):
            entry = t.external_data.add()
            entry.key, entry.value = key, d.pick(values)
    if d.chance(0.2):
        entry = t.external_data.add()
        entry.key, entry.value = d.pick(("checksum", "location", "extra")), "x"


def _mutate_function(m: onnx.ModelProto, d: _Draw) -> None:
    """Model-local functions: recursive, called with too many inputs, unknown."""
    name = d.pick(("F", "G"))
    body_op = d.pick(("Relu", name, "G", "Missing"))
    fn = helper.make_function(
        "local",
        name,
        ["a"],
        ["b"],
        [helper.make_node(body_op, ["a"], ["b"], domain="" if body_op == "Relu" else "local")],
        [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)],
    )
    m.functions.append(fn)
    if not any(o.domain == "local" for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid("local", 1))
    inputs = [vi.name for vi in m.graph.input] or ["x"]
    call_inputs = [inputs[0]] * d.int(0, 3)
    m.graph.node.append(helper.make_node(name, call_inputs, ["fn_out"], domain="local"))


MUTATIONS: dict[str, Callable[[onnx.ModelProto, _Draw], None]] = {
    "dims": _mutate_dims,
    "dtype": _mutate_dtype,
    "attr": _mutate_attribute,
    "wiring": _mutate_wiring,
    "op": _mutate_op,
    "nest": _nest,
    "data": _mutate_tensor_data,
    "external": _mutate_external,
    "function": _mutate_function,
}


def mutate_bytes(data: bytes, d: _Draw) -> bytes:
    """Byte-level mutations of a serialized model: flips, inserts, cuts, splices."""
    buf = bytearray(data)
    for _ in range(d.int(1, 8)):
        if not buf:
            buf = bytearray(b"\x08")
        what = d.pick(("flip", "insert", "delete", "truncate", "dup", "varint"))
        i = d.int(0, len(buf) - 1)
        if what == "flip":
            buf[i] ^= 1 << d.int(0, 7)
        elif what == "insert":
            buf[i:i] = bytes([d.int(0, 255)]) * d.int(1, 4)
        elif what == "delete":
            del buf[i : i + d.int(1, 8)]
        elif what == "truncate":
            del buf[i:]
        elif what == "dup":
            buf[i:i] = buf[i : i + d.int(1, 64)]
        else:
            buf[i : i + 1] = b"\xff" * d.int(1, 10) + b"\x01"
    return bytes(buf)


_FILE_SEEDS: dict[str, bytes] = {}


def _file_seeds() -> dict[str, bytes]:
    if not _FILE_SEEDS:
        _FILE_SEEDS.update(file_seeds())
    return _FILE_SEEDS


def _seed(d: _Draw, from_files: float) -> tuple[str, bytes, tuple[tuple[str, bytes], ...]]:
    if d.chance(from_files):
        name = d.pick(sorted(_file_seeds()))
        return name, _file_seeds()[name], ()
    if d.chance(0.08):
        model, data = _external_seed()
        return EXTERNAL_SEED, model, (("weights.bin", data),)
    name = d.pick(sorted(SEEDS))
    return name, SEEDS[name], ()


HOSTILE_PATHS = ("fifo", "/dev/zero", "loop", "folder", "missing.onnx")


@st.composite
def models(draw: Callable[[st.SearchStrategy[Any]], Any], from_files: float = 0.04) -> Case:
    """A seed model put through 0-4 structure mutations, or through the byte mutator."""
    d = _Draw(draw)
    name, data, files = _seed(d, from_files)
    if d.chance(0.01):
        return Case(f"path:{name}", data, files, model_path=d.pick(HOSTILE_PATHS))
    if d.chance(0.15):
        return Case(f"{name}+bytes", mutate_bytes(data, d), files)
    model = onnx.ModelProto()
    model.ParseFromString(data)
    applied = []
    for _ in range(d.int(0, 4)):
        key = d.pick(sorted(MUTATIONS))
        try:
            MUTATIONS[key](model, d)
        except Exception:  # protobuf refused a value or a depth: the mutation is skipped
            key = f"!{key}"
        applied.append(key)
    try:
        out = model.SerializeToString()
    except Exception:  # a mutation protobuf cannot encode (too deep): the seed as is
        out, applied = data, ["unencodable"]
    if d.chance(0.05):
        out = _not_utf8(out, model, d)
        applied.append("utf8")
    return Case("+".join([name, *applied]), out, files)


def _not_utf8(data: bytes, model: onnx.ModelProto, d: _Draw) -> bytes:
    """``data`` with one name, op type or domain made invalid UTF-8 (protobuf then hands
    out ``bytes`` for it), the same length so the message stays well-formed."""
    strings = [s for n in _nodes(model) for s in (n.name, n.op_type, n.domain) if len(s) >= 2]
    strings += [vi.name for vi in model.graph.input if len(vi.name) >= 2]
    if not strings:
        return data
    picked = d.pick(strings)  # already bytes when an earlier mutation broke it
    raw = picked if isinstance(picked, bytes) else picked.encode()
    return data.replace(raw, b"\xff" + raw[1:], 1)


CLI_FORMATS = ("table", "json", "csv", "markdown", "html", "netron")


@st.composite
def cli_cases(draw: Callable[[st.SearchStrategy[Any]], Any], process: float = 0.03) -> Case:
    """A fuzzed model and a command line over it: analyze, check, compare, annotate, llm."""
    case: Case = draw(models())
    d = _Draw(draw)
    command = d.pick(("analyze", "analyze", "analyze", "check", "compare", "annotate", "llm"))
    args: list[str] = [command, "{model}"]
    if command == "compare":
        args.append(d.pick(("{model}", "mlp", "{dir}/other.onnx")))
    if command == "annotate":
        args.append(d.pick(("{dir}/annotated.onnx", "{model}", "{dir}/weights.bin")))
    if command in ("analyze", "compare") and d.chance(0.7):
        args += ["--format", d.pick(CLI_FORMATS[:4] if command == "compare" else CLI_FORMATS)]
    if command == "check":
        args += [d.pick(("--max-macs", "--max-flops", "--max-params")), d.pick(("1", "2G", "0"))]
    for _ in range(d.int(0, 3)):
        flag = d.pick(
            ("--input-shape", "--dim", "--top", "--output", "--sort-by", "--depth", "--symbolic")
        )
        if command not in ("analyze",) and flag in ("--top", "--sort-by", "--depth", "--symbolic"):
            continue
        if flag == "--symbolic":
            args.append(flag)
        elif flag == "--input-shape":
            args += [flag, d.pick(("x=1x3x8x8", "a=0x5x3", "c=", "x=2", "a=1x99999x3"))]
        elif flag == "--dim":
            args += [flag, d.pick(("N=2", "batch=0", "N=4611686018427387904", "seq=3"))]
        elif flag == "--top":
            args += [flag, d.pick(("0", "1", "5"))]
        elif flag == "--sort-by":
            args += [flag, d.pick(("flops", "macs", "order"))]
        elif flag == "--depth":
            args += [flag, d.pick(("1", "3"))]
        elif command != "annotate" and command != "check":
            args += [
                flag,
                d.pick(("{dir}/out.txt", "{model}", "{dir}/weights.bin", "{dir}/x.onnx")),
            ]
    if d.chance(0.2):
        args.append("--force")
    proc = d.chance(process)
    return Case(case.label, case.model, case.files, tuple(args), proc, case.model_path)


# --- families (issue 27): the surfaces the mutators above never reach ----------------------
#
# Each family builds its own small model (every file under 200 KB) and the flags or library
# call that goes with it; family_cases() draws one. The oracle is the same as for every case.


def _decoder(kv_cache: bool = True) -> onnx.ModelProto:
    """A 1-layer GPT-2 decoder from the zoo (hidden 8, vocab 16; 35 KB with its weights):
    inputs input_ids [batch, seq] and the cache [batch, 2, past_seq, 4]."""
    from onnxcost import zoo

    params = {"layers": 1, "hidden": 8, "heads": 2, "vocab": 16, "max_positions": 16}
    with tempfile.TemporaryDirectory() as tmp:
        path = zoo.save("gpt2", Path(tmp) / "d.onnx", params={**params, "kv_cache": kv_cache})
        return onnx.load(str(path))


_DECODERS: dict[bool, bytes] = {}


def decoder(kv_cache: bool = True) -> onnx.ModelProto:
    """A fresh copy of the small decoder (built once per process)."""
    if kv_cache not in _DECODERS:
        _DECODERS[kv_cache] = _decoder(kv_cache).SerializeToString()
    model = onnx.ModelProto()
    model.ParseFromString(_DECODERS[kv_cache])
    return model


DERIVED_EXPRESSIONS = (
    "past_seq + seq",
    "seq+past_seq",
    "seq-past_seq",
    "seq//past_seq",
    "seq // 0",
    "seq*past_seq*batch",
    "seq*10**30",
    "seq**2",
    "-seq",
    "batch-size",
    "past-seq",
    "(seq",
    "seq % 2",
)


def derived_dims_model(expr: str) -> bytes:
    """The decoder with optimum's attention_mask [batch, ``expr``], summed into an output so
    a cost depends on it (a derived dim: arithmetic of the inputs' own dims)."""
    model = decoder()
    model.graph.input.append(_vi("attention_mask", INT64, ["batch", expr]))
    model.graph.node.extend(
        [
            helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=FLOAT),
            helper.make_node("ReduceSum", ["mask_f"], ["mask_sum"], keepdims=0),
        ]
    )
    model.graph.output.append(_vi("mask_sum", FLOAT, []))
    return model.SerializeToString()


def _draw_expression(d: _Draw) -> str:
    if d.chance(0.3):  # long sums and products: thousands of terms
        n = d.pick((2, 50, 1000, 3000, 10000))
        return d.pick(("+", "*", "-", "//", " + ")).join([d.pick(("seq", "past_seq"))] * n)
    return str(d.pick(DERIVED_EXPRESSIONS))


BIG_DIMS = ("0", "1", "3", str(2**31), str(2**62), str(2**63 - 1), str(2**63), str(2**64))


def _family_derived(d: _Draw) -> Case:
    expr = _draw_expression(d)
    model = derived_dims_model(expr)
    label = f"derived:{expr[:40]}"
    dims = {s: int(d.pick(BIG_DIMS)) for s in ("seq", "past_seq", "batch") if d.chance(0.5)}
    if d.chance(0.3):  # the library: analyze or llm_report, dims unchecked by the CLI
        if d.chance(0.5):
            kwargs = (("dims", dims), ("symbolic", d.chance()))
            return Case(label, model, api="analyze", kwargs=kwargs)
        prompt, generate = d.pick((1, 3, 2**62)), d.pick((1, 4))
        return Case(label, model, api="llm", kwargs=(("prompt", prompt), ("generate", generate)))
    if d.chance(0.4):
        args = ["llm", "{model}", "--prompt", d.pick(("1", "5")), "--generate", d.pick(("1", "3"))]
    else:
        args = ["analyze", "{model}"]
        if d.chance(0.5):
            args.append("--symbolic")
        if d.chance(0.3):
            args += ["--format", d.pick(("json", "html"))]
    for symbol, value in dims.items():
        args += ["--dim", f"{symbol}={value}"]
    if d.chance(0.2):
        args += ["--dim", f"{expr}={d.pick(BIG_DIMS)}"]
    return Case(label, model, cli=tuple(args))


def deep_scope_model(depth: int, nodes: int = 3, segment: str = "blk") -> bytes:
    """A Relu chain whose node names are ``depth`` scopes deep (``/blk/blk/.../Relu_0``)."""
    prefix = "/" + "/".join([segment] * depth)
    chain = [
        helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"{prefix}/Relu_{i}")
        for i in range(nodes)
    ]
    model = _model(chain, [_vi("t0", FLOAT, [2, 3])], [_vi(f"t{nodes}", FLOAT, [2, 3])])
    return model.SerializeToString()


def _family_deep_scopes(d: _Draw) -> Case:
    depth = d.pick((1, 50, 300, 2000, 10000, 30000))
    segment = d.pick(("blk", "", "a.0", "ü", "[b]"))
    model = deep_scope_model(depth, d.int(1, 3) if depth <= 2000 else 1, segment)
    args = ["analyze", "{model}"]
    view = d.pick(("--tree", "--depth", "none"))
    if view == "--tree":
        args.append("--tree")
    elif view == "--depth":
        args += ["--depth", d.pick(("1", "5", "300", "2001", "100000"))]
    if d.chance(0.6):
        args += ["--format", d.pick(CLI_FORMATS)]
    return Case(f"scopes:{depth}x{segment!r}:{view}", model, cli=tuple(args))


def nested_functions_model(
    levels: int, calls: int = 2, *, recursive: str = "", missing: str = "", arity: int = 1
) -> bytes:
    """Model-local functions F0..F{levels-1}: F0 is a Relu, each F{i} calls F{i-1} ``calls``
    times in a chain, and the graph calls the last with ``arity`` inputs (F has one).

    ``recursive``: "self" (the last calls itself) or "mutual" (F0 calls the last);
    ``missing``: "body" (F0 has no nodes), "output" (F0 does not make its output),
    "function" (the last calls a function that is not defined)."""
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)]
    functions = []
    for i in range(levels):
        if i == 0:
            callee, domain = ("F0" if recursive == "self" and levels == 1 else "Relu"), ""
            if recursive == "mutual":
                callee, domain = f"F{levels - 1}", "local"
            body = [helper.make_node(callee, ["a"], ["b"], domain=domain)]
            if missing == "body":
                body = []
            elif missing == "output":
                body = [helper.make_node("Relu", ["a"], ["other"])]
        else:
            callee = f"F{i - 1}"
            if i == levels - 1 and recursive == "self":
                callee = f"F{i}"
            if i == levels - 1 and missing == "function":
                callee = "Nowhere"
            body = [
                helper.make_node(
                    callee, ["a" if k == 0 else f"m{k}"], [f"m{k + 1}"], domain="local"
                )
                for k in range(calls)
            ]
            body.append(helper.make_node("Identity", [f"m{calls}"], ["b"]))
        functions.append(helper.make_function("local", f"F{i}", ["a"], ["b"], body, opsets))
    call = helper.make_node(f"F{levels - 1}", ["x"] * arity, ["y"], domain="local")
    model = _model(
        [call], [_vi("x", FLOAT, [2, 3])], [_vi("y", FLOAT, [2, 3])], functions=functions
    )
    return model.SerializeToString()


def _family_functions(d: _Draw) -> Case:
    if d.chance(0.3):  # each calls the previous one twice: 2**levels - 1 nodes inlined
        levels, calls, recursive, missing, arity = d.pick((16, 18, 20, 22)), 2, "", "", 1
    else:
        levels = d.pick((1, 2, 3, 8, 12, 16, 20, 24))
        calls = d.pick((1, 2, 3))
        recursive = d.pick(("", "", "", "self", "mutual"))
        missing = d.pick(("", "", "", "body", "output", "function"))
        arity = d.pick((1, 1, 1, 0, 2, 5))
    model = nested_functions_model(levels, calls, recursive=recursive, missing=missing, arity=arity)
    label = f"functions:{levels}x{calls}:{recursive}:{missing}:{arity}"
    if d.chance(0.4):
        return Case(label, model, kwargs=(("symbolic", d.chance()),))
    command = d.pick(("analyze", "analyze", "annotate", "compare"))
    args = [command, "{model}"]
    if command == "annotate":
        args.append("{dir}/annotated.onnx")
    elif command == "compare":
        args.append("{model}")
    elif d.chance(0.5):
        args += [d.pick(("--symbolic", "--tree", "--ort-peak"))]
    return Case(label, model, cli=tuple(args))


HUGE_COUNTS = ("1", "7", str(2**31), str(2**62), str(2**70), str(10**9), str(10**30))
CEILINGS = ("0", "1", "inf", "nan", "1e308", "1e-308", "-1", "1e-320")


def hostile_decoder(what: str) -> bytes:
    """The decoder made hostile for ``llm``: its logits declared another way, no cache, or a
    graph name that is not UTF-8."""
    model = decoder(kv_cache=what != "no_cache")
    logits = next(o for o in model.graph.output if o.name == "logits")
    declared: dict[str, list[int | str] | None] = {
        "vocab0": ["batch", "seq", 0],
        "vocab_symbolic": ["batch", "seq", "vocab"],
        "scalar": [],
        "batch_vocab": ["batch", 16],
        "unranked": None,
    }
    if what in declared:
        logits.CopyFrom(_vi("logits", FLOAT, declared[what]))
    if what == "no_cache_inputs":  # the cache outputs stay: half a cache
        keep = [vi for vi in model.graph.input if not vi.name.startswith("past")]
        del model.graph.input[:]
        model.graph.input.extend(keep)
    if what == "name_not_utf8":
        model.graph.name = "GRAPHNAME"
        return model.SerializeToString().replace(b"GRAPHNAME", b"\xffRAPHNAME", 1)
    return model.SerializeToString()


HOSTILE_DECODERS = (
    "as_is",
    "vocab0",
    "vocab_symbolic",
    "scalar",
    "batch_vocab",
    "unranked",
    "no_cache",
    "no_cache_inputs",
    "name_not_utf8",
)


def _family_llm(d: _Draw) -> Case:
    what = d.pick(HOSTILE_DECODERS)
    model = hostile_decoder(what)
    label = f"llm:{what}"
    args = ["llm", "{model}"]
    for flag in ("--prompt", "--generate", "--batch"):
        if flag != "--batch" or d.chance(0.5):
            args += [flag, d.pick(HUGE_COUNTS[:3] if d.chance(0.5) else HUGE_COUNTS)]
    if d.chance(0.4):
        args += ["--peak-tflops", d.pick(CEILINGS), "--bandwidth-gbs", d.pick(CEILINGS)]
    if d.chance(0.4):
        args += ["--format", d.pick(("table", "json", "markdown", "html"))]
    if d.chance(0.25):  # onnxruntime's loop: small counts, else the run is the model's claim
        args = ["llm", "{model}", "--prompt", "3", "--generate", "2", "--bench", "--threads", "1"]
        args += ["--batch", d.pick(("1", "2"))]
    if d.chance(0.1):
        args += ["--dim", f"{d.pick(('batch', 'seq', 'past_seq', 'vocab'))}={d.pick(BIG_DIMS)}"]
    if d.chance(0.15):
        args = ["analyze", "{model}", "--symbolic"]
    return Case(label, model, cli=tuple(args))


def ort_peak_model(what: str, n: int, chain: int = 1) -> bytes:
    """A tiny file whose onnxruntime session is big: ConstantOfShape [n, n] (``const``), or
    ``chain`` MatMuls of such a constant (``matmul``); the file stays a few hundred bytes."""
    nodes = [
        helper.make_node("Constant", [], ["s"], value_ints=[n, n]),
        helper.make_node(
            "ConstantOfShape", ["s"], ["c"], value=helper.make_tensor("v", FLOAT, [1], [1.0])
        ),
    ]
    if what == "const":
        nodes.append(helper.make_node("Add", ["x", "c"], ["y"]))
        return _model(
            nodes, [_vi("x", FLOAT, [1, n])], [_vi("y", FLOAT, [n, n])]
        ).SerializeToString()
    previous = "c"
    for i in range(chain):
        nodes.append(helper.make_node("MatMul", [previous, "c"], [f"m{i}"]))
        previous = f"m{i}"
    nodes.append(helper.make_node("MatMul", ["x", previous], ["y"]))
    return _model(nodes, [_vi("x", FLOAT, [1, n])], [_vi("y", FLOAT, [1, n])]).SerializeToString()


def _family_ort_peak(d: _Draw) -> Case:
    what = d.pick(("const", "matmul"))
    n = d.pick((64, 1024, 4096, 8192, 16384, 65536))
    chain = d.int(1, 8)
    model = ort_peak_model(what, n, chain)
    label = f"ort_peak:{what}:{n}x{chain}"
    if d.chance(0.3):
        return Case(label, model, kwargs=(("ort_peak", True),))
    args = ["analyze", "{model}", "--ort-peak"]
    if d.chance(0.3):
        args += ["--format", d.pick(("json", "html"))]
    return Case(label, model, cli=tuple(args))


# The protobuf messages whose fields are reordered, by field number: ModelProto.graph (7),
# GraphProto.initializer (5), TensorProto.external_data (13); StringStringEntryProto's
# key (1) and value (2) are the leaves.
_ENTRY: dict[int, Any] = {}
_TENSOR: dict[int, Any] = {13: _ENTRY}
_GRAPH: dict[int, Any] = {5: _TENSOR}
MODEL_FIELDS: dict[int, Any] = {7: _GRAPH}


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _fields(data: bytes) -> list[tuple[int, bytes, bytes | None]]:
    """A message's fields in wire order: (number, whole field bytes, payload of a
    length-delimited field or None)."""
    out: list[tuple[int, bytes, bytes | None]] = []
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        payload = None
        if wire == 0:
            _, pos = _read_varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            payload = data[pos : pos + length]
            pos += length
        else:
            raise ValueError(f"wire type {wire} at byte {start}")
        out.append((number, data[start:pos], payload))
    return out


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            return value, pos
        shift += 7


def reorder_fields(
    data: bytes, rank: Callable[[int], int], nested: dict[int, Any] = MODEL_FIELDS
) -> bytes:
    """``data`` (a serialized message) with its fields in the order of ``rank(number)``, and
    the fields of the messages ``nested`` names reordered the same way, by hand-encoding the
    protobuf wire format. Entries of one repeated field keep their order (a stable sort), so
    protobuf parses the result to the same message."""
    fields = []
    for number, whole, payload in _fields(data):
        if payload is not None and number in nested:
            inner = reorder_fields(payload, rank, nested[number])
            whole = _varint(number << 3 | 2) + _varint(len(inner)) + inner
        fields.append((number, whole))
    fields.sort(key=lambda f: rank(f[0]))
    return b"".join(whole for _, whole in fields)


def reversed_fields(data: bytes) -> bytes:
    """``data`` with every reordered message's fields in descending number order: a model
    whose graph and opset_import come before its ir_version, an external-data entry whose
    value comes before its key."""
    return reorder_fields(data, lambda number: -number)


def external_model(location: str = "weights.bin") -> tuple[bytes, bytes]:
    """The MatMul seed with its weight in ``location`` (model bytes, weight bytes)."""
    model_bytes, data = _external_seed()
    if location != "weights.bin":
        model = onnx.ModelProto()
        model.ParseFromString(model_bytes)
        for entry in model.graph.initializer[0].external_data:
            if entry.key == "location":
                entry.value = location
        model_bytes = model.SerializeToString()
    return model_bytes, data


def _family_reordered(d: _Draw) -> Case:
    model, weights = external_model()
    if d.chance(0.5):
        model = reversed_fields(model)
        order = "reversed"
    else:
        ranks = {n: d.int(0, 20) for n in range(1, 32)}
        model = reorder_fields(model, lambda number: ranks.get(number, 0))
        order = "shuffled"
    victim = reversed_fields(SEEDS[d.pick(sorted(SEEDS))])
    files = (("weights.bin", weights), ("victim.onnx", victim))
    target = d.pick(("{dir}/weights.bin", "{dir}/victim.onnx", "{model}"))
    command = d.pick(("analyze", "analyze", "annotate", "bench", "compare", "llm"))
    if command == "annotate":
        args = ["annotate", "{model}", target]
    elif command == "bench":
        args = ["bench", "{model}", "--runs", "1", "--warmup", "0", "--min-seconds", "0"]
        args += ["--threads", "1", "-o", target]
    elif command == "compare":
        args = ["compare", "{model}", "{dir}/victim.onnx", "-o", target]
    elif command == "llm":
        args = ["llm", "{model}", "--prompt", "2", "--generate", "2", "-o", target]
    else:
        args = ["analyze", "{model}", "-o", target]
        if d.chance(0.5):
            args += ["--format", d.pick(CLI_FORMATS)]
    if d.chance(0.5) and not (command == "annotate" and target == "{dir}/victim.onnx"):
        args.append("--force")  # annotate --force may replace a model that is no input
    return Case(f"reordered:{order}:{command}->{target}", model, files, cli=tuple(args))


def many_symbols_model(inputs: int, symbols: int) -> bytes:
    """``inputs`` inputs of ``symbols`` symbolic dims each (all distinct), each through a
    Relu: ``inputs * symbols`` symbols for --symbolic to find formulas in."""
    names = [f"x{i}" for i in range(inputs)]
    nodes = [helper.make_node("Relu", [n], [f"{n}_y"]) for n in names]
    dims = [[f"s{i}_{k}" for k in range(symbols)] for i in range(inputs)]
    vis = [_vi(n, FLOAT, dim) for n, dim in zip(names, dims, strict=True)]
    outs = [_vi(f"{n}_y", FLOAT, dim) for n, dim in zip(names, dims, strict=True)]
    return _model(nodes, vis, outs).SerializeToString()


def _family_symbols(d: _Draw) -> Case:
    inputs, symbols = d.pick((1, 4, 16, 32)), d.pick((1, 4, 16))
    model = many_symbols_model(inputs, symbols)
    label = f"symbols:{inputs}x{symbols}"
    if d.chance(0.3):
        return Case(label, model, kwargs=(("symbolic", True),))
    args = ["analyze", "{model}", "--symbolic"]
    if d.chance(0.3):
        args += ["--format", d.pick(("json", "html", "markdown"))]
    return Case(label, model, cli=tuple(args))


def _family_api(d: _Draw) -> Case:
    """Library calls the CLI's checks never let through: dims past int64, a path too long."""
    what = d.pick(("dims", "input_shapes", "long_path", "llm"))
    model = SEEDS["matmul"]
    if what == "long_path":
        path = "/".join(["d" * 255] * d.int(1, 20)) + "/model.onnx"
        return Case("api:long_path", model, model_path=d.pick((path, "m" * 5000)))
    big = int(d.pick(BIG_DIMS[3:])) * d.pick((1, 2, -1))
    if what == "dims":
        return Case("api:dims", model, kwargs=(("dims", {"batch": big}),))
    if what == "input_shapes":
        return Case("api:input_shapes", model, kwargs=(("input_shapes", {"a": [big, 5, 3]}),))
    kwargs = (("prompt", abs(big)), ("generate", d.pick((1, 2, 10**9))), ("batch", 1))
    return Case("api:llm", derived_dims_model("past_seq + seq"), api="llm", kwargs=kwargs)


FAMILIES: dict[str, Callable[[_Draw], Case]] = {
    "derived": _family_derived,
    "scopes": _family_deep_scopes,
    "functions": _family_functions,
    "llm": _family_llm,
    "ort_peak": _family_ort_peak,
    "symbols": _family_symbols,
    "reordered": _family_reordered,
    "api": _family_api,
}
"""The families of issue 27, each a generator of whole cases (model, files, flags or call):
symbols is --symbolic over many inputs of many symbols (its check grid)."""


@st.composite
def family_cases(
    draw: Callable[[st.SearchStrategy[Any]], Any], families: Sequence[str] = tuple(FAMILIES)
) -> Case:
    """A case of one of ``families`` (default: all of them, equally often)."""
    d = _Draw(draw)
    return FAMILIES[d.pick(sorted(families))](d)


def generation_settings(n: int, *, derandomize: bool = False) -> settings:
    """Hypothesis settings that only generate ``n`` cases (no shrinking, no database): the
    test function hands each case to a ``Pool``, which judges it."""
    return settings(
        max_examples=n,
        derandomize=derandomize,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


# --- running cases --------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """How one case ended: ``ok`` or a finding (``crash``, ``hang``, ``modified``, ``died``)."""

    kind: str
    signature: str = ""
    detail: str = ""
    seconds: float = 0.0


def _signature(e: BaseException) -> str:
    """Exception type and the innermost onnxcost frame: one per bug, not per model."""
    frames = traceback.extract_tb(e.__traceback__)
    ours = [f for f in frames if "/onnxcost/" in f.filename]
    where = ours[-1] if ours else (frames[-1] if frames else None)
    place = f"{Path(where.filename).name}:{where.lineno} {where.name}" if where else "?"
    return f"{type(e).__name__} at {place}"


def _hash_dir(folder: Path) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _prepare_folder(folder: Path, case: Case) -> Path:
    """Write the case into an empty ``folder``, with the hostile neighbours a location may name."""
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    os.mkfifo(folder / "fifo")
    (folder / "loop").symlink_to(folder / "loop")
    (folder / "folder").mkdir()
    (folder / "folder" / "x").write_bytes(b"")
    for name, data in case.files:
        (folder / name).write_bytes(data)
    (folder / "other.onnx").write_bytes(SEEDS["conv"])
    path = Path(case.model_path)
    if not path.is_absolute():
        path = folder / path
        if case.model_path == "model.onnx":
            path.write_bytes(case.model)
    return path


# Files a CLI case may legitimately create (its outputs); every other file must be unchanged.
_OUTPUTS = ("out.txt", "annotated.onnx", "x.onnx")


def _check_unchanged(before: dict[str, str], after: dict[str, str]) -> Outcome | None:
    changed = [k for k, v in before.items() if after.get(k) != v]
    if changed:
        return Outcome("modified", f"modified {', '.join(sorted(changed))}")
    return None


def run_case(case: Case, folder: Path) -> Outcome:
    """Run one case in this process (a worker's): analyze or the CLI, then the file check."""
    start = time.perf_counter()
    path = _prepare_folder(folder, case)
    before = _hash_dir(folder)
    outcome = (
        _run_cli(case, path, folder)
        if case.cli is not None
        else _run_analyze(path, case.api, dict(case.kwargs))
    )
    after = _hash_dir(folder)
    for name in _OUTPUTS:
        if name not in before:
            after.pop(name, None)
    modified = _check_unchanged(before, after)
    result = modified or outcome
    return Outcome(result.kind, result.signature, result.detail, time.perf_counter() - start)


def _run_analyze(path: Path, api: str = "analyze", kwargs: dict[str, Any] | None = None) -> Outcome:
    import json

    import onnxcost
    from onnxcost.errors import OnnxcostError

    try:
        if api == "llm":
            from onnxcost.llm.cost import llm_report

            json.dumps(llm_report(str(path), **(kwargs or {})).to_dict(), allow_nan=False)
        else:
            analysis = onnxcost.analyze(str(path), **(kwargs or {}))
            analysis.to_json(indent=None)
    except OnnxcostError:
        pass
    except MemoryError as e:
        return Outcome("crash", "MemoryError (over the worker's memory limit)", repr(e)[:300])
    except Exception as e:
        return Outcome("crash", _signature(e), "".join(traceback.format_exception(e))[-3000:])
    return Outcome("ok")


def _expand(args: Sequence[str], path: Path, folder: Path) -> list[str]:
    return [a.replace("{model}", str(path)).replace("{dir}", str(folder)) for a in args]


def _run_cli(case: Case, path: Path, folder: Path) -> Outcome:
    assert case.cli is not None
    args = _expand(case.cli, path, folder)
    if case.process:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "onnxcost", *args],
                capture_output=True,
                text=True,
                timeout=60,
                cwd=folder,
                env={**os.environ, "COLUMNS": "100"},
            )
        except subprocess.TimeoutExpired:
            return Outcome("hang", "onnxcost process ran past 60 s", " ".join(args))
        if done.returncode not in (0, 1, 2) or "Traceback" in done.stderr:
            last = done.stderr.strip().splitlines()[-1:] or [""]
            return Outcome(
                "crash", f"process exit {done.returncode}: {last[0][:120]}", done.stderr[-3000:]
            )
        return Outcome("ok")
    from typer.testing import CliRunner

    from onnxcost.cli.app import app

    result = CliRunner().invoke(app, args, env={"COLUMNS": "100"})
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        detail = "".join(traceback.format_exception(exc))[-3000:]
        return Outcome("crash", f"cli: {_signature(exc)}", f"{args}\n{detail}")
    if result.exit_code not in (0, 1, 2) or "Traceback" in result.output:
        return Outcome("crash", f"cli exit {result.exit_code}", f"{args}\n{result.output[-2000:]}")
    if result.exit_code == 0 and _json_on_stdout(args) and _non_finite_json(result.stdout):
        return Outcome("crash", "cli: NaN or Infinity in JSON", f"{args}\n{result.stdout[-2000:]}")
    return Outcome("ok")


def _json_on_stdout(args: Sequence[str]) -> bool:
    pairs = set(itertools.pairwise(args))
    to_file = any(a in ("-o", "--output") for a in args)
    return not to_file and bool(pairs & {("--format", "json"), ("-f", "json")})


def _non_finite_json(text: str) -> bool:
    """Whether ``text`` is JSON that holds NaN or Infinity (which strict parsers refuse)."""
    import json

    def refuse(name: str) -> None:
        raise OverflowError(name)

    try:
        json.loads(text, parse_constant=refuse)
    except OverflowError:
        return True
    except ValueError:  # not JSON alone (a warning beside it): no claim on it here
        return False
    return False


def _worker(conn: multiprocessing.connection.Connection, memory_bytes: int) -> None:
    """A worker process: runs cases sent over ``conn`` until it gets None."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    sys.setrecursionlimit(5000)
    with tempfile.TemporaryDirectory(prefix="onnxcost-fuzz-") as tmp:
        folder = Path(tmp)
        while True:
            case = conn.recv()
            if case is None:
                return
            sink = io.StringIO()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                try:
                    outcome = run_case(case, folder)
                except Exception as e:  # the harness itself: report, never hide
                    outcome = Outcome("crash", f"harness: {_signature(e)}", traceback.format_exc())
            conn.send(outcome)


@dataclass
class _Slot:
    process: multiprocessing.process.BaseProcess
    conn: multiprocessing.connection.Connection
    case: Case | None = None
    started: float = 0.0


@dataclass
class Pool:
    """Worker processes that each run many cases; one that times out or dies is replaced.

    Cases go in with ``submit`` (which waits for a free worker); finished ones come back from
    ``submit`` and ``drain`` as (case, outcome) pairs.
    """

    workers: int = 1
    timeout_s: float = 20.0
    memory_bytes: int = 3 * 2**30
    _slots: list[_Slot] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Import what the workers run before forking them: a replaced worker starts warm.
        import importlib

        import onnxcost.cli.app  # noqa: F401

        importlib.import_module("onnxcost.api").analyze(SEEDS["conv"])  # lazy caches too
        self._ctx = multiprocessing.get_context("fork")
        self._slots = [self._start() for _ in range(self.workers)]

    def _start(self) -> _Slot:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(target=_worker, args=(child, self.memory_bytes), daemon=True)
        process.start()
        child.close()
        return _Slot(process, parent)

    def _replace(self, slot: _Slot) -> None:
        slot.process.kill()
        slot.process.join(5)
        slot.conn.close()
        fresh = self._start()
        slot.process, slot.conn, slot.case = fresh.process, fresh.conn, None

    def _collect(self, wait: float) -> list[tuple[Case, Outcome]]:
        busy = [s for s in self._slots if s.case is not None]
        done: list[tuple[Case, Outcome]] = []
        if not busy:
            return done
        ready = multiprocessing.connection.wait([s.conn for s in busy], timeout=wait)
        now = time.perf_counter()
        for slot in busy:
            case = slot.case
            assert case is not None
            if slot.conn in ready:
                try:
                    outcome: Outcome = slot.conn.recv()
                except (EOFError, OSError):
                    code = slot.process.exitcode
                    outcome = Outcome("died", f"worker died (exit {code})", case.label)
                    self._replace(slot)
                else:
                    if outcome.kind == "crash" and (
                        outcome.signature.startswith(("MemoryError", "harness:"))
                    ):
                        # Its address space may stay taken (glibc keeps freed arenas): every
                        # later case there would fail in the harness. A fresh worker instead.
                        self._replace(slot)
                slot.case = None
                done.append((case, outcome))
            elif now - slot.started > self.timeout_s:
                self._replace(slot)
                family = case.label.split(":")[0].split("+")[0]  # one signature per family
                signature = f"over {self.timeout_s:g} s ({family})"
                done.append((case, Outcome("hang", signature, case.label, now - slot.started)))
        return done

    def submit(self, case: Case) -> list[tuple[Case, Outcome]]:
        done: list[tuple[Case, Outcome]] = []
        while True:
            free = next((s for s in self._slots if s.case is None), None)
            if free is not None:
                break
            done += self._collect(wait=0.5)
        free.case, free.started = case, time.perf_counter()
        free.conn.send(case)
        return done

    def drain(self) -> list[tuple[Case, Outcome]]:
        done: list[tuple[Case, Outcome]] = []
        while any(s.case is not None for s in self._slots):
            done += self._collect(wait=0.5)
        return done

    def close(self) -> None:
        for slot in self._slots:
            with contextlib.suppress(OSError, BrokenPipeError):
                slot.conn.send(None)
            slot.process.join(2)
            if slot.process.is_alive():
                slot.process.kill()

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_all(cases: Iterator[Case] | Sequence[Case], pool: Pool) -> list[tuple[Case, Outcome]]:
    """Every case through ``pool``; the (case, outcome) pairs in completion order."""
    results: list[tuple[Case, Outcome]] = []
    for case in cases:
        results += pool.submit(case)
    results += pool.drain()
    return results
