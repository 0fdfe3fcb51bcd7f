"""The path heatmap: one Line API widget, one ``Strip`` per row, however many cells.

Rows are sources, columns destinations, both ordered by leaf; each cell is two columns
wide and coloured by the bin of its value (``cwctl.tui.grid``). When the hosts do not
fit, cells are leaves (or runs of leaves) holding the worst path between them. Arrow
keys (or h j k l) move a cursor; the bottom lines are the legend and the cursor's cell.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from cwctl.snapshot import FabricSnapshot
from cwctl.tui.grid import NO_DATA, Grid, Metric, build_grid, fmt_value, host_matches, legend_labels

CELL_W = 2
HEADER_LINES = 1  # the title
FOOTER_LINES = 2  # the legend and the cursor's cell
# One background per bin: ok, mild, elevated, bad, severe.
BIN_COLORS = ("#1f7a3a", "#7fa630", "#d8b32a", "#e0731f", "#d02a2a")
NO_DATA_STYLE = Style(color="#5a5a5a")
METRIC_TITLES = {"delay": "excess delay (p99 - floor)", "loss": "loss"}


def bin_style(b: int) -> Style:
    return NO_DATA_STYLE if b == NO_DATA else Style(bgcolor=BIN_COLORS[b])


_BIN_STYLES = {b: bin_style(b) for b in (NO_DATA, *range(len(BIN_COLORS)))}
_CURSOR = Style(bold=True, color="#ffffff", reverse=False)
_CURSOR_ROW = Style(reverse=True, bold=True)
_PLAIN = Style()
_BOLD = Style(bold=True)


class Heatmap(Widget, can_focus=True):
    """Host × host (or leaf × leaf) path heatmap, drawn line by line."""

    DEFAULT_CSS = """
    Heatmap {
        height: 1fr;
        min-height: 6;
    }
    Heatmap:focus {
        background: $boost;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "move(-1, 0)", "Up", show=False),
        Binding("down,j", "move(1, 0)", "Down", show=False),
        Binding("left,h", "move(0, -1)", "Left", show=False),
        Binding("right,l", "move(0, 1)", "Right", show=False),
        Binding("m", "toggle_metric", "Metric"),
    ]

    metric: reactive[Metric] = reactive[Metric]("delay")
    host_filter: reactive[str] = reactive("")

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.snapshot: FabricSnapshot | None = None
        self.grid: Grid | None = None
        self.rows: list[int] = []  # grid rows shown (the filter hides some)
        self.cursor = (0, 0)  # (index into rows, grid column)
        self._strips: dict[int, Strip] = {}
        self._label_w = 8

    # -- data ------------------------------------------------------------------------

    def update_snapshot(self, snapshot: FabricSnapshot) -> None:
        self.snapshot = snapshot
        self._label_w = self._label_width_for(snapshot)
        self._rebuild()

    def fit(self) -> int:
        """How many cells fit across and down in the current size."""
        width, height = self.size.width, self.size.height
        if width <= 0 or height <= 0:
            return 10**9  # not laid out yet: no aggregation until it is
        label_w = self._label_w
        across = max(1, (width - label_w - 1) // CELL_W)
        down = max(1, height - HEADER_LINES - FOOTER_LINES)
        return min(across, down)

    def _label_width_for(self, snapshot: FabricSnapshot | None) -> int:
        if snapshot is None or not snapshot.hosts:
            return 8
        return min(12, max(len(h.name) for h in snapshot.hosts))

    def _rebuild(self) -> None:
        if self.snapshot is None:
            self.grid = None
            self.rows = []
        else:
            self.grid = build_grid(self.snapshot, self.metric, self.fit())
            shown = {h.name for h in self.snapshot.hosts if host_matches(h, self.host_filter)}
            self.rows = [
                i for i, members in enumerate(self.grid.members) if shown.intersection(members)
            ]
            r, c = self.cursor
            self.cursor = (
                min(r, max(len(self.rows) - 1, 0)),
                min(c, max(self.grid.size - 1, 0)),
            )
        self._strips.clear()
        self.refresh()

    def watch_metric(self) -> None:
        self._rebuild()

    def watch_host_filter(self) -> None:
        self._rebuild()

    def on_resize(self) -> None:
        self._rebuild()

    # -- cursor ----------------------------------------------------------------------

    def action_move(self, d_row: int, d_col: int) -> None:
        if self.grid is None or not self.rows:
            return
        r, c = self.cursor
        self.cursor = (
            min(max(r + d_row, 0), len(self.rows) - 1),
            min(max(c + d_col, 0), self.grid.size - 1),
        )
        self._strips.clear()
        self.refresh()

    def action_toggle_metric(self) -> None:
        self.metric = "loss" if self.metric == "delay" else "delay"

    def cursor_cell(self) -> tuple[list[str], list[str], float] | None:
        """The hosts behind the cursor's row and column, and the cell's value."""
        if self.grid is None or not self.rows:
            return None
        r, c = self.rows[self.cursor[0]], self.cursor[1]
        return self.grid.members[r], self.grid.members[c], float(self.grid.values[r, c])

    @property
    def cursor_host(self) -> str | None:
        """The source host under the cursor, when rows are hosts."""
        cell = self.cursor_cell()
        if cell is None or self.grid is None or self.grid.level != "host":
            return None
        return cell[0][0]

    # -- drawing ---------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # focus, blur and theme changes recolour the background

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return HEADER_LINES + max(len(self.rows), 1) + FOOTER_LINES

    def render_line(self, y: int) -> Strip:
        strip = self._strips.get(y)
        if strip is None:
            base = self.rich_style
            strip = self._strips[y] = self._line(y, base).adjust_cell_length(self.size.width, base)
        return strip

    def _line(self, y: int, base: Style) -> Strip:
        grid = self.grid
        if grid is None:
            return Strip([Segment("waiting for the first scan…", base)]) if y == 0 else Strip([])
        label_w = self._label_w
        n_rows = len(self.rows)
        if y == 0:
            title = f"{METRIC_TITLES[grid.metric]} · {grid.level} × {grid.level}, src ↓ dst →"
            return Strip([Segment(title, base + _BOLD)])
        row = y - HEADER_LINES
        if 0 <= row < n_rows:
            return self._row_strip(row, label_w, base)
        if row == max(n_rows, 1):
            return self._legend(grid.metric, base)
        if row == max(n_rows, 1) + 1:
            return self._cursor_line(grid, base)
        return Strip([])

    def _row_strip(self, row: int, label_w: int, base: Style) -> Strip:
        assert self.grid is not None
        g = self.rows[row]
        on_row = row == self.cursor[0]
        label = self.grid.labels[g][:label_w].ljust(label_w) + " "
        segments = [Segment(label, base + (_CURSOR_ROW if on_row else _PLAIN))]
        bins = self.grid.bins[g]
        c_cursor = self.cursor[1] if on_row else -1
        # Run-length: neighbours of one bin share a segment.
        start = 0
        n = len(bins)
        while start < n:
            b = int(bins[start])
            end = start + 1
            while end < n and bins[end] == b and end != c_cursor:
                end += 1
            if start == c_cursor:
                end = start + 1
            text = ("· " if b == NO_DATA else "  ") * (end - start)
            style = _BIN_STYLES[b]
            if start == c_cursor:
                text, style = "[]", style + _CURSOR
            segments.append(Segment(text, style))
            start = end
        return Strip(segments)

    def _legend(self, metric: Metric, base: Style) -> Strip:
        segments = []
        for b, label in enumerate(legend_labels(metric)):
            segments.append(Segment("  ", _BIN_STYLES[b]))
            segments.append(Segment(f"{label} ", base))
        segments.append(Segment("· ", NO_DATA_STYLE))
        segments.append(Segment("none", base))
        return Strip(segments)

    def _cursor_line(self, grid: Grid, base: Style) -> Strip:
        cell = self.cursor_cell()
        if cell is None:
            return Strip([Segment("no hosts match the filter", base)])
        value = cell[2]
        r, c = self.rows[self.cursor[0]], self.cursor[1]
        text = f"{grid.labels[r]} → {grid.labels[c]}: {fmt_value(grid.metric, value)}"
        if grid.level != "host":
            text += " (worst path)"
        return Strip([Segment(text, base)])
