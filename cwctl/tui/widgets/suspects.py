"""The suspects panel: ranked elements with the evidence that names them."""

from __future__ import annotations

from textual.widgets import DataTable

from cwctl.snapshot import FabricSnapshot


class SuspectsTable(DataTable[str]):
    """One row per suspect, most likely first; the row key is the element's name."""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("score", "kind", "element", "evidence")

    def update_snapshot(self, snapshot: FabricSnapshot) -> None:
        selected = self.selected_element
        self.clear()
        for s in sorted(snapshot.suspects, key=lambda s: -s.score):
            self.add_row(f"{s.score:.2f}", s.kind, s.element, s.evidence, key=s.element)
        if selected is not None and selected in {s.element for s in snapshot.suspects}:
            self.move_cursor(row=self.get_row_index(selected))

    @property
    def selected_element(self) -> str | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return key.value
