"""Peak activation memory under onnxruntime's own execution order.

onnxruntime optimizes a model before it runs it: it folds constants, fuses nodes (Conv + Add
+ Relu into FusedConv, MatMul + Add into Gemm, attention and normalization subgraphs into
contrib ops) and runs the result in the topological order of the optimized graph. Asked with
``SessionOptions.optimized_model_filepath``, it writes that graph, nodes in that order. Here
the graph it writes at ORT_ENABLE_EXTENDED (the fusions every provider gets; the CPU-only
NCHWc layout of level "all" reorders tensors into blocks whose shapes the file does not
give) is inferred with onnxcost's shape inference, its unknown tensors sized by name from
the original model's (a fused node keeps the name of the output it replaces), and its
liveness computed over that order (``onnxcost.analysis.liveness``). Tensors onnxruntime computes
from constants at load time are initializers there, so they are weights here too.

Both steps are bounded, since that folding takes what the model asks for (a 148-byte
ConstantOfShape of [16384, 16384] took 2.1 GB; eight MatMuls of a constant [8192, 8192],
minutes). Before onnxruntime sees the model, the tensors it would fold are sized from
onnxcost's own shapes, and more than ``FOLD_MIN_BYTES`` and ``FOLD_PER_WEIGHT_BYTE`` times
the stored weights is not handed to it. The session is then built in a process of its own,
stopped after ``SESSION_TIMEOUT_S``. Either way ``OrtPeakLimitError`` says why, and ``analyze``
carries on with ``peak_activation_bytes_ort`` None and that line as a warning.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx

from onnxcost import errors
from onnxcost.analysis.liveness import peak_activation
from onnxcost.analysis.records import PeakActivation
from onnxcost.bench.session import OptLevel, OrtModel, SessionConfig, open_session, prepare_model
from onnxcost.errors import BenchError, OnnxcostError
from onnxcost.load.graph import GraphView, build
from onnxcost.load.model import ModelSource
from onnxcost.load.tensors import TensorInfo
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.shapes.infer import infer
from onnxcost.units import nbytes

OPT_LEVEL: OptLevel = "extended"

SESSION_TIMEOUT_S = 120.0
"""onnxruntime's session creation (its constant folding and fusions) may take this long."""
FOLD_MIN_BYTES = 256 * 2**20
"""onnxruntime may fold this many bytes of tensors from constants whatever the model's size,"""
FOLD_PER_WEIGHT_BYTE = 4
"""...and this many per byte of stored weights (a float16 weight cast to float32 folds to 2)."""

_NOT_FOLDED = frozenset({"Constant", "DequantizeLinear"})
"""Constant is a weight already; onnxruntime keeps DequantizeLinear of constants for its QDQ
fusions (``session.disable_quant_qdq`` off)."""


class OrtPeakLimitError(BenchError):
    """The peak under onnxruntime's order was not measured, to keep the run bounded;
    ``analyze`` carries on without it (a warning, ``peak_activation_bytes_ort`` None)."""


def _skipped(why: str, fix: str) -> OrtPeakLimitError:
    return OrtPeakLimitError(
        f"--ort-peak left out (peak_activation_bytes_ort is null): {why}; the peak in "
        f"onnxcost's order stands. {fix}"
    )


def _check_folding(
    prepared: PreparedModel, view: GraphView, types: Mapping[str, TensorInfo]
) -> None:
    """OrtPeakLimitError if the tensors onnxruntime would compute from constants while building
    the session (its constant folding) pass ``FOLD_MIN_BYTES`` and ``FOLD_PER_WEIGHT_BYTE``
    times the stored weights, as onnxcost's shapes size them (an unknown size counts 0)."""
    graph = prepared.proto.graph
    fed = {vi.name for vi in graph.input}  # an initializer that is an input may be fed
    constant = {t.name for t in graph.initializer if t.name not in fed}
    stored = sum(max(0, types[t].known_nbytes) for t in constant if t in types)
    limit = max(FOLD_MIN_BYTES, FOLD_PER_WEIGHT_BYTE * stored)
    folded, largest, largest_node = 0, 0, ""
    for k, op_type in enumerate(view.op_types):
        named = [i for i in view.inputs[k] if i]
        if op_type == "Constant":
            constant.update(o for o in view.outputs[k] if o)
        elif (
            op_type not in _NOT_FOLDED
            and named
            and k not in view.outer_reads
            and all(i in constant for i in named)
        ):
            outs = [o for o in view.outputs[k] if o]
            constant.update(outs)
            size = sum(max(0, types[o].known_nbytes) for o in outs if o in types)
            folded += size
            if size > largest:
                largest, largest_node = size, f"{view.names[k]!r} ({op_type})"
    if folded > limit:
        raise _skipped(
            f"building its session, onnxruntime would compute {nbytes(folded)} of tensors from "
            f"constants (node {largest_node} makes {nbytes(largest)}), over the larger of "
            f"{nbytes(FOLD_MIN_BYTES)} and {FOLD_PER_WEIGHT_BYTE} times the model's "
            f"{nbytes(stored)} of weights",
            "Store those tensors, or compute them from an input, to measure onnxruntime's.",
        )


