"""A symbolic shape pass (issue 22, a first slice): every tensor's shape as ``symdim.Dim``s in
the graph inputs' symbols, and the values of small integer tensors (the shape sub-graphs:
Shape, Gather, Concat, Unsqueeze, arithmetic) carried the same way, in one walk.

Ops carried: elementwise ops with numpy broadcasting, MatMul, Gemm, Conv and pooling output
sizes (``symbolic.windows``: ONNX's, rounded toward 0), ConvTranspose's, Reshape (0 and -1),
Transpose, Concat, Slice (ends clamped with min where symbolic, max(0, ...) rows), Gather,
Shape, Range (delta 1), Softmax, Split, Squeeze, Unsqueeze, every Reduce*, Constant; ArgMax, Einsum,
TopK, Tile, OneHot and more (``symbolic.more_shapes``); and every op onnxcost has its own
output-shape rule for (``shapes.rules``: onnxruntime's com.microsoft contrib ops,
LayerNormalization with its statistics), by that rule (``symbolic.contrib``). A node that it
cannot carry (another op, a broadcast of two unlike symbols, a value it does not know) is
named in ``uncarried`` and its outputs have no shape: only what is downstream of it is lost.
The graph inputs' shapes, with ``--dim``, ``--input-shape`` and derived dims:
``symbolic.inputs``. The costs over these shapes: ``symbolic.node_costs``; the formulas
``--symbolic`` gives from them: ``symbolic.onewalk``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence

import onnx
from onnx import numpy_helper

from onnxcost.load.tensors import normalize_domain
from onnxcost.shapes.rules import RULES as ONNXCOST_RULES
from onnxcost.symbolic.contrib import carry_by_rule
from onnxcost.symbolic.domain import _sign
from onnxcost.symbolic.inputs import input_shapes_of
from onnxcost.symbolic.more_shapes import MORE_RULES
from onnxcost.symbolic.shape_core import (
    Floats,
    Shape,
    SymbolicShapes,
    _axis,
    _broadcast,
    _ints,
    _matmul_shape,
    _selected,
    _UncarriedError,
    _value,
    trunc_div,
)
from onnxcost.symbolic.windows import WINDOW_RULES
from onnxcost.symdim import Dim, SymDim, _Monomial, as_dim, sym_max, sym_min

_BIG = 2**31 - 1
"""Slice ends at or past this mean "to the end"."""
_ELEMENTWISE = frozenset(
    {
        "Add", "Sub", "Mul", "Div", "Pow", "Where", "Equal", "Less", "Greater", "And", "Or",
        "Not", "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Neg", "Exp", "Log", "Cast",
        "Identity", "Reciprocal", "Max", "Min", "Abs", "Softmax", "Gelu", "Dropout", "Mod",
        "Floor", "Ceil", "Clip", "BatchNormalization", "InstanceNormalization", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu",
        "CumSum", "LessOrEqual", "GreaterOrEqual", "Xor", "BitwiseAnd", "BitwiseOr",
        "BitwiseXor", "BitwiseNot", "IsNaN", "IsInf", "Sign", "Round", "Sin", "Cos", "Softplus",
        "Softsign", "Mish", "PRelu", "ThresholdedRelu", "Celu", "LogSoftmax", "Hardmax", "Trilu",
        "LpNormalization", "QuantizeLinear", "DequantizeLinear", "ScatterElements", "Scatter",
        "ScatterND", "Sum", "Mean",
    }
)  # fmt: skip
"""Ops whose first output has the broadcast shape of their inputs (Softmax: of its one data
input)."""
_FIRST_ONLY = frozenset(
    {
        "Softmax", "Dropout", "Clip", "BatchNormalization", "InstanceNormalization", "CumSum",
        "LogSoftmax", "Hardmax", "Trilu", "QuantizeLinear", "DequantizeLinear",
        "ScatterElements", "Scatter", "ScatterND",
    }
)  # fmt: skip
"""Of those, the ones whose output has their first input's shape (the others are scales,
biases, statistics, bounds, scales and zero points; a Scatter's indices and updates)."""
_BY_ONNXCOST_RULE = {
    "LayerNormalization": ONNXCOST_RULES["", "LayerNormalization"],
    "SimplifiedLayerNormalization": ONNXCOST_RULES["", "SimplifiedLayerNormalization"],
}
"""ONNX-domain ops whose shapes come from onnxcost's own rules (``shapes.rules``), as the
contrib ops': LayerNormalization with its statistics, onnxruntime's SimplifiedLayerNormalization
(written in ONNX's domain). ONNX's QLinearConv is ONNX's own inference's, as Conv
(``symbolic.windows``: its sizes round toward 0, where onnxcost's rule for the contrib op
floors)."""


