"""Clocks beside a broken fabric, at each budget (issue 36).

``python -m bench faultclocks`` prints, per budget and fabric size, the p99 offset
error of one window of ``cwctl scan --sim --hosts N --budget B`` on a healthy fabric and
beside each fault of ``FAULTS`` (a dead, slow or congested spine or leaf-spine link),
side by side, and each faulted row's ratio to the healthy one: the bar is 2x at the
watch budget. The simulator's defaults otherwise (seed 1, load 0.2, hw stamps, the
budget's rate, window and source ports), the clock solve alone (``cwctl.sync.solve``,
what the sliding solve of the TUI and the watch starts from) and, beside it ("scan"),
the solve ``cwctl scan`` makes (``session.analyse``: ``sync.spinepaths.solve_on_spines``
with the spines the window's path records name; "paths": whether its second solve was
kept); offsets against the truth stated at the solution's own ``t_ref`` and reference, every
host but the reference, less the median error (what every host shares is the
reference's own error, which no loop can see), p99 and max over hosts. Also the
solve's residual rms, the median stated uncertainty and the pairs it calls bimodal
across their flows (``quality.bimodal_pairs``).

``CWCTL_BENCH_FAULT_SIZES`` (default ``64,256,512``) and ``CWCTL_BENCH_FAULT_BUDGETS``
(default ``watch,quick``; quick runs at the largest size only) choose the rows;
``CWCTL_BENCH_FAULT_SEED`` the seed.
"""

from __future__ import annotations

import os

import numpy as np

from cwctl import settings
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.sim.truth import truth_at
from cwctl.sync import ClockSolution, solve
from cwctl.sync.spinepaths import solve_on_spines
from cwctl.telemetry.routes import spine_legs
from cwctl.transport.sim import simulate

FAULTS = (
    "switch:spine2:down",
    "switch:spine2:slow",
    "switch:spine2:congested",
    "link:leaf3-spine2:down",
    "link:leaf3-spine2:slow",
    "link:leaf3-spine2:congested",
)
WATCH_BAR = 2.0  # a faulted row's p99 within this many times the healthy one's


def window_errors(
    hosts: int, budget: str, fault: str | None, seed: int
) -> tuple[ClockSolution, np.ndarray, ClockSolution, np.ndarray]:
    """One window's solution and every host's |offset error| but the reference's, less
    the median error: ``solve``'s, then the scan's (``solve_on_spines``)."""
    options = SimOptions(hosts=hosts, seed=seed, faults=(fault,) if fault else ())
    request = ScanRequest(sim=options).at_budget(budget)
    window = simulate(options, settings.BUDGETS[budget].duration_s, request=request)
    assert window.truth is not None
    out: list[tuple[ClockSolution, np.ndarray]] = []
    legs = spine_legs(window.table, window.topology, window.paths)
    for sol in (solve(window.table), solve_on_spines(window.table, legs)):
        assert sol.reference is not None
        truth = truth_at(window.truth, sol.reference, sol.t_ref_ns)["offset_ns"]
        expected = np.array([truth[h] for h in sol.hosts])
        solved = np.isfinite(sol.offset_ns) & np.array([h != sol.reference for h in sol.hosts])
        err = (sol.offset_ns - expected)[solved]
        out.append((sol, np.abs(err - np.median(err))))
    return out[0][0], out[0][1], out[1][0], out[1][1]


def main() -> None:
    sizes = [int(s) for s in os.environ.get("CWCTL_BENCH_FAULT_SIZES", "64,256,512").split(",")]
    budgets = os.environ.get("CWCTL_BENCH_FAULT_BUDGETS", "watch,quick").split(",")
    seed = int(os.environ.get("CWCTL_BENCH_FAULT_SEED", str(settings.SIM_SEED)))
    print(
        f"p99 |offset error| less the median, ns, one window, seed {seed}, load"
        f" {settings.SIM_LOAD}, hw stamps; x healthy: the faulted p99 over the healthy one"
        f" (bar at watch: {WATCH_BAR:g}x)"
    )
    print(
        f"{'budget':>7}{'hosts':>7}{'fault':>30}{'p99':>10}{'max':>10}{'x healthy':>11}"
        f"{'rms':>10}{'unc p50':>9}{'bimodal':>9}{'scan p99':>10}{'x healthy':>11}{'paths':>7}"
    )
    worst = 0.0
    for budget in budgets:
        for hosts in sizes if budget == settings.BUDGET_WATCH else sizes[-1:]:
            healthy = scan_healthy = 0.0
            for fault in (None, *FAULTS):
                sol, err, scan, scan_err = window_errors(hosts, budget, fault, seed)
                p99 = float(np.percentile(err, 99))
                scan_p99 = float(np.percentile(scan_err, 99))
                healthy = healthy or p99
                scan_healthy = scan_healthy or scan_p99
                ratio, scan_ratio = p99 / healthy, scan_p99 / scan_healthy
                if budget == settings.BUDGET_WATCH and fault:
                    worst = max(worst, ratio, scan_ratio)
                used = scan.quality.get("spine_paths", {}).get("used", False)
                q = sol.quality
                bimodal = q.get("bimodal_pairs", "-")  # the code before issue 36 had none
                print(
                    f"{budget:>7}{hosts:>7}{fault or 'healthy':>30}{p99:>10.1f}"
                    f"{float(err.max()):>10.1f}{ratio:>11.2f}{q['residual_rms_ns']:>10.1f}"
                    f"{float(np.nanmedian(sol.uncertainty_ns)):>9.1f}{bimodal:>9}"
                    f"{scan_p99:>10.1f}{scan_ratio:>11.2f}{'yes' if used else 'no':>7}",
                    flush=True,
                )
    if settings.BUDGET_WATCH in budgets:
        verdict = "within" if worst <= WATCH_BAR else "BEYOND"
        print(f"worst faulted row at watch: {worst:.2f}x healthy ({verdict} {WATCH_BAR:g}x)")


if __name__ == "__main__":
    main()
