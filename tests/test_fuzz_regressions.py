"""Crashes, hangs and wrong counts found by fuzzing (issue 11), each with its minimal model.

Every test failed before its fix: an uncaught exception, an allocation of gigabytes, an
exponential walk, or a count that should not exist. A model may be malformed; what
onnxcost owes it is a result or one of its own errors, in bounded time and memory.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import fuzzing
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

import onnxcost
from onnxcost.analysis.records import NodeRecord
from onnxcost.cli.app import app
from onnxcost.errors import GraphError
from onnxcost.load import graph
from onnxcost.shapes import folding as shapes

INT64, FLOAT, BOOL = TensorProto.INT64, TensorProto.FLOAT, TensorProto.BOOL


def _vi(name: str, elem: int = FLOAT, shape: list[int] | None = None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    inits: list[onnx.TensorProto] | None = None,
    *,
    opset: int = 21,
    functions: list[onnx.FunctionProto] | None = None,
) -> onnx.ModelProto:
    opsets = [helper.make_opsetid("", opset)]
    if functions:
        opsets.append(helper.make_opsetid("local", 1))
    graph_ = helper.make_graph(nodes, "g", inputs, outputs, inits or [])
    return helper.make_model(graph_, opset_imports=opsets, functions=functions or [], ir_version=10)


def _records(model: onnx.ModelProto) -> dict[str, NodeRecord]:
    return {n.op_type: n for n in onnxcost.analyze(model).nodes}


def _int_constant(name: str, value: int) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [name], value=helper.make_tensor(name, INT64, [], [value])
    )


def _constant_of_shape(dims: list[int], elem: int) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Constant", [], ["s"], value_ints=dims),
        helper.make_node(
            "ConstantOfShape", ["s"], ["y"], value=helper.make_tensor("v", elem, [1], [1])
        ),
        helper.make_node("Shape", ["y"], ["z"]),
    ]
    return _model(nodes, [], [_vi("z", INT64)])


def test_fold_never_materialises_constant_of_shape_above_its_limit() -> None:
    # ConstantOfShape([16384, 16384]) float32 is 16384 x 16384 x 4 = 1 GiB; folding keeps at
    # most 2**16 elements, so the value must be refused from its shape, never allocated.
    tracemalloc.start()
    try:
        records = _records(_constant_of_shape([16384, 16384], FLOAT))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert records["ConstantOfShape"].output_shapes == ((16384, 16384),)
    assert peak < 64 * 2**20


def test_fold_never_materialises_a_huge_range() -> None:
    # Range(0, 2**29, 1) int64 would be 2**29 x 8 bytes = 4 GiB; its length is known all the same.
    tracemalloc.start()
    try:
        nodes = [_int_constant("a", 0), _int_constant("b", 2**29), _int_constant("c", 1)]
        nodes.append(helper.make_node("Range", ["a", "b", "c"], ["y"]))
        records = _records(_model(nodes, [], [_vi("y", INT64)]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert records["Range"].output_shapes == ((2**29,),)
    assert peak < 64 * 2**20


def test_fold_never_materialises_a_broadcast_product() -> None:
    # [65536, 1] + [1, 65536]: both inputs fold (2**16 elements each), their sum would be 2**32.
    nodes = [
        helper.make_node("ConstantOfShape", ["s1"], ["a"]),
        helper.make_node("ConstantOfShape", ["s2"], ["b"]),
        helper.make_node("Add", ["a", "b"], ["y"]),
    ]
    inits = [
        helper.make_tensor("s1", INT64, [2], [65536, 1]),
        helper.make_tensor("s2", INT64, [2], [1, 65536]),
    ]
    tracemalloc.start()
    try:
        records = _records(_model(nodes, [], [_vi("y")], inits))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert records["Add"].output_shapes == ((65536, 65536),)
    assert peak < 64 * 2**20


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dims", "elem"), [([16384, 16384], FLOAT), ([32768, 32768], INT64)], ids=["1GiB", "8GiB"]
)
def test_constant_of_shape_model_stays_small_in_a_fresh_process(
    tmp_path: Path, dims: list[int], elem: int
) -> None:
    # A ~130-byte model; its analysis peaks under 150 MB resident (it took 1 GiB and 8.2 GB).
    path = tmp_path / "cos.onnx"
    onnx.save_model(_constant_of_shape(dims, elem), path)
    code = (
        "import resource, sys, onnxcost\n"
        "onnxcost.analyze(sys.argv[1])\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert path.stat().st_size < 200
    assert int(out.stdout.split()[-1]) * 1024 < 150 * 10**6  # ru_maxrss is in KiB on Linux


def test_int64_raw_data_not_a_multiple_of_8_is_an_unknown_value() -> None:
    shape = helper.make_tensor("s", INT64, [2], [1, 2])
    shape.ClearField("int64_data")
    shape.raw_data = b"\x01" * 13  # two int64 need 16 bytes
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    records = _records(_model(nodes, [_vi("x", FLOAT, [2])], [_vi("y")], [shape]))
    assert records["Reshape"].status == "unknown_shape"


def _value_int_holding(value: str | float) -> onnx.NodeProto:
    constant = helper.make_node("Constant", [], ["s"], value_int=1)
    attr = constant.attribute[0]
    attr.ClearField("i")
    if isinstance(value, str):
        attr.type, attr.s = onnx.AttributeProto.STRING, value.encode()
    else:
        attr.type, attr.f = onnx.AttributeProto.FLOAT, value
    return constant


@pytest.mark.parametrize("value", ["abc", float("inf")])
def test_constant_value_int_holding_a_string_or_infinity(value: str | float) -> None:
    nodes = [_value_int_holding(value), helper.make_node("Reshape", ["x", "s"], ["y"])]
    records = _records(_model(nodes, [_vi("x", FLOAT, [2])], [_vi("y")]))
    assert records["Reshape"].status == "unknown_shape"


def test_opset_past_int32() -> None:
    # onnx.defs.get_schema takes a C int: 2**40 raised TypeError.
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    records = _records(_model(nodes, [_vi("x", FLOAT, [2])], [_vi("y")], opset=2**40))
    assert records["Relu"].status in ("ok", "unsupported", "unknown_shape")


def test_if_without_branches() -> None:
    nodes = [helper.make_node("If", ["c"], ["y"])]
    record = _records(_model(nodes, [_vi("c", BOOL, [])], [_vi("y")]))["If"]
    assert (record.status, record.note) == (
        "error",
        "not costed: If without a then_branch and an else_branch",
    )


def test_scan_without_body() -> None:
    nodes = [helper.make_node("Scan", ["x"], ["y"], num_scan_inputs=1)]
    record = _records(_model(nodes, [_vi("x", FLOAT, [2, 3])], [_vi("y")]))["Scan"]
    assert (record.status, record.note) == ("error", "not costed: no body graph")


def test_scan_axis_past_the_rank_counts_one_iteration() -> None:
    body = helper.make_graph(
        [helper.make_node("Identity", ["xi"], ["yo"])],
        "body",
        [_vi("xi", FLOAT, [3])],
        [_vi("yo", FLOAT, [3])],
    )
    node = helper.make_node("Scan", ["x"], ["y"], num_scan_inputs=1, body=body, scan_input_axes=[5])
    record = _records(_model([node], [_vi("x", FLOAT, [2, 3])], [_vi("y")]))["Scan"]
    assert record.note == "one iteration counted: the scanned axis length is unknown"


def test_shape_without_input() -> None:
    nodes = [helper.make_node("Shape", [], ["y"])]
    assert _records(_model(nodes, [], [_vi("y", INT64)]))["Shape"].status == "unknown_shape"


def test_loop_with_negative_trip_count_runs_no_iteration() -> None:
    # Trip count -5: ONNX runs zero iterations; the body's MatMul [4,4]x[4,4] (64 MACs each
    # iteration) must count 0 x 64 = 0, not -5 x 64 = -320.
    analysis = onnxcost.analyze(fuzzing.seed_loop(trip_count=-5))
    assert analysis.totals.macs == 0
    assert all(n.macs >= 0 and n.flops >= 0 for n in analysis.nodes)


def test_recursive_local_function_is_a_graph_error() -> None:
    call = helper.make_node("F", ["x"], ["y"], domain="local")
    function = helper.make_function(
        "local",
        "F",
        ["x"],
        ["y"],
        [call],
        [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)],
    )
    model = _model([call], [_vi("x", FLOAT, [2])], [_vi("y")], functions=[function])
    with pytest.raises(GraphError, match=r"local functions cannot be inlined.*recursive"):
        onnxcost.analyze(model)


def _doubling_functions(levels: int) -> onnx.ModelProto:
    """F1 is one Relu; F<l> calls F<l-1> twice; the graph calls F<levels> once: the file
    writes 1 + 1 + 2 * (levels - 1) nodes, which inline to 2**(levels - 1) Relus."""
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)]
    functions = [
        helper.make_function(
            "local", "F1", ["x"], ["y"], [helper.make_node("Relu", ["x"], ["y"])], opsets[:1]
        )
    ]
    for level in range(2, levels + 1):
        twice = [
            helper.make_node(f"F{level - 1}", ["x"], ["t"], domain="local"),
            helper.make_node(f"F{level - 1}", ["t"], ["y"], domain="local"),
        ]
        functions.append(helper.make_function("local", f"F{level}", ["x"], ["y"], twice, opsets))
    call = helper.make_node(f"F{levels}", ["x"], ["y"], domain="local")
    return _model([call], [_vi("x", FLOAT, [4])], [_vi("y")], functions=functions)


def test_functions_that_inline_to_half_a_million_nodes_are_refused_before_inlining() -> None:
    # 20 levels: 2**19 = 524,288 Relus from 1 + 1 + 2 * 19 = 40 nodes written (a 1.6 KB file),
    # over max(100,000, 100 * 40 = 4,000). Inlined, they took 8 to 36 s and 1 to 2.7 GB.
    model = _doubling_functions(20)
    assert model.ByteSize() < 2_000
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(GraphError) as raised:
            onnxcost.analyze(model)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 10
    assert peak < 100_000_000
    message = str(raised.value)
    assert "would inline to 524,288 nodes from the 40 the file writes" in message
    assert "function 'local.F20', called once, inlines to 524,288 nodes" in message
    assert "onnx.inliner.inline_local_functions" in message
    assert "\n" not in message


def test_cli_refuses_functions_that_inline_too_far_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "doubling.onnx"
    onnx.save(_doubling_functions(20), path)
    result = CliRunner().invoke(app, ["analyze", str(path)])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1
    assert result.output.startswith("onnxcost: error: the model's local functions would inline")


def test_the_inlined_node_limit_is_the_larger_of_its_floor_and_per_node_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 10 levels: 2**9 = 512 Relus from 1 + 1 + 2 * 9 = 20 nodes written.
    model = _doubling_functions(10)
    assert graph.inlined_node_count(model) == 512
    monkeypatch.setattr(graph, "INLINED_NODES_MIN", 512)
    monkeypatch.setattr(graph, "INLINED_NODES_PER_NODE", 1)
    assert onnxcost.analyze(model).totals.flops == 512 * 4  # a Relu of 4 elements: 4 FLOPs
    monkeypatch.setattr(graph, "INLINED_NODES_MIN", 511)
    with pytest.raises(GraphError, match="inline to 512 nodes from the 20 the file writes"):
        onnxcost.analyze(model)
    monkeypatch.setattr(graph, "INLINED_NODES_PER_NODE", 26)  # 26 * 20 = 520 >= 512
    assert onnxcost.analyze(model).totals.flops == 2_048


def test_a_thousand_levels_of_doubling_functions_are_counted_without_recursion() -> None:
    # 2**999 nodes: the count stops at 10**18 (no recursion, no huge integers)
    start = time.perf_counter()
    with pytest.raises(GraphError, match=r"inline to over 999,999,999,999,999,999 nodes"):
        onnxcost.analyze(_doubling_functions(1_000))
    assert time.perf_counter() - start < 5


def test_functions_calling_each_other_in_a_circle_are_refused() -> None:
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)]
    f = helper.make_function(
        "local", "F", ["x"], ["y"], [helper.make_node("G", ["x"], ["y"], domain="local")], opsets
    )
    g = helper.make_function(
        "local", "G", ["x"], ["y"], [helper.make_node("F", ["x"], ["y"], domain="local")], opsets
    )
    call = helper.make_node("F", ["x"], ["y"], domain="local")
    model = _model([call], [_vi("x", FLOAT, [2])], [_vi("y")], functions=[f, g])
    with pytest.raises(GraphError, match=r"'local.F' is recursive: local.F -> local.G -> local.F"):
        onnxcost.analyze(model)


def test_a_function_calling_itself_inside_an_if_branch_is_refused() -> None:
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("local", 1)]
    again = helper.make_graph(
        [helper.make_node("F", ["x", "c"], ["o"], domain="local")], "again", [], [_vi("o")]
    )
    stop = helper.make_graph([helper.make_node("Relu", ["x"], ["o"])], "stop", [], [_vi("o")])
    body = [helper.make_node("If", ["c"], ["y"], then_branch=again, else_branch=stop)]
    f = helper.make_function("local", "F", ["x", "c"], ["y"], body, opsets)
    call = helper.make_node("F", ["x", "c"], ["y"], domain="local")
    model = _model([call], [_vi("x", FLOAT, [2]), _vi("c", BOOL, [])], [_vi("y")], functions=[f])
    with pytest.raises(GraphError, match=r"'local.F' is recursive: local.F -> local.F"):
        onnxcost.analyze(model)


def test_function_called_with_more_inputs_than_declared_is_a_graph_error() -> None:
    function = helper.make_function(
        "local",
        "G",
        ["x"],
        ["y"],
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_opsetid("", 21)],
    )
    call = helper.make_node("G", ["x", "x", "x"], ["y"], domain="local")
    model = _model([call], [_vi("x", FLOAT, [2])], [_vi("y")], functions=[function])
    with pytest.raises(GraphError, match="Number of actual parameters cannot exceed"):
        onnxcost.analyze(model)


def _nested_if(depth: int) -> onnx.ModelProto:
    leaf = helper.make_graph(
        [helper.make_node("Constant", [], ["o"], value_float=1.0)],
        "leaf",
        [],
        [_vi("o", FLOAT, [])],
    )
    body = leaf
    for level in range(depth):
        node = helper.make_node("If", ["c"], ["o"], then_branch=body, else_branch=leaf)
        body = helper.make_graph([node], f"level{level}", [], [_vi("o", FLOAT, [])])
    return _model(list(body.node), [_vi("c", BOOL, [])], [_vi("o")])


def test_deeply_nested_if_is_walked_once_per_branch() -> None:
    # 24 levels: each If walked both branches twice, 2**24 walks of the innermost (16 s at
    # 18 levels). Once per branch, the 24 Ifs and 25 Constants are recorded in milliseconds.
    start = time.perf_counter()
    analysis = onnxcost.analyze(_nested_if(24))
    assert time.perf_counter() - start < 5
    assert [n.op_type for n in analysis.nodes].count("If") == 24


def test_nesting_deeper_than_the_limit_is_a_graph_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # protobuf refuses to parse much past 30 levels, so the limit (64) is shown at 3.
    monkeypatch.setattr(graph, "MAX_NESTING", 3)
    onnxcost.analyze(_nested_if(3))
    with pytest.raises(GraphError, match="nest more than 3 deep"):
        onnxcost.analyze(_nested_if(4))


def test_if_branch_choice_is_unchanged_by_walking_once() -> None:
    # then: MatMul [2,3]x[3,4] = 24 MACs; else: MatMul [2,3]x[3,5] = 30 MACs: else counts.
    def branch(name: str, n: int) -> onnx.GraphProto:
        weight = helper.make_tensor(f"w_{name}", FLOAT, [3, n], np.ones(3 * n))
        node = helper.make_node("MatMul", ["x", f"w_{name}"], [f"o_{name}"], name=f"mm_{name}")
        return helper.make_graph([node], name, [], [_vi(f"o_{name}", FLOAT, None)], [weight])

    node = helper.make_node(
        "If", ["c"], ["y"], then_branch=branch("then", 4), else_branch=branch("else", 5)
    )
    analysis = onnxcost.analyze(
        _model([node], [_vi("c", BOOL, []), _vi("x", FLOAT, [2, 3])], [_vi("y")])
    )
    assert analysis.totals.macs == 30
    assert "totals take the larger (else_branch)" in analysis.nodes[0].note
    assert sum(r.macs for r in analysis.by_op_type) == 30


runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input-shape", "x=1x3x99999999999999999999x8"], "a dim is larger than 2**62"),
        (["--dim", "N=99999999999999999999999"], "N must be between 0 and 2**62"),
        (["--dim", "N=²"], "is not SYMBOL=N"),
        (["--input-shape", "x=1x²"], "is not NAME=DIMS"),
    ],
)
def test_shape_flags_that_tracebacked_are_usage_errors(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["analyze", "mlp", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_budget_of_5000_digits_is_a_usage_error() -> None:
    result = runner.invoke(app, ["check", "mlp", "--max-macs", "9" * 5000])
    assert result.exit_code == 2
    assert "larger than any model" in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--no-weights", "--param", "layers=100000"], "layers=100000 is too large"),
        (["--seed", "-1"], "seed -1 is out of range"),
        (["--param", "layers=²"], "pass an integer"),
        (["--no-weights", "--param", "vocab=2000000000"], "more than any file onnxcost writes"),
        ([], "pass --no-weights"),
    ],
)
def test_zoo_save_refuses_what_it_cannot_write(
    tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "llama.onnx"
    result = runner.invoke(app, ["zoo", "save", "llama", str(out), *args])
    assert result.exit_code == 2
    assert message in result.output
    assert not out.exists()


def test_naming_many_nodes_of_one_name_is_linear() -> None:
    # 20,000 nodes named "n": each took the first free suffix by trying _1, _2, ... from 1,
    # 20,000**2 / 2 = 2e8 set lookups (a 4,095-node nested-If model spent 4 s here).
    nodes = [
        helper.make_node("Identity", [f"t{i}"], [f"t{i + 1}"], name="n") for i in range(20_000)
    ]
    g = helper.make_graph(nodes, "g", [_vi("t0", FLOAT, [1])], [_vi("t20000")])
    start = time.perf_counter()
    graph.name_nodes(g)
    assert time.perf_counter() - start < 5
    names = [n.name for n in g.node]
    assert names[:3] == ["n", "n_1", "n_2"]
    assert names[-1] == "n_19999"
    assert len(set(names)) == 20_000


@pytest.mark.parametrize("dims", [[2, 2**62, 0], [-2, -2], [0, -1]])
def test_initializer_dims_numpy_cannot_hold(dims: list[int]) -> None:
    # Found by the fuzzer (reshape_chain+data+data): an int64 tensor of dims (2, 2**62, 0) has
    # 0 elements, so its empty data "fits", and numpy's reshape raised ValueError. Negative
    # dims likewise. Its value is unknown, like any tensor whose data does not fit.
    tensor = onnx.TensorProto()
    tensor.name, tensor.data_type = "s", INT64
    tensor.dims.extend(dims)
    tensor.raw_data = b""
    assert shapes._tensor_to_array(tensor) is None
    tensor.ClearField("raw_data")
    assert shapes._tensor_to_array(tensor) is None


def test_analysis_json_of_an_op_type_that_is_not_utf8() -> None:
    # Found by hand beside the fuzzer: protobuf hands out bytes for a string field that is not
    # UTF-8; Analysis.to_json() raised TypeError (the CLI's JSON writer already escaped them).
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", FLOAT, [2])], [_vi("y")])
    data = model.SerializeToString().replace(b"Relu", b"R\xffl\xfe")
    text = onnxcost.analyze(data).to_json()
    assert '"op_type": "R\\\\xffl\\\\xfe"' in text


def test_unknown_shape_note_of_an_op_type_that_is_not_utf8() -> None:
    # Found by the fuzzer (reshape_chain+data+utf8): the unknown_shape note asked
    # onnx.defs.has(op_type) with op_type as bytes: TypeError.
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", FLOAT, [2])], [_vi("y")])
    data = model.SerializeToString().replace(b"Relu", b"R\xffl\xfe")
    record = onnxcost.analyze(data).nodes[0]
    assert record.op_type == "R\\xffl\\xfe"  # as text, each undecodable byte as \\xff
    assert record.status in ("unsupported", "unknown_shape")


def test_op_type_summary_sorts_names_that_are_not_utf8() -> None:
    # Found by the fuzzer (loop+utf8): two op types tied on every figure are ordered by name,
    # and a bytes name (not UTF-8) against a str one raised TypeError.
    nodes = [
        helper.make_node("Fooo", ["x"], ["a"], domain="com.unknown"),
        helper.make_node("Barr", ["x"], ["b"], domain="com.unknown"),
    ]
    model = _model(nodes, [_vi("x", FLOAT, [2])], [_vi("a"), _vi("b")])
    model.opset_import.append(helper.make_opsetid("com.unknown", 1))
    data = model.SerializeToString().replace(b"Barr", b"B\xffrr")
    ops = {s.op_type for s in onnxcost.analyze(data).by_op_type}
    assert ops == {"Fooo", "B\\xffrr"}


def test_peak_activation_sorts_tensor_names_that_are_not_utf8() -> None:
    # Found by the fuzzer (llama_mlp_source+...+utf8): the tensors live at the peak are
    # listed by size then name; a bytes name beside a str one raised TypeError.
    nodes = [helper.make_node("Add", ["x1", "q9"], ["z"])]
    model = _model(nodes, [_vi("x1", FLOAT, [2]), _vi("q9", FLOAT, [2])], [_vi("z")])
    data = model.SerializeToString().replace(b"q9", b"\xff9")
    # x1, the renamed q9 and z (2 floats, 8 bytes each) are live at the Add: 24 bytes. The name
    # is text (\\xff9) before ONNX's inference reads it (load.names), so z is typed; while it
    # stayed bytes, ONNX's inference could not type z and the peak was 16.
    a = onnxcost.analyze(data)
    assert a.totals.peak_activation_bytes == 24
    assert a.nodes[0].inputs == ("x1", "\\xff9")


def _not_utf8_node_name(tmp_path: Path) -> Path:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="/blk/nm1")]
    model = _model(nodes, [_vi("x", FLOAT, [2])], [_vi("y")])
    path = tmp_path / "name.onnx"
    path.write_bytes(model.SerializeToString().replace(b"nm1", b"n\xff1"))
    return path


@pytest.mark.parametrize("args", [["-f", "netron"], ["-f", "html", "--top", "1"], ["--depth", "2"]])
def test_reports_of_a_node_name_that_is_not_utf8(tmp_path: Path, args: list[str]) -> None:
    # Found by the fuzzer (CLI, +utf8): netron's target_of, the scope tree's scope_parts
    # split the bytes name with a str separator: TypeError.
    result = runner.invoke(app, ["analyze", str(_not_utf8_node_name(tmp_path)), *args])
    assert result.exit_code == 0, result.output
    assert result.exception is None


def test_cycle_error_of_names_that_are_not_utf8() -> None:
    # Found by the fuzzer (CLI, conv+wiring+utf8): the cycle message joined bytes names.
    nodes = [
        helper.make_node("Relu", ["b"], ["a"], name="na1"),
        helper.make_node("Relu", ["a"], ["b"], name="nb2"),
    ]
    model = _model(nodes, [], [_vi("b")])
    data = model.SerializeToString().replace(b"nb2", b"n\xff2")
    with pytest.raises(GraphError, match=r"cycle.*na1 -> n\\xff2 -> na1"):
        onnxcost.analyze(data)


def test_compare_a_model_whose_opset_is_past_int32(tmp_path: Path) -> None:
    # Found by the long CLI fuzz run (compare A mlp): compare's layer attributes asked
    # onnx.defs.get_schema for opset 2**40, which takes a C int: TypeError.
    path = tmp_path / "big_opset.onnx"
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    weight = helper.make_tensor("w", FLOAT, [2, 3], np.ones(6))
    model = _model(nodes, [_vi("x", FLOAT, [1, 2])], [_vi("y")], [weight], opset=2**40)
    onnx.save_model(model, path)
    result = runner.invoke(app, ["compare", str(path), "mlp"])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code in (0, 1), result.output


def test_packed_weight_count_with_an_invalid_attribute() -> None:
    # Found by the long fuzz run (mlp_nbits4+attr): MatMulNBits' logical weight count reads
    # N x K; N set to a string raised InvalidAttributeError out of the weight count.
    node = helper.make_node(
        "MatMulNBits",
        ["a", "b", "s"],
        ["y"],
        domain="com.microsoft",
        K=16,
        N="four",
        bits=4,
        block_size=16,
    )
    inits = [
        helper.make_tensor("b", TensorProto.UINT8, [4, 1, 8], [1] * 32),
        helper.make_tensor("s", FLOAT, [4], [1.0] * 4),
    ]
    model = _model([node], [_vi("a", FLOAT, [1, 16])], [_vi("y")], inits)
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    record = _records(model)["MatMulNBits"]
    assert record.status == "error"
    assert "attribute N='four' is not an integer" in record.note


def test_unsupported_op_types_that_are_not_utf8_are_listed() -> None:
    # Found by the long fuzz run (+utf8): the unsupported list sorted a bytes op type
    # beside a str one: TypeError.
    nodes = [
        helper.make_node("Fooo", ["x"], ["a"], domain="com.unknown"),
        helper.make_node("Barr", ["x"], ["b"]),
    ]
    model = _model(nodes, [_vi("x", FLOAT, [2])], [_vi("a"), _vi("b")])
    model.opset_import.append(helper.make_opsetid("com.unknown", 1))
    data = model.SerializeToString().replace(b"Barr", b"B\xffrr")
    assert onnxcost.analyze(data).unsupported == ("B\\xffrr", "com.unknown::Fooo")


def test_compare_takes_an_op_type_that_is_not_utf8(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("QQQQ", ["x"], ["y"], name="n0")], "g", [x], [y])
    data = helper.make_model(graph).SerializeToString()
    path = tmp_path / "bad.onnx"
    path.write_bytes(data.replace(b"QQQQ", b"\xff\xfe\x1b["))  # protobuf gives bytes back
    r = CliRunner().invoke(app, ["compare", str(path), str(path)])
    assert r.exit_code == 0, r.output
    assert "\\xff\\xfe\\x1b[" in r.output


FOUND = Path(__file__).resolve().parent / "data" / "fuzz"


@pytest.mark.parametrize(
    "name",
    [
        # MatMulNBits whose N attribute is a graph: onnxcost's shape rule called int() on it.
        "matmulnbits_graph_attribute.onnx",
        # DynamicQuantizeLSTM with hidden_size=inf: OverflowError in the shape rule.
        "dynamic_quantize_lstm_inf_hidden.onnx",
        # An input dim whose dim_param is not UTF-8 (protobuf gives bytes): TypeError in the
        # warning about unset symbols.
        "dim_param_not_utf8.onnx",
    ],
)
def test_models_found_by_the_long_run(name: str) -> None:
    """Each file is the fuzzer's own case (seed 101, 100,000 in-process cases)."""
    with contextlib.suppress(onnxcost.OnnxcostError):
        onnxcost.analyze(FOUND / name)


