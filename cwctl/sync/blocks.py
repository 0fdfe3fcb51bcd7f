"""The per-pair fits of a large table, a block of pairs at a time.

Everything ``fit_table`` does before the graph solve is per pair (the coded filter
judges the two probes of one pair; the envelopes and lines are per pair and flow), so
a table can be cut into blocks that each hold every row of some pairs, fitted block by
block, and the fits put back in pair order. The peak memory of the fit is then that of
one block's temporaries (a dozen arrays the length of the block) instead of the whole
table's, and every sort is a block's sort. A table of up to ``ONE_PASS_ROWS`` rows (about
5 000 hosts at the quick budget) is fitted in one pass; a longer one in blocks of
``BLOCK_ROWS``, two at a time on two cores (``cwctl.runtime.blockpool``): blocks of half
a million rows fit faster than blocks of two million even on one core (their
temporaries are reused from the heap, their sorts stay in cache), 2.7 s against 4.4 s
for the 4 M rows of a 10 000-host scan, 1.5 s on two cores.

Blocks are chosen by a hash of the pair (unordered host pair), so each holds a similar
share of the rows whatever the peer assignment; rows keep their order inside a block
(the two probes of a coded pair stay adjacent). What differs from one pass over the
whole table: the coded filter's tolerance (3 robust deviations of the spacing errors)
and the fit's provisional reference time are each block's own, and the fits are moved
to the common reference time along their own slopes (``rebase``); with blocks of half a
million rows the tolerance is the same to a fraction of a nanosecond.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cwctl.records import ProbeTable
from cwctl.sync.coded import CodedFilter
from cwctl.sync.pairfit import PairFits

ONE_PASS_ROWS = 2_000_000  # a table up to this long is fitted in one pass
BLOCK_ROWS = 500_000  # beyond it, rows per block: about 40 MB of fit temporaries


def pair_blocks(table: ProbeTable, block_rows: int) -> list[np.ndarray]:
    """Row indices of each block (every row of a pair in one block, rows in order)."""
    n_blocks = max(1, -(-len(table) // block_rows))
    src, dst = table.src, table.dst
    if len(src) == 0:
        return [np.zeros(0, np.intp)]
    # rows come in runs of one pair (a simulator's edge-major table, an agent's batch):
    # the pair's block is worked out once per run and repeated over it
    starts = np.flatnonzero(np.r_[True, (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])])
    lengths = np.diff(np.r_[starts, len(src)])
    lo = np.minimum(src[starts], dst[starts]).astype(np.uint64)
    hi = np.maximum(src[starts], dst[starts]).astype(np.uint64)
    with np.errstate(over="ignore"):
        mixed = (lo * np.uint64(0x9E3779B97F4A7C15)) ^ (hi * np.uint64(0xBF58476D1CE4E5B9))
        mixed ^= mixed >> np.uint64(31)
    dtype = np.int16 if n_blocks < 2**15 else np.int32
    block = np.repeat((mixed % np.uint64(n_blocks)).astype(dtype), lengths)
    if n_blocks <= 16:  # a pass per block beats a sort of every row
        return [np.flatnonzero(block == b) for b in range(n_blocks)]
    order = np.argsort(block, kind="stable")  # radix sort for 16-bit keys
    bounds = np.searchsorted(block[order], np.arange(n_blocks + 1))
    return [order[bounds[b] : bounds[b + 1]] for b in range(n_blocks)]


def merge_filters(filters: list[CodedFilter]) -> dict[str, Any]:
    """One ``quality`` dict for the blocks' coded filters: counts summed, tolerances
    (per timestamp source) the median of the blocks'."""
    counts: dict[str, int] = {}
    tolerances: dict[str, list[float]] = {}
    for filt in filters:
        for key, value in filt.counts.items():
            counts[key] = counts.get(key, 0) + int(value)
        for source, tol in filt.tolerance_ns.items():
            tolerances.setdefault(source, []).append(tol)
    median = {s: round(float(np.median(v)), 1) for s, v in tolerances.items()}
    return {"filter_tolerance_ns": median, **counts, "fit_blocks": len(filters)}


def merge_fits(parts: list[PairFits], n_hosts: int) -> PairFits:
    """The blocks' fits as one, in the order one pass would give (by lo, then hi)."""
    names = list(PairFits.__dataclass_fields__)
    merged = {k: np.concatenate([getattr(p, k) for p in parts]) for k in names}
    key = merged["lo"].astype(np.int64) * n_hosts + merged["hi"]
    order = np.argsort(key, kind="stable")
    return PairFits(**{k: v[order] for k, v in merged.items()})
