"""The graph inputs' shapes for the symbolic walk (``symbolic.shapes``): declared dims as
symbols, ``--dim`` and ``--input-shape`` values, and derived dims such as optimum's
``past_sequence_length + sequence_length`` as SymDims over the symbols they name.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Mapping, Sequence

import onnx

from onnxcost.shapes.overrides import stated_dims
from onnxcost.symbolic.dims import _derived_names, _standalone
from onnxcost.symdim import Dim, SymDim, as_dim


class _DividesError(Exception):
    """A derived dim divides by what is not an int >= 1."""


def _derived(
    param: str, fixed: Mapping[str, Dim], standalone: Callable[[], set[str]]
) -> Dim | None:
    """A dim_param as a Dim: a symbol (or its value in ``fixed``), or a derived dim such as
    optimum's ``past_sequence_length + sequence_length`` computed over the symbols it names
    (``dims._derived_names``: integer arithmetic of names every one of which some input has as
    a dim of its own); any other text is one symbol of that name, as ``model_symbols`` and a
    concrete analysis read it. None for a floor-division by what is not an int >= 1."""
    if param in fixed:
        return fixed[param]
    if param.isidentifier():
        return SymDim.of(param)
    names = _derived_names(param, standalone())
    if names is None:
        return SymDim.of(param)
    try:
        return as_dim(_arithmetic(ast.parse(param, mode="eval").body, fixed))
    except _DividesError:
        return None


def _arithmetic(node: ast.expr, fixed: Mapping[str, Dim]) -> SymDim:
    """The SymDim of a derived dim's parsed text (``_derived_names`` has checked its form)."""
    if isinstance(node, ast.Name):
        return SymDim.of(fixed.get(node.id, node.id))
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return SymDim.of(node.value)
    assert isinstance(node, ast.BinOp)
    a, b = _arithmetic(node.left, fixed), _arithmetic(node.right, fixed)
    if isinstance(node.op, ast.Add):
        return a + b
    if isinstance(node.op, ast.Sub):
        return a - b
    if isinstance(node.op, ast.Mult):
        return a * b
    if b.is_constant and b.constant >= 1:
        return a // b.constant
    raise _DividesError(f"a derived dim divides by {b}")


def input_shapes_of(
    proto: onnx.ModelProto,
    fixed: Mapping[str, Dim] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, tuple[Dim, ...]]:
    """The graph inputs' shapes (initializers left out): an ``input_shapes`` entry as given,
    else the declared dims, each symbol at its ``fixed`` value where it has one (an int, or a
    Dim: ``length + 19`` for a symbol walked from its least value; also the values an
    ``input_shapes`` entry gives the symbols of its input: ``stated_dims``), and derived dims
    computed over the symbols (``_derived``). An input whose declared shape has no rank, or a
    dim that is not carried, is left out."""
    input_shapes = dict(input_shapes or {})
    ints = {s: v for s, v in (fixed or {}).items() if isinstance(v, int)}
    fixed = {**(fixed or {}), **stated_dims(proto.graph, input_shapes, ints)}
    inits = {t.name for t in proto.graph.initializer}
    # The inputs' dims that are names of their own: read once, where a derived dim needs them.
    standalone = functools.cache(lambda: _standalone(proto))
    out: dict[str, tuple[Dim, ...]] = {}
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        given = input_shapes.get(vi.name)
        if given is not None:
            out[vi.name] = tuple(int(d) for d in given)
            continue
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims: list[Dim] = []
        for d in t.shape.dim:
            found: Dim | None
            if d.HasField("dim_value"):
                found = d.dim_value
            else:
                found = _derived(d.dim_param, fixed, standalone) if d.dim_param else None
            if found is None:
                break
            dims.append(found)
        else:
            out[vi.name] = tuple(dims)
    return out


__all__ = ["input_shapes_of"]
