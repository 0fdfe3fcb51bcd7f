"""Rebalancing jobs' elephant flows on the simulated fabric, against ECMP's own spread.

Jobs from the simulator's job model (``cwctl.jobs.simjobs``: sizes 1-16 hosts), placed
``packed`` (runs of neighbours, as a scheduler packs them) or ``scattered`` (the same
sizes on hosts drawn at random: a fragmented cluster). Each job's ranks talk in a ring,
4 TCP connections per ring edge from ephemeral ports, 20-100 Gbit/s per host
(``cwctl.sim.flows``). ECMP: the switches' secret per-switch hash of each 5-tuple.

cwctl sees the flows as ``ss`` would (rates measured with 5 % error) and traces the
current and 16 candidate wire ports of each, both ways; it plans with
``actions.balance.rebalance`` (target 1.2, min gain 1e-3). The judge re-hashes every
flow on its planned port with the simulator's secret hash and measures each leaf's
uplinks (``actions.simbalance``). Columns:

- ``up``: max/mean load of each leaf's uplinks, the mean over leaves and the worst leaf
  (true loads), under ECMP and after cwctl's plan; ``down`` the same for the links from
  the spines into each leaf (a flow's spine picks both, so a plan must mind both);
- ``bound``: what no choice of ports does better than, per leaf (whole flows on ``m``
  links: the max is at least the mean, the biggest flow, and the m-th plus the
  (m+1)-th biggest); it ignores that each flow has only its traced ports;
- ``moved``: flows moved (of the elephants cwctl could balance) and their bit/s (of all);
- ``rules/host``: nft map entries the paired translation installs per host (two per
  moved flow at each end), the mean over hosts with any and the most;
- ``traces``: tuples traced per host with flows (each direction of every flow's current
  and candidate ports);
- ``plan s``: CPU seconds to build the core's input and plan.

Then, on the 1 000-host scattered case, what each knob trades. Deterministic by seed
(but the CPU seconds). Run: ``.venv/bin/python -m bench rebalance_sim`` (about 30 s of
CPU).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from typing import Any

from cwctl.actions.simbalance import Links, SimRebalance, run
from cwctl.jobs.simjobs import sim_jobs
from cwctl.sim.flows import JobFlow, job_flows, scattered
from cwctl.sim.model import FabricModel

SEED = 1
HOSTS_PER_LEAF = 8
CASES = (  # hosts, spines, jobs, placement
    (64, 4, 8, "scattered"),
    (1000, 8, 100, "packed"),
    (1000, 8, 100, "scattered"),
)
KNOBS: tuple[dict[str, Any], ...] = (
    {},
    {"min_gain": 0.01},
    {"min_gain": 0.05},
    {"target": 1.5},
    {"k": 4},
    {"k": 8},
    {"noise": 0.0},
    {"noise": 0.2},
)


def fabric(hosts: int, spines: int, jobs: int, placement: str) -> tuple[FabricModel, list[JobFlow]]:
    model = FabricModel.leaf_spine(hosts, HOSTS_PER_LEAF, spines, seed=SEED)
    sets = [j.hosts for j in sim_jobs(model.fabric.hosts, jobs, SEED).jobs]
    if placement == "scattered":
        sets = scattered(model.fabric.hosts, [len(s) for s in sets], SEED)
    return model, job_flows(sets, seed=SEED)


def spread(ratios: Sequence[float]) -> str:
    return f"{statistics.mean(ratios):.2f}/{max(ratios):.2f}"


def columns(links: Links) -> str:
    return " ".join(f"{spread(links.ratios(w)):>10}" for w in ("before", "bound", "after"))


def row(r: SimRebalance, flows: Sequence[JobFlow]) -> str:
    total = sum(f.bps for f in flows)
    rules = list(r.rules.values()) or [0]
    hosts = len({f.src for f in flows} | {f.dst for f in flows})
    return (
        f"{columns(r.up)} {columns(r.down)}"
        f" {len(r.plan.moves):>5}/{r.elephants:<5} {r.moved_bps_true / 1e9:>6.0f} Gb/s"
        f" {100 * r.moved_bps_true / total:>3.0f} % {statistics.mean(rules):>5.1f}/{max(rules):<3}"
        f" {r.traces / hosts:>6.0f} {r.plan_s:>6.2f}"
    )


HEADER = (
    f"{'up: ECMP':>10} {'bound':>10} {'cwctl':>10} {'down: ECMP':>10} {'bound':>10} {'cwctl':>10}"
    f" {'moved':>11} {'bit/s moved':>15} {'rules/host':>10} {'traces':>6} {'plan s':>6}"
)


def main(argv: list[str] | None = None) -> None:
    print("max/mean load of each leaf's uplinks (up) and of the links into it (down):")
    print("the mean over the leaves whose links carry data / the worst leaf, true loads")
    print(f"{'hosts':>5} {'spines':>6} {'jobs':>4} {'placement':>9} {'flows':>5} " + HEADER)
    for hosts, spines, jobs, placement in CASES:
        model, flows = fabric(hosts, spines, jobs, placement)
        r = run(model, flows, seed=SEED)
        lead = f"{hosts:>5} {spines:>6} {jobs:>4} {placement:>9} {len(flows):>5} "
        print(lead + row(r, flows), flush=True)
    print("\n1000 hosts, 8 spines, 100 jobs, scattered: one knob changed at a time")
    print(f"{'knob':>26} " + HEADER)
    model, flows = fabric(1000, 8, 100, "scattered")
    for knob in KNOBS:
        r = run(model, flows, seed=SEED, **knob)
        name = ", ".join(f"{k}={v}" for k, v in knob.items()) or "defaults"
        print(f"{name:>26} " + row(r, flows), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
