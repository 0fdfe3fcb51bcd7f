"""The heatmap's numbers: a host × host (or leaf × leaf) matrix of one path metric.

Pure numpy, no Textual: the widget draws what ``build_grid`` computes, the bench times
both. Rows and columns are hosts ordered by leaf, then name. When there are more hosts
than fit, they are aggregated by leaf (and, past that, by runs of consecutive leaves);
an aggregated cell holds the worst value of the paths it covers.

The default metric, ``worst``, colours a cell by the worse of its two bins (queueing and
loss), as mtr leads with Loss%: a dead spine shows red whichever signal it gives.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.units import fmt_ns, fmt_ratio

Metric = Literal["worst", "delay", "loss"]
METRICS: tuple[Metric, ...] = ("worst", "delay", "loss")  # the order ``m`` steps through
SIGNALS: tuple[Metric, ...] = ("loss", "delay")  # what ``worst`` combines, as read out

# Upper edges of the colour bins: a value v falls in bin searchsorted(edges, v, "right").
# delay: queueing p50 (PathReport.queueing_ns: p50 minus the floor), ns; loss: share lost.
BIN_EDGES: dict[Metric, tuple[float, ...]] = {
    "delay": (1_000.0, 4_000.0, 16_000.0, 64_000.0),
    "loss": (1e-9, 0.01, 0.05, 0.2),
}
N_BINS = 5  # ok, mild, elevated, bad, severe
BIN_NAMES = ("ok", "mild", "elevated", "bad", "severe")
NO_DATA = -1  # bin of a cell with no probed path


Level = Literal["host", "leaf", "leaf group", "host group"]
_UNITS = {
    "host": "hosts",
    "leaf": "leaves",
    "leaf group": "leaf groups",
    "host group": "host groups",
}


@dataclass(frozen=True)
class Grid:
    """What the heatmap shows: labels, values (NaN where no path) and their colour bins.
    A cell is one host, one leaf, a run of whole leaves, or (hosts without leaves) a run
    of hosts; ``members`` are the hosts behind each row/column."""

    metric: Metric
    level: Level
    labels: list[str]
    members: list[list[str]]  # the hosts behind each row/column
    values: npt.NDArray[np.float64]  # (n, n), row = source, column = destination
    bins: npt.NDArray[np.int8]  # (n, n), NO_DATA or 0..N_BINS-1
    leaves: list[list[str]] | None = None  # per row, the leaves it covers (leaf levels)
    # metric "worst": each signal's own values (``values`` is then the worst bin)
    parts: dict[Metric, npt.NDArray[np.float64]] | None = None

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def aggregated(self) -> bool:
        return self.level != "host"

    def describe(self) -> str:
        """What a cell is: ``64 hosts``, ``8 leaves``, ``16 leaf groups of 4 leaves`` (an
        aggregated cell holds the worst path between its hosts: ``aggregated``)."""
        what = f"{self.size} {_UNITS[self.level]}"
        if self.level == "leaf group" and self.leaves:
            what += f" of {max(len(g) for g in self.leaves)} leaves"
        elif self.level == "host group":
            what += f" of {max(len(m) for m in self.members)}"
        return what


def host_matches(host: HostReport, needle: str) -> bool:
    """The ``/`` filter: a case-insensitive substring of the name, leaf or status;
    ``=word`` matches one of them exactly (``=leaf1`` is not ``leaf10``), and
    ``=leaf1,leaf2`` any of the words listed."""
    needle = needle.lower().strip()
    fields = [(f or "").lower() for f in (host.name, host.leaf, host.status)]
    if needle.startswith("="):
        return any(word.strip() in fields for word in needle[1:].split(","))
    return not needle or any(needle in f for f in fields)


def exact_filter(words: Sequence[str]) -> str:
    """The filter that keeps exactly these names or leaves: ``=leaf3``, ``=leaf1,leaf2``."""
    return "=" + ",".join(words)


def host_order(snapshot: FabricSnapshot) -> list[str]:
    """Hosts ordered by leaf (hosts without one last), then by name; numbers in names
    count as numbers (``leaf2`` before ``leaf10``)."""
    ordered = sorted(
        snapshot.hosts, key=lambda h: (h.leaf is None, natural(h.leaf or ""), natural(h.name))
    )
    return [h.name for h in ordered]


def natural(text: str) -> tuple[tuple[int, int | str], ...]:
    """Sort key: runs of digits compare as numbers."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", text) if part
    )


