"""Derived input dims: a dim_param that is integer arithmetic of the inputs' own symbols
(optimum's attention_mask ``past_sequence_length + sequence_length``), read and computed.

Below the symbolic pass (``onnxcost.symbolic.dims``) so that the concrete analysis gives such
a dim its value from its symbols' values, set or defaulted, as the symbolic walk does.
"""

from __future__ import annotations

import ast
import keyword
import operator
import re
from collections.abc import Callable, Mapping, Sequence

import onnx

from onnxcost.errors import ShapeError


def _standalone(proto: onnx.ModelProto) -> set[str]:
    """The dim_params of the graph inputs that are names of their own (``seq``)."""
    return {p for p in _dim_params(proto, {}) if p.isidentifier()}


def _derived_names(param: str, standalone: set[str], owner: str = "") -> list[str] | None:
    """The symbols a derived dim is computed from (``past_seq + seq``: past_seq and seq), or
    None where ``param`` is no such dim: not integer arithmetic of names, or a name in it
    that no input has as a dim of its own (``batch-size`` is one symbol's name, not a
    difference). ShapeError naming input ``owner`` for arithmetic too long to read."""
    names = _expression_names(param, owner)
    if names is None or not all(n in standalone for n in names):
        return None
    return names


def python_names(graph: onnx.GraphProto) -> dict[str, tuple[str, str]]:
    """{dim_param: (a Python name for it, the first input that has it)} for each graph-input
    dim_param that is neither a Python name nor a derived dim (paddle2onnx's
    ``DynamicDimension.0``; ``batch-size`` where no input has ``batch`` and ``size``): a
    formula's text is Python, its symbols names, so the symbolic pass renames such a dim
    (``symbolic.formulas``), and ``--dim`` takes either name. The name is the text with each
    character that is no ASCII word character as ``_`` (``DynamicDimension_0``; ``dim_``
    before a leading digit, ``_`` appended until no input dim and no keyword has it). Text
    longer than ``MAX_DERIVED_CHARS`` stays as it is: a name is taken as 1 (a formula in it
    would not read), arithmetic refused by the symbolic pass."""
    params = _graph_dim_params(graph)
    standalone = {p for _owner, p in params if p.isidentifier()}
    taken = {p for _owner, p in params}
    out: dict[str, tuple[str, str]] = {}
    for owner, param in params:
        if param in out or param.isidentifier() or len(param) > MAX_DERIVED_CHARS:
            continue
        if _derived_names(param, standalone, owner) is not None:
            continue
        name = re.sub(r"\W", "_", param, flags=re.ASCII)
        name = name if name[:1].isalpha() or name[:1] == "_" else f"dim_{name}"
        while name in taken or keyword.iskeyword(name):
            name += "_"
        taken.add(name)
        out[param] = (name, owner)
    return out


def by_param(graph: onnx.GraphProto, dims: Mapping[str, int]) -> dict[str, int]:
    """``dims`` with each key that is the Python name of a dim (``python_names``:
    ``DynamicDimension_0``), and no dim's own, as that dim's own (``DynamicDimension.0``)."""
    own = {p for _o, p in _graph_dim_params(graph)}
    if all(k in own for k in dims):
        return dict(dims)
    named = {name: param for param, (name, _owner) in python_names(graph).items()}
    return {(named[k] if k not in own and k in named else k): v for k, v in dims.items()}


def _graph_dim_params(
    graph: onnx.GraphProto, skip: Mapping[str, object] | None = None
) -> list[tuple[str, str]]:
    """(input, dim_param) of every symbolic dim of the graph inputs, as text, initializers and
    the inputs in ``skip`` left out."""
    left_out = {t.name for t in graph.initializer} | set(skip or ())
    return [
        (vi.name, d.dim_param)
        for vi in graph.input
        if vi.name not in left_out
        for d in vi.type.tensor_type.shape.dim
        if d.HasField("dim_param") and d.dim_param
    ]


def _dim_params(proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]) -> list[str]:
    return [param for _input, param in _input_dim_params(proto, input_shapes)]


def _input_dim_params(
    proto: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]
) -> list[tuple[str, str]]:
    """(input, dim_param) of every symbolic dim of the graph inputs not fixed by
    ``input_shapes``, as text."""
    return _graph_dim_params(proto.graph, input_shapes)


_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
}
MAX_DERIVED_CHARS = 256
"""The longest dim_param read as arithmetic (optimum's longest, 'past_sequence_length +
sequence_length', has 40 characters). Python's parser recurses once per term, so a longer
one (3,000 terms) is refused, not parsed."""
_ARITHMETIC = re.compile(r"[\w\s+\-*/()]*[+\-*/][\w\s+\-*/()]*", re.ASCII)
"""The characters of integer arithmetic of names, with an operator among them."""
_MAX_DIM = 2**62
"""The largest dim, as --dim and --input-shape take them."""


def _expression_names(text: str, owner: str = "") -> list[str] | None:
    """The names in a derived dim (``past_sequence_length + sequence_length``, optimum's
    attention_mask), or None when ``text`` is not integer arithmetic (+ - * //) of names.
    ShapeError for arithmetic longer than ``MAX_DERIVED_CHARS``."""
    if len(text) > MAX_DERIVED_CHARS:
        if _ARITHMETIC.fullmatch(text):
            raise _too_long(text, owner)
        return None  # no arithmetic: one (long) name
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _OPS:
                return None
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, int):
                return None
        elif not isinstance(node, ast.Expression | ast.Load | ast.operator):
            return None  # calls, attributes, comparisons: not a dim
    return names


def _too_long(text: str, owner: str) -> ShapeError:
    where = f"input {owner!r}: its" if owner else "the"
    return ShapeError(
        f"{where} derived dim {text[:40]!r}... has {len(text):,} characters, more than "
        f"onnxcost reads as arithmetic ({MAX_DERIVED_CHARS}); fix that input's shape with "
        f"--input-shape {owner or 'NAME'}=DIMS"
    )


def _magnitude(value: int) -> str:
    """``value`` in digits, or as a power of ten where it has more than 20."""
    digits = len(str(abs(value)))
    return f"{value:,}" if digits <= 20 else f"{'-' if value < 0 else ''}about 10**{digits - 1}"


def _evaluate(node: ast.expr, values: Mapping[str, int]) -> int:
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    assert isinstance(node, ast.BinOp)
    return _OPS[type(node.op)](_evaluate(node.left, values), _evaluate(node.right, values))


def derived_value(name: str, param: str, names: Sequence[str], dims: Mapping[str, int]) -> int:
    """The value of derived dim ``param`` of input ``name`` at ``dims``; ShapeError where it
    divides by 0 or falls outside 0 .. 2**62 (a dim's range)."""
    at = ", ".join(f"{n}={dims[n]}" for n in dict.fromkeys(names))
    fix = f"or give the dim a value of its own with --dim '{param}=N'"
    try:
        value = _evaluate(ast.parse(param, mode="eval").body, dims)
    except ZeroDivisionError:
        raise ShapeError(
            f"input {name!r}: its derived dim {param!r} divides by 0 at {at}; pass values that "
            f"make the divisor 1 or more (--dim SYMBOL=N with N >= 1) {fix}"
        ) from None
    if not 0 <= value <= _MAX_DIM:
        raise ShapeError(
            f"input {name!r}: its derived dim {param!r} is {_magnitude(value)} at {at}, outside a "
            f"dim's range 0 .. 2**62; pass smaller --dim values {fix}"
        )
    return value
