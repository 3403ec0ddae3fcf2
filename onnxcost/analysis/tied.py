"""An embedding table stored twice: the tied LM head an exporter wrote as a copy.

A decoder whose LM head shares the embedding table (Gemma, BLOOM, OPT, Falcon, GPT-BigCode
...) holds one tensor in PyTorch, and ``sum(p.numel())`` counts it once. The TorchScript
exporter and optimum store it twice: the table [V, H] that a Gather reads, and its transpose
[H, V] as the head's MatMul weight, under a made-up name (``onnx::MatMul_826``). Counted as
stored, the params held the table twice: Gemma's tiny export 197,960 where torch has 133,960
(V x H = 1,000 x 64 more). torch's dynamo exporter stores it once and reads it through a
Transpose, which ``analysis.weights`` counts once already.

``tied_copies`` finds such copies without reading either tensor whole: a 2-D initializer of
a Gather table's element type and dims (either way round) is the table's copy where it
equals the table, or its transpose, at ``SAMPLES`` positions drawn at random (the same draw
every run; ``load.samples`` reads only those elements). An untied head, trained or freshly
initialised, differs at almost every position. A table whose sampled elements are all alike
(the zeros of a model written without its weights) proves nothing and is left as it is, as
is any tensor whose data cannot be read here (a built-in model's, a typed field).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx

from onnxcost.load.graph import GraphView
from onnxcost.load.samples import all_alike, elements
from onnxcost.load.tensors import FLOAT_TYPES, PARAMETER_PATH

SAMPLES = 4096
"""Positions compared per pair of tensors: an untied pair agreeing at all of them by chance is
beyond any real model; reading them touches at most that many pages of each tensor."""

_SEED = 20_261_125
_CORNER = 16
"""The table's top-left 16 x 16 elements are compared first: 16 rows of each tensor."""


def _alike(values: np.ndarray) -> bool:
    return bool((values == values[0]).all())


def _ways(dims: Sequence[int], table: Sequence[int]) -> list[bool]:
    """How a tensor of ``dims`` may hold the table of dims ``table``: as it is (False),
    transposed (True); both where the table is square."""
    return [way for way, fits in ((False, dims == table), (True, dims == table[::-1])) if fits]


def _holds(
    t: onnx.TensorProto,
    flat: np.ndarray,
    want: np.ndarray,
    dims: Sequence[int],
    transposed: bool,
    path: Path | None,
) -> bool:
    """Whether ``t`` holds ``want``, the table's elements at the flat positions ``flat``, at
    the same places of the table (``transposed``: [i, j] of the table is [j, i] of ``t``)."""
    rows, cols = dims
    positions = (flat % cols) * rows + flat // cols if transposed else flat
    got = elements(t, positions, path)
    return got is not None and np.array_equal(got, want)


def weight_copies(proto: onnx.ModelProto, path: Path | None) -> dict[str, str]:
    """Initializer -> the initializer it repeats, element for element: a weight a module
    called more than once had the exporter fold its transpose once per call (ALBERT's one
    shared layer, three times through torch's dynamo exporter: 19,968 params counted where
    torch has 11,776). A copy is named as the exporter names what it computes (``val_180``),
    not as a param's path; the two agree at their first ``_CORNER`` x ``_CORNER`` elements and
    at ``SAMPLES`` positions drawn over them, and are not all alike (two zero biases of one
    shape are two params, as Keras' untrained ones are). Asked of that exporter's models only
    (``scopes.from_dynamo``): reading the first elements of every weight that shares its shape
    with another cost a TorchScript DeepLabV3's analysis 40%."""
    groups: dict[tuple[int, tuple[int, ...]], list[onnx.TensorProto]] = {}
    for t in proto.graph.initializer:
        dims = tuple(t.dims)
        if t.data_type in FLOAT_TYPES and len(dims) > 1 and all(d > 0 for d in dims):
            groups.setdefault((t.data_type, dims), []).append(t)
    copies: dict[str, str] = {}
    for group in groups.values():
        if len(group) < 2 or all(PARAMETER_PATH.match(t.name) for t in group[1:]):
            continue
        numel = int(np.prod(group[0].dims))
        head = np.arange(min(numel, _CORNER * _CORNER))
        first: dict[bytes, onnx.TensorProto] = {}
        for t in group:
            got = elements(t, head, path)
            if got is None or _alike(got):
                continue  # unreadable here, or all alike: no evidence
            original = first.setdefault(got.tobytes(), t)
            if original is t or PARAMETER_PATH.match(t.name):
                continue
            drawn = np.random.default_rng(_SEED).integers(0, numel, SAMPLES)
            want = elements(original, drawn, path)
            got_drawn = elements(t, drawn, path)
            if want is not None and got_drawn is not None and np.array_equal(want, got_drawn):
                copies[t.name] = original.name
    return copies


