"""A serialized ModelProto without its large tensor payloads, read off the protobuf wire format.

A model file is one protobuf message; each weight is a TensorProto whose payload (``raw_data``
or a typed ``*_data`` field) is a length-delimited field inside the graph's field inside the
model. ``strip_payloads`` walks the wire format (key = field number << 3 | wire type; a
length-delimited field is a varint length and that many bytes) and returns the serialized
model with each large payload cut out, the tensor marked as external data at a virtual
location (``onnxcost-virtual:inline``, with the payload's offset and length in the file), so
that parsing the result costs what parsing the graph costs. The length of every message that
encloses a cut is written anew.

It descends only into messages longer than ``SMALL_BYTES`` (a shorter one cannot hold a large
payload): the main graph's nodes and initializers, Constant and other attribute tensors,
subgraphs (If/Loop/Scan bodies), local functions and training graphs. A tensor keeps its
payload when the payload is at most ``SMALL_BYTES``, or when it may be folded as a shape
value (INT64, INT32, BOOL or FLOAT, at most ``FOLD_MAX_ELEMENTS`` elements, the limits
``shapes`` folds within) and its payload is no larger than such a tensor's can be.

The walk reads only keys and lengths, a few bytes per field, so over a memory map the pages
of the payloads it skips are never touched. Bytes it does not understand (a group wire type,
a length past the end) raise ``WireError``; the caller then parses the whole model as before.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from onnx import TensorProto

SMALL_BYTES = 4096
"""Payloads up to this many bytes are kept: the walk does not look inside shorter messages."""

FOLD_MAX_ELEMENTS = 1 << 16
"""Integer, bool and float tensors up to this many elements keep their data: shape folding
(``onnxcost.shapes.folding``) may read them."""

FOLDABLE_TYPES = frozenset(
    {TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL, TensorProto.FLOAT}
)
"""The element types shape folding reads (``onnxcost.shapes.folding`` takes them from here)."""


_MAX_BYTES_PER_ELEMENT = 11
"""The most bytes one element of a foldable tensor takes on the wire (an unpacked int64: a
one-byte key and a ten-byte varint); a payload beyond it cannot fill a foldable tensor's dims."""

_MAX_TENSOR_FIELDS = 4096
"""A tensor with more fields than this (typed data written unpacked, one field per element)
is kept whole rather than walked element by element in Python."""

MAX_DEPTH = 100
"""protobuf's own nesting limit: a deeper model fails its parse, so the walk stops there."""

VARINT, _I64, LEN, _I32 = 0, 1, 2, 5
"""Wire types this walk reads; 3 and 4 (groups) are not used by ONNX."""

_PAYLOAD_FIELDS = frozenset({4, 5, 6, 7, 9, 10, 11})
"""TensorProto's float_data, int32_data, string_data, int64_data, raw_data, double_data,
uint64_data."""
_DIMS, _DATA_TYPE, _EXTERNAL_DATA, _DATA_LOCATION = 1, 2, 13, 14

# Where tensors can be, by message: field number -> the message type of that field.
_CHILDREN: dict[str, dict[int, str]] = {
    "model": {7: "graph", 20: "training", 25: "function"},
    "training": {1: "graph", 2: "graph"},  # TrainingInfoProto: initialization, algorithm
    "graph": {1: "node", 5: "tensor"},  # node, initializer
    "function": {7: "node"},
    "node": {5: "attribute"},
    "attribute": {5: "tensor", 6: "graph", 10: "tensor", 11: "graph"},  # t, g, tensors, graphs
}


PAYLOAD_KEY = "onnxcost-payload"
"""The external-data entry of a cut tensor that names its payload fields' span in the file."""

Buffer = bytes | mmap.mmap
"""What the walk reads: indexing gives an int, slicing a copy of those bytes."""
Pieces = list[bytes]


class WireError(ValueError):
    """The bytes are not a protobuf message this walk can read."""


