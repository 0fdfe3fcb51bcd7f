"""A DataTable whose rows are sorted by one of its own columns, marked in the header.

Each column is declared once with how to sort by it; ``o`` (or a click on a header)
picks the next column (a click: that column), a second click reverses the order. The
column the rows are sorted by always shows ``▼`` (descending) or ``▲`` (ascending), so
the order is never by something off screen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from textual.binding import Binding, BindingType
from textual.widgets import DataTable

R = TypeVar("R")


@dataclass(frozen=True)
class Column(Generic[R]):
    label: str
    cell: Callable[[R], str]
    key: Callable[[R], Any] | None = None  # None: not sortable
    descending: bool = False  # the first order a click on it gives


def number_key(value: float | None) -> float:
    """Sort key of an optional number: unknowns sort below everything."""
    return value if value is not None and math.isfinite(value) else -math.inf


class SortableTable(DataTable[str], Generic[R]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("o", "next_sort", "Order", show=False)]

    columns_spec: Sequence[Column[R]] = ()
    default_sort: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sort_column = self.default_sort
        self.sort_descending = self.columns_spec[self.default_sort].descending
        self._rows: list[tuple[str, R]] = []

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self._add_columns()

    def header_label(self, index: int) -> str:
        label = self.columns_spec[index].label
        if index == self.sort_column:
            return f"{label}{'▼' if self.sort_descending else '▲'}"
        return label

    @property
    def sorted_by(self) -> str:
        """The sort column's label as the header shows it (with its arrow)."""
        return self.header_label(self.sort_column)

    def _add_columns(self) -> None:
        self.add_columns(*(self.header_label(i) for i in range(len(self.columns_spec))))

    def set_rows(self, rows: Sequence[tuple[str, R]]) -> None:
        """The rows (key, record) to show, in any order: they are shown sorted."""
        self._rows = list(rows)
        self._fill()

    def sort_by(self, index: int, descending: bool | None = None) -> None:
        spec = self.columns_spec[index]
        if spec.key is None:
            return
        if descending is None:
            descending = not self.sort_descending if index == self.sort_column else spec.descending
        self.sort_column, self.sort_descending = index, descending
        self._fill(relabel=True)

    def action_next_sort(self) -> None:
        n = len(self.columns_spec)
        for step in range(1, n + 1):
            index = (self.sort_column + step) % n
            if self.columns_spec[index].key is not None:
                self.sort_by(index)
                return

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        self.sort_by(event.column_index)

    def _fill(self, *, relabel: bool = False) -> None:
        selected = self.selected_key
        self.clear(columns=relabel)
        if relabel:
            self._add_columns()
        key = self.columns_spec[self.sort_column].key
        rows = self._rows
        if key is not None:
            rows = sorted(rows, key=lambda kr: key(kr[1]), reverse=self.sort_descending)
        for row_key, record in rows:
            self.add_row(*(c.cell(record) for c in self.columns_spec), key=row_key)
        if selected is not None and selected in self.rows:
            self.move_cursor(row=self.get_row_index(selected))

    @property
    def selected_key(self) -> str | None:
        if not self.row_count:
            return None
        value = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return str(value) if value is not None else None
