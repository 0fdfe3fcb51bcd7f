"""Report cost vs fabric size: the scan JSON, table, prom and heatmap per directed path,
and what the path reports hold.

``python -m bench report`` (about half a minute): default simulated fabrics of 256, 1 024
and 4 096 hosts (``CWCTL_BENCH_REPORT_HOSTS=1024,10000`` picks others), each scanned and
analysed once (not timed); then each renderer's CPU time (best of 2), written out as the
CLI writes it (the JSON in pieces, to nowhere), in microseconds per directed path, and
its ratio to the smallest size's (flat: the report is linear in the paths). The path
reports' bytes per path are traced with ``tracemalloc`` as ``path_reports`` builds them.
"""

from __future__ import annotations

import gc
import os
import time
import tracemalloc
from collections.abc import Callable

from cwctl.scan.request import SimOptions
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import analyse
from cwctl.telemetry import paths as telemetry_paths
from cwctl.transport.sim import simulate

SIZES = tuple(
    int(x) for x in os.environ.get("CWCTL_BENCH_REPORT_HOSTS", "256,1024,4096").split(",")
)


def _renderers() -> dict[str, Callable[[FabricSnapshot], object]]:
    from cwctl.report import render, render_bytes
    from cwctl.report.heatmap import render_heatmap

    def pieces(snap: FabricSnapshot, fmt: str) -> int:
        return sum(len(piece) for piece in render_bytes(snap, fmt))

    return {
        "json": lambda s: pieces(s, "json"),
        "table": lambda s: render(s, "table", color=False),
        "prom": lambda s: pieces(s, "prom"),
        "heatmap": render_heatmap,
    }


def _cpu(fn: Callable[[FabricSnapshot], object], snap: FabricSnapshot) -> float:
    best = float("inf")
    for _ in range(2):
        gc.collect()
        t = time.process_time()
        fn(snap)
        best = min(best, time.process_time() - t)
    return best


def _traced_paths(hosts: int) -> tuple[FabricSnapshot, float]:
    """The scan's snapshot, and the bytes its path reports hold per path (traced)."""
    built = telemetry_paths.path_reports
    held = [0]

    def traced(pt: telemetry_paths.PathTable) -> list[telemetry_paths.PathReport]:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        out = built(pt)
        held[0] += tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        return out

    from cwctl.telemetry import blockwise

    blockwise.path_reports = traced  # type: ignore[assignment]
    try:
        snap = analyse(simulate(SimOptions(hosts=hosts)))
    finally:
        blockwise.path_reports = built
    return snap, held[0] / max(len(snap.paths), 1)


def main() -> None:
    renderers = _renderers()
    per_path: dict[str, list[float]] = {name: [] for name in renderers}
    print(f"{'hosts':>6} {'paths':>8} {'B/path':>7} " + " ".join(f"{n:>12}" for n in renderers))
    print(f"{'':>6} {'':>8} {'held':>7} " + " ".join(f"{'us/path':>12}" for _ in renderers))
    for hosts in SIZES:
        snap, held = _traced_paths(hosts)
        n = len(snap.paths)
        row = []
        for name, fn in renderers.items():
            us = _cpu(fn, snap) / n * 1e6
            per_path[name].append(us)
            row.append(f"{us:>12.2f}")
        print(f"{hosts:>6} {n:>8} {held:>7.0f} " + " ".join(row), flush=True)
        del snap
    print("ratio of the largest size's cost per path to the smallest's:")
    print("  " + ", ".join(f"{name} {v[-1] / v[0]:.2f}x" for name, v in per_path.items()))


if __name__ == "__main__":
    main()
