"""Input data: seeded random tensors with sensible values, or real data from an ``.npz`` file.

Values matter to some kernels (token ids index an embedding; zeros make sparse paths fast),
so random data is never all zeros: floats are standard normal, integers small and positive,
token ids below the vocabulary size, booleans a fair coin with at least one True.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from onnxcost.analysis.records import NOT_IN_JSON, NodeRecord, TensorRecord
from onnxcost.errors import BenchError, UsageError
from onnxcost.units import shape_text as fmt_shape

INT_LOW, INT_HIGH = 1, 5
"""Integers fed to nothing that bounds them are drawn from [1, 5)."""

_PASS_THROUGH = frozenset(
    {
        "Cast",
        "Reshape",
        "Unsqueeze",
        "Squeeze",
        "Flatten",
        "Identity",
        "Expand",
        "Transpose",
        "CastLike",
    }
)
"""Ops that carry index values through unchanged on the way to an embedding lookup."""

_LOOKUPS: Mapping[tuple[str, int], int] = {
    ("Gather", 1): 0,
    ("EmbedLayerNormalization", 0): 2,
    ("EmbedLayerNormalization", 1): 4,
    ("EmbedLayerNormalization", 8): 3,
}
"""(op_type, position of the index input) -> position of the table whose first dim bounds it."""

_FLOATS = frozenset({"float16", "float32", "float64"})
_INTS = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One input to feed: name, numpy dtype name, concrete shape, and an upper bound for ids."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    high: int | None = field(default=None, metadata=NOT_IN_JSON)
    """Exclusive upper bound of integer values (a vocabulary size), when a lookup bounds them
    (not in ``onnxcost.bench/1``'s ``inputs``; ``as_dict``, what a probe is given, has it)."""
    fill: bool | None = field(default=None, metadata=NOT_IN_JSON)
    """The one value of a bool input whose value the analysis reads (optimum's
    ``use_cache_branch``: the If branch the bench runs is the one the analysis counts)."""

    def with_shape(self, shape: tuple[int, ...]) -> InputSpec:
        return InputSpec(self.name, self.dtype, shape, self.high, self.fill)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}
        if self.high is not None:
            out["high"] = self.high
        if self.fill is not None:
            out["fill"] = self.fill
        return out


def index_bounds(nodes: Sequence[NodeRecord], names: Iterable[str]) -> dict[str, int]:
    """Vocabulary size per input that feeds (through casts and reshapes) an embedding lookup.

    The bound is the first dim of the lookup table: ``Gather(data, indices)`` -> ``data.shape[0]``;
    with several lookups the smallest wins.
    """
    consumers: dict[str, list[tuple[NodeRecord, int]]] = {}
    for node in nodes:
        for pos, tensor in enumerate(node.inputs):
            if tensor:
                consumers.setdefault(tensor, []).append((node, pos))
    bounds: dict[str, int] = {}
    for name in names:
        seen: set[str] = set()
        todo = [name]
        found: list[int] = []
        while todo:
            tensor = todo.pop()
            if tensor in seen:
                continue
            seen.add(tensor)
            for node, pos in consumers.get(tensor, ()):
                table = _LOOKUPS.get((node.op_type, pos))
                if table is not None and table < len(node.input_shapes):
                    shape = node.input_shapes[table]
                    if shape and isinstance(shape[0], int) and shape[0] > 0:
                        found.append(shape[0])
                elif node.op_type in _PASS_THROUGH and pos == 0:
                    todo.extend(node.outputs)
        if found:
            bounds[name] = min(found)
    return bounds


def concrete_shape(record: TensorRecord) -> tuple[int, ...]:
    """The record's shape as ints, or UsageError naming the dim to set."""
    if record.shape is None:
        raise UsageError(
            f"input {record.name!r} has an unknown rank; pass its shape with --input-shape {record.name}=DIMS"
        )
    dims: list[int] = []
    for d in record.shape:
        if not isinstance(d, int):
            hint = f"--dim {d}=N" if isinstance(d, str) else f"--input-shape {record.name}=DIMS"
            raise UsageError(
                f"input {record.name!r} has a free dim {d!r} (shape {record.shape}); set it with {hint}"
            )
        dims.append(d)
    return tuple(dims)


def input_specs(
    resolved: Sequence[TensorRecord],
    declared: Sequence[TensorRecord],
    nodes: Sequence[NodeRecord],
    cache_branch: tuple[str, str] | None = None,
) -> tuple[InputSpec, ...]:
    """One spec per declared input, with the analyzer's resolved shape and any index bound.
    ``cache_branch``: optimum's merged decoder's flag and cache length
    (``load.kv.cache_branch_symbol``): the flag is fed true exactly where the cache length
    is above 0, as optimum runs it and the analysis counts it (random, the first step at
    past 0 ran the branch with the cache)."""
    by_name = {r.name: r for r in resolved}
    names = [d.name for d in declared]
    bounds = index_bounds(nodes, names)
    shapes = {decl.name: concrete_shape(by_name.get(decl.name, decl)) for decl in declared}
    fill = None
    if cache_branch is not None:
        past = cache_branch[1]
        fill = any(
            shapes[d.name][k] > 0
            for d in declared
            for k, p in enumerate(d.shape or ())
            if p == past
        )
    return tuple(
        InputSpec(
            d.name,
            d.dtype,
            shapes[d.name],
            bounds.get(d.name),
            fill if cache_branch is not None and d.name == cache_branch[0] else None,
        )
        for d in declared
    )


