"""Grouped statistics (cwctl/telemetry/groups.py) against plain per-group loops, and the
whole path table against the per-path loop of ``bench/bench_telemetry.py`` on a simulated
fabric with faults, lost probes and two NICs per host."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.bench_telemetry import per_path_loop
from cwctl.fabric.topology import leaf_spine
from cwctl.sim.model import FabricModel
from cwctl.sim.params import SimParams
from cwctl.sync import one_way_delays, solve
from cwctl.telemetry.groups import (
    group_ids,
    group_jitter,
    group_quantiles,
    merged_runs,
    run_jitter,
    runs,
)
from cwctl.telemetry.paths import observations, path_table
from cwctl.transport.sim import run_model

rows_strategy = st.lists(
    st.tuples(
        st.integers(0, 5),  # group
        st.integers(0, 6),  # send time: a small range, so ties are common
        st.floats(-1e6, 1e6, allow_nan=False) | st.just(float("nan")),
    ),
    min_size=0,
    max_size=80,
)


def _naive_jitter(group: np.ndarray, t: np.ndarray, v: np.ndarray, g: int) -> float:
    """Mean |step| in (time, row) order, summed one step at a time."""
    rows = [i for i in range(len(group)) if group[i] == g and not np.isnan(v[i])]
    rows.sort(key=lambda i: (t[i], i))
    total = 0.0
    for a, b in itertools.pairwise(rows):
        total += abs(v[b] - v[a])
    return total / (len(rows) - 1) if len(rows) > 1 else float("nan")


def _same(a: float, b: float) -> bool:
    return (np.isnan(a) and np.isnan(b)) or a == b


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_jitter_matches_a_per_group_loop_with_ties(rows: list[tuple[int, int, float]]) -> None:
    group = np.array([r[0] for r in rows], np.int64)
    t = np.array([r[1] for r in rows], np.int64) + 1_800_000_000_000_000_000
    v = np.array([r[2] for r in rows], np.float64)
    got = group_jitter(v, t, group, 6)
    for g in range(6):
        assert _same(got[g], _naive_jitter(group, t, v, g))


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_merged_runs_keep_row_order_on_equal_times(rows: list[tuple[int, int, float]]) -> None:
    """Parents made of several child groups (like a path of its source ports): equal
    times across children are still taken in row order."""
    child = np.array([r[0] for r in rows], np.int64)
    parent_of_child = np.array([0, 0, 0, 1, 1, 2])
    t = np.array([r[1] for r in rows], np.int64)
    v = np.array([r[2] for r in rows], np.float64)
    ok = ~np.isnan(v)
    by_child = runs(child[ok], 6)
    by_parent = merged_runs(by_child, parent_of_child, 3)
    got = run_jitter(by_parent, v[ok], t[ok])
    parent = parent_of_child[child] if len(child) else child
    for p in range(3):
        assert _same(got[p], _naive_jitter(parent, t, v, p))


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_quantiles_are_exact_order_statistics(rows: list[tuple[int, int, float]]) -> None:
    group = np.array([r[0] for r in rows], np.int64)
    v = np.array([r[2] for r in rows], np.float64)
    qs = (0.0, 0.5, 0.9, 0.99, 1.0)
    got = group_quantiles(v, group, 6, qs)
    for g in range(6):
        sel = np.sort(v[(group == g) & ~np.isnan(v)])
        for q, col in zip(qs, got, strict=True):
            if not len(sel):
                assert np.isnan(col[g])
                continue
            if q in (0.0, 1.0):  # the extremes are the values themselves
                assert col[g] == (sel[0] if q == 0.0 else sel[-1])
            assert np.isclose(col[g], np.quantile(sel, q), rtol=1e-9, atol=1e-9)


def test_group_ids_wide_columns_and_order() -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(-(2**40), 2**40, 500)  # ranked, not offset
    b = rng.integers(0, 3, 500)
    a[::7] = a[0]
    ids, keys = group_ids(a, b)
    want, inverse = np.unique(np.stack([a, b], 1), axis=0, return_inverse=True)
    assert np.array_equal(keys, want)
    assert np.array_equal(ids, inverse.reshape(-1))
    # a small key space (the int32 lookup table) with values far from zero
    c = rng.integers(2**40, 2**40 + 9, 500)
    d = rng.integers(-(2**31), -(2**31) + 3, 500)
    ids, keys = group_ids(c, d, b)
    want, inverse = np.unique(np.stack([c, d, b], 1), axis=0, return_inverse=True)
    assert np.array_equal(keys, want)
    assert np.array_equal(ids, inverse.reshape(-1))


def test_path_table_matches_the_per_path_loop_on_a_faulty_fabric() -> None:
    names, topo = leaf_spine(16, 4, 2)
    model = FabricModel(
        names,
        topo,
        params=SimParams(load=0.3, timestamps="sw"),
        seed=11,
        faults=("link:leaf2-spine1:lossy=0.2", "switch:spine2:congested"),
        nics={h: ("mlx5_0", "mlx5_1") for h in names},
    )
    collection = run_model(model, 0.5)
    table = collection.table
    fwd, rev = one_way_delays(table, solve(table))
    obs = observations(table, fwd, rev)
    assert (~obs.received).any()  # lost probes and replies are in the mix
    pt = path_table(obs)
    want = per_path_loop(obs)
    assert len(want) == len(pt.path_key)
    cols = ("owd_min_ns", "owd_p50_ns", "owd_p90_ns", "owd_p99_ns", "owd_max_ns")
    for i, (s, d) in enumerate(pt.path_key.tolist()):
        w = want[(s, d)]
        assert (pt.path.sent[i], pt.path.received[i]) == (w.sent, w.received)
        got = [getattr(pt.path, c)[i] for c in cols]
        assert np.allclose(got, w.owd_ns, rtol=1e-9, atol=1e-9, equal_nan=True)
        assert np.isclose(pt.path.jitter_ns[i], w.jitter_ns, rtol=1e-9, equal_nan=True)


wide_values = (
    st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(-1e20, 1e20)
    | st.floats(0.0, 1e4)
    | st.just(float("nan"))
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 6), wide_values), max_size=50),
    st.integers(0, 2_000),
)
def test_quantiles_are_numpy_s_to_the_bit_for_any_values(
    rows: list[tuple[int, float]], filler: int
) -> None:
    """Values of any size side by side, behind a group of ``filler`` rows: each group's
    quantiles are ``np.quantile``'s of its values, bit for bit, and never outside the
    two order statistics they lie between (also where ``b - a`` overflows)."""
    group = np.array([g for g, _ in rows] + [0] * filler, np.int64)
    v = np.array([x for _, x in rows] + [0.0] * filler, np.float64)
    qs = (0.0, 0.37, 0.5, 0.9, 0.99, 1.0)
    got = group_quantiles(v, group, 8, qs)
    for g in range(1, 8):
        sel = np.sort(v[(group == g) & ~np.isnan(v)])
        for q, col in zip(qs, got, strict=True):
            if not len(sel):
                assert np.isnan(col[g])
                continue
            pos = q * (len(sel) - 1)
            lo = int(np.floor(pos))
            assert sel[lo] <= col[g] <= sel[min(lo + 1, len(sel) - 1)], (g, q, col[g], sel)
            with np.errstate(over="ignore", invalid="ignore"):
                want = np.quantile(sel, q)
            if np.isfinite(want):
                assert col[g] == want, (g, q, col[g], want, sel)


def test_a_quantile_does_not_depend_on_how_many_rows_come_before() -> None:
    """A run's position was once its start in the whole array plus ``q * (count - 1)``
    as one float: 4 M rows ahead of a run moved its p99 by 2e-4 of 1e6."""
    ahead = 1 << 22
    v = np.concatenate([np.zeros(ahead), [0.0, 1e6]])
    group = np.concatenate([np.zeros(ahead, np.int64), [1, 1]])
    (p99,) = group_quantiles(v, group, 2, (0.99,))
    assert p99[1] == np.quantile([0.0, 1e6], 0.99) == 990_000.0


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 5),
            st.integers(-(2**62), 2**62) | st.integers(0, 3),  # times too wide to pack, or tied
            wide_values,
        ),
        max_size=50,
    )
)
def test_jitter_is_the_per_group_loop_for_any_times_and_values(
    rows: list[tuple[int, int, float]],
) -> None:
    """Send times spanning most of int64 (no packed time key: the two-sort fallback)
    and values of any size: the same steps, summed in the same order, as the loop."""
    group = np.array([r[0] for r in rows], np.int64)
    t = np.array([r[1] for r in rows], np.int64)
    v = np.array([r[2] for r in rows], np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        got = group_jitter(v, t, group, 6)
        for g in range(6):
            rows_g = [i for i in range(len(group)) if group[i] == g and not np.isnan(v[i])]
            rows_g.sort(key=lambda i: (t[i], i))
            steps = [abs(v[b] - v[a]) for a, b in itertools.pairwise(rows_g)]
            want = float(np.cumsum(steps)[-1] / len(steps)) if steps else float("nan")
            assert _same(got[g], want), (g, got[g], want)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(-(2**62), 2**62), st.integers(0, 3), st.integers(-(2**31), 2**31 - 1)
        ),
        min_size=1,
        max_size=40,
    )
)
def test_group_ids_are_np_unique_s_for_wide_columns(rows: list[tuple[int, int, int]]) -> None:
    cols = [np.array([r[i] for r in rows], np.int64) for i in range(3)]
    ids, keys = group_ids(*cols)
    want, inverse = np.unique(np.stack(cols, 1), axis=0, return_inverse=True)
    assert np.array_equal(keys, want)
    assert np.array_equal(ids, inverse.reshape(-1))
