"""A busy host is not the network: what each agent cost, and when it was starved.

Every agent reports in its summary (``cost``, ``cwctl/probe/cost.py``) its CPU time, the
bytes it put on the wire and the spans, in its own clock, when it ran later than it
planned by more than 50 ms (not scheduled: a busy or CPU-limited host, a stopped
process). An exchange that touches such a host during such a span (plus a margin: a
reply held back at the start of a stall is lost at the prober's timeout) says nothing
about the network: it is left out of localisation, and the host is reported busy.

``agent_reports(collection)`` gives each host's ``agent`` object for the JSON;
``busy_mask(...)`` marks rows (or one-way observations) that touch a starved span.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import B
from cwctl.scan.collection import Collection

TRACE_COUNTS = ("flows", "paths", "sent", "answers")  # a summary's "trace" (probe/trace.py)
SPAN_MARGIN_NS = 600_000_000  # the agents' probe timeout (0.5 s) and some slack


def _cost(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary's ``cost`` object ({} where it is missing or not an object: a summary is
    an agent's word, or a record file's)."""
    cost = summary.get("cost")
    return cost if isinstance(cost, dict) else {}


def _number(value: Any) -> float | None:
    """A finite number as a float, else None (a field of the wrong type reads as unknown)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _counts(value: Any, keys: tuple[str, ...] | None = None) -> dict[str, int]:
    """A summary's counts by name: string keys (``keys`` only, when given; at most 40
    printable characters) with integer values in int64, not negative; anything else left
    out (a summary is an agent's word: a compromised host can say anything)."""
    if not isinstance(value, dict):
        return {}
    return {
        k: v
        for k, v in value.items()
        if isinstance(k, str) and (keys is None or k in keys) and 0 < len(k) <= 40
        and k.isprintable() and isinstance(v, int) and not isinstance(v, bool)
        and 0 <= v < 2**63
    }  # fmt: skip


def starved_spans(collection: Collection) -> dict[str, list[tuple[int, int]]]:
    """Per host, its agent's starved spans (its own clock, ns since the epoch)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for host, summary in collection.summaries.items():
        spans = _cost(summary).get("starved")
        spans = spans if isinstance(spans, list) else []
        clean = [
            (int(a), int(b))
            for a, b in (s for s in spans if isinstance(s, list) and len(s) == 2)
            if isinstance(a, int) and isinstance(b, int) and b >= a
        ]
        if clean:
            out[host] = clean
    return out


def busy_mask(
    hosts: list[str],
    src: npt.NDArray[np.integer[Any]],
    dst: npt.NDArray[np.integer[Any]],
    t_ns: npt.NDArray[np.int64],
    spans: dict[str, list[tuple[int, int]]],
    offset_ns: npt.NDArray[np.float64] | None = None,
    margin_ns: int = SPAN_MARGIN_NS,
    counts: dict[str, int] | None = None,
) -> B:
    """Rows whose ``src`` or ``dst`` host was starved at ``t_ns`` (``src``'s clock).

    ``offset_ns`` (per host, clock minus the reference's; NaN unknown) moves ``t_ns``
    into the far host's clock; unknown offsets count as zero (clocks far apart are a
    sync problem the report shows anyway). ``counts`` gets, per starved host, how many
    rows it spoiled."""
    out = np.zeros(len(t_ns), bool)
    if not spans or len(t_ns) == 0:
        return out
    index = {name: i for i, name in enumerate(hosts)}
    off = np.zeros(len(hosts)) if offset_ns is None else np.nan_to_num(offset_ns[: len(hosts)])
    for name, host_spans in spans.items():
        h = index.get(name)
        if h is None:
            continue
        for end, sign in ((src, 0.0), (dst, 1.0)):
            rows = np.flatnonzero(end == h)
            if len(rows) == 0:
                continue
            # into h's clock: t + (offset_h - offset_src) for the far end, as is for its own
            shift = sign * (off[h] - off[src[rows]])
            t = t_ns[rows].astype(np.float64) + shift
            hit = np.zeros(len(rows), bool)
            for a, b in host_spans:
                hit |= (t >= a - margin_ns) & (t <= b + margin_ns)
            out[rows[hit]] = True
            if counts is not None:
                counts[name] = counts.get(name, 0) + int(hit.sum())
    return out


def agent_reports(collection: Collection, busy_rows: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Each host's ``agent`` object: what its agent cost, and whether it was busy."""
    out: dict[str, dict[str, Any]] = {}
    for host, summary in collection.summaries.items():
        if not isinstance(summary.get("cost"), dict):
            continue
        cost = {k: _number(v) for k, v in summary["cost"].items() if k != "starved"}
        wall = cost.get("probe_wall_s") or 0.0
        spans = starved_spans(collection).get(host, [])
        report: dict[str, Any] = {
            "cpu_s": cost.get("cpu_s"),
            "probe_cpu_s": cost.get("probe_cpu_s"),
            "cpu_share": _per_wall(cost.get("probe_cpu_s"), 1.0, 6, wall),
            "tx_kbit_s": _per_wall(cost.get("tx_bytes"), 0.008, 3, wall),
            "rx_kbit_s": _per_wall(cost.get("rx_bytes"), 0.008, 3, wall),
            "tx_packets": _int(cost.get("tx_packets")),
            "rx_packets": _int(cost.get("rx_packets")),
            "late_max_ns": _int(cost.get("late_max_ns")),
            "starved_s": round(sum(b - a for a, b in spans) / 1e9, 6),
            "busy": busy_rows.get(host, 0) > 0,
            "busy_exchanges": busy_rows.get(host, 0),
        }
        if isinstance(summary.get("dropped"), dict):  # datagrams refused (probe/auth.py)
            report["dropped"] = _counts(summary["dropped"])
        if isinstance(summary.get("trace"), dict):  # path discovery (probe/trace.py)
            report["trace"] = _counts(summary["trace"], TRACE_COUNTS)
        out[host] = report
    return out


def _per_wall(value: float | None, scale: float, digits: int, wall: float) -> float | None:
    return round((value or 0.0) * scale / wall, digits) if wall else None


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)
