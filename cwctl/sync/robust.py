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
from cwctl.runtime.sorting import stable_order

MAD_TO_SIGMA: Final = 1.4826


def median_per_group(values: F64, group: IntP, n_groups: int) -> F64:
    """The median of ``values`` within each group (ids ``0..n_groups-1``), exact for any
    float64 values: NaNs are left out, NaN for a group with no other value.

    Two sorts, neither of which mixes a group id into a value (one float key of group
    id plus scaled value cannot tell apart values closer than its resolution, which
    coarsens as the ids grow and the values spread): the values by value, then their
    positions in that order by group, a stable radix sort (``runtime.sorting``) that
    keeps the value order within each group.
    """
    out = np.full(n_groups, np.nan)
    values = np.asarray(values, np.float64)
    group = np.asarray(group)
    if np.isnan(values).any():
        keep = ~np.isnan(values)
        values, group = values[keep], group[keep]
    n = len(values)
    if n == 0:
        return out
    by_value = np.argsort(values)
    ranked = values[by_value]
    counts = np.bincount(group, minlength=n_groups)
    pos = stable_order(group[by_value], n_groups)
    ranked = ranked[pos]
    starts = np.cumsum(counts) - counts
    has = counts > 0
    lo = ranked[starts[has] + (counts[has] - 1) // 2]
    hi = ranked[starts[has] + counts[has] // 2]
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
