"""The path heatmap: one Line API widget, one ``Strip`` per line, however many cells.

Rows are sources, columns destinations, both ordered by leaf. Cells grow to fill the
panel: each is as wide and as tall as the panel allows for the number of cells (at least
two columns by one line), coloured by the bin of its value (``cwctl.tui.grid``): by
default the worse of its loss and queueing bins, so loss shows first (``m`` steps to one
metric and back). When the hosts do not fit at that least size, a cell is a leaf, or a
run of whole leaves, holding the worst path between them; the title says which. Enter on
such a cell re-lays the map out as the hosts of its two ends, the cursor on their worst
path. The filter (``/``) re-lays the map out over the hosts it keeps, so ``=leaf3``
shows leaf3's hosts. Arrow keys (or h j k l, or a click) move a cursor; below the rows
are the legend and the cursor's cell.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from cwctl.scan.pathreports import QUEUEING
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.tui.grid import (
    METRICS,
    NO_DATA,
    Grid,
    Metric,
    build_grid,
    fmt_cell,
    host_matches,
    legend_labels,
)

CELL_W = 2  # the least cell: two columns (the cursor's "[]") by one line
TITLE_LINES_MAX = 3  # the title, wrapped at its " · " when the panel is narrow
LABEL_MAX = 12
# One background per bin: ok, mild, elevated, bad, severe.
BIN_COLORS = ("#1f7a3a", "#7fa630", "#d8b32a", "#e0731f", "#d02a2a")
NO_DATA_STYLE = Style(color="#5a5a5a")
# The metric's one name and definition (the PNG's and the README's too: cwctl.report.names)
METRIC_TITLES = {"worst": "worst of loss, queueing", "delay": QUEUEING, "loss": "loss"}


def bin_style(b: int) -> Style:
    return NO_DATA_STYLE if b == NO_DATA else Style(bgcolor=BIN_COLORS[b])


_BIN_STYLES = {b: bin_style(b) for b in (NO_DATA, *range(len(BIN_COLORS)))}
_CURSOR = Style(bold=True, color="#ffffff", reverse=False)
_CURSOR_ROW = Style(reverse=True, bold=True)
_PLAIN = Style()
_BOLD = Style(bold=True)


@dataclass(frozen=True)
class Layout:
    """Where the cells go: the label column's width and each cell's width and height."""

    label_w: int
    cell_w: int
    cell_h: int
    top: int = 1  # the title's lines

    def line_of(self, row: int) -> int:
        """The line a row's label is on (the middle line of its cells)."""
        return self.top + row * self.cell_h + (self.cell_h - 1) // 2

    def cell_at(self, x: int, y: int, n: int) -> tuple[int, int] | None:
        """The (row, column) of the cell drawn at (x, y), or None."""
        row, col = (y - self.top) // self.cell_h, (x - self.label_w - 1) // self.cell_w
        inside = y >= self.top and x > self.label_w
        return (row, col) if inside and 0 <= row < n and 0 <= col < n else None


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

    metric: reactive[Metric] = reactive[Metric]("worst")
    host_filter: reactive[str] = reactive("")

    def __init__(
        self, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.snapshot: FabricSnapshot | None = None
        self.grid: Grid | None = None
        self.rows: list[int] = []  # grid rows shown, top to bottom (every row of the grid)
        self.cursor = (0, 0)  # (index into rows, grid column)
        self.waiting = "waiting for the first scan…"  # the app says how the scan is going
        self._strips: dict[int, Strip] = {}
        self._layout = Layout(8, CELL_W, 1)

    # -- data ------------------------------------------------------------------------

    def update_snapshot(self, snapshot: FabricSnapshot) -> None:
        self.snapshot = snapshot
        self._rebuild()

    @property
    def cell_layout(self) -> Layout:
        return self._layout

    def set_waiting(self, text: str) -> None:
        """What the map says before the first scan arrives (its progress)."""
        self.waiting = text
        if self.grid is None:
            self._strips.clear()
            self.refresh()

    def _legend_lines(self, metric: Metric) -> list[list[Segment]]:
        """The legend: one line, or two when the panel is narrower than it."""
        items = [
            [Segment(" ", _BIN_STYLES[b]), Segment(f"{label} ")]
            for b, label in enumerate(legend_labels(metric))
        ]
        items.append([Segment("·", NO_DATA_STYLE), Segment("none")])
        width = sum(seg.cell_length for item in items for seg in item)
        if width <= self.size.width or self.size.width <= 0:
            return [[seg for item in items for seg in item]]
        half = (len(items) + 1) // 2
        return [[seg for item in part for seg in item] for part in (items[:half], items[half:])]

    def _footer_lines(self) -> int:
        return len(self._legend_lines(self.metric)) + 1

    def _area(self, label_w: int, top: int = 1) -> tuple[int, int]:
        """Columns and lines the cells may fill."""
        width, height = self.size.width, self.size.height
        return max(0, width - label_w - 1), max(0, height - top - self._footer_lines())

    def fit(self, label_w: int = 8) -> int:
        """How many cells of the least size fit across and down in the current size."""
        if self.size.width <= 0 or self.size.height <= 0:
            return 10**9  # not laid out yet: no aggregation until it is
        across, down = self._area(label_w)
        return max(1, min(across // CELL_W, down - 1))  # a line kept for a wrapped title

    def _shown_hosts(self) -> list[str] | None:
        if self.snapshot is None or not self.host_filter:
            return None
        return [h.name for h in self.snapshot.hosts if host_matches(h, self.host_filter)]

    def _rebuild(self) -> None:
        if self.snapshot is None:
            self.grid = None
            self.rows = []
        else:
            hosts = self._shown_hosts()
            names = hosts if hosts is not None else [h.name for h in self.snapshot.hosts]
            label_w = min(LABEL_MAX, max((len(n) for n in names), default=8))
            fit = self.fit(label_w)
            while True:  # group labels ("leaf13-18") may be wider than the hosts' names
                grid = build_grid(self.snapshot, self.metric, fit, hosts)
                label_w = min(LABEL_MAX, max((len(label) for label in grid.labels), default=8))
                if fit <= 1 or grid.size <= self.fit(label_w):
                    break
                fit -= 1
            self.grid = grid
            self.rows = list(range(grid.size))
            top = len(self.title_lines())
            across, down = self._area(label_w, top)
            n = max(grid.size, 1)
            self._layout = Layout(label_w, max(CELL_W, across // n), max(1, down // n), top)
            r, c = self.cursor
            self.cursor = (min(r, max(grid.size - 1, 0)), min(c, max(grid.size - 1, 0)))
        self._strips.clear()
        self.refresh(layout=True)

    def watch_metric(self) -> None:
        self._rebuild()

    def watch_host_filter(self) -> None:
        self.cursor = (0, 0)
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

    def on_click(self, event: events.Click) -> None:
        if self.grid is None:
            return
        cell = self._layout.cell_at(event.x, event.y, self.grid.size)
        if cell is not None:
            self.cursor = cell
            self._strips.clear()
            self.refresh()

    def action_toggle_metric(self) -> None:
        """m: worst of both, then queueing alone, then loss alone, then back."""
        self.metric = METRICS[(METRICS.index(self.metric) + 1) % len(METRICS)]

    def cursor_cell(self) -> tuple[list[str], list[str], float] | None:
        """The hosts behind the cursor's row and column, and the cell's value."""
        if self.grid is None or not self.rows:
            return None
        r, c = self.rows[self.cursor[0]], self.cursor[1]
        return self.grid.members[r], self.grid.members[c], float(self.grid.values[r, c])

    @property
    def cursor_host(self) -> str | None:
        """The source host under the cursor, when cells are hosts: the row's own label."""
        if self.grid is None or self.grid.level != "host" or not self.rows:
            return None
        return self.grid.labels[self.rows[self.cursor[0]]]

    @property
    def cursor_group(self) -> tuple[str, list[str]] | None:
        """When cells are groups: the cursor row's label and the names that filter to it
        (its leaves, or its hosts when no leaves are known)."""
        if self.grid is None or self.grid.level == "host" or not self.rows:
            return None
        r = self.rows[self.cursor[0]]
        names = self.grid.leaves[r] if self.grid.leaves is not None else self.grid.members[r]
        return self.grid.labels[r], names

    @property
    def cursor_block(self) -> tuple[list[str], list[str]] | None:
        """When cells are groups: the names that filter to the cursor cell's row and to its
        column (leaves, or hosts when no leaves are known): enter opens that block."""
        if self.grid is None or self.grid.level == "host" or not self.rows:
            return None
        r, c = self.rows[self.cursor[0]], self.cursor[1]
        names = self.grid.leaves if self.grid.leaves is not None else self.grid.members
        return names[r], names[c]

    def place_cursor(self, cursor: tuple[int, int]) -> None:
        """Put the cursor on (row, column), kept inside the map (esc brings it back)."""
        last = max(len(self.rows) - 1, 0)
        self.cursor = (min(max(cursor[0], 0), last), min(max(cursor[1], 0), last))
        self._strips.clear()
        self.refresh()

    def point_at_worst(self, sources: list[str], destinations: list[str]) -> None:
        """Put the cursor on the worst cell from ``sources`` to ``destinations`` (hosts):
        after enter on a leaf pair, the worst path (or leaf pair) between them."""
        grid = self.grid
        if grid is None:
            return
        src, dst = set(sources), set(destinations)
        rows = [i for i, hosts in enumerate(grid.members) if src.issuperset(hosts)]
        cols = [i for i, hosts in enumerate(grid.members) if dst.issuperset(hosts)]
        if not rows or not cols:
            return
        block = grid.bins[np.ix_(rows, cols)]
        i, j = np.unravel_index(int(np.argmax(block)), block.shape)
        self.place_cursor((rows[int(i)], cols[int(j)]))

    # -- drawing ---------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()  # focus, blur and theme changes recolour the background

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        rows = max(len(self.rows), 1) * self._layout.cell_h
        return self._layout.top + rows + self._footer_lines()

    def render_line(self, y: int) -> Strip:
        strip = self._strips.get(y)
        if strip is None:
            base = self.rich_style
            strip = self._strips[y] = self._line(y, base).adjust_cell_length(self.size.width, base)
        return strip

    def title(self) -> str:
        grid = self.grid
        if grid is None:
            return ""
        scope = f"{self.host_filter.lstrip('=')}: " if self.host_filter else ""
        worst = " · worst path per cell" if grid.aggregated else ""
        return f"{METRIC_TITLES[grid.metric]} · {scope}{grid.describe()}{worst} · src ↓ dst →"

    def title_lines(self) -> list[str]:
        """The title, on as many lines (up to three) as the panel's width needs, broken
        at its " · ", never mid-phrase where a phrase fits."""
        width = self.size.width
        text = self.title()
        if width <= 0 or len(text) <= width:
            return [text]
        lines: list[str] = []
        for part in text.split(" · "):
            if lines and len(lines[-1]) + 3 + len(part) <= width:
                lines[-1] += " · " + part
            else:
                lines.append(part)
        return lines[:TITLE_LINES_MAX]  # the least needed last: "src ↓ dst →" goes first

    @property
    def readout_line(self) -> int:
        """The line of the cursor's cell, under the rows and the legend."""
        rows = max(len(self.rows), 1) * self._layout.cell_h
        return self._layout.top + rows + len(self._legend_lines(self.metric))

    def _line(self, y: int, base: Style) -> Strip:
        grid = self.grid
        if grid is None:
            return Strip([Segment(self.waiting, base)]) if y == 0 else Strip([])
        top = self._layout.top
        if y < top:
            titles = self.title_lines()
            return Strip([Segment(titles[y], base + _BOLD)]) if y < len(titles) else Strip([])
        lines = max(len(self.rows), 1) * self._layout.cell_h
        line = y - top
        if 0 <= line < lines and self.rows:
            row, sub = divmod(line, self._layout.cell_h)
            return self._row_strip(row, sub, base)
        legend = self._legend_lines(grid.metric)
        if lines <= line < lines + len(legend):
            return Strip([Segment(seg.text, seg.style or base) for seg in legend[line - lines]])
        if line == lines + len(legend):
            return self._cursor_line(grid, base)
        return Strip([])

    def _row_strip(self, row: int, sub: int, base: Style) -> Strip:
        assert self.grid is not None
        layout = self._layout
        g = self.rows[row]
        on_row = row == self.cursor[0]
        middle = sub == (layout.cell_h - 1) // 2
        label = self.grid.labels[g][: layout.label_w] if middle else ""
        style = _CURSOR_ROW if on_row and middle else _PLAIN
        segments = [Segment(label.ljust(layout.label_w), base + style), Segment(" ", base)]
        bins = self.grid.bins[g]
        c_cursor = self.cursor[1] if on_row else -1
        w = layout.cell_w
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
            cell = ("·" if b == NO_DATA and middle else " ").ljust(w)
            text, style = cell * (end - start), _BIN_STYLES[b]
            if start == c_cursor:
                text = ("[" + " " * (w - 2) + "]") if middle else " " * w
                style = style + _CURSOR
            segments.append(Segment(text, style))
            start = end
        return Strip(segments)

    def _cursor_line(self, grid: Grid, base: Style) -> Strip:
        cell = self.cursor_cell()
        if cell is None:
            return Strip([Segment("no hosts match the filter", base)])
        r, c = self.rows[self.cursor[0]], self.cursor[1]
        text = f"{grid.labels[r]} → {grid.labels[c]}: {fmt_cell(grid, r, c)}"
        if grid.level != "host":
            text += " (worst)"
        return Strip([Segment(text, base)])
