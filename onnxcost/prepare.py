"""One prepared model: loaded once, a built-in name built once, local functions inlined, nodes
named, the main graph indexed.

Every command starts from a ``PreparedModel``: ``analyze`` costs it, ``bench`` hands the same
named graph to onnxruntime (so the profile's node names are the analysis' by construction),
``compare`` and ``check`` analyse it and read its graph. Preparing is the expensive part of
reading a model; hand the result on rather than the path::

    prepared = prepare("model.onnx")
    a = analyze(prepared, dims={"batch": 1})
    b = analyze(prepared, dims={"batch": 8})
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import onnx
from onnx import helper

from onnxcost.errors import UsageError
from onnxcost.load.graph import GraphView, build, inline_functions
from onnxcost.load.kv import link_mask_dims
from onnxcost.load.model import (
    VIRTUAL_LOCATION_PREFIX,
    LoadedModel,
    ModelSource,
    external_tensors,
    load_model,
)
from onnxcost.load.names import text_names


@dataclass(frozen=True)
class PreparedModel:
    """A model ready for every command. Read-only by contract: ``analyze`` works on a copy of
    ``proto`` (shape inference writes into the model it is given), never on this one."""

    proto: onnx.ModelProto
    """The loaded model with local functions inlined, every node named and every name text
    (``onnxcost.load.names``; a private copy: the caller's ModelProto is never modified)."""
    view: GraphView
    """The main graph indexed in topological order (``onnxcost.load.graph.build``)."""
    path: Path | None
    """The file it was read from; None for bytes, a ModelProto or a built-in model."""
    model_bytes: int
    """File size plus external data files' sizes (0 for a built-in model)."""
    display: str
    """How to name it to the user: the path, the built-in name, or '<in-memory model>'."""
    builtin: str | None
    """The built-in model's name, when it is one."""
    renamed: bool
    """Whether inlining, naming or making names text (``onnxcost.load.names``) changed the names
    the source has: onnxruntime must then be given this model's bytes, not the file, for its
    node and input names to be the analysis'."""
    source: onnx.ModelProto | None = field(default=None, repr=False, compare=False)
    """The model as loaded, before inlining and naming, with ``prepare(..., keep_source=True)``
    (``proto`` itself when preparing changed nothing), else None: what ``annotate`` writes a
    copy of and Netron's attachment names nodes by. Read-only, like ``proto``."""
    notes: tuple[str, ...] = ()
    """What preparing took the model to mean, as warnings every analysis repeats: a decoder's
    attention mask length read as the cache length plus the new tokens
    (``onnxcost.load.kv.link_mask_dims``)."""

    @cached_property
    def checker_warning(self) -> str | None:
        """What onnx's full checker rejects in the model (its strict shape and type inference),
        as a warning naming the first failing node; None where it accepts it, or where the main graph
        has over ``CHECK_MAX_NODES`` nodes (then it is not run: it costs as much as ONNX's
        whole-graph inference). Run on the weight-free model (``_weight_free``). Computed on
        first use; read it before shape inference writes into ``proto``."""
        return checker_warning(self.proto)

    def working_copy(self) -> onnx.ModelProto:
        """A copy of ``proto`` that may be modified (shape inference does)."""
        copy = onnx.ModelProto()
        copy.CopyFrom(self.proto)
        return copy


def build_builtin(
    name: str, *, weights: bool, params: Mapping[str, str | int] | None = None
) -> onnx.ModelProto | None:
    """The built-in model ``name`` (a path that exists always wins), or None if there is none.

    Built without weights, its external-data locations are marked virtual: nothing to check.
    ``params``: builder parameters (``zoo.build``'s), e.g. ``{"kv_cache": "true"}``.
    """
    if os.sep in name or name.endswith(".onnx"):
        return None
    from onnxcost import zoo  # and numpy.random: only for a name that is no file

    if name not in zoo.MODELS:
        return None
    proto = zoo.build(name, weights=weights, params=params)
    if not weights:
        for tensor in external_tensors(proto):
            for entry in tensor.external_data:
                if entry.key == "location" and not entry.value.startswith(VIRTUAL_LOCATION_PREFIX):
                    entry.value = VIRTUAL_LOCATION_PREFIX + entry.value
    return proto


def prepare(
    source: ModelSource | PreparedModel,
    *,
    weights: bool = False,
    keep_source: bool = False,
    params: Mapping[str, str | int] | None = None,
) -> PreparedModel:
    """Load ``source`` (a path, bytes, a ModelProto, or a built-in model's name) and prepare it.

    ``weights``: keep the weight data (onnxruntime needs it; counting does not, so by default
    a built-in model's weights are declared, not built, and a large file's inline weights are
    not read: ``load_model``). ``keep_source``: keep the model as loaded too
    (``PreparedModel.source``; the copy taken is dropped when preparing changed nothing).
    ``params``: a built-in model's builder parameters (``zoo.build``'s, e.g.
    ``{"kv_cache": "true"}``); UsageError for any other source. A ``PreparedModel`` is
    returned as it is, unless ``keep_source`` or ``params`` asks for what it lacks.
    Raises ModelLoadError or GraphError with a line that says what to do.
    """
    if isinstance(source, PreparedModel):
        if keep_source and source.source is None:
            raise UsageError("prepare(..., keep_source=True) again from the model itself")
        if params:
            raise UsageError("prepare(..., params=...) again from the built-in model's name")
        return source
    builtin = None
    if isinstance(source, str | os.PathLike) and not os.path.exists(source):
        proto = build_builtin(os.fspath(source), weights=weights, params=params)
        if proto is not None:
            builtin = os.fspath(source)
            loaded = LoadedModel(proto, None, 0)
    if builtin is None:
        if params:
            what = f"; {source!r} is not one" if isinstance(source, str) else " (onnxcost zoo list)"
            raise UsageError(f"--param applies to built-in models only{what}")
        loaded = load_model(source, weights=weights)
    proto = loaded.proto
    original = None
    if keep_source:
        original = onnx.ModelProto()
        original.CopyFrom(proto)
    texted = text_names(proto)  # the main graph's nodes: in build
    inlined = bool(proto.functions)
    proto = inline_functions(proto)
    notes = link_mask_dims(proto)  # a decoder's mask length as past + seq: only dim names
    view = build(proto.graph, name_unnamed=True)
    changed = inlined or view.renamed or texted
    path = loaded.path
    if path is not None:
        display = str(path)
    elif builtin is not None:
        display = builtin
    else:
        display = source if isinstance(source, str) else "<in-memory model>"
    return PreparedModel(
        proto=proto,
        view=view,
        path=path,
        model_bytes=loaded.model_bytes,
        display=display,
        builtin=builtin,
        renamed=changed,
        source=None if original is None else original if changed or notes else proto,
        notes=tuple(notes),
    )


CHECK_MAX_NODES = 3_000
"""onnx's full checker runs on models of at most this many main-graph nodes: GPT-2's 2,030
take it 0.06 s, about a fifth of the analysis; a 5,582-node decoder 0.11 s, as much again."""

_CHECKED_NODE = re.compile(r"\(op_type:([^,]*), node name: ([^)]*)\)")


def checker_warning(model: onnx.ModelProto) -> str | None:
    """``PreparedModel.checker_warning`` for ``model`` (not modified)."""
    if len(model.graph.node) > CHECK_MAX_NODES:
        return None
    try:  # the full checker's own inference; its structural pass would read the weights
        onnx.shape_inference.infer_shapes(
            _weight_free(model), check_type=True, strict_mode=True, data_prop=False
        )
    except Exception as e:  # InferenceError: the model's own flaw, reported
        text = str(e).strip()
        first = text.splitlines()[0] if text else type(e).__name__
        found = _CHECKED_NODE.search(first)
        where = f" at node {found.group(2)!r} ({found.group(1)})" if found else ""
        return (
            f"onnx's full checker rejects the model{where}: {first}; onnxruntime will likely "
            f"refuse it too, and counts from there rest on onnxcost's lenient inference "
            f"(check the converter that wrote it)"
        )
    return None


def _weight_free(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its main graph's initializers declared as inputs (type and dims, no data):
    what the checker's inference needs, without copying the weights."""
    out = onnx.ModelProto()
    out.ir_version = model.ir_version
    out.opset_import.extend(model.opset_import)
    out.functions.extend(model.functions)
    graph = model.graph
    g = out.graph
    g.name = graph.name
    g.node.extend(graph.node)
    g.input.extend(graph.input)
    g.output.extend(graph.output)
    g.value_info.extend(graph.value_info)
    declared = {vi.name for vi in graph.input}
    for t in graph.initializer:
        if t.name not in declared:
            declared.add(t.name)
            g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return out


__all__ = ["PreparedModel", "prepare"]
