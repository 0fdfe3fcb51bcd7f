"""The scan report for people (placeholder until the telemetry report lands)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from cwctl.snapshot import FabricSnapshot


def render_table(snapshot: FabricSnapshot, *, color: bool = True, width: int = 80) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=not color, force_terminal=color)
    ok = sum(h.status == "ok" for h in snapshot.hosts)
    console.print(
        f"[bold]cwctl scan[/] source={snapshot.source} hosts ok {ok}/{len(snapshot.hosts)} "
        f"records={snapshot.records} timestamps={snapshot.timestamp_source}"
    )
    hosts = Table("host", "status", "offset ns", "drift ppb", "± ns")
    for h in snapshot.hosts:
        hosts.add_row(
            h.name,
            h.status if h.error is None else f"{h.status}: {h.error}",
            _fmt(h.offset_ns),
            _fmt(h.drift_ppb),
            _fmt(h.uncertainty_ns),
        )
    console.print(hosts)
    return buf.getvalue()


def _fmt(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:,.0f}"
