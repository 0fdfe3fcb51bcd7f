"""``cwctl watch`` heals the namespace fabric: injection to verified reroute, 5 trials a fault.

The testbed (tests/testbed/, 2 leaves, 2 spines, kernel ECMP, sshd per node) with
``cwctl watch --interval 2 --duration 2 --rate 10`` and a policy allowing switch-side
reroute of leaf-spine links and spines (rounds = 2, hold 20 s). Per trial: the fault on
``leaf1>spine2``, the time until the ``acted`` decision (applied, and a rescan no longer
names the element), the fault cleared, the time until ``restored``, and whether every
switch's routes and rules are byte for byte what they were. Then an intermittent ``down``
(on 20 s, off 20 s, for 3 minutes): the actions it caused and their spacing. Needs root
and network namespaces.

    .venv/bin/python -m bench watch_fabric          # TRIALS=5 per fault
    CWCTL_BENCH_TRIALS=1 .venv/bin/python -m bench watch_fabric
"""

from __future__ import annotations

import itertools
import os
import statistics
import tempfile
from pathlib import Path

from tests.testbed.bed import Testbed
from tests.testbed.faults import clear
from tests.testbed.shell import missing_prerequisite
from tests.testbed.watchtrial import Trial, WatchRun, intermittent, trial

TRIALS = int(os.environ.get("CWCTL_BENCH_TRIALS", "5"))
FAULTS = ("congested", "down")
HOLD_S = 20.0
ON_S = OFF_S = 20.0
INTERMITTENT_S = 180.0  # 3 minutes: one action (the marked probes see each "off")
INTERMITTENT_HOLD_S = 30.0


def main() -> None:
    why = missing_prerequisite()
    if why:
        print(f"skipped: {why}")
        return
    with tempfile.TemporaryDirectory(prefix="cwctl-bench-wf-") as tmp:
        os.environ["CWCTL_STATE_DIR"] = str(Path(tmp) / "state")
        bed = Testbed(f"bw{os.getpid() % 100000:x}"[:8], tmp)
        try:
            bed.up(icmp_ratelimit_ms=0)
            watch = WatchRun(bed, Path(tmp), hold_s=HOLD_S, interval_s=2.0)
            try:
                results = {f: [_one(bed, watch, f) for _ in range(TRIALS)] for f in FAULTS}
            finally:
                watch.stop()
            # a hold longer than the fault's "off": a restore needs the link clean that long
            (Path(tmp) / "i").mkdir()
            watch = WatchRun(bed, Path(tmp) / "i", hold_s=INTERMITTENT_HOLD_S, interval_s=2.0)
            try:
                clear(bed)
                bed.reset_routes()
                acts = intermittent(bed, watch, "leaf1>spine2", "down", on_s=ON_S,
                                    off_s=OFF_S, total_s=INTERMITTENT_S)  # fmt: skip
            finally:
                watch.stop()
        finally:
            left = bed.down()
    print(f"cwctl watch on the namespace fabric, {TRIALS} trials per fault on leaf1>spine2, "
          f"hold {HOLD_S:g} s (goal: p50 <= 60 s, max <= 120 s)")  # fmt: skip
    print(f"{'fault':<10} {'reroute p50':>11} {'max':>7} {'restore p50':>11} {'max':>7}  "
          "routes restored exactly")  # fmt: skip
    for fault, trials in results.items():
        up = [t.reroute_s for t in trials]
        back = [t.restore_s for t in trials]
        exact = sum(t.restored_exactly for t in trials)
        print(f"{fault:<10} {statistics.median(up):>10.1f}s {max(up):>6.1f}s "
              f"{statistics.median(back):>10.1f}s {max(back):>6.1f}s  "
              f"{exact}/{len(trials)}")  # fmt: skip
        for t in trials:
            print(f"    {t.fault}: round {t.element} in {t.reroute_s:.1f} s, changed "
                  f"{','.join(t.routes_changed)}; restored {t.restore_s:.1f} s "
                  "after clearing")  # fmt: skip
    gaps = [b - a for a, b in itertools.pairwise(acts)]
    print(f"intermittent down (on {ON_S:g} s, off {OFF_S:g} s, {INTERMITTENT_S:g} s): "
          f"{len(acts)} action(s) at {[round(a) for a in acts]} s; smallest gap "
          f"{min(gaps) if gaps else float('nan'):.0f} s "
          f"(hold {INTERMITTENT_HOLD_S:g} s)")  # fmt: skip
    if left:
        print(f"testbed left behind: {left}")


def _one(bed: Testbed, watch: WatchRun, fault: str) -> Trial:
    clear(bed)
    bed.reset_routes()
    return trial(bed, watch, "leaf1>spine2", fault)
