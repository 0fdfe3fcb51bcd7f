"""Human-readable numbers for the reports: nanoseconds, ppb and ratios with their units."""

from __future__ import annotations

import math


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def fmt_ns(x: float | None, *, signed: bool = False) -> str:
    """``12 ns``, ``3.4 µs``, ``1.23 ms``, ``2.0 s``; ``-`` when unknown."""
    if _missing(x):
        return "-"
    assert x is not None
    sign = ("+" if x > 0 else "-" if x < 0 else " ") if signed else ("-" if x < 0 else "")
    a = abs(x)
    if a < 1_000:
        body = f"{a:.0f} ns"
    elif a < 1_000_000:
        body = f"{a / 1e3:.1f} µs" if a < 100_000 else f"{a / 1e3:.0f} µs"
    elif a < 1_000_000_000:
        body = f"{a / 1e6:.2f} ms" if a < 100_000_000 else f"{a / 1e6:.0f} ms"
    else:
        body = f"{a / 1e9:.2f} s"
    return sign + body


def fmt_ppb(x: float | None) -> str:
    """Clock drift: ``+12 ppb`` below a ppm, ``-3.40 ppm`` above."""
    if _missing(x):
        return "-"
    assert x is not None
    if abs(x) < 1_000:
        return f"{x:+.0f} ppb"
    return f"{x / 1e3:+.2f} ppm"


def fmt_ratio(x: float | None) -> str:
    """A share as a percentage: ``0%``, ``0.25%``, ``12%``, ``100%``."""
    if _missing(x):
        return "-"
    assert x is not None
    pct = 100 * x
    if pct == 0:
        return "0%"
    if pct < 1:
        return f"{pct:.2f}%"
    if pct < 10:
        return f"{pct:.1f}%"
    return f"{pct:.0f}%"
