"""``CwctlApp``: the scan pipeline, continuously, in a Textual app.

The app is built around a ``ScanSource`` (``make_app(source)``), so tests hand it a
simulated fleet or fixed snapshots. Scans run in an exclusive async worker that posts
``ScanFinished`` / ``ScanFailed``; the next scan is armed with ``set_timer`` only once
the last one is handled, and waits while another screen (a dialog, host detail, help)
is on top of the dashboard. The UI never waits on the network.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widgets import DataTable

from cwctl import settings
from cwctl.actions.steer import SteerOptions
from cwctl.errors import CwctlError, InputError
from cwctl.report.progress import ScanProgress
from cwctl.runtime.offthread import QuitFastExecutor
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.tui.control import ActionKind, PlannedAction, plan_action
from cwctl.tui.grid import exact_filter
from cwctl.tui.messages import ScanFailed, ScanFinished, ScanProgressed, ScanStarted
from cwctl.tui.screens.confirm import ConfirmScreen, NoticeScreen
from cwctl.tui.screens.dashboard import DashboardScreen
from cwctl.tui.screens.detail import HostDetailScreen
from cwctl.tui.screens.filter import FilterScreen
from cwctl.tui.screens.help import HelpScreen
from cwctl.tui.source import ScanSource
from cwctl.tui.targets import drain_target, host_suspect
from cwctl.tui.widgets.heatmap import Heatmap
from cwctl.tui.widgets.hosts import HostsTable
from cwctl.tui.widgets.statusbar import status_text
from cwctl.tui.widgets.suspects import SuspectsTable, jobs_lines

ACTIONS = frozenset({"reroute", "steer", "drain"})
RETRY_INTERVAL_S = 5.0


class CwctlApp(App[None]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "cwctl"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit"),
        # Ctrl-C quits from anywhere, as in htop and k9s (Textual's own default only hints)
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "up_level", "Back", show=False),
        Binding("enter", "details", "Details", priority=False),
        Binding("s", "scan_now", "Scan"),
        Binding("r", "reroute", "Reroute"),
        Binding("R", "steer", "Steer at hosts", key_display="R", show=False),
        Binding("d", "drain", "Drain"),
    ]

    def __init__(
        self,
        source: ScanSource,
        *,
        readonly: bool = False,
        interval_s: float = settings.TUI_INTERVAL_S,
        max_scans: int | None = None,
        clock: Callable[[], float] = time.time,
        steer: SteerOptions | None = None,
        job_log: str | None = None,
    ) -> None:
        super().__init__()
        self.steer = steer or SteerOptions()  # R: reroute --at hosts with these ports
        self.job_log = job_log  # the job's step logs, judged after an action applies
        self.clock = clock  # wall clock for the status bar (tests pin it)
        self.source = source
        self.readonly = readonly
        self.interval_s = interval_s
        self.max_scans = max_scans  # stop scanning after this many (tests, benches)
        self.snapshot: FabricSnapshot | None = None
        self.scans = 0
        self.scanning = False
        self.host_filter = ""
        # the filters enter (drilling down) replaced, with the heatmap's cursor; esc: back
        self.filters: list[tuple[str, tuple[int, int]]] = []
        self.progress = ScanProgress(clock=clock)
        self.progress_words: str | None = None
        self.applied: list[PlannedAction] = []
        self.executor = QuitFastExecutor(thread_name_prefix="cwctl-tui")
        self._scan_due = False
        self._next_scan: Timer | None = None
        self._last_elapsed_s: float | None = None
        self._last_finished: float | None = None
        self._last_error: str | None = None

    def get_default_screen(self) -> DashboardScreen:
        return DashboardScreen()

    @property
    def dashboard(self) -> DashboardScreen:
        screen = self._dashboard()
        assert screen is not None, "the app is not running"
        return screen

    def _dashboard(self) -> DashboardScreen | None:
        """The dashboard, or None while the app starts up or shuts down."""
        stack = self.screen_stack
        return stack[0] if stack and isinstance(stack[0], DashboardScreen) else None

    def on_mount(self) -> None:
        # the scans' numpy work: a quit does not wait for it (cwctl.runtime.offthread)
        asyncio.get_running_loop().set_default_executor(self.executor)
        self.sub_title = self.source.label
        if hasattr(self.source, "progress"):  # a ScanSession: say how each scan is going
            self.source.progress = self._on_progress
        self.call_after_refresh(self._begin)  # once the dashboard's widgets exist

    def _begin(self) -> None:
        self._refresh_status()
        self.start_scan()

    # -- scanning --------------------------------------------------------------------

    def _covered(self) -> bool:
        """Is another screen on top of the dashboard? Scans wait until it closes."""
        return len(self.screen_stack) > 1

    def start_scan(self) -> None:
        """Scan now, unless one is running, a screen covers the dashboard, or we are done."""
        if self.max_scans is not None and self.scans >= self.max_scans:
            return
        if self._covered():
            self._scan_due = True
            return
        if self.scanning or self._dashboard() is None:
            return
        self._scan_due = False
        if self._next_scan is not None:  # a scan asked for early replaces the armed one
            self._next_scan.stop()
            self._next_scan = None
        self.scanning = True
        self.run_scan(self.scans + 1)

    def resume_scans(self) -> None:
        if self._scan_due:
            self.start_scan()

    def _on_progress(self, event: str, fields: dict[str, object]) -> None:
        """The source's progress callback (in the scan's event loop, or a thread)."""
        self.progress.feed(event, fields)
        self.post_message(ScanProgressed(self.scans + 1, self.progress.words()))

    def on_scan_progressed(self, message: ScanProgressed) -> None:
        if not self.scanning:
            return
        self.progress_words = message.words
        dashboard = self._dashboard()
        if dashboard is not None and self.snapshot is None:
            # query, not query_one: a message landing while the app shuts down finds none
            for heatmap in dashboard.query(Heatmap):
                heatmap.set_waiting(f"first scan: {message.words}")
        self._refresh_status()

    @work(exclusive=True, group="scan")
    async def run_scan(self, number: int) -> None:
        self.progress = ScanProgress(clock=self.clock)
        self.progress_words = None
        self.post_message(ScanStarted(number))
        started = self.clock()
        try:
            snapshot = await self.source.next_snapshot()
        except InputError as exc:  # bad input does not mend itself: no retry loop
            self.post_message(ScanFailed(number, str(exc), retry=False))
        except CwctlError as exc:
            self.post_message(ScanFailed(number, str(exc)))
        except Exception as exc:  # a bug or a network surprise: show it, keep the UI up
            self.post_message(ScanFailed(number, f"{type(exc).__name__}: {exc}"))
        else:
            self.post_message(ScanFinished(number, snapshot, self.clock() - started))

    def on_scan_started(self, message: ScanStarted) -> None:
        self._refresh_status()

    def on_scan_finished(self, message: ScanFinished) -> None:
        self.scanning = False
        self.scans = message.number
        self.snapshot = message.snapshot
        self._last_elapsed_s = message.elapsed_s
        self._last_finished = self.clock()
        self._last_error = None
        dashboard = self._dashboard()
        if dashboard is None:
            return
        dashboard.show(message.snapshot)
        self._refresh_status()
        self._arm(self.interval_s)

    def on_scan_failed(self, message: ScanFailed) -> None:
        self.scanning = False
        self._last_error = message.error
        self._refresh_status()
        self.notify(message.error, title="scan failed", severity="error")
        if message.retry:
            self._arm(max(self.interval_s, RETRY_INTERVAL_S))

    def _arm(self, delay_s: float) -> None:
        """One timer at a time, armed after a scan is handled: scans never pile up."""
        if self._next_scan is not None:
            self._next_scan.stop()
        self._next_scan = self.set_timer(delay_s, self.start_scan)

    def _refresh_status(self) -> None:
        dashboard = self._dashboard()
        if dashboard is None:
            return
        dashboard.set_status(
            status_text(
                self.source.label,
                scans=self.scans,
                snapshot=self.snapshot,
                elapsed_s=self._last_elapsed_s,
                finished_at=self._last_finished,
                scanning=self.scanning,
                progress=self.progress_words if self.scanning else None,
                error=self._last_error,
                readonly=self.readonly,
            )
        )

    def action_scan_now(self) -> None:
        self.start_scan()

    # -- navigation ------------------------------------------------------------------

    def action_help(self) -> None:
        self.push_screen(HelpScreen(self.readonly))

    def action_filter(self) -> None:
        def apply(needle: str | None) -> None:
            if needle is not None:
                self.set_filter(needle)

        self.push_screen(FilterScreen(self.host_filter), apply)

    def set_filter(self, needle: str, *, drill: bool = False) -> None:
        """Show only the hosts ``needle`` keeps (heatmap, re-laid out, and hosts table);
        ``drill``: enter went down a level, and esc comes back to this one."""
        if drill:
            self.filters.append((self.host_filter, self.dashboard.query_one(Heatmap).cursor))
        else:
            self.filters.clear()
        self.host_filter = needle
        self.dashboard.set_filter(needle)

    def action_up_level(self) -> None:
        """esc on the dashboard: back to the filter before the last drill-down (or none),
        the heatmap's cursor where it was."""
        if self._covered() or not (self.filters or self.host_filter):
            return
        previous, cursor = self.filters.pop() if self.filters else ("", (0, 0))
        self.host_filter = previous
        self.dashboard.set_filter(previous)
        self.dashboard.query_one(Heatmap).place_cursor(cursor)

    def selected_host(self) -> str | None:
        """The host the operator points at: the hosts table's row, else the heatmap's."""
        focused = self.focused
        if isinstance(focused, HostsTable):
            return focused.selected_host
        heatmap = self.dashboard.query_one(Heatmap)
        if heatmap.cursor_host is not None:
            return heatmap.cursor_host
        return self.dashboard.query_one(HostsTable).selected_host

    def action_details(self) -> None:
        if self.snapshot is None or self._covered():
            return
        heatmap = self.dashboard.query_one(Heatmap)
        if self.focused is heatmap:  # the cell under the cursor, never another widget's row
            block = heatmap.cursor_block
            if block is not None:  # a leaf pair: re-lay the map as their hosts, worst first
                sources, destinations = block
                names = sources + [n for n in destinations if n not in sources]
                self.set_filter(exact_filter(names), drill=True)
                self._point_at_block(sources, destinations)
            elif heatmap.cursor_host is not None:
                self.push_screen(HostDetailScreen(self.snapshot, heatmap.cursor_host))
            return
        if isinstance(self.focused, SuspectsTable):
            self._suspect_details(self.focused.selected_element)
            return
        host = self.selected_host()
        if host is not None:
            self.push_screen(HostDetailScreen(self.snapshot, host))

    def _point_at_block(self, sources: list[str], destinations: list[str]) -> None:
        """After a leaf pair's drill-down: the cursor on the worst path between them
        (``sources`` and ``destinations`` are leaves, or hosts where no leaf is known)."""
        assert self.snapshot is not None
        leaf = {h.name: h.leaf for h in self.snapshot.hosts}

        def hosts(names: list[str]) -> list[str]:
            wanted = set(names)
            return [h for h in leaf if h in wanted or leaf[h] in wanted]

        self.dashboard.query_one(Heatmap).point_at_worst(hosts(sources), hosts(destinations))

    def _suspect_details(self, element: str | None) -> None:
        """Enter on a suspect: a host (or a NIC's host) opens; a leaf shows its hosts."""
        assert self.snapshot is not None
        if element is None:
            return
        hosts = {h.name for h in self.snapshot.hosts}
        leaves = {h.leaf for h in self.snapshot.hosts if h.leaf}
        host = element.split("/", 1)[0]
        if host in hosts:
            self.push_screen(HostDetailScreen(self.snapshot, host))
        elif element in leaves:
            self._show_leaf(element)
        else:
            found = next((s for s in self.snapshot.suspects if s.element == element), None)
            if found is not None and found.jobs is not None:
                lines = jobs_lines(found) or ["no running job crosses it"]
                body = "\n".join([found.evidence, "", "jobs it hurts:", *lines])
                self.push_screen(NoticeScreen(f"suspect {element}", body))
                return
            self.notify(f"{element}: its evidence is under the table; r plans a reroute")

    def _show_leaf(self, leaf: str) -> None:
        """Filter to one leaf's hosts (the heatmap re-laid out as them) and move to the
        hosts table to pick one."""
        self.set_filter(exact_filter([leaf]), drill=True)
        self.dashboard.query_one(HostsTable).focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        # DataTable takes enter for itself; selecting a host row opens its detail.
        if isinstance(event.data_table, (HostsTable, SuspectsTable)):
            self.action_details()

    # -- actions ---------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # --readonly: reroute and drain are hidden from the footer and never run;
        # --replay: the records are what they are, no scan to ask for (s)
        if action == "scan_now" and self.replaying:
            return False
        return not (action in ACTIONS and self.readonly)

    @property
    def replaying(self) -> bool:
        """Is the source a replay of saved records (``--replay``)?"""
        request = getattr(self.source, "request", None)
        return getattr(request, "replay", None) is not None

    def _plan(self, kind: ActionKind, *, steer: bool = False) -> None:
        if self.readonly or self._covered():
            return
        if kind == "drain":
            target, why = drain_target(self.focused, self.snapshot)
        else:
            target = self.dashboard.query_one(SuspectsTable).selected_element
            why = "select a suspect first"
        if target is None:
            self.notify(why, title=kind, severity="warning")
            return
        self.notify(f"planning {kind} {target}{' at the hosts' if steer else ''}…", timeout=2)
        self.plan_worker(kind, target, self.steer if steer else None)

    @work(exclusive=True, group="action")
    async def plan_worker(
        self, kind: ActionKind, target: str, steer: SteerOptions | None = None
    ) -> None:
        """Plan off the UI (a reroute reads routes over SSH), then ask."""
        try:
            blamed = host_suspect(self.snapshot, target) if kind == "drain" else None
            plan = await plan_action(
                kind, target, self.source, suspect=blamed, steer=steer, job_log=self.job_log
            )
        except Exception as exc:
            self.notify(f"{type(exc).__name__}: {exc}", title=f"{kind} failed", severity="error")
            return
        if not plan.available:
            self.push_screen(NoticeScreen(plan.title, plan.text))
            return

        def decided(yes: bool | None) -> None:
            if yes:
                self.apply_worker(plan)
            else:
                self.notify(f"{kind} {target}: cancelled, nothing applied")
                self.run_worker(plan.discard(), group="action-close")

        self.push_screen(ConfirmScreen(plan.title, plan.text, plan.targets), decided)

    @work(exclusive=True, group="action")
    async def apply_worker(self, plan: PlannedAction) -> None:
        assert plan.apply is not None
        try:
            outcome = await plan.apply()
        except CwctlError as exc:
            self.notify(str(exc), title=f"{plan.kind} failed", severity="error")
            return
        except Exception as exc:
            self.notify(
                f"{type(exc).__name__}: {exc}", title=f"{plan.kind} failed", severity="error"
            )
            return
        self.applied.append(plan)
        self.notify(outcome, title=f"{plan.kind} applied")
        changed = getattr(self.source, "fabric_changed", None)
        if changed is not None:  # paths learnt before the change no longer hold
            changed()
        self.start_scan()  # the next scan shows the effect

    def action_reroute(self) -> None:
        self._plan("reroute")

    def action_steer(self) -> None:
        """R: reroute around the suspect by source port at the hosts (--at hosts)."""
        self._plan("reroute", steer=True)

    def action_drain(self) -> None:
        self._plan("drain")


def make_app(
    source: ScanSource,
    *,
    readonly: bool = False,
    interval_s: float = settings.TUI_INTERVAL_S,
    max_scans: int | None = None,
    clock: Callable[[], float] = time.time,
    steer: SteerOptions | None = None,
    job_log: str | None = None,
) -> CwctlApp:
    """The app around ``source`` (a ``ScanSession`` for the CLI, anything in tests)."""
    return CwctlApp(
        source,
        readonly=readonly,
        interval_s=interval_s,
        max_scans=max_scans,
        clock=clock,
        steer=steer,
        job_log=job_log,
    )
