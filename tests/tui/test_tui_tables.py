"""Sortable tables that show what they are sorted by, a help screen that lists every key,
confirm dialogs that name their targets, and --replay under Pilot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.binding import Binding
from tui_fixtures import SIZE, known_snapshot, wait_for

from cwctl.scan.request import ScanRequest
from cwctl.scan.snapshot import Suspect
from cwctl.session import ScanSession
from cwctl.tui.app import CwctlApp, make_app
from cwctl.tui.screens.confirm import ConfirmScreen, NoticeScreen, targets_line
from cwctl.tui.screens.detail import HostDetailScreen, HostPathsTable
from cwctl.tui.screens.filter import FilterScreen
from cwctl.tui.screens.help import KEYS, HelpScreen, help_text
from cwctl.tui.source import FixedSource
from cwctl.tui.widgets.heatmap import Heatmap
from cwctl.tui.widgets.hosts import HostsTable
from cwctl.tui.widgets.sortable import SortableTable
from cwctl.tui.widgets.suspects import SuspectsTable


def _header(table: SortableTable[Any]) -> list[str]:
    return [str(c.label) for c in table.columns.values()]


def _column(table: SortableTable[Any], index: int) -> list[str]:
    return [str(table.get_row_at(i)[index]) for i in range(table.row_count)]


async def test_tables_say_what_they_are_sorted_by_and_o_changes_it() -> None:
    app = make_app(FixedSource([known_snapshot()], label="SIMULATED"), max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        hosts = app.dashboard.query_one(HostsTable)
        assert _header(hosts)[5] == "leaf▲"  # the heatmap's order, and it says so
        assert _header(hosts)[:4] == ["host", "offset", "drift", "±"]  # the clock first
        assert _column(hosts, 0) == ["gpu-001", "gpu-002", "gpu-003", "gpu-004"]
        suspects = app.dashboard.query_one(SuspectsTable)
        assert _header(suspects)[0] == "score▼"
        hosts.focus()
        await pilot.press("o")  # next sortable column: GPU
        await pilot.press("o")  # then (around) host
        await pilot.press("o")  # then offset, largest first
        assert hosts.sorted_by == "offset▼" and _header(hosts)[1] == "offset▼"
        assert _header(hosts)[5] == "leaf"  # the old arrow is gone
        # offsets are 1 us x the host's index in the fixture: gpu-002 3 us, gpu-004 2 us...
        assert _column(hosts, 0) == ["gpu-002", "gpu-004", "gpu-001", "gpu-003"]
        hosts.sort_by(1)  # a second click on the same header reverses it
        assert hosts.sorted_by == "offset▲"
        assert _column(hosts, 0) == ["gpu-003", "gpu-001", "gpu-004", "gpu-002"]


async def test_host_detail_paths_sorted_by_a_shown_column() -> None:
    app = make_app(FixedSource([known_snapshot()], label="SIMULATED"), max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        app.push_screen(HostDetailScreen(known_snapshot(), "gpu-004"))
        await pilot.pause()
        table = app.screen.query_one(HostPathsTable)
        assert table.sorted_by == "excess▼"
        peers = _column(table, 1)
        assert peers[0] == "gpu-001"  # 100 us of excess: the worst of gpu-004's paths
        excess = _column(table, 7)
        assert excess[0] == "200 us"  # p99 - floor: the fixture's queueing p50 twice


def _binding_keys() -> set[str]:
    from cwctl.tui.screens.detail import HostDetailScreen

    keys: set[str] = set()
    for owner in (CwctlApp, Heatmap, SortableTable, ConfirmScreen, NoticeScreen, HelpScreen,
                  HostDetailScreen, FilterScreen):  # fmt: skip
        for b in owner.BINDINGS:
            assert isinstance(b, Binding)
            keys.update(k.strip() for k in b.key.split(","))
    return keys


def test_help_lists_every_key_the_app_binds() -> None:
    shown = {
        tok.strip()
        for k, _ in KEYS
        for part in k.split(",")
        for tok in part.replace("click a header", "").split()
    }
    names = {"question_mark": "?", "slash": "/", "escape": "esc",
             "up": "arrows", "down": "arrows", "left": "arrows", "right": "arrows"}  # fmt: skip
    missing = {k for k in _binding_keys() if names.get(k, k) not in shown}
    assert not missing, f"keys bound but not in the help screen: {missing}"
    assert "y, n" not in help_text(readonly=True)  # actions hidden under --readonly


async def test_help_screen_opens_on_question_mark() -> None:
    app = make_app(FixedSource([known_snapshot()], label="SIMULATED"), max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.pause()
        shown = app.screen.query_one("#help-text")
        text = " ".join(s.text for s in shown.render_lines(shown.region.reset_offset))
        assert "sort a table" in text and "drain" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


def test_targets_line_names_every_target() -> None:
    assert targets_line(("gpu-003",)) == "changes gpu-003"
    assert targets_line(("leaf1", "leaf2", "leaf3")) == "changes leaf1, leaf2 and leaf3"
    simulated = tuple(f"leaf{i} (simulated)" for i in range(1, 5))
    assert targets_line(simulated) == "changes leaf1, leaf2, leaf3 and leaf4 (simulated)"


def test_a_slurm_drain_names_the_scheduler_not_local() -> None:
    from cwctl.actions.plan import LOCAL, Step
    from cwctl.tui.control import step_target

    argv = ("scontrol", "update", "NodeName=blackhole", "State=DRAIN", "Reason=x")
    assert step_target(Step(LOCAL, "drain blackhole", argv)) == "slurmctld"
    assert step_target(Step("slurm-ctl", "drain", argv)) == "slurmctld (via slurm-ctl)"
    assert step_target(Step("gpu-001", "route", ("ip", "route"))) == "gpu-001"


async def test_confirm_dialog_names_the_exact_targets() -> None:
    app = make_app(FixedSource([known_snapshot()], label="SIMULATED"), max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        app.push_screen(ConfirmScreen("reroute spine3: apply this plan?", "1. ...",
                                      ("leaf1", "leaf2")))  # fmt: skip
        await pilot.pause()
        assert str(app.screen.query_one("#targets").render()) == "changes leaf1 and leaf2"
        assert "Apply on 2 targets" in str(app.screen.query_one("#yes").render())


async def test_replay_shows_the_saved_scan(tmp_path: Path) -> None:
    from cwctl.scan.request import SimOptions
    from cwctl.session import scan

    records = tmp_path / "scan.jsonl"
    await scan(ScanRequest(sim=SimOptions(hosts=8), duration_s=0.3, save_records=records))
    source = ScanSession(ScanRequest(replay=records), sliding=True)
    tui = make_app(source, max_scans=1, readonly=True)
    async with tui.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: tui.scans == 1, 30)
        assert tui.dashboard.query_one(HostsTable).row_count == 8
        status = str(tui.dashboard.query_one("#status").render())
        assert f"replay {records}" in status


async def test_bad_input_is_not_retried_forever() -> None:
    """Was: a bad --reference made the TUI fail, wait 5 s and fail again, forever."""
    from cwctl.errors import InputError
    from cwctl.scan.snapshot import FabricSnapshot

    class BadInput:
        label = "SIMULATED"
        simulated = True
        calls = 0

        async def next_snapshot(self) -> FabricSnapshot:
            self.calls += 1
            raise InputError("--reference nosuch: no such host")

    source = BadInput()
    tui = make_app(source, interval_s=0.01)
    async with tui.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: tui._last_error is not None)
        await pilot.pause(0.3)  # 30 intervals: a retry loop would have scanned again
        assert source.calls == 1
        assert "no such host" in str(tui.dashboard.query_one("#status").render())


async def test_a_host_silent_on_the_fabric_reads_no_fabric() -> None:
    from dataclasses import replace

    snap = known_snapshot()
    snap.paths = [replace(p, received=0) if "gpu-004" in (p.src, p.dst) else p
                  for p in snap.paths]  # fmt: skip
    app = make_app(FixedSource([snap], label="SIMULATED"), max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        hosts = app.dashboard.query_one(HostsTable)
        status = dict(zip(_column(hosts, 0), _column(hosts, 4), strict=True))
        assert status["gpu-004"] == "no fabric" and status["gpu-001"] == "ok"


async def test_a_drain_from_the_tui_names_the_suspect_that_caused_it(
    monkeypatch: Any,
) -> None:
    from cwctl.scan.snapshot import Suspect
    from cwctl.tui import app as app_module
    from cwctl.tui.control import PlannedAction

    asked: list[tuple[str, str, str | None]] = []

    async def plan(kind: str, target: str, source: Any, **kw: Any) -> PlannedAction:
        asked.append((kind, target, kw.get("suspect")))
        return PlannedAction(kind, target, "t", "text", None)  # type: ignore[arg-type]

    monkeypatch.setattr(app_module, "plan_action", plan)
    snap = known_snapshot()
    snap.suspects = [Suspect("gpu-003/mlx5_1", "nic", 0.8, "loses probes"),
                     Suspect("gpu-003", "host", 0.4, "weaker")]  # fmt: skip
    tui = make_app(FixedSource([snap], label="SIMULATED"), max_scans=1)
    async with tui.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: tui.scans == 1)
        hosts = tui.dashboard.query_one(HostsTable)
        hosts.focus()
        hosts.move_cursor(row=hosts.get_row_index("gpu-003"))
        await pilot.press("d")
        await wait_for(pilot, lambda: bool(asked))
        await pilot.press("escape")
        hosts.move_cursor(row=hosts.get_row_index("gpu-001"))
        await pilot.press("d")
        await wait_for(pilot, lambda: len(asked) == 2)
    assert asked == [("drain", "gpu-003", "gpu-003/mlx5_1"), ("drain", "gpu-001", None)]


async def test_the_suspects_panel_shows_the_jobs_only_when_a_scheduler_was_read() -> None:
    plain = make_app(FixedSource([known_snapshot()], label="SIMULATED"), max_scans=1)
    async with plain.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: plain.scans == 1)
        suspects = plain.dashboard.query_one(SuspectsTable)
        await wait_for(pilot, lambda: suspects.row_count == 1)
        assert "jobs" not in _header(suspects)
    with_jobs = known_snapshot()
    with_jobs.jobs = {"scheduler": "slurm", "running": 3}
    with_jobs.suspects = [Suspect("spine1", "switch", 0.8, "loss: 4 of 4 flows")]
    with_jobs.suspects[0].jobs = [
        {"id": "77", "user": "ann", "name": "llm", "nodes": 4, "paths_hit": 3, "paths": 6},
        {"id": "78", "user": "bo", "name": "eval", "nodes": 1, "paths_hit": 0, "paths": 0,
         "on_node": ["gpu-003"]},
    ]  # fmt: skip
    app = make_app(FixedSource([with_jobs], label="SIMULATED"), max_scans=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.scans == 1)
        suspects = app.dashboard.query_one(SuspectsTable)
        await wait_for(pilot, lambda: suspects.row_count == 1)
        assert _header(suspects) == ["score▼", "kind", "element", "jobs", "evidence"]
        assert _column(suspects, 3) == ["77 +1"]
        suspects.focus()
        await pilot.pause()
        await pilot.press("enter")  # a spine: its evidence and every job it hurts
        await wait_for(pilot, lambda: isinstance(app.screen, NoticeScreen))
        body = app.screen.body  # type: ignore[attr-defined]
        assert "77 ann/llm: 3 of 6 node pairs cross it" in body
        assert "78 bo/eval: 0 of 0 node pairs cross it; runs on gpu-003" in body
