"""The hosts table: clock offset, drift, uncertainty, status and GPU verdict per host.

Sorted by leaf (the heatmap's order) until the operator picks another column (``o`` or
a click on its header); offset and drift sort by size, largest first.
"""

from __future__ import annotations

from dataclasses import replace

from cwctl.report.summary import silent_hosts
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.tui.grid import host_matches, natural
from cwctl.tui.widgets.sortable import Column, SortableTable, number_key
from cwctl.units import fmt_ns, fmt_ppb


def _abs(value: float | None) -> float:
    return number_key(abs(value) if value is not None else None)


STATUS_W = 24  # a longer status (an SSH error) is cut here; the host detail has it whole


def status_cell(h: HostReport) -> str:
    text = h.status if h.error is None else f"{h.status}: {' '.join(h.error.split())}"
    return text if len(text) <= STATUS_W else text[: STATUS_W - 1] + "…"


# The clock's figures come right after the name, so a narrow panel cuts leaf, status and
# GPU, never offset, drift or ± (and a long status cannot push them out: STATUS_W).
HOST_COLUMNS: list[Column[HostReport]] = [
    Column("host", lambda h: h.name, lambda h: natural(h.name)),
    Column("offset", lambda h: fmt_ns(h.offset_ns, signed=True), lambda h: _abs(h.offset_ns), True),
    Column("drift", lambda h: fmt_ppb(h.drift_ppb), lambda h: _abs(h.drift_ppb), True),
    Column("±", lambda h: fmt_ns(h.uncertainty_ns), lambda h: number_key(h.uncertainty_ns), True),
    Column("status", status_cell, lambda h: (h.status == "ok", h.status, natural(h.name))),
    Column(
        "leaf",
        lambda h: h.leaf or "-",
        lambda h: (h.leaf is None, natural(h.leaf or ""), natural(h.name)),
    ),
    Column(
        "GPU",
        lambda h: h.gpu_verdict or "-",
        lambda h: {"fail": 0, "warn": 1, "ok": 2}.get(h.gpu_verdict or "", 3),
    ),
]
LEAF_COLUMN = 5


class HostsTable(SortableTable[HostReport]):
    """One row per host (those the filter keeps); the row key is the host's name."""

    columns_spec = HOST_COLUMNS
    default_sort = LEAF_COLUMN  # leaf, then name: the heatmap's order

    snapshot: FabricSnapshot | None = None
    host_filter: str = ""
    silent: frozenset[str] = frozenset()  # the snapshot's hosts SSH reached, every probe lost

    def update_snapshot(self, snapshot: FabricSnapshot) -> None:
        self.snapshot = snapshot
        self.silent = frozenset(silent_hosts(snapshot))  # once a scan, not a keystroke
        self._refill()

    def set_filter(self, needle: str) -> None:
        self.host_filter = needle
        self._refill()

    def _refill(self) -> None:
        if self.snapshot is None:
            return
        self.set_rows(
            [
                (h.name, replace(h, status="no fabric") if h.name in self.silent else h)
                for h in self.snapshot.hosts
                if host_matches(h, self.host_filter)
            ]
        )

    @property
    def shown_hosts(self) -> list[str]:
        return [str(key.value) for key in self.rows]

    @property
    def selected_host(self) -> str | None:
        return self.selected_key
