"""A small graph writer that names nodes the way PyTorch's ONNX exporter does.

Node names carry the module scope (``/layer1/layer1.0/conv1/Conv``), parameters
carry the dotted module path (``layer1.0.conv1.weight``). Learned weights and
large buffers are initializers; small constants (scalars, shape pieces, axes)
are ``Constant`` nodes, one per use, as the TorchScript exporter writes them.

With ``weights=False`` no initializer carries data: each one points at its own
4 KiB-aligned slice of a single external file that :func:`onnxcost.zoo.save`
creates sparse, so a 7B-parameter graph costs neither memory nor disk.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

from onnxcost.errors import UsageError
from onnxcost.load.tensors import ZOO_BUFFERS

FloatArray = npt.NDArray[np.float32]
Init = Callable[[np.random.Generator, tuple[int, ...]], FloatArray]

DTYPES: dict[str, int] = {
    "fp32": TensorProto.FLOAT,
    "fp16": TensorProto.FLOAT16,
    "bf16": TensorProto.BFLOAT16,
}
OPSET_MIN = 13
OPSET_MAX = 23
OPSET_DEFAULT = 17
ALIGN = 4096
"""Byte alignment of every tensor in the external weights file."""
INT64_MAX = 2**63 - 1

# Most negative finite value of each float type: what torch.finfo(dtype).min gives.
FLOAT_MIN: dict[int, float] = {
    TensorProto.FLOAT: float(np.finfo(np.float32).min),
    TensorProto.FLOAT16: float(np.finfo(np.float16).min),
    TensorProto.BFLOAT16: -3.3895313892515355e38,
}
_ITEM_BYTES: dict[int, int] = {
    TensorProto.FLOAT: 4,
    TensorProto.FLOAT16: 2,
    TensorProto.BFLOAT16: 2,
    TensorProto.BOOL: 1,
    TensorProto.INT64: 8,
}


def normal(std: float) -> Init:
    """Initializer drawing N(0, std^2)."""

    def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> FloatArray:
        out: FloatArray = rng.standard_normal(shape, dtype=np.float32)
        out *= np.float32(std)
        return out

    return draw


def uniform(low: float, high: float) -> Init:
    """Initializer drawing U(low, high)."""

    def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> FloatArray:
        out: FloatArray = rng.uniform(low, high, shape).astype(np.float32)
        return out

    return draw


def _bf16_bytes(values: FloatArray) -> bytes:
    """float32 -> bfloat16 bits, round to nearest even, as little-endian bytes."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    return ((bits + rounding) >> 16).astype("<u2").tobytes()


def float_bytes(values: FloatArray, elem_type: int) -> bytes:
    """Raw little-endian bytes of ``values`` stored as ``elem_type`` (FLOAT, FLOAT16, BFLOAT16)."""
    if elem_type == TensorProto.FLOAT:
        return np.ascontiguousarray(values, dtype="<f4").tobytes()
    if elem_type == TensorProto.FLOAT16:
        return np.ascontiguousarray(values, dtype="<f2").tobytes()
    return _bf16_bytes(values)


def ir_version_for(opset: int) -> int:
    """The lowest IR version whose release supports ``opset`` (IR 8 for opset 17)."""
    return min(ir for _, ir, ai_onnx, *_ in helper.VERSION_TABLE if ai_onnx >= opset)


@dataclass(frozen=True, slots=True)
class Options:
    """How a zoo model is written: element type, opset, weights or placeholders, seed."""

    dtype: str = "fp32"
    opset: int = OPSET_DEFAULT
    weights: bool = True
    seed: int = 0
    location: str = "model.weights"
    """External data file name (relative to the model) when ``weights`` is False."""


Dim = int | str
"""A graph input dimension: a fixed size or a symbol (``dim_param``)."""


def _accepts_bf16(op_type: str, opset: int) -> bool:
    """Whether ``op_type`` at ``opset`` allows bfloat16 wherever it allows float16 (a hint only)."""
    schema = onnx.defs.get_schema(op_type, opset)
    for constraint in schema.type_constraints:
        allowed = set(constraint.allowed_type_strs)
        if "tensor(float16)" in allowed and "tensor(bfloat16)" not in allowed:
            return False
    return True


