"""A stable order of small non-negative integer keys (group ids), by radix.

numpy sorts 16-bit keys stably by radix (one counting pass, O(n)) and wider ones by
timsort or a packed-key quicksort, O(n log n). Group ids below 2**32 are two 16-bit
digits: a stable sort by the low digit, then by the high one (least significant digit
first), is the stable sort by the whole id, in about half the time of one sort of a
packed int64 key (4 M rows: 0.2 s against 0.38 s; 1 M rows: 0.02 s against 0.05 s).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from cwctl.runtime.arrays import IntP

_DIGIT = 1 << 16


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