def test_an_input_whose_name_is_not_utf8_with_an_unknown_dim() -> None:
    """The final long run's finding (seed 109, case 60,000 or so): an input named b'\\xff0' whose
    dim is unknown, defaulted to 1; joining the input names for the warning mixed bytes with
    str. The warning names the input as text, its byte escaped."""
    a = onnxcost.analyze(FOUND / "input_name_not_utf8.onnx")
    assert any("of input '\\xff0' is unknown; using 1" in w for w in a.warnings), a.warnings


def test_html_lists_an_input_whose_name_is_not_utf8_as_text() -> None:
    # The HTML's inputs list read the name from protobuf as bytes and showed its repr,
    # "input b'\\xff0'"; names are text from preparing on (load.names): "input \\xff0".
    path = FOUND / "input_name_not_utf8.onnx"
    r = CliRunner().invoke(app, ["analyze", str(path), "--format", "html"])
    assert r.exit_code == 0, r.output
    assert "<li>input \\xff0: float32[1]</li>" in r.output
    assert "b&#39;" not in r.output


def test_symbolic_with_a_dim_param_that_is_not_utf8() -> None:
    """A CLI run's finding (seed 117, once ``--symbolic`` was among the fuzzed flags): the
    symbols were read from protobuf as they came, bytes for one that is not UTF-8, and
    ``bytes.isidentifier`` does not exist. Symbols are text, the byte escaped: here the
    input's dim, the bytes 'b' 0xE1 'tch', is the text 'b\\xe1tch': no identifier, so the
    formulas call it b_xe1tch (``shapes.derived.python_names``)."""
    path = FOUND / "dim_param_not_utf8.onnx"
    r = CliRunner().invoke(app, ["analyze", str(path), "--symbolic", "--format", "json"])
    assert r.exit_code == 0, r.output
    assert isinstance(r.exception, SystemExit | type(None))
    assert json.loads(r.stdout)["symbols"] == ["b_xe1tch"]


