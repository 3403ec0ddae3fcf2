"""``--symbolic`` stays bounded in the number of symbols, and takes a graph name that is not
UTF-8 (issue 27)."""

from __future__ import annotations

import time
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

import onnxcost
from onnxcost.cli.app import app
from onnxcost.errors import ShapeError
from onnxcost.llm.cost import llm_report
from onnxcost.symbolic import formulas, onewalk

runner = CliRunner()


def _relus(k: int) -> onnx.ModelProto:
    """k inputs x_i [s_i], each through its own Relu: every cost is linear in each symbol, and
    the tensor-product grid has 2**k points."""
    inputs = [
        helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [f"s{i}"]) for i in range(k)
    ]
    outputs = [
        helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, [f"s{i}"]) for i in range(k)
    ]
    nodes = [helper.make_node("Relu", [f"x{i}"], [f"y{i}"]) for i in range(k)]
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_sixteen_symbols_are_one_walk() -> None:
    # The one walk has no grid: each Relu reads 4*s_i bytes and does s_i FLOPs.
    a = onnxcost.analyze(_relus(16), symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1
    flops = a.formulas["flops"]
    assert flops is not None
    assert flops.python() == " + ".join(f"s{i}" for i in range(16))


def test_thousands_of_symbols_are_refused_in_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    # 16 symbols x 16 classes past a bound of 200: the walk leaves them to the sampler, whose
    # grid of 2**16 points is refused
    monkeypatch.setattr(onewalk, "MAX_ZERO_WALK", 200)
    start = time.perf_counter()
    with pytest.raises(ShapeError, match=r"16 free symbols .* over the limit of 1,024"):
        onnxcost.analyze(_relus(16), symbolic=True)
    assert time.perf_counter() - start < 20


def test_sixteen_symbols_are_refused_not_sampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where the walk does not carry a node, the sampler's grid has a bound
    monkeypatch.setattr(formulas, "one_walk_costs", lambda *args, **kwargs: None)
    model = _relus(16)  # 2**16 = 65,536 grid points (was over a minute)
    start = time.perf_counter()
    with pytest.raises(ShapeError, match=r"16 free symbols .* over the limit of 1,024"):
        onnxcost.analyze(model, symbolic=True)
    assert time.perf_counter() - start < 20  # the degrees of 11 symbols: about 1 s
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    r = runner.invoke(app, ["analyze", str(path), "--symbolic"])
    assert r.exit_code == 1, r.output
    assert len(r.output.strip().splitlines()) == 1, r.output
    assert "--dim SYMBOL=N" in r.output
    # fixing all but 4 of them leaves 2**4 points, and the formulas: Relu reads 4 bytes an
    # element and does one FLOP per element
    dims = {f"s{i}": 1 for i in range(4, 16)}
    a = onnxcost.analyze(model, symbolic=True, dims=dims)
    assert a.formulas is not None
    assert a.formulas["flops"] is not None
    assert a.formulas["flops"].python() == "12 + s0 + s1 + s2 + s3"


def test_ten_symbols_are_the_limit() -> None:
    a = onnxcost.analyze(_relus(10), symbolic=True)  # 2**10 = 1,024 points
    assert a.formulas is not None
    flops = a.formulas["flops"]
    assert flops is not None
    assert flops.evaluate({f"s{i}": i for i in range(10)}) == sum(range(10)) == 45


def _decoder(graph_name: bytes) -> bytes:
    """A decoder of 16 alike Relus (so that --symbolic reduces it to a few nodes) with a
    KV cache, its graph named ``graph_name`` (bytes: it need not be UTF-8)."""
    nodes = [helper.make_node("Cast", ["input_ids"], ["t0"], to=TensorProto.FLOAT)]
    nodes += [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(16)]
    nodes.append(helper.make_node("Concat", ["past_k", "t0"], ["present_k"], axis=1))
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("past_k", TensorProto.FLOAT, ["batch", "past"]),
    ]
    outputs = [
        helper.make_tensor_value_info("t16", TensorProto.FLOAT, ["batch", "seq"]),
        helper.make_tensor_value_info("present_k", TensorProto.FLOAT, ["batch", "past + seq"]),
    ]
    graph = helper.make_graph(nodes, "GRAPHNAME", inputs, outputs)
    data: bytes = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)]
    ).SerializeToString()
    assert data.count(b"GRAPHNAME") == 1
    return data.replace(b"GRAPHNAME", graph_name)


def test_a_graph_name_that_is_not_utf8_is_reduced_as_any() -> None:
    plain = onnxcost.analyze(_decoder(b"GRAPHNAME"), symbolic=True)
    bad = _decoder(b"\xff\xfeAPHNAME")  # was UnicodeDecodeError building the reduced model
    a = onnxcost.analyze(bad, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.reduced_nodes > 0  # the reduced model was built and used
    assert a.symbolic.total_texts == plain.symbolic.total_texts  # type: ignore[union-attr]
    # 16 Relus on [b, s]: one FLOP an element each
    assert a.symbolic.total_texts["flops"] == "16*batch*seq"
    r = llm_report(bad, prompt=3, generate=2)
    assert r.prefill.flops == 16 * 3
