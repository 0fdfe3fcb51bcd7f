"""History of the worst path across scans: p99 one-way delay and loss, as sparklines."""

from __future__ import annotations

from collections import deque

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Label, Sparkline

from cwctl.snapshot import FabricSnapshot
from cwctl.units import fmt_ns, fmt_ratio

KEEP = 120  # scans of history


def worst_path(snapshot: FabricSnapshot) -> tuple[float, float]:
    """The worst p99 one-way delay (ns) and the worst loss of any path; 0 when none."""
    p99 = [p.owd_p99_ns for p in snapshot.paths if p.owd_p99_ns is not None]
    loss = [p.loss for p in snapshot.paths if p.sent]
    return (max(p99) if p99 else 0.0), (max(loss) if loss else 0.0)


class History(Horizontal):
    DEFAULT_CSS = """
    History {
        height: 3;
    }
    History > Vertical {
        width: 1fr;
        padding: 0 1;
    }
    History Sparkline {
        height: 2;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.p99_ns: deque[float] = deque(maxlen=KEEP)
        self.loss: deque[float] = deque(maxlen=KEEP)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("worst path p99: -", id="p99-label")
            yield Sparkline([], id="p99")
        with Vertical():
            yield Label("worst path loss: -", id="loss-label")
            yield Sparkline([], id="loss")

    def add_snapshot(self, snapshot: FabricSnapshot) -> None:
        p99, loss = worst_path(snapshot)
        self.p99_ns.append(p99)
        self.loss.append(loss)
        self.query_one("#p99", Sparkline).data = list(self.p99_ns)
        self.query_one("#loss", Sparkline).data = list(self.loss)
        self.query_one("#p99-label", Label).update(f"worst path p99: {fmt_ns(p99)}")
        self.query_one("#loss-label", Label).update(f"worst path loss: {fmt_ratio(loss)}")
