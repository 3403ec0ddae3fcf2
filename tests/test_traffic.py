"""Memory traffic (onnxcost/analysis/traffic.py): what a runtime moves (``traffic="runtime"``,
the default) and every input and output whole (``traffic="all-inputs"``), with the bytes
split by role: weights, activations, KV cache. Expected bytes worked by hand in comments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnxcost_testing import analyze_text, parse
from typer.testing import CliRunner

import onnxcost
from onnxcost.analysis.records import NodeRecord
from onnxcost.cli.app import app
from onnxcost.errors import UsageError

MODELS = Path(__file__).resolve().parents[1] / "models"


def node(text: str, op_type: str, traffic: str = "runtime") -> NodeRecord:
    found = [n for n in analyze_text(text, traffic=traffic).nodes if n.op_type == op_type]
    assert len(found) == 1, [n.op_type for n in found]
    return found[0]


def split(n: NodeRecord) -> tuple[int, int, int, int, int, int, int]:
    """(read, written, read weights, read activations, read KV cache, written activations,
    written KV cache)."""
    return (
        n.bytes_read,
        n.bytes_written,
        n.bytes_read_weights,
        n.bytes_read_activations,
        n.bytes_read_kv_cache,
        n.bytes_written_activations,
        n.bytes_written_kv_cache,
    )


EMBEDDING = """
<ir_version: 8, opset_import: ["" : 17]>
g (int64[3] ids) => (float[3, 64] y) <float[1000, 64] table = {0.0}> {
  y = Gather (table, ids)
}"""


def test_gather_reads_the_rows_it_selects() -> None:
    # 3 rows of a [1000, 64] fp32 table with int64 indices [3]: reads 3 x 64 x 4 = 768 of the
    # table (weights) + 3 x 8 = 24 of indices (activations) = 792 B, writes 3 x 64 x 4 = 768 B
    assert split(node(EMBEDDING, "Gather")) == (792, 768, 768, 24, 0, 768, 0)


def test_gather_all_inputs_reads_the_whole_table() -> None:
    # the whole table: 1,000 x 64 x 4 = 256,000 + 24 = 256,024 B
    assert split(node(EMBEDDING, "Gather", "all-inputs")) == (256_024, 768, 256_000, 24, 0, 768, 0)


@pytest.mark.parametrize(
    ("graph", "op_type", "read", "written"),
    [
        # GatherElements on axis 1 of data [4, 5] with indices [4, 2]: Y [4, 2] = 8 elements:
        # 8 x 4 + indices 8 x 8 = 96 B read, 8 x 4 = 32 written
        (
            "(float[4,5] x, int64[4,2] i) => (float[4,2] y) { y = GatherElements <axis=1> (x, i) }",
            "GatherElements",
            96,
            32,
        ),
        # GatherND of data [10, 6] with indices [2, 1]: Y [2, 6] = 12 elements: 12 x 4 + 2 x 8
        # = 64 B read, 48 written
        (
            "(float[10,6] x, int64[2,1] i) => (float[2,6] y) { y = GatherND (x, i) }",
            "GatherND",
            64,
            48,
        ),
        # Slice of rows 2..4 of x [8, 100]: Y [3, 100] = 300 x 4 = 1,200 + starts, ends, axes
        # (int64 [1] each) 24 = 1,224 read, 1,200 written
        (
            "(float[8,100] x) => (float[3,100] y) <int64[1] s = {2}, int64[1] e = {5}, "
            "int64[1] a = {0}> { y = Slice (x, s, e, a) }",
            "Slice",
            1_224,
            1_200,
        ),
    ],
)
def test_gathers_and_slices_read_what_they_select(
    graph: str, op_type: str, read: int, written: int
) -> None:
    text = f'<ir_version: 8, opset_import: ["" : 17]>\ng {graph}'
    n = node(text, op_type)
    assert (n.bytes_read, n.bytes_written) == (read, written)


def test_slice_all_inputs_reads_the_whole_input() -> None:
    # x [8, 100] whole: 3,200 + 24 = 3,224
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[8,100] x) => (float[3,100] y) <int64[1] s = {2}, int64[1] e = {5}, int64[1] a = {0}> {
  y = Slice (x, s, e, a)
}"""
    assert node(text, "Slice", "all-inputs").bytes_read == 3_224


