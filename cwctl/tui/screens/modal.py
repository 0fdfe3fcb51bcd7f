"""The base of every dialog: a box that scrolls when its text is taller than the screen.

The box (``.dialog``) is a ``VerticalScroll`` capped at the screen's height, so at 80x24
a long plan or the help scrolls instead of being cut off. The keys scroll it whichever
widget has the focus (a dialog's buttons take enter and space, never the arrows).
"""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen

ResultType = TypeVar("ResultType")

SCROLLS = {
    "up": "scroll_up",
    "down": "scroll_down",
    "pageup": "scroll_page_up",
    "pagedown": "scroll_page_down",
    "home": "scroll_home",
    "end": "scroll_end",
}


class ScrollingModal(ModalScreen[ResultType]):
    """A modal whose ``.dialog`` box scrolls with up, down, k, j, page up/down, home, end."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "scroll_dialog('up')", "Scroll up", show=False),
        Binding("down,j", "scroll_dialog('down')", "Scroll down", show=False),
        Binding("pageup", "scroll_dialog('pageup')", "Page up", show=False),
        Binding("pagedown,space", "scroll_dialog('pagedown')", "Page down", show=False),
        Binding("home", "scroll_dialog('home')", "Top", show=False),
        Binding("end", "scroll_dialog('end')", "End", show=False),
    ]

    @property
    def box(self) -> VerticalScroll:
        return self.query_one(".dialog", VerticalScroll)

    def action_scroll_dialog(self, how: str) -> None:
        getattr(self.box, SCROLLS[how])(animate=False)
