"""Host detail: its clock, its GPUs and every path it is an end of."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label, Static

from cwctl.report.units import fmt_ns, fmt_ppb, fmt_ratio
from cwctl.snapshot import FabricSnapshot, HostReport


def clock_text(host: HostReport, reference: str | None) -> str:
    lines = [
        f"status       {host.status}" + (f" ({host.error})" if host.error else ""),
        f"leaf         {host.leaf or '-'}",
        f"offset       {fmt_ns(host.offset_ns, signed=True)} vs {reference or '-'}",
        f"drift        {fmt_ppb(host.drift_ppb)}",
        f"uncertainty  ±{fmt_ns(host.uncertainty_ns)}",
    ]
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
            yield DataTable(id="paths", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#paths", DataTable)
        table.add_columns("direction", "peer", "sent", "loss", "floor", "p50", "p99", "excess")
        mine = [p for p in self.snapshot.paths if self.host_name in (p.src, p.dst)]
        for p in sorted(mine, key=lambda p: -(p.excess_ns or 0.0)):
            out = p.src == self.host_name
            table.add_row(
                "out →" if out else "in ←",
                p.dst if out else p.src,
                str(p.sent),
                fmt_ratio(p.loss),
                fmt_ns(p.owd_min_ns),
                fmt_ns(p.owd_p50_ns),
                fmt_ns(p.owd_p99_ns),
                fmt_ns(p.excess_ns),
            )
        table.focus()
