"""Pair offsets on the mean of a leaf's spines' paths (``sync.spinepaths``, issue 36):
with the spines the path records name, a quick scan's NIC-stamped clocks stop following
each leaf's shortest uplink's asymmetry."""

from __future__ import annotations

import numpy as np

from cwctl import settings
from cwctl.scan.collection import Collection
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.sim.truth import truth_at
from cwctl.sync import ClockSolution, solve
from cwctl.sync.spinepaths import solve_on_spines
from cwctl.telemetry.routes import spine_legs
from cwctl.transport.sim import simulate

QUICK = settings.BUDGETS[settings.BUDGET_QUICK]


def quick_scan(seed: int, load: float = 0.4, fault: str | None = None) -> Collection:
    """``cwctl scan --sim --hosts 256 --load L --seed S`` at the quick budget, hw stamps."""
    options = SimOptions(
        hosts=256, seed=seed, timestamps="hw", load=load, faults=(fault,) if fault else ()
    )
    request = ScanRequest(sim=options).at_budget(settings.BUDGET_QUICK)
    return simulate(options, QUICK.duration_s, request=request)


def p99_less_median(window: Collection, sol: ClockSolution) -> float:
    """p99 over hosts of |offset - truth| less the median error, the reference left out."""
    assert window.truth is not None and sol.reference is not None
    truth = truth_at(window.truth, sol.reference, sol.t_ref_ns)["offset_ns"]
    others = [i for i, h in enumerate(sol.hosts) if h != sol.reference]
    err = np.array([sol.offset_ns[i] - truth[sol.hosts[i]] for i in others])
    return float(np.percentile(np.abs(err - np.median(err)), 99))


def test_the_quick_budget_meets_30_ns_on_the_seed_it_missed() -> None:
    # seed 1: 30.8 ns with one solve (the leaves' shortest uplinks), 29.8 on mean paths
    window = quick_scan(1)
    legs = spine_legs(window.table, window.topology, window.paths)
    assert legs is not None
    traced = np.mean(legs.fwd >= 0)
    assert 0.1 < traced < 0.5  # a first scan traces a fifth of the flow directions
    plain = p99_less_median(window, solve(window.table))
    on_spines = solve_on_spines(window.table, legs)
    assert on_spines.quality["spine_paths"]["used"]
    assert p99_less_median(window, on_spines) <= 30.0 < plain


def test_the_leaves_shift_less_on_mean_paths() -> None:
    # seed 3: 27.4 -> 20.0 ns; the leaf-wide shifts are most of what moved
    window = quick_scan(3)
    legs = spine_legs(window.table, window.topology, window.paths)
    plain = p99_less_median(window, solve(window.table))
    assert p99_less_median(window, solve_on_spines(window.table, legs)) < plain - 4.0


def test_without_path_records_it_is_the_one_solve() -> None:
    window = quick_scan(2)
    plain = solve(window.table)
    alone = solve_on_spines(window.table, spine_legs(window.table, window.topology, []))
    np.testing.assert_array_equal(alone.offset_ns, plain.offset_ns)
    assert "spine_paths" not in alone.quality


def test_beside_a_congested_spine_the_first_solve_stands() -> None:
    # the queued floors through spine2 fit no path model: the moved legs left the loops
    # open (residual rms 113 -> 161 ns) and p99 27.2 -> 103.9 ns had the second been kept
    window = quick_scan(1, load=0.2, fault="switch:spine2:congested")
    legs = spine_legs(window.table, window.topology, window.paths)
    plain = solve(window.table)
    chosen = solve_on_spines(window.table, legs)
    assert not chosen.quality["spine_paths"]["used"]
    assert chosen.quality["spine_paths"]["residual_rms_ns"] > plain.quality["residual_rms_ns"]
    np.testing.assert_array_equal(chosen.offset_ns, plain.offset_ns)
    assert p99_less_median(window, chosen) < 40.0
