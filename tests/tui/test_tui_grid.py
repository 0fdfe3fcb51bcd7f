"""The heatmap's numbers: order by leaf, one value per path, worst value per leaf block."""

from __future__ import annotations

import math

import numpy as np
from tui_fixtures import known_snapshot

from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.tui.grid import NO_DATA, build_grid, host_order, legend_labels


def test_hosts_are_ordered_by_leaf_then_name(known: FabricSnapshot) -> None:
    assert host_order(known) == ["gpu-001", "gpu-002", "gpu-003", "gpu-004"]


def test_each_path_lands_in_its_cell_and_bin(known: FabricSnapshot) -> None:
    grid = build_grid(known, "delay")
    assert grid.level == "host" and grid.labels == ["gpu-001", "gpu-002", "gpu-003", "gpu-004"]
    at = {name: i for i, name in enumerate(grid.labels)}
    assert grid.values[at["gpu-001"], at["gpu-003"]] == 2_000.0
    expected_bins = {
        ("gpu-001", "gpu-002"): 0,
        ("gpu-001", "gpu-003"): 1,
        ("gpu-002", "gpu-004"): 2,
        ("gpu-003", "gpu-004"): 3,
        ("gpu-004", "gpu-001"): 4,
    }
    for (src, dst), b in expected_bins.items():
        assert grid.bins[at[src], at[dst]] == b, (src, dst)
    # Unprobed cells (the reverse directions, the diagonal) are "no data", not zero.
    assert math.isnan(grid.values[at["gpu-002"], at["gpu-001"]])
    assert grid.bins[at["gpu-002"], at["gpu-001"]] == NO_DATA
    assert (grid.bins == NO_DATA).sum() == 16 - 5


def test_loss_metric(known: FabricSnapshot) -> None:
    grid = build_grid(known, "loss")
    at = {name: i for i, name in enumerate(grid.labels)}
    assert grid.values[at["gpu-004"], at["gpu-001"]] == 0.5
    assert grid.bins[at["gpu-004"], at["gpu-001"]] == 4
    assert grid.bins[at["gpu-001"], at["gpu-002"]] == 0
    assert legend_labels("loss")[0] == "0" and legend_labels("delay")[-1] == "≥64us"


def test_aggregates_by_leaf_keeping_the_worst_path(known: FabricSnapshot) -> None:
    grid = build_grid(known, "delay", fit=3)
    assert grid.level == "leaf" and grid.labels == ["leaf1", "leaf2"]
    assert grid.members == [["gpu-001", "gpu-002"], ["gpu-003", "gpu-004"]]
    # leaf1 -> leaf2 holds 2 µs (001->003) and 8 µs (002->004): the worst is 8 µs.
    assert grid.values[0, 1] == 8_000.0
    assert grid.values[1, 0] == 100_000.0
    assert grid.values[0, 0] == 500.0 and grid.values[1, 1] == 30_000.0


def test_too_many_leaves_fall_back_to_runs_of_whole_leaves() -> None:
    n = 40
    hosts = [HostReport(name=f"h{i:03d}", leaf=f"leaf{i:02d}") for i in range(n)]
    paths = [
        PathReport(f"h{i:03d}", f"h{(i + 1) % n:03d}", 10, 10, 0.0, float(i), float(i))
        for i in range(n)
    ]
    snap = FabricSnapshot(source="sim", reference=None, duration_s=1.0, hosts=hosts, paths=paths)
    grid = build_grid(snap, "delay", fit=8)
    assert grid.level == "leaf group" and grid.size == 8
    assert sum(len(m) for m in grid.members) == n
    # whole leaves per cell, named by their range, and the title says so
    assert grid.leaves is not None and grid.leaves[0] == [f"leaf{i:02d}" for i in range(5)]
    assert grid.labels[0] == "leaf00-04" and grid.labels[-1] == "leaf35-39"
    assert grid.describe() == "8 leaf groups of 5 leaves"
    # The worst path of the last block is h039 -> h000 (39 ns), in the last row, first column.
    assert grid.values[7, 0] == 39.0
    assert np.nanmax(grid.values) == 39.0


def test_an_empty_snapshot_is_all_no_data() -> None:
    snap = known_snapshot()
    snap.paths = []
    grid = build_grid(snap, "delay")
    assert (grid.bins == NO_DATA).all()