TIED_HEAD = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,32] x) => (float[2,64] y) <float[64,32] w = {0.0}> {
  wt = Transpose <perm=[1, 0]> (w)
  y = MatMul (x, wt)
}"""


def test_a_weights_transpose_is_folded_and_its_consumer_reads_a_weight() -> None:
    # The Transpose of the weight w [64, 32] runs once at load: 0 bytes per run. The MatMul
    # reads x 2 x 32 x 4 = 256 (activations) + the transposed weight 32 x 64 x 4 = 8,192
    # (weights) = 8,448, writes 2 x 64 x 4 = 512.
    a = analyze_text(TIED_HEAD)
    transpose, matmul = a.nodes
    assert split(transpose) == (0,) * 7
    assert split(matmul) == (8_448, 512, 8_192, 256, 0, 512, 0)
    t = a.totals
    assert (t.bytes_read, t.bytes_written, t.bytes_read_weights) == (8_448, 512, 8_192)
    assert (t.bytes_read_activations, t.bytes_written_activations) == (256, 512)
    assert a.traffic == "runtime"
    assert a.to_dict()["traffic"] == "runtime"


def test_all_inputs_charges_the_transpose_each_run() -> None:
    # the Transpose reads and writes 8,192 per run; the MatMul as before: 8,192 + 8,448 read,
    # 8,192 + 512 written; params (2,048) and FLOPs the same in both conventions
    a = analyze_text(TIED_HEAD, traffic="all-inputs")
    runtime = analyze_text(TIED_HEAD)
    assert (a.totals.bytes_read, a.totals.bytes_written) == (16_640, 8_704)
    assert a.totals.bytes_read_weights == 16_384
    assert (a.totals.params, a.totals.macs, a.totals.flops) == (2_048, 4_096, 8_192)
    assert (runtime.totals.params, runtime.totals.macs, runtime.totals.flops) == (
        2_048,
        4_096,
        8_192,
    )
    assert a.traffic == "all-inputs"


def test_constant_subgraphs_cost_nothing_per_run() -> None:
    # A mask built from constants only: ConstantOfShape of a constant shape [4, 4], a Cast, a
    # Slice of the buffer by constant bounds, all folded at load (0 bytes); the Where reads the
    # folded mask (2 x 4 bool = 8 B, a weight), x and y (2 x 4 x 4 = 32 B each), writes 32.
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x, float[2,4] z) => (float[2,4] y) <int64[2] shape = {4, 4}, int64[1] s = {0},
    int64[1] e = {2}, int64[1] a = {0}> {
  ones = ConstantOfShape <value = int64[1] {1}> (shape)
  mask = Cast <to = 9> (ones)
  rows = Slice (mask, s, e, a)
  y = Where (rows, x, z)
}"""
    a = analyze_text(text)
    by_op = {n.op_type: n for n in a.nodes}
    for op in ("ConstantOfShape", "Cast", "Slice"):
        assert (by_op[op].bytes_read, by_op[op].bytes_written) == (0, 0), op
    assert split(by_op["Where"]) == (72, 32, 8, 64, 0, 32, 0)
    # all inputs: ConstantOfShape reads 16, writes 4 x 4 x 8 = 128; Cast 128 -> 16; Slice reads
    # 16 + 24, writes 8; Where 72 -> 32: read 16 + 128 + 40 + 72 = 256, written 128 + 16 + 8 + 32
    old = analyze_text(text, traffic="all-inputs").totals
    assert (old.bytes_read, old.bytes_written) == (256, 184)


