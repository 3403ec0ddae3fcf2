"""Sessions: the model as onnxruntime gets it, session options, and the call the timed loop makes.

Node names must be the same in onnxruntime's profile as in the analysis, or the per-node join
fails. Both come from one ``PreparedModel`` (``onnxcost.prepare``): the analysis costs it, and
onnxruntime gets its file when preparing renamed nothing, else its bytes (local functions
inlined, unnamed or duplicate nodes named ``<op_type>_<index>``), with external data read
from the model's folder.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx

from onnxcost.analysis.records import TensorRecord
from onnxcost.bench._ort import capture_output, import_ort, load_error, ort_error_types
from onnxcost.bench.providers import (
    CPU,
    CUDA_LIKE,
    install_hint,
    no_driver_error,
    preload_gpu_libraries,
    provider_dropped,
)
from onnxcost.errors import ModelLoadError, ProviderError, UsageError
from onnxcost.load.model import VIRTUAL_LOCATION_PREFIX, ModelSource
from onnxcost.load.tensors import dtype_name
from onnxcost.prepare import PreparedModel, prepare
from onnxcost.shapes.overrides import shape_of

OptLevel = Literal["disable", "basic", "extended", "all"]
OPT_LEVELS: tuple[OptLevel, ...] = ("disable", "basic", "extended", "all")


def opt_level(name: str) -> OptLevel:
    """``name`` as an OptLevel, or UsageError listing the levels."""
    for level in OPT_LEVELS:
        if level == name:
            return level
    raise UsageError(f"--opt-level must be one of {', '.join(OPT_LEVELS)}, not {name!r}")


_PROTO_LIMIT = 2**31 - 1
"""Protobuf cannot serialize a message of 2 GiB or more."""

Runner = Callable[[], object]


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """How to build a session: provider and its options, threads, optimization level."""

    provider: str = CPU
    provider_options: tuple[tuple[str, str], ...] = ()
    intra_op_threads: int | None = None
    """None: onnxruntime's default (one per physical core)."""
    inter_op_threads: int | None = None
    """Above 1 also switches to the parallel executor, where inter-op threads matter."""
    opt_level: OptLevel = "all"

    @property
    def options(self) -> dict[str, str]:
        return dict(self.provider_options)

    @property
    def device_id(self) -> int:
        """The GPU the provider runs on (provider option ``device_id``, default 0)."""
        try:
            return int(self.options.get("device_id", "0"))
        except ValueError as e:
            raise UsageError(
                "provider option device_id must be an integer, e.g. device_id=0"
            ) from e

    @property
    def cuda_graph(self) -> bool:
        return self.options.get("enable_cuda_graph", "0").lower() in ("1", "true")

    def with_options(self, **changes: str | None) -> SessionConfig:
        """A copy with provider options set (a None value removes the option)."""
        opts = self.options
        for key, value in changes.items():
            if value is None:
                opts.pop(key, None)
            else:
                opts[key] = value
        return SessionConfig(
            self.provider,
            tuple(sorted(opts.items())),
            self.intra_op_threads,
            self.inter_op_threads,
            self.opt_level,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "provider_options": dict(self.provider_options),
            "intra_op_threads": self.intra_op_threads,
            "inter_op_threads": self.inter_op_threads,
            "opt_level": self.opt_level,
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> SessionConfig:
        options = dict(data.get("provider_options", {}))
        return SessionConfig(
            provider=str(data["provider"]),
            provider_options=tuple(sorted((str(k), str(v)) for k, v in options.items())),
            intra_op_threads=data.get("intra_op_threads"),
            inter_op_threads=data.get("inter_op_threads"),
            opt_level=opt_level(str(data.get("opt_level", "all"))),
        )


@dataclass(frozen=True, slots=True)
class OrtModel:
    """The model as onnxruntime gets it: a file path, or bytes when onnxcost had to rename nodes."""

    display: str
    path: str | None
    data: bytes | None = field(repr=False)
    external_folder: str | None
    inputs: tuple[TensorRecord, ...]
    """Declared graph inputs (initializers excluded), symbolic dims kept as str."""
    outputs: tuple[TensorRecord, ...]
    renamed: bool
    prepared: PreparedModel | None = field(default=None, repr=False, compare=False)
    """The prepared model this is (``prepare_model``): analyse it, and the analysis' node
    names are the ones onnxruntime profiles."""

    @property
    def source(self) -> str | bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        return self.path

    def to_file(self, folder: str) -> str:
        """A path onnxruntime can load in another process (writes the bytes if there is no file)."""
        if self.data is None:
            assert self.path is not None
            return self.path
        target = os.path.join(folder, "model.onnx")
        if not os.path.exists(target):
            Path(target).write_bytes(self.data)
        return target


def _records(values: Sequence[onnx.ValueInfoProto], skip: set[str]) -> tuple[TensorRecord, ...]:
    out = []
    for vi in values:
        if vi.name in skip:
            continue
        elem, shape = shape_of(vi.type)
        out.append(TensorRecord(vi.name, dtype_name(elem), shape))
    return tuple(out)


def _virtual(model: onnx.ModelProto) -> bool:
    return any(
        e.key == "location" and e.value.startswith(VIRTUAL_LOCATION_PREFIX)
        for t in model.graph.initializer
        for e in t.external_data
    )


def prepare_model(source: ModelSource | PreparedModel) -> OrtModel:
    """``source`` (path, bytes, ModelProto, built-in model name or PreparedModel) for onnxruntime.

    A built-in model is built with its weights. The graph onnxruntime gets is the prepared
    model's, the one the analysis costs (``analyze(prepared)``): its file when preparing
    renamed nothing, else its bytes, so kernel names match the analysis' by construction.
    """
    prepared = prepare(source, weights=True)
    proto = prepared.proto
    if _virtual(proto):
        raise ModelLoadError(
            f"{prepared.display} was prepared without its weight data, which onnxruntime needs: "
            f"prepare it with onnxcost.prepare(model, weights=True) (the CLI does)"
        )
    initializers = {t.name for t in proto.graph.initializer}
    inputs = _records(proto.graph.input, initializers)
    outputs = _records(proto.graph.output, set())
    path = str(prepared.path) if prepared.path is not None else None
    has_external = any(
        t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer
    )
    folder = str(prepared.path.parent) if prepared.path is not None and has_external else None
    model = OrtModel(prepared.display, path, None, folder, inputs, outputs, False, prepared)
    if path is not None and not prepared.renamed:
        return model
    if proto.ByteSize() > _PROTO_LIMIT:
        if path is None:
            raise ModelLoadError(
                "the model is over 2 GiB in memory; save it with external data and bench the file"
            )
        return model
    return replace(model, data=proto.SerializeToString(), renamed=prepared.renamed)


_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


@dataclass(frozen=True, slots=True)
class OpenedSession:
    """A session, how long it took to create, and what onnxruntime said meanwhile."""

    session: Any
    create_ms: float
    providers: tuple[str, ...]
    log: str


def session_options(
    config: SessionConfig,
    *,
    external_folder: str | None = None,
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    log_severity: int = 3,
) -> Any:
    """onnxruntime SessionOptions for ``config`` (profiling and optimized-model saving optional).

    ``log_severity``: onnxruntime's log level while it builds the session (3: errors, which
    ``open_session`` captures for its messages). What a run logs is set by its RunOptions
    (``onnxcost.bench.watchdog``).
    """
    ort = import_ort()
    if config.opt_level not in _LEVELS:
        raise UsageError(
            f"optimization level must be one of {', '.join(OPT_LEVELS)}, not {config.opt_level!r}"
        )
    so = ort.SessionOptions()
    so.log_severity_level = log_severity
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[config.opt_level])
    if config.intra_op_threads is not None:
        so.intra_op_num_threads = config.intra_op_threads
    if config.inter_op_threads is not None:
        so.inter_op_num_threads = config.inter_op_threads
        if config.inter_op_threads > 1:
            so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    if external_folder is not None:
        so.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", external_folder
        )
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    if optimized_model_path is not None:
        so.optimized_model_filepath = optimized_model_path
        so.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name",
            os.path.basename(optimized_model_path) + ".data",
        )
        so.add_session_config_entry(
            "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
        )
    return so


