"""Human units for tables and messages: counts in K/M/G/T (powers of 1000), bytes in
KiB/MiB/GiB (powers of 1024), shapes as 1x3x224x224. Imports nothing of onnxcost: every layer
may say a size."""

from __future__ import annotations

from collections.abc import Sequence


def shape_text(s: Sequence[int | str | None] | None) -> str:
    """(1, 3, 224, 224) -> '1x3x224x224'; unknown rank -> '?'; scalar -> 'scalar'."""
    if s is None:
        return "?"
    if len(s) == 0:
        return "scalar"
    return "x".join("?" if d is None else str(d) for d in s)


def count(n: int | float) -> str:
    """1_814_073_344 -> '1.81 G'; 153 -> '153'."""
    v = float(n)
    for unit in ("", " K", " M", " G", " T", " P"):
        if abs(v) < 1000 or unit == " P":
            return (
                f"{int(v)}"
                if unit == ""
                else f"{v:.3g}{unit}"
                if abs(v) >= 100
                else f"{v:.2f}{unit}"
            )
        v /= 1000
    return str(n)


def nbytes(n: int | float) -> str:
    """3_001_176 -> '2.86 MiB'."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{int(v)} B" if unit == "B" else f"{v:.2f} {unit}"
        v /= 1024
    return str(n)


def percent(part: int | float, whole: int | float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "-"


shape = shape_text


def shapes(ss: Sequence[Sequence[int | str | None] | None]) -> str:
    return ", ".join(shape(s) for s in ss)
