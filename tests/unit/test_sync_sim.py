"""The solver against the simulator's own truth object (the scan JSON's ``truth``), small fabric."""

from __future__ import annotations

import numpy as np
import pytest

from cwctl.sim import FabricModel, SimParams
from cwctl.sync import ClockSolution, solve
from cwctl.sync.baseline import ntp_solve


def truth_errors(sol: ClockSolution, truth: dict) -> np.ndarray:
    """|offset error| per host, from the truth dict alone, re-referenced to ``sol``'s.

    The truth is at ``truth["t_ref_ns"]`` in the truth's reference clock; the solution
    at ``sol.t_ref_ns`` in its own reference's clock: move the truth along its drifts to
    the solution's instant, then re-reference.
    """
    off = np.array([truth["offset_ns"].get(h, 0.0) for h in sol.hosts])
    drift = np.array([truth["drift_ppb"].get(h, 0.0) for h in sol.hosts])
    r = sol.hosts.index(sol.reference)  # type: ignore[arg-type]
    # the solution's instant on the truth reference's clock
    dt_ns = (sol.t_ref_ns - off[r]) - truth["t_ref_ns"]
    at = off + drift * 1e-9 * dt_ns
    expected = at - at[r]
    others = np.arange(len(sol.hosts)) != r
    return np.abs(sol.offset_ns - expected)[others]


@pytest.mark.parametrize(("stamps", "bound_ns"), [("hw", 50.0), ("sw", 600.0)])
def test_simulated_fabric_offsets_match_the_truth(stamps: str, bound_ns: float) -> None:
    params = SimParams(timestamps=stamps, load=0.3, rate=50.0)
    model = FabricModel.leaf_spine(hosts=32, params=params, seed=3)
    window = model.probe(1.0)
    sol = solve(window.table)
    err = truth_errors(sol, window.truth)
    assert sol.quality["timestamp_source"] == stamps
    assert np.percentile(err, 99) < bound_ns
    ntp = truth_errors(ntp_solve(window.table), window.truth)
    assert np.percentile(ntp, 99) > 10 * np.percentile(err, 99)


def test_the_gap_s_edges_are_the_mean_of_the_points_nearest_it_on_each_side() -> None:
    from cwctl.sync.margin import _Ranks

    v = np.array([5.0, 1.0, 3.0, 2.0, 9.0, -4.0, -1.0, -2.0, 7.0])
    group = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1])
    upper = np.array([True, True, True, True, True, False, False, False, True])
    ranks = _Ranks.of(v, group, upper, 3)

    def edges(k: int) -> tuple[np.ndarray, np.ndarray]:
        return ranks.edges(np.full(2 * 3, k, np.intp))

    top, bottom = edges(3)
    assert top[0] == pytest.approx((1 + 2 + 3) / 3)  # the three lowest above
    assert bottom[0] == pytest.approx((-1 - 2 - 4) / 3)  # the three highest below
    assert top[1] == 7.0 and bottom[1] == -np.inf  # fewer points: those there are
    assert top[2] == np.inf and bottom[2] == -np.inf
    assert edges(1)[0][0] == 1.0  # k = 1: the hard margin


def test_only_noisy_stamps_search_their_slope_in_a_long_sliding_window() -> None:
    from cwctl.sync.solve import fit_table

    for stamps in ("hw", "sw"):
        model = FabricModel.leaf_spine(16, params=SimParams(timestamps=stamps, rate=20.0), seed=4)
        table = model.probe(2.0).table
        _, plain, _ = fit_table(table)
        _, searched, _ = fit_table(table, search_noisy=True)
        same = np.array_equal(plain.drift_ppb, searched.drift_ppb)
        assert same == (stamps == "hw"), stamps  # NIC stamps keep the envelope's slope
