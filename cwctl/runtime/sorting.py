"""A stable order of small non-negative integer keys (group ids), by radix; groups of
similar size laid out as padded blocks, to sort all their lines at once.

numpy sorts 16-bit keys stably by radix (one counting pass, O(n)) and wider ones by
timsort or a packed-key quicksort, O(n log n). Group ids below 2**32 are two 16-bit
digits: a stable sort by the low digit, then by the high one (least significant digit
first), is the stable sort by the whole id, in about half the time of one sort of a
packed int64 key (4 M rows: 0.2 s against 0.38 s; 1 M rows: 0.02 s against 0.05 s).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import I64, B, IntP

_DIGIT = 1 << 16
BLOCK_CELLS = 1 << 18  # cells per padded block: its temporaries stay in cache


def stable_order(keys: npt.NDArray[Any], n_keys: int) -> IntP:
    """The permutation that sorts ``keys`` (integers in ``0..n_keys-1``) stably: equal
    keys keep their index order. Same result as ``np.argsort(keys, kind="stable")``."""
    if n_keys <= _DIGIT:
        return np.argsort(np.asarray(keys).astype(np.uint16), kind="stable")
    if n_keys > _DIGIT * _DIGIT:
        return np.argsort(keys, kind="stable")
    wide = np.asarray(keys).astype(np.uint32)
    by_low = np.argsort(wide.astype(np.uint16), kind="stable")  # the low 16 bits
    high = (wide[by_low] >> np.uint32(16)).astype(np.uint16)
    return by_low[np.argsort(high, kind="stable")]


def unique_inverse(keys: npt.NDArray[np.integer], bound: int) -> tuple[I64, IntP]:
    """``np.unique(keys, return_inverse=True)`` for integers in ``0..bound-1``: the keys
    sorted by ``stable_order`` (two radix passes below 2**32) instead of a comparison
    sort."""
    order = stable_order(keys, bound)
    ranked = np.asarray(keys)[order]
    new = np.empty(len(ranked), bool)
    new[:1] = True
    np.not_equal(ranked[1:], ranked[:-1], out=new[1:])
    inverse = np.empty(len(ranked), np.intp)
    inverse[order] = np.cumsum(new) - 1
    return ranked[new].astype(np.int64), inverse


def grouped_order(values: npt.NDArray[np.float64], group: IntP, n_groups: int) -> IntP:
    """The permutation that sorts by ``group`` (ids ``0..n_groups-1``), then by
    ``values`` within each group, equal values (and NaNs, last) in index order: what
    ``np.lexsort((values, group))`` gives, by a radix sort of the ids (``stable_order``)
    and a stable sort of each group as a line of a padded block (NaN-padded: a pad sorts
    after every real value, NaN ones too, being later in its line). About a third of
    the time of two stable argsorts at half a million values."""
    by_group = stable_order(group, n_groups)
    counts = np.bincount(group, minlength=n_groups)
    starts = np.cumsum(counts) - counts
    v = values[by_group]
    out = np.empty(len(by_group), by_group.dtype)
    for _, at, real in padded_blocks(counts, starts):
        line = v[at]
        line[~real] = np.nan
        at_sorted = np.take_along_axis(at, np.argsort(line, axis=1, kind="stable"), axis=1)
        out[at[real]] = by_group[at_sorted[real]]
    return out


def padded_blocks(counts: I64, starts: I64, only: B | None = None) -> Iterator[tuple[I64, IntP, B]]:
    """Groups laid out one after another (group g at ``starts[g]``, ``counts[g]`` long),
    those of similar size (within 2x) as padded 2-D blocks of about ``BLOCK_CELLS``
    cells: (group ids, positions one group per line, padded with the group's last; mask
    of the real ones). ``only``: just the groups it marks."""
    size_class = np.zeros(len(counts), np.int64)
    nonempty = counts > 0 if only is None else (counts > 0) & only
    size_class[nonempty] = np.ceil(np.log2(counts[nonempty])).astype(np.int64) + 1
    for c in np.unique(size_class[nonempty]).tolist():
        in_class = np.flatnonzero(size_class == c)
        lines = max(BLOCK_CELLS // int(counts[in_class].max()), 1)
        for first in range(0, len(in_class), lines):
            groups = in_class[first : first + lines]
            n = counts[groups]
            col = np.arange(int(n.max()))
            real = col[None, :] < n[:, None]
            yield groups, starts[groups][:, None] + np.minimum(col[None, :], (n - 1)[:, None]), real