def tied_copies(proto: onnx.ModelProto, view: GraphView, path: Path | None) -> dict[str, str]:
    """Initializer -> the Gather table it is a copy of (as it is, or transposed), for the
    main graph of ``proto``; empty where there is none (most models: no 2-D initializer
    shaped like another's table)."""
    groups: dict[tuple[int, int, int], list[onnx.TensorProto]] = {}
    for t in proto.graph.initializer:
        dims = t.dims
        if len(dims) == 2 and dims[0] > 0 and dims[1] > 0 and dims[0] * dims[1] > 1:
            groups.setdefault((t.data_type, *sorted(dims)), []).append(t)
    copies: dict[str, str] = {}
    for group in groups.values():
        if len(group) < 2:
            continue  # no other tensor of its element type and dims, either way round
        # A table: read by a Gather as its data, last (a table also read later, through a
        # Transpose, is dynamo's tied head read once: there is no copy to find)
        tables = [t for t in group if _gathered(t.name, view)]
        for table in tables:
            alike = [t for t in group if t.name not in copies and t not in tables]
            if alike:
                _find(table, alike, path, copies)
    return copies


def _gathered(name: str, view: GraphView) -> bool:
    """Whether the last node that reads ``name`` is a Gather reading it as its data."""
    k = view.last_use.get(name)
    return k is not None and view.op_types[k] == "Gather" and view.inputs[k][0] == name


def _find(
    table: onnx.TensorProto,
    alike: Sequence[onnx.TensorProto],
    path: Path | None,
    copies: dict[str, str],
) -> None:
    """Add to ``copies`` each tensor of ``alike`` that holds ``table``, as it is or
    transposed: first at the table's top-left corner (16 rows of each tensor: an untied head
    or a table of zeros is told at once), then at ``SAMPLES`` positions drawn over it."""
    rows, cols = table.dims
    corner = np.add.outer(np.arange(min(rows, _CORNER)) * cols, np.arange(min(cols, _CORNER)))
    corner = corner.ravel()
    at_corner = elements(table, corner, path)
    if at_corner is None or _alike(at_corner):
        return  # unreadable here, or all alike: no evidence either way
    drawn = np.random.default_rng(_SEED).integers(0, rows * cols, SAMPLES)
    at_drawn: np.ndarray | None = None
    for t in alike:
        for transposed in _ways(t.dims, table.dims):
            if not _holds(t, corner, at_corner, table.dims, transposed, path):
                continue
            if at_drawn is None:
                at_drawn = elements(table, drawn, path)
            if at_drawn is not None and _holds(t, drawn, at_drawn, table.dims, transposed, path):
                copies[t.name] = table.name
                break


def deduplicated(proto: onnx.ModelProto, view: GraphView, path: Path | None) -> frozenset[str]:
    """The outputs of the Identity nodes through which the TorchScript exporter reads a param
    that equalled another: its ``_jit_pass_onnx_deduplicate_initializers`` keeps one of the
    equal initializers and writes ``Identity(kept) -> onnx::Conv_197`` for each other one. In
    an untrained model, the biases a BatchNorm folded into a convolution (its shift: zeros)
    are equal for every convolution of one width: torchvision's resnet18 counted 11,680,872,
    one bias per width, where it has 11,684,712 (the BatchNorm channels fewer than torch's
    11,689,512, as trained); timm's resnet50, whose last BatchNorm of each block starts at
    zero, 21,870,696 of 25,557,032. Each such output is a param of its own (``Weights.see``):
    an Identity of the main graph, named by the exporter (``onnx::``), of a float initializer
    whose elements are all alike (+0 and -0 as one; read whole up to ``SAMPLES``, else
    ``SAMPLES`` of them, spread): distinct params hold one value only so, and a tied weight is
    read as it is."""
    initializers = {t.name: t for t in proto.graph.initializer}
    found: set[str] = set()
    alike: dict[str, bool] = {}
    for k in [k for k, op in enumerate(view.op_types) if op == "Identity"]:
        ins, outs = view.inputs[k], view.outputs[k]
        if view.domains[k] not in ("", "ai.onnx") or len(ins) != 1:
            continue
        t = initializers.get(ins[0])
        if t is None or len(outs) != 1 or not outs[0].startswith("onnx::"):
            continue
        if t.data_type not in FLOAT_TYPES or math.prod(t.dims) < 2:
            continue
        if ins[0] not in alike:
            alike[ins[0]] = all_alike(t, path, SAMPLES)
        if alike[ins[0]]:
            found.add(outs[0])
    return frozenset(found)


__all__ = ["SAMPLES", "deduplicated", "tied_copies", "weight_copies"]
