"""Invariants of the clock solver (hypothesis): shifts, permutations, trees, exactness."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.sync import solve
from tests.unit.sync_helpers import errors, make, permute_hosts, shift_host

SETTINGS = settings(max_examples=12, deadline=None)
noisy = {"noise_ns": 6.0, "queue_mean_ns": 400.0, "queue_prob": 0.5}


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    host=st.integers(1, 11),
    shift_ns=st.integers(-10_000_000, 10_000_000),
)
def test_a_constant_on_one_clock_moves_only_that_hosts_offset(
    seed: int, host: int, shift_ns: int
) -> None:
    table, _, _ = make(12, 4, seed=seed, **noisy)
    before = solve(table, reference="h000")
    after = solve(shift_host(table, host, shift_ns), reference="h000")
    delta = after.offset_ns - before.offset_ns
    expected = np.zeros(12)
    expected[host] = shift_ns
    assert np.allclose(delta, expected, atol=0.05)
    assert np.allclose(after.drift_ppb, before.drift_ppb, atol=1e-3)


@SETTINGS
@given(seed=st.integers(0, 10_000), perm_seed=st.integers(0, 10_000))
def test_host_order_changes_nothing(seed: int, perm_seed: int) -> None:
    table, _, _ = make(12, 4, seed=seed, **noisy)
    perm = np.random.default_rng(perm_seed).permutation(12)
    a = solve(table)
    b = solve(permute_hosts(table, perm))
    assert a.reference == b.reference
    by_name = {h: i for i, h in enumerate(b.hosts)}
    order = [by_name[h] for h in a.hosts]
    assert np.allclose(a.offset_ns, b.offset_ns[order], atol=1e-3)
    assert np.allclose(a.drift_ppb, b.drift_ppb[order], atol=1e-3)
    assert np.allclose(a.uncertainty_ns, b.uncertainty_ns[order], atol=0.05)


@st.composite
def trees(draw: st.DrawFn) -> np.ndarray:
    n = draw(st.integers(2, 10))
    parents = [draw(st.integers(0, i - 1)) for i in range(1, n)]
    flip = draw(st.lists(st.booleans(), min_size=n - 1, max_size=n - 1))
    rows = [
        (c, p) if f else (p, c) for c, (p, f) in enumerate(zip(parents, flip, strict=True), start=1)
    ]
    return np.array(rows)


@SETTINGS
@given(edges=trees(), seed=st.integers(0, 10_000))
def test_a_tree_shaped_probe_graph_gives_exactly_the_pairwise_answers(
    edges: np.ndarray, seed: int
) -> None:
    n = len(edges) + 1
    table, _, _ = make(n, edges=edges, seed=seed, **noisy)
    sol = solve(table)
    index = {h: i for i, h in enumerate(sol.hosts)}
    assert len(sol.edges) == n - 1
    for e in sol.edges:
        diff = sol.offset_ns[index[e["dst"]]] - sol.offset_ns[index[e["src"]]]
        assert abs(diff - e["pair_offset_ns"]) < 1e-2
        assert abs(e["residual_ns"]) < 1e-2


@SETTINGS
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 20),
    k=st.integers(2, 6),
    delay_ns=st.floats(200.0, 50_000.0),
)
def test_noise_free_exchanges_give_exact_offsets_and_drifts(
    seed: int, n: int, k: int, delay_ns: float
) -> None:
    table, clocks, _ = make(n, k, seed=seed, delay_ns=delay_ns, pairs_per_edge=12)
    sol = solve(table)
    off_err, drift_err = errors(sol, clocks)
    # stamps are whole ns: each difference is off by up to 1 ns, and the hard-margin
    # intercept rests on extreme points, so "exact" means within a couple of ns
    assert np.max(np.abs(off_err)) < 2.5
    assert np.max(np.abs(drift_err)) < 2.0  # 1 ns of rounding over a 2 s window: 0.5 ppb
    envelope, _ = errors(solve(table, method="envelope"), clocks)
    assert np.max(np.abs(envelope)) < 2.5
