"""``stable_order`` against numpy's stable argsort, for ids of one, two and more 16-bit
digits (the radix passes must keep equal ids in index order); ``unique_inverse`` against
``np.unique``; ``grouped_order`` against ``np.lexsort``, NaNs, infinities, signed zeros
and ties included."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.runtime.sorting import grouped_order, stable_order, unique_inverse


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


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from([1, 3, 1 << 16, (1 << 16) + 1, 1 << 32, (1 << 32) + 5]),
    st.lists(st.integers(0, 1 << 40), max_size=200),
)
def test_unique_inverse_is_numpys_unique(bound: int, raw: list[int]) -> None:
    keys = np.array([k % bound for k in raw], np.int64)
    uniques, inverse = unique_inverse(keys, bound)
    want, want_inverse = np.unique(keys, return_inverse=True)
    assert uniques.tolist() == want.tolist() and inverse.tolist() == want_inverse.tolist()


values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.5, float("nan"), float("inf")]),  # ties, often
)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 70), st.lists(st.tuples(st.integers(0, 69), values), max_size=300))
def test_grouped_order_is_lexsort(n_groups: int, rows: list[tuple[int, float]]) -> None:
    group = np.array([g % n_groups for g, _ in rows], np.int64)
    v = np.array([x for _, x in rows], np.float64)
    assert grouped_order(v, group, n_groups).tolist() == np.lexsort((v, group)).tolist()


def test_grouped_order_over_groups_of_every_size_and_many_blocks() -> None:
    rng = np.random.default_rng(7)
    sizes = rng.integers(0, 300, 3000)  # padded blocks of many size classes, several each
    group = np.repeat(np.arange(len(sizes)), sizes)
    rng.shuffle(group)
    v = np.round(rng.normal(size=len(group)), 1)  # many ties
    assert np.array_equal(grouped_order(v, group, len(sizes)), np.lexsort((v, group)))
