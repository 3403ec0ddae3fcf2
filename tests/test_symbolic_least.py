"""A symbol's least value (issue 22: wav2vec2): ``--symbolic`` on a model that is valid only
from some size on, found from the walk's floors or given (``--dim n>=50``, ``least=``)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_symbolic_onewalk import _every_formula_holds

import onnxcost
from onnxcost.symbolic.shape_core import _UncarriedError
from onnxcost.symbolic.shapes import _exact_div
from onnxcost.symdim import SymDim

# --- Reshape's -1 over a sum (wav2vec2's view of its frames) ------------------------------------


def test_long_division_finds_the_quotient_or_refuses() -> None:
    b, s = SymDim.of("b"), SymDim.of("s")
    frames = SymDim.of("length") // 10 - 1  # wav2vec2's floor(length / 10) - 1 frames
    # 32*b*frames / (16*b*frames) = 2, each a sum of two terms once expanded
    assert _exact_div(32 * b * frames, 16 * b * frames) == 2
    assert _exact_div(b * s + b, s + 1) == b
    # (s + 1) * (b*s - b) = b*s^2 - b*s + b*s - b = b*s^2 - b
    assert _exact_div(b * s * s - b, s + 1) == b * s - b
    for p, q in ((b * s + 1, s + 1), (2 * s + 1, 2 * s + 2), (b * s, 2 * s + 2)):
        with pytest.raises(_UncarriedError, match="-1 of Reshape"):
            _exact_div(p, q)


def test_a_reshapes_minus_one_over_a_sum_is_walked() -> None:
    # x [b, s] joined with its first column: y [b, s + 1]; its Reshape to [-1, s + 1] has
    # -1 = (b*s + b) / (s + 1) = b, a quotient by a divisor of two terms (long division): the
    # walk carries it (it was sampled, 12 analyses, for want of that), and MatMul(z^T, z)
    # costs (s + 1) * b * (s + 1) MACs; at b = 3, s = 5: 6 * 3 * 6 = 108.
    def ints(name: str, values: list[int]) -> onnx.TensorProto:
        return numpy_helper.from_array(np.array(values, dtype=np.int64), name)

    nodes = [
        helper.make_node("Slice", ["x", "zero", "one", "one"], ["first"]),
        helper.make_node("Concat", ["x", "first"], ["y"], axis=1),
        helper.make_node("Shape", ["y"], ["sy"]),
        helper.make_node("Slice", ["sy", "one", "two"], ["n"]),
        helper.make_node("Concat", ["minus", "n"], ["target"], axis=0),
        helper.make_node("Reshape", ["y", "target"], ["z"]),
        helper.make_node("Transpose", ["z"], ["zt"], perm=[1, 0]),
        helper.make_node("MatMul", ["zt", "z"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "widened",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [ints("zero", [0]), ints("one", [1]), ints("two", [2]), ints("minus", [-1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    a = onnxcost.analyze(model, symbolic=True)
    assert a.symbolic is not None
    assert a.symbolic.analyses == 1
    macs = a.formulas["macs"]
    assert macs is not None
    assert macs(b=3, s=5) == 108
    for point in ({"b": 1, "s": 1}, {"b": 3, "s": 5}, {"b": 2, "s": 40}):
        _every_formula_holds(a, model, point)
