"""The help screen: every key, and what the panels show."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Label, Static

from cwctl.tui.screens.modal import ScrollingModal

KEYS = [
    ("?", "this help"),
    ("/", "filter hosts (part of name, leaf or status; =word: exact); empty clears"),
    ("enter", "details of the host under the cursor; on a leaf row: the map of its hosts"),
    ("esc", "back up from a leaf's hosts (or clear the filter)"),
    ("tab", "next panel: heatmap, suspects, hosts"),
    ("arrows, h j k l", "move the heatmap's cursor"),
    ("m", "heatmap colour: worst of loss and queueing (default) / queueing p50 / loss"),
    ("o, click a header", "sort a table by its next column (a click: that one; again: reverse)"),
    ("", "the column a table is sorted by shows ▼ (largest first) or ▲"),
    ("s", "scan now"),
    ("r", "reroute around the selected suspect (plan, then confirm)"),
    (
        "R",
        "steer around it at the hosts: new connections leave from source ports whose "
        "paths avoid it (reroute --at hosts; ports: tui --steer-port)",
    ),
    ("d", "drain the selected host (plan, then confirm)"),
    (
        "b",
        "balance the uplinks: each leaf's uplink load from the hosts' sockets, and the flow "
        "moves that level it (cwctl rebalance; plan, then confirm)",
    ),
    ("y, n", "in a confirm dialog: apply, cancel (esc cancels too)"),
    ("esc, backspace", "close a dialog, this help or the host detail"),
    ("q", "quit (in a dialog or this help: close it)"),
    ("ctrl+c, ctrl+q", "quit from anywhere"),
]
READONLY_HIDDEN = ("r", "R", "d", "b", "y, n")


KEY_W = 16  # the key column; each description wraps in its own column beside it


def help_rows(readonly: bool) -> list[tuple[str, str]]:
    return [(k, what) for k, what in KEYS if not (readonly and k in READONLY_HIDDEN)]


def help_notes(readonly: bool) -> str:
    notes = "--readonly: actions are hidden.\n" if readonly else ""
    return notes + (
        "Heatmap rows are sources, columns destinations, ordered by leaf. When the hosts do "
        "not fit, a cell is a leaf or a run of leaves (the worst path between them)."
    )


def help_text(readonly: bool) -> str:
    """The help as plain text (keys, then notes)."""
    lines = [f"{k:>{KEY_W}}  {what}" for k, what in help_rows(readonly)]
    return "\n".join([*lines, "", help_notes(readonly)])


def help_table(readonly: bool) -> Table:
    """The keys as two columns: a long description wraps under itself, not under the keys."""
    table = Table.grid(padding=(0, 2))
    table.add_column(justify="right", no_wrap=True, width=KEY_W, style="bold")
    table.add_column(ratio=1)
    for k, what in help_rows(readonly):
        table.add_row(k, what)
    return table


class HelpScreen(ScrollingModal[None]):
    """Every key; it scrolls (arrows, page keys) where the terminal is shorter than it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close"),
    ]

    def __init__(self, readonly: bool = False) -> None:
        super().__init__()
        self.readonly = readonly

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help", classes="dialog"):
            yield Label("cwctl tui: keys", classes="pane-title")
            yield Static(help_table(self.readonly), id="help-text")
            yield Static(help_notes(self.readonly), id="help-notes")
            yield Label("esc closes", classes="hint")
