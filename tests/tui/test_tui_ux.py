"""The operator's experience of the TUI (issue 25): keys, layout at the stated sizes,
and the heatmap's cursor and drill-down, through Textual's Pilot."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest
from textual.widgets import Input, Label, Sparkline
from textual.widgets._footer import FooterKey
from tui_fixtures import SIZE, known_snapshot, wait_for

from cwctl.report.summary import worst_path_line, worst_paths
from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.tui.app import CwctlApp, make_app
from cwctl.tui.screens.confirm import ConfirmScreen
from cwctl.tui.screens.detail import HostDetailScreen
from cwctl.tui.screens.filter import FilterScreen
from cwctl.tui.screens.help import KEY_W, HelpScreen
from cwctl.tui.source import FixedSource
from cwctl.tui.widgets.heatmap import Heatmap
from cwctl.tui.widgets.history import WorstPathHistory
from cwctl.tui.widgets.hosts import STATUS_W, HostsTable


def fixed_app(snapshot: Any = None, **kwargs: Any) -> CwctlApp:
    source = FixedSource([snapshot or known_snapshot()], label="SIMULATED")
    kwargs.setdefault("max_scans", 1)
    return make_app(source, **kwargs)


async def test_ctrl_c_quits_from_the_dashboard() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans >= 1)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit
    assert app.return_code == 0


@pytest.mark.parametrize(
    ("opener", "screen"), [("question_mark", HelpScreen), ("slash", FilterScreen)]
)
async def test_ctrl_c_quits_from_a_dialog_and_the_filter_prompt(opener: str, screen: type) -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans >= 1)
        await pilot.press(opener)
        await wait_for(pilot, lambda: isinstance(app.screen, screen))
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app._exit


def fleet_snapshot(leaves: int, per_leaf: int = 8) -> FabricSnapshot:
    """``leaves`` × ``per_leaf`` hosts (gpu-001, ... on leaf1, ...), each probing the
    next host and the host one leaf on."""
    names = [f"gpu-{i + 1:03d}" for i in range(leaves * per_leaf)]
    hosts = [HostReport(name=n, leaf=f"leaf{i // per_leaf + 1}") for i, n in enumerate(names)]
    n = len(names)
    paths = [
        PathReport(names[i], names[(i + step) % n], 10, 10, 1_000.0, 1_000.0 + i, 1_000.0 + 2 * i)
        for i in range(n)
        for step in (1, per_leaf)
    ]
    return FabricSnapshot(source="sim", reference=names[0], duration_s=1.0, hosts=hosts,
                          paths=paths)  # fmt: skip


async def test_cells_fill_the_panel_at_160x48_with_64_hosts() -> None:
    app = fixed_app(fleet_snapshot(8))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        grid, layout = heatmap.grid, heatmap.cell_layout
        assert grid is not None and grid.level == "leaf" and grid.size == 8
        used_w, used_h = layout.cell_w * grid.size, layout.cell_h * grid.size
        free_w = heatmap.size.width - layout.label_w - 1
        free_h = heatmap.size.height - 3  # the title, the legend and the cursor's line
        # most of the panel: all but what whole cells cannot share out (under one a row)
        assert free_w - used_w < grid.size and free_h - used_h < grid.size
        assert used_w >= 0.8 * free_w and used_h >= 0.8 * free_h, (used_w, free_w, used_h, free_h)
        assert layout.cell_w >= 6 and layout.cell_h >= 4  # not 2 x 1 in a big panel
        assert heatmap.render_line(0).text.startswith("worst of loss, queueing · 8 leaves")


@pytest.mark.parametrize("size", [(80, 24), (160, 48), (220, 60)])
async def test_groups_are_whole_leaves_and_the_title_says_so(size: tuple[int, int]) -> None:
    app = fixed_app(fleet_snapshot(64))  # 512 hosts
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        grid = heatmap.grid
        assert grid is not None and grid.level in ("leaf", "leaf group")
        assert grid.leaves is not None
        for members, leaves in zip(grid.members, grid.leaves, strict=True):
            assert {f"leaf{(int(h[4:]) - 1) // 8 + 1}" for h in members} == set(leaves)
            assert len(members) == 8 * len(leaves)  # whole leaves, never a leaf cut in two
        title = " · ".join(
            heatmap.render_line(y).text.strip() for y in range(heatmap.cell_layout.top)
        )
        assert (
            grid.describe() in title and "worst of loss, queueing" in title
        )  # not broken mid-phrase
        assert "gpu-" not in "".join(grid.labels)


async def test_enter_opens_the_host_under_the_cursor_at_512_hosts() -> None:
    app = fixed_app(fleet_snapshot(64))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        assert heatmap.grid is not None
        row = next(i for i, m in enumerate(heatmap.grid.members) if "gpu-049" in m)
        # drill into the block of the group holding gpu-049 (the diagonal: its own hosts)
        await pilot.press(*["down"] * row, *["right"] * row, "enter")
        assert heatmap.grid.level == "host" and "gpu-049" in heatmap.grid.labels
        target = heatmap.grid.labels.index("gpu-049")
        heatmap.place_cursor((0, 0))
        await pilot.press(*["down"] * target, "right", "right", "right")
        assert heatmap.render_line(heatmap.cell_layout.line_of(target)).text.startswith("gpu-049")
        await pilot.press("enter")
        assert isinstance(app.screen, HostDetailScreen) and app.screen.host_name == "gpu-049"


async def test_a_leaf_filter_re_lays_the_map_out_as_its_hosts() -> None:
    app = fixed_app(fleet_snapshot(64))
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("slash")
        await wait_for(pilot, lambda: isinstance(app.screen, FilterScreen))
        app.screen.query_one(Input).value = "=leaf3"
        await pilot.press("enter")
        heatmap = app.dashboard.query_one(Heatmap)
        assert heatmap.grid is not None and heatmap.grid.level == "host"
        assert heatmap.grid.labels == [f"gpu-{i:03d}" for i in range(17, 25)]
        assert heatmap.render_line(0).text.startswith("worst of loss, queueing · leaf3: 8 hosts")
        readout = heatmap.render_line(heatmap.readout_line).text
        assert readout.startswith("gpu-017 → gpu-017")  # within the leaf, not leaf6's hosts
        assert heatmap.cell_layout.cell_w >= 6  # 8 hosts fill the panel too


async def test_at_80x24_the_clock_columns_legend_and_drain_key_fit() -> None:
    app = fixed_app(fleet_snapshot(8))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        hosts = app.dashboard.query_one(HostsTable)
        widths = [c.get_render_width(hosts) for c in hosts.ordered_columns]
        labels = [str(c.label) for c in hosts.ordered_columns]
        assert labels[:4] == ["host", "offset", "drift", "±"]
        assert sum(widths[:4]) <= hosts.size.width, (widths, hosts.size.width)
        heatmap = app.dashboard.query_one(Heatmap)
        shown = [heatmap.render_line(y).text for y in range(heatmap.size.height)]
        assert any("≥64us" in line for line in shown)
        for line in heatmap._legend_lines("delay"):
            assert sum(seg.cell_length for seg in line) <= heatmap.size.width
        await pilot.pause()
        drain = next(k for k in app.screen.query(FooterKey) if k.description == "Drain")
        assert drain.region.right <= 80


async def test_a_long_status_does_not_push_the_clock_out() -> None:
    snapshot = fleet_snapshot(1)
    error = "dead1 (127.0.0.1:2299): connection refused " * 3
    snapshot.hosts[0] = replace(snapshot.hosts[0], status="unreachable", error=error)
    app = fixed_app(snapshot)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        hosts = app.dashboard.query_one(HostsTable)
        widths = [c.get_render_width(hosts) for c in hosts.ordered_columns]
        assert sum(widths[:5]) <= hosts.size.width  # host, offset, drift, ±, status
        assert max(len(str(hosts.get_row_at(i)[4])) for i in range(hosts.row_count)) <= STATUS_W


async def test_the_first_frame_draws_no_full_height_sparkline_for_no_loss() -> None:
    app = fixed_app(fleet_snapshot(1))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        history = app.dashboard.query_one(WorstPathHistory)
        loss = history.query_one("#loss", Sparkline)
        assert list(history.loss) == [0.0]
        assert "█" not in "".join(s.text for s in loss.render_line(0))
        label = str(history.query_one("#worst-label", Label).render())
        assert label == worst_path_line(worst_paths(app.snapshot, 1)[0])  # the CLI's line


async def test_the_map_says_how_the_first_scan_is_going() -> None:
    release = asyncio.Event()

    class Slow(FixedSource):
        progress: Any = None

        async def next_snapshot(self) -> FabricSnapshot:
            self.progress("started", {"hosts": 3, "of": 4, "duration_s": 30.0})
            self.progress("records", {"records": 1200})
            await release.wait()  # the scan goes on until the test has looked
            return await super().next_snapshot()

    app = make_app(Slow([fleet_snapshot(1)], label="SIMULATED"), max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        heatmap = app.dashboard.query_one(Heatmap)
        await wait_for(pilot, lambda: "3/4 hosts" in heatmap.render_line(0).text)
        assert "1,200 probes" in heatmap.render_line(0).text
        assert "s left" in heatmap.render_line(0).text
        release.set()
        await wait_for(pilot, lambda: app.scans == 1)
        assert heatmap.render_line(0).text.startswith("worst of loss, queueing")


async def test_the_reroute_dialog_shows_its_whole_summary_at_80x24() -> None:
    app = fixed_app()
    targets = tuple(f"leaf{i} (simulated)" for i in range(1, 9))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        app.push_screen(ConfirmScreen("reroute spine3: apply this plan?", "1. ...", targets))
        await pilot.pause()
        summary = app.screen.query_one("#targets")
        text = "changes leaf1, leaf2, leaf3, leaf4, leaf5, leaf6, leaf7 and leaf8 (simulated)"
        assert str(summary.render()) == text
        lines = [line.text for line in summary.render_lines(summary.region.reset_offset)]
        assert " ".join(" ".join(line.split()) for line in lines).strip() == text  # not cut
        assert "Apply on 8 targets" in str(app.screen.query_one("#yes").render())


async def test_the_help_wraps_each_description_beside_its_key() -> None:
    app = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        text = app.screen.query_one("#help-text")
        lines = [s.text for s in text.render_lines(text.region.reset_offset)]
        assert max(len(line.rstrip()) for line in lines) <= text.size.width
        wrapped = [line for line in lines if line.strip() and not line[:KEY_W].strip()]
        assert wrapped, "no long description to wrap at 80 columns"
        for line in wrapped:  # a continuation starts in the description column, not col 0
            assert len(line) - len(line.lstrip()) >= KEY_W


async def test_at_80x24_with_512_hosts_every_cell_is_inside_the_panel() -> None:
    app = fixed_app(fleet_snapshot(64))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        grid, layout = heatmap.grid, heatmap.cell_layout
        assert grid is not None and grid.level == "leaf group"
        assert layout.label_w + 1 + grid.size * layout.cell_w <= heatmap.size.width
        footer = heatmap._footer_lines()
        assert layout.top + grid.size * layout.cell_h + footer <= heatmap.size.height
        title = [heatmap.render_line(y).text.rstrip() for y in range(layout.top)]
        assert title[0] == "worst of loss, queueing"  # whole phrases, one a line
        assert all(len(line) <= heatmap.size.width for line in title)


async def test_a_long_plan_keeps_its_buttons_on_an_80x24_screen() -> None:
    app = fixed_app()
    body = "\n".join(f" {i}. leaf{i}: ECMP weight of spine2 1 -> 0" for i in range(1, 41))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        app.push_screen(ConfirmScreen("reroute spine2: apply this plan?", body, ("leaf1",)))
        await pilot.pause()
        for button in ("#yes", "#no"):
            region = app.screen.query_one(button).region
            assert region.height > 0 and region.y >= 0 and region.bottom <= 24, (button, region)
