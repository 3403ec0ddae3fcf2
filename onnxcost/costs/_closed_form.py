"""Sums over a model's dims in closed form: a formula never loops once per window tap,
channel or direction, since a hostile model may claim 2**40 of them.

``floor_sum(n, m, a, b)`` is the classic sum of floor((a i + b) / m) over i < n, computed
by the Euclid-like reduction (as in the AtCoder Library), in O(log m) steps.
"""

from __future__ import annotations


def floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum over i in [0, n) of floor((a i + b) / m), for m > 0 and any integers a, b."""
    if n <= 0:
        return 0
    total = 0
    # Each step peels off the whole part of a / m and b / m, then counts the lattice points
    # under the remaining line with the axes swapped.
    while True:
        if not 0 <= a < m:
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if not 0 <= b < m:
            total += n * (b // m)
            b %= m
        y_max = a * n + b
        if y_max < m:
            return total
        n, b = divmod(y_max, m)
        m, a = a, m


def clamped_floor_sum(n: int, m: int, a: int, b: int, lo: int, hi: int) -> int:
    """sum over i in [0, n) of min(hi, max(lo, floor((a i + b) / m))), for m > 0 and lo <= hi.

    floor((a i + b) / m) is monotone in i, so the clamps bite on a prefix and a suffix
    whose ends are found by division; the middle is a ``floor_sum``.
    """
    if n <= 0:
        return 0
    if a < 0:  # walk i backwards: a (n - 1 - i) + b... is non-decreasing
        a, b = -a, a * (n - 1) + b
    if a == 0:
        return n * min(hi, max(lo, b // m))
    # First i whose value reaches lo, and first whose value passes hi (ceil by -(-x // a)).
    i_lo = min(n, max(0, -((b - lo * m) // a)))
    i_hi = min(n, max(i_lo, -((b - (hi + 1) * m) // a)))
    middle = floor_sum(i_hi - i_lo, m, a, a * i_lo + b)
    return lo * i_lo + middle + hi * (n - i_hi)
