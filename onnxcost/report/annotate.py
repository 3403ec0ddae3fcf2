"""A copy of a model carrying what onnxcost found: shapes in ``value_info``, costs in metadata.

For viewers that read the model alone (Netron shows a node's ``metadata_props`` and the
shapes in ``value_info`` on every edge): each main-graph tensor a node writes gets its
inferred element type and shape, each node ``onnxcost.macs``, ``onnxcost.flops``,
``onnxcost.params``, ``onnxcost.bytes_read``, ``onnxcost.bytes_written`` and
``onnxcost.status``, and the model the same totals. Nothing else changes: names, weights
(external data keeps its locations) and opsets stay as they are. The input is never written.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import onnx
from onnx import helper

from onnxcost.analysis.records import Convention
from onnxcost.analysis.result import Analysis
from onnxcost.analysis.traffic import Traffic
from onnxcost.api import analyze
from onnxcost.errors import OutputError
from onnxcost.load import wire
from onnxcost.load.graph import build
from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX, ModelSource
from onnxcost.load.names import text_names
from onnxcost.prepare import prepare
from onnxcost.shapes.infer import infer

PREFIX = "onnxcost."


def _set_props(entries: Any, values: Mapping[str, str]) -> None:
    """Replace the ``onnxcost.*`` entries of a ``metadata_props`` field with ``values``."""
    keep = [(e.key, e.value) for e in entries if not e.key.startswith(PREFIX)]
    del entries[:]
    for key, value in [*keep, *values.items()]:
        entry = entries.add()
        entry.key, entry.value = key, value


def annotated(
    source: ModelSource,
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    convention: Convention = "onnxcost",
    traffic: Traffic = "runtime",
) -> tuple[onnx.ModelProto, Analysis]:
    """The annotated copy of ``source`` and the analysis it carries.

    A built-in model's name builds it with its (random) weights, as ``zoo save`` does. The
    model is loaded once (``onnxcost.prepare``): the analysis costs the prepared model, the
    copy written is the model as loaded. A file's or bytes' large inline weights are not
    read (``load_model``): ``write`` copies them from ``source`` into the file it writes.
    """
    builtin = isinstance(source, str | os.PathLike) and not os.path.exists(source)
    prepared = prepare(source, weights=builtin, keep_source=True)
    result = analyze(
        prepared, input_shapes=input_shapes, dims=dims, convention=convention, traffic=traffic
    )
    assert prepared.source is not None  # keep_source=True keeps it
    model = onnx.ModelProto()
    model.CopyFrom(prepared.source)
    # The analysis names its records as build(name_unnamed=True) names the nodes: do the same
    # on a copy, whose i-th node then carries the record name of the model's i-th node.
    named = onnx.ModelProto()
    named.CopyFrom(model)
    text_names(named)  # as prepare makes the analysed model's names text
    shapes = infer(named, input_shapes, dims, build(named.graph, name_unnamed=True))
    records = {r.name: r for r in result.nodes if r.graph == ""}
    declared = {vi.name for vi in model.graph.input} | {vi.name for vi in model.graph.output}
    declared |= {t.name for t in model.graph.initializer}
    del model.graph.value_info[:]
    for node, twin in zip(model.graph.node, named.graph.node, strict=True):
        rec = records.get(twin.name)
        if rec is not None:
            _set_props(
                node.metadata_props,
                {
                    f"{PREFIX}macs": str(rec.macs),
                    f"{PREFIX}flops": str(rec.flops),
                    f"{PREFIX}params": str(rec.params),
                    f"{PREFIX}bytes_read": str(rec.bytes_read),
                    f"{PREFIX}bytes_written": str(rec.bytes_written),
                    f"{PREFIX}status": rec.status,
                },
            )
        for out in node.output:
            info = shapes.types.get(out)
            if out and out not in declared and info is not None and info.elem_type:
                model.graph.value_info.append(
                    helper.make_tensor_value_info(
                        out, info.elem_type, None if info.shape is None else list(info.shape)
                    )
                )
    t = result.totals
    _set_props(
        model.metadata_props,
        {
            f"{PREFIX}convention": result.convention,
            f"{PREFIX}macs": str(t.macs),
            f"{PREFIX}flops": str(t.flops),
            f"{PREFIX}params": str(t.params),
            f"{PREFIX}bytes_read": str(t.bytes_read),
            f"{PREFIX}bytes_written": str(t.bytes_written),
            f"{PREFIX}peak_activation_bytes": str(t.peak_activation_bytes),
        },
    )
    return model, result


def write(model: onnx.ModelProto, source: ModelSource, out: Path) -> None:
    """Save ``model`` to ``out`` (already checked with ``outputs.check_output``) through a
    temporary file renamed into place. External data stays where it is, named relative to the
    model's folder: ``out`` must then be in the folder of ``source``."""
    from onnxcost.load.outputs import replacing

    external = any(
        e.key == "location" and not e.value.startswith(VIRTUAL_LOCATION_PREFIX)
        for t in model.graph.initializer
        for e in t.external_data
    )
    if external and isinstance(source, str | os.PathLike):
        here = Path(os.fspath(source)).resolve().parent
        if out.resolve().parent != here:
            raise OutputError(
                f"{os.fspath(source)} keeps its weights in external data files named relative "
                f"to its folder: write the annotated copy into {here} too"
            )
    data = model.SerializeToString()
    if isinstance(source, str | os.PathLike) and os.path.isfile(source):
        with open(source, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                pieces = None
            else:
                with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    pieces = _restored(data, mapped, source)
            with replacing(out) as tmp, tmp.open("wb", buffering=0) as dst:
                _write_pieces(dst, data if pieces is None else pieces, f.fileno())
        return
    # Bytes were cut as a file is; a ModelProto or a built-in model keeps its weights, and an
    # empty original then proves it (a cut tensor would have no span to copy: refused).
    held = bytes(source) if isinstance(source, bytes | bytearray) else b""
    pieces = _restored(data, held, source)
    with replacing(out) as tmp, tmp.open("wb", buffering=0) as dst:
        _write_pieces(dst, data if pieces is None else pieces, None, held)


def _restored(data: bytes, original: wire.Buffer, source: ModelSource) -> list[wire.Piece] | None:
    """``data`` (the annotated copy, its large inline weights cut by ``load_model``) as pieces
    with the weights' spans of ``original`` back; None if no weight was cut."""
    try:
        return wire.restore_payloads(data, original, VIRTUAL_LOCATION_PREFIX + "inline")
    except wire.WireError as e:
        what = os.fspath(source) if isinstance(source, str | os.PathLike) else "the model bytes"
        raise OutputError(f"{what} changed while it was annotated ({e}); run annotate again") from e


_CHUNK = 1 << 20
"""Bytes of weights copied at a time: the copy never holds a whole weight in memory."""


def _write_pieces(
    dst: BinaryIO, pieces: bytes | list[wire.Piece], fd: int | None, data: bytes | None = None
) -> None:
    """Write ``pieces`` to the unbuffered ``dst``: bytes as they are, a span copied from the
    file ``fd`` by the kernel (``os.sendfile``, never through Python's memory) or from
    ``data``."""
    if isinstance(pieces, bytes):
        _write_all(dst, pieces)
        return
    for piece in pieces:
        if isinstance(piece, bytes):
            _write_all(dst, piece)
            continue
        start, end = piece
        if data is not None:
            _write_all(dst, memoryview(data)[start:end])
            continue
        assert fd is not None
        while start < end:
            count = min(_CHUNK, end - start)
            try:
                sent = os.sendfile(dst.fileno(), fd, start, count)
            except (AttributeError, OSError):  # no sendfile between files here
                chunk = os.pread(fd, count, start)
                sent = len(chunk)
                _write_all(dst, chunk)
            if not sent:
                raise OutputError(
                    "the model file shrank while it was annotated; run annotate again"
                )
            start += sent


def _write_all(dst: BinaryIO, data: bytes | memoryview) -> None:
    """An unbuffered write may take part of ``data``: write until all of it is written."""
    view = memoryview(data)
    while view:
        view = view[dst.write(view) :]
