"""``Rows.crossed_sums`` and ``Rows.crossings_per_row`` (what the votes are counted by)
give the bits of the sparse products they stand for, ``crossing().T @ w`` and
``crossing().sum(axis=1)``, at any chunk size, stored zeros and duplicates included."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import cwctl.telemetry.likelihood as likelihood
from cwctl.telemetry.likelihood import Rows


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 60),
    st.integers(1, 12),
    st.lists(st.tuples(st.integers(0, 59), st.integers(0, 11), st.integers(0, 3)), max_size=200),
    st.lists(st.floats(-1e6, 1e6), min_size=60, max_size=60),
    st.integers(1, 40),
)
def test_crossed_sums_are_the_products_bits(
    n_rows: int,
    n_el: int,
    entries: list[tuple[int, int, int]],
    weights: list[float],
    chunk: int,
) -> None:
    kept = [(r, e, v) for r, e, v in entries if r < n_rows and e < n_el]
    r, e, v = (np.array([x[i] for x in kept], np.int64) for i in range(3))
    # duplicates and stored zeros, as a COO built by hand may hold
    matrix = sp.csr_matrix((v.astype(np.int8), (r, e)), shape=(n_rows, n_el))
    flow = np.arange(n_rows) // 2
    rows = Rows(sp.csr_matrix((flow[-1] + 1, n_el)), matrix, flow, np.zeros(n_rows))
    w = np.array(weights[:n_rows])
    old = likelihood._SUMMED
    likelihood._SUMMED = chunk
    try:
        summed = rows.crossed_sums(w)
    finally:
        likelihood._SUMMED = old
    assert np.array_equal(summed, np.asarray(rows.crossing().T @ w).ravel())
    assert np.array_equal(rows.crossings_per_row(), np.asarray(rows.crossing().sum(axis=1)).ravel())


def test_an_empty_matrix_sums_to_zeros() -> None:
    rows = Rows(sp.csr_matrix((2, 3)), sp.csr_matrix((4, 3)), np.array([0, 0, 1, 1]), np.zeros(4))
    assert rows.crossed_sums(np.ones(4)).tolist() == [0.0, 0.0, 0.0]
    assert rows.crossings_per_row().tolist() == [0.0] * 4
    with pytest.raises(ValueError):
        rows.crossed_sums(np.ones(3))  # a weight per row


@pytest.mark.parametrize("chunk", [1, 2, 1_000_000])
def test_the_sums_run_in_row_order(chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Floating-point sums depend on their order: 1 + 1e16 - 1e16 is 0 in row order and
    1 the other way round. The product adds row after row; so must the sums."""
    matrix = sp.csr_matrix(np.ones((3, 1), np.int8))
    rows = Rows(sp.csr_matrix((3, 1)), matrix, np.arange(3), np.zeros(3))
    w = np.array([1.0, 1e16, -1e16])
    monkeypatch.setattr(likelihood, "_SUMMED", chunk)
    assert np.asarray(rows.crossing().T @ w).ravel().tolist() == [0.0]
    assert rows.crossed_sums(w).tolist() == [0.0]
