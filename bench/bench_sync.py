"""Clock sync: cwctl vs pairwise-only vs an NTP-style baseline, against the simulator's truth.

``python -m bench sync`` (default, under a minute): accuracy at 256 hosts, K=10, 100 coded
pairs/s for 2 s (and once at the defaults, settings.PROBE_RATE for PROBE_DURATION_S),
load 0.4, hw and sw stamps; solve time for 100, 1 000 and 10 000 hosts.
``CWCTL_BENCH_FULL=1`` adds 100 000 hosts to the scale table (needs ~8 GB, minutes);
``CWCTL_BENCH_SEEDS=1,2,3`` picks the simulator seeds of the accuracy runs (default 1,2).

Accuracy: the offsets are compared with the simulator's clocks at the solver's own
``t_ref`` and reference (re-referenced exactly, from ``FabricModel.clocks``), over every
host but the reference. Scale: synthetic exchanges straight from
``cwctl.sync.synthetic`` (K=10, 10 coded pairs per edge, hw-like noise), so the time is
the solver's, not the simulator's.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

import numpy as np

from cwctl import settings
from cwctl.records import ProbeTable
from cwctl.sim import FabricModel, SimParams
from cwctl.sync import ClockSolution, solve
from cwctl.sync.baseline import ntp_solve
from cwctl.sync.incremental import SlidingSolver
from tests.unit.sync_synthetic import random_clocks, ring_chord_edges, synthetic_table


def truth_for(model: FabricModel, sol: ClockSolution) -> tuple[np.ndarray, np.ndarray]:
    """True offsets (ns) and drifts (ppb) of ``sol.hosts`` against its reference at t_ref."""
    idx = np.array([model.fabric.hosts.index(h) for h in sol.hosts])
    r = sol.hosts.index(sol.reference)  # type: ignore[arg-type]
    target = float(sol.t_ref_ns - model.params.epoch_ns)
    t = target
    for _ in range(5):  # true time at which the reference reads t_ref
        t -= float(model.clocks.read(idx[[r]], np.array([t]))[0]) - target
    read = model.clocks.read(idx, np.full(len(idx), t))
    drift = model.clocks.drift_ppb[idx]
    return read - read[r], drift - drift[r]


def window_drift_ppb(
    model: FabricModel, sol: ClockSolution, start_s: float, duration_s: float
) -> np.ndarray:
    """Each host's mean rate against the reference over the window, wander included.

    The truth object's ``drift_ppb`` is each clock's constant drift; the clocks also
    wander (a random walk, ``docs/simulator.md``), which changes the rate within the
    window. A line fitted to probes spread evenly over the window measures the
    least-squares slope of the clock difference over that window: that is this.
    """
    idx = np.array([model.fabric.hosts.index(h) for h in sol.hosts])
    r = sol.hosts.index(sol.reference)  # type: ignore[arg-type]
    t = np.linspace(start_s * 1e9, (start_s + duration_s) * 1e9, 201)
    read = model.clocks.read(np.repeat(idx, len(t)), np.tile(t, len(idx))).reshape(len(idx), -1)
    tc = t - t.mean()
    slope = (read - read.mean(axis=1, keepdims=True)) @ tc / (tc @ tc)
    return (slope - slope[r]) * 1e9


def accuracy(
    ts: str,
    *,
    hosts: int = 256,
    load: float = 0.4,
    seed: int = 1,
    asymmetry: float | None = None,
    window_s: float = 2.0,
    rate: float = 100.0,  # the table in docs/sync.md; the defaults are settings.PROBE_*
) -> None:
    params = SimParams(timestamps=ts, load=load, peers=10, rate=rate)
    if asymmetry is not None:  # the fraction of links with a slower direction
        params = SimParams(
            timestamps=ts, load=load, peers=10, rate=rate, asymmetric_fraction=asymmetry
        )
    model = FabricModel.leaf_spine(hosts=hosts, params=params, seed=seed)
    window = model.probe(window_s)
    table = window.table
    runs: list[tuple[str, Callable[[ProbeTable], ClockSolution]]] = [
        ("cwctl", solve),
        ("cwctl score", lambda t: solve(t, method="score")),
        ("pairwise-only", lambda t: solve(t, network=False)),
        ("ntp-style", ntp_solve),
    ]
    print(
        f"\naccuracy: --timestamps {ts}, {hosts} hosts, K=10, {rate:g} pairs/s for {window_s:g} s,"
        f" load {load}, "
        f"seed {seed}: {len(table)} probe rows"
        + (f", asymmetric links {asymmetry:.0%}" if asymmetry is not None else "")
    )
    print(
        f"{'estimator':<15}{'p50 |off| ns':>14}{'p99 |off| ns':>14}{'p99 shifted':>13}"
        f"{'p99 drift ppb':>15}{'(window)':>10}{'(shifted)':>11}{'covered':>9}{'solve s':>9}"
    )
    p99: dict[str, float] = {}
    for name, run in runs:
        started = time.perf_counter()
        sol = run(table)
        took = time.perf_counter() - started
        offset, drift = truth_for(model, sol)
        others = np.array([h != sol.reference for h in sol.hosts])
        signed = (sol.offset_ns - offset)[others]
        err = np.abs(signed)
        # the same, up to one common shift: what is left once the reference's own
        # (unobservable) cable asymmetry, which moves every host alike, is taken out
        shifted = np.abs(signed - np.median(signed))
        derr = np.abs(sol.drift_ppb - drift)[others]
        rate = window_drift_ppb(model, sol, window.start_s, window.duration_s)
        werr = np.abs(sol.drift_ppb - rate)[others]
        dsigned = (sol.drift_ppb - drift)[others]
        dshift = np.abs(dsigned - np.median(dsigned))  # the reference's own drift error out
        covered = np.mean(err <= sol.uncertainty_ns[others]) if name == "cwctl" else np.nan
        if name == "cwctl":
            bar = float(np.median(sol.uncertainty_ns[others]))
        p99[name] = float(np.percentile(err, 99))
        print(
            f"{name:<15}{np.percentile(err, 50):>14.1f}{p99[name]:>14.1f}"
            f"{np.percentile(shifted, 99):>13.1f}"
            f"{np.percentile(derr, 99):>15.1f}{np.percentile(werr, 99):>10.1f}"
            f"{np.percentile(dshift, 99):>11.1f}"
            f"{covered:>9.2f}{took:>9.2f}"
        )
        if name == "cwctl":
            q = sol.quality
            note = (
                f"  (filter tolerance {q['filter_tolerance_ns']} ns, dropped "
                f"{q['fwd_dropped_pairs']}+{q['rev_dropped_pairs']} of {q['coded_pairs']} "
                f"pair legs, residual rms {q['residual_rms_ns']} ns, {q['cg_iterations']} CG it., "
                f"median uncertainty_ns {bar:.0f})"
            )
    print(note)
    print(
        f"ratios: ntp-style/cwctl p99 = {p99['ntp-style'] / p99['cwctl']:.0f}x; "
        f"network effect: p99 {100 * (1 - p99['cwctl'] / p99['pairwise-only']):.0f}% lower "
        "than pairwise-only"
    )


def scale(sizes: list[int], *, k: int = 10, pairs_per_edge: int = 10) -> None:
    print(f"\nsolve time vs fabric size (synthetic, K={k}, {pairs_per_edge} coded pairs per edge)")
    print(
        f"{'hosts':>8}{'rows':>11}{'pairs':>9}{'fit s':>8}{'total s':>9}"
        f"{'us/host':>9}{'vs first':>10}{'CG it.':>8}"
    )
    first: float | None = None
    for n in sizes:
        clocks = random_clocks(n, seed=n)
        edges = ring_chord_edges(n, k, seed=n)
        names = [f"h{i:06d}" for i in range(n)]
        table = synthetic_table(
            names,
            edges,
            clocks,
            pairs_per_edge=pairs_per_edge,
            noise_ns=8.0,
            queue_mean_ns=300.0,
            queue_prob=0.3,
            seed=n,
            sports=4,
        )
        started = time.perf_counter()
        sol = solve(table)
        took = time.perf_counter() - started
        per_host = took / n * 1e6
        first = first or per_host
        print(
            f"{n:>8}{len(table):>11}{sol.quality['pairs']:>9}{sol.quality['fit_s']:>8.2f}"
            f"{took:>9.2f}{per_host:>9.1f}{per_host / first:>9.2f}x"
            f"{sol.quality['cg_iterations']:>8}"
        )
        del table, sol


def sliding(
    *, hosts: int = 256, ticks: int = 6, tick_s: float = 0.5, window_s: float = 2.0
) -> None:
    """The TUI's case: a window of ``window_s`` sliding by ``tick_s``, warm vs cold."""
    params = SimParams(timestamps="hw", load=0.4, peers=10, rate=100.0)
    model = FabricModel.leaf_spine(hosts=hosts, params=params, seed=1)
    solver = SlidingSolver(window_s=window_s)
    print(f"\nsliding window: {hosts} hosts, {window_s:g} s window, a tick every {tick_s:g} s")
    print(
        f"{'tick':>5}{'rows':>10}{'warm s':>9}{'cold s':>9}{'warm CG':>9}{'cold CG':>9}"
        f"{'max diff ns':>13}"
    )
    for tick in range(ticks):
        new = model.probe(tick_s).table
        started = time.perf_counter()
        warm = solver.update(new)
        warm_s = time.perf_counter() - started
        started = time.perf_counter()
        cold = solve(solver.table())
        cold_s = time.perf_counter() - started
        diff = float(np.nanmax(np.abs(warm.offset_ns - cold.offset_ns)))
        print(
            f"{tick:>5}{len(solver.table()):>10}{warm_s:>9.2f}{cold_s:>9.2f}"
            f"{warm.quality['cg_iterations']:>9}{cold.quality['cg_iterations']:>9}{diff:>13.3f}"
        )


def main() -> None:
    full = os.environ.get("CWCTL_BENCH_FULL") == "1"
    seeds = [int(x) for x in os.environ.get("CWCTL_BENCH_SEEDS", "1,2").split(",")]
    for ts in ("hw", "sw"):
        for seed in seeds:
            accuracy(ts, seed=seed)
        # at the defaults: fifty times fewer pairs a second, five times as long
        accuracy(ts, seed=seeds[0], rate=settings.PROBE_RATE, window_s=settings.PROBE_DURATION_S)
    # the same fabric with every link symmetric: what static asymmetry costs (a host's
    # own cable asymmetry biases all of its paths alike, which no loop can reveal)
    accuracy("hw", asymmetry=0.0)
    sliding()
    sizes = [100, 1_000, 10_000] + ([100_000] if full else [])
    scale(sizes)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