def varint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` (seven bits a byte, low bits first) and the position after it."""
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError("truncated or overlong varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(buf: Buffer, pos: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """Each field of the message in ``buf[pos:end]``: (number, wire type, where its key
    starts, where its value starts, where it ends)."""
    while pos < end:
        key_start = pos
        key, pos = varint(buf, pos, end)
        wire_type = key & 7
        if wire_type == LEN:
            size, pos = varint(buf, pos, end)
            value_end = pos + size
        elif wire_type == VARINT:
            value_end = varint(buf, pos, end)[1]
        elif wire_type == _I64:
            value_end = pos + 8
        elif wire_type == _I32:
            value_end = pos + 4
        else:
            raise WireError(f"wire type {wire_type}")
        if value_end > end:
            raise WireError("a field runs past its message")
        yield key >> 3, wire_type, key_start, pos, value_end
        pos = value_end


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | LEN) + _encode_varint(len(payload)) + payload


def _spliced(
    buf: Any,
    start: int,
    end: int,
    children: Mapping[int, str],
    rewrite: Callable[[str, int, int], tuple[list[Any], int] | None],
    min_bytes: int = -1,
) -> tuple[list[Any], int] | None:
    """The message ``buf[start:end]`` as pieces to join and their total length, each child
    message that ``rewrite(kind, start, end)`` rewrites spliced in under a new length header
    (one of at most ``min_bytes`` is not looked at); the bytes between are kept as they are.
    None if no child was rewritten."""
    pieces: list[Any] = []
    size = 0
    last = start  # bytes from here to the next rewritten field are copied as they are
    for number, wire_type, key_start, value_start, value_end in fields(buf, start, end):
        if wire_type != LEN or value_end - value_start <= min_bytes or number not in children:
            continue
        inner = rewrite(children[number], value_start, value_end)
        if inner is None:
            continue
        head = buf[last:key_start]
        header = _encode_varint(number << 3 | LEN) + _encode_varint(inner[1])
        pieces += [head, header, *inner[0]]
        size += len(head) + len(header) + inner[1]
        last = value_end
    if not pieces:
        return None
    tail = buf[last:end]
    pieces.append(tail)
    return pieces, size + len(tail)


def _message(
    buf: Buffer, start: int, end: int, kind: str, location: str, depth: int = 0
) -> tuple[Pieces, int] | None:
    """The message ``buf[start:end]`` of type ``kind`` as pieces to join, and their total
    length, with large payloads cut; None if nothing in it is cut."""
    if kind == "tensor":
        return _tensor(buf, start, end, location)
    if depth > MAX_DEPTH:
        raise WireError("messages nested deeper than protobuf parses")
    return _spliced(
        buf,
        start,
        end,
        _CHILDREN[kind],
        lambda child, a, b: _message(buf, a, b, child, location, depth + 1),
        SMALL_BYTES,
    )


def _tensor(buf: Buffer, start: int, end: int, location: str) -> tuple[Pieces, int] | None:
    """A TensorProto with its payload cut and replaced by a virtual external reference, or
    None where the payload is kept (small, foldable, already external, or unusual)."""
    kept: list[tuple[int, int]] = []  # spans of the fields that stay
    dims: list[int] = []
    data_type = 0
    payload = 0  # bytes of payload fields, keys included
    first: tuple[int, int] | None = None  # value span of the first payload field
    span: tuple[int, int] | None = None  # the payload fields' bytes, keys included
    for count, (number, wire_type, key_start, value_start, value_end) in enumerate(
        fields(buf, start, end)
    ):
        if count >= _MAX_TENSOR_FIELDS:
            return None
        if number in _PAYLOAD_FIELDS:
            payload += value_end - key_start
            if first is None:
                first = (value_start, value_end)
                span = (key_start, value_end)
            elif span is not None and span[1] == key_start:
                span = (span[0], value_end)
            else:
                return None  # payload fields apart: kept, as restore_payloads copies one span
            continue
        if number == _EXTERNAL_DATA:
            return None  # external already: nothing inline to cut
        if number == _DATA_LOCATION:
            if wire_type != VARINT or varint(buf, value_start, value_end)[0] != 0:
                return None  # external already
            continue  # DEFAULT, said explicitly: the reference below says EXTERNAL
        if number == _DIMS:
            if wire_type == VARINT:
                dims.append(varint(buf, value_start, value_end)[0])
            elif wire_type == LEN:
                pos = value_start
                while pos < value_end:
                    dim, pos = varint(buf, pos, value_end)
                    dims.append(dim)
        elif number == _DATA_TYPE and wire_type == VARINT:
            data_type = varint(buf, value_start, value_end)[0]
        if kept and kept[-1][1] == key_start:
            kept[-1] = (kept[-1][0], value_end)  # adjacent fields: one span
        else:
            kept.append((key_start, value_end))
    if first is None or payload <= SMALL_BYTES:
        return None
    numel = math.prod(dims)
    if (
        data_type in FOLDABLE_TYPES
        and numel <= FOLD_MAX_ELEMENTS
        and payload <= numel * _MAX_BYTES_PER_ELEMENT + 16
        and all(d < 1 << 63 for d in dims)  # int64 dims: a larger varint is negative
    ):
        return None  # shape folding may read it
    assert span is not None  # set with first
    reference = _external_reference(location, first[0], first[1] - first[0], span)
    pieces = [buf[a:b] for a, b in kept]
    pieces.append(reference)
    return pieces, sum(b - a for a, b in kept) + len(reference)


def _external_reference(location: str, offset: int, length: int, span: tuple[int, int]) -> bytes:
    """TensorProto fields saying the data is external: ``external_data`` entries (each a
    StringStringEntryProto: key = 1, value = 2) and ``data_location = EXTERNAL``. ``offset``
    and ``length``: the first payload field's value; ``PAYLOAD_KEY``: the bytes of all its
    payload fields, keys included, as ``start:end`` (what ``restore_payloads`` copies back)."""
    entries = (
        ("location", location),
        ("offset", str(offset)),
        ("length", str(length)),
        (PAYLOAD_KEY, f"{span[0]}:{span[1]}"),
    )
    out = b"".join(
        _length_delimited(
            _EXTERNAL_DATA,
            _length_delimited(1, key.encode()) + _length_delimited(2, value.encode()),
        )
        for key, value in entries
    )
    return out + _encode_varint(_DATA_LOCATION << 3 | VARINT) + _encode_varint(TensorProto.EXTERNAL)


def strip_payloads(buf: Buffer, location: str) -> bytes | None:
    """The serialized ModelProto ``buf`` with large tensor payloads cut out (see the module
    docstring), each tensor referring to ``location``, or None if it has none to cut.
    Raises WireError if ``buf`` is not a message."""
    out = _message(buf, 0, len(buf), "model", location)
    return None if out is None else b"".join(out[0])


Piece = bytes | tuple[int, int]
"""Part of a restored model: bytes as they are, or a ``(start, end)`` span of the original."""


def _restored(
    buf: bytes, start: int, end: int, kind: str, location: str, depth: int = 0
) -> tuple[list[Piece], int] | None:
    """The message ``buf[start:end]`` with each tensor that ``strip_payloads`` cut given its
    payload fields back (as a span of the original), and its new length; None if nothing in
    it was cut. Unlike the cut, it looks into every message: a cut tensor is small."""
    if depth > MAX_DEPTH:
        raise WireError("messages nested deeper than protobuf parses")
    if kind == "tensor":
        return _restored_tensor(buf, start, end, location)
    return _spliced(
        buf,
        start,
        end,
        _CHILDREN[kind],
        lambda child, a, b: _restored(buf, a, b, child, location, depth + 1),
    )


def _restored_tensor(
    buf: bytes, start: int, end: int, location: str
) -> tuple[list[Piece], int] | None:
    kept: list[Piece] = []
    size = 0
    entries: dict[bytes, bytes] = {}
    external = False
    for number, wire_type, key_start, value_start, value_end in fields(buf, start, end):
        if number == _EXTERNAL_DATA and wire_type == LEN:
            key = value = b""
            for n, w, _k, a, b in fields(buf, value_start, value_end):
                if w == LEN and n == 1:
                    key = buf[a:b]
                elif w == LEN and n == 2:
                    value = buf[a:b]
            entries[key] = value
            external = True
            continue
        if number == _DATA_LOCATION:
            continue
        kept.append(buf[key_start:value_end])
        size += value_end - key_start
    if not external or entries.get(b"location") != location.encode():
        return None
    try:
        a, b = (int(x) for x in entries[PAYLOAD_KEY.encode()].split(b":"))
    except (KeyError, ValueError):
        raise WireError(f"a cut tensor without its {PAYLOAD_KEY} entry") from None
    kept.append((a, b))
    return kept, size + b - a


def restore_payloads(stripped: bytes, original: Buffer, location: str) -> list[Piece] | None:
    """What a model cut by ``strip_payloads(original, location)`` (and changed since, e.g.
    annotated) is with its payloads back: pieces to write one after the other, each span a
    copy of ``original``'s bytes. None if nothing in it was cut. Each span is checked to be
    the payload fields it was (``WireError`` if ``original`` changed)."""
    out = _restored(stripped, 0, len(stripped), "model", location)
    if out is None:
        return None
    for piece in out[0]:
        if isinstance(piece, tuple):
            a, b = piece
            if not 0 <= a < b <= len(original):
                raise WireError("a payload span past the end of the original")
            for count, (number, _w, _k, _vs, _ve) in enumerate(fields(original, a, b)):
                if number not in _PAYLOAD_FIELDS or count >= _MAX_TENSOR_FIELDS:
                    raise WireError("the original has other bytes where the payload was")
    return out[0]
