"""The suspects panel: ranked elements with the evidence that names them (by score,
highest first, until another column is picked); with a scheduler read, the jobs each
one hurts."""

from __future__ import annotations

from cwctl.scan.snapshot import FabricSnapshot, Suspect
from cwctl.tui.widgets.sortable import Column, SortableTable


def jobs_text(s: Suspect) -> str:
    """``4105 +2`` (the most hurt job and how many more), ``-`` for none."""
    if not s.jobs:
        return "-"
    more = f" +{len(s.jobs) - 1}" if len(s.jobs) > 1 else ""
    return f"{s.jobs[0]['id']}{more}"


def jobs_lines(s: Suspect) -> list[str]:
    """Each job the suspect hurts, as the detail view and the evidence pane show it."""
    return [
        f"{j['id']} {j['user']}/{j['name']}: {j['paths_hit']} of {j['paths']} node pairs "
        f"cross it" + (f"; runs on {', '.join(j['on_node'])}" if j.get("on_node") else "")
        for j in s.jobs or []
    ]


SUSPECT_COLUMNS: list[Column[Suspect]] = [
    Column("score", lambda s: f"{s.score:.2f}", lambda s: s.score, True),
    Column("kind", lambda s: s.kind, lambda s: (s.kind, -s.score)),
    Column("element", lambda s: s.element, lambda s: s.element),
    Column("evidence", lambda s: s.evidence),
]
JOBS_COLUMN: Column[Suspect] = Column("jobs", jobs_text, lambda s: len(s.jobs or ()), True)


class SuspectsTable(SortableTable[Suspect]):
    """One row per suspect; the row key is the element's name. The jobs column shows
    only while the snapshots carry jobs (a scheduler was read)."""

    columns_spec = SUSPECT_COLUMNS
    default_sort = 0

    def update_snapshot(self, snapshot: FabricSnapshot) -> None:
        want = SUSPECT_COLUMNS if snapshot.jobs is None else [*SUSPECT_COLUMNS[:3], JOBS_COLUMN,
                                                              SUSPECT_COLUMNS[3]]  # fmt: skip
        rows = [(s.element, s) for s in snapshot.suspects]
        if want is self.columns_spec or want == list(self.columns_spec):
            self.set_rows(rows)
            return
        self.columns_spec = want
        self.sort_column = min(self.sort_column, len(want) - 1)
        self._rows = rows
        self._fill(relabel=True)

    @property
    def selected_element(self) -> str | None:
        return self.selected_key
