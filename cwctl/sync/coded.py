"""The coded-probe filter: drop probe pairs whose spacing was disturbed in flight.

Each coded pair is two probes sent ``gap_ns`` apart. If neither met a queue (nor a
late interrupt, nor a slow timestamp), they arrive as far apart as they left; a pair
that arrives with a different spacing carries at least one delayed probe, and since we
cannot tell which, both are dropped (Huygens, NSDI'18, section 4.1).

The two legs of an exchange are judged separately: the forward leg by
``(t2[1]-t2[0]) - (t1[1]-t1[0])``, the reply leg by ``(t4[1]-t4[0]) - (t3[1]-t3[0])``.
A leg that fails loses its points for both probes; the other leg keeps them.

The tolerance adapts to the timestamp source: ``K`` robust standard deviations
(1.4826 × the median absolute deviation) of the table's own spacing errors, never less
than a floor per source (a NIC's stamps are good to nanoseconds, a kernel's to a
microsecond or so). Rows of a pair whose partner is missing cannot be checked and are
dropped, unless the table has no coded pairs at all (then nothing is filtered).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from cwctl.records import TS_SOURCES, ProbeTable
from cwctl.runtime.arrays import I64
from cwctl.sync.robust import MAD_TO_SIGMA

# Floors of the spacing tolerance per timestamp source (index = TS_CODE), in ns.
TOLERANCE_FLOOR_NS: Final = (20.0, 500.0, 2_000.0)
ROBUST_K: Final = 3.0

Mask = npt.NDArray[np.bool_]


@dataclass
class CodedFilter:
    """Which legs survived: ``fwd_ok``/``rev_ok`` per row of the table, and why not."""

    fwd_ok: Mask
    rev_ok: Mask
    tolerance_ns: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def quality(self) -> dict[str, Any]:
        return {"filter_tolerance_ns": dict(self.tolerance_ns), **self.counts}


def _matches(table: ProbeTable, a: npt.NDArray[np.intp], b: npt.NDArray[np.intp]) -> Mask:
    """Rows ``a`` and ``b`` are probes 0 and 1 of the same coded pair."""
    return (
        (table.idx[a] == 0)
        & (table.idx[b] == 1)
        & (table.pair[a] == table.pair[b])
        & (table.src[a] == table.src[b])
        & (table.dst[a] == table.dst[b])
        & (table.sport[a] == table.sport[b])
    )


def _pair_starts(table: ProbeTable) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Row indices (first, second) of every coded pair of the table.

    Agents and the simulator write the two probes of a pair next to each other, so
    adjacent rows are matched first (no sort); only the rows left over are sorted.
    """
    n = len(table)
    if n < 2:
        empty = np.zeros(0, np.intp)
        return empty, empty
    rows = np.arange(n - 1)
    adjacent = _matches(table, rows, rows + 1)
    first = rows[adjacent]
    taken = np.zeros(n, np.bool_)
    taken[first] = True
    taken[first + 1] = True
    rest = np.flatnonzero(~taken)
    if len(rest) < 2:
        return first, first + 1
    order = rest[
        np.lexsort(
            (
                table.idx[rest],
                table.pair[rest],
                table.sport[rest],
                table.dst[rest],
                table.src[rest],
            )
        )
    ]
    a, b = order[:-1], order[1:]
    same = _matches(table, a, b)
    return np.concatenate([first, a[same]]), np.concatenate([first + 1, b[same]])


def complete_pairs(
    table: ProbeTable, complete: Mask | None = None
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Row indices (probe 0, probe 1) of every coded pair whose two exchanges both
    completed (four timestamps each; ``complete``: ``table.complete`` if known)."""
    if complete is None:
        complete = table.complete
    first, second = _pair_starts(table)
    both = complete[first] & complete[second]
    return first[both], second[both]


def send_spacing_ns(table: ProbeTable) -> I64:
    """How far apart the two probes of each complete coded pair left their sender
    (probe 1's t1 minus probe 0's): the gap, plus the sender's pacing error."""
    first, second = complete_pairs(table)
    return table.t1[second] - table.t1[first]


def coded_filter(
    table: ProbeTable,
    *,
    robust_k: float = ROBUST_K,
    floors_ns: tuple[float, ...] = TOLERANCE_FLOOR_NS,
) -> CodedFilter:
    """Judge every coded pair of ``table``; see the module docstring."""
    n = len(table)
    complete = table.complete
    first, second = complete_pairs(table, complete)
    counts = {
        "rows": n,
        "rows_complete": int(complete.sum()),
        "coded_pairs": len(first),
    }
    if len(first) == 0:
        # uncoded probing (or nothing usable): keep every complete row, unchecked
        counts.update(fwd_dropped_pairs=0, rev_dropped_pairs=0, unpaired_rows=0)
        return CodedFilter(complete.copy(), complete.copy(), {}, counts)

    t1, t2, t3, t4 = table.t1, table.t2, table.t3, table.t4
    fwd_err = ((t2[second] - t2[first]) - (t1[second] - t1[first])).astype(np.float64)
    rev_err = ((t4[second] - t4[first]) - (t3[second] - t3[first])).astype(np.float64)
    source = np.maximum(table.ts[first], table.ts[second])
    tol = np.zeros(len(first))
    tolerance_ns: dict[str, float] = {}
    for code in np.unique(source):
        sel = source == code
        errs = np.concatenate([fwd_err[sel], rev_err[sel]])
        centre = float(np.median(errs))
        sigma = MAD_TO_SIGMA * float(np.median(np.abs(errs - centre)))
        floor = floors_ns[min(int(code), len(floors_ns) - 1)]
        value = max(floor, robust_k * sigma)
        tol[sel] = value
        tolerance_ns[TS_SOURCES[int(code)]] = round(value, 1)
    fwd_pair_ok = np.abs(fwd_err) <= tol
    rev_pair_ok = np.abs(rev_err) <= tol

    fwd_ok = np.zeros(n, np.bool_)
    rev_ok = np.zeros(n, np.bool_)
    for rows in (first, second):
        fwd_ok[rows] = fwd_pair_ok
        rev_ok[rows] = rev_pair_ok
    counts.update(
        fwd_dropped_pairs=int((~fwd_pair_ok).sum()),
        rev_dropped_pairs=int((~rev_pair_ok).sum()),
        unpaired_rows=int(complete.sum()) - 2 * len(first),
    )
    return CodedFilter(fwd_ok, rev_ok, tolerance_ns, counts)
