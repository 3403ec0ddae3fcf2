"""Shape flags: ``--input-shape NAME=DIMS`` and ``--dim SYMBOL=N`` parsed, and the dims they set checked."""

from __future__ import annotations

import operator
import re

from onnxcost.errors import ShapeError, UsageError

_DIMS_RE = re.compile(r"^\s*([0-9]+\s*(?:[x,]\s*[0-9]+\s*)*)?$")
_MAX_DIM = 2**62
"""The largest dim a flag may set: ONNX stores dims as int64, and products must stay sane."""


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``'input=1x3x224x224'`` (or ``input:1,3,224,224``) -> ``('input', (1, 3, 224, 224))``."""
    name, sep, dims = text.rpartition("=") if "=" in text else text.rpartition(":")
    if not sep or not name or not _DIMS_RE.match(dims):
        raise UsageError(
            f"--input-shape {text!r} is not NAME=DIMS; write it like input=1x3x224x224 (a scalar: NAME=)"
        )
    parts = re.split(r"[x,]", dims.replace(" ", "")) if dims.strip() else []
    if any(len(d) > 19 for d in parts):  # int() of thousands of digits is slow, then refused
        shown = text if len(text) <= 60 else text[:60] + "..."
        raise UsageError(f"--input-shape {shown!r}: a dim is larger than 2**62; pass a real size")
    values = tuple(int(d) for d in parts)
    if any(v < 0 for v in values):
        raise UsageError(f"--input-shape {text!r}: every dim must be an integer >= 0")
    if any(v > _MAX_DIM for v in values):
        raise UsageError(f"--input-shape {text!r}: a dim is larger than 2**62; pass a real size")
    return name.strip(), values


def parse_dim(text: str) -> tuple[str, int]:
    """``'batch=8'`` -> ``('batch', 8)``. N may be 0: ``past_seq=0`` is an empty KV cache."""
    if ">=" in text:  # SYMBOL>=N, a least value: analyze --symbolic reads it (parse_least)
        raise UsageError(
            f"--dim {text!r} gives a least value (SYMBOL>=N), which only analyze --symbolic "
            f"takes; give a value here, e.g. --dim batch=8"
        )
    name, sep, value = text.partition("=")
    # [0-9], not str.isdigit: that accepts superscripts such as '²', which int() refuses.
    if not sep or not name.strip() or not re.fullmatch(r"[0-9]+", value.strip()):
        raise UsageError(
            f"--dim {text!r} is not SYMBOL=N with N an integer >= 0; e.g. --dim batch=8"
        )
    if len(value.strip()) > 19 or int(value) > _MAX_DIM:
        raise UsageError(f"--dim {text!r}: N must be between 0 and 2**62; e.g. --dim batch=8")
    return name.strip(), int(value)


def parse_least(text: str) -> tuple[str, int]:
    """``'length>=400'`` -> ``('length', 400)``: the least value of a symbol, from which
    ``analyze --symbolic``'s formulas hold (symbolic/least.py). N is 1 or more."""
    name, sep, value = text.partition(">=")
    if not sep or not name.strip() or not re.fullmatch(r"[0-9]+", value.strip()):
        raise UsageError(
            f"--dim {text!r} is not SYMBOL>=N with N an integer >= 1; e.g. --dim length>=400"
        )
    if len(value.strip()) > 19 or not 1 <= int(value) <= _MAX_DIM:
        raise UsageError(f"--dim {text!r}: N must be between 1 and 2**62; e.g. --dim length>=400")
    return name.strip(), int(value)


def _check_dim_value(value: object, flag: str) -> None:
    """ShapeError unless ``value`` is an integer from 0 to 2**62 (what a flag may set: ONNX
    stores dims as int64). The API takes any mapping, so its values are checked here."""
    try:
        if isinstance(value, bool):
            raise TypeError
        v = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ShapeError(
            f"{flag}: dim {value!r:.40} is not an integer; pass whole numbers from 0 to 2**62"
        ) from None
    if not 0 <= v <= _MAX_DIM:
        shown = v if v.bit_length() <= 64 else "past int64"
        raise ShapeError(
            f"{flag}: dim {shown} is out of range; every dim must be an integer from 0 to 2**62 "
            f"(ONNX stores dims as int64): pass a real size"
        )
