"""Input shapes and dims applied to the model's inputs, and the shapes the model itself declares."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping, Sequence

import onnx

from onnxcost.errors import ShapeError
from onnxcost.load.tensors import Shape, TensorInfo
from onnxcost.shapes.derived import _derived_names, by_param, derived_value
from onnxcost.shapes.flags import _check_dim_value


def shape_of(t: onnx.TypeProto) -> tuple[int, Shape | None]:
    """(elem_type, shape) of a tensor type; shape None when the rank is unknown."""
    if not t.HasField("tensor_type"):
        return 0, None
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return tt.elem_type, None
    dims: list[int | str | None] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return tt.elem_type, tuple(dims)


def _set_dims(vi: onnx.ValueInfoProto, dims: Sequence[int]) -> None:
    shape = vi.type.tensor_type.shape
    shape.ClearField("dim")
    for d in dims:
        shape.dim.add().dim_value = d


def unnamed_dims(graph: onnx.GraphProto, skip: Iterable[str] = ()) -> list[tuple[int, int, str]]:
    """(index in ``graph.input``, axis, name) of each graph-input dim with neither a value nor
    a name (skl2onnx's batch: ``FloatTensorType([None, 6])``), initializers and ``skip`` left
    out. The name, ``<input>_<axis>`` (ASCII word characters; ``_`` appended until no input
    dim has it), is what ``--dim`` and the formulas call it."""
    left_out = {t.name for t in graph.initializer} | set(skip)
    taken = {d.dim_param for vi in graph.input for d in vi.type.tensor_type.shape.dim}
    out = []
    for k, vi in enumerate(graph.input):
        if vi.name in left_out or not vi.type.tensor_type.HasField("shape"):
            continue
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if d.HasField("dim_value") or d.HasField("dim_param"):
                continue
            stem = re.sub(r"\W", "_", vi.name, flags=re.ASCII)
            name = f"{stem if stem[:1].isalpha() else 'input' + stem}_{axis}"
            while name in taken:
                name += "_"
            taken.add(name)
            out.append((k, axis, name))
    return out


def defaulted_dims(
    graph: onnx.GraphProto, input_shapes: Mapping[str, Sequence[int]], dims: Mapping[str, int]
) -> list[str]:
    """The graph-input dims that ``input_shapes`` and ``dims`` leave unset, which an analysis
    takes as 1: each by the ``--dim`` name that sets it (``unnamed_dims`` names a dim that has
    none), in order, once."""
    every = stated_dims(graph, input_shapes, dims)
    named = {(k, axis): name for k, axis, name in unnamed_dims(graph, input_shapes)}
    init_names = {t.name for t in graph.initializer}
    out: dict[str, None] = {}
    for k, vi in enumerate(graph.input):
        if vi.name in init_names or vi.name in input_shapes:
            continue
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            name = d.dim_param or named.get((k, axis), "")
            if name and name not in every:
                out[name] = None
    return list(out)


def stated_dims(
    graph: onnx.GraphProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
) -> dict[str, int]:
    """``dims`` plus the value each symbol gets from the ``input_shapes`` entries that set it
    (``input_ids=2x16`` on [batch, seq]: batch 2, seq 16), where no ``dims`` entry names it and
    no other entry gives it another: then ``--input-shape input_ids=2x16`` and ``--dim batch=2
    --dim seq=16`` say the same, for every input in those symbols and every shape declared in
    them. An entry that names no input or has the wrong rank adds nothing (``_apply_overrides``
    refuses it); ShapeError for an entry's dim that is no dim (``_check_dim_value``). A
    ``dims`` key may be a dim's Python name (``derived.by_param``)."""
    dims = by_param(graph, dims)
    for name, shape in input_shapes.items():
        for v in shape:
            _check_dim_value(v, f"--input-shape {name}=...")
    given: dict[str, set[int]] = {}
    for vi in graph.input:
        new = input_shapes.get(vi.name)
        declared = vi.type.tensor_type.shape.dim
        if new is None or len(declared) != len(new):
            continue
        for d, v in zip(declared, new, strict=True):
            if d.HasField("dim_param") and d.dim_param and d.dim_param not in dims:
                given.setdefault(d.dim_param, set()).add(int(v))
    return {**dims, **{sym: next(iter(vs)) for sym, vs in given.items() if len(vs) == 1}}


def _apply_overrides(
    graph: onnx.GraphProto,
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    warnings: list[str],
    allow_reshape: bool = False,
) -> dict[str, int]:
    """Fix every input dim; returns the value each symbolic dim name was given.

    An ``input_shapes`` entry must keep the input's rank, and (unless ``allow_reshape``) every
    dim the model fixes (a dim_value > 0); symbolic and unknown dims take any value. The
    symbols an entry sets are set as ``--dim`` would set them (``stated_dims``); a symbol
    that is no Python name, by its Python name too (``derived.by_param``)."""
    dims = by_param(graph, dims)
    for name, shape in input_shapes.items():
        for v in shape:
            _check_dim_value(v, f"--input-shape {name}=...")
    for sym, v in dims.items():
        _check_dim_value(v, f"--dim {sym}=...")
    unnamed = {}
    for k, axis, sym in unnamed_dims(graph):  # named, so that --dim can set them too
        graph.input[k].type.tensor_type.shape.dim[axis].dim_param = sym
        unnamed[sym] = f"{graph.input[k].name}[{axis}]"
    init_names = {t.name for t in graph.initializer}
    inputs = [vi for vi in graph.input if vi.name not in init_names]
    names = [vi.name for vi in inputs]
    for name in input_shapes:
        if name not in names:
            raise ShapeError(
                f"--input-shape names {name!r}, but the model's inputs are: {', '.join(names) or '(none)'}"
            )
    symbols = {
        d.dim_param
        for vi in inputs
        for d in vi.type.tensor_type.shape.dim
        if d.HasField("dim_param")
    }
    for sym in dims:
        if sym not in symbols:
            raise ShapeError(
                f"--dim {sym}=... matches no symbolic dim of the inputs; the model's symbols are: "
                f"{', '.join(sorted(symbols)) or '(none: every dim is fixed; use --input-shape)'}"
            )
    for vi in inputs:
        tt = vi.type.tensor_type
        if vi.name in input_shapes and vi.type.HasField("tensor_type") and tt.HasField("shape"):
            new = input_shapes[vi.name]
            if len(tt.shape.dim) != len(new):
                raise ShapeError(
                    f"--input-shape {vi.name}=... gives {len(new)} dims but input {vi.name!r} has "
                    f"rank {len(tt.shape.dim)} ({_fmt_dims(tt.shape)}); pass {len(tt.shape.dim)} dims"
                )
            if not allow_reshape:
                _check_fixed_dims(vi.name, tt.shape, new)
    every = stated_dims(graph, input_shapes, dims)
    params = {d.dim_param for vi in inputs for d in vi.type.tensor_type.shape.dim}
    standalone = {p for p in params if p.isidentifier()}  # what a derived dim may name
    defaulted: dict[str, list[str]] = {}
    applied = {sym: v for sym, v in every.items() if sym not in dims}
    for vi in inputs:
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        name = vi.name
        if vi.name in input_shapes:
            _set_dims(vi, list(input_shapes[vi.name]))
            continue
        if not tt.HasField("shape"):
            raise ShapeError(
                f"input {name!r} has no shape in the model; pass --input-shape {name}=D1xD2x..."
            )
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            sym = d.dim_param
            derived = sym and sym not in every and not sym.isidentifier()
            parts = _readable(sym, standalone) if derived else None
            if sym and sym in every:
                d.dim_value = every[sym]
            elif parts is not None:  # 'past + seq': from its symbols' values, set or 1
                d.dim_value = derived_value(name, sym, parts, {n: every.get(n, 1) for n in parts})
            else:
                d.dim_value = 1
                defaulted.setdefault(sym or f"{name}[{i}]", []).append(name)
            if sym:
                applied[sym] = d.dim_value
    for sym, users in defaulted.items():
        where = ", ".join(dict.fromkeys(users))
        if sym in unnamed:
            warnings.append(
                f"dim {unnamed[sym]} of input '{where}' is unknown; using 1 (set it with "
                f"--input-shape {where}=... or --dim {sym}=N)"
            )
        elif sym.endswith("]"):
            warnings.append(
                f"dim {sym} of input '{where}' is unknown; using 1 (set it with --input-shape {where}=...)"
            )
        else:
            warnings.append(
                f"symbolic dim {sym!r} (input {where}) is unset; using 1 (set it with --dim {sym}=N)"
            )
    return applied


def _readable(param: str, standalone: set[str]) -> list[str] | None:
    """The symbols of derived dim ``param`` (``_derived_names``), or None where it is no such
    dim or too long to read: then it is one name, defaulted to 1 with a warning, as the
    symbolic pass refuses it in one line."""
    try:
        return _derived_names(param, standalone)
    except ShapeError:
        return None


def _check_fixed_dims(name: str, declared: onnx.TensorShapeProto, new: Sequence[int]) -> None:
    """Raise if ``new`` changes a dim that ``declared`` fixes (a dim_value > 0)."""
    changed = [
        (i, d.dim_value, v)
        for i, (d, v) in enumerate(zip(declared.dim, new, strict=True))
        if d.HasField("dim_value") and d.dim_value > 0 and d.dim_value != v
    ]
    if not changed:
        return
    listed = "; ".join(f"dim {i}: model {m}, yours {v}" for i, m, v in changed)
    fitting = list(new)
    for i, m, _v in changed:
        fitting[i] = m
    raise ShapeError(
        f"--input-shape {name}={'x'.join(map(str, new))} changes dims that the model fixes for "
        f"input {name!r} ({_fmt_dims(declared)}): {listed}; pass --input-shape "
        f"{name}={'x'.join(map(str, fitting))}, or add --allow-reshape to insist"
    )


def _fmt_dims(shape: onnx.TensorShapeProto) -> str:
    return "x".join(
        str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in shape.dim
    )


def _declared_in(graph: onnx.GraphProto) -> dict[str, tuple[int, Shape | None]]:
    """Shapes one graph declares (value_info, outputs), before inference replaces them; its
    subgraphs left out."""
    return {name: shape_of(vi.type) for name, vi in _declarations(graph).items()}


def _declarations(graph: onnx.GraphProto) -> dict[str, onnx.ValueInfoProto]:
    """The tensors one graph declares (value_info, outputs: an output's declaration wins),
    by name, their shapes not read: a model may declare every tensor, and a walk that
    infers them needs the declared shape of few (``_declared_in`` reads them all)."""
    return {vi.name: vi for vi in (*graph.value_info, *graph.output)}


def _use_declared(
    types: MutableMapping[str, TensorInfo],
    declared: Mapping[str, tuple[int, Shape | None]],
    symbols: Mapping[str, int],
) -> None:
    """Where inference knows nothing (ops onnx has no schema for: com.microsoft, custom), take the
    model's own declared shape, its symbolic dims given the values the inputs were given."""
    for name, (elem, shape) in declared.items():
        old = types.get(name)
        if shape is None or (old is not None and old.is_concrete):
            continue
        dims = tuple(symbols.get(d, d) if isinstance(d, str) else d for d in shape)
        info = TensorInfo(name, elem or (old.elem_type if old is not None else 0), dims)
        if info.is_concrete:
            types[name] = info
