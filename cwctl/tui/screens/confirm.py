"""Dialogs for actions: the plan with a yes/no confirmation, or a plain notice."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Button, Label, Static

from cwctl.tui.screens.modal import ScrollingModal

SIMULATED = " (simulated)"


def targets_line(targets: tuple[str, ...]) -> str:
    """``changes gpu-003 and leaf1``: every host or switch the plan touches, by name;
    ``changes leaf1, leaf2 and leaf3 (simulated)`` when every one is simulated."""
    if not targets:
        return "changes nothing outside cwctl"
    names = list(targets)
    simulated = all(n.endswith(SIMULATED) for n in names)
    if simulated:
        names = [n.removesuffix(SIMULATED) for n in names]
    said = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"changes {said}" + (SIMULATED if simulated else "")


class ConfirmScreen(ScrollingModal[bool]):
    """Shows a plan and every target it changes; ``y`` applies, ``n`` or ``esc`` cancels.
    Focus starts on Cancel; the arrows and page keys scroll a plan taller than the screen
    (the buttons stay in view)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Apply"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, title: str, body: str, targets: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.title_text = title
        self.body = body
        self.targets = targets

    def compose(self) -> ComposeResult:
        one = self.targets[0].removesuffix(SIMULATED) if len(self.targets) == 1 else ""
        on = one or f"{len(self.targets)} targets"
        with VerticalScroll(id="confirm", classes="dialog"):
            yield Label(self.title_text, classes="pane-title")
            yield Static(targets_line(self.targets), id="targets")  # wraps, never cut
            yield Static(self.body, id="plan-text", classes="plan")
            with Horizontal(classes="buttons"):
                yield Button(f"Apply on {on} (y)" if self.targets else "Apply (y)",
                             variant="error", id="yes")  # fmt: skip
                yield Button("Cancel (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class NoticeScreen(ScrollingModal[None]):
    """A message to read (it scrolls); any of esc, enter, q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="notice", classes="dialog"):
            yield Label(self.title_text, classes="pane-title")
            yield Static(self.body, id="notice-text", classes="plan")
            yield Label("esc closes", classes="hint")
