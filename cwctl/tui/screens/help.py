"""The help screen: every key, and what the panels show."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, Static

KEYS = [
    ("?", "this help"),
    ("/", "filter hosts (part of name, leaf or status; =word: exact); empty clears"),
    ("enter", "details of the host under the cursor; on a leaf row: that leaf's hosts"),
    ("tab", "next panel: heatmap, suspects, hosts"),
    ("arrows, h j k l", "move the heatmap's cursor"),
    ("m", "heatmap metric: excess delay / loss"),
    ("o, click a header", "sort a table by its next column (a click: that one; again: reverse)"),
    ("", "the column a table is sorted by shows ▼ (largest first) or ▲"),
    ("s", "scan now"),
    ("r", "reroute around the selected suspect (plan, then confirm)"),
    (
        "R",
        "steer around it at the hosts: new connections leave from source ports whose "
        "paths avoid it (reroute --via hosts; ports: tui --steer-port)",
    ),
    ("d", "drain the selected host (plan, then confirm)"),
    ("y, n", "in a confirm dialog: apply, cancel (esc cancels too)"),
    ("esc, backspace", "close a dialog, this help or the host detail"),
    ("q", "quit (in a dialog or this help: close it)"),
    ("ctrl+c, ctrl+q", "quit from anywhere"),
]
READONLY_HIDDEN = ("r", "R", "d", "y, n")


def help_text(readonly: bool) -> str:
    rows = [(k, what) for k, what in KEYS if not (readonly and k in READONLY_HIDDEN)]
    lines = [f"{k:>16}  {what}" for k, what in rows]
    if readonly:
        lines.append("\n--readonly: actions are hidden.")
    lines.append(
        "\nHeatmap rows are sources, columns destinations, ordered by leaf; when the hosts"
        "\ndo not fit, a cell is a leaf (the worst path between two leaves)."
    )
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss", "Close"),
    ]

    def __init__(self, readonly: bool = False) -> None:
        super().__init__()
        self.readonly = readonly

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Label("cwctl tui: keys", classes="pane-title")
            yield Static(help_text(self.readonly), id="help-text")
            yield Label("esc closes", classes="hint")
