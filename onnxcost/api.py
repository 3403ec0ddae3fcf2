"""The public entry points, where the layers meet: ``analyze`` is the walk of
``onnxcost.analysis``, with the formulas of ``onnxcost.symbolic`` and onnxruntime's execution
order from ``onnxcost.bench`` when asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from onnxcost.analysis.records import Convention
from onnxcost.analysis.walk import Analysis, check_convention, count
from onnxcost.costs import REGISTRY
from onnxcost.costs._registry import Registry
from onnxcost.errors import UsageError
from onnxcost.load.model import ModelSource
from onnxcost.prepare import PreparedModel


def analyze(
    model: ModelSource | PreparedModel,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    convention: Convention = "onnxcost",
    symbolic: bool = False,
    registry: Registry = REGISTRY,
    ort_peak: bool = False,
    allow_reshape: bool = False,
) -> Analysis:
    """Count MACs, FLOPs, parameters and memory traffic of every node of ``model``.

    ``model``: a path, the bytes of a model, an ``onnx.ModelProto`` (never modified), the
    name of a built-in model (``onnxcost zoo list``), or a ``PreparedModel``
    (``onnxcost.prepare``: prepare once, analyse as often as needed; it is not modified).
    ``input_shapes`` fixes input shapes, ``dims`` sets symbolic dims by name; unset symbolic
    dims become 1 with a warning. ``symbolic``: also give every cost as an exact formula in the
    unset symbolic dims (``Analysis.formulas``, ``Analysis.at``; see onnxcost/symbolic/formulas.py),
    the counts at 1. ``registry``: the cost formulas, by default the built-in ones; for one
    run with one op's formula replaced, ``REGISTRY.with_formula("Relu", my_formula)``.
    ``ort_peak``: also the peak activation memory under onnxruntime's own execution order
    (``totals.peak_activation_bytes_ort``, ``peak_activation_ort``; needs onnxruntime).
    An ``input_shapes`` entry that changes a dim the model fixes raises ShapeError unless
    ``allow_reshape``; shapes that make a node's input shapes disagree raise ShapeError.
    """
    check_convention(convention)
    if symbolic:
        if registry is not REGISTRY:
            raise UsageError("symbolic=True counts with the built-in formulas; drop registry=")
        from onnxcost.symbolic.formulas import symbolic_analysis

        result = symbolic_analysis(
            model,
            input_shapes=input_shapes,
            dims=dims,
            convention=convention,
            allow_reshape=allow_reshape,
        )
    else:
        result = count(
            model,
            input_shapes=input_shapes,
            dims=dims,
            convention=convention,
            registry=registry,
            allow_reshape=allow_reshape,
        )
    if not ort_peak:
        return result
    from onnxcost.bench.ort_order import OrtPeakLimitError, ort_peak_activation  # needs onnxruntime

    try:
        peak = ort_peak_activation(model, input_shapes, dims)
    except OrtPeakLimitError as e:  # bounded: the analysis carries on without it
        return replace(result, warnings=(*result.warnings, str(e)))
    totals = replace(result.totals, peak_activation_bytes_ort=peak.bytes)
    return replace(result, totals=totals, peak_activation_ort=peak)