def symbolic_shapes(
    proto: onnx.ModelProto,
    fixed: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> SymbolicShapes:
    """The shapes of ``proto``'s tensors in its inputs' symbols (``fixed``: symbols given a
    value; ``input_shapes``: inputs given a concrete shape, ``input_shapes_of``); see the
    module docstring for what is carried."""
    out = SymbolicShapes(opset=_onnx_opset(proto))
    graph = proto.graph
    for t in graph.initializer:
        out.shapes[t.name] = tuple(int(d) for d in t.dims)
        _maybe_value(out, t.name, t)
    out.shapes.update(input_shapes_of(proto, fixed, input_shapes))
    for i, node in enumerate(graph.node):
        name = node.name or f"{node.op_type}_{i}"
        try:
            _carry(out, node)
        except _UncarriedError as e:
            out.uncarried.append((name, node.op_type, str(e)))
        except (IndexError, KeyError, ValueError, TypeError, AssertionError, ArithmeticError) as e:
            # A malformed node (a missing input, an axis out of range): named, not a crash.
            out.uncarried.append((name, node.op_type, f"unexpected input ({type(e).__name__})"))
    return out


def _onnx_opset(proto: onnx.ModelProto) -> int:
    """The model's opset of ONNX's own domain, 0 where it imports none."""
    return next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)


_INT_FORMATS: dict[int, str] = {onnx.TensorProto.INT64: "q", onnx.TensorProto.INT32: "i"}
"""struct's letter of each integer type whose small tensors may be shapes."""


def _maybe_value(out: SymbolicShapes, name: str, t: onnx.TensorProto) -> None:
    """Record the value of ``t`` if it is a small int64 or int32 tensor stored in the model
    (or a small float one: ``SymbolicShapes.floats``); read with struct (raw data is
    little-endian) or from the typed field: numpy_helper's general conversion costs most of
    a symbolic walk's time for a Constant it meets."""
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return
    n = math.prod(t.dims)
    if n > 64:
        return
    if t.data_type == onnx.TensorProto.FLOAT:
        raw = t.raw_data
        if raw and len(raw) == 4 * n:
            out.floats[name] = Floats(struct.unpack(f"<{n}f", raw))
        elif not raw and len(t.float_data) == n:
            out.floats[name] = Floats(t.float_data)
        return
    letter = _INT_FORMATS.get(t.data_type)
    if letter is None:
        return
    raw = t.raw_data
    if raw:
        if len(raw) == n * struct.calcsize(letter):
            out.values[name] = struct.unpack(f"<{n}{letter}", raw)
        return
    data = t.int64_data if letter == "q" else t.int32_data
    if len(data) == n:
        out.values[name] = tuple(int(v) for v in data)


