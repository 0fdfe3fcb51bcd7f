"""The suspects panel: ranked elements with the evidence that names them (by score,
highest first, until another column is picked)."""

from __future__ import annotations

from cwctl.snapshot import FabricSnapshot, Suspect
from cwctl.tui.widgets.sortable import Column, SortableTable

SUSPECT_COLUMNS: list[Column[Suspect]] = [
    Column("score", lambda s: f"{s.score:.2f}", lambda s: s.score, True),
    Column("kind", lambda s: s.kind, lambda s: (s.kind, -s.score)),
    Column("element", lambda s: s.element, lambda s: s.element),
    Column("evidence", lambda s: s.evidence),
]


class SuspectsTable(SortableTable[Suspect]):
    """One row per suspect; the row key is the element's name."""

    columns_spec = SUSPECT_COLUMNS
    default_sort = 0

    def update_snapshot(self, snapshot: FabricSnapshot) -> None:
        self.set_rows([(s.element, s) for s in snapshot.suspects])

    @property
    def selected_element(self) -> str | None:
        return self.selected_key
