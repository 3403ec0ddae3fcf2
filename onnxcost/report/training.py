"""The "Training" section of an analysis made with ``training=True``: one ``Table`` that the
terminal, Markdown and HTML views draw (docs/training.md)."""

from __future__ import annotations

from onnxcost import units
from onnxcost.analysis.result import Analysis
from onnxcost.report.tables import Column, Table


def training_table(a: Analysis) -> Table | None:
    """Backward and training FLOPs, trainable params and the step's memory; None without
    ``training``."""
    t = a.totals.training
    if t is None:
        return None
    m = t.training_memory
    how = t.optimizer + (f", mixed precision {t.mixed_precision}" if t.mixed_precision else "")
    if t.frozen is not None:
        how += f", frozen {t.frozen!r}"
    rows: tuple[tuple[str, str], ...] = (
        ("backward MACs", f"{units.count(t.backward_macs)} ({t.backward_macs:,})"),
        (
            f"backward FLOPs ({a.convention})",
            f"{units.count(t.backward_flops)} ({t.backward_flops:,})",
        ),
        (
            "training FLOPs (forward + backward)",
            f"{units.count(t.training_flops)} ({t.training_flops:,})",
        ),
        ("trainable params", f"{units.count(t.trainable_params)} ({t.trainable_params:,})"),
        ("weights", units.nbytes(m.weights_bytes)),
        ("gradients", units.nbytes(m.gradient_bytes)),
        (f"optimizer state ({how})", units.nbytes(m.optimizer_bytes)),
        ("saved activations", units.nbytes(m.saved_activation_bytes)),
        ("peak (forward then backward)", units.nbytes(m.peak_bytes)),
    )
    return Table("Training", (Column("training"), Column("value", True)), rows)