def test_llm_on_an_input_whose_name_is_not_utf8() -> None:
    """Found reading the code after seed 117's finding: ``llm`` matched the input names, bytes
    for one that is not UTF-8, against a text pattern (TypeError). Names are text: this
    model has no KV cache, which is said in one line."""
    path = FOUND / "input_name_not_utf8.onnx"
    r = CliRunner().invoke(app, ["llm", str(path), "--prompt", "4", "--generate", "2"])
    assert r.exit_code == 1, r.output
    assert isinstance(r.exception, SystemExit)
    assert "no KV cache found" in r.output


def test_compare_shape_flag_beside_an_input_whose_name_is_not_utf8() -> None:
    """A CLI run's finding (seed 121): ``compare --input-shape`` naming no model's input
    listed the inputs there are, one of them bytes (not UTF-8), and the join raised
    TypeError. Input names are text in compare, as in the analysis: one line, exit 1."""
    path = FOUND / "input_name_not_utf8.onnx"
    r = CliRunner().invoke(app, ["compare", str(path), "mlp", "--input-shape", "c=1"])
    assert r.exit_code == 1, r.output
    assert isinstance(r.exception, SystemExit)
    assert "--input-shape names 'c', which no model has; inputs are A: \\xff0" in r.output


def test_compare_of_a_scan_body_whose_op_type_is_not_utf8() -> None:
    """The long CLI run's finding (seed 102): a Scan body's op type came out of protobuf as
    bytes and sorting compare's op-type rows mixed bytes with str."""
    path = FOUND / "scan_body_op_type_not_utf8.onnx"
    r = CliRunner().invoke(app, ["compare", str(path), "mlp", "--format", "markdown"])
    assert r.exit_code in (0, 1), r.output
    assert "Traceback" not in r.output
    assert isinstance(r.exception, SystemExit | type(None))
