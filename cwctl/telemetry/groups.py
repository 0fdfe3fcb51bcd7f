"""Grouped statistics over millions of rows, without a general-purpose argsort.

``group_ids`` numbers the distinct key tuples of rows (dense ids in key order).
``Runs`` lists the rows of every group together: one stable radix sort of the group
ids (``cwctl.runtime.sorting``: an order of magnitude faster than ``argsort``), so rows
stay in index order within a group. ``Runs.blocks`` then lays groups of similar size
(within 2x) out as rows of a padded 2-D block, so one ``np.sort(axis=1)`` sorts every
group's values at once: exact per-group order statistics (``group_quantiles``) and
in-order steps (``group_jitter``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import F64, I64
from cwctl.runtime.sorting import padded_blocks, stable_order

Ids = npt.NDArray[np.signedinteger[Any]]  # group ids: int32 or int64

_DENSE_KEYS = 1 << 24  # keys below this are numbered through a lookup table, not a sort
_SMALL_RANGE = 1 << 20  # a column spanning fewer values is offset, not ranked


def group_ids(*columns: npt.NDArray[Any]) -> tuple[Ids, npt.NDArray[Any]]:
    """Dense group ids of rows by several integer columns, and each group's key tuple.

    Ids follow the lexicographic order of the key tuples.
    """
    n = len(columns[0]) if columns else 0
    if not n:
        return np.zeros(0, np.int64), np.zeros((0, len(columns)), np.int64)
    ranges = [(int(np.min(c)), int(np.max(c))) for c in columns]
    if np.prod([float(hi - lo + 1) for lo, hi in ranges]) < _DENSE_KEYS:
        return _dense_group_ids(columns, ranges)
    # mixed-radix key over the columns' dense ranks (1-D, no np.unique(axis=0))
    key = np.zeros(n, np.int64)
    digits: list[tuple[int, int, npt.NDArray[Any] | None]] = []  # radix, offset, values
    decodable = True
    for column in columns:
        col = np.asarray(column)
        lo, hi = int(col.min()), int(col.max())
        values: npt.NDArray[Any] | None = None
        if hi - lo < _SMALL_RANGE:  # host indices, ports, flags: an offset, no sort
            radix, rank = hi - lo + 1, col
        else:
            values, inverse = np.unique(col.astype(np.int64), return_inverse=True)
            radix, rank, lo = len(values), inverse.reshape(-1), 0
        if int(key.max(initial=0)) >= 2**62 // radix:
            _, key = np.unique(key, return_inverse=True)
            key = key.reshape(-1).astype(np.int64)
            decodable = False
        key *= radix
        key += rank
        if lo:
            key -= lo
        digits.append((radix, lo, values))
    top = int(key.max())
    if top < _DENSE_KEYS:  # a lookup table of the keys present instead of a sort
        present = np.zeros(top + 1, bool)
        present[key] = True
        unique = np.flatnonzero(present)
        lookup = np.zeros(top + 1, np.int64)
        lookup[unique] = np.arange(len(unique))
        ids = lookup[key]
    else:
        unique, first, ids = np.unique(key, return_index=True, return_inverse=True)
        ids = ids.reshape(-1).astype(np.int64)
        if not decodable:
            keys = np.stack([np.asarray(c, np.int64)[first] for c in columns], axis=1)
            return ids, keys
    if not decodable:  # the key was renumbered: read each group's tuple off one of its rows
        first = np.empty(len(unique), np.int64)
        first[ids[::-1]] = np.arange(n - 1, -1, -1)
        keys = np.stack([np.asarray(c, np.int64)[first] for c in columns], axis=1)
        return ids, keys
    keys = np.empty((len(unique), len(columns)), np.int64)
    rest = unique.astype(np.int64)
    for j in range(len(columns) - 1, -1, -1):
        radix, lo, values = digits[j]
        rest, digit = np.divmod(rest, radix)
        keys[:, j] = digit + lo if values is None else values[digit]
    return ids, keys


def _dense_group_ids(
    columns: tuple[npt.NDArray[Any], ...], ranges: list[tuple[int, int]]
) -> tuple[Ids, npt.NDArray[Any]]:
    """``group_ids`` when the mixed-radix key has fewer than ``_DENSE_KEYS`` values: an
    int32 key and a lookup table of the keys present, no sort (ids come as int32)."""
    key = np.zeros(len(columns[0]), np.int32)
    for col, (lo, hi) in zip(columns, ranges, strict=True):
        key *= hi - lo + 1
        col = np.asarray(col)
        if lo >= -(2**31) and hi < 2**31:
            key += col if col.dtype == np.int32 else col.astype(np.int32)
            key -= lo
        else:  # small range, large values: offset first
            key += (col.astype(np.int64) - lo).astype(np.int32)
    size = int(np.prod([hi - lo + 1 for lo, hi in ranges]))
    present = np.zeros(size, bool)
    present[key] = True
    unique = np.flatnonzero(present)
    lookup = np.zeros(size, np.int32)  # ids < _DENSE_KEYS: half the bytes to gather
    lookup[unique] = np.arange(len(unique))
    keys = np.empty((len(unique), len(columns)), np.int64)
    rest = unique
    for j in range(len(columns) - 1, -1, -1):
        lo, hi = ranges[j]
        rest, digit = np.divmod(rest, hi - lo + 1)
        keys[:, j] = digit + lo
    return lookup[key], keys


@dataclass(frozen=True)
class Runs:
    """Rows grouped: ``rows[starts[g] : starts[g] + counts[g]]`` are group g's rows
    (ascending within a group when built by ``runs``). Arrays "in run order" are columns
    already gathered by ``rows`` (``column[rows]``), so runs are contiguous slices."""

    rows: npt.NDArray[np.intp]
    counts: I64
    starts: I64
    ascending: bool = True  # each run's rows ascend (row order is run order)

    def blocks(
        self, only: npt.NDArray[np.bool_] | None = None
    ) -> Iterator[tuple[I64, npt.NDArray[np.intp], npt.NDArray[np.bool_]]]:
        """Groups of similar size (within 2x) as padded 2-D blocks: (group ids, positions
        in run order one group per line, padded with the group's last; mask of real ones).
        ``only``: just the groups it marks."""
        return padded_blocks(self.counts, self.starts, only)


def runs(group: I64, n_groups: int) -> Runs:
    """Group rows by id (``0..n_groups-1``) with one stable radix sort of the ids."""
    counts = np.bincount(group, minlength=n_groups).astype(np.int64)
    starts = np.cumsum(counts) - counts
    if not len(group):
        return Runs(np.zeros(0, np.intp), counts, starts)
    return Runs(stable_order(group, n_groups), counts, starts)


def merged_runs(inner: Runs, parent: I64, n_parents: int) -> Runs:
    """Runs of coarser groups, each the union of inner groups that are contiguous in id
    order (``parent`` maps inner id -> parent id, non-decreasing). Within a parent, rows
    come inner group by inner group: the same run order as ``inner``."""
    counts = np.bincount(parent, weights=inner.counts, minlength=n_parents).astype(np.int64)
    return Runs(inner.rows, counts, np.cumsum(counts) - counts, ascending=False)


def run_quantiles(
    r: Runs, ordered: F64, qs: tuple[float, ...], offset: F64 | None = None
) -> list[F64]:
    """Linear-interpolated quantiles of each run of ``ordered`` (values in run order, no
    NaNs): each run sorted, then read at ``q * (count - 1)`` and interpolated as
    ``np.quantile``'s default method does, to the bit (``lerp``)."""
    n_groups = len(r.counts)
    out = [np.full(n_groups, np.nan) for _ in qs]
    for groups, at, real in r.blocks():
        block = ordered[at]
        if offset is not None:  # the quantiles of ordered - offset[group]
            block -= offset[groups][:, None]
        block[~real] = np.inf
        block.sort(axis=1)
        # positions within the run, not in the whole array: a run's start added to a
        # float position would take bits from its fraction as the runs grow
        last = np.maximum(r.counts[groups] - 1, 0)
        row = np.arange(len(groups))
        for res, q in zip(out, qs, strict=True):
            pos = last * q
            lo = np.floor(pos).astype(np.int64)
            hi = np.minimum(lo + 1, last)
            res[groups] = lerp(block[row, lo], block[row, hi], pos - lo)
    return out


def lerp(a: F64, b: F64, t: F64) -> F64:
    """``a`` to ``b`` (``a <= b``) at ``t`` in [0, 1] as ``np.quantile`` interpolates
    (``a + (b - a) t``, from ``b`` when ``t >= 0.5``): exact at the ends and where
    ``a == b``, never outside ``[a, b]``, finite where ``b - a`` overflows."""
    with np.errstate(over="ignore", invalid="ignore"):
        diff = b - a
        res = np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)
    wide = np.isinf(diff) & np.isfinite(a) & np.isfinite(b)
    if wide.any():  # a weighted sum of two finite values cannot overflow
        res[wide] = a[wide] * (1 - t[wide]) + b[wide] * t[wide]
    res = np.where(t == 0, a, res)  # an infinite neighbour at weight 0 is not read
    return np.clip(res, a, b)


