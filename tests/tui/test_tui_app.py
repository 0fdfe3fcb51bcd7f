"""The app under Pilot: scans, panels, screens, keys, actions and --readonly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, DataTable, Input
from textual.widgets._footer import FooterKey
from tui_fixtures import SIZE, known_snapshot, wait_for

from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import ScanSession
from cwctl.tui import app as app_module
from cwctl.tui.app import CwctlApp, make_app
from cwctl.tui.control import PlannedAction
from cwctl.tui.screens.confirm import ConfirmScreen, NoticeScreen
from cwctl.tui.screens.detail import HostDetailScreen
from cwctl.tui.screens.filter import FilterScreen
from cwctl.tui.screens.help import HelpScreen
from cwctl.tui.source import FixedSource
from cwctl.tui.widgets.heatmap import BIN_COLORS, Heatmap
from cwctl.tui.widgets.hosts import HostsTable
from cwctl.tui.widgets.suspects import SuspectsTable


def fixed_app(snapshot: FabricSnapshot | None = None, **kwargs: Any) -> CwctlApp:
    source = FixedSource([snapshot or known_snapshot()], label="SIMULATED")
    kwargs.setdefault("max_scans", 1)
    return make_app(source, **kwargs)


def shown_text(widget: Any) -> str:
    """What a widget shows on screen, its lines joined."""
    return " ".join(s.text for s in widget.render_lines(widget.region.reset_offset))


def footer_keys(app: CwctlApp) -> set[str]:
    return {key.description for key in app.screen.query(FooterKey)}


async def test_simulated_fleet_scans_twice_and_names_the_fault(sim_request: ScanRequest) -> None:
    source = ScanSession(sim_request, sliding=True)
    seen: list[FabricSnapshot] = []
    scan_once = source.next_snapshot

    async def recording() -> FabricSnapshot:
        seen.append(await scan_once())
        return seen[-1]

    source.next_snapshot = recording  # type: ignore[method-assign]
    app = make_app(source, interval_s=0.01, max_scans=2)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans >= 2, timeout_s=30)
        # The timer re-armed once after the first scan: two scans, one model, two windows.
        assert source.scans == 2
        assert source.model is not None and source.model.windows == 2
        # The fault starts at 0.3 s: the first window is clean, the second is not.
        assert seen[0].suspects == []
        suspects = app.dashboard.query_one(SuspectsTable)
        elements = [str(key.value) for key in suspects.rows]
        assert elements[0] == "leaf1-spine2"
        status = str(app.dashboard.query_one("#status").render())
        assert "SIMULATED" in status and "scan 2" in status and "timestamps hw" in status
        assert app.dashboard.query_one(HostsTable).row_count == 16


async def test_heatmap_draws_each_cell_in_its_bin_colour(known: FabricSnapshot) -> None:
    app = fixed_app(known)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        assert heatmap.grid is not None and heatmap.grid.level == "host"
        labels = heatmap.grid.labels

        layout = heatmap.cell_layout

        def cell_colour(src: str, dst: str) -> str | None:
            strip = heatmap.render_line(layout.line_of(labels.index(src)))
            x = 0
            target = layout.label_w + 1 + layout.cell_w * labels.index(dst)
            for segment in strip:
                if x <= target < x + segment.cell_length:
                    colour = segment.style.bgcolor if segment.style else None
                    return None if colour is None else colour.name
                x += segment.cell_length
            raise AssertionError("cell outside the line")

        assert cell_colour("gpu-001", "gpu-002") == BIN_COLORS[0]
        assert cell_colour("gpu-001", "gpu-003") == BIN_COLORS[1]
        assert cell_colour("gpu-002", "gpu-004") == BIN_COLORS[2]
        assert cell_colour("gpu-003", "gpu-004") == BIN_COLORS[3]
        assert cell_colour("gpu-004", "gpu-001") == BIN_COLORS[4]
        assert cell_colour("gpu-002", "gpu-001") is None  # not probed: no colour
        # The cursor starts top-left; moving it right reads out the path's value.
        await pilot.press("right")
        readout = heatmap.render_line(heatmap.readout_line).text  # under the legend
        assert "gpu-001 → gpu-002: loss 0% · queueing 500 ns" in readout
        await pilot.press("m", "m")  # worst of both (the default), queueing, loss
        assert heatmap.metric == "loss" and "loss" in heatmap.render_line(0).text

        # Leaving the heatmap redraws its background (the line cache is not stale).
        def title_bg() -> object:
            style = next(iter(heatmap.render_line(0))).style
            return None if style is None else style.bgcolor

        focused_bg = title_bg()
        app.dashboard.query_one(HostsTable).focus()
        await pilot.pause()
        assert title_bg() != focused_bg


async def test_enter_opens_host_detail_and_escape_returns() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("down", "enter")  # heatmap cursor on gpu-002's row
        assert isinstance(app.screen, HostDetailScreen)
        assert app.screen.host_name == "gpu-002"
        clock = str(app.screen.query_one("#clock").render())
        assert "+3.00 us" in clock and "gpu-003" in clock  # offset vs the reference
        assert "H100" in str(app.screen.query_one("#gpus").render())
        paths = app.screen.query_one("#paths", DataTable)
        assert paths.row_count == 2  # gpu-001 -> gpu-002 and gpu-002 -> gpu-004
        await pilot.press("escape")
        assert app.screen is app.dashboard
        # enter on a row of the hosts table opens that host
        hosts = app.dashboard.query_one(HostsTable)
        hosts.focus()
        hosts.move_cursor(row=hosts.get_row_index("gpu-004"))
        await pilot.press("enter")
        assert isinstance(app.screen, HostDetailScreen) and app.screen.host_name == "gpu-004"
        await pilot.press("escape")
        # enter on a leaf suspect shows that leaf's hosts
        app.dashboard.query_one(SuspectsTable).focus()
        await pilot.press("enter")
        assert app.screen is app.dashboard and hosts.shown_hosts == ["gpu-003", "gpu-004"]
        assert app.focused is hosts


async def test_slash_filters_hosts_and_heatmap_rows() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("slash")
        assert isinstance(app.screen, FilterScreen)
        await pilot.press(*"leaf2", "enter")
        assert app.screen is app.dashboard
        hosts = app.dashboard.query_one(HostsTable)
        assert hosts.shown_hosts == ["gpu-003", "gpu-004"]
        heatmap = app.dashboard.query_one(Heatmap)
        assert heatmap.grid is not None
        assert [heatmap.grid.labels[r] for r in heatmap.rows] == ["gpu-003", "gpu-004"]
        # Escape keeps the filter; an empty filter shows every host again.
        await pilot.press("slash", "escape")
        assert hosts.shown_hosts == ["gpu-003", "gpu-004"]
        await pilot.press("slash")
        app.screen.query_one(Input).value = ""
        await pilot.press("enter")
        assert len(hosts.shown_hosts) == 4


async def test_help_pauses_scans_and_q_quits() -> None:
    source = FixedSource([known_snapshot()], label="SIMULATED")
    app = make_app(source, interval_s=0.01)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans >= 1)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        text = shown_text(app.screen.query_one("#help-text"))
        assert "reroute" in text and "filter" in text
        await wait_for(pilot, lambda: not app.scanning)  # a scan already under way ends
        calls = source.calls
        await pilot.pause(0.2)
        assert source.calls == calls  # nothing scanned behind the dialog
        await pilot.press("escape")
        assert app.screen is app.dashboard
        await wait_for(pilot, lambda: source.calls > calls)  # and scans resume
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_readonly_hides_every_action() -> None:
    app = fixed_app(readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1 and "Quit" in footer_keys(app))
        keys = footer_keys(app)  # the footer is drawn (it may lag the scan on a busy machine)
        assert "Reroute" not in keys and "Drain" not in keys
        await pilot.press("r", "d")
        assert app.screen is app.dashboard
        assert "READONLY" in str(app.dashboard.query_one("#status").render())
        await pilot.press("question_mark")
        await pilot.pause()
        text = shown_text(app.screen.query_one("#help-text"))
        assert "reroute" not in text and "filter" in text
    writable = fixed_app()
    async with writable.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: writable.scans == 1 and "Quit" in footer_keys(writable))
        assert {"Reroute", "Drain"} <= footer_keys(writable)


async def test_actions_without_hosts_to_act_on_say_so_and_apply_nothing() -> None:
    app = fixed_app()  # fixed snapshots: no request, no hosts behind them
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, NoticeScreen))
        text = str(app.screen.query_one("#notice-text").render())
        assert "Actions are unavailable" in text and "leaf2" in text
        assert "no hosts to act on" in text
        await pilot.press("escape")
        assert app.screen is app.dashboard and app.applied == []


def recording_plan(applied: list[str]) -> Any:
    async def plan(kind: str, target: str, source: Any, **kw: Any) -> PlannedAction:
        async def apply() -> str:
            blamed = f" (suspect {kw['suspect']})" if kw.get("suspect") else ""
            applied.append(f"{kind} {target}{blamed}")
            return "done"

        return PlannedAction(kind, target, f"{kind} {target}", f"step 1: {kind} {target}", apply)  # type: ignore[arg-type]

    return plan


async def test_confirmation_applies_only_on_yes(monkeypatch: pytest.MonkeyPatch) -> None:
    done: list[str] = []
    monkeypatch.setattr(app_module, "plan_action", recording_plan(done))
    app = fixed_app(max_scans=None, interval_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        for answer in ("n", "escape", "enter", "y"):  # enter presses the focused Cancel
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "step 1: reroute leaf2" in str(app.screen.query_one("#plan-text").render())
            focused = app.screen.focused
            assert isinstance(focused, Button) and focused.id == "no"  # focus on Cancel
            await pilot.press(answer)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.screen is app.dashboard
            assert done == (["reroute leaf2"] if answer == "y" else []), answer
        await wait_for(pilot, lambda: app.scans == 2)  # an applied plan is followed by a scan
        # d drains the host under the heatmap's cursor (third row: gpu-003)
        await pilot.press("down", "down", "d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: len(done) == 2)
        assert done == ["reroute leaf2", "drain gpu-003"]


async def test_a_failed_scan_is_shown_and_the_app_stays_up() -> None:
    class Broken:
        label = "ssh inventory.toml"
        simulated = False

        async def next_snapshot(self) -> FabricSnapshot:
            raise OSError("network unreachable")

    app = make_app(Broken(), interval_s=60)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app._last_error is not None)
        status = str(app.dashboard.query_one("#status").render())
        assert "network unreachable" in status and app.is_running
        await pilot.press("d")  # a host source without hosts to act on: no plan, no crash
        await pilot.pause()
        assert app.screen is app.dashboard


async def test_reroute_on_the_simulator_changes_the_next_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path))
    request = ScanRequest(
        sim=SimOptions(hosts=16, hosts_per_leaf=4, seed=3, faults=("switch:spine3:down",)),
        duration_s=0.3,
        overrides=ProbeOverrides(rate=100.0),  # 0.3 s windows with volume to name spine3
    )
    source = ScanSession(request, sliding=True)
    app = make_app(source, interval_s=0.01)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: app.snapshot is not None and app.snapshot.suspects)
            assert app.dashboard.query_one(SuspectsTable).selected_element == "spine3"
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 20)
            assert "ECMP weight of spine3 1 -> 0" in str(
                app.screen.query_one("#plan-text").render()
            )
            targets = str(app.screen.query_one("#targets").render())  # every leaf it changes
            assert targets == "changes leaf1, leaf2, leaf3 and leaf4 (simulated)"
            await pilot.press("n")
            await pilot.pause()
            assert source.model.state.ecmp_weight == {}  # cancelled: the fabric is untouched
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), 20)
            await pilot.press("y")
            await wait_for(pilot, lambda: bool(app.applied), 20)
            applied_at = app.scans
            assert all(w == 0 for w in source.model.state.ecmp_weight.values())
            await wait_for(pilot, lambda: app.scans > applied_at + 1, 20)
            assert app.snapshot is not None
            assert "spine3" not in {s.element for s in app.snapshot.suspects}
    finally:
        await source.aclose()


def leafy_snapshot(leaves: int = 12, per_leaf: int = 4) -> FabricSnapshot:
    """More hosts than the heatmap has rows at 120 x 40: it shows leaves."""
    from cwctl.scan.pathreports import PathReport
    from cwctl.scan.snapshot import HostReport

    names = [f"gpu-{i + 1:03d}" for i in range(leaves * per_leaf)]
    hosts = [HostReport(name=n, leaf=f"leaf{i // per_leaf + 1}") for i, n in enumerate(names)]
    paths = [
        PathReport(a, b, 10, 10, 1_000.0, 1_000.0, 1_000.0 + 100.0 * i)
        for i, (a, b) in enumerate(zip(names, names[per_leaf:] + names[:per_leaf], strict=True))
    ]
    return FabricSnapshot(
        source="sim", reference=names[0], duration_s=1.0, hosts=hosts, paths=paths
    )


async def test_enter_on_a_leaf_row_drills_into_its_hosts() -> None:
    app = fixed_app(leafy_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        assert heatmap.grid is not None and heatmap.grid.level == "leaf"
        assert heatmap.grid.labels[:3] == ["leaf1", "leaf2", "leaf3"]  # natural order
        await pilot.press("down", "right", "enter")  # leaf2 -> leaf2: the block of its hosts
        hosts = app.dashboard.query_one(HostsTable)
        assert hosts.shown_hosts == ["gpu-005", "gpu-006", "gpu-007", "gpu-008"]
        # the map is re-laid out as leaf2's hosts, and keeps the focus
        assert heatmap.grid.level == "host"
        assert heatmap.grid.labels == ["gpu-005", "gpu-006", "gpu-007", "gpu-008"]
        assert app.focused is heatmap
        await pilot.press("down", "enter")
        assert isinstance(app.screen, HostDetailScreen) and app.screen.host_name == "gpu-006"
        await pilot.press("escape")
        await pilot.press("escape")  # back up: the leaves again
        assert heatmap.grid.level == "leaf" and app.host_filter == ""
        await pilot.press("slash")
        app.screen.query_one(Input).value = "=leaf1"  # exactly leaf1, not leaf10..leaf12
        await pilot.press("enter")
        assert hosts.shown_hosts == ["gpu-001", "gpu-002", "gpu-003", "gpu-004"]


async def test_d_on_a_leaf_row_drains_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """It used to drain gpu-001 (the hosts table's first row) from a leaf row."""
    done: list[str] = []
    monkeypatch.setattr(app_module, "plan_action", recording_plan(done))
    app = fixed_app(leafy_snapshot())
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        heatmap = app.dashboard.query_one(Heatmap)
        assert app.focused is heatmap and heatmap.grid is not None
        assert heatmap.grid.level == "leaf"
        await pilot.press("down", "d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is app.dashboard and done == []


async def test_d_on_a_switch_suspect_drains_nothing_and_on_a_host_row_drains_that_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    done: list[str] = []
    monkeypatch.setattr(app_module, "plan_action", recording_plan(done))
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        suspects = app.dashboard.query_one(SuspectsTable)
        app.set_focus(suspects)
        await pilot.pause()
        assert suspects.selected_element == "leaf2"
        await pilot.press("d")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.screen is app.dashboard and done == []
        hosts = app.dashboard.query_one(HostsTable)
        app.set_focus(hosts)
        await pilot.press("down", "d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: len(done) == 1)
        assert done == [f"drain {hosts.selected_host}"] and hosts.selected_host != "gpu-001"


async def test_scan_now_replaces_the_armed_scan_instead_of_adding_one() -> None:
    source = FixedSource([known_snapshot()], label="SIMULATED")
    app = make_app(source, interval_s=60)  # the armed scans never fire during the test

    def armed() -> int:
        """Live timers that will call start_scan (set_timer wraps it in a partial)."""
        calls = [getattr(t._callback, "args", (t._callback,)) for t in app._timers if t._task]
        return sum(1 for args in calls if app.start_scan in args)

    async with app.run_test(size=SIZE) as pilot:
        for n in (1, 2, 3):
            await wait_for(pilot, lambda n=n: app.scans == n)  # type: ignore[misc]
            assert armed() == 1, n
            await pilot.press("s")
        await wait_for(pilot, lambda: app.scans == 4)
        assert armed() == 1
