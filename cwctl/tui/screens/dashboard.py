"""The main screen: heatmap, suspects, hosts, history and the status bar."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Static

from cwctl.scan.snapshot import FabricSnapshot
from cwctl.tui.widgets.heatmap import Heatmap
from cwctl.tui.widgets.history import WorstPathHistory
from cwctl.tui.widgets.hosts import HostsTable
from cwctl.tui.widgets.statusbar import StatusBar
from cwctl.tui.widgets.suspects import SuspectsTable, jobs_lines

SIDE_MIN_W = 46  # the hosts table's host, offset, drift and ± columns, borders included


class DashboardScreen(Screen[None]):
    """Everything one scan found; the app feeds it each new snapshot."""

    # b: the uplinks' load per leaf, measured from the hosts' sockets, and the moves that
    # would level it (cwctl rebalance's plan), in the confirm dialog; y applies them
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("b", "balance", "Balance uplinks", show=False),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "balance" and getattr(self.app, "readonly", True))

    def action_balance(self) -> None:
        app: Any = self.app
        if len(app.screen_stack) > 1:
            return
        app.notify("measuring the uplinks from the hosts' sockets…", timeout=2)
        app.plan_worker("rebalance", "uplinks")

    def compose(self) -> ComposeResult:
        with Horizontal(id="top"):
            with Vertical(id="map-pane", classes="pane"):
                yield Heatmap(id="heatmap")
            with Vertical(id="side"):
                with Vertical(id="suspects-pane", classes="pane"):
                    yield Label("Suspects", classes="pane-title")
                    yield SuspectsTable(id="suspects")
                    yield Static("", id="evidence")
                with Vertical(id="hosts-pane", classes="pane"):
                    yield Label("Hosts", id="hosts-title", classes="pane-title")
                    yield HostsTable(id="hosts")
        yield WorstPathHistory(id="history")
        yield StatusBar("starting…", id="status")
        yield Footer(show_command_palette=False)  # room for every key at 80 columns

    def on_mount(self) -> None:
        self.query_one(Heatmap).focus()

    def on_resize(self, event: events.Resize) -> None:
        # Narrow: the side panels keep the width the hosts' clock columns need (host,
        # offset, drift, ±); the heatmap's cells shrink instead.
        side = self.query_one("#side")
        side.styles.width = SIDE_MIN_W if event.size.width < 2 * SIDE_MIN_W else "1fr"

    def show(self, snapshot: FabricSnapshot) -> None:
        self.query_one(Heatmap).update_snapshot(snapshot)
        self.query_one(SuspectsTable).update_snapshot(snapshot)
        self.query_one(HostsTable).update_snapshot(snapshot)
        self.query_one(WorstPathHistory).add_snapshot(snapshot)
        self._show_evidence()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if isinstance(event.data_table, SuspectsTable):
            self._show_evidence()

    def _show_evidence(self) -> None:
        element = self.query_one(SuspectsTable).selected_element
        snapshot = self.query_one(HostsTable).snapshot
        text = ""
        if element is not None and snapshot is not None:
            found = next((s for s in snapshot.suspects if s.element == element), None)
            if found is not None:
                text = "\n".join([found.evidence, *(f"job {j}" for j in jobs_lines(found))])
        self.query_one("#evidence", Static).update(text)

    def set_filter(self, needle: str) -> None:
        self.query_one(Heatmap).host_filter = needle
        self.query_one(HostsTable).set_filter(needle)
        title = f"Hosts (filter: {needle})" if needle else "Hosts"
        self.query_one("#hosts-title", Label).update(title)

    def set_status(self, text: str) -> None:
        # a progress message can land while the app shuts down and the bar is gone already
        for bar in self.query(StatusBar):
            bar.update(text)

    def on_screen_resume(self) -> None:
        # Scans pause while another screen is on top; catch up when back.
        resume = getattr(self.app, "resume_scans", None)
        if resume is not None:
            resume()
