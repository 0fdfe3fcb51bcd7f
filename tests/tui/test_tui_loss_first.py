"""The operator's first look (issue 35): loss shows first on the heatmap, enter on a
leaf pair opens that pair's hosts, every dialog scrolls, host detail opens at its head.
Each at 80x24 and 160x48, through Textual's Pilot."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from textual.widgets._footer import FooterKey
from tui_fixtures import known_snapshot, wait_for

from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.tui.app import CwctlApp, make_app
from cwctl.tui.grid import build_grid, legend_labels
from cwctl.tui.screens.confirm import ConfirmScreen
from cwctl.tui.screens.detail import HostDetailScreen
from cwctl.tui.screens.help import HelpScreen
from cwctl.tui.source import FixedSource
from cwctl.tui.widgets.heatmap import BIN_COLORS, Heatmap

SIZES = [(80, 24), (160, 48)]


def fixed_app(snapshot: Any = None, **kwargs: Any) -> CwctlApp:
    source = FixedSource([snapshot or known_snapshot()], label="SIMULATED")
    kwargs.setdefault("max_scans", 1)
    return make_app(source, **kwargs)


def screen_lines(app: CwctlApp) -> list[str]:
    """What the terminal shows, line by line."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def dead_spine_snapshot(leaves: int, per_leaf: int = 4) -> FabricSnapshot:
    """A spine down under two spines: every path between leaves loses half its probes and
    queues no more than a healthy one; paths inside a leaf lose nothing."""
    names = [f"gpu-{i + 1:03d}" for i in range(leaves * per_leaf)]
    leaf = {n: f"leaf{i // per_leaf + 1}" for i, n in enumerate(names)}
    hosts = [HostReport(name=n, leaf=leaf[n]) for n in names]
    paths = []
    for a in names:
        for b in names:
            if a != b:
                received = 100 if leaf[a] == leaf[b] else 50
                paths.append(PathReport(a, b, 100, received, 1_000.0, 1_200.0, 1_500.0))
    return FabricSnapshot(source="sim", reference=names[0], duration_s=1.0, hosts=hosts,
                          paths=paths)  # fmt: skip


def colour_at(heatmap: Heatmap, row: int, col: int) -> str | None:
    """The background of the heatmap cell (grid row, grid column)."""
    layout = heatmap.cell_layout
    strip = heatmap.render_line(layout.line_of(row))
    target, x = layout.label_w + 1 + layout.cell_w * col, 0
    for segment in strip:
        if x <= target < x + segment.cell_length:
            colour = segment.style.bgcolor if segment.style else None
            return None if colour is None else colour.name
        x += segment.cell_length
    raise AssertionError("cell outside the line")


@pytest.mark.parametrize("size", SIZES)
async def test_loss_shows_first_and_m_still_picks_one_metric(size: tuple[int, int]) -> None:
    app = fixed_app(dead_spine_snapshot(2))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        assert heatmap.grid is not None
        across = heatmap.grid.size - 1  # the last leaf (or host) from the first: lossy
        assert colour_at(heatmap, 0, across) == BIN_COLORS[4]
        assert colour_at(heatmap, 0, 0 if heatmap.grid.level != "host" else 1) == BIN_COLORS[0]
        assert heatmap.render_line(0).text.startswith("worst of loss, queueing")
        heatmap.place_cursor((0, across))
        readout = heatmap.render_line(heatmap.readout_line).text
        assert "→ gpu-" in readout and "loss 50%" in readout  # the signal that coloured it
        if size[0] >= 160:
            assert "queueing 200 ns" in readout
        await pilot.press("m")  # queueing alone: the lossy paths queue as little as any
        assert heatmap.metric == "delay" and colour_at(heatmap, 0, across) == BIN_COLORS[0]
        await pilot.press("m")
        assert heatmap.metric == "loss" and colour_at(heatmap, 0, across) == BIN_COLORS[4]
        await pilot.press("m")
        assert heatmap.metric == "worst"


@pytest.mark.parametrize("size", SIZES)
async def test_enter_on_a_leaf_pair_opens_its_hosts_and_esc_keeps_the_cursor(
    size: tuple[int, int],
) -> None:
    app = fixed_app(dead_spine_snapshot(24, per_leaf=8))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        assert heatmap.grid is not None and heatmap.grid.level in ("leaf", "leaf group")
        heatmap.place_cursor((1, 2))  # the second group's row, the third one's column
        rows, cols = heatmap.grid.members[1], heatmap.grid.members[2]
        await pilot.press("enter")
        # the map is the hosts of both ends of the pair, the cursor on a path between them
        assert heatmap.grid.level == "host" or set(heatmap.grid.labels) <= {
            h.leaf for h in dead_spine_snapshot(24, per_leaf=8).hosts
        }
        cell = heatmap.cursor_cell()
        assert cell is not None
        src, dst, _ = cell
        assert set(src) <= set(rows) and set(dst) <= set(cols)
        assert colour_at(heatmap, heatmap.cursor[0], heatmap.cursor[1]) == BIN_COLORS[4]
        await pilot.press("escape")
        assert app.host_filter == "" and heatmap.cursor == (1, 2)


