"""The clock solver on synthetic exchanges with a known truth (tests/unit/sync_helpers.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cwctl.records import ProbeTable
from cwctl.sync import one_way_delays, solve
from cwctl.sync.baseline import ntp_solve
from cwctl.sync.coded import coded_filter
from cwctl.sync.incremental import SlidingSolver
from tests.unit.sync_helpers import errors, make, names
from tests.unit.sync_synthetic import T0_NS, SyntheticClocks


def test_noise_free_exchanges_give_exact_offsets_and_drifts() -> None:
    table, clocks, _ = make(24, 6, seed=3)
    sol = solve(table)
    off_err, drift_err = errors(sol, clocks)
    assert np.all(np.isfinite(sol.offset_ns))
    assert np.max(np.abs(off_err)) < 1.0  # timestamps are rounded to whole ns
    assert np.max(np.abs(drift_err)) < 1.0
    assert sol.quality["fwd_dropped_pairs"] == 0
    assert sol.offset_ns[sol.hosts.index(sol.reference)] == 0.0


def test_margin_method_is_exact_on_noise_free_exchanges_too() -> None:
    table, clocks, _ = make(12, 4, seed=5)
    off_err, drift_err = errors(solve(table, method="margin"), clocks)
    assert np.max(np.abs(off_err)) < 1.0
    assert np.max(np.abs(drift_err)) < 1.0


def test_network_effect_beats_pairwise_chaining_with_noise() -> None:
    kw = {"noise_ns": 20.0, "queue_mean_ns": 800.0, "queue_prob": 0.6, "pairs_per_edge": 60}
    table, clocks, _ = make(48, 8, seed=7, **kw)
    net, _ = errors(solve(table), clocks)
    pairwise, _ = errors(solve(table, network=False), clocks)
    ntp, _ = errors(ntp_solve(table), clocks)
    assert np.percentile(np.abs(net), 99) < 0.7 * np.percentile(np.abs(pairwise), 99)
    assert np.percentile(np.abs(net), 99) < np.percentile(np.abs(ntp), 99) / 5
    sol = solve(table)
    # the error bar covers the error for nearly every host
    assert np.mean(np.abs(net) <= sol.uncertainty_ns) >= 0.9


def test_operator_reference_is_pinned_at_zero() -> None:
    table, clocks, _ = make(10, 4, seed=1)
    sol = solve(table, reference="h007")
    assert sol.reference == "h007"
    assert sol.offset_ns[7] == 0.0 and sol.drift_ppb[7] == 0.0
    assert np.max(np.abs(errors(sol, clocks)[0])) < 1.0


def test_unknown_reference_falls_back_to_best_connected_and_says_so() -> None:
    table, _, _ = make(8, 2, seed=1)
    sol = solve(table, reference="nope")
    assert sol.reference in sol.hosts
    assert "nope" in sol.quality["reference_note"]


def test_static_asymmetry_shows_in_that_edges_residual() -> None:
    n = 32
    _, clocks, edges = make(n, 6, seed=11)
    pairs = {(int(a), int(b)) for a, b in edges}
    # an edge probed one way only, so the asymmetry lives on one directed row
    target = next(i for i, (a, b) in enumerate(edges) if (int(b), int(a)) not in pairs)
    asym = np.zeros(len(edges))
    asym[target] = 2_000.0
    table, _, _ = make(n, 6, seed=11, edges=edges, clocks=clocks, asymmetry_ns=asym)
    sol = solve(table)
    lo, hi = sorted(int(x) for x in edges[target])
    by_pair = {(e["src"], e["dst"]): e for e in sol.edges}
    edge = by_pair[(names(n)[lo], names(n)[hi])]
    others = [abs(e["residual_ns"]) for e in sol.edges if e is not edge]
    assert abs(edge["residual_ns"]) > 500.0  # half the asymmetry, less its leverage
    assert max(others) < abs(edge["residual_ns"]) / 3
    assert set(edge) >= {"src", "dst", "pair_offset_ns", "solved_diff_ns", "residual_ns"}


def test_disconnected_components_each_get_their_own_reference() -> None:
    n = 13
    a = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]])
    b = np.array([[5, 6], [6, 7], [7, 8], [8, 5], [5, 9], [9, 10], [10, 11], [11, 5]])
    edges = np.concatenate([a, b])  # host 4 and 12 probe nobody
    table, clocks, _ = make(n, edges=edges, seed=2)
    sol = solve(table, reference="h001")
    assert sol.reference == "h001"
    assert sol.quality["components"] == 2
    cref = sol.component_reference
    assert {cref[i] for i in range(4)} == {"h001"}
    assert {cref[i] for i in (5, 6, 7, 8, 9, 10, 11)} == {"h005"}  # best connected
    assert cref[4] is None and cref[12] is None
    assert np.isnan(sol.offset_ns[4]) and np.isnan(sol.uncertainty_ns[12])
    for ref, members in ((1, [0, 1, 2, 3]), (5, [5, 6, 7, 8, 9, 10, 11])):
        truth, _ = clocks.relative_to(ref, sol.t_ref_ns)
        # the second component is relative to h005 at the same reference-clock instant
        assert np.max(np.abs(sol.offset_ns[members] - truth[members])) < 50.0


def test_coded_filter_drops_exactly_the_disturbed_pairs() -> None:
    table, clocks, _ = make(10, 4, seed=4, noise_ns=3.0)
    rng = np.random.default_rng(0)
    second = np.flatnonzero(table.idx == 1)
    hit = rng.choice(second, 25, replace=False)
    disturbed = table.select(np.arange(len(table)))
    late = np.zeros(len(table), np.int64)
    late[hit] = 3_000  # the second probe queued 3 us on the way out
    disturbed.t2 = disturbed.t2 + late
    disturbed.t3 = disturbed.t3 + late
    disturbed.t4 = disturbed.t4 + late
    filt = coded_filter(disturbed)
    partner = hit - 1  # rows are generated pairwise: idx 0 right before idx 1
    assert not filt.fwd_ok[hit].any() and not filt.fwd_ok[partner].any()
    assert filt.rev_ok[hit].all()  # the reply leg kept its spacing
    assert filt.fwd_ok.sum() == len(table) - 50
    assert filt.tolerance_ns["hw"] >= 20.0
    off_err, _ = errors(solve(disturbed), clocks)
    assert np.max(np.abs(off_err)) < 15.0


def test_sw_tolerance_is_wider_than_hw() -> None:
    hw = coded_filter(make(8, 2, seed=1, noise_ns=5.0)[0])
    sw = coded_filter(make(8, 2, seed=1, noise_ns=800.0, ts="sw")[0])
    assert sw.tolerance_ns["sw"] > 10 * hw.tolerance_ns["hw"]


def test_tree_graph_gives_the_pairwise_answers() -> None:
    edges = np.array([[0, 1], [0, 2], [2, 3], [2, 4], [4, 5]])
    table, _, _ = make(6, edges=edges, seed=9, noise_ns=10.0)
    sol = solve(table)
    assert len(sol.edges) == len(edges)
    for e in sol.edges:
        assert abs(e["residual_ns"]) < 1e-6
        diff = sol.offset_ns[sol.hosts.index(e["dst"])] - sol.offset_ns[sol.hosts.index(e["src"])]
        assert abs(diff - e["pair_offset_ns"]) < 1e-3


def test_one_way_delays_are_the_true_delays_after_correction() -> None:
    table, _, _ = make(8, 4, seed=6, delay_ns=1_500.0)
    fwd, rev = one_way_delays(table, solve(table))
    assert np.allclose(fwd, 1_500.0, atol=2.0)
    assert np.allclose(rev, 1_500.0, atol=2.0)


def test_ntp_baseline_is_exact_on_symmetric_noise_free_exchanges_without_drift() -> None:
    n = 10
    clocks = SyntheticClocks(
        np.random.default_rng(1).uniform(-1e6, 1e6, n), np.zeros(n), T0_NS + 10**9
    )
    table, _, _ = make(n, 4, clocks=clocks)
    sol = ntp_solve(table)
    assert np.max(np.abs(errors(sol, clocks)[0])) < 1.0


def test_nothing_to_solve_gives_nan_not_an_error() -> None:
    empty = ProbeTable.empty(["a", "b"])
    sol = solve(empty)
    assert np.isnan(sol.offset_ns).all() and sol.reference is None
    table, _, _ = make(4, 2)
    lost = table.select(np.arange(len(table)))
    lost.t2 = np.zeros_like(lost.t2)
    assert np.isnan(solve(lost).offset_ns).all()


@pytest.mark.parametrize("method", ["envelope", "hybrid"])
def test_sliding_solver_matches_a_full_solve_and_warm_starts(method: str) -> None:
    kw = {"noise_ns": 10.0, "pairs_per_edge": 40, "duration_s": 4.0}
    table, clocks, _ = make(40, 6, seed=8, **kw)
    half = T0_NS + 2 * 10**9
    first, second = table.select(table.t1 < half), table.select(table.t1 >= half)
    solver = SlidingSolver(window_s=2.5, method=method)  # type: ignore[arg-type]
    sol1 = solver.update(first)
    sol2 = solver.update(second)
    assert solver.last_info["warm"] is True
    window = solver.table()
    assert window.t1.min() >= table.t1.max() - int(2.5e9) - 1
    full = solve(window, method=method)  # type: ignore[arg-type]
    # the same answer up to the robust (Huber) iteration: the sliding solver carries
    # its weights over and reweights once per tick, a cold solve reweights from scratch
    assert np.allclose(sol2.offset_ns, full.offset_ns, atol=1.0)
    assert solver.last_info["graph_reused"] is True  # same pairs in both windows
    assert sol2.quality["cg_iterations"] < full.quality["cg_iterations"]
    assert sol1.t_ref_ns < sol2.t_ref_ns
    assert np.max(np.abs(errors(sol2, clocks)[0])) < 20.0


def test_margin_envelopes_per_group_with_empty_clouds_left_open() -> None:
    from cwctl.sync.margin import _envelopes

    v = np.array([5.0, 3.0, 1.0, -1.0, 7.0, 2.0])
    group = np.array([0, 0, 0, 0, 1, 2])
    upper = np.array([True, True, False, False, True, False])
    top, bottom = _envelopes(v, group, upper, 4)
    assert top.tolist() == [3.0, 7.0, np.inf, np.inf]  # lowest upper point per group
    assert bottom.tolist() == [1.0, -np.inf, 2.0, -np.inf]  # highest lower point per group


def test_sliding_window_counts_seconds_of_probing_not_the_idle_time_between_scans() -> None:
    """A watch's scans: 2 s of probing every 30 s. A window of 3 s of probing keeps the
    newest scan and the last second of the one before, though 28 s of idle lie between."""
    table, _, _ = make(8, 3, seed=2, pairs_per_edge=20, duration_s=2.0)

    def later(s: float) -> Any:
        out = table.select(np.ones(len(table), np.bool_))
        for column in ("t1", "t2", "t3", "t4"):
            setattr(out, column, getattr(out, column) + int(s * 1e9))
        return out

    solver = SlidingSolver(window_s=3.0)
    for k in range(3):
        solver.update(later(30.0 * k))
    kept = solver.table().t1
    newest_start, before_end = int(later(60.0).t1.min()), int(later(30.0).t1.max())
    assert kept.max() == later(60.0).t1.max()
    assert before_end - 1.2e9 < kept.min() < before_end - 0.8e9  # 1 s of the scan before
    assert not (kept < int(later(30.0).t1.min())).any()  # nothing of the first scan
    spread = SlidingSolver(window_s=3.0, max_span_s=10.0)
    for k in range(3):
        spread.update(later(30.0 * k))
    assert spread.table().t1.min() >= newest_start  # the span caps it: this scan alone
