"""What a key acts on: the host ``d`` drains, given the widget that has the focus, and
the suspect a drain of that host is for. Only the focused row's own element, never a
host picked from another widget."""

from __future__ import annotations

from textual.widget import Widget

from cwctl.scan.snapshot import FabricSnapshot
from cwctl.tui.widgets.heatmap import Heatmap
from cwctl.tui.widgets.hosts import HostsTable
from cwctl.tui.widgets.suspects import SuspectsTable


def drain_target(focused: Widget | None, snapshot: FabricSnapshot | None) -> tuple[str | None, str]:
    """(the host the focused row is, or None and why)."""
    if isinstance(focused, HostsTable):
        return focused.selected_host, "select a host first"
    if isinstance(focused, Heatmap):
        if focused.cursor_group is not None:
            return None, "a leaf row: enter shows its hosts, d drains one of them"
        return focused.cursor_host, "select a host first"
    if isinstance(focused, SuspectsTable):
        element = focused.selected_element
        if element is None:
            return None, "select a host first"
        kinds = {s.element: s.kind for s in snapshot.suspects} if snapshot else {}
        if kinds.get(element) == "host":
            return element, ""
        return None, f"d drains a host; {element} is a {kinds.get(element, 'suspect')}"
    return None, "select a host first (hosts table or heatmap)"


def host_suspect(snapshot: FabricSnapshot | None, host: str) -> str | None:
    """For a drain: the most likely suspect that is the host or one of its NICs."""
    if snapshot is None:
        return None
    mine = [s for s in snapshot.suspects if s.element == host or s.element.startswith(host + "/")]
    return max(mine, key=lambda s: s.score).element if mine else None
