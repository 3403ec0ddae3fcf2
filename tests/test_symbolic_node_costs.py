"""costs/' own formulas over symbolic shapes (``onnxcost.symbolic.node_costs``, issue 22):
each node's MACs and FLOPs as polynomials from one walk, equal to a concrete analysis at
random points on every model in models/ and on built-ins; by hand on a MatMul and a Conv."""

from __future__ import annotations

import random
from pathlib import Path

import onnx
import pytest

import onnxcost
from onnxcost import zoo
from onnxcost.prepare import prepare
from onnxcost.symbolic.dims import model_symbols, with_derived
from onnxcost.symbolic.node_costs import node_costs
from onnxcost.symdim import Dim, SymDim

ROOT = Path(__file__).resolve().parent.parent
_SMALL_KV = {"layers": 2, "kv_cache": "true", "hidden": 256, "heads": 4, "vocab": 100}
BUILT = [
    ("gpt2", {"layers": 2}),
    ("gpt2", _SMALL_KV),
    ("llama", {**_SMALL_KV, "kv_heads": 2, "intermediate": 512}),
    ("resnet20_cifar", {}),
    ("vit_b_16", {"layers": 1}),
]


def _at(d: Dim | None, values: dict[str, int]) -> int | None:
    return d if d is None or isinstance(d, int) else d.evaluate(values)


def _check(proto: onnx.ModelProto) -> tuple[int, int]:
    """Every node with a formula equals the concrete analysis at two random points; (nodes
    with a formula, nodes without)."""
    found = node_costs(proto)
    symbols = model_symbols(proto, {}, {})
    rng = random.Random(0)
    names = [n.name or f"{n.op_type}_{i}" for i, n in enumerate(proto.graph.node)]
    for _ in range(2):
        values = {s: rng.randint(2, 9) for s in symbols}
        analysis = onnxcost.analyze(proto, dims=with_derived(proto, {}, values))
        records = {r.name: r for r in analysis.nodes}
        for i, name in enumerate(names):
            if found.macs[i] is None or name not in records:
                continue
            got = (_at(found.macs[i], values), _at(found.flops[i], values))
            assert got == (records[name].macs, records[name].flops), (name, values)
    with_formula = sum(m is not None for m in found.macs)
    return with_formula, len(names) - with_formula


@pytest.mark.parametrize("path", sorted(ROOT.glob("models/*.onnx")), ids=lambda p: p.name)
def test_every_export_in_models_matches_a_concrete_analysis(path: Path) -> None:
    with_formula, without = _check(prepare(path).proto)
    assert with_formula > 0
    assert without <= 2  # at most the Softmax / ReduceMean whose formulas need concrete dims


@pytest.mark.parametrize(("name", "params"), BUILT, ids=lambda v: str(v))
def test_built_ins_match_a_concrete_analysis(name: str, params: dict[str, str]) -> None:
    with_formula, _without = _check(zoo.build(name, params=params))
    assert with_formula > 0


def test_matmul_and_conv_by_hand() -> None:
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[b, s, 64] x, float[64, 32] w, float[b, 3, h, h] img, float[8, 3, 3, 3] k)
            => (float[b, s, 32] y, float[b, 8, p, p] c) {
            y = MatMul(x, w)
            c = Conv<strides = [2, 2], pads = [1, 1, 1, 1]>(img, k)
        }"""
    )
    found = node_costs(proto)
    b, s, h = SymDim.of("b"), SymDim.of("s"), SymDim.of("h")
    # MatMul: numel(Y) x K = b*s*32 x 64 = 2,048*b*s MACs; FLOPs 2 x MACs.
    assert found.macs[0] == 2048 * b * s
    assert found.flops[0] == 4096 * b * s
    # Conv: out side (h + 2 - 2 - 1) // 2 + 1 = (h - 1) // 2 + 1; MACs = numel(out) x 3*3*3
    # = b * 8 * side**2 * 27; at b = 2, h = 224: side 112, 2 * 8 * 12,544 * 27 = 5,419,008.
    side = (h - 1) // 2 + 1
    assert found.macs[1] == b * 8 * side * side * 27
    macs = found.macs[1]
    assert isinstance(macs, SymDim)
    assert macs.evaluate({"b": 2, "h": 224}) == 5_419_008
