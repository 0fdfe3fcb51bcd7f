"""Robust statistics the solver shares: a spread that a few outliers cannot move.

``MAD_TO_SIGMA`` turns a median absolute deviation into the standard deviation it
estimates for normal noise (1 / the normal's 75th percentile, 1.4826);
``median_per_group`` is a vectorised median per group (per pair, per host).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
IntP = npt.NDArray[np.intp]

MAD_TO_SIGMA: Final = 1.4826


def median_per_group(values: F64, group: IntP, n_groups: int) -> F64:
    """The median of ``values`` within each group (NaN for an empty group)."""
    out = np.full(n_groups, np.nan)
    if len(values) == 0:
        return out
    # one argsort of a combined key (group + a fraction below 1 that orders the values
    # within the group) instead of a two-key lexsort: several times faster
    span = float(np.max(np.abs(values))) + 1.0
    order = np.argsort(group + (values / span + 1.0) * 0.49, kind="stable")
    g_sorted = group[order]
    counts = np.bincount(g_sorted, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    has = counts > 0
    lo_i = starts[has] + (counts[has] - 1) // 2
    hi_i = starts[has] + counts[has] // 2
    v = values[order]
    out[has] = (v[lo_i] + v[hi_i]) / 2
    return out
