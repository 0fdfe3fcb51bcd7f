"""``median_per_group`` against a plain per-group median (Python's ``sorted`` and exact
rational midpoints): values of any size side by side in one call, NaNs, empty groups,
many groups. The combined sort key it used before (group + a scaled value) rounded a
group's values together once they spanned ~1e16, or once the group ids took the bits."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cwctl.runtime.sorting
from cwctl.sync.robust import median_per_group, weighted_median

TINY = 2.0**-1021  # below this a halving may round: the midpoint is within one subnormal


def reference(values: list[float], group: list[int], g: int) -> float:
    """The median of group ``g``'s non-NaN values, the midpoint rounded once from exact."""
    mine = sorted(v for v, k in zip(values, group, strict=True) if k == g and not math.isnan(v))
    if not mine:
        return math.nan
    a, b = mine[(len(mine) - 1) // 2], mine[len(mine) // 2]
    if math.isinf(a) or math.isinf(b):  # inf and -inf: NaN, as np.median
        return a if a == b else (math.nan if math.isinf(a) and math.isinf(b) else a + b)
    return float((Fraction(a) + Fraction(b)) / 2)


def check(values: list[float], group: list[int], n_groups: int) -> None:
    got = median_per_group(np.array(values, np.float64), np.array(group, np.intp), n_groups)
    assert got.shape == (n_groups,)
    for g in range(n_groups):
        want = reference(values, group, g)
        if math.isnan(want):
            assert math.isnan(got[g]), (g, got[g])
        elif abs(want) < TINY:
            assert abs(got[g] - want) <= 2.0**-1074, (g, got[g], want)
        else:
            assert got[g] == want, (g, got[g], want)


any_finite = st.floats(allow_nan=False, allow_infinity=False)
wide = (
    any_finite
    | st.floats(-1e20, 1e20)
    | st.integers(-(10**18), 10**18).map(float)
    | st.just(math.nan)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), wide), max_size=60))
def test_median_per_group_is_the_plain_median_for_any_values(
    rows: list[tuple[int, float]],
) -> None:
    check([v for _, v in rows], [g for g, _ in rows], 8)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 24),
    st.lists(
        st.tuples(st.integers(0, 11), wide | st.sampled_from([math.inf, -math.inf])), max_size=120
    ),
)
def test_groups_of_every_size_split_over_many_padded_blocks(
    block_cells: int, rows: list[tuple[int, float]]
) -> None:
    """Blocks of a few cells: a size class's groups over many blocks, a wide group alone
    in one (its line wider than the block), real infinities beside the +inf padding."""
    saved = cwctl.runtime.sorting.BLOCK_CELLS
    cwctl.runtime.sorting.BLOCK_CELLS = block_cells
    try:
        check([v for _, v in rows], [g for g, _ in rows], 12)
    finally:
        cwctl.runtime.sorting.BLOCK_CELLS = saved


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 200_000),  # 16-bit ids (one radix pass) and wider ones (two)
    st.lists(
        st.tuples(st.integers(0, 3), st.floats(1.0, 1.0 + 2.0**-30, allow_nan=False)),
        min_size=1,
        max_size=40,
    ),
)
def test_close_values_in_high_numbered_groups(n_groups: int, rows: list[tuple[int, float]]) -> None:
    """Values a few ulps apart in groups whose ids need many bits of a float key."""
    ids = sorted({max(n_groups - 1 - k * 997, 0) for k in range(4)})
    check([v for _, v in rows], [ids[g % len(ids)] for g, _ in rows], n_groups)


def test_a_huge_value_in_one_group_leaves_the_others_exact() -> None:
    values = [1e16, 3.0, 1.0, 5.0, 2.0, 4.0]
    got = median_per_group(np.array(values), np.array([0, 1, 1, 1, 1, 1], np.intp), 3)
    assert got[0] == 1e16 and got[1] == 3.0 and math.isnan(got[2])


def test_extremes_nan_and_infinities() -> None:
    big = np.finfo(np.float64).max
    values = np.array([big, big, math.nan, math.nan, -math.inf, 1.0, 2.0, math.inf, math.inf])
    group = np.array([0, 0, 1, 2, 2, 2, 3, 3, 3], np.intp)
    got = median_per_group(values, group, 5)
    assert got[0] == big  # no overflow of the midpoint's sum
    assert math.isnan(got[1])  # only NaN: no median
    assert got[2] == -math.inf  # NaN left out: the midpoint of -inf and 1
    assert got[3] == math.inf
    assert math.isnan(got[4])  # empty


def test_nothing_at_all() -> None:
    got = median_per_group(np.zeros(0), np.zeros(0, np.intp), 3)
    assert got.shape == (3,) and np.isnan(got).all()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(-1e6, 1e6, allow_nan=False), st.integers(0, 4)),
        min_size=1,
        max_size=40,
    )
)
def test_weighted_median_is_the_median_of_the_values_repeated_by_weight(
    pairs: list[tuple[float, int]],
) -> None:
    values = np.array([v for v, _ in pairs])
    weights = np.array([w for _, w in pairs], np.float64)
    got = weighted_median(values, weights)
    repeated = np.repeat(values, weights.astype(int))
    if not len(repeated):
        assert math.isnan(got)
    else:
        assert got == np.median(repeated), (got, np.median(repeated))


def test_weighted_median_counts_a_half_weight_as_half() -> None:
    # a flow the suspect crossed at even odds counts half: two such flows as one
    values = np.array([1.0, 2.0, 10.0, 11.0, 12.0])
    assert weighted_median(values, np.array([1.0, 1.0, 0.5, 0.5, 0.0])) == 2.0
    assert weighted_median(values, np.array([0.0, 0.5, 0.5, 0.5, 0.5])) == 10.5
    assert math.isnan(weighted_median(values, np.zeros(5)))
    assert math.isnan(weighted_median(np.array([np.nan]), np.ones(1)))
