"""Peak activation memory by liveness over an execution order.

A tensor is live from the step that writes it to the last step that reads it (a graph
input from the first step, a graph output to the last). The peak is the largest sum of the
bytes of the tensors live at one step; tensors in ``excluded`` (weights: every tensor
computed from constants only) and tensors of unknown size do not count. The analysis runs
it over the topological order; ``onnxcost.bench.ort_order`` over onnxruntime's own.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import accumulate, chain

from onnxcost.analysis.records import LiveTensor, PeakActivation
from onnxcost.load.tensors import TensorInfo

TOP_LIVE = 10
"""How many of the tensors live at the peak a PeakActivation lists (the largest)."""

GRAPH_INPUT = "(graph input)"
"""The producer named for a graph input."""


def last_uses(inputs: Sequence[Sequence[str]]) -> dict[str, int]:
    """Tensor -> the index of the last step that reads it."""
    out: dict[str, int] = {}
    for k, names in enumerate(inputs):
        for name in names:
            if name:
                out[name] = k
    return out


def peak_activation(
    names: Sequence[str],
    inputs: Sequence[Sequence[str]],
    outputs: Sequence[Sequence[str]],
    graph_inputs: Iterable[str],
    graph_outputs: Iterable[str],
    types: Mapping[str, TensorInfo],
    excluded: Collection[str],
    last_use: Mapping[str, int] | None = None,
) -> PeakActivation:
    """The peak of live activation bytes over the steps ``names`` (in execution order, each
    reading ``inputs[k]`` and writing ``outputs[k]``), where it happens and what is live there.

    ``last_use``: tensor -> its last reading step, where reads are not all in ``inputs``
    (subgraphs reading outer tensors); computed from ``inputs`` otherwise.
    """
    n = len(names)
    if n == 0:
        return PeakActivation(0, -1, "", ())
    ends = dict(last_use) if last_use is not None else last_uses(inputs)
    for name in graph_outputs:
        ends[name] = n - 1
    # An activation of known size adds its bytes from the step that writes it (a graph
    # input: -1, counted from step 0) through its last read; ``delta`` holds the changes.
    delta = [0] * (n + 1)
    counted: list[tuple[str, int, int]] = []  # (tensor, the step that writes it, its last step)
    # Each step with the tensors it writes, the graph inputs first (step -1): a loop over each
    # step's outputs, not a generator of (tensor, step) pairs (callgrind, one analysis of the
    # 8B-shaped decoder: 786M instructions with the generator, 776M without).
    for k, written in chain(((-1, tuple(graph_inputs)),), enumerate(outputs)):
        start = k if k > 0 else 0
        for tensor in written:
            if not tensor or tensor in excluded:
                continue  # omitted, or a weight
            info = types.get(tensor)
            nbytes = -1 if info is None else info.known_nbytes
            if nbytes <= 0:
                continue  # unknown size, or empty
            end = ends.get(tensor, start)
            if end < start:
                end = start
            delta[start] += nbytes
            delta[end + 1] -= nbytes
            counted.append((tensor, k, end))
    levels = list(accumulate(delta[:n]))  # the live bytes at each step
    peak = max(levels)
    at = levels.index(peak) if peak > 0 else 0  # the first step at the peak
    live = sorted(
        (
            LiveTensor(tensor, names[k] if k >= 0 else GRAPH_INPUT, types[tensor].known_nbytes)
            for tensor, k, end in counted
            if k <= at <= end
        ),
        key=lambda t: (-t.bytes, t.tensor),
    )
    return PeakActivation(peak, at, names[at], tuple(live[:TOP_LIVE]), len(live))


__all__ = ["GRAPH_INPUT", "TOP_LIVE", "last_uses", "peak_activation"]
