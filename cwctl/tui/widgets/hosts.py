"""The hosts table: clock offset, drift, uncertainty, status and GPU verdict per host."""

from __future__ import annotations

from textual.widgets import DataTable

from cwctl.report.units import fmt_ns, fmt_ppb
from cwctl.snapshot import FabricSnapshot
from cwctl.tui.grid import host_matches, host_order


class HostsTable(DataTable[str]):
    """One row per host (those the filter keeps); the row key is the host's name."""

    snapshot: FabricSnapshot | None = None
    host_filter: str = ""

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns("host", "leaf", "status", "offset", "drift", "±", "GPU")

    def update_snapshot(self, snapshot: FabricSnapshot) -> None:
        self.snapshot = snapshot
        self._fill()

    def set_filter(self, needle: str) -> None:
        self.host_filter = needle
        self._fill()

    def _fill(self) -> None:
        if self.snapshot is None:
            return
        selected = self.selected_host
        self.clear()
        by_name = {h.name: h for h in self.snapshot.hosts}
        for name in host_order(self.snapshot):  # the heatmap's order: by leaf, then name
            h = by_name[name]
            if not host_matches(h, self.host_filter):
                continue
            self.add_row(
                h.name,
                h.leaf or "-",
                h.status if h.error is None else f"{h.status}: {h.error}",
                fmt_ns(h.offset_ns, signed=True),
                fmt_ppb(h.drift_ppb),
                fmt_ns(h.uncertainty_ns),
                h.gpu_verdict or "-",
                key=h.name,
            )
        if selected is not None and selected in self.rows:
            self.move_cursor(row=self.get_row_index(selected))

    @property
    def shown_hosts(self) -> list[str]:
        return [str(key.value) for key in self.rows]

    @property
    def selected_host(self) -> str | None:
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
