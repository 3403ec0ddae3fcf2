"""Fixtures shared by every test folder."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from onnxcost_testing import analyze_text, only_node

import onnxcost
from onnxcost.analysis.records import NodeRecord


@pytest.fixture
def node_of() -> Callable[..., NodeRecord]:
    return only_node


@pytest.fixture
def analysis_of() -> Callable[..., onnxcost.Analysis]:
    return analyze_text
