"""Records that cannot be right, found before anything is solved from them.

A scan's probe rows come from agents, the simulator or a record file; a file can be
edited, duplicated or forged, and an agent whose clock stepped can report time running
backwards. Four checks, each of which makes a scan not healthy (exit 3) and is said in
the report (``consistency``), with the rows it left out of the analysis:

- ``unknown_hosts``: rows naming a host the scan does not list (left out);
- ``time_backwards``: an answered exchange whose ``t4`` is before its ``t1`` (one clock,
  the prober's) or whose ``t3`` is before its ``t2`` (the answerer's) (left out);
- ``duplicate_rows``: a row twice (the same sender, receiver, pair, index and ``t1``);
  one copy kept (record files only: it costs a sort, and live rows never repeat);
- ``no_data``: a reachable host that should have probed or been probed (the peer
  assignment says so) and has no row at all.

A file that lists no host at all is refused before this (``cwctl.records.header``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cwctl.records.bounds import printable
from cwctl.scan.collection import Collection

SHOWN = 3  # host names a problem's text names before "+N more"


@dataclass(frozen=True)
class Inconsistency:
    check: str  # unknown_hosts | time_backwards | duplicate_rows | no_data
    rows: int  # probe rows left out of the analysis for it
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "rows_left_out": self.rows, "detail": self.detail}


def _names(names: list[str]) -> str:
    more = f" (+{len(names) - SHOWN} more)" if len(names) > SHOWN else ""
    return ", ".join(printable(n, 60) for n in names[:SHOWN]) + more


def _duplicates(table: Any) -> np.ndarray:
    """Rows that repeat an earlier row (sender, receiver, pair, index, t1)."""
    dup = np.zeros(len(table), bool)
    if len(table) < 2:
        return dup
    # a repeat shares its t1 (a stamp in nanoseconds): only the rows whose t1 another row
    # has are sorted by every key, in row order (a 10 000-host file: a few of 4 M rows)
    by_t1 = np.argsort(table.t1)
    t1 = table.t1[by_t1]
    shared = np.zeros(len(t1), bool)
    shared[1:] = t1[1:] == t1[:-1]
    shared[:-1] |= shared[1:]
    rows = np.sort(by_t1[shared])
    del by_t1, t1, shared
    if len(rows) < 2:
        return dup
    cols = np.stack(
        [table.src[rows].astype(np.int64), table.dst[rows].astype(np.int64), table.pair[rows],
         table.idx[rows].astype(np.int64), table.t1[rows]]
    )  # fmt: skip
    order = np.lexsort(cols[::-1])  # stable: of equal rows, the first in the table leads
    same = (np.diff(cols[:, order], axis=1) == 0).all(axis=0)
    dup[rows[order[1:][same]]] = True
    return dup


def check(collection: Collection) -> list[Inconsistency]:
    """Find the four problems; leave the offending rows out of ``collection.table``."""
    table = collection.table
    found: list[Inconsistency] = []
    listed = set(collection.host_names)
    keep = np.ones(len(table), bool)
    unknown = [h for h in table.hosts if h not in listed]
    if unknown:
        codes = np.array([i for i, h in enumerate(table.hosts) if h not in listed])
        bad = np.isin(table.src, codes) | np.isin(table.dst, codes)
        keep &= ~bad
        found.append(
            Inconsistency(
                "unknown_hosts",
                int(bad.sum()),
                f"{int(bad.sum()):,} probe rows name {len(unknown)} host(s) the scan does "
                f"not list: {_names(unknown)}",
            )
        )
    answered = table.t4 != 0
    backwards = answered & ((table.t4 < table.t1) | ((table.t3 != 0) & (table.t3 < table.t2)))
    if backwards.any():
        keep &= ~backwards
        found.append(
            Inconsistency(
                "time_backwards",
                int(backwards.sum()),
                f"{int(backwards.sum()):,} exchanges end before they start (t4 before t1, "
                "or t3 before t2: a clock stepped back, or the records were altered)",
            )
        )
    # a file can be edited; an agent's rows never repeat (a sort: record files only)
    dup = _duplicates(table) if collection.source.startswith("replay:") else keep[:0]
    if dup.any():
        keep &= ~dup
        found.append(
            Inconsistency(
                "duplicate_rows",
                int(dup.sum()),
                f"{int(dup.sum()):,} probe rows appear twice or more (one copy of each kept)",
            )
        )
    if not keep.all():
        collection.table = table = table.select(keep)
    found.extend(_no_data(collection))
    return found


def _no_data(collection: Collection) -> list[Inconsistency]:
    table = collection.table
    expected = {h for h, peers in collection.peers.items() if peers}
    expected |= {p for peers in collection.peers.values() for p in peers}
    seen = {table.hosts[i] for i in np.unique(np.concatenate([table.src, table.dst]))}
    silent = [
        h
        for h in collection.host_names
        if h in expected
        and h not in seen
        and (collection.status.get(h) is None or collection.status[h].status == "ok")
    ]
    if not silent:
        return []
    return [
        Inconsistency(
            "no_data",
            0,
            f"{len(silent)} reachable host(s) have no probe row at all, though the peer "
            f"assignment gives them peers: {_names(silent)}",
        )
    ]


def checked(collection: Collection) -> Collection:
    """``collection`` with its inconsistent rows left out and what was found said in its
    ``consistency`` (checked once: a second call changes nothing)."""
    if collection.consistency is None:
        collection.consistency = [i.to_json() for i in check(collection)]
    return collection
