"""What the symbolic pass gives: ``SymbolicCosts`` (the formulas of the totals and of every
node) and ``FormulaTotals`` (the totals at a point); the keys that get formulas.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from onnxcost.analysis.records import Layout, When, to_jsonable
from onnxcost.errors import ShapeError
from onnxcost.symbolic.limits import PositionLimit
from onnxcost.symbolic.poly import Formula
from onnxcost.symdim import Dim

TOTAL_KEYS = ("macs", "flops", "bytes_read", "bytes_written", "params", "param_bytes")
"""The totals that get formulas."""
NODE_KEYS = ("macs", "flops", "bytes_read", "bytes_written")
"""The per-node costs that get formulas."""

_LABELS = {
    "macs": "MACs",
    "flops": "FLOPs",
    "bytes_read": "bytes read",
    "bytes_written": "bytes written",
    "params": "params",
    "param_bytes": "param bytes",
    "peak_activation_bytes": "peak activation bytes",
    "backward_macs": "backward MACs",
    "backward_flops": "backward FLOPs",
    "training_flops": "training FLOPs",
    "trainable_params": "trainable params",
    "weights_bytes": "training weights bytes",
    "gradient_bytes": "gradient bytes",
    "optimizer_bytes": "optimizer bytes",
    "saved_activation_bytes": "saved activation bytes",
    "peak_bytes": "training peak bytes",
}


@dataclass(frozen=True, slots=True)
class SymbolicCosts:
    """Formulas for the totals and for every node of an analysis (None: no exact formula)."""

    symbols: tuple[str, ...]
    totals: dict[str, Formula | None]
    """Keys ``TOTAL_KEYS``, then with ``training`` ``training.TRAINING_KEYS``."""
    nodes: tuple[dict[str, Formula | None], ...]
    """One per record of ``Analysis.nodes``, in the same order; keys ``NODE_KEYS``."""
    zero_allowed: dict[str, bool]
    """Per symbol, whether the model analyses at 0 (every node keeps its shapes)."""
    analyses: int
    """Concrete analyses of the whole model run to find and check the formulas."""
    warnings: tuple[str, ...] = ()
    reduced_analyses: int = 0
    """Analyses of the model reduced to one node per class (``_Reduced``), which found the
    polynomials at the other points; 0 where no reduced model was used."""
    reduced_nodes: int = 0
    """The reduced model's nodes (0: none used)."""
    limit: PositionLimit | None = None
    """The model's positions, which the check points stayed within (its warning is in
    ``warnings``); None where the model has no position table."""
    shapes: Mapping[str, tuple[Dim, ...]] | None = field(default=None, repr=False, compare=False)
    """Every tensor's shape from the one walk (tensor name -> dims in ``symbols`` and the
    dims fixed; a dim may hold a min, max or floor of them), for ``predict --sweep``; None
    where the formulas were sampled. Not checked against a concrete analysis here: a reader
    checks what it uses."""
    least: dict[str, int] = field(default_factory=dict)
    """The symbols whose least value is above 1 (``symbolic.least``: wav2vec2's length, 20):
    the formulas hold from it, not below, and the counts are at it; a symbol not named here
    holds from 1 (and at 0 where ``zero_allowed``)."""

    def at(self, **values: int) -> FormulaTotals:
        """The totals at a point: every symbol bound to an integer >= 0, and to its least
        value or more (``least``); ShapeError below it."""
        for s, v in self.least.items():
            if s in values and values[s] < v:
                raise ShapeError(
                    f"{s}={values[s]} is below {v}, the least {s} the formulas hold for (the "
                    f"model's warnings say why); pass {s} >= {v}"
                )
        found = {k: (None if f is None else f.evaluate(values)) for k, f in self.totals.items()}
        return FormulaTotals(**found)

    def node_formulas(self, index: int) -> dict[str, str | None]:
        """The JSON ``formulas`` of node ``index``."""
        return _strings(self.nodes[index])

    @property
    def heading(self) -> str:
        """``Formulas in batch, seq (exact; the counts are at batch=1, seq=1)``."""
        syms = self.symbols
        if not syms:
            return "Formulas: the model has no free symbolic dim; every cost is a constant"
        at = ", ".join(f"{s}={self.least.get(s, 1)}" for s in syms)
        return f"Formulas in {', '.join(syms)} (exact; the counts are at {at})"

    def rows(self) -> list[tuple[str, str]]:
        """(total, formula) per total: ``("MACs", "52,753,152·batch·seq + ...")``."""
        return [
            (_LABELS[key], "none (see warnings)" if f is None else f.pretty())
            for key, f in self.totals.items()
        ]

    def describe(self) -> list[str]:
        """The heading, then ``MACs = 52,753,152·batch·seq + 3,072·batch·seq²`` per total."""
        return [self.heading, *(f"{label} = {text}" for label, text in self.rows())]

    JSON_LAYOUT: ClassVar[Layout] = (
        "symbols",
        ("formulas", "total_texts"),
        When("least", ("least",)),
    )
    """Merged into ``onnxcost.analysis/1`` by ``analyze(..., symbolic=True)``; ``least`` only
    where a symbol's least value is above 1."""

    @property
    def total_texts(self) -> dict[str, str | None]:
        """The totals' formulas as Python expressions (None: no exact formula)."""
        return _strings(self.totals)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class FormulaTotals:
    """Totals evaluated from the formulas at one point (None where a total has none)."""

    macs: int | None
    flops: int | None
    bytes_read: int | None
    bytes_written: int | None
    params: int | None
    param_bytes: int | None
    peak_activation_bytes: int | None = None
    """From the one walk only (None where the formulas were sampled)."""
    backward_macs: int | None = None
    """This and the keys below: with ``training=True`` only (``training.TRAINING_KEYS``)."""
    backward_flops: int | None = None
    training_flops: int | None = None
    trainable_params: int | None = None
    weights_bytes: int | None = None
    gradient_bytes: int | None = None
    optimizer_bytes: int | None = None
    saved_activation_bytes: int | None = None
    peak_bytes: int | None = None


def _strings(formulas: Mapping[str, Formula | None]) -> dict[str, str | None]:
    return {k: (None if f is None else f.python()) for k, f in formulas.items()}
