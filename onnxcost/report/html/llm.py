"""The HTML page of ``onnxcost llm``: its figures and each phase's arithmetic intensity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from onnxcost import units

if TYPE_CHECKING:
    from onnxcost.llm.cost import LlmReport
from onnxcost.report.html.page import (
    VEGA_LITE_SCHEMA,
    page,
)


def llm_html(r: LlmReport) -> str:
    """The report of ``onnxcost llm``: its figures, and each phase's arithmetic intensity
    (FLOPs per byte moved) against the ridge point peak / bandwidth where one is known."""
    from onnxcost.report.llm import rows

    phases = [("prefill", r.prefill)]
    if r.decode_first is not None:
        phases.append(("first decode step", r.decode_first))
    if r.decode_last is not None:
        phases.append(("last decode step", r.decode_last))
    values = [{"phase": n, "FLOP/B": p.flops_per_byte} for n, p in phases if p.flops_per_byte > 0]
    # A dot per phase, labelled: a bar on a log scale starts at 0, which has no place on it,
    # and Vega then draws nothing at all.
    y = {"field": "phase", "type": "nominal", "sort": None, "title": None}
    x = {"field": "FLOP/B", "type": "quantitative"}
    layers: list[dict[str, Any]] = [
        {
            "mark": {"type": "circle", "size": 120, "opacity": 1, "color": "#3b6fd8"},
            "encoding": {
                "y": y,
                "x": {
                    **x,
                    "scale": {"type": "log"},
                    "title": "arithmetic intensity (FLOPs per byte moved, log scale)",
                },
                "tooltip": [{"field": "phase"}, {**x, "format": ".4~g"}],
            },
        },
        {
            "mark": {"type": "text", "align": "left", "dx": 9, "fontSize": 11},
            "encoding": {"y": y, "x": x, "text": {**x, "format": ".3~g"}},
        },
    ]
    ridge_note = "No ceiling known: the ridge point needs --peak-tflops and --bandwidth-gbs."
    if r.roofline is not None:
        ridge = r.roofline.ridge_flops_per_byte
        layers.append(
            {
                "data": {"values": [{"ridge": ridge}]},
                "mark": {"type": "rule", "color": "#a15c00", "strokeDash": [4, 3]},
                "encoding": {"x": {"field": "ridge", "type": "quantitative"}},
            }
        )
        ridge_note = (
            f"Dashed: the ridge point, {ridge:.1f} FLOP/B; a phase left of it is memory-bound."
        )
    chart = {
        "$schema": VEGA_LITE_SCHEMA,
        "width": "container",
        "height": {"step": 28},
        "data": {"values": values},
        "layer": layers,
    }
    cards = [
        ("weights", units.nbytes(r.weights_bytes), f"{r.weights_bytes:,} B"),
        ("KV cache per token", units.nbytes(r.kv_cache_bytes_per_token), ""),
        ("prefill FLOPs", units.count(r.prefill.flops), f"{r.prefill.flops:,}"),
        ("generation FLOPs", units.count(r.generation.flops), f"{r.generation.flops:,}"),
        ("peak memory", units.nbytes(r.peak_memory_bytes), f"{r.peak_memory_bytes:,} B"),
    ]
    if r.training is not None:
        t = r.training
        cards.append(
            (
                f"training FLOPs, {t.tokens:,} tokens",
                units.count(t.flops),
                f"{t.ratio:.3f} x 6·N·D",
            )
        )
    return page(
        "llm.html.j2",
        title=f"onnxcost llm: {r.model}",
        what="decoder cost with a KV cache",
        data={"charts": {"chart-phases": chart}, "tables": []},
        heading=r.model,
        prompt=r.prompt,
        generate=r.generate,
        batch=r.batch,
        cards=cards,
        rows=[(k.strip(), v) for k, v in rows(r)],
        ridge_note=ridge_note,
        warnings=list(r.warnings),
    )