def random_array(spec: InputSpec, rng: np.random.Generator) -> np.ndarray:
    """Random data for one input (see the module docstring for the ranges)."""
    shape = spec.shape
    if spec.dtype in _FLOATS:
        return np.asarray(rng.standard_normal(shape), dtype=spec.dtype)
    if spec.dtype in _INTS:
        info = np.iinfo(np.dtype(spec.dtype))
        low, high = (0, spec.high) if spec.high is not None else (INT_LOW, INT_HIGH)
        high = min(high, int(info.max) + 1)
        arr = np.asarray(rng.integers(low, high, size=shape, dtype=np.int64), dtype=spec.dtype)
        if arr.size and not arr.any() and high > 1:
            arr.reshape(-1)[0] = 1
        return arr
    if spec.dtype == "bool" and spec.fill is not None:
        return np.full(shape, spec.fill)
    if spec.dtype == "bool":
        arr = np.asarray(rng.random(shape) < 0.5)
        if arr.size and not arr.any():
            arr.reshape(-1)[0] = True
        return arr
    if spec.dtype == "string":
        raise BenchError(
            f"input {spec.name!r} is a string tensor; pass real data with --inputs FILE.npz"
        )
    raise BenchError(
        f"input {spec.name!r} is {spec.dtype}, which onnxruntime's numpy API cannot feed; "
        f"bench a variant of the model with float32/float16 inputs"
    )


def make_inputs(specs: Sequence[InputSpec], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random arrays for every spec, in spec order (same seed, same data)."""
    rng = np.random.default_rng(seed)
    return {s.name: random_array(s, rng) for s in specs}


def _dtype_of(array: np.ndarray) -> str:
    return "string" if array.dtype.kind in "OUS" else str(array.dtype)


def load_inputs_file(
    path: str | os.PathLike[str], declared: Sequence[TensorRecord]
) -> dict[str, np.ndarray]:
    """Arrays from ``path`` (``numpy.savez``), checked against the model's declared inputs.

    Names must match exactly; dtypes must equal the declared ones; ranks and fixed dims must
    match, and a symbolic dim must take one value across all inputs.
    """
    where = os.fspath(path)
    try:
        with np.load(where, allow_pickle=False) as npz:
            arrays = {k: np.asarray(npz[k]) for k in npz.files}
    except FileNotFoundError as e:
        raise UsageError(f"--inputs {where}: no such file") from e
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise UsageError(
            f"--inputs {where} is not a readable .npz ({e}); write it with numpy.savez(path, input_name=array)"
        ) from e
    wanted = [d.name for d in declared]
    missing = [n for n in wanted if n not in arrays]
    extra = sorted(n for n in arrays if n not in wanted)
    if extra:
        raise BenchError(
            f"--inputs {where}: {', '.join(map(repr, extra))} is not an input of the model; inputs are: {', '.join(wanted)}"
        )
    if missing:
        raise BenchError(
            f"--inputs {where}: no array for {', '.join(map(repr, missing))}; the model needs: {', '.join(wanted)}"
        )
    symbols: dict[str, tuple[int, str]] = {}
    for decl in declared:
        arr = arrays[decl.name]
        got = _dtype_of(arr)
        if got != decl.dtype:
            raise BenchError(
                f"--inputs {where}: {decl.name!r} is {got} but the model wants {decl.dtype}; "
                f"convert it with array.astype('{decl.dtype}')"
            )
        if decl.shape is None:
            continue
        if arr.ndim != len(decl.shape):
            raise BenchError(
                f"--inputs {where}: {decl.name!r} has shape {arr.shape} but the model wants rank "
                f"{len(decl.shape)} ({fmt_shape(decl.shape)})"
            )
        for axis, (want, have) in enumerate(zip(decl.shape, arr.shape, strict=True)):
            if isinstance(want, int) and want != have:
                raise BenchError(
                    f"--inputs {where}: {decl.name!r} has shape {arr.shape} but the model fixes dim "
                    f"{axis} to {want} ({fmt_shape(decl.shape)})"
                )
            if isinstance(want, str):
                first = symbols.setdefault(want, (have, decl.name))
                if first[0] != have:
                    raise BenchError(
                        f"--inputs {where}: dim {want!r} is {first[0]} in {first[1]!r} but {have} in {decl.name!r}; "
                        f"arrays sharing a symbolic dim must agree"
                    )
    return {n: arrays[n] for n in wanted}
