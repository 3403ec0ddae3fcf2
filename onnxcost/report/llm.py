"""``onnxcost llm`` as a terminal table or markdown: one row per figure, the same rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onnxcost import units
from onnxcost.llm.cost import LlmReport, PhaseCost
from onnxcost.report.safe_text import hanging, md
from onnxcost.report.tables import Column, Table
from onnxcost.report.writers.markdown import to_markdown as md_lines
from onnxcost.report.writers.rich import to_grid

if TYPE_CHECKING:
    from rich.console import Console

_LABELS = {"macs": "MACs", "flops": "FLOPs", "bytes_read": "bytes read"}


def _phase(p: PhaseCost, written: bool = True) -> str:
    text = f"MACs {units.count(p.macs)} | FLOPs {units.count(p.flops)} | read {units.nbytes(p.bytes_read)}"
    return text + (f" | written {units.nbytes(p.bytes_written)}" if written else "")


def rows(r: LlmReport) -> list[tuple[str, str]]:
    """(figure, value) in reading order."""
    n, m, b = r.prompt, r.generate, r.batch
    out = [
        (
            "model",
            f"{r.model} (batch dim {r.layout.batch!r}, new tokens {r.layout.seq!r}, "
            f"cache length {r.layout.past!r})",
        ),
        ("weights", f"{units.nbytes(r.weights_bytes)} ({r.weights_bytes:,} B)"),
        (
            "KV cache per token",
            f"{units.nbytes(r.kv_cache_bytes_per_token)} ({r.kv_cache_bytes_per_token:,} B)",
        ),
        (
            f"KV cache at {n + m} tokens x batch {b}",
            f"{units.nbytes(r.kv_cache_bytes)} ({r.kv_cache_bytes:,} B)",
        ),
        (f"prefill (seq {n}, past 0)", _phase(r.prefill)),
        ("  intensity", f"{r.prefill.flops_per_byte:.2f} FLOP/B"),
    ]
    for i, key in enumerate(("macs", "flops", "bytes_read")):
        text = r.decode_formula_text(key)
        pretty = r.decode_formulas.get(key)
        out.append(
            (
                "decode step (seq 1)" if i == 0 else "",
                f"{_LABELS[key]} = {'none (see warnings)' if pretty is None or text is None else pretty.pretty()}",
            )
        )
    if r.decode_first is not None and r.decode_last is not None:
        out.append((f"  first step (past {n})", _phase(r.decode_first, False)))
        if r.decode_first_read is not None:
            by = r.decode_first_read
            out.append(
                (
                    "    read by role",
                    f"weights {units.nbytes(by.weights)}, KV cache {units.nbytes(by.kv_cache)}, "
                    f"activations {units.nbytes(by.activations)}"
                    + ("" if r.traffic == "runtime" else " (every input whole)"),
                )
            )
        out.append((f"  last step (past {n + m - 2})", _phase(r.decode_last, False)))
        out.append(("  intensity (all steps)", f"{r.decode_flops_per_byte:.2f} FLOP/B"))
    else:
        out.append(("  steps", "none: the prefill yields the only token (--generate 1)"))
    out.append((f"generation of {m} tokens", _phase(r.generation, False)))
    out.append(("peak activations", f"prefill {units.nbytes(r.prefill_activations_bytes)}"))
    if r.decode_activations is not None:
        out.append(("", f"decode step = {r.decode_activations.pretty()}"))
    if r.last_activations_bytes is not None:
        out.append(
            (f"  at the last step (past {n + m - 2})", units.nbytes(r.last_activations_bytes))
        )
    out.append(
        (
            "peak memory",
            f"{units.nbytes(r.peak_memory_bytes)}: weights + the largest of those (live "
            f"tensors, KV cache included)",
        )
    )
    if r.training is not None:
        t = r.training
        steps = f"{t.steps:,.0f}" if t.steps.is_integer() else f"{t.steps:,.2f}"
        out += [
            (
                f"training on {t.tokens:,} tokens",
                f"FLOPs {units.count(t.flops)} ({t.flops:,}): {steps} steps of batch "
                f"{t.batch} x seq {t.seq}, {units.count(round(t.flops_per_token))} per token",
            ),
            (
                "  6·N·D",
                f"FLOPs {units.count(t.flops_6nd)} ({t.flops_6nd:,}), N = {t.params:,} "
                f"non-embedding params ({t.embedding_params:,} in embedding tables left out)",
            ),
            ("  graph / 6·N·D", f"{t.ratio:.4f}"),
        ]
    if r.roofline is not None:
        ro = r.roofline
        bounds = f"prefill {r.prefill_bound}-bound"
        if r.decode_bound is not None:
            bounds += f", decode {r.decode_bound}-bound"
        out.append(
            (
                "roofline",
                f"ridge {ro.ridge_flops_per_byte:.1f} FLOP/B ({ro.source}: "
                f"{ro.peak_flops_per_s / 1e12:,.4g} TFLOP/s, {ro.bandwidth_bytes_per_s / 1e9:,.1f} GB/s): "
                f"{bounds}",
            )
        )
    else:
        out.append(
            (
                "roofline",
                "no ceiling: pass --peak-tflops and --bandwidth-gbs, or run `onnxcost bench --calibrate`",
            )
        )
    if r.bench is not None:
        t = r.bench
        median = "-" if t.decode_median_ms is None else f"{t.decode_median_ms:.3f} ms"
        p90 = "-" if t.decode_p90_ms is None else f"{t.decode_p90_ms:.3f} ms"
        out.append((f"measured ({t.provider})", f"time to first token {t.ttft_ms:.3f} ms"))
        out.append(("", _LOOPS.get(t.cache, f"loop: {t.cache}")))
        out.append(("", f"decode per token: median {median}, p90 {p90}"))
        out.append(
            ("", f"{t.tokens_per_s:,.1f} tokens/s ({b} x {m} tokens in {t.total_ms:.1f} ms)")
        )
    return out


_LOOPS = {
    "device": "loop: KV cache kept on the device (IO binding; only the logits to the host)",
    "host": "loop: KV cache copied through the host every step (numpy feeds)",
}
"""The row that says which --bench loop ran (``--cache``)."""


def table(r: LlmReport, *, indent: bool = True) -> Table:
    """The figures as a table (``rows``); without ``indent`` a label loses its leading
    spaces and an empty one is a space (a Markdown cell that is not empty)."""
    cells = tuple(rows(r)) if indent else tuple((k.strip() or " ", v) for k, v in rows(r))
    return Table("", (Column("figure", style="bold"), Column("value", cut="end")), cells)


def render(r: LlmReport, console: Console) -> None:
    from rich.text import Text

    console.print(to_grid(table(r)))
    for w in r.warnings:
        console.print(hanging(Text.assemble(("warning:", "yellow"), " "), w))


def to_markdown(r: LlmReport) -> str:
    out = [f"# onnxcost llm: {md(r.model)}", "", *md_lines(table(r, indent=False))]
    if r.warnings:
        out += ["", "## Warnings", ""] + [f"- {md(w)}" for w in r.warnings]
    return "\n".join(out) + "\n"
