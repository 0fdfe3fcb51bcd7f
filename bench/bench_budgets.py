"""Probe budgets: what each costs an agent, and the accuracy it buys (issue 27).

``python -m bench budgets`` prints, side by side in one run:

1. Accuracy against probing: p99 |offset error| (hw and sw stamps) of one scan of
   ``cwctl scan --sim --hosts 256 --seed 4242 --load 0.4`` at each (coded pairs/s per
   peer, seconds) of ``GRID``, the two budgets marked; offsets against the truth stated
   at the report's own ``t_ref_ns`` (``cwctl.session.analyse``), every host but the
   reference. Then the ``watch`` budget's sliding solve after 5, 30 and 60 s of
   watching (``ScanSession(sliding=True)``), against ``quick``'s figure.
2. Each budget's cost: ``cwctl scan --local 8 --budget NAME --format json`` (8 agents on
   loopback, 7 peers each, on this machine's load), each agent's own figures
   (``hosts[].agent``: CPU share while probing, kbit/s sent, datagrams, CPU per 1 000
   datagrams) beside what ``cwctl.budgets.cost`` expects at 7 peers.

``CWCTL_BENCH_SEEDS=1,2`` adds seeds to part 1 (default 4242 only).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from cwctl import budgets, settings
from cwctl.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.session import ScanSession, analyse
from cwctl.snapshot import FabricSnapshot
from cwctl.transport.sim import simulate

CWCTL = str(Path(sys.executable).with_name("cwctl"))
HOSTS, LOAD = 256, 0.4
QUICK = settings.BUDGETS[settings.BUDGET_QUICK]
WATCH = settings.BUDGETS[settings.BUDGET_WATCH]
GRID = (
    (WATCH.rate, WATCH.duration_s),
    (2.0, 20.0),
    (10.0, 2.0),
    (10.0, 10.0),
    (QUICK.rate, QUICK.duration_s),
    (QUICK.rate, 3.0),
)
WATCHED_S = (5.0, 30.0, 60.0)


def p99_error_ns(snapshot: FabricSnapshot) -> float:
    """p99 |offset - truth| over every solved host but the reference."""
    truth = (snapshot.truth or {})["offset_ns"]
    err = [
        abs(h.offset_ns - truth[h.name])
        for h in snapshot.hosts
        if h.offset_ns is not None and h.name != snapshot.reference
    ]
    return float(np.percentile(err, 99))


def one_scan(stamps: str, seed: int, rate: float, duration_s: float, budget: str) -> float:
    """One scan's p99 at ``rate`` x ``duration_s``, from the ports of ``budget``."""
    options = SimOptions(hosts=HOSTS, seed=seed, timestamps=stamps, load=LOAD)
    request = ScanRequest(sim=options, overrides=ProbeOverrides(rate=rate)).at_budget(budget)
    return p99_error_ns(analyse(simulate(options, duration_s, request=request)))


async def watched(stamps: str, seed: int) -> dict[float, float]:
    options = SimOptions(hosts=HOSTS, seed=seed, timestamps=stamps, load=LOAD)
    request = ScanRequest(sim=options).at_budget(settings.BUDGET_WATCH)
    out: dict[float, float] = {}
    async with ScanSession(request, sliding=True) as session:
        for k in range(1, int(WATCHED_S[-1] / WATCH.duration_s) + 1):
            snapshot = await session.scan()
            if k * WATCH.duration_s in WATCHED_S:
                out[k * WATCH.duration_s] = p99_error_ns(snapshot)
    return out


def accuracy(seeds: list[int]) -> None:
    print(
        f"\naccuracy: p99 |offset error| ns, {HOSTS} hosts, load {LOAD}, K={settings.PROBE_PEERS}"
        ", one scan, against the truth at the report's t_ref; source ports: the budget's"
        f" (rows of neither: quick's, {QUICK.ports})"
    )
    print(f"{'pairs/s x s':>14}{'pairs/peer':>12}{'budget':>8}" + "".join(
        f"{f'{ts} s{seed}':>11}" for ts in ("hw", "sw") for seed in seeds))  # fmt: skip
    quick: dict[tuple[str, int], float] = {}
    for rate, duration in GRID:
        name = next(
            (
                b.name
                for b in settings.BUDGETS.values()
                if (b.rate, b.duration_s) == (rate, duration)
            ),
            "",
        )
        row = f"{f'{rate:g} x {duration:g}':>14}{rate * duration:>12g}{name:>8}"
        for ts in ("hw", "sw"):
            for seed in seeds:
                p99 = one_scan(ts, seed, rate, duration, name or settings.BUDGET_QUICK)
                if name == settings.BUDGET_QUICK:
                    quick[(ts, seed)] = p99
                row += f"{p99:>11.1f}"
        print(row, flush=True)
    print(f"\nwatch budget, sliding solve ({WATCH.rate:g} pairs/s, {WATCH.duration_s:g} s windows)")
    print(f"{'stamps, seed':>14}" + "".join(f"{f'{s:g} s':>10}" for s in WATCHED_S)
          + f"{'quick':>10}{'ratio':>8}")  # fmt: skip
    for ts in ("hw", "sw"):
        for seed in seeds:
            got = asyncio.run(watched(ts, seed))
            q = quick[(ts, seed)]
            ratio = got[WATCHED_S[-1]] / q
            print(f"{f'{ts}, {seed}':>14}" + "".join(f"{got[s]:>10.1f}" for s in WATCHED_S)
                  + f"{q:>10.1f}{ratio:>8.2f}", flush=True)  # fmt: skip


def agent_cost() -> None:
    peers = 7
    print(f"\nagent cost per budget: cwctl scan --local 8 (each agent {peers} peers), own figures")
    print(
        f"{'budget':>8}{'CPU %':>14}{'expected':>10}{'kbit/s sent':>16}{'expected':>10}"
        f"{'datagrams/s':>13}{'CPU ms/1000 dgr':>17}"
    )
    for b in settings.BUDGETS.values():
        argv = [CWCTL, "scan", "--local", "8", "--budget", b.name, "--format", "json"]
        done = subprocess.run(argv, capture_output=True, text=True)
        agents = [h["agent"] for h in json.loads(done.stdout)["hosts"] if h.get("agent")]
        share = [100 * (a["cpu_share"] or 0.0) for a in agents]
        kbit = [a["tx_kbit_s"] for a in agents]
        wall = b.duration_s
        dgrams = [(a["tx_packets"] + a["rx_packets"]) for a in agents]
        per_1000 = [1e6 * a["probe_cpu_s"] / max(d, 1) for a, d in zip(agents, dgrams, strict=True)]
        expect = budgets.cost(b.rate, peers)
        print(
            f"{b.name:>8}{f'{min(share):.2f}-{max(share):.2f}':>14}{expect.core_pct:>10.2f}"
            f"{f'{min(kbit):.0f}-{max(kbit):.0f}':>16}{expect.kbit_s:>10.0f}"
            f"{np.median(dgrams) / wall:>13.0f}{np.median(per_1000):>17.2f}",
            flush=True,
        )


def main() -> None:
    seeds = [int(s) for s in os.environ.get("CWCTL_BENCH_SEEDS", "4242").split(",") if s]
    accuracy(seeds)
    agent_cost()


if __name__ == "__main__":
    main()
