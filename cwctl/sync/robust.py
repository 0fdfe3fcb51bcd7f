"""Robust statistics the solver shares: a spread that a few outliers cannot move.

``MAD_TO_SIGMA`` turns a median absolute deviation into the standard deviation it
estimates for normal noise (1 / the normal's 75th percentile, 1.4826);
``median_per_group`` is a vectorised median per group (per pair, per host);
``weighted_median`` the median of values each counted by a weight.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from cwctl.runtime.arrays import F64, IntP
from cwctl.runtime.sorting import padded_blocks, stable_order

MAD_TO_SIGMA: Final = 1.4826


def median_per_group(values: F64, group: IntP, n_groups: int) -> F64:
    """The median of ``values`` within each group (ids ``0..n_groups-1``), exact for any
    float64 values: NaNs are left out, NaN for a group with no other value.

    The values are put group by group by a stable radix sort of the ids
    (``runtime.sorting``); groups of similar size (within 2x) are then laid out as the
    lines of a padded block (padded with +inf, which sorts last) and one ``np.sort(axis=1)``
    sorts every line at once: no key mixes a group id into a value, and no argsort of
    the values (3-4x faster than one at 3 M values).
    """
    out = np.full(n_groups, np.nan)
    values = np.asarray(values, np.float64)
    group = np.asarray(group)
    if np.isnan(values).any():
        keep = ~np.isnan(values)
        values, group = values[keep], group[keep]
    if len(values) == 0:
        return out
    counts = np.bincount(group, minlength=n_groups)
    grouped = values[stable_order(group, n_groups)]
    starts = np.cumsum(counts) - counts
    has = counts > 0
    lo, hi = np.empty(n_groups), np.empty(n_groups)
    for groups, at, real in padded_blocks(counts, starts):
        block = grouped[at]
        block[~real] = np.inf  # sorts last, beside any real +inf
        block.sort(axis=1)
        n, line = counts[groups], np.arange(len(groups))
        lo[groups], hi[groups] = block[line, (n - 1) // 2], block[line, n // 2]
    lo, hi = lo[has], hi[has]
    with np.errstate(over="ignore", invalid="ignore"):  # inf + -inf: NaN, as np.median
        mid = (lo + hi) / 2
    over = np.isinf(mid) & np.isfinite(lo) & np.isfinite(hi)  # the sum overflowed
    mid[over] = lo[over] / 2 + hi[over] / 2
    out[has] = mid
    return out


def weighted_median(values: F64, weights: F64) -> float:
    """The value at which half of the weight lies on either side, NaN where no weight
    is positive. With equal weights it is ``np.median`` exactly: where the half falls
    between two values (an even count of them), their mean."""
    values = np.asarray(values, np.float64)
    weights = np.asarray(weights, np.float64)
    keep = (weights > 0) & ~np.isnan(values)
    if not keep.any():
        return float("nan")
    order = np.argsort(values[keep])
    v, w = values[keep][order], weights[keep][order]
    cum = np.cumsum(w)
    half = cum[-1] / 2
    j = int(np.searchsorted(cum, half))  # the first value with half the weight at or below it
    if cum[j] == half and j + 1 < len(v):
        return float((v[j] + v[j + 1]) / 2)
    return float(v[j])
