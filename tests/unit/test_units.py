"""The one duration formatter: three significant figures, the right unit, never "-0"."""

from __future__ import annotations

import math
import re

from hypothesis import given
from hypothesis import strategies as st

from cwctl.units import fmt_ns, fmt_ppb, fmt_ratio

_SCALE = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
_SHAPE = re.compile(r"^([+-]?)(\d+(?:\.\d+)?) (ns|us|ms|s)$")


def _parse(text: str) -> tuple[str, float, str, str]:
    m = _SHAPE.match(text)
    assert m, text
    return m.group(1), float(m.group(2)), m.group(2), m.group(3)


def test_the_rough_edges_of_the_old_formatter() -> None:
    assert fmt_ns(1000) == "1.00 us"  # was "1000 ns"
    assert fmt_ns(999.6) == "1.00 us"  # rounding never gives "1000 ns"
    assert fmt_ns(999_999) == "1.00 ms"
    assert fmt_ns(-0.2e-3) == "0 ns" and fmt_ns(-0.0) == "0 ns"  # never "-0 ns"
    assert fmt_ns(0, signed=True) == "0 ns"
    assert fmt_ns(12.345) == "12.3 ns" and fmt_ns(0.2) == "0.20 ns" and fmt_ns(1) == "1.00 ns"
    assert fmt_ns(1234) == "1.23 us" and fmt_ns(123_456) == "123 us"
    assert fmt_ns(-1.5e6) == "-1.50 ms" and fmt_ns(1.5e6, signed=True) == "+1.50 ms"
    assert fmt_ns(2.5e9) == "2.50 s"
    assert fmt_ns(None) == fmt_ns(math.nan) == fmt_ns(math.inf) == "-"
    assert fmt_ppb(-0.3) == "0 ppb" and fmt_ppb(-12) == "-12 ppb" and fmt_ppb(999.7) == "+1.00 ppm"
    assert fmt_ratio(0.0025) == "0.25%"


@given(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False), st.booleans())
def test_three_significant_figures_in_the_largest_unit(x: float, signed: bool) -> None:
    text = fmt_ns(x, signed=signed)
    sign, value, digits, unit = _parse(text)
    if value == 0:
        assert text == "0 ns"  # zero has no sign
        assert abs(x) <= 0.005  # below the finest step shown (0.01 ns)
        return
    assert sign == ("-" if x < 0 else "+" if signed else "")
    shown = value * _SCALE[unit]
    if abs(x) < 1:  # below a nanosecond: hundredths of a ns at most
        assert abs(shown - abs(x)) <= 0.005 + 1e-12
        return
    assert math.isclose(shown, abs(x), rel_tol=5.01e-3)  # 3 significant figures
    if unit != "ns":
        assert value >= 1.0  # the largest unit that keeps the number >= 1
    if unit != "s":
        assert value < 1000
    if not (unit == "s" and value >= 1000):
        assert len(digits.replace(".", "").lstrip("0")) == 3  # trailing zeros kept: "1.00"
