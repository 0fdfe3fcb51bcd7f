"""``ProbeHistory``: the sliding solve's probes, in columns allocated once.

A long-running sliding solve (``cwctl watch``, the TUI) keeps the last minute or so of
probing. Grown by concatenation, its columns were reallocated every tick and reached
their full size only when the window was full: at the watch budget after 12 rounds, at
two coded pairs a round after 60, so a daemon's memory climbed for its first minutes
(docs/watch.md#memory). Here every column is allocated, and written through (so its
pages are resident from the start, not when first used), at the first update, sized for
the whole window: the rows of that update, times the updates the window holds, plus a
margin. Each update then forgets the rows older than the window by moving the kept rows
down in place and writes the new rows after them. The columns are reallocated only when
an update brings more rows than fit (more hosts than at the start); ``grown`` counts it.

``table()`` is a ``ProbeTable`` of views into the columns: valid until the next update.
"""

from __future__ import annotations

import math

import numpy as np

from cwctl.records import ProbeTable, concat_tables
from cwctl.records.table import COLUMNS, DTYPES

CHUNK_ROWS = 1 << 16  # rows moved at a time when the old ones are forgotten
SLACK = 1.25  # room beyond the window's expected rows (rounds vary: hosts come and go)


class ProbeHistory:
    """Fixed-capacity columns holding the probes of a sliding window, oldest first."""

    def __init__(self, updates: float) -> None:
        """``updates``: how many updates (scans) the window holds when full."""
        self.updates = max(1.0, updates)
        self.hosts: list[str] = []
        self.nics: list[str] = []
        self.columns: dict[str, np.ndarray] = {}
        self.rows = 0
        self.grown = 0  # reallocations after the first (an update larger than foreseen)

    @property
    def capacity(self) -> int:
        return len(self.columns["t1"]) if self.columns else 0

    @property
    def nbytes(self) -> int:
        return sum(c.nbytes for c in self.columns.values())

    def table(self) -> ProbeTable:
        """The rows held, as views (valid until the next ``append``)."""
        if not self.columns:
            return ProbeTable.empty()
        return ProbeTable(
            hosts=self.hosts,
            nics=self.nics,
            **{c: self.columns[c][: self.rows] for c in COLUMNS},
        )

    def append(self, new: ProbeTable, cutoff: int | None) -> ProbeTable:
        """Forget the rows sent before ``cutoff``, add ``new``'s (those not before it)."""
        if cutoff is not None and len(new) and int(new.t1.min()) < cutoff:
            new = new.select(new.t1 >= cutoff)
        if not self.columns:
            if not len(new):  # nothing to size the window by yet
                return new
            self._allocate(len(new), math.ceil(len(new) * self.updates * SLACK))
        self._forget(cutoff)
        if new.hosts != self.hosts or new.nics != self.nics:  # names to merge: remap
            merged = concat_tables([self.table(), new])
            self.rows = 0
            self.hosts, self.nics = merged.hosts, merged.nics
            new = merged
        end = self.rows + len(new)
        if end > self.capacity:
            self._grow(end)
        for name in COLUMNS:
            self.columns[name][self.rows : end] = getattr(new, name)
        self.rows = end
        return self.table()

    def _forget(self, cutoff: int | None) -> None:
        """Move the rows sent at or after ``cutoff`` down over the others, in their
        order, a chunk at a time (no temporary the size of the history)."""
        if cutoff is None or self.rows == 0:
            return
        keep = self.columns["t1"][: self.rows] >= cutoff
        written = 0
        for start in range(0, self.rows, CHUNK_ROWS):
            stop = min(start + CHUNK_ROWS, self.rows)
            mask = keep[start:stop]
            n = int(np.count_nonzero(mask))
            if n == stop - start and written == start:  # nothing forgotten yet: in place
                written = stop
                continue
            for name in COLUMNS:
                column = self.columns[name]
                column[written : written + n] = column[start:stop][mask]
            written += n
        self.rows = written

    def _allocate(self, first_rows: int, capacity: int) -> None:
        capacity = max(capacity, first_rows, 1)
        self.columns = {name: _resident(capacity, DTYPES[name]) for name in COLUMNS}

    def _grow(self, needed: int) -> None:
        capacity = math.ceil(needed * SLACK)
        grown = {name: _resident(capacity, DTYPES[name]) for name in COLUMNS}
        for name in COLUMNS:
            grown[name][: self.rows] = self.columns[name][: self.rows]
        self.columns = grown
        self.grown += 1


def _resident(n: int, dtype: type) -> np.ndarray:
    """A column of ``n`` zeros whose pages are all written (resident), not merely mapped."""
    column: np.ndarray = np.empty(n, dtype)
    column.fill(0)
    return column
