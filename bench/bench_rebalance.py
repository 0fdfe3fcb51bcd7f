"""Two jobs whose elephant flows collide on one spine, before and after ``cwctl watch``
spreads them (``[rebalance]``), then 10 minutes of steady load: does anything move again?

The testbed (tests/testbed/: 2 leaves, 2 spines, kernel ECMP, leaves hashing headers as
hardware does) with every leaf-spine link capped at 200 Mbit/s each way (tbf, ~10 ms of
queue), and two iperf3 jobs from leaf1 to leaf2 (gpu-001 -> gpu-005, gpu-002 -> gpu-006)
on client ports the leaves' own kernels send up spine2 (``tests/testbed/collision.py``).
The collision runs alone for 8 s, then ``cwctl watch --interval 2 --duration 2 --rate 10``
starts with a policy whose only action is ``[rebalance]`` (every_s 5, flow_hold_s 600).
Last, the contrast: the same collision routed around as a fault (``cwctl reroute
leaf1-spine2 --at hosts --apply``, ``tests/testbed/routearound.py``), which moves both
elephants onto spine1 together.

Every figure comes from what cwctl does not read: each job's throughput from iperf3's own
intervals (before: 2-8 s of the collision; after: the steady part), leaf1's uplinks'
max/mean from the switches' interface counters, the time from the collision starting
(and from the watch starting) to those counters reading within 1.2x for two 2 s windows
in a row, and the moves from the cwctl maps on the hosts (a flow moved twice is in two).
Beside them, the watch process's CPU time and peak RSS.

    .venv/bin/python -m bench rebalance                          # 10 minutes of steady load
    CWCTL_BENCH_STEADY_S=60 .venv/bin/python -m bench rebalance  # a shorter run
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from tests.testbed.bed import Testbed
from tests.testbed.collision import CAP_MBIT, JOBS, Outcome, capped, trial
from tests.testbed.routearound import LINK, routed_around
from tests.testbed.shell import missing_prerequisite
from tests.testbed.workload import header_hashing

STEADY_S = float(os.environ.get("CWCTL_BENCH_STEADY_S", "600"))


def _num(value: float | None, fmt: str = "{:.2f}") -> str:
    return "-" if value is None else fmt.format(value)


def table(out: Outcome, steady_s: float, wall_s: float) -> str:
    rows = [f"{'':<34} {'before':>10} {'after':>10} {'x':>6}"]
    for (a, b), before, after in zip(JOBS, out.before_mbit, out.after_mbit, strict=True):
        gain = after / before if before else float("nan")
        rows.append(f"{f'job {a} -> {b} (Mbit/s)':<34} {before:>10.1f} {after:>10.1f} {gain:>6.2f}")
    total_b, total_a = sum(out.before_mbit), sum(out.after_mbit)
    rows.append(f"{'both jobs (Mbit/s)':<34} {total_b:>10.1f} {total_a:>10.1f} {out.gain:>6.2f}")
    rows.append(
        f"{'leaf1 uplinks max/mean (counters)':<34} {_num(out.ratio_before):>10} "
        f"{_num(out.ratio_after):>10}"
    )
    moved_twice = sum(1 for n in out.moves.values() if n > 1)
    rows += [
        "",
        f"collision start -> balanced (<= 1.2x): {_num(out.balanced_s, '{:.1f} s')}",
        f"watch start -> balanced:               {_num(out.watch_to_balanced_s, '{:.1f} s')}",
        f"rebalances applied:                    {out.rebalances} "
        f"({out.steady_rebalances} begun in the {steady_s:.0f} s of steady load)",
        f"flows moved:                           {len(out.moves)} "
        f"({moved_twice} moved more than once)",
        f"jobs restarted:                        {0 if out.jobs_ok else 'yes (an iperf3 failed)'}",
        f"watch process:                         {out.watch_cpu_s:.1f} s CPU (user+sys), "
        f"peak RSS {out.watch_rss_kb / 1024:.0f} MB, over {wall_s:.0f} s of wall time",
    ]
    return "\n".join(rows)


def main() -> None:
    why = missing_prerequisite()
    if why:
        print(f"skipped: {why}")
        return
    print(
        f"two iperf3 jobs colliding on spine2, leaf-spine links at {CAP_MBIT} Mbit/s each "
        f"way; cwctl watch [rebalance] after 8 s; {STEADY_S:.0f} s of steady load after"
    )
    with tempfile.TemporaryDirectory(prefix="cwctl-bench-rb-") as tmp:
        bed = Testbed(f"br{os.getpid() % 100000:x}"[:8], tmp)
        try:
            bed.up(icmp_ratelimit_ms=0)
            with header_hashing(bed), capped(bed):
                started = time.monotonic()
                out = trial(bed, Path(tmp), STEADY_S)
                wall_s = time.monotonic() - started
                around = routed_around(bed, Path(tmp))
        finally:
            bed.down()
    print(table(out, STEADY_S, wall_s))
    print(f"the watch's scans named during the collision: {', '.join(out.suspects) or 'none'}")
    before, after, ratio_before, ratio_after = around
    print(
        f"\nthe same collision routed around as a fault (cwctl reroute {LINK} --at hosts "
        f"--apply): both jobs {sum(before):.1f} -> {sum(after):.1f} Mbit/s "
        f"({', '.join(f'{a:.1f}' for a in after)} each), leaf1 uplinks max/mean "
        f"{_num(ratio_before)} -> {_num(ratio_after)}"
    )
    for e in out.decisions:
        if e.get("verb") == "act":
            print(f"the watch's finding: {e.get('why', '')}")
    refused = [e for e in out.decisions if e.get("verb") == "failed"]
    for e in refused[:3]:
        print(f"note: a rebalance failed: {e.get('why', '')[:200]}")
