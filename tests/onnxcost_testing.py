"""Shared test helpers: build small models in ONNX text and analyse them.

Imported by name (pyproject puts tests/ on pythonpath), so a conftest.py in a
subfolder cannot shadow them."""

from __future__ import annotations

from typing import Any

import onnx
import onnx.parser

import onnxcost
from onnxcost.records import NodeRecord


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
