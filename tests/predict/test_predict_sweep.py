"""`predict --sweep`: the prediction at every point of a grid from one symbolic analysis equals
`predict(model, device, dims=point)` there (latency and every node's time), where it falls
back to a concrete analysis and why, and its refusals."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onnxcost import zoo
from onnxcost.api import analyze
from onnxcost.bench.roofline import Ceilings
from onnxcost.cli.app import app
from onnxcost.errors import ShapeError, UsageError
from onnxcost.predict.device import Curve, Device
from onnxcost.predict.estimate import BASIS, CLASSES, NodeTime
from onnxcost.predict.result import Prediction, PredictSweep, SweepPoint
from onnxcost.predict.run import predict
from onnxcost.predict.sweep import _why_not, parse_sweep, predict_sweep
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.symbolic.result import SymbolicCosts

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
DECODER = str(ROOT / "models" / "decoder_kv_torch_dynamo.onnx")
"""A GPT-2-style decoder with a KV cache: batch, seq, past_seq; 32 positions."""
GPT2_SMALL = {"layers": 2, "hidden": 64, "heads": 2, "vocab": 100, "max_positions": 64}


def _every_class(name: str, core_cache: int, cache: int) -> Device:
    """A device whose every op class has its own curve and overhead, so a node's class (a
    MatMul of 8 rows or fewer is a gemv; a Conv's kernel and groups) shows in its time; weights
    streamed past ``core_cache`` bytes, read cold past half of ``cache``."""
    curves = {
        c: Curve(BASIS[c], ((1e2, 0.05 + 0.01 * i), (1e7, 0.4 + 0.02 * i)), 0.3 + 0.1 * i)
        for i, c in enumerate(CLASSES)
    }
    return Device(
        name=name,
        ceilings=Ceilings(2e10, 5e9, "CPUExecutionProvider", name, "float32"),
        node_overhead_us=0.2,
        run_overhead_us=3.0,
        threads=1,
        source="calibrated",
        curves=curves,
        input_overhead_us=0.7,
        output_overhead_us=0.4,
        cache_bytes=cache,
        weight_bandwidth_bytes_per_s=2e9,
        core_cache_bytes=core_cache,
    )


DEVICES = [
    "H100",
    _every_class("classes-streamed", core_cache=1024, cache=1 << 40),
    _every_class("classes-cold", core_cache=1024, cache=2),
]


def _same(got: Prediction, want: Prediction) -> None:
    assert got.batch == want.batch
    assert got.latency_ms == want.latency_ms
    assert [(n.name, n.op_class, n.bound, n.predicted_us) for n in got.nodes] == [
        (n.name, n.op_class, n.bound, n.predicted_us) for n in want.nodes
    ]


@pytest.mark.parametrize(
    ("case", "grid"),
    [
        ("resnet20_cifar", {"batch": (1, 2, 5, 16)}),
        # seq 1..8 at batch 1: a MatMul of 8 rows or fewer is a gemv; 9 and 16 are not
        ("gpt2", {"batch": (1, 3), "seq": (1, 8, 9, 16, 64)}),
        ("decoder", {"past_seq": (0, 1, 7, 31), "batch": (1, 2)}),
    ],
)
@pytest.mark.parametrize("device", DEVICES, ids=lambda d: d if isinstance(d, str) else d.name)
def test_sweep_equals_a_concrete_predict_at_every_point(
    case: str, grid: dict[str, tuple[int, ...]], device: str | Device
) -> None:
    model: PreparedModel | str
    if case == "gpt2":
        model = prepare(zoo.build("gpt2", params=GPT2_SMALL))
    elif case == "decoder":
        model = DECODER
    else:
        model = case
    sweep = predict_sweep(model, device, grid)
    assert sweep.why == ""
    classes: set[str] = set()
    for pt in sweep.points:
        assert pt.source == "formulas", pt.why
        _same(pt.prediction, predict(model, device, dims=pt.values))
        classes |= {n.op_class for n in pt.prediction.nodes}
    if case == "gpt2":
        assert {"gemv", "matmul"} <= classes  # the class changes across the grid


def test_the_grid_is_every_combination_last_symbol_fastest() -> None:
    sweep = predict_sweep(DECODER, "A100", {"batch": (2, 1), "past_seq": (4, 0, 4)})
    assert sweep.symbols == ("batch", "past_seq")
    assert [pt.values for pt in sweep.points] == [
        {"batch": 2, "past_seq": 4},
        {"batch": 2, "past_seq": 0},
        {"batch": 1, "past_seq": 4},
        {"batch": 1, "past_seq": 0},
    ]


@pytest.mark.parametrize("values", [(), (1, -2), (1, 2.0), (True,)])
def test_the_api_refuses_values_that_are_no_dims(values: tuple[object, ...]) -> None:
    with pytest.raises(UsageError, match=r"^--sweep batch: "):
        predict_sweep("mlp", "A100", {"batch": values})  # type: ignore[dict-item]


def test_a_sampled_model_falls_back_to_a_concrete_analysis_each(tmp_path: Path) -> None:
    # Resize by scales computed in the graph is not carried by the symbolic walk (stored
    # ones are): the formulas are sampled.
    text = """<ir_version: 8, opset_import: ["" : 18]>
    g (float[batch, seq, 8] x) => (float[batch, seq, 8] y)
    <float[8, 8] w = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,
     0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
     1, 0, 0, 0, 0, 0, 0, 0, 0, 1}, float[3] ones = {1, 1, 1}> {
        m = MatMul(x, w)
        scales = Mul(ones, ones)
        y = Resize(m, , scales)
    }"""
    model = str(tmp_path / "resized.onnx")
    onnx.save(onnx.parser.parse_model(text), model)
    sweep = predict_sweep(model, DEVICES[1], {"batch": (1, 2), "seq": (3, 5)})
    assert (
        sweep.why == "the formulas were sampled, in whole or in part: no walked shapes at a point"
    )
    for pt in sweep.points:
        assert pt.source == "analysis"
        _same(pt.prediction, predict(model, DEVICES[1], dims=pt.values))


def test_why_not_names_a_node_without_a_formula_or_with_other_shapes() -> None:
    a = analyze(DECODER, symbolic=True)
    assert isinstance(a.symbolic, SymbolicCosts)
    assert a.symbolic.shapes is not None
    assert _why_not(a, a.symbolic) == ""
    k = next(i for i, r in enumerate(a.nodes) if r.op_type == "MatMul")
    record = a.nodes[k]
    nodes = list(a.symbolic.nodes)
    nodes[k] = {**nodes[k], "bytes_read": None}
    no_formula = replace(a.symbolic, nodes=tuple(nodes))
    assert _why_not(a, no_formula) == (
        f"node {record.name!r} (MatMul) has no formula for bytes_read"
    )
    shapes = dict(a.symbolic.shapes)
    shapes[record.outputs[0]] = (*shapes[record.outputs[0]][:-1], 5)
    other = replace(a.symbolic, shapes=shapes)
    assert _why_not(a, other).startswith(f"node {record.name!r} (MatMul): the symbolic walk's")


def test_a_point_past_the_positions_comes_from_an_analysis_which_names_it() -> None:
    # 32 positions: seq 1 + past_seq 31 fits, past_seq 32 does not (the mask is 32 wide)
    sweep = predict_sweep(DECODER, "H100", {"past_seq": (31,)}, dims={"seq": 1})
    assert sweep.points[0].source == "formulas"
    with pytest.raises(ShapeError, match=r"^--sweep at seq=1, past_seq=32: the shapes from"):
        predict_sweep(DECODER, "H100", {"past_seq": (31, 32)}, dims={"seq": 1})


def test_top_bound_and_its_share() -> None:
    # compute 3 us and memory 5 us: memory-bound (5 + 1 overhead = 6 us); a compute-bound
    # node of 4 + 1 = 5 us; an overhead-bound one of 2 us. Memory 6 of 13 us: 46.2%.
    def node(name: str, c: float, m: float, o: float, bound: str) -> NodeTime:
        return NodeTime(name, "Op", "other", 0, 0, c, m, o, bound)  # type: ignore[arg-type]

    nodes = (
        node("a", 3.0, 5.0, 1.0, "memory"),
        node("b", 4.0, 0.5, 1.0, "compute"),
        node("c", 0.1, 0.1, 1.9, "overhead"),
    )
    p = Prediction("m", DEVICES[1], 4, 1, 1, nodes, ())
    pt = SweepPoint({"batch": 4}, p, "formulas")
    assert pt.top_bound == "memory"
    assert pt.top_bound_share == pytest.approx(6.0 / 13.0)
    # latency: run overhead 3 us + 13 us = 0.016 ms; throughput 4 x 1000 / 0.016 = 250,000
    assert PredictSweep(("batch",), (pt,)).to_dict()["sweep"] == [
        {
            "point": {"batch": 4},
            "batch": 4,
            "latency_ms": pytest.approx(0.016),
            "throughput_per_s": pytest.approx(250_000.0),
            "bound": "memory",
            "bound_share": pytest.approx(6.0 / 13.0),
            "source": "formulas",
            "why": "",
        }
    ]


@pytest.mark.parametrize(
    ("texts", "want"),
    [
        (["batch=1,8,32"], {"batch": (1, 8, 32)}),
        (["batch=8,1,8", " seq = 0 , 4"], {"batch": (8, 1), "seq": (0, 4)}),
    ],
)
def test_parse_sweep(texts: list[str], want: dict[str, tuple[int, ...]]) -> None:
    assert parse_sweep(texts) == want


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        (["batch="], "--sweep 'batch=' is not SYMBOL=N1,N2,..."),
        (["batch=1.5"], "--sweep 'batch=1.5' is not SYMBOL=N1,N2,..."),
        (["batch=-1"], "--sweep 'batch=-1' is not SYMBOL=N1,N2,..."),
        (["batch=1,,2"], "--sweep 'batch=1,,2' is not SYMBOL=N1,N2,..."),
        (["=4"], "--sweep '=4' is not SYMBOL=N1,N2,..."),
        (["batch=4611686018427387905"], "each N must be between 0 and 2**62"),
        (["batch=1", "batch=2"], "--sweep batch= is given twice"),
        (["a=" + ",".join(map(str, range(101))), "b=" + ",".join(map(str, range(100)))],
         "--sweep makes 10,100 points; at most 10,000"),
    ],
)  # fmt: skip
def test_parse_sweep_refuses(texts: list[str], message: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_sweep(texts)
    assert message in str(e.value)


def test_cli_sweep_json_keeps_the_predict_keys_and_adds_sweep() -> None:
    plain = runner.invoke(
        app, ["predict", "mlp", "--device", "A100", "-d", "batch=2", "-f", "json"]
    )
    args = ["predict", "mlp", "--device", "A100", "--sweep", "batch=2,4", "-f", "json"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    data, first = json.loads(r.stdout), json.loads(plain.stdout)
    assert list(data) == [*first, "sweep"]
    assert data["schema"] == "onnxcost.predict/1"
    assert data["latency_ms"] == first["latency_ms"]  # the first point's prediction
    assert [(e["point"], e["batch"], e["source"]) for e in data["sweep"]] == [
        ({"batch": 2}, 2, "formulas"),
        ({"batch": 4}, 4, "formulas"),
    ]
    assert data["sweep"][0]["latency_ms"] == first["latency_ms"]


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_cli_sweep_table_and_markdown(fmt: str) -> None:
    args = ["predict", "resnet20_cifar", "--device", "H100", "--sweep", "batch=1,8", "-f", fmt]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "from one symbolic analysis' formulas" in r.stdout
    assert "latency ms" in r.stdout
    assert "throughput /s" in r.stdout
    assert "formulas" in r.stdout


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--sweep", "batch="], 2, "--sweep 'batch=' is not SYMBOL=N1,N2,..."),
        (["--sweep", "batch=one,two"], 2, "--sweep 'batch=one,two' is not SYMBOL=N1,N2,..."),
        (["--sweep", "batch=-4"], 2, "--sweep 'batch=-4' is not SYMBOL=N1,N2,..."),
        (["--sweep", "nosuch=1,2"], 1, "--sweep nosuch=... matches no free symbolic dim of the "
         "inputs; the model's free symbols are: batch"),
        (["--sweep", "batch=1", "-d", "batch=2"], 2, "batch is set by --dim and swept by --sweep"),
        (["--sweep", "batch=1", "-f", "html"], 2, "--sweep writes table, json or markdown"),
    ],
)  # fmt: skip
def test_cli_sweep_refuses_in_one_line(args: list[str], code: int, message: str) -> None:
    r = runner.invoke(app, ["predict", "resnet20_cifar", "--device", "H100", *args])
    assert r.exit_code == code
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"onnxcost: error: {message}")
    assert "Traceback" not in r.output


def test_sweep_over_a_dim_that_is_no_python_name() -> None:
    # paddle2onnx names its dims DynamicDimension.0 (batch) and .1 (time): each is a symbol
    # of the formulas as DynamicDimension_0 and _1, and either spelling sweeps or sets it. It
    # was refused: "the model's free symbols are: none (every input dim is fixed)".
    path = str(ROOT / "tests" / "data" / "exports" / "paddle_lstm_op11.onnx")
    dotted = predict_sweep(
        path, "A100", {"DynamicDimension.0": [1, 8]}, dims={"DynamicDimension.1": 16}
    )
    named = predict_sweep(
        path, "A100", {"DynamicDimension_0": [1, 8]}, dims={"DynamicDimension_1": 16}
    )
    assert dotted.symbols == named.symbols == ("DynamicDimension_0",)
    for a, b, batch in zip(dotted.points, named.points, (1, 8), strict=True):
        assert a.values == b.values == {"DynamicDimension_0": batch}
        assert a.source == "formulas"
        # each point is predict's at that point, from a concrete analysis of its own
        want = predict(path, "A100", dims={"DynamicDimension.0": batch, "DynamicDimension.1": 16})
        assert a.prediction.latency_ms == pytest.approx(want.latency_ms, rel=1e-12)
        assert b.prediction.latency_ms == a.prediction.latency_ms