def require(condition: bool, message: str) -> None:
    """Raise UsageError(``message``) unless ``condition`` holds."""
    if not condition:
        raise UsageError(message)


def check_options(opts: Options) -> None:
    """Reject an unknown dtype or an opset outside what the zoo writes."""
    require(
        opts.dtype in DTYPES,
        f"unknown dtype {opts.dtype!r}: pass one of {', '.join(DTYPES)}",
    )
    require(
        OPSET_MIN <= opts.opset <= OPSET_MAX,
        f"opset {opts.opset} is out of range: pass an opset from {OPSET_MIN} to {OPSET_MAX}",
    )
    require(
        0 <= opts.seed < 2**63,
        f"seed {opts.seed} is out of range: pass a seed from 0 to 2**63 - 1",
    )


def check_dim(name: str, value: Dim, limit: int | None = None) -> None:
    """A graph dimension is a positive int (at most ``limit``) or a symbol name."""
    if isinstance(value, str):
        require(
            value.isidentifier(),
            f"{name}={value!r}: pass a positive integer or a symbol name such as {name}",
        )
        return
    require(value > 0, f"{name}={value}: pass a positive integer or a symbol name")
    if limit is not None:
        require(
            value <= limit,
            f"{name}={value} exceeds the model's maximum {limit}: pass at most {limit}",
        )


def check_heads(hidden: int, heads: int) -> None:
    """Attention heads must split the hidden size evenly."""
    require(
        hidden % heads == 0, f"hidden={hidden} is not divisible by heads={heads}: pass a multiple"
    )


