"""The same collision as ``collision.py``, routed around as a fault instead of rebalanced:
``cwctl reroute leaf1-spine2 --at hosts --apply`` moves every flow that crosses the link,
so both jobs' elephants land on spine1 together. The contrast ``bench rebalance`` prints.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from tests.testbed.collision import (
    BEFORE_S,
    JOBS,
    SETTLE_S,
    SPINE,
    LinkSampler,
    interrupted,
    iperf_intervals,
    max_over_mean,
    mean_between,
)
from tests.testbed.workload import cwctl, iperf_client, iperf_server, ports_on

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed

LINK = "leaf1-spine2"
AFTER_S = 10.0


def routed_around(
    bed: Testbed, workdir: Path
) -> tuple[list[float], list[float], float | None, float | None]:
    """Each job's Mbit/s and leaf1's uplinks' max/mean, the collision alone and after
    the reroute around the link it fills (rolled back at the end)."""
    cports = [ports_on(bed, a, b, SPINE, 1, 53000 + 1000 * i)[0] for i, (a, b) in
              enumerate(JOBS)]  # fmt: skip
    servers = [iperf_server(bed, b) for _, b in JOBS]
    sampler = LinkSampler(bed)
    clients, state = [], workdir / "state-reroute"
    try:
        time.sleep(0.5)
        start = time.monotonic()
        clients = [
            iperf_client(bed, a, b, cport=p, streams=1, seconds=BEFORE_S + AFTER_S + 60)
            for (a, b), p in zip(JOBS, cports, strict=True)
        ]
        time.sleep(BEFORE_S)
        moved_at = time.monotonic()
        done = cwctl(state, "reroute", LINK, "-i", str(bed.inventory), "--at", "hosts",
                     "--apply", "--yes")  # fmt: skip
        if done.returncode != 0:
            raise AssertionError(f"reroute failed: {done.stderr[-500:]}")
        applied = time.monotonic()
        time.sleep(SETTLE_S + AFTER_S)
        reports = [interrupted(c) for c in clients]
    finally:
        cwctl(state, "rollback", "--apply", "--yes")
        for p in (*clients, *servers):
            if p.poll() is None:
                p.kill()
                p.wait()
        sampler.stop()
    spans = [iperf_intervals(r or {"intervals": []}) for r in reports]
    lo = applied + SETTLE_S - start
    return (
        [mean_between(s, 2.0, moved_at - start) for s in spans],
        [mean_between(s, lo, lo + AFTER_S) for s in spans],
        max_over_mean(sampler.rates(start + 2.0, moved_at)),
        max_over_mean(sampler.rates(applied + SETTLE_S, applied + SETTLE_S + AFTER_S)),
    )