@dataclass(frozen=True)
class PathColumns:
    """A snapshot's paths as arrays over ``order`` (one Python pass, then numpy)."""

    order: tuple[str, ...]
    rows: npt.NDArray[np.intp]  # source's position in order, -1 if not a listed host
    cols: npt.NDArray[np.intp]
    excess_ns: npt.NDArray[np.float64]  # queueing p50 (PathReport.queueing_ns); NaN: unknown
    loss: npt.NDArray[np.float64]  # NaN: nothing sent


_last_columns: tuple[FabricSnapshot, PathColumns] | None = None


def path_columns(snapshot: FabricSnapshot, order: Sequence[str]) -> PathColumns:
    """The columns of ``snapshot``'s paths; the last one is kept, so a redraw after a
    resize, a filter or a metric toggle does not walk the paths again."""
    global _last_columns
    key = tuple(order)
    if _last_columns is not None and _last_columns[0] is snapshot:
        kept = _last_columns[1]
        if kept.order == key and kept.rows.size == len(snapshot.paths):
            return kept
    index = {name: i for i, name in enumerate(order)}
    n = len(snapshot.paths)
    rows = np.empty(n, np.intp)
    cols = np.empty(n, np.intp)
    excess = np.empty(n)
    loss = np.empty(n)
    for k, p in enumerate(snapshot.paths):
        rows[k] = index.get(p.src, -1)
        cols[k] = index.get(p.dst, -1)
        queueing = p.queueing_ns
        excess[k] = np.nan if queueing is None else queueing
        loss[k] = 1.0 - p.received / p.sent if p.sent else np.nan
    columns = PathColumns(key, rows, cols, excess, loss)
    _last_columns = (snapshot, columns)
    return columns


def path_matrix(
    snapshot: FabricSnapshot, metric: Metric, order: Sequence[str]
) -> npt.NDArray[np.float64]:
    """``order`` × ``order`` matrix of the metric, NaN where no path was probed."""
    n = len(order)
    out = np.full((n, n), np.nan)
    if not snapshot.paths:
        return out
    c = path_columns(snapshot, order)
    vals = c.excess_ns if metric == "delay" else c.loss
    keep = (c.rows >= 0) & (c.cols >= 0)
    out[c.rows[keep], c.cols[keep]] = vals[keep]
    return out


def value_bins(values: npt.NDArray[np.float64], metric: Metric) -> npt.NDArray[np.int8]:
    edges = np.asarray(BIN_EDGES[metric])
    bins = np.searchsorted(edges, np.nan_to_num(values, nan=0.0), side="right").astype(np.int8)
    bins[np.isnan(values)] = NO_DATA
    return bins


def _groups(
    snapshot: FabricSnapshot, order: list[str], fit: int
) -> tuple[Level, list[list[str]], list[list[str]] | None]:
    """Group the ordered hosts so that at most ``fit`` groups remain: hosts, else
    leaves, else runs of whole consecutive leaves, else (one leaf or none known) runs
    of hosts. Returns the level, each group's hosts and each group's leaves."""
    if len(order) <= fit:
        return "host", [[h] for h in order], None
    leaf_of = {h.name: h.leaf or "-" for h in snapshot.hosts}
    leaves: dict[str, list[str]] = {}
    for name in order:
        leaves.setdefault(leaf_of[name], []).append(name)
    names = list(leaves)
    if len(names) <= 1:
        per = math.ceil(len(order) / max(fit, 1))
        return "host group", [order[i : i + per] for i in range(0, len(order), per)], None
    if len(names) <= fit:
        return "leaf", list(leaves.values()), [[n] for n in names]
    per = math.ceil(len(names) / max(fit, 1))
    runs = [names[i : i + per] for i in range(0, len(names), per)]
    return "leaf group", [[h for leaf in run for h in leaves[leaf]] for run in runs], runs


def _label(level: Level, members: list[str], leaves: list[str] | None) -> str:
    if level == "host":
        return members[0]
    if leaves is not None:
        return leaves[0] if len(leaves) == 1 else f"{leaves[0]}-{_suffix(leaves[-1], leaves[0])}"
    return f"{members[0]}-{_suffix(members[-1], members[0])}"


def _suffix(last: str, first: str) -> str:
    """``leaf4`` after ``leaf1`` is ``4``: a run's label is ``leaf1-4``, ``gpu-001-016``."""
    i = 0
    while i < min(len(first), len(last)) and first[i] == last[i] and not first[i].isdigit():
        i += 1
    return last[i:]


