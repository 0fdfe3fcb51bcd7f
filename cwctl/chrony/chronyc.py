"""Asking a host's chronyd what it thinks: ``chronyc -c`` commands and their CSV.

Every command is an argument list (the transport quotes it for SSH with ``shlex.join``).
``-c`` prints comma-separated values, ``-n`` keeps addresses numeric (no DNS from
cwctl's checks). The fields, in chronyc 4.x order:

* ``tracking``: reference ID (hex), reference name, stratum, reference time, system
  time (s; positive = the system clock is *slow* of NTP time), last offset, RMS offset,
  frequency (ppm), residual frequency, skew, root delay, root dispersion, update
  interval, leap status.
* ``sources``: mode (``#`` refclock, ``^`` server, ``=`` peer), state (``*`` selected,
  ``+`` combined, ``-`` not combined, ``?`` unreachable, ``x`` falseticker, ``~`` too
  variable), name, stratum, poll, reach (octal digits), seconds since the last sample,
  last sample's adjusted offset, its measured offset, its error (s). An offset here is
  the local clock minus the source (positive: the host is ahead), the sign of cwctl's
  ``offset_ns``.
* ``sourcestats``: name, samples, runs, span (s), frequency (ppm), frequency skew,
  offset (s), standard deviation (s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

REFID = "CWC"  # the refclock's reference ID cwctl asks the operator to configure
NEVER = 4294967295  # chronyc's "no sample yet" for lastRx
STATES = {
    "*": "selected",
    "+": "combined",
    "-": "not combined",
    "?": "unreachable",
    "x": "falseticker",
    "~": "too variable",
}


def chronyc_argv(command: str, socket: str | None = None) -> list[str]:
    """``chronyc [-h SOCKET] -c -n COMMAND`` (SOCKET: chronyd's command socket)."""
    head = ["chronyc"] + (["-h", socket] if socket else [])
    return [*head, "-c", "-n", command]


def refclock_line(socket: str, poll: int, filter_len: int = 8) -> str:
    """The chrony.conf line that makes chronyd read cwctl's samples at ``socket``."""
    return f"refclock SOCK {socket} refid {REFID} poll {poll} filter {filter_len}"


def poll_for(period_s: float, per_poll: int = 8) -> int:
    """The refclock ``poll`` (a power of two, seconds) that gathers ``per_poll`` samples
    sent every ``period_s``: chronyd's median filter wants at least 4 between polls."""
    return max(-6, min(10, math.ceil(math.log2(per_poll * period_s) - 1e-9)))


@dataclass(frozen=True)
class Tracking:
    refid: str
    ref_name: str
    stratum: int
    system_time_s: float  # positive: the system clock is slow of true time
    last_offset_s: float
    frequency_ppm: float
    root_delay_s: float
    root_dispersion_s: float
    leap: str

    @property
    def synchronised(self) -> bool:
        return self.leap != "Not synchronised" and 0 < self.stratum < 16

    @property
    def root_distance_s(self) -> float:
        """How far off true time this host may be: half the delay plus the dispersion."""
        return self.root_delay_s / 2 + self.root_dispersion_s


@dataclass(frozen=True)
class ChronySource:
    mode: str
    state: str
    name: str
    stratum: int
    poll: int
    reach: int  # the 8-bit register, as chronyc's octal digits read
    last_rx_s: int | None
    offset_s: float  # adjusted for the corrections chronyd made since
    measured_offset_s: float
    error_s: float

    @property
    def state_word(self) -> str:
        return STATES.get(self.state, self.state)


@dataclass(frozen=True)
class SourceStats:
    name: str
    samples: int
    runs: int
    span_s: float
    frequency_ppm: float
    skew_ppm: float
    offset_s: float
    std_dev_s: float


class ChronycError(ValueError):
    """Output chronyc should not have given; the message names the line."""


def _fields(text: str, n: int, what: str) -> list[list[str]]:
    rows = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        parts = raw.strip().split(",")
        if len(parts) < n:
            raise ChronycError(f"chronyc {what}: {len(parts)} fields, want {n}: {raw[:80]!r}")
        rows.append(parts)
    return rows


def parse_tracking(text: str) -> Tracking:
    rows = _fields(text, 14, "tracking")
    if len(rows) != 1:
        raise ChronycError(f"chronyc tracking: {len(rows)} lines, want 1")
    f = rows[0]
    try:
        return Tracking(
            refid=f[0],
            ref_name=f[1],
            stratum=int(f[2]),
            system_time_s=float(f[4]),
            last_offset_s=float(f[5]),
            frequency_ppm=float(f[7]),
            root_delay_s=float(f[10]),
            root_dispersion_s=float(f[11]),
            leap=f[13],
        )
    except ValueError as exc:
        raise ChronycError(f"chronyc tracking: {exc}") from None


def parse_sources(text: str) -> list[ChronySource]:
    out = []
    for f in _fields(text, 10, "sources"):
        try:
            last_rx = int(f[6])
            out.append(
                ChronySource(
                    mode=f[0],
                    state=f[1],
                    name=f[2],
                    stratum=int(f[3]),
                    poll=int(f[4]),
                    reach=int(f[5], 8),
                    last_rx_s=None if last_rx == NEVER else last_rx,
                    offset_s=float(f[7]),
                    measured_offset_s=float(f[8]),
                    error_s=float(f[9]),
                )
            )
        except ValueError as exc:
            raise ChronycError(f"chronyc sources: {exc}: {','.join(f)[:80]!r}") from None
    return out


def parse_sourcestats(text: str) -> list[SourceStats]:
    out = []
    for f in _fields(text, 8, "sourcestats"):
        try:
            out.append(
                SourceStats(
                    name=f[0],
                    samples=int(f[1]),
                    runs=int(f[2]),
                    span_s=float(f[3]),
                    frequency_ppm=float(f[4]),
                    skew_ppm=float(f[5]),
                    offset_s=float(f[6]),
                    std_dev_s=float(f[7]),
                )
            )
        except ValueError as exc:
            raise ChronycError(f"chronyc sourcestats: {exc}: {','.join(f)[:80]!r}") from None
    return out
