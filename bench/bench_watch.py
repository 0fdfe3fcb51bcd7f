"""``cwctl watch``'s memory over many rounds: RSS after 1 000 short rounds vs after 10.

One ``Watch`` over ``--sim --hosts 1024`` (short rounds: 0.1 s of probing at 20 coded
pairs/s per peer, two pairs a peer, the simulator's least a round), with a policy that
acts: an intermittent leaf-spine fault (``flap``) is rerouted every few rounds; each
verify rescans the round's 0.1 s (2 pairs a peer, too few to vouch), so each reroute is
rolled back at once: the decider, the journal (an apply and a rollback each time), the
actions' rescans and the path cache all churn; every 10th round is also scraped (the
registry rendered, as Prometheus would). RSS (``VmRSS``) is read after rounds 10, 30,
60, 100, 250, 500 and the last; the figures are the ratios last/10th (the issue's goal:
at most 1.2) and last/100th. The sliding clock solve keeps 120 coded pairs per peer of
history (``cwctl.sync.incremental``): at two pairs a round its window fills over the
first 60 rounds, but its columns are allocated whole at the first
(``cwctl.sync.history``) and its fit works a block of pairs at a time, so the memory is
at its size by the 10th round. The allocator is tuned as the CLI does.
Once the window is full a round solves 2.5 M probe rows: about 4 s on a loaded 2-core
machine, so 1 000 rounds take about an hour.

    .venv/bin/python -m bench watch            # 1 000 rounds
    CWCTL_BENCH_WATCH_ROUNDS=200 CWCTL_BENCH_WATCH_HOSTS=256 .venv/bin/python -m bench watch
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections import Counter

from prometheus_client.exposition import generate_latest

from cwctl.runtime.allocator import tune
from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.watch.metrics import registry_of
from cwctl.watch.policy import Allow, Policy
from cwctl.watch.rounds import Watch

HOSTS = int(os.environ.get("CWCTL_BENCH_WATCH_HOSTS", "1024"))
ROUNDS = int(os.environ.get("CWCTL_BENCH_WATCH_ROUNDS", "1000"))
MARKS = (10, 30, 60, 100, 250, 500)
RATE = 20.0  # coded pairs/s per peer: 2 a peer in 0.1 s
SCRAPE_EVERY = 10  # rounds between two renderings of /metrics
FAULT = "link:leaf1-spine2:flap=60"  # down 30 s of every 60 s of simulated time


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def run(rounds: int) -> tuple[dict[int, float], Counter[str], float]:
    request = ScanRequest(
        sim=SimOptions(hosts=HOSTS, faults=(FAULT,)),
        duration_s=0.1,
        overrides=ProbeOverrides(rate=RATE),
    )
    policy = Policy(rounds=2, min_score=0.5, max_per_hour=1000, hold_s=5.0,
                    allow=(Allow("link", "reroute"), Allow("switch", "reroute")))  # fmt: skip
    verbs: Counter[str] = Counter()
    watch = Watch(request, policy=policy, log=lambda e: verbs.update([e.get("verb", e["event"])]))
    registry = registry_of(watch.metrics)
    marks: dict[int, float] = {}
    started = time.perf_counter()
    try:
        for n in range(1, rounds + 1):
            await watch.round()
            if n % SCRAPE_EVERY == 0:
                generate_latest(registry)
            if n in MARKS or n == rounds:
                marks[n] = rss_mib()
                print(f"  round {n}: {marks[n]:.1f} MiB", flush=True)
    finally:
        await watch.aclose()
    return marks, verbs, time.perf_counter() - started


def main() -> None:
    tune()  # as the cwctl program does at its start (cwctl.runtime.allocator)
    with tempfile.TemporaryDirectory(prefix="cwctl-bench-watch-") as state:
        os.environ["CWCTL_STATE_DIR"] = state
        marks, verbs, took = asyncio.run(run(ROUNDS))
    base = marks[10]
    print(f"cwctl watch --sim --hosts {HOSTS}, {ROUNDS} rounds of 0.1 s, fault {FAULT}, "
          f"policy acting ({took:.0f} s, {took / ROUNDS:.2f} s a round)")  # fmt: skip
    print(f"{'after round':>12} {'RSS MiB':>9} {'vs 10th':>8}")
    for n, mib in sorted(marks.items()):
        print(f"{n:>12} {mib:>9.1f} {mib / base:>7.2f}x")
    decided = ", ".join(f"{v} {c}" for v, c in sorted(verbs.items()))
    print(f"log lines: {decided}")
    print(f"RSS ratio last/10th: {marks[ROUNDS] / base:.2f}x (goal <= 1.2x); "
          f"last/100th: {marks[ROUNDS] / marks.get(100, base):.2f}x")  # fmt: skip