def build_grid(
    snapshot: FabricSnapshot,
    metric: Metric = "delay",
    fit: int = 10**9,
    hosts: Sequence[str] | None = None,
) -> Grid:
    """The heatmap for ``snapshot`` over ``hosts`` (default: all; a filter shows fewer,
    and then only the paths between them): hosts if at most ``fit`` of them, else
    aggregated (``_groups``). ``worst``: each cell in the worse of its loss and queueing
    bins."""
    if metric == "worst":
        return _worst_grid(snapshot, fit, hosts)
    order = host_order(snapshot)
    if hosts is not None:
        keep = set(hosts)
        order = [h for h in order if h in keep]
    level, members, leaves = _groups(snapshot, order, max(fit, 1))
    if level == "host":
        values = path_matrix(snapshot, metric, order)
    else:
        group_of = np.empty(len(order), np.intp)
        position = {name: i for i, name in enumerate(order)}
        for g, names in enumerate(members):
            group_of[[position[n] for n in names]] = g
        values = aggregate_worst(path_columns(snapshot, order), metric, group_of, len(members))
    labels = [
        _label(level, m, leaves[i] if leaves is not None else None) for i, m in enumerate(members)
    ]
    return Grid(metric, level, labels, members, values, value_bins(values, metric), leaves)


def _worst_grid(snapshot: FabricSnapshot, fit: int, hosts: Sequence[str] | None) -> Grid:
    """Both signals' grids, each cell in the higher of its two bins. A block's worst bin
    per signal is its worst path's (bins rise with values), so aggregation still holds."""
    loss = build_grid(snapshot, "loss", fit, hosts)
    delay = build_grid(snapshot, "delay", fit, hosts)
    bins = np.maximum(loss.bins, delay.bins)
    values = np.where(bins == NO_DATA, np.nan, bins.astype(np.float64))
    parts: dict[Metric, npt.NDArray[np.float64]] = {"loss": loss.values, "delay": delay.values}
    return Grid(
        "worst", delay.level, delay.labels, delay.members, values, bins, delay.leaves, parts
    )


def aggregate_worst(
    columns: PathColumns, metric: Metric, group_of: npt.NDArray[np.intp], n_groups: int
) -> npt.NDArray[np.float64]:
    """Group × group matrix of the largest value among the paths of each block (NaN: none)."""
    vals = columns.excess_ns if metric == "delay" else columns.loss
    keep = (columns.rows >= 0) & (columns.cols >= 0) & ~np.isnan(vals)
    out = np.full((n_groups, n_groups), -np.inf)
    where = (group_of[columns.rows[keep]], group_of[columns.cols[keep]])
    np.maximum.at(out, where, vals[keep])
    out[np.isneginf(out)] = np.nan
    return out


def fmt_value(metric: Metric, value: float | None) -> str:
    if value is None or math.isnan(value):
        return "no path"
    if metric == "worst":
        return BIN_NAMES[int(value)]
    return fmt_ns(value) if metric == "delay" else fmt_ratio(value)


def fmt_cell(grid: Grid, row: int, col: int) -> str:
    """A cell read out: its value, or (``worst``) each signal's: ``loss 100% · queueing
    2.0 us``, so the readout says which signal coloured it."""
    if grid.parts is None:
        return fmt_value(grid.metric, float(grid.values[row, col]))
    if math.isnan(grid.values[row, col]):
        return "no path"
    said = [f"{_SIGNAL_NAMES[m]} {fmt_value(m, float(grid.parts[m][row, col]))}" for m in SIGNALS]
    return " · ".join(said)


_SIGNAL_NAMES = {"loss": "loss", "delay": "queueing"}


def _compact(metric: Metric, value: float) -> str:
    assert metric != "worst"
    text = fmt_ns(value) if metric == "delay" else fmt_ratio(value)
    return re.sub(r"\.0+(?=\D)", "", text).replace(" ", "")  # a legend edge: "1us", not "1.00 us"


def legend_labels(metric: Metric) -> list[str]:
    """One short label per bin: ``<1us``, ``<4us``, …, ``≥64us``; loss starts at ``0``;
    ``worst``: both edges, queueing then loss (``<1us|0``, …, ``≥64us|≥20%``)."""
    if metric == "worst":
        pairs = zip(legend_labels("delay"), legend_labels("loss"), strict=True)
        return [f"{delay}|{loss}" for delay, loss in pairs]
    edges = BIN_EDGES[metric]
    first = "0" if metric == "loss" else f"<{_compact(metric, edges[0])}"
    return [
        first,
        *(f"<{_compact(metric, hi)}" for hi in edges[1:]),
        f"≥{_compact(metric, edges[-1])}",
    ]
