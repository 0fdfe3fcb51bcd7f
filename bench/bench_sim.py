"""The simulator's speed: probe records generated per second vs fabric size.

For 64, 256 and 1 024 hosts (8 per leaf, 4 spines, 10 peers, 100 pairs/s, 4 ports,
``--load 0.2``, one ``congested`` spine) it builds the model once, then times one 2-second
probing window (best of ``ROUNDS``, CPU time of this process). The baseline in the same
run is real time: ``x real time`` is how many seconds of probing the simulator makes per
second of computing, i.e. how much faster than the agents themselves it produces the same
records. Run: ``.venv/bin/python -m bench sim``; other sizes:
``.venv/bin/python -m bench.bench_sim 64 4096``.
"""

from __future__ import annotations

import sys
import time

from cwctl.scan.request import SimOptions
from cwctl.transport.sim import model_for, simulate

SIZES = (64, 256, 1024)
WINDOW_S = 2.0
ROUNDS = 2


def _measure(hosts: int) -> dict[str, float]:
    options = SimOptions(hosts=hosts, faults=("switch:spine2:congested",))
    cpu0 = time.process_time()
    model = model_for(options=options)
    build_s = time.process_time() - cpu0
    best = float("inf")
    records = 0
    for _ in range(ROUNDS):
        cpu0 = time.process_time()
        collection = simulate(model=model, duration_s=WINDOW_S)
        best = min(best, time.process_time() - cpu0)
        records = len(collection.table)
    return {"hosts": hosts, "records": records, "build_s": build_s, "window_s": best}


def main(argv: list[str] | None = None) -> None:
    sizes = tuple(int(a) for a in (argv or []) if a.isdigit()) or SIZES
    print(f"one {WINDOW_S:g} s probing window, 10 peers x 100 pairs/s, best of {ROUNDS} (CPU s)")
    print(
        f"{'hosts':>6} {'records':>10} {'build s':>8} {'window s':>9} {'records/s':>11}"
        f" {'x real time':>12} {'ns/record':>10}"
    )
    for hosts in sizes:
        m = _measure(hosts)
        rate = m["records"] / m["window_s"]
        print(
            f"{hosts:>6} {m['records']:>10,} {m['build_s']:>8.2f} {m['window_s']:>9.2f}"
            f" {rate:>11,.0f} {WINDOW_S / m['window_s']:>11.1f}x"
            f" {1e9 / rate:>10.0f}"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