async def test_enter_on_a_leaf_pair_shows_both_leaves_hosts() -> None:
    app = fixed_app(dead_spine_snapshot(12, per_leaf=8))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        assert heatmap.grid is not None and heatmap.grid.level == "leaf"
        heatmap.place_cursor((1, 2))  # leaf2 -> leaf3
        await pilot.press("enter")
        assert heatmap.grid.level == "host"
        assert heatmap.grid.labels == [f"gpu-{i:03d}" for i in range(9, 25)]
        src, dst, _ = heatmap.cursor_cell() or ([], [], 0.0)
        assert src[0] in heatmap.grid.labels[:8] and dst[0] in heatmap.grid.labels[8:]


def long_plan(steps: int = 8) -> str:
    return "\n".join(
        f"step {i}: ip route replace 10.0.{i}.0/24 nexthop via 10.1.0.{i} weight 1\n"
        f"        undo: ip route replace 10.0.{i}.0/24 nexthop via 10.2.0.{i}"
        for i in range(1, steps + 1)
    )


@pytest.mark.parametrize("size", SIZES)
async def test_help_scrolls_to_its_last_key(size: tuple[int, int]) -> None:
    app = fixed_app()
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("end")
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        for key in ("ctrl+c, ctrl+q", "esc closes"):
            assert key in shown, shown
        await pilot.press("home")
        await pilot.pause()
        assert "cwctl tui: keys" in "\n".join(screen_lines(app))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("key", ["end", "pagedown", "down"])
async def test_confirm_scrolls_its_plan_with_the_buttons_in_view(
    size: tuple[int, int], key: str
) -> None:
    app = fixed_app()
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        app.push_screen(ConfirmScreen("reroute spine2", long_plan(), ("leaf1", "leaf2")))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        for _ in range(40):  # as many presses as an operator would, to the plan's end
            await pilot.press(key)
        await pilot.pause()
        shown = "\n".join(screen_lines(app))
        assert "step 8:" in shown and "undo: ip route replace 10.0.8.0/24" in shown, shown
        assert "Cancel (n)" in shown and "Apply on 2 targets (y)" in shown
        await pilot.press("n")
        assert app.screen is app.dashboard


@pytest.mark.parametrize("size", SIZES)
async def test_host_detail_opens_at_its_header(size: tuple[int, int]) -> None:
    app = fixed_app(dead_spine_snapshot(4))  # 30 paths: a table taller than 80x24
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        assert app.snapshot is not None
        app.push_screen(HostDetailScreen(app.snapshot, "gpu-002"))  # as enter opens it
        await wait_for(pilot, lambda: isinstance(app.screen, HostDetailScreen))
        await pilot.pause()
        shown = screen_lines(app)
        assert any("Host gpu-002" in line for line in shown[:3]), shown
        assert any(line.strip() == "Clock" for line in shown)


def test_the_worst_grid_takes_each_cells_higher_bin_aggregated_too() -> None:
    snapshot = dead_spine_snapshot(2)
    for fit in (10**9, 2):  # hosts, then leaves
        worst = build_grid(snapshot, "worst", fit)
        loss, delay = build_grid(snapshot, "loss", fit), build_grid(snapshot, "delay", fit)
        assert (worst.bins == np.maximum(loss.bins, delay.bins)).all()
        assert worst.labels == loss.labels and worst.level == loss.level
    assert legend_labels("worst")[0] == "<1us|0" and legend_labels("worst")[-1] == "≥64us|≥20%"


class ReplaySource(FixedSource):
    """Saved records, as `cwctl tui --replay FILE` reads them."""

    request = SimpleNamespace(replay=Path("saved.jsonl.gz"))


@pytest.mark.parametrize("size", SIZES)
async def test_a_replay_offers_no_scan_key(size: tuple[int, int]) -> None:
    replay = ReplaySource([known_snapshot()], label="replay")
    live = FixedSource([known_snapshot()], label="SIMULATED")
    for source, offered in ((replay, False), (live, True)):
        app = make_app(source, max_scans=1)
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda app=app: app.scans == 1)
            await pilot.pause()
            keys = {key.description for key in app.screen.query(FooterKey)}
            assert ("Scan" in keys) is offered, keys
