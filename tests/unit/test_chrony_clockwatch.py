"""What was done to a host's clock since a scan, from CLOCK_REALTIME - CLOCK_MONOTONIC_RAW
readings: a model clock (raw oscillator plus a discipline that slews or steps it) read
the way the feeder reads the real one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cwctl.probe.chronysock import sample_now
from cwctl.probe.clockwatch import ClockWatch, read_gap

S = 1_000_000_000
T0 = 1_800_000_000 * S  # realtime at raw 0


def model(rate_ppb: float, events: list[tuple[float, float, float]]):
    """realtime(raw) = T0 + raw + rate*raw + each event (start_s, length_s, amount_ns)
    spread linearly over its length (a slew; length 0: a step)."""

    def gap(raw_ns: int) -> int:
        g = rate_ppb * 1e-9 * raw_ns  # floats only after leaving out T0 (ns resolution)
        for start, length, amount in events:
            t = raw_ns / S - start
            if t >= length:
                g += amount
            elif t > 0:
                g += amount * t / length
        return T0 + round(g)

    def rate(raw_ns: int) -> float:
        """What adjtimex would say: the steady rate, plus a slew's while it lasts."""
        r = rate_ppb
        for start, length, amount in events:
            if length and 0 < raw_ns / S - start < length:
                r += amount / (length * S) * 1e9
        return r

    gap.rate_ppb = rate  # type: ignore[attr-defined]
    return gap


def watched(gap, until_s: float, every_s: float = 0.2, kernel: bool = True) -> ClockWatch:
    w = ClockWatch()
    raw = 0
    while raw <= until_s * S:
        w.add(reading(gap, raw / S, kernel))
        raw += int(every_s * S)
    return w


def reading(gap, at_s: float, kernel: bool = True) -> tuple[int, int, float | None]:
    """As read_gap: realtime, gap and (``kernel``) the rate the gap grows at, there."""
    raw = int(at_s * S)
    g = gap(raw)
    return raw + g, g, gap.rate_ppb(raw) if kernel else None  # type: ignore[attr-defined]


@given(
    rate=st.floats(-50_000, 50_000),
    amount=st.floats(-1e6, 1e6),
    length=st.sampled_from([0.0, 0.5, 3.0]),
    kernel=st.booleans(),
)
def test_what_was_steered_after_the_scan_is_found_and_nothing_else(rate, amount, length, kernel):
    # the scan ran around raw 10 s; chronyd slews (or steps) the clock from raw 14 s;
    # the kernel's rate is read (adjtimex) or, where it cannot be, the gap's slope taken
    gap = model(rate, [(14.0, length, amount)])
    w = watched(gap, 20.0, kernel=kernel)
    t_ref = reading(gap, 10.0)[0]
    steered = w.steered_ns(t_ref, reading(gap, 20.0), half_ns=0.5 * S)
    assert steered == pytest.approx(amount, abs=5.0)  # readings are whole ns
    # the steady rate (chronyd's old frequency correction) is the scan's drift: not here
    before = w.steered_ns(t_ref, reading(gap, 13.0), half_ns=0.5 * S)
    assert before == pytest.approx(0.0, abs=5.0)


def test_no_readings_back_to_the_scan_no_correction():
    gap = model(0.0, [])
    w = watched(gap, 5.0)
    w.readings = [r for r in w.readings if r[0] > T0 + 3 * S]  # the feeder began at 3 s
    assert w.steered_ns(T0 + 1 * S, reading(gap, 5.0)) is None


def test_a_clock_stepped_back_starts_the_readings_over():
    w = ClockWatch()
    w.add((T0 + 10 * S, 5, None))
    w.add((T0 + 9 * S, 7, None))
    assert w.readings == [(T0 + 9 * S, 7, None)]


def test_the_real_clock_unsteered_over_a_second_is_not_steered_much():
    w = ClockWatch()
    import time

    first = read_gap()
    assert first is not None
    for _ in range(12):
        w.add(read_gap())
        time.sleep(0.25)
    steered = w.steered_ns(first[0] + S // 4, read_gap(), 0)
    assert steered is not None and abs(steered) < 20_000  # the machine's own NTP at most


def test_a_clock_steered_ahead_is_fed_as_further_ahead():
    est = {"offset_ns": 1_000.0, "drift_ppb": 0.0, "t_ref_ns": T0}
    _, plain, _ = sample_now(est, T0 + S)
    _, steered, _ = sample_now(est, T0 + S, steered_ns=50_000.0)
    assert plain == pytest.approx(-1e-6) and steered == pytest.approx(-51e-6)
