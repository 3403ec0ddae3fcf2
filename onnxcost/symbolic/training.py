"""Formulas of the training totals (``analyze(..., symbolic=True, training=True)``).

The same interpolation as ``search.py`` on the whole model's analyses with ``training``: along
each symbol the analysis is run until every training total's forward difference is 0 (degree
``max_degree`` at most), the grid of those degrees is interpolated (Newton's forward formula,
exact integers), and each formula is checked at a random point beyond the grid and at every
symbol = 1 (the analysis reported). A total that is no polynomial there (the peak, a maximum
over the steps, can change where it happens) has no formula (None) and a warning says so.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from onnxcost.errors import OnnxcostError
from onnxcost.symbolic.poly import Formula, _differences, _formula
from onnxcost.symbolic.search import _check_point, _interpolate

if TYPE_CHECKING:
    from onnxcost.analysis.records import TrainingTotals

TRAINING_KEYS = (
    "backward_macs",
    "backward_flops",
    "training_flops",
    "trainable_params",
    "weights_bytes",
    "gradient_bytes",
    "optimizer_bytes",
    "saved_activation_bytes",
    "peak_bytes",
)
"""The training totals that get formulas (``training_memory``'s keys as they are)."""

_FIRST = 2
"""The base point of every symbol, as ``search.py`` starts (1 broadcasts, 0 may break)."""


def training_vector(t: TrainingTotals | None) -> list[int] | None:
    """The ``TRAINING_KEYS`` of ``t`` in order."""
    if t is None:
        return None
    m = t.training_memory
    return [
        t.backward_macs,
        t.backward_flops,
        t.training_flops,
        t.trainable_params,
        m.weights_bytes,
        m.gradient_bytes,
        m.optimizer_bytes,
        m.saved_activation_bytes,
        m.peak_bytes,
    ]


class _Points:
    """The training totals at a point of the symbols, each point analysed once."""

    def __init__(
        self, symbols: tuple[str, ...], run: Callable[[dict[str, int]], list[int] | None]
    ) -> None:
        self.symbols = symbols
        self.run = run
        self.seen: dict[tuple[int, ...], list[int] | None] = {}

    def need(self, point: tuple[int, ...], *, whole: bool = False) -> list[int]:
        if point not in self.seen:
            try:
                self.seen[point] = self.run(dict(zip(self.symbols, point, strict=True)))
            except OnnxcostError:
                self.seen[point] = None
        found = self.seen[point]
        if found is None:
            raise _NoPointError(point)
        return found


class _NoPointError(Exception):
    pass


def training_formulas(
    symbols: tuple[str, ...],
    run: Callable[[dict[str, int]], list[int] | None],
    at_one: Sequence[int],
    max_degree: int = 3,
    seed: int = 0,
) -> tuple[dict[str, Formula | None], list[str], int]:
    """Formulas of ``TRAINING_KEYS`` in ``symbols``; ``run(values)`` gives the training totals
    of the whole model there, ``at_one`` those at every symbol = 1. Returns the formulas, the
    warnings and how many analyses were run."""
    points = _Points(symbols, run)
    n = len(TRAINING_KEYS)
    bad = [False] * n
    start = tuple(_FIRST + i for i in range(len(symbols)))
    degrees: list[int] = []
    try:
        for i in range(len(symbols)):
            rows: list[list[int]] = []
            degree = 0
            for m in range(max_degree + 2):
                point = tuple(v + (m if j == i else 0) for j, v in enumerate(start))
                rows.append(points.need(point))
                if m >= 1 and not any(_differences(rows)[-1]):
                    break
            else:
                last = _differences(rows)[-1]
                bad = [b or v != 0 for b, v in zip(bad, last, strict=True)]
            diffs = _differences(rows)
            for j in range(len(diffs) - 1, 0, -1):
                if any(v != 0 and not b for v, b in zip(diffs[j], bad, strict=True)):
                    degree = j
                    break
            degrees.append(min(degree, max_degree))
        coefficients, denominator, columns = _interpolate(
            points,  # type: ignore[arg-type]  # it reads need() only
            start,
            tuple(degrees),
        )
    except _NoPointError as e:
        at = ", ".join(f"{s}={v}" for s, v in zip(symbols, e.args[0], strict=True))
        return (
            dict.fromkeys(TRAINING_KEYS),
            [f"training: no formulas for the training totals: the model does not analyse at {at}"],
            len(points.seen),
        )
    formulas = [_formula(symbols, coefficients[..., columns.of[q]], denominator) for q in range(n)]
    checks = [(1,) * len(symbols)]
    if symbols:
        checks.append(_check_point(random.Random(seed), start, max_degree))
    for point in checks:
        values = dict(zip(symbols, point, strict=True))
        try:
            want = list(at_one) if all(v == 1 for v in point) else points.need(point)
        except _NoPointError:
            continue
        for q, f in enumerate(formulas):
            if f.evaluate(values) != want[q]:
                bad[q] = True
    warnings = []
    missing = [k for k, b in zip(TRAINING_KEYS, bad, strict=True) if b]
    if missing:
        warnings.append(
            f"training: no exact formula for {', '.join(missing)} (not a polynomial of degree "
            f"<= {max_degree} in {', '.join(symbols)}: the peak can move between steps)"
        )
    found: dict[str, Formula | None] = {
        k: (None if b else f) for k, f, b in zip(TRAINING_KEYS, formulas, bad, strict=True)
    }
    return found, warnings, len(points.seen)
