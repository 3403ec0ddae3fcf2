"""Shared test helpers: build small models in ONNX text and analyse them.

Imported by name (pyproject puts tests/ on pythonpath), so a conftest.py in a
subfolder cannot shadow them."""

from __future__ import annotations

from typing import Any

import onnx
import onnx.parser
from onnx import helper

import onnxcost
from onnxcost.analysis.records import NodeRecord
from onnxcost.costs import REGISTRY, Cost, OpContext, TensorInfo


def parse(text: str) -> onnx.ModelProto:
    """A model from ONNX text; raises with the parser's message on a typo."""
    return onnx.parser.parse_model(text)


def analyze_text(text: str, **kwargs: Any) -> onnxcost.Analysis:
    return onnxcost.analyze(parse(text), **kwargs)


def only_node(text: str, **kwargs: Any) -> NodeRecord:
    """The record of the one node that is not a Constant."""
    nodes = [n for n in analyze_text(text, **kwargs).nodes if n.op_type != "Constant"]
    assert len(nodes) == 1, [n.op_type for n in nodes]
    return nodes[0]


def key_paths(data: Any, maps: frozenset[str] = frozenset(), path: str = "") -> list[str]:
    """Every key of JSON ``data`` as a path, in order: ``totals.macs``, ``nodes[].name`` (a
    list's entries read from its first). The objects at ``maps`` are data keyed by data (op
    type counts, opsets): their keys are not listed."""
    if isinstance(data, list):
        return key_paths(data[0], maps, path + "[]") if data else []
    if not isinstance(data, dict) or path in maps:
        return []
    out: list[str] = []
    for key, value in data.items():
        inner = f"{path}.{key}" if path else key
        out += [inner, *key_paths(value, maps, inner)]
    return out


def formula_cost(
    op: str,
    inputs: list[tuple[int, tuple[int, ...]]],
    outputs: list[tuple[int, tuple[int, ...]]],
    opset: int = 21,
) -> Cost:
    """The formula on given (elem_type, shape) tensors: for ops whose output shape is data-dependent."""
    node = helper.make_node(
        op, [f"x{i}" for i in range(len(inputs))], [f"y{i}" for i in range(len(outputs))]
    )
    ins = tuple(TensorInfo(f"x{i}", t, s) for i, (t, s) in enumerate(inputs))
    outs = tuple(TensorInfo(f"y{i}", t, s) for i, (t, s) in enumerate(outputs))
    spec = REGISTRY.lookup("", op, opset)
    assert spec is not None
    return spec.formula(OpContext(node, opset, ins, outs))