def run_jitter(
    r: Runs,
    by_row: F64,
    t_by_row: I64,
    in_run_order: F64 | None = None,
    t_in_run_order: I64 | None = None,
) -> F64:
    """Mean |difference| of consecutive values of each run in ``t`` order, ties in row
    order; NaN for runs with fewer than two values. ``by_row``/``t_by_row``: the values
    and times indexed by row (``r.rows`` indexes them); ``in_run_order`` and
    ``t_in_run_order``: them gathered by ``r.rows``, when already at hand.

    Runs whose rows ascend with their times are read as they are. Each block of the
    other runs is sorted row-wise by one packed key, time above position in the run.
    Equal times within a run are ordered by position, which is row order when the runs'
    rows ascend (``Runs.ascending``); otherwise the lines with equal times are re-sorted
    by time above row index. Times spanning too much to pack fall back to argsort.
    """
    n_groups = len(r.counts)
    total = np.zeros(n_groups)
    n = len(by_row)
    if not n:
        return np.full(n_groups, np.nan)
    t0, span = int(t_by_row.min()), int(t_by_row.max()) - int(t_by_row.min())
    t_run = t_by_row[r.rows] if t_in_run_order is None else t_in_run_order
    v_run = by_row[r.rows] if in_run_order is None else in_run_order
    # runs whose rows ascend and whose times never step back are in order already
    unsorted = np.ones(n_groups, bool)
    if r.ascending:
        late = np.flatnonzero(t_run[1:] < t_run[:-1]) + 1
        late_run = np.searchsorted(r.starts, late, side="right") - 1
        unsorted[:] = False
        unsorted[late_run[late != r.starts[late_run]]] = True
    big = np.iinfo(np.int64).max
    for groups, at, real, in_order in _blocks_by(r, unsorted):
        width = at.shape[1]
        if width < 2:
            continue
        pad = ~real
        bits = max(int(width - 1).bit_length(), 1)
        if in_order:
            block = v_run[at]
        elif span >> (62 - bits):
            block = _by_time_then_row(r.rows[at], real, by_row, t_by_row)
        else:
            key = t_run[at]
            key -= t0
            key <<= bits
            key |= np.arange(width)
            key[pad] = big
            key.sort(axis=1)
            tied = np.zeros(0, np.intp)
            if not r.ascending:  # equal times: position order may not be row order
                same_t = np.diff(key >> bits, axis=1) == 0
                same_t &= real[:, 1:]
                tied = np.flatnonzero(same_t.any(axis=1))
            key &= (1 << bits) - 1
            # the position in run order of each sorted entry (padding: the run's last)
            np.minimum(key, (r.counts[groups] - 1)[:, None], out=key)
            key += r.starts[groups][:, None]
            block = v_run[key]
            if len(tied):
                block[tied] = _by_time_then_row(r.rows[at[tied]], real[tied], by_row, t_by_row)
        step = np.abs(np.diff(block, axis=1))
        step[pad[:, 1:]] = 0.0
        # a running sum adds each line's steps in order, as one bincount over them would
        total[groups] = np.cumsum(step, axis=1)[:, -1]
    count = np.maximum(r.counts - 1, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _blocks_by(
    r: Runs, unsorted: npt.NDArray[np.bool_]
) -> Iterator[tuple[I64, npt.NDArray[np.intp], npt.NDArray[np.bool_], bool]]:
    """``r.blocks()`` of the runs in order, then of those that need sorting."""
    for groups, at, real in r.blocks(~unsorted):
        yield groups, at, real, True
    for groups, at, real in r.blocks(unsorted):
        yield groups, at, real, False


def _by_time_then_row(
    rows: npt.NDArray[np.intp], real: npt.NDArray[np.bool_], by_row: F64, t_by_row: I64
) -> F64:
    """A block's values, each line sorted by time, ties by row (two stable sorts)."""
    big = np.iinfo(np.int64).max
    rows = np.where(real, rows, big)
    rows.sort(axis=1)
    rows = np.where(real, rows, rows[:, :1])
    times = np.where(real, t_by_row[rows], big)
    order = np.argsort(times, axis=1, kind="stable")
    return by_row[np.take_along_axis(rows, order, axis=1)]


def group_quantiles(values: F64, group: I64, n_groups: int, qs: tuple[float, ...]) -> list[F64]:
    """Linear-interpolated quantiles of ``values`` per group (NaNs skipped), exact."""
    ok = ~np.isnan(values)
    r = runs(group[ok], n_groups)
    return run_quantiles(r, values[ok][r.rows], qs)


def group_jitter(values: F64, t: I64, group: I64, n_groups: int) -> F64:
    """Mean |difference| of consecutive ``values`` per group in ``t`` order (ties in row
    order; NaNs skipped); NaN for groups with fewer than two values."""
    ok = ~np.isnan(values)
    return run_jitter(runs(group[ok], n_groups), values[ok], t[ok])