def _worker_env() -> dict[str, str]:
    """This environment, with this onnxcost first on the path of the worker process."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def optimized_model(
    model: ModelSource | PreparedModel, *, timeout_s: float | None = None
) -> onnx.ModelProto:
    """The graph onnxruntime (CPU provider, ORT_ENABLE_EXTENDED) writes for ``model``, weights
    left in its external data file, which is never read.

    The session is built in a process of its own (``python -m onnxcost.bench.ort_order``),
    stopped after ``timeout_s`` (None: ``SESSION_TIMEOUT_S``; inf: no limit) with
    OrtPeakLimitError; an error there is raised here as the same OnnxcostError.
    """
    limit = SESSION_TIMEOUT_S if timeout_s is None else timeout_s
    ort_model = prepare_model(model)
    with tempfile.TemporaryDirectory(prefix="onnxcost-ort-order-") as folder:
        path = os.path.join(folder, "optimized.onnx")
        report = os.path.join(folder, "error.json")
        command = [sys.executable, "-m", "onnxcost.bench.ort_order", ort_model.to_file(folder)]
        command += [path, report, ort_model.external_folder or ""]
        try:
            proc = subprocess.run(
                command,
                capture_output=True,
                timeout=limit if math.isfinite(limit) else None,
                env=_worker_env(),
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            raise _skipped(
                f"onnxruntime took longer than {limit:g} s to build its session (constant "
                f"folding and fusions) and was stopped",
                "Fold the model's constants offline, or call onnxcost.bench.ort_order."
                "ort_peak_activation(model, timeout_s=...) with a longer limit.",
            ) from e
        if proc.returncode != 0:
            raise _worker_error(proc, report)
        return onnx.load(path, load_external_data=False)


def _worker_error(proc: subprocess.CompletedProcess[bytes], report: str) -> OnnxcostError:
    """The error the worker process reported, as the OnnxcostError it was."""
    try:
        data = json.loads(Path(report).read_text(encoding="utf-8"))
        kind = getattr(errors, str(data["kind"]), BenchError)
        if isinstance(kind, type) and issubclass(kind, OnnxcostError):
            return kind(str(data["message"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass
    tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
    why = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else tail[0][:200]
    return BenchError(
        f"onnxruntime could not build a session to write its optimized model ({why}); "
        f"run onnxcost bench on the model to see why"
    )


def _worker(argv: Sequence[str]) -> int:
    """Build the session in this process: MODEL OPTIMIZED ERROR.json [EXTERNAL_FOLDER]."""
    source, optimized, report, folder = argv
    try:
        model = OrtModel(source, source, None, folder or None, (), (), False)
        open_session(model, SessionConfig(opt_level=OPT_LEVEL), optimized_model_path=optimized)
    except OnnxcostError as e:
        data = {"kind": type(e).__name__, "message": str(e)}
        Path(report).write_text(json.dumps(data), encoding="utf-8")
        return 1
    return 0


def _constants(graph: onnx.GraphProto) -> set[str]:
    """Tensors computed only from initializers and Constants (what is left unfolded)."""
    constant = {t.name for t in graph.initializer}
    for node in graph.node:
        named = [i for i in node.input if i]
        if node.op_type == "Constant" or (named and all(i in constant for i in named)):
            constant.update(o for o in node.output if o)
    return constant


def ort_peak_activation(
    model: ModelSource | PreparedModel,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    *,
    timeout_s: float | None = None,
) -> PeakActivation:
    """Peak activation memory of ``model`` over onnxruntime's execution order, the input
    shapes set as the analysis sets them (``input_shapes``, ``dims``, else 1).

    OrtPeakLimitError where onnxruntime would fold too much from constants, or where building
    its session takes longer than ``timeout_s`` (None: ``SESSION_TIMEOUT_S``; inf: no limit)."""
    prepared = prepare(model, weights=True)
    known = infer(prepared.working_copy(), input_shapes, dims, prepared.view).types
    _check_folding(prepared, prepared.view, known)
    optimized = optimized_model(prepared, timeout_s=timeout_s)
    view = build(optimized.graph, name_unnamed=True)
    types = dict(infer(optimized, input_shapes, dims, view).types)
    for name, info in known.items():
        mine = types.get(name)
        if mine is None or mine.known_nbytes < 0:
            types[name] = info
    return peak_activation(
        view.names,
        view.inputs,
        view.outputs,
        [vi.name for vi in optimized.graph.input],
        [vi.name for vi in optimized.graph.output],
        types,
        _constants(optimized.graph),
        view.last_use,
    )


__all__ = [
    "FOLD_MIN_BYTES",
    "FOLD_PER_WEIGHT_BYTE",
    "OPT_LEVEL",
    "SESSION_TIMEOUT_S",
    "OrtPeakLimitError",
    "optimized_model",
    "ort_peak_activation",
]


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
