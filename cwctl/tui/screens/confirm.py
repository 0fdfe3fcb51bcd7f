"""Dialogs for actions: the plan with a yes/no confirmation, or a plain notice."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static


class ConfirmScreen(ModalScreen[bool]):
    """Shows a plan; ``y`` applies, ``n`` or ``esc`` cancels. Focus starts on Cancel."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Apply"),
        Binding("n,escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm", classes="dialog"):
            yield Label(self.title_text, classes="pane-title")
            with VerticalScroll(id="plan"):
                yield Static(self.body, id="plan-text")
            with Horizontal(classes="buttons"):
                yield Button("Apply (y)", variant="error", id="yes")
                yield Button("Cancel (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class NoticeScreen(ModalScreen[None]):
    """A message to read; any of esc, enter, q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,enter,q", "dismiss", "Close")]

    def __init__(self, title: str, body: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(id="notice", classes="dialog"):
            yield Label(self.title_text, classes="pane-title")
            with VerticalScroll(id="plan"):
                yield Static(self.body, id="notice-text")
            yield Label("esc closes", classes="hint")