def open_session(
    model: OrtModel,
    config: SessionConfig,
    *,
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    log_severity: int = 3,
) -> OpenedSession:
    """Create a session and check that the requested provider is really in it (else ProviderError)."""
    ort = import_ort()
    no_driver = no_driver_error(config.provider)
    if no_driver is not None:
        raise no_driver  # before the install hint: no package brings a driver
    if config.provider not in ort.get_available_providers():
        raise ProviderError(
            f"{config.provider} is not in this onnxruntime build ({ort.__version__}); "
            f"install with: {install_hint(config.provider)}"
        )
    so = session_options(
        config,
        external_folder=model.external_folder,
        profile_prefix=profile_prefix,
        optimized_model_path=optimized_model_path,
        log_severity=log_severity,
    )
    log = preload_gpu_libraries(config.provider)
    providers: list[object] = [(config.provider, config.options)]
    if config.provider != CPU:
        providers.append(CPU)
    start = time.perf_counter_ns()
    with capture_output() as cap:
        try:
            session = ort.InferenceSession(model.source, so, providers=providers)
        except ort_error_types() as e:
            error: BaseException | None = e
        else:
            error = None
    create_ms = (time.perf_counter_ns() - start) / 1e6
    log += cap.text
    if error is not None:
        if "Unknown Provider Type" in str(error):
            raise provider_dropped(config.provider, [], log + str(error)) from error
        raise load_error(error, config.provider) from error
    session.disable_fallback()
    got = tuple(str(p) for p in session.get_providers())
    if config.provider not in got:
        raise provider_dropped(config.provider, got, log)
    return OpenedSession(session, create_ms, got, log)


