"""The entry point: ``compare`` runs the analyses (and optionally benchmarks), then builds the
comparison from the records, the alignment and the findings; ``measure`` benchmarks one model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

import onnx

from onnxcost.analysis.records import Convention, TrainingTotals
from onnxcost.analysis.result import Analysis
from onnxcost.analysis.traffic import Traffic
from onnxcost.api import analyze
from onnxcost.compare.alignment import align_models
from onnxcost.compare.findings import findings, io_text, only_in
from onnxcost.compare.layers import ModelGraph, compute_nodes, facts_of, graph_of
from onnxcost.compare.records import (
    BenchSettings,
    BenchSummary,
    ComparedModel,
    Comparison,
    MetricRow,
    OpTypeRow,
    TimeRow,
)
from onnxcost.errors import OnnxcostError, ShapeError, UsageError
from onnxcost.load.model import ModelSource
from onnxcost.prepare import PreparedModel, prepare

Compared = ModelSource | PreparedModel | Analysis
"""What ``compare`` takes for each model: a source or prepared model to analyse, or an analysis."""


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


def _describe_source(source: Compared) -> str:
    if isinstance(source, PreparedModel):
        return source.display
    if isinstance(source, Analysis):
        return f"an analysis of {source.model.path or 'an in-memory model'}"
    if isinstance(source, onnx.ModelProto):
        return "an in-memory ModelProto"
    if isinstance(source, bytes | bytearray):
        return f"{len(source)} bytes"
    return str(source)


def _split_flags(
    graphs: Sequence[ModelGraph],
    labels: Sequence[str],
    input_shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
) -> list[tuple[dict[str, Sequence[int]], dict[str, int]]]:
    """The --input-shape / --dim flags that apply to each model; a flag no model knows is an error."""
    for name in input_shapes:
        if not any(name in g.inputs for g in graphs):
            have = "; ".join(
                f"{lab}: {', '.join(g.inputs)}" for lab, g in zip(labels, graphs, strict=True)
            )
            raise ShapeError(f"--input-shape names {name!r}, which no model has; inputs are {have}")
    for sym in dims:
        if not any(sym in g.symbols for g in graphs):
            have = "; ".join(
                f"{lab}: {', '.join(sorted(g.symbols)) or '(none)'}"
                for lab, g in zip(labels, graphs, strict=True)
            )
            raise ShapeError(
                f"--dim {sym}=... matches no model's symbolic dims; symbols are {have}"
            )
    return [
        (
            {k: v for k, v in input_shapes.items() if k in g.inputs},
            {k: v for k, v in dims.items() if k in g.symbols},
        )
        for g in graphs
    ]


def _labels(n: int, labels: Sequence[str] | None) -> tuple[str, ...]:
    if labels is None:
        return tuple(chr(ord("A") + i) if i < 26 else f"M{i + 1}" for i in range(n))
    if len(labels) != n:
        raise UsageError(f"got {len(labels)} labels for {n} models; give one --label per model")
    if len(set(labels)) != n or any(not s.strip() for s in labels):
        raise UsageError("labels must be distinct and non-empty; give one --label per model")
    return tuple(labels)


def _which(i: int, label: str, source: Compared) -> str:
    ordinal = _ORDINALS[i] if i < len(_ORDINALS) else f"#{i + 1}"
    return f"model {label} ({ordinal}, {_describe_source(source)})"


def _prepared(item: Compared, weights: bool) -> PreparedModel:
    """The prepared model behind ``item``: prepared here, given, or the one an analysis read."""
    if not isinstance(item, Analysis):
        return prepare(item, weights=weights)
    if item.prepared is not None:
        return item.prepared
    if item.model.path is not None:
        return prepare(item.model.path, weights=weights)
    raise UsageError(
        "an analysis of bytes, a ModelProto or a built-in model does not keep its model; "
        "analyse a prepared model to compare it: analyze(onnxcost.prepare.prepare(source))"
    )


def compare(
    models: Sequence[Compared],
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
    convention: Convention = "onnxcost",
    labels: Sequence[str] | None = None,
    bench: BenchSettings | None = None,
    allow_reshape: bool = False,
    traffic: Traffic = "runtime",
    training: bool = False,
    optimizer: str = "adamw",
    frozen: str | None = None,
    grad_inputs: bool = False,
    mixed_precision: str | None = None,
) -> Comparison:
    """Compare ``models``; the first is the baseline.

    Each model is a path, bytes, a ModelProto, a built-in name or a ``PreparedModel``, which
    compare analyses (``input_shapes`` and ``dims`` apply to every model that has that input
    or symbol); or an ``Analysis`` a caller already has, compared as it is (run, then compare:
    ``compare([analyze(prepare(a)), analyze(prepare(b))])``). ``labels`` name the models in
    the report (default A, B, C...). ``bench`` also measures every model with onnxruntime
    under the same settings, one after the other. ``allow_reshape`` lets ``input_shapes``
    change dims the models fix (see ``analyze``). ``traffic``: how bytes are counted
    (``analyze``); an ``Analysis`` given must count them so.
    ``training`` and the arguments after it analyse every model with the training
    step (``analyze``'s, docs/training.md): the comparison then has rows for its figures.
    """
    if len(models) < 2:
        raise UsageError(f"compare needs at least two models, got {len(models)}")
    names = _labels(len(models), labels)
    prepared = []
    for i, item in enumerate(models):
        if isinstance(item, Analysis) and item.convention != convention:
            raise UsageError(
                f"{_which(i, names[i], item)} counts FLOPs by the {item.convention!r} "
                f"convention; pass convention={item.convention!r} or analyse it again"
            )
        if isinstance(item, Analysis) and item.traffic != traffic:
            raise UsageError(
                f"{_which(i, names[i], item)} counts bytes by the {item.traffic!r} traffic "
                f"convention; pass traffic={item.traffic!r} or analyse it again"
            )
        try:
            prepared.append(_prepared(item, weights=bench is not None))
        except OnnxcostError as e:
            raise type(e)(f"{_which(i, names[i], item)}: {e}") from e
    graphs = [graph_of(p) for p in prepared]
    flags = _split_flags(graphs, names, input_shapes or {}, dims or {})
    compared = []
    for i, (item, model) in enumerate(zip(models, prepared, strict=True)):
        shapes, model_dims = flags[i]
        try:
            result = (
                item
                if isinstance(item, Analysis)
                else analyze(
                    model,
                    input_shapes=shapes,
                    dims=model_dims,
                    convention=convention,
                    allow_reshape=allow_reshape,
                    traffic=traffic,
                    training=training,
                    optimizer=optimizer,
                    frozen=frozen,
                    grad_inputs=grad_inputs,
                    mixed_precision=mixed_precision,
                )
            )
        except OnnxcostError as e:
            raise type(e)(f"{_which(i, names[i], item)}: {e}") from e
        compared.append(
            ComparedModel(
                label=names[i],
                path=str(model.path) if model.path is not None else model.builtin,
                analysis=result,
                compute=compute_nodes(result, graphs[i]),
                facts=facts_of(result, graphs[i]),
            )
        )
    if bench is not None:
        measured = []
        for i, (model, m) in enumerate(zip(prepared, compared, strict=True)):
            shapes, model_dims = flags[i]
            try:
                summary = measure(model, bench, shapes, model_dims, m.analysis)
            except OnnxcostError as e:
                raise type(e)(f"{_which(i, names[i], models[i])}: {e}") from e
            measured.append(replace(m, bench=summary))
        compared = measured
    return compare_analysed(compared, convention, traffic)


def compare_analysed(
    compared: Sequence[ComparedModel], convention: Convention, traffic: Traffic = "runtime"
) -> Comparison:
    """The comparison of models already analysed (and measured): alignment, tables, findings."""
    base = compared[0]
    alignments = tuple(align_models(base, c) for c in compared[1:])
    only = [o for c in compared[1:] for o in only_in(base, c)]
    return Comparison(
        models=tuple(compared),
        totals=metric_rows(compared),
        by_op_type=by_op_type_rows(compared),
        alignments=alignments,
        only_in=tuple(only),
        found=tuple(findings(compared, alignments)),
        inputs_differ=any(io_text(m) != io_text(base) for m in compared[1:]),
        convention=convention,
        time_by_op_type=time_rows(compared),
        traffic=traffic,
    )


def measure(
    source: ModelSource | PreparedModel,
    settings: BenchSettings,
    shapes: Mapping[str, Sequence[int]],
    dims: Mapping[str, int],
    analysis: Analysis,
) -> BenchSummary:
    """Benchmark one model with ``settings``, reusing its ``analysis`` (same shapes and dims)."""
    from onnxcost.bench import BenchOptions, run_bench

    result = run_bench(
        source,
        BenchOptions(
            provider=settings.provider,
            runs=settings.runs,
            warmup=settings.warmup,
            threads=settings.threads,
            profile=settings.profile,
            min_seconds=settings.min_seconds,
            input_shapes=shapes,
            dims=dims,
        ),
        analysis=analysis,
    )
    times = (
        {o.op_type: (o.count, o.mean_us) for o in result.profile.by_op_type}
        if result.profile is not None
        else {}
    )
    lat = result.latency
    return BenchSummary(
        provider=result.provider,
        latency_ms={
            "min": lat.min_ms,
            "mean": lat.mean_ms,
            "median": lat.median_ms,
            "p90": lat.p90_ms,
            "p95": lat.p95_ms,
            "p99": lat.p99_ms,
            "max": lat.max_ms,
            "std": lat.std_ms,
        },
        throughput_per_s=result.throughput_per_s,
        runs=result.runs,
        noisy=result.noisy,
        time_by_op_type_us=times,
        warnings=tuple(w for w in result.warnings if not w.startswith("analysis: ")),
    )


def by_op_type_rows(models: Sequence[ComparedModel]) -> tuple[OpTypeRow, ...]:
    keys: dict[tuple[str, str], None] = {}
    tables = []
    for m in models:
        table = {(s.domain, s.op_type): s for s in m.analysis.by_op_type}
        tables.append(table)
        keys.update(dict.fromkeys(table))
    rows = []
    for dom, op in keys:
        cells = [t.get((dom, op)) for t in tables]
        rows.append(
            OpTypeRow(
                op_type=op,
                domain=dom,
                count=tuple(c.count if c else 0 for c in cells),
                macs=tuple(c.macs if c else 0 for c in cells),
                flops=tuple(c.flops if c else 0 for c in cells),
            )
        )
    rows.sort(key=lambda r: (-max(r.flops), -max(r.macs), -max(r.count), r.op_type))
    return tuple(rows)


def time_rows(models: Sequence[ComparedModel]) -> tuple[TimeRow, ...]:
    if all(m.bench is None or not m.bench.time_by_op_type_us for m in models):
        return ()
    ops: dict[str, None] = {}
    for m in models:
        if m.bench is not None:
            ops.update(dict.fromkeys(m.bench.time_by_op_type_us))
    rows = []
    for op in ops:
        cells = [None if m.bench is None else m.bench.time_by_op_type_us.get(op) for m in models]
        rows.append(
            TimeRow(
                op_type=op,
                count=tuple(None if c is None else c[0] for c in cells),
                mean_us=tuple(None if c is None else c[1] for c in cells),
            )
        )
    rows.sort(key=lambda r: (-max(t or 0.0 for t in r.mean_us), r.op_type))
    return tuple(rows)


_TOTALS: tuple[tuple[str, str, Literal["count", "bytes"]], ...] = (
    ("macs", "MACs", "count"),
    ("flops", "FLOPs", "count"),
    ("params", "params", "count"),
    ("param_bytes", "param bytes", "bytes"),
    ("bytes_read", "bytes read", "bytes"),
    ("bytes_written", "bytes written", "bytes"),
    ("peak_activation_bytes", "peak activation", "bytes"),
)

_TRAINING_TOTALS: tuple[tuple[str, str, Literal["count", "bytes"]], ...] = (
    ("backward_flops", "backward FLOPs", "count"),
    ("training_flops", "training FLOPs", "count"),
    ("trainable_params", "trainable params", "count"),
    ("saved_activation_bytes", "saved activations", "bytes"),
    ("training_peak_bytes", "training peak", "bytes"),
)
"""Rows added where every analysis was made with ``training=True``."""


def _training_value(t: TrainingTotals | None, key: str) -> int:
    assert t is not None
    if key == "saved_activation_bytes":
        return t.training_memory.saved_activation_bytes
    if key == "training_peak_bytes":
        return t.training_memory.peak_bytes
    return int(getattr(t, key))


def metric_rows(models: Sequence[ComparedModel]) -> tuple[MetricRow, ...]:
    rows = [
        MetricRow(key, label, kind, tuple(getattr(m.analysis.totals, key) for m in models))
        for key, label, kind in _TOTALS
    ]
    trained = [m.analysis.totals.training for m in models]
    if all(t is not None for t in trained):
        rows += [
            MetricRow(key, label, kind, tuple(_training_value(t, key) for t in trained))
            for key, label, kind in _TRAINING_TOTALS
        ]
    rows.append(
        MetricRow(
            "node_count", "nodes", "count", tuple(m.analysis.model.node_count for m in models)
        )
    )
    rows.append(
        MetricRow("compute_nodes", "compute nodes", "count", tuple(len(m.compute) for m in models))
    )
    if any(m.bench is not None for m in models):
        rows.append(
            MetricRow(
                "latency_ms",
                "latency (median)",
                "ms",
                tuple(
                    None if m.bench is None else m.bench.latency_ms.get("median") for m in models
                ),
            )
        )
        rows.append(
            MetricRow(
                "throughput_per_s",
                "throughput",
                "rate",
                tuple(None if m.bench is None else m.bench.throughput_per_s for m in models),
            )
        )
    return tuple(rows)
