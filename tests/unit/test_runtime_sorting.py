"""``stable_order`` against numpy's stable argsort, for ids of one, two and more 16-bit
digits (the radix passes must keep equal ids in index order)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.runtime.sorting import stable_order


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([1, 2, 1 << 16, (1 << 16) + 1, 1 << 32, (1 << 32) + 5]),
    st.lists(st.integers(0, 1 << 40), max_size=200),
)
def test_stable_order_is_numpys_stable_argsort(n_keys: int, raw: list[int]) -> None:
    keys = np.array([k % n_keys for k in raw], np.int64)
    got = stable_order(keys, n_keys)
    assert got.tolist() == np.argsort(keys, kind="stable").tolist()


def test_ids_that_differ_only_in_the_high_digit_sort_by_it() -> None:
    """Equal low digits, different high ones: the second pass must decide (and keep the
    index order within each id)."""
    keys = np.array([3 << 16, 1 << 16, 3 << 16, 0, 1 << 16, 2], np.int64)
    assert stable_order(keys, 4 << 16).tolist() == [3, 5, 1, 4, 0, 2]
