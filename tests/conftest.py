"""Shared test helpers: build small models in ONNX text and analyse them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx
import onnx.parser
import pytest

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


@pytest.fixture
def node_of() -> Callable[..., NodeRecord]:
    return only_node


@pytest.fixture
def analysis_of() -> Callable[..., onnxcost.Analysis]:
    return analyze_text