def _attrs(node: onnx.NodeProto) -> dict[str, object]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _carry(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    attrs: dict[str, object] | None = None,
    elems: Sequence[int] = (),
) -> tuple[int, ...] | None:
    """Carry ``node``'s output shapes (and small values) into ``out``; ``attrs``: its
    attributes as ``_attrs`` reads them, where the caller has them (read-only); ``elems``:
    its inputs' element types, where known. Returns its outputs' element types where
    onnxcost's own rule for the op decides them (``symbolic.contrib``), else None."""
    op_type = node.op_type
    if node.domain not in ("", "ai.onnx"):
        by = ONNXCOST_RULES.get((normalize_domain(node.domain), op_type))
        if by is None:
            raise _UncarriedError(f"no symbolic rule for {node.domain}'s {op_type}")
        shapes = [_shape(out, n) if n else None for n in node.input]
        return carry_by_rule(out, node, by, shapes, elems)
    rule = _RULES.get(op_type)
    if rule is None:
        if op_type in _ELEMENTWISE:
            rule = _elementwise
        elif op_type in _BY_ONNXCOST_RULE:
            shapes = [_shape(out, n) if n else None for n in node.input]
            return carry_by_rule(out, node, _BY_ONNXCOST_RULE[op_type], shapes, elems)
        else:
            raise _UncarriedError("no symbolic rule for this op")
    shapes = [_shape(out, n) if n else None for n in node.input]
    rule(out, node, shapes, _attrs(node) if attrs is None else attrs)
    return None


def _shape(out: SymbolicShapes, name: str) -> Shape:
    if name not in out.shapes:
        raise _UncarriedError(f"input {name!r} has no carried shape")
    return out.shapes[name]


def _int_op(op: str, out: SymbolicShapes, name: str) -> Callable[[Dim, Dim], Dim] | None:
    def div(a: Dim, b: Dim) -> Dim:
        if isinstance(b, int) and b >= 1:
            return trunc_div(out, a, b, name)  # an integer Div rounds toward 0
        raise _UncarriedError(f"division by {b}")

    def mod(a: Dim, b: Dim) -> Dim:  # F.pad's (w - h % w) % w; both fmods agree from 0
        if isinstance(a, int) and isinstance(b, int) and a >= 0 and b >= 1:
            return a % b
        raise _UncarriedError(f"{a} mod {b}")

    ops: dict[str, Callable[[Dim, Dim], Dim]] = {
        "Mod": mod,
        "Add": lambda a, b: as_dim(SymDim.of(a) + b),
        "Sub": lambda a, b: as_dim(SymDim.of(a) - b),
        "Mul": lambda a, b: as_dim(SymDim.of(a) * b),
        "Div": div,
        "Max": sym_max,
        "Min": sym_min,
    }
    return ops.get(op)


