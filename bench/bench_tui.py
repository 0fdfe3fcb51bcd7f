"""TUI frame time vs fabric size: the heatmap's ``render_line`` for every line.

For 64, 256 and 1024 simulated hosts, one snapshot each (the pipeline on a short
window), then the time to build the grid and to draw every line of the heatmap at
120 x 40 (aggregated by leaf when the hosts do not fit) and, for reference, at a size
where every host gets its own cell. Ratios are against the 64-host fabric.

    .venv/bin/python -m bench tui
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import scan
from cwctl.tui import grid as grid_module
from cwctl.tui.grid import build_grid
from cwctl.tui.widgets.heatmap import Heatmap

SIZES = (64, 256, 1024)
REPEATS = 5
DURATION_S = 0.2


def make_snapshot(hosts: int) -> FabricSnapshot:
    request = ScanRequest(
        sim=SimOptions(hosts=hosts, seed=1, faults=("link:leaf1-spine2:lossy=0.05",)),
        duration_s=DURATION_S,
    )
    return asyncio.run(scan(request))


async def frame_times(snapshot: FabricSnapshot, size: tuple[int, int]) -> dict[str, Any]:
    """Median seconds to rebuild the grid and to draw every line, in a running app."""
    from textual.app import App, ComposeResult

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield Heatmap()

    app = One()
    async with app.run_test(size=size) as pilot:
        heatmap = app.query_one(Heatmap)
        heatmap.update_snapshot(snapshot)
        await pilot.pause()
        lines = heatmap.size.height
        builds, rebuilds, draws = [], [], []
        for _ in range(REPEATS + 1):
            grid_module._last_columns = None  # a new snapshot: its paths are walked once
            started = time.perf_counter()
            heatmap._rebuild()  # the grid, as after each scan
            builds.append(time.perf_counter() - started)
            started = time.perf_counter()
            heatmap._rebuild()  # as after a resize, a filter or a metric toggle
            rebuilds.append(time.perf_counter() - started)
            started = time.perf_counter()
            for y in range(lines):
                heatmap.render_line(y)  # cold: the strip cache was just cleared
            draws.append(time.perf_counter() - started)
        # the first round warms the style caches
        builds, rebuilds, draws = builds[1:], rebuilds[1:], draws[1:]
        grid = heatmap.grid
        assert grid is not None
        return {
            "cells": f"{grid.size}x{grid.size} {grid.level}",
            "build_s": statistics.median(builds),
            "rebuild_s": statistics.median(rebuilds),
            "draw_s": statistics.median(draws),
        }


def main() -> None:
    rows = []
    for hosts in SIZES:
        snapshot = make_snapshot(hosts)
        grid_module._last_columns = None
        started = time.perf_counter()
        build_grid(snapshot, "delay")  # full host x host, no widget
        full_s = time.perf_counter() - started
        fit = asyncio.run(frame_times(snapshot, (120, 40)))
        rows.append((hosts, len(snapshot.paths), full_s, fit))
    base = rows[0]
    base_frame = base[3]["rebuild_s"] + base[3]["draw_s"]
    print(
        f"{'hosts':>6} {'paths':>7} {'cells at 120x40':>18} {'scan build':>10} "
        f"{'rebuild':>8} {'draw':>7} {'frame':>7} {'x64':>5} {'full grid':>10} {'x64':>5}"
    )
    for hosts, n_paths, full_s, fit in rows:
        frame = fit["rebuild_s"] + fit["draw_s"]
        print(
            f"{hosts:>6} {n_paths:>7} {fit['cells']:>18} {fit['build_s'] * 1e3:>10.2f} "
            f"{fit['rebuild_s'] * 1e3:>8.2f} {fit['draw_s'] * 1e3:>7.2f} {frame * 1e3:>7.2f} "
            f"{frame / base_frame:>5.1f} {full_s * 1e3:>10.2f} {full_s / base[2]:>5.1f}"
        )
    print(
        "ms, medians of 5. scan build: the grid from a new snapshot; rebuild: after a resize,"
        " filter or metric toggle;\ndraw: render_line for every line; frame = rebuild + draw;"
        " full grid: host x host without aggregation."
    )


if __name__ == "__main__":
    main()
