"""Human-readable numbers for every report (table, TUI, PNG, Prometheus help text).

One formatter per quantity, so "1.00 us" reads the same everywhere: durations in ns, us,
ms or s with three significant figures, never "-0"; drift in ppb or ppm; ratios in %.
Plain ASCII ("us", not the micro sign): the PNG's bitmap font, Prometheus help text and
any terminal show it alike.
"""

from __future__ import annotations

import math
import re

_UNITS = ((1e9, "s"), (1e6, "ms"), (1e3, "us"), (1.0, "ns"))


def _missing(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def _places(a: float) -> int:
    """Decimal places of three significant figures (negative: tens, hundreds, ...),
    never finer than hundredths."""
    return min(2, 2 - math.floor(math.log10(a))) if a else 0


def _sig3(a: float) -> str:
    """A non-negative number with three significant figures, trailing zeros kept."""
    return f"{a:.{max(0, _places(a))}f}"


def _round_sig3(a: float) -> float:
    return round(a, _places(a))


def fmt_ns(x: float | None, *, signed: bool = False) -> str:
    """A duration given in nanoseconds: ``999 ns``, ``1.00 us``, ``12.3 ms``, ``2.50 s``.

    Three significant figures in the largest unit that keeps the number at 1 or more
    (rounding first, so 999.7 ns is ``1.00 us``), never finer than 0.01 ns; seconds
    above 1000 show no decimals (``1230 s``).
    Zero and anything that rounds to it is ``0 ns``, never ``-0 ns``; ``signed`` puts a
    ``+`` on positive values. ``-`` when unknown (None, NaN, infinite).
    """
    if _missing(x):
        return "-"
    assert x is not None
    a = _round_sig3(abs(float(x)))
    if a == 0:
        return "0 ns"
    sign = "-" if x < 0 else ("+" if signed else "")
    for scale, unit in _UNITS:
        if a >= scale or unit == "ns":
            v = _round_sig3(a / scale)
            body = f"{v:.0f}" if unit == "s" and v >= 1000 else _sig3(v)
            return f"{sign}{body} {unit}"
    raise AssertionError("unreachable")


def fmt_ppb(x: float | None) -> str:
    """Clock drift: ``+12 ppb`` below a ppm, ``-3.40 ppm`` above; ``0 ppb``, never ``-0``."""
    if _missing(x):
        return "-"
    assert x is not None
    if round(x) == 0:
        return "0 ppb"
    if abs(x) < 999.5:
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


_PARSE_UNITS = {
    "ns": 1.0,
    "us": 1e3,
    "µs": 1e3,
    "ms": 1e6,
    "s": 1e9,
    "m": 60e9,
    "h": 3600e9,
}
DURATION_EXAMPLES = "500ms, 5s, 2m, 100us or a bare number of seconds"
_DURATION = re.compile(r"\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([a-zµ]*)\s*")


def parse_ns(text: str) -> float:
    """A duration in nanoseconds: the one grammar of every duration flag (``--duration``,
    ``--interval``, ``--heatmap-max``, ``--max-offset``, ...). A number with a unit
    (``ns``, ``us``, ``ms``, ``s``, ``m``, ``h``: ``500ms``, ``1.5 ms``, ``2m``) or a bare
    number of seconds (``5``); not negative, finite. ValueError, with one wording, if not."""
    match = _DURATION.fullmatch(text.lower())
    unit = match.group(2) if match else ""
    if match is None or (unit and unit not in _PARSE_UNITS):
        raise ValueError(f"{text!r} is not a duration: give {DURATION_EXAMPLES}")
    value = float(match.group(1)) * _PARSE_UNITS[unit or "s"]
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a duration: give {DURATION_EXAMPLES}")
    return value


def parse_seconds(text: str) -> float:
    """``parse_ns`` in seconds: ``"500ms"`` is 0.5, ``"2"`` is 2.0."""
    return parse_ns(text) / 1e9


def fmt_duration(seconds: float) -> str:
    """A duration as the flags write it, shortest first: ``2s``, ``500ms``, ``100us``, ``2m``."""
    ns = seconds * 1e9
    for unit in ("h", "m", "s", "ms", "us", "ns"):
        scaled = ns / _PARSE_UNITS[unit]
        if scaled >= 1 and (unit in ("ns",) or round(scaled, 3) == scaled):
            return f"{scaled:g}{unit}"
    return f"{ns:g}ns"