def test_a_constant_node_costs_nothing_per_run() -> None:
    # Constant [16] fp32 = 64 B: written at load, not per run; its consumer reads it as a weight
    text = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[16] x) => (float[16] y) {
  c = Constant <value = float[16] {1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
                                   1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0}> ()
  y = Add (x, c)
}"""
    const, add = analyze_text(text).nodes
    assert (const.bytes_read, const.bytes_written) == (0, 0)
    assert split(add) == (128, 64, 64, 64, 0, 64, 0)
    const, add = analyze_text(text, traffic="all-inputs").nodes
    assert (const.bytes_read, const.bytes_written) == (0, 64)


KV = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,1,4] q, float[1,2,1,4] k, float[1,2,3,4] past_key)
  => (float[1,2,1,4] y, float[1,2,4,4] present_key) {
  present_key = Concat <axis=2> (past_key, k)
  kt = Transpose <perm=[0, 1, 3, 2]> (present_key)
  y = MatMul (q, kt)
}"""


def test_a_concat_built_kv_cache_is_charged_its_copies() -> None:
    # past [1, 2, 3, 4] fp32 = 96 B, new k [1, 2, 1, 4] = 32 B, present [1, 2, 4, 4] = 128 B.
    # Concat: reads past 96 (KV) + k 32 (activations), writes present 128 (KV).
    # Transpose of the cache: a copy of it, reads 128 (KV), writes 128 (KV).
    # MatMul: q [1, 2, 1, 4] x kt [1, 2, 4, 4]: reads q 32 (activations) + kt 128 (KV),
    # writes y [1, 2, 1, 4] = 32 B (activations).
    concat, transpose, matmul = analyze_text(KV).nodes
    assert split(concat) == (128, 128, 0, 32, 96, 0, 128)
    assert split(transpose) == (128, 128, 0, 0, 128, 0, 128)
    assert split(matmul) == (160, 32, 0, 32, 128, 32, 0)
    t = analyze_text(KV).totals
    # KV read 96 + 128 + 128 = 352, written 256; activations read 64, written 32
    assert (t.bytes_read_kv_cache, t.bytes_written_kv_cache) == (352, 256)
    assert (t.bytes_read_activations, t.bytes_written_activations) == (64, 32)
    assert (t.bytes_read, t.bytes_written) == (416, 288)


def test_traffic_must_be_a_known_convention() -> None:
    with pytest.raises(UsageError, match="traffic must be one of runtime, all-inputs"):
        analyze_text(TIED_HEAD, traffic="some")


def test_symbolic_formulas_give_the_runtime_bytes() -> None:
    # Gather of N rows of the [1000, 64] table: bytes read = N x 256 + N x 8 = 264 N
    text = EMBEDDING.replace("int64[3] ids", "int64[N] ids").replace("[3, 64]", "[N, 64]")
    a = onnxcost.analyze(parse(text), symbolic=True)
    assert str(a.formulas["bytes_read"]) == "264*N"
    assert a.at(N=5).bytes_read == onnxcost.analyze(parse(text), dims={"N": 5}).totals.bytes_read
    old = onnxcost.analyze(parse(text), symbolic=True, traffic="all-inputs")
    # the whole table: 256,000 + 8 N
    assert str(old.formulas["bytes_read"]) == "256000 + 8*N"


# --- all-inputs reproduces the old rule on every shipped model -----------------------------


def _element_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every tensor onnx's own shape inference types."""
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    types = {t.name: t.data_type for t in g.initializer}
    for vi in [*g.input, *g.output, *g.value_info]:
        types[vi.name] = vi.type.tensor_type.elem_type
    for n in g.node:
        if n.op_type == "Constant":
            for attr in n.attribute:
                if attr.name == "value":
                    types[n.output[0]] = attr.t.data_type
    return types


def _size(shape: object, elem_type: int) -> int | None:
    """Bytes of a tensor of ``shape``: numel x the numpy item size (bools and int8 1 byte)."""
    if shape is None or not all(isinstance(d, int) for d in shape):  # type: ignore[attr-defined]
        return None
    numel = math.prod(shape)  # type: ignore[arg-type]
    return numel * np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize


@pytest.mark.parametrize("path", sorted(MODELS.glob("*.onnx")), ids=lambda p: p.name)
def test_all_inputs_is_every_tensor_of_every_node_whole(path: Path) -> None:
    # The old rule, written independently: a node reads each input whole (Shape and Size read
    # no data) and writes each output whole.
    model = onnx.load(str(path))
    types = _element_types(model)
    a = onnxcost.analyze(str(path), traffic="all-inputs")
    checked = 0
    for rec in a.nodes:
        if rec.graph:
            continue
        sizes = []
        reads_data = rec.op_type not in ("Shape", "Size")
        ins = list(zip(rec.inputs, rec.input_shapes, strict=True)) if reads_data else []
        for name, shape in [*ins, *zip(rec.outputs, rec.output_shapes, strict=True)]:
            if name:
                sizes.append(_size(shape, types[name]) if name in types else None)
        if any(s is None for s in sizes):
            continue  # a tensor onnx's inference does not type
        n_in = len([n for n, _ in ins if n])
        assert (rec.bytes_read, rec.bytes_written) == (sum(sizes[:n_in]), sum(sizes[n_in:])), (
            rec.name
        )
        checked += 1
    assert checked >= 0.9 * len(a.nodes)
    assert a.totals.bytes_read == sum(n.bytes_read for n in a.nodes if not n.graph)
    # runtime reads no more than all-inputs on these models, and the split adds up
    r = onnxcost.analyze(str(path)).totals
    assert r.bytes_read <= a.totals.bytes_read
    assert r.bytes_read == r.bytes_read_weights + r.bytes_read_activations + r.bytes_read_kv_cache
    assert r.bytes_written == r.bytes_written_activations + r.bytes_written_kv_cache


# --- the CLI flag ------------------------------------------------------------------------------

runner = CliRunner()
MLP = str(MODELS / "mlp_torch_dynamo.onnx")


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", MLP],
        ["llm", "gpt2", "--prompt", "2", "--generate", "2"],
        ["compare", MLP, MLP],
        ["check", MLP],
        ["bench", MLP],
        ["annotate", MLP, "out.onnx"],
    ],
    ids=lambda a: a[0],
)
def test_a_bad_traffic_value_is_a_usage_error(args: list[str]) -> None:
    r = runner.invoke(app, [*args, "--traffic", "some"], env={"COLUMNS": "200"})
    assert r.exit_code == 2  # click's usage error, as for every flag's bad value
    assert "'some' is not one of 'runtime', 'all-inputs'." in " ".join(r.output.split())
    assert "Traceback" not in r.output


def test_the_traffic_flag_gives_each_convention(tmp_path: Path) -> None:
    model = tmp_path / "tied.onnx"
    model.write_bytes(parse(TIED_HEAD).SerializeToString())
    for traffic, read in (("runtime", 8_448), ("all-inputs", 16_640)):  # as worked above
        r = runner.invoke(app, ["analyze", str(model), "-f", "json", "--traffic", traffic])
        assert r.exit_code == 0, r.output
        d = json.loads(r.stdout)
        assert (d["traffic"], d["totals"]["bytes_read"]) == (traffic, read)
    r = runner.invoke(app, ["analyze", str(model), "-f", "json"])
    assert json.loads(r.stdout)["traffic"] == "runtime"  # the default
    r = runner.invoke(
        app, ["compare", str(model), str(model), "-f", "json", "--traffic", "all-inputs"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["traffic"] == "all-inputs"
    assert d["models"][0]["totals"]["bytes_read"] == 16_640


def test_compare_refuses_an_analysis_counted_by_another_traffic_rule() -> None:
    from onnxcost.compare import compare
    from onnxcost.prepare import prepare

    old = onnxcost.analyze(prepare(MLP), traffic="all-inputs")
    with pytest.raises(UsageError, match="'all-inputs' traffic convention; pass traffic="):
        compare([old, MLP])
    assert compare([old, MLP], traffic="all-inputs").traffic == "all-inputs"
