"""How much a host's clock was steered since an instant: for the chrony feeder.

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).

Why: an estimate (offset at ``t_ref``, drift) describes the host's clock as it ran
during the scan. Once chronyd acts on the samples it slews or steps that clock, and an
estimate carried along the old drift no longer matches it: fed unchanged, chronyd would
correct the same error again on every poll until the next scan, and overshoot. So the
feeder adds what was done to the clock since ``t_ref``, beyond the rate it ran at then.

How: ``gap = CLOCK_REALTIME - CLOCK_MONOTONIC_RAW`` grows at the rate the kernel's
discipline (frequency, slews) adds to the free-running oscillator, and jumps with a
step. If the gap grew at ``rate`` (per oscillator ns) around ``t_ref``, what the clock
was steered beyond that since is ``gap(now) - gap(t_ref) - rate * (raw(now) -
raw(t_ref))``; the scan's drift already holds ``rate``. The rate is the kernel's own
(``adjtimex``: ``tick`` and ``freq``, the way chronyd slews on Linux), exact; where that
cannot be read, the gap's slope over the readings around ``t_ref`` (noisier: two clock
reads each). ``ClockWatch`` keeps one reading per feeder tick to answer for any ``t_ref`` it
has seen (the first scan's, before the feeder started, it has not: no correction then,
and no feedback yet either).
"""

import ctypes
import ctypes.util
import os
import time

RAW = getattr(time, "CLOCK_MONOTONIC_RAW", None)
KEEP = 2048  # readings kept (about half an hour at one a second)
RATE_SPAN_NS = 10_000_000_000  # a slope of the gap is taken over at least this span


class _Timeval(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("usec", ctypes.c_long)]


class _Timex(ctypes.Structure):
    """Linux's struct timex (adjtimex(2))."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time", _Timeval),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_reserved", ctypes.c_int * 11),
    ]


_LIBC = []  # type: list[ctypes.CDLL]


def kernel_rate_ppb():
    """How much faster than its oscillator the kernel runs the clock now (tick and freq,
    ppb), read with ``adjtimex`` (modes 0: reads only); None where it cannot be read."""
    try:
        if not _LIBC:
            _LIBC.append(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"))
        tx = _Timex()
        tx.modes = 0
        if _LIBC[0].adjtimex(ctypes.byref(tx)) < 0:
            return None
        nominal_tick = 1_000_000 / os.sysconf("SC_CLK_TCK")  # microseconds per tick
        return (tx.tick - nominal_tick) / nominal_tick * 1e9 + tx.freq * 1000.0 / 65536
    except (OSError, AttributeError, ValueError):
        return None


def read_gap():
    """(realtime_ns, gap_ns, kernel rate ppb or None): the tightest of five paired
    readings (a reading preempted between its two halves is off by up to half its
    spread); None without CLOCK_MONOTONIC_RAW."""
    if RAW is None:
        return None
    best = None
    for _ in range(5):
        r1 = time.time_ns()
        m = time.clock_gettime_ns(RAW)
        r2 = time.time_ns()
        if best is None or r2 - r1 < best[0]:
            best = (r2 - r1, r1 + (r2 - r1) // 2, m)
    _, r, m = best
    return r, r - m, kernel_rate_ppb()


class ClockWatch:
    """``(realtime_ns, gap_ns, kernel_rate_ppb)`` readings in time order, and what they
    say."""

    def __init__(self, keep=KEEP):
        self.readings = []
        self.keep = keep

    def add(self, reading):
        if reading is None:
            return
        if self.readings and reading[0] <= self.readings[-1][0]:
            self.readings = []  # the clock went back (a step): start over from here
        self.readings.append(reading)
        if len(self.readings) > self.keep:
            del self.readings[: len(self.readings) - self.keep]

    def gap_at(self, t_ns):
        """The gap at realtime ``t_ns`` (linear between readings, integer ns), None
        outside them."""
        rs = self.readings
        if not rs or t_ns < rs[0][0] or t_ns > rs[-1][0]:
            return None
        for i in range(1, len(rs)):  # (no itertools.pairwise: Python 3.8 hosts)
            (t0, g0), (t1, g1) = rs[i - 1][:2], rs[i][:2]
            if t0 <= t_ns <= t1:  # integers: a gap is ~1.8e18 ns, past a double's ns
                return g0 + (g1 - g0) * (int(t_ns) - t0) // (t1 - t0) if t1 > t0 else g0
        return rs[-1][1]

    def _near(self, t_ns, half_ns):
        """The readings around realtime ``t_ns``: within ``half_ns`` of it, or 1 s."""
        return [r for r in self.readings if abs(r[0] - t_ns) <= max(int(half_ns), 1e9)]

    def rate_at(self, t_ns, half_ns):
        """The gap's rate (ns per oscillator ns) over ``t_ns +- half_ns``: the kernel's rate read
        there (their mean), else the least-squares slope of the gap from ``RATE_SPAN_NS``
        before ``t_ns`` to the end of the scan. None if the readings do not reach."""
        rates = [r[2] for r in self._near(t_ns, half_ns) if r[2] is not None]
        if rates:
            return sum(rates) / len(rates) * 1e-9
        # up to the end of the scan, never after it: that is where the steering begins
        start, end = t_ns - RATE_SPAN_NS, t_ns + int(half_ns)
        inside = [r for r in self.readings if start <= r[0] <= end]
        if len(inside) < 3 or inside[-1][0] - inside[0][0] < RATE_SPAN_NS // 2:
            return None
        t0, g0 = inside[0][0], inside[0][1]
        xs = [(r[0] - r[1]) - (t0 - g0) for r in inside]  # oscillator time
        ys = [r[1] - g0 for r in inside]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))  # noqa: B905 (3.8: no strict)
        return sxy / sxx if sxx else None

    def steered_ns(self, t_ref_ns, now, half_ns=0):
        """What was done to the clock between ``t_ref_ns`` and ``now`` (a reading, as
        ``read_gap`` gives) beyond the rate it ran at around ``t_ref_ns``; None when the
        readings do not reach back that far."""
        base = self.gap_at(t_ref_ns)
        rate = self.rate_at(t_ref_ns, half_ns)
        if base is None or rate is None or now is None:
            return None
        # one reading can be tens of ns off (preempted between its two clock reads): the
        # base is the median of the readings around t_ref, each carried to t_ref at rate
        raw_ref = int(t_ref_ns) - base
        near = self._near(t_ref_ns, half_ns)
        if near:  # (differences from base first: a gap is ~1.8e18 ns, past a double's ns)
            carried = sorted((r[1] - base) - rate * ((r[0] - r[1]) - raw_ref) for r in near)
            base += round(carried[len(carried) // 2])
            raw_ref = int(t_ref_ns) - base
        t_now, gap_now = now[0], now[1]
        raw_elapsed = (t_now - gap_now) - raw_ref  # the oscillator's time since t_ref
        return (gap_now - base) - rate * raw_elapsed
