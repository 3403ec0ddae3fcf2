"""The public entry points, where the layers meet: ``analyze`` is the walk of
``onnxcost.analysis``, with the formulas of ``onnxcost.symbolic`` and onnxruntime's execution
order from ``onnxcost.bench`` when asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from onnxcost.analysis.records import Convention
from onnxcost.analysis.traffic import Traffic, check_traffic
from onnxcost.analysis.training import TrainingOptions, options
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
    least: Mapping[str, int] | None = None,
    registry: Registry = REGISTRY,
    ort_peak: bool = False,
    allow_reshape: bool = False,
    training: bool = False,
    optimizer: str = "adamw",
    frozen: str | None = None,
    grad_inputs: bool = False,
    mixed_precision: str | None = None,
    traffic: Traffic = "runtime",
) -> Analysis:
    """Count MACs, FLOPs, parameters and memory traffic of every node of ``model``.

    ``model``: a path, the bytes of a model, an ``onnx.ModelProto`` (never modified), the
    name of a built-in model (``onnxcost zoo list``), or a ``PreparedModel``
    (``onnxcost.prepare``: prepare once, analyse as often as needed; it is not modified).
    ``input_shapes`` fixes input shapes, ``dims`` sets symbolic dims by name; unset symbolic
    dims become 1 with a warning. ``symbolic``: also give every cost as an exact formula in the
    unset symbolic dims (``Analysis.formulas``, ``Analysis.at``; see onnxcost/symbolic/formulas.py),
    the counts at 1, or at each symbol's least value where the model needs more (wav2vec2's
    length: 20; ``Analysis.symbolic.least``, and a warning) or ``least`` gives one
    (``{"length": 400}``, ``--dim length>=400``: the formulas hold from there).
    ``registry``: the cost formulas, by default the built-in ones; for one run with one op's
    formula replaced, ``REGISTRY.with_formula("Relu", my_formula)``.
    ``ort_peak``: also the peak activation memory under onnxruntime's own execution order
    (``totals.peak_activation_bytes_ort``, ``peak_activation_ort``; needs onnxruntime).
    An ``input_shapes`` entry that changes a dim the model fixes raises ShapeError unless
    ``allow_reshape``; shapes that make a node's input shapes disagree raise ShapeError.
    ``training``: also the cost of a training step (docs/training.md): each node's
    ``backward_macs`` and ``backward_flops``, and in the totals ``backward_macs``,
    ``backward_flops``, ``training_flops``, ``trainable_params`` and ``training_memory``, with
    ``optimizer`` (adam, adamw, sgd, sgd-momentum), ``frozen`` (a regex: initializers whose
    name it matches, by ``re.search``, are not trained), ``grad_inputs`` (the graph inputs
    need a gradient too) and ``mixed_precision`` (fp16 or bf16).
    ``traffic``: how bytes read and written are counted (onnxcost/analysis/traffic.py):
    ``"runtime"``, what a runtime moves per run (a Gather reads the rows it selects, a
    subgraph of constants is folded at load), or ``"all-inputs"``, every input and output of
    every node whole (torchstat's MemRead; onnxcost's bytes before this convention).
    """
    check_convention(convention)
    opts = _training_options(training, optimizer, frozen, grad_inputs, mixed_precision)
    check_traffic(traffic)
    if least and not symbolic:
        raise UsageError("least= gives the formulas' least values: it needs symbolic=True")
    if symbolic:
        if registry is not REGISTRY:
            raise UsageError("symbolic=True counts with the built-in formulas; drop registry=")
        from onnxcost.symbolic.formulas import symbolic_analysis

        result = symbolic_analysis(
            model,
            input_shapes=input_shapes,
            dims=dims,
            least=least,
            convention=convention,
            allow_reshape=allow_reshape,
            training=opts,
            traffic=traffic,
        )
    else:
        result = count(
            model,
            input_shapes=input_shapes,
            dims=dims,
            convention=convention,
            registry=registry,
            allow_reshape=allow_reshape,
            training=opts,
            traffic=traffic,
        )
    if not ort_peak:
        return result
    from onnxcost.bench.ort_order import OrtPeakLimitError, ort_peak_activation  # needs onnxruntime

    if result.symbolic is not None:  # at the point reported: the least values where above 1
        dims = {**(dims or {}), **result.symbolic.least}
    try:
        peak = ort_peak_activation(model, input_shapes, dims)
    except OrtPeakLimitError as e:  # bounded: the analysis carries on without it
        return replace(result, warnings=(*result.warnings, str(e)))
    totals = replace(result.totals, peak_activation_bytes_ort=peak.bytes)
    return replace(result, totals=totals, peak_activation_ort=peak)


def _training_options(
    training: bool,
    optimizer: str,
    frozen: str | None,
    grad_inputs: bool,
    mixed_precision: str | None,
) -> TrainingOptions | None:
    """The checked training options, None without ``training``; UsageError for a training
    argument given without it."""
    if not training:
        given = [
            name
            for name, value, default in (
                ("optimizer", optimizer, "adamw"),
                ("frozen", frozen, None),
                ("grad_inputs", grad_inputs, False),
                ("mixed_precision", mixed_precision, None),
            )
            if value != default
        ]
        if given:
            raise UsageError(f"{', '.join(given)} needs training=True (--training)")
        return None
    return options(optimizer, frozen, grad_inputs, mixed_precision)
