"""An analysis runs with the cyclic garbage collector paused and puts the caller's setting back."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from onnxcost_testing import parse

import onnxcost
from onnxcost.costs import REGISTRY, Cost, OpContext
from onnxcost.errors import OnnxcostError

RELU = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,8] x) => (float[1,8] y) {
  y = Relu (x)
}"""


@pytest.fixture
def collector() -> Iterator[None]:
    """The test's own collector setting, the runner's put back after it."""
    was = gc.isenabled()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def _seen_during(enabled: bool) -> tuple[bool, bool]:
    """(collector on while the walk ran the formula, collector on after the analysis)."""
    seen: list[bool] = []

    def relu(ctx: OpContext) -> Cost:
        seen.append(gc.isenabled())
        return Cost(0, 8)

    if enabled:
        gc.enable()
    else:
        gc.disable()
    onnxcost.analyze(parse(RELU), registry=REGISTRY.with_formula("Relu", relu))
    return seen[0], gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_the_walk_runs_with_the_collector_paused_and_it_runs_again_after() -> None:
    assert _seen_during(enabled=True) == (False, True)


@pytest.mark.usefixtures("collector")
def test_a_caller_that_paused_the_collector_finds_it_paused() -> None:
    assert _seen_during(enabled=False) == (False, False)


@pytest.mark.usefixtures("collector")
def test_the_collector_runs_again_after_an_analysis_that_fails() -> None:
    gc.enable()
    bad = parse(RELU)
    bad.graph.node[0].input[0] = "nowhere"  # a tensor nothing writes: GraphError
    with pytest.raises(OnnxcostError):
        onnxcost.analyze(bad)
    assert gc.isenabled()