def _elementwise(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    data = [s for s in shapes if s is not None]
    if node.op_type in _FIRST_ONLY:
        data = data[:1]
    shape = _broadcast(data)
    out.shapes[node.output[0]] = shape
    if node.op_type == "Dropout" and len(node.output) > 1 and node.output[1]:
        out.shapes[node.output[1]] = shape  # the mask
    # Integer arithmetic on known values (a shape sub-graph): element by element.
    if node.op_type in ("Cast", "Identity") and node.input[0] in out.values:
        out.values[node.output[0]] = out.values[node.input[0]]
        return
    if node.op_type == "Neg" and node.input[0] in out.values:  # T5's x[:, :, -seq:]
        out.values[node.output[0]] = tuple(as_dim(-SymDim.of(v)) for v in out.values[node.input[0]])
        return
    if node.op_type in ("Equal", "Where") and all(n in out.values for n in node.input):
        found = _equal_or_where(node.op_type, [out.values[n] for n in node.input])
        if found is not None:
            out.values[node.output[0]] = found
        return
    op = _int_op(node.op_type, out, node.output[0])
    if (
        op is not None
        and all(n in out.values for n in node.input)
        and math.prod(SymDim.of(d).constant if SymDim.of(d).is_constant else 2 for d in shape) <= 64
    ):
        a, b = (out.values[n] for n in node.input[:2])
        n = max(len(a), len(b))
        if len(a) in (1, n) and len(b) in (1, n):
            out.values[node.output[0]] = tuple(
                op(a[k if len(a) > 1 else 0], b[k if len(b) > 1 else 0]) for k in range(n)
            )


def _equal_or_where(op: str, args: list[tuple[Dim, ...]]) -> tuple[Dim, ...] | None:
    """Equal or Where on known values (torch's ``Where(Equal(shape, -1), 1, shape)``); None
    where a comparison is not known (a symbol against anything but a negative constant:
    a dim is never negative)."""
    n = max(len(a) for a in args)
    if any(len(a) not in (1, n) for a in args):
        return None
    at = [[a[k if len(a) > 1 else 0] for a in args] for k in range(n)]
    if op == "Equal":
        found: list[Dim] = []
        for a, b in at:
            if isinstance(a, int) and isinstance(b, int):
                found.append(int(a == b))
            elif (isinstance(a, int) and a < 0) or (isinstance(b, int) and b < 0):
                found.append(0)
            else:
                return None
        return tuple(found)
    if not all(isinstance(c, int) for c, _x, _y in at):
        return None
    return tuple(x if c else y for c, x, y in at)


def _matmul(
    out: SymbolicShapes, node: onnx.NodeProto, shapes: list[Shape | None], _a: Mapping[str, object]
) -> None:
    a, b = shapes[0], shapes[1]
    assert a is not None and b is not None
    out.shapes[node.output[0]] = _matmul_shape(a, b)


def _gemm(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    a, b = shapes[0], shapes[1]
    assert a is not None and b is not None
    m = a[1] if attrs.get("transA", 0) else a[0]
    n = b[0] if attrs.get("transB", 0) else b[1]
    out.shapes[node.output[0]] = (m, n)


def _exact_div(p: SymDim, q: SymDim) -> SymDim:
    """p / q where q divides p exactly: one term (c * a monomial) dividing every term of p,
    or a polynomial (``_long_div``: wav2vec2's ``32*b*(t - 1) / (16*b*(t - 1))`` is 2)."""
    if len(q.terms) != 1:
        return _long_div(p, q)
    ((qm, qc),) = q.terms.items()
    qexp = dict(qm)
    terms = {}
    for m, c in p.terms.items():
        exps = dict(m)
        if c % qc or any(exps.get(a, 0) < e for a, e in qexp.items()):
            raise _UncarriedError(f"-1 of Reshape: {p} / {q}")
        rest = {a: e - qexp.get(a, 0) for a, e in exps.items() if e - qexp.get(a, 0)}
        terms[tuple(sorted(rest.items(), key=lambda ae: str(ae[0])))] = c // qc
    return SymDim(terms)


_MAX_DIVISION_STEPS = 1_000
"""The most terms of a quotient ``_long_div`` finds before it gives up (a Reshape's -1 has a
few)."""


def _long_div(p: SymDim, q: SymDim) -> SymDim:
    """p / q by long division, its atoms (symbols, floors, mins, maxes) taken as variables:
    in a graded order, q's leading term divides p's until nothing is left. q divides p as
    polynomials exactly where nothing is left (one divisor is its ideal's Groebner basis), and
    then the quotient holds wherever the atoms take values; _UncarriedError where something is
    left, or a leading coefficient does not divide (no quotient with integer coefficients)."""
    atoms = sorted({a for d in (p, q) for mono in d.terms for a, _e in mono}, key=str)
    index = {a: k for k, a in enumerate(atoms)}

    def order(mono: _Monomial) -> tuple[int, tuple[int, ...]]:
        exps = [0] * len(atoms)
        for a, e in mono:
            exps[index[a]] = e
        return sum(exps), tuple(exps)

    lead = max(q.terms, key=order)
    lead_exps, lead_c = dict(lead), q.terms[lead]
    rest, quotient = p, SymDim.of(0)
    for _ in range(_MAX_DIVISION_STEPS):
        if not rest.terms:
            return quotient
        top = max(rest.terms, key=order)
        c = rest.terms[top]
        exps = dict(top)
        if c % lead_c or any(exps.get(a, 0) < e for a, e in lead_exps.items()):
            break
        left = {a: e - lead_exps.get(a, 0) for a, e in exps.items() if e - lead_exps.get(a, 0)}
        step = SymDim({tuple(sorted(left.items(), key=lambda ae: str(ae[0]))): c // lead_c})
        quotient = quotient + step
        rest = rest - step * q
    raise _UncarriedError(f"-1 of Reshape: {p} / {q}")


def _product(dims: Iterable[Dim]) -> SymDim:
    """The product of ``dims`` (1 for none)."""
    total = SymDim.of(1)
    for d in dims:
        total = total * d
    return total


def _keep_value(out: SymbolicShapes, node: onnx.NodeProto) -> None:
    """A node that only reshapes keeps its input's known value (a shape tensor's elements)."""
    if node.input[0] in out.values:
        out.values[node.output[0]] = out.values[node.input[0]]


def _reshape(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    target = list(_value(out, node.input[1]))
    if not attrs.get("allowzero", 0):
        target = [x[i] if d == 0 else d for i, d in enumerate(target)]
    if -1 in target:
        known = _product(d for d in target if d != -1)
        target[target.index(-1)] = as_dim(_exact_div(_product(x), known))
    out.shapes[node.output[0]] = tuple(target)
    _keep_value(out, node)


def _flatten(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    axis = _axis(int(attrs.get("axis", 1)), len(x))  # type: ignore[call-overload]
    out.shapes[node.output[0]] = (as_dim(_product(x[:axis])), as_dim(_product(x[axis:])))


def _pad(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    pads = list(_value(out, node.input[1])) if len(node.input) > 1 else _ints(attrs, "pads", [])
    if len(node.input) > 3 and node.input[3]:
        raise _UncarriedError("Pad with axes")
    if len(pads) != 2 * len(x):
        raise _UncarriedError(f"{len(pads)} pads for rank {len(x)}")
    out.shapes[node.output[0]] = tuple(
        as_dim(SymDim.of(d) + pads[i] + pads[i + len(x)]) for i, d in enumerate(x)
    )


def _transpose(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    perm = _ints(attrs, "perm", list(range(len(x)))[::-1])
    out.shapes[node.output[0]] = tuple(x[p] for p in perm)
    if node.input[0] in out.values:
        ranges = [range(d) if isinstance(d, int) else range(0) for d in x]
        found = _selected(out.values[node.input[0]], x, ranges, perm)
        if found is not None:
            out.values[node.output[0]] = found


def _concat(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    present = [s for s in shapes if s is not None]
    axis = _axis(int(attrs.get("axis", 0)), len(present[0]))  # type: ignore[call-overload]
    total = SymDim.of(0)
    for s in present:
        total = total + s[axis]
    first = present[0]
    out.shapes[node.output[0]] = (*first[:axis], as_dim(total), *first[axis + 1 :])
    if all(n in out.values for n in node.input) and len(first) == 1:
        out.values[node.output[0]] = tuple(v for n in node.input for v in out.values[n])


def _clamp(v: Dim, dim: Dim) -> Dim:
    """A Slice start or end ``v`` clamped to 0 .. dim (step 1), one below 0 counted from the
    end; a symbolic one that may be below 0 at some points only is not carried (ONNX counts
    it from the end there: x[:, 2:s - 6] has 2 rows at s = 5)."""
    if isinstance(v, int):
        if v >= _BIG:
            return dim
        if v < 0:  # counted from the end, clamped at 0: x[:, -3:] has min(3, s) rows
            return sym_max(0, SymDim.of(dim) + v) if isinstance(dim, SymDim) else max(0, dim + v)
        if isinstance(dim, SymDim):
            return 0 if v == 0 else sym_min(v, dim)  # a table sliced to its first v rows
        return min(v, dim)
    if _below_0(v):  # counted from the end at every point: x[:, -s:] from dim - s, at 0 least
        return sym_max(0, SymDim.of(dim) + v)
    if not _at_least_0(v):  # below 0 somewhere only: ONNX would count it from the end there
        raise _UncarriedError(f"a start or end, {v}, that may be below 0")
    rest = SymDim.of(dim) - v
    if rest.is_polynomial and min(rest.terms.values(), default=0) >= 0:
        return v  # within the dim wherever every symbol is at least 0 (torch.split's x[:b] of 2b)
    return sym_min(v, dim)


def _below_0(d: SymDim) -> bool:
    """Whether ``d`` <= -1 wherever every symbol is at least 1 (``domain._sign``)."""
    return _sign(d + 1, sorted(d.symbols), None) == -1


def _at_least_0(d: SymDim) -> bool:
    """Whether ``d`` >= 0 wherever every symbol is at least 1 (``domain._sign``), or is so
    read within a position table, each ``min(c, p)`` as p (as ``_broadcast`` reads it: GPT-2's
    past + 1 written ``past - min(1024, past) + min(1024, past + 1)``)."""
    symbols = sorted(d.symbols)
    return _sign(d, symbols, None) == 1 or _sign(d.unbounded(), symbols, None) == 1


def _unclamped(v: Dim, dim: Dim) -> SymDim:
    """A Slice start or end as ONNX reads it before its clamp to 0 .. dim: one below 0 (an
    int) counted from the end, one at or past ``_BIG`` the dim."""
    if isinstance(v, int) and v >= _BIG:
        return SymDim.of(dim)
    if (isinstance(v, int) and v < 0) or (isinstance(v, SymDim) and _below_0(v)):
        return SymDim.of(dim) + v
    return SymDim.of(v)


def _size(lo: Dim, hi: Dim, step: int, ends: tuple[SymDim, SymDim]) -> Dim:
    """ONNX's Slice size from the clamped ``lo`` and ``hi``: ``max(0, ceil((hi - lo) /
    step))``, written without the ``max`` where the unclamped ``ends`` (start, end) are apart
    by at least 1 - step wherever every symbol is at least 1 (the clamp keeps their order);
    an end before the start is an empty slice (x[:, 30:29] has 0 rows at every s, where
    ``min(29, s) - min(30, s)`` is -1 from s = 30)."""
    n = SymDim.of(hi) - lo
    size = n.ceil_div(step)
    if n.is_constant:
        return max(0, int(size.constant))
    if _at_least_0(ends[1] - ends[0] + (step - 1)):
        return as_dim(size)
    return sym_max(0, size)


def _slice(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    starts, ends = _value(out, node.input[1]), _value(out, node.input[2])
    axes = (
        [int(SymDim.of(a).constant) for a in _value(out, node.input[3])]
        if len(node.input) > 3 and node.input[3]
        else list(range(len(starts)))
    )
    steps = (
        _value(out, node.input[4]) if len(node.input) > 4 and node.input[4] else (1,) * len(axes)
    )
    if not all(isinstance(st, int) and st != 0 for st in steps):
        raise _UncarriedError("a step that is not a constant other than 0")
    if not len(axes) == len(starts) == len(ends) == len(steps):
        raise _UncarriedError("starts, ends and axes of unlike lengths")
    result = list(x)
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        a = _axis(a, len(x))
        assert isinstance(st, int)
        if st < 0:  # backwards (F.pad's pads reversed, x.flip): over constants only
            dim = x[a]
            if not (isinstance(dim, int) and isinstance(s, int) and isinstance(e, int)):
                raise _UncarriedError("a step below 0 over a symbolic dim, start or end")
            result[a] = len(range(*slice(s, e, st).indices(dim)))  # ONNX's clamps: Python's
            continue
        lo, hi = _clamp(s, x[a]), _clamp(e, x[a])
        result[a] = _size(lo, hi, st, (_unclamped(s, x[a]), _unclamped(e, x[a])))
    out.shapes[node.output[0]] = tuple(result)
    if node.input[0] in out.values and all(isinstance(v, int) for v in (*starts, *ends)):
        ranges = [range(d) if isinstance(d, int) else range(0) for d in x]
        for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
            dim = x[_axis(a, len(x))]
            if isinstance(dim, int):  # else no value: _selected's constant shape
                ranges[_axis(a, len(x))] = range(*slice(s, e, st).indices(dim))
        found = _selected(out.values[node.input[0]], x, ranges)
        if found is not None:
            out.values[node.output[0]] = found
            return
    if node.input[0] in out.values and len(x) == 1:
        values = out.values[node.input[0]]
        lo, hi = (SymDim.of(_clamp(v, len(values))) for v in (starts[0], ends[0]))
        if lo.is_constant and hi.is_constant and steps[0] == 1:
            out.values[node.output[0]] = values[lo.constant : hi.constant]


def _gather(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    data, indices = shapes[0], shapes[1]
    assert data is not None and indices is not None
    axis = _axis(int(attrs.get("axis", 0)), len(data))  # type: ignore[call-overload]
    out.shapes[node.output[0]] = (*data[:axis], *indices, *data[axis + 1 :])
    if node.input[0] in out.values and node.input[1] in out.values and len(data) == 1:
        values = out.values[node.input[0]]
        picked = []
        for i in out.values[node.input[1]]:
            if not isinstance(i, int):
                return
            picked.append(values[i])
        out.values[node.output[0]] = tuple(picked)


def _gather_nd(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    """indices [b..., q..., k] over data [b..., d...] (b: batch_dims): [b..., q..., d[k:]...];
    k must be a known int."""
    data, indices = shapes[0], shapes[1]
    assert data is not None and indices is not None
    batch = int(attrs.get("batch_dims", 0))  # type: ignore[call-overload]
    k = indices[-1]
    if not isinstance(k, int):
        raise _UncarriedError(f"the indices' last dim {k} is symbolic")
    out.shapes[node.output[0]] = (*indices[:-1], *data[batch + k :])


def _shape_op(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    start = _axis(int(attrs.get("start", 0)), len(x))  # type: ignore[call-overload]
    end = attrs.get("end")
    stop = len(x) if end is None else _axis(int(end), len(x))  # type: ignore[call-overload]
    values = x[start:stop]
    out.shapes[node.output[0]] = (len(values),)
    out.values[node.output[0]] = values


def _range(
    out: SymbolicShapes, node: onnx.NodeProto, shapes: list[Shape | None], _a: Mapping[str, object]
) -> None:
    start, limit, delta = (_value(out, n)[0] for n in node.input[:3])
    if delta != 1:
        raise _UncarriedError(f"a delta of {delta}")
    out.shapes[node.output[0]] = (as_dim(SymDim.of(limit) - start),)  # NB: limit >= start


def _axes(
    out: SymbolicShapes, node: onnx.NodeProto, attrs: Mapping[str, object]
) -> list[int] | None:
    if "axes" in attrs:
        return _ints(attrs, "axes", [])
    if len(node.input) > 1 and node.input[1]:
        return [SymDim.of(a).constant for a in _value(out, node.input[1])]
    return None


def _squeeze(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    axes = _axes(out, node, attrs)
    if axes is None:
        if any(isinstance(d, SymDim) for d in x):
            raise _UncarriedError("Squeeze without axes of a symbolic shape")
        axes = [i for i, d in enumerate(x) if d == 1]
    drop = {_axis(a, len(x)) for a in axes}
    for a in drop:  # ONNX refuses to squeeze a dim but 1 (an LSTM's last step at seq = 0)
        if 0 <= a < len(x) and isinstance(x[a], int) and x[a] != 1:
            raise _UncarriedError(f"a squeezed axis {a} of size {x[a]}, not 1")
    out.shapes[node.output[0]] = tuple(d for i, d in enumerate(x) if i not in drop)
    _keep_value(out, node)


def _unsqueeze(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    axes = _axes(out, node, attrs) or []
    rank = len(x) + len(axes)
    add = {_axis(a, rank) for a in axes}
    it = iter(x)
    out.shapes[node.output[0]] = tuple(1 if i in add else next(it) for i in range(rank))
    _keep_value(out, node)


def _split(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    axis = _axis(int(attrs.get("axis", 0)), len(x))  # type: ignore[call-overload]
    if len(node.input) > 1 and node.input[1]:
        parts: list[Dim] = list(_value(out, node.input[1]))
    elif "split" in attrs:
        parts = list(_ints(attrs, "split", []))
    else:
        n = len(node.output)
        whole = SymDim.of(x[axis])
        if any(c % n for c in whole.terms.values()):
            raise _UncarriedError(f"{x[axis]} in {n} equal parts")
        parts = [as_dim(whole // n)] * n
    for name, part in zip(node.output, parts, strict=True):
        out.shapes[name] = (*x[:axis], part, *x[axis + 1 :])


def _reduce(
    out: SymbolicShapes,
    node: onnx.NodeProto,
    shapes: list[Shape | None],
    attrs: Mapping[str, object],
) -> None:
    x = shapes[0]
    assert x is not None
    axes = _axes(out, node, attrs)
    if not axes and attrs.get("noop_with_empty_axes", 0):
        out.shapes[node.output[0]] = x
        return
    drop = set(range(len(x))) if not axes else {_axis(a, len(x)) for a in axes}
    if attrs.get("keepdims", 1):
        out.shapes[node.output[0]] = tuple(1 if i in drop else d for i, d in enumerate(x))
    else:
        out.shapes[node.output[0]] = tuple(d for i, d in enumerate(x) if i not in drop)
    if node.input[0] in out.values and len(x) == 1 and node.op_type in ("ReduceSum", "ReduceProd"):
        total = SymDim.of(1 if node.op_type == "ReduceProd" else 0)
        for v in out.values[node.input[0]]:
            total = total * v if node.op_type == "ReduceProd" else total + v
        out.values[node.output[0]] = (as_dim(total),)


def _constant_of_shape(
    out: SymbolicShapes, node: onnx.NodeProto, _s: list[Shape | None], attrs: Mapping[str, object]
) -> None:
    shape = _value(out, node.input[0])
    out.shapes[node.output[0]] = shape
    t = attrs.get("value")
    count = math.prod(d if isinstance(d, int) else 65 for d in shape)
    if count <= 64 and (t is None or isinstance(t, onnx.TensorProto)):
        fill = 0 if t is None else numpy_helper.to_array(t).reshape(-1)[0].item()
        if isinstance(fill, int):
            out.values[node.output[0]] = (fill,) * count


def _expand(
    out: SymbolicShapes, node: onnx.NodeProto, shapes: list[Shape | None], _a: Mapping[str, object]
) -> None:
    x = shapes[0]
    assert x is not None
    out.shapes[node.output[0]] = _broadcast([x, _value(out, node.input[1])])


def _constant(
    out: SymbolicShapes, node: onnx.NodeProto, _s: list[Shape | None], attrs: Mapping[str, object]
) -> None:
    t = attrs.get("value")
    if not isinstance(t, onnx.TensorProto):
        raise _UncarriedError("a Constant other than value=")
    out.shapes[node.output[0]] = tuple(int(d) for d in t.dims)
    _maybe_value(out, node.output[0], t)


_Rule = Callable[[SymbolicShapes, onnx.NodeProto, list[Shape | None], Mapping[str, object]], None]
_RULES: dict[str, _Rule] = {
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Flatten": _flatten,
    "Pad": _pad,
    "Concat": _concat,
    "Slice": _slice,
    "Gather": _gather,
    "GatherND": _gather_nd,
    "Shape": _shape_op,
    "Range": _range,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Split": _split,
    "ReduceMean": _reduce,
    "ReduceProd": _reduce,
    "ReduceSum": _reduce,
    "ReduceMax": _reduce,
    "ReduceMin": _reduce,
    "ReduceL1": _reduce,
    "ReduceL2": _reduce,
    "ReduceLogSum": _reduce,
    "ReduceLogSumExp": _reduce,
    "ReduceSumSquare": _reduce,
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Expand": _expand,
    **WINDOW_RULES,
    **MORE_RULES,
}

__all__ = ["SymbolicShapes", "symbolic_shapes"]
