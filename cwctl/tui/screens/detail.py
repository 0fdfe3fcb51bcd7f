"""Host detail: its clock, its GPUs and every path it is an end of."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, Static

from cwctl.scan.pathreports import PathReport
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.tui.widgets.sortable import Column, SortableTable, number_key
from cwctl.units import fmt_ns, fmt_ppb, fmt_ratio


def clock_text(host: HostReport, reference: str | None) -> str:
    lines = [
        f"status       {host.status}" + (f" ({host.error})" if host.error else ""),
        f"leaf         {host.leaf or '-'}",
        f"offset       {fmt_ns(host.offset_ns, signed=True)} vs {reference or '-'}",
        f"drift        {fmt_ppb(host.drift_ppb)}",
        f"uncertainty  ±{fmt_ns(host.uncertainty_ns)}",
    ]
    if host.jobs is not None:
        lines.append(f"jobs         {', '.join(host.jobs) or 'none running'}")
    if host.component_reference and host.component_reference != reference:
        lines.append(f"component    measured against {host.component_reference}")
    return "\n".join(lines)


def gpu_text(host: HostReport) -> str:
    if not host.gpus:
        return "no GPU data"
    head = f"verdict {host.gpu_verdict or '-'}" + (
        f": {host.gpu_reason}" if host.gpu_reason else ""
    )
    rows = []
    for gpu in host.gpus:
        rows.append("  " + ", ".join(f"{k}={_short(v)}" for k, v in gpu.items()))
    return "\n".join([head, *rows])


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:39] + "…"


class HostPathsTable(SortableTable[PathReport]):
    """Every path the host is an end of; by queueing (p99 over the floor), worst first."""

    default_sort = 7

    def __init__(self, host: str, **kwargs: Any) -> None:
        self.host_name = host
        self.columns_spec = _path_columns(host)
        super().__init__(**kwargs)


def _path_columns(host: str) -> list[Column[PathReport]]:
    def out(p: PathReport) -> bool:
        return p.src == host

    return [
        Column("direction", lambda p: "out →" if out(p) else "in ←", lambda p: not out(p)),
        Column("peer", lambda p: p.dst if out(p) else p.src, lambda p: p.dst if out(p) else p.src),
        Column("sent", lambda p: str(p.sent), lambda p: p.sent, True),
        Column("loss", lambda p: fmt_ratio(p.loss), lambda p: p.loss, True),
        Column("floor", lambda p: fmt_ns(p.owd_min_ns), lambda p: number_key(p.owd_min_ns), True),
        Column("p50", lambda p: fmt_ns(p.owd_p50_ns), lambda p: number_key(p.owd_p50_ns), True),
        Column("p99", lambda p: fmt_ns(p.owd_p99_ns), lambda p: number_key(p.owd_p99_ns), True),
        Column("excess", lambda p: fmt_ns(p.excess_ns), lambda p: number_key(p.excess_ns), True),
    ]


class HostDetailScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,backspace", "app.pop_screen", "Back"),
    ]

    def __init__(self, snapshot: FabricSnapshot, host: str) -> None:
        super().__init__()
        self.snapshot = snapshot
        self.host_name = host

    def compose(self) -> ComposeResult:
        host = next(h for h in self.snapshot.hosts if h.name == self.host_name)
        with VerticalScroll(id="detail"):
            yield Label(f"Host {host.name}", classes="pane-title")
            yield Label("Clock", classes="section")
            yield Static(clock_text(host, self.snapshot.reference), id="clock")
            yield Label("GPUs", classes="section")
            yield Static(gpu_text(host), id="gpus")
            yield Label("Paths", classes="section")
            yield HostPathsTable(self.host_name, id="paths")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#paths", HostPathsTable)
        mine = [p for p in self.snapshot.paths if self.host_name in (p.src, p.dst)]
        table.set_rows([(f"{p.src}>{p.dst}", p) for p in mine])
        table.focus(scroll_visible=False)  # the keys sort and move it; the page opens at its head
        self.call_after_refresh(
            self.query_one("#detail", VerticalScroll).scroll_home, animate=False
        )
