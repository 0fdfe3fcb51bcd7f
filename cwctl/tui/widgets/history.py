"""History of the worst path across scans, as sparklines: its loss and its queueing p50.

The worst path is the report's (``cwctl.report.summary.worst_paths``: loss, then queueing
p50, then queueing p99), so the TUI and ``cwctl scan`` name the same path; the label is
the report's summary line. Each sparkline starts from zero, so a first scan with no loss
draws a flat line, not a full bar.
"""

from __future__ import annotations

from collections import deque

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline

from cwctl.report.summary import worst_path_line, worst_paths
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.units import fmt_ns, fmt_ratio

KEEP = 120  # scans of history


def worst_path(snapshot: FabricSnapshot) -> tuple[str, float, float]:
    """The report's worst path: its summary line, its loss and its queueing p50 (ns);
    0 when unknown."""
    worst = worst_paths(snapshot, 1)
    if not worst:
        return "worst path: none probed", 0.0, 0.0
    p = worst[0]
    return worst_path_line(p), p.loss, p.queueing_ns or 0.0


def from_zero(values: deque[float]) -> list[float]:
    """The sparkline's data: a zero first, so its scale starts at zero (one value, or
    equal values, would otherwise fill every bar)."""
    return [0.0, *values]


class WorstPathHistory(Vertical):
    DEFAULT_CSS = """
    WorstPathHistory {
        height: 3;  /* the app's stylesheet gives it a top border */
        padding: 0 1;
    }
    WorstPathHistory Horizontal {
        height: 1;
    }
    WorstPathHistory Label {
        width: auto;
        padding-right: 1;
    }
    WorstPathHistory Sparkline {
        width: 1fr;
        height: 1;
        margin-right: 2;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.queueing_ns: deque[float] = deque(maxlen=KEEP)
        self.loss: deque[float] = deque(maxlen=KEEP)

    def compose(self) -> ComposeResult:
        yield Label("worst path: -", id="worst-label")
        with Horizontal():
            yield Label("loss -", id="loss-label")
            yield Sparkline([], id="loss")
            yield Label("queueing p50 -", id="queueing-label")
            yield Sparkline([], id="queueing")

    def add_snapshot(self, snapshot: FabricSnapshot) -> None:
        line, loss, queueing = worst_path(snapshot)
        self.loss.append(loss)
        self.queueing_ns.append(queueing)
        self.query_one("#loss", Sparkline).data = from_zero(self.loss)
        self.query_one("#queueing", Sparkline).data = from_zero(self.queueing_ns)
        self.query_one("#worst-label", Label).update(line)
        self.query_one("#loss-label", Label).update(f"by scan: loss {fmt_ratio(loss)}")
        self.query_one("#queueing-label", Label).update(f"queueing p50 {fmt_ns(queueing)}")