class GraphBuilder:
    """Accumulates nodes, initializers and graph inputs/outputs under a module scope."""

    def __init__(self, opts: Options) -> None:
        check_options(opts)
        self.opts = opts
        self.opset = opts.opset
        self.ftype = DTYPES[opts.dtype]
        self.rng = np.random.default_rng(opts.seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.buffers: list[str] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._scope: list[str] = []
        self._node_names: set[str] = set()
        self._init_names: set[str] = set()
        self._offset = 0

    # ------------------------------------------------------------------ scopes and naming
    @contextmanager
    def scope(self, *components: str) -> Iterator[None]:
        """Enter module scopes: ``scope("layer1", "layer1.0")`` as torch names them."""
        depth = len(self._scope)
        self._scope.extend(components)
        try:
            yield
        finally:
            del self._scope[depth:]

    def module_path(self) -> str:
        """Dotted module path of the current scope.

        A component that extends its parent (``layer1`` then ``layer1.0``) replaces it,
        so ``/layer1/layer1.0/conv1`` is the module ``layer1.0.conv1``.
        """
        path: list[str] = []
        for comp in self._scope:
            if path and comp.startswith(path[-1] + "."):
                path[-1] = comp
            else:
                path.append(comp)
        return ".".join(path)

    def _node_name(self, op_type: str) -> str:
        prefix = "/" + "".join(c + "/" for c in self._scope)
        name = prefix + op_type
        k = 0
        while name in self._node_names:
            k += 1
            name = f"{prefix}{op_type}_{k}"
        self._node_names.add(name)
        return name

    # ------------------------------------------------------------------ nodes
    def op(
        self,
        op_type: str,
        inputs: Sequence[str],
        *,
        out: str | None = None,
        **attrs: Any,
    ) -> str:
        """Append a single-output node; returns its output name (``out`` names it explicitly)."""
        return self.op_n(op_type, inputs, 1, outs=None if out is None else [out], **attrs)[0]

    def op_n(
        self,
        op_type: str,
        inputs: Sequence[str],
        n_out: int,
        *,
        outs: Sequence[str] | None = None,
        **attrs: Any,
    ) -> list[str]:
        """Append a node with ``n_out`` outputs; returns the output names."""
        name = self._node_name(op_type)
        outputs = list(outs) if outs is not None else [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=name, **attrs))
        return outputs

    # ------------------------------------------------------------------ constants
    def const(self, tensor: TensorProto) -> str:
        """A ``Constant`` node holding ``tensor``."""
        return self.op("Constant", [], value=tensor)

    def ints(self, values: Sequence[int]) -> str:
        """A 1-D int64 constant."""
        return self.const(helper.make_tensor("value", TensorProto.INT64, [len(values)], values))

    def int_scalar(self, value: int) -> str:
        """A 0-D int64 constant."""
        return self.const(helper.make_tensor("value", TensorProto.INT64, [], [value]))

    def scalar(self, value: float, elem_type: int | None = None) -> str:
        """A 0-D float constant of the model's float type (or ``elem_type``)."""
        t = self.ftype if elem_type is None else elem_type
        return self.const(helper.make_tensor("value", t, [], [value]))

    @property
    def float_min(self) -> float:
        """Most negative finite value of the model's float type (torch.finfo(dtype).min)."""
        return FLOAT_MIN[self.ftype]

    # ------------------------------------------------------------------ initializers
    def _add_initializer(
        self, name: str, elem_type: int, shape: tuple[int, ...], data: Callable[[], bytes]
    ) -> str:
        if name in self._init_names:
            raise ValueError(f"duplicate initializer {name!r}")
        self._init_names.add(name)
        t = TensorProto()
        t.name = name
        t.data_type = elem_type
        t.dims.extend(shape)
        if self.opts.weights:
            t.raw_data = data()
        else:
            length = math.prod(shape) * _ITEM_BYTES[elem_type]
            t.data_location = TensorProto.EXTERNAL
            for key, value in (
                ("location", self.opts.location),
                ("offset", str(self._offset)),
                ("length", str(length)),
            ):
                entry = t.external_data.add()
                entry.key = key
                entry.value = value
            self._offset += -(-length // ALIGN) * ALIGN
        self.initializers.append(t)
        return name

    def param(self, local: str, shape: Sequence[int], init: Init) -> str:
        """A learned weight named ``<module path>.<local>``, drawn from ``init`` when weights are on."""
        path = self.module_path()
        name = f"{path}.{local}" if path else local
        dims = tuple(shape)
        return self._add_initializer(
            name, self.ftype, dims, lambda: float_bytes(init(self.rng, dims), self.ftype)
        )

    def buffer(
        self,
        name: str,
        values: Callable[[], npt.NDArray[np.generic]],
        shape: Sequence[int],
        elem_type: int,
    ) -> str:
        """A non-learned initializer (mask, rotary table), named in the model's
        ``onnxcost.zoo.buffers`` (no param: ``analysis.signature``); ``values`` is only called
        with weights on."""
        self.buffers.append(name)
        dims = tuple(shape)

        def data() -> bytes:
            arr = values()
            if elem_type in (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16):
                return float_bytes(arr.astype(np.float32), elem_type)
            if elem_type == TensorProto.BOOL:
                return np.ascontiguousarray(arr, dtype=np.bool_).tobytes()
            return np.ascontiguousarray(arr, dtype="<i8").tobytes()

        return self._add_initializer(name, elem_type, dims, data)

    # ------------------------------------------------------------------ graph inputs/outputs
    def input(self, name: str, elem_type: int, shape: Sequence[Dim]) -> str:
        """Declare a graph input."""
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        return name

    def output(self, name: str, elem_type: int, shape: Sequence[Dim]) -> None:
        """Declare a graph output (the tensor ``name`` must be produced by a node)."""
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))

    # ------------------------------------------------------------------ shape and opset helpers
    def unsqueeze(self, x: str, axes: Sequence[int]) -> str:
        """Unsqueeze with axes as an input (opset 13+)."""
        return self.op("Unsqueeze", [x, self.ints(axes)])

    def squeeze(self, x: str, axes: Sequence[int]) -> str:
        """Squeeze with axes as an input (opset 13+)."""
        return self.op("Squeeze", [x, self.ints(axes)])

    def reduce_mean(self, x: str, axes: Sequence[int], keepdims: int = 1) -> str:
        """ReduceMean: ``axes`` is an attribute before opset 18, an input from 18 on."""
        if self.opset >= 18:
            return self.op("ReduceMean", [x, self.ints(axes)], keepdims=keepdims)
        return self.op("ReduceMean", [x], axes=list(axes), keepdims=keepdims)

    def dim(self, x: str, axis: int) -> str:
        """``x.size(axis)`` as torch exports it: Shape -> Gather (a 0-D int64)."""
        shape = self.op("Shape", [x])
        return self.op("Gather", [shape, self.int_scalar(axis)], axis=0)

    def shape_vec(self, parts: Sequence[str | int]) -> str:
        """A 1-D shape tensor from 0-D dims (Unsqueeze'd) and literal sizes, joined by Concat."""
        pieces = [self.unsqueeze(p, [0]) if isinstance(p, str) else self.ints([p]) for p in parts]
        return self.op("Concat", pieces, axis=0)

    def reshape(self, x: str, parts: Sequence[str | int]) -> str:
        """``x.view(*parts)`` with a shape built at run time from ``parts``."""
        return self.op("Reshape", [x, self.shape_vec(parts)])

    def expand(self, x: str, parts: Sequence[str | int]) -> str:
        """``x.expand(*parts)`` as torch's symbolic writes it: -1 entries become 1 at run time.

        size = Concat(parts); ones = ConstantOfShape(Shape(size), 1);
        size = Where(size == -ones, ones, size); Expand(x, size).
        """
        size = self.shape_vec(parts)
        one = helper.make_tensor("value", TensorProto.INT64, [1], [1])
        ones = self.op("ConstantOfShape", [self.op("Shape", [size])], value=one)
        is_neg = self.op("Equal", [size, self.op("Mul", [ones, self.int_scalar(-1)])])
        return self.op("Expand", [x, self.op("Where", [is_neg, ones, size])])

    def slice(self, x: str, start: str | int, end: str | int, axis: int) -> str:
        """``x[..., start:end, ...]`` on one axis; a str bound is a 0-D int64 tensor."""
        bounds = [
            self.unsqueeze(v, [0]) if isinstance(v, str) else self.ints([v]) for v in (start, end)
        ]
        return self.op("Slice", [x, *bounds, self.ints([axis]), self.ints([1])])

    def full_slice(self, x: str, axis: int) -> str:
        """A ``:`` on ``axis``: the tracer keeps it as a Slice over [0, INT64_MAX)."""
        return self.slice(x, 0, INT64_MAX, axis)

    def split(self, x: str, sizes: Sequence[int], axis: int) -> list[str]:
        """Split with sizes given as an input (opset 13+)."""
        return self.op_n("Split", [x, self.ints(sizes)], len(sizes), axis=axis)

    def arange(self, end: str) -> str:
        """``torch.arange(end)`` for a 0-D int64 ``end``: a Range node."""
        return self.op("Range", [self.int_scalar(0), end, self.int_scalar(1)])

    # ------------------------------------------------------------------ finishing
    def _check_bf16(self, model: onnx.ModelProto) -> None:
        """Type-check a bf16 graph: several ops gained bfloat16 only in later opsets."""
        try:
            onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        except onnx.shape_inference.InferenceError as e:
            found = re.search(r"op_type:(\w+)", str(e))
            op_type = found.group(1) if found else "an operator"
            first = next(
                (
                    v
                    for v in range(self.opset + 1, OPSET_MAX + 1)
                    if found and _accepts_bf16(op_type, v)
                ),
                None,
            )
            hint = f"pass opset {first} or later" if first else "pass dtype fp16 or fp32"
            raise UsageError(
                f"{model.graph.name} in bf16 needs {op_type} with bfloat16, which opset "
                f"{self.opset} does not define: {hint}"
            ) from e

    def finish(self, graph_name: str, doc: str) -> onnx.ModelProto:
        """The model: one graph, the default domain at ``opset``, the lowest IR version allowing it."""
        from onnxcost._version import __version__

        graph = helper.make_graph(
            self.nodes,
            graph_name,
            self.inputs,
            self.outputs,
            initializer=self.initializers,
            doc_string=doc,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", self.opset)],
            producer_name="onnxcost.zoo",
            producer_version=__version__,
        )
        model.ir_version = ir_version_for(self.opset)
        if self.ftype == TensorProto.BFLOAT16:
            self._check_bf16(model)
        props = {"onnxcost.zoo.model": graph_name, "onnxcost.zoo.dtype": self.opts.dtype}
        if self.buffers:
            props[ZOO_BUFFERS] = "\n".join(self.buffers)
        helper.set_model_props(model, props)
        return model