def _identity_model() -> bytes:
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["x"], ["y"], name="identity")],
        "warm_up",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 13)], ir_version=7
    )
    return bytes(model.SerializeToString())


def warm_up_onnxruntime(config: SessionConfig) -> None:
    """Create and drop a session of a one-node model with ``config``.

    onnxruntime sets up its environment, kernel registries and (on CUDA) the device context
    with the first session of a process; doing that here keeps it out of the model's session
    creation, whose memory growth is measured as the model's weights.
    """
    model = OrtModel("warm-up", None, _identity_model(), None, (), (), False)
    open_session(model, config.with_options(enable_cuda_graph=None))


def plain_runner(session: Any, feeds: Mapping[str, np.ndarray], run_options: Any = None) -> Runner:
    """``session.run`` with host arrays in and out (copies included on a GPU)."""
    names = [o.name for o in session.get_outputs()]
    run = session.run
    feed = dict(feeds)

    def once() -> object:
        return run(names, feed, run_options)

    return once


def device_runner(
    session: Any,
    feeds: Mapping[str, np.ndarray],
    *,
    device_id: int,
    output_shapes: Mapping[str, tuple[int, ...]] | None = None,
    output_dtypes: Mapping[str, str] | None = None,
    run_options: Any = None,
) -> Runner:
    """IO binding with inputs and outputs on the GPU, so host copies stay out of the timed loop.

    With ``output_shapes`` the outputs are preallocated at fixed addresses, which CUDA graphs
    need (replay reuses the captured buffers); without, onnxruntime allocates them on device.
    """
    ort = import_ort()
    binding = session.io_binding()
    keep: list[Any] = []
    for name, array in feeds.items():
        value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), "cuda", device_id)
        keep.append(value)
        binding.bind_ortvalue_input(name, value)
    for out in session.get_outputs():
        if output_shapes is not None and output_dtypes is not None:
            if out.name not in output_shapes:
                raise UsageError(
                    f"a CUDA graph needs every output's shape, and {out.name!r} has none; drop --cuda-graph"
                )
            value = ort.OrtValue.ortvalue_from_shape_and_type(
                list(output_shapes[out.name]), np.dtype(output_dtypes[out.name]), "cuda", device_id
            )
            keep.append(value)
            binding.bind_ortvalue_output(out.name, value)
        else:
            binding.bind_output(out.name, "cuda", device_id)
    binding.synchronize_inputs()
    run = session.run_with_iobinding

    def once() -> object:
        run(binding, run_options)
        return keep

    return once


def make_runner(
    session: Any,
    feeds: Mapping[str, np.ndarray],
    config: SessionConfig,
    *,
    include_copies: bool,
    outputs: Sequence[TensorRecord] = (),
    run_options: Any = None,
) -> tuple[Runner, bool]:
    """The call the loops time, and whether it uses device IO binding.

    On CUDA/TensorRT without ``include_copies`` inputs and outputs stay on the GPU; with a
    CUDA graph the outputs are preallocated from ``outputs`` (static shapes needed).
    ``run_options``: onnxruntime RunOptions every run gets (the watchdog's, for --timeout).
    """
    if config.provider not in CUDA_LIKE or include_copies:
        return plain_runner(session, feeds, run_options), False
    shapes: dict[str, tuple[int, ...]] | None = None
    dtypes: dict[str, str] | None = None
    if config.cuda_graph:
        shapes, dtypes = {}, {}
        for rec in outputs:
            if rec.shape is None or not all(isinstance(d, int) for d in rec.shape):
                raise UsageError(
                    f"a CUDA graph needs static shapes but output {rec.name!r} has shape {rec.shape}; "
                    f"fix the input shapes (--input-shape / --dim) or drop --cuda-graph"
                )
            shapes[rec.name] = tuple(int(d) for d in rec.shape if isinstance(d, int))
            dtypes[rec.name] = rec.dtype
    return device_runner(
        session,
        feeds,
        device_id=config.device_id,
        output_shapes=shapes,
        output_dtypes=dtypes,
        run_options=run_options,
    ), True
