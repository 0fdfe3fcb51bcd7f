"""A scan's directed paths as columns: ``PathReports``, a sequence of ``PathReport``.

A 10 000-host scan measures 200 000 directed paths. As objects (a ``PathReport``, its
``PathPorts`` and a boxed float per figure) they cost about 0.4 s to build and 70 MB to
hold, and their JSON another 0.8 s of dicts made one report at a time. ``PathReports``
holds the very values those objects would (NaN where a field is None) in a few arrays:

- the CLI's JSON is written from the columns a chunk at a time (``json_chunks``), the
  same bytes as the reports' own ``to_json``;
- the analysis reads figures as arrays (``column``);
- everything else (the TUI, the table, the Prometheus series) iterates or indexes it as
  the list of reports it always was: that list is made on first use and kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import orjson

from cwctl.runtime.arrays import F64, I64
from cwctl.runtime.gcpause import paused_gc
from cwctl.scan.pathtext import paths_text


def json_number(value: float | None) -> float | int | None:
    """JSON-safe number: NaN and infinities become null; integral floats stay floats."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


class PortColumns:
    """The per-source-port statistics (the ECMP flows) of many paths, two arrays shared by
    their ``PathReport``s: ``ints`` (n, 3) sport, sent, received; ``floats`` (n, 3) loss
    (rounded to 6 places), owd_p50_ns, owd_p99_ns (NaN unknown). A path's ports are rows
    ``lo:hi`` (``PathPorts``): no Python object per port until they are written out."""

    __slots__ = ("floats", "ints")

    def __init__(self, ints: Any, floats: Any) -> None:
        self.ints = ints
        self.floats = floats


class PathPorts:
    """One path's rows of a ``PortColumns``."""

    __slots__ = ("columns", "hi", "lo")

    def __init__(self, columns: PortColumns, lo: int, hi: int) -> None:
        self.columns, self.lo, self.hi = columns, lo, hi

    def __len__(self) -> int:
        return self.hi - self.lo

    def to_json(self) -> list[dict[str, Any]]:
        """The ``paths[].ports[]`` objects."""
        ints = self.columns.ints[self.lo : self.hi].tolist()
        floats = self.columns.floats[self.lo : self.hi].tolist()
        return [
            {
                "sport": sport,
                "sent": sent,
                "received": received,
                "loss": loss,
                "owd_p50_ns": None if p50 != p50 else p50,  # NaN != NaN
                "owd_p99_ns": None if p99 != p99 else p99,
            }
            for (sport, sent, received), (loss, p50, p99) in zip(ints, floats, strict=True)
        ]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PathPorts) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        return f"PathPorts({self.to_json()!r})"


# The heatmaps' metric, one name for the PNG, the TUI and the docs: PathReport.queueing_ns
QUEUEING = "queueing p50 (p50 - floor)"


@dataclass(slots=True)
class PathReport:
    src: str
    dst: str
    sent: int
    received: int
    owd_min_ns: float | None
    owd_p50_ns: float | None
    owd_p99_ns: float | None
    owd_max_ns: float | None = None
    jitter_ns: float | None = None
    ports: PathPorts | None = None  # the split by source port (the ECMP flows)
    port_p50_spread_ns: float | None = None  # over the ports with a p50, where 2 or more
    port_loss_spread: float | None = None  # over the ports, where 2 or more

    @property
    def loss(self) -> float:
        return 1.0 - self.received / self.sent if self.sent else 0.0

    @property
    def queueing_ns(self) -> float | None:
        """The heatmaps' metric (``QUEUEING``): median queueing, p50 minus the floor
        (steadier than p99, which rare bursts dominate)."""
        if self.owd_p50_ns is None or self.owd_min_ns is None:
            return None
        return self.owd_p50_ns - self.owd_min_ns

    @property
    def excess_ns(self) -> float | None:
        """Queueing: p99 minus the floor."""
        if self.owd_p99_ns is None or self.owd_min_ns is None:
            return None
        return self.owd_p99_ns - self.owd_min_ns

    def to_json(self) -> dict[str, Any]:
        out = {
            "src": self.src,
            "dst": self.dst,
            "sent": self.sent,
            "received": self.received,
            "loss": round(self.loss, 6),
            "owd_min_ns": json_number(self.owd_min_ns),
            "owd_p50_ns": json_number(self.owd_p50_ns),
            "owd_p99_ns": json_number(self.owd_p99_ns),
            "owd_max_ns": json_number(self.owd_max_ns),
            "jitter_ns": json_number(self.jitter_ns),
            "excess_ns": json_number(self.excess_ns),
        }
        if self.ports is not None:
            out["ports"] = self.ports.to_json()
        if self.port_p50_spread_ns is not None:
            out["port_p50_spread_ns"] = self.port_p50_spread_ns
        if self.port_loss_spread is not None:
            out["port_loss_spread"] = self.port_loss_spread
        return out


# the float columns, in ``PathReports.floats``' order: PathReport's fields
FLOATS = (
    "owd_min_ns",
    "owd_p50_ns",
    "owd_p99_ns",
    "owd_max_ns",
    "jitter_ns",
    "port_p50_spread_ns",
    "port_loss_spread",
)
_AT = {name: i for i, name in enumerate(FLOATS)}


class PathReports(Sequence[PathReport]):
    """Directed paths ``i`` from ``hosts[ints[i, 0]]`` to ``hosts[ints[i, 1]]``, having
    sent ``ints[i, 2]`` probes and received ``ints[i, 3]``; ``floats[i]`` the
    ``FLOATS`` (NaN: None); its ports the rows ``bounds[i]:bounds[i + 1]`` of ``ports``."""

    __slots__ = ("_host_texts", "_reports", "bounds", "floats", "hosts", "ints", "ports")

    def __init__(
        self, hosts: list[str], ints: I64, floats: F64, bounds: I64, ports: PortColumns
    ) -> None:
        self.hosts, self.ints, self.floats = hosts, ints, floats
        self.bounds, self.ports = bounds, ports
        self._reports: list[PathReport] | None = None
        self._host_texts: list[bytes] | None = None

    @classmethod
    def empty(cls, hosts: list[str] | None = None) -> PathReports:
        ports = PortColumns(np.zeros((0, 3), np.int32), np.zeros((0, 3)))
        return cls(
            hosts or [], np.zeros((0, 4), np.int64), np.zeros((0, len(FLOATS))),
            np.zeros(1, np.int64), ports,
        )  # fmt: skip

    @classmethod
    def joined(cls, parts: Sequence[PathReports]) -> PathReports:
        """The parts' paths one after another (their ``hosts`` are one list)."""
        if not parts:
            return cls.empty()
        offsets = np.cumsum([0] + [len(p.ports.ints) for p in parts[:-1]])
        bounds = [p.bounds[:-1] + off for p, off in zip(parts, offsets, strict=True)]
        bounds.append(np.array([offsets[-1] + len(parts[-1].ports.ints)], np.int64))
        ports = PortColumns(
            np.concatenate([p.ports.ints for p in parts]),
            np.concatenate([p.ports.floats for p in parts]),
        )
        return cls(
            parts[0].hosts, np.concatenate([p.ints for p in parts]),
            np.concatenate([p.floats for p in parts]), np.concatenate(bounds), ports,
        )  # fmt: skip

    def in_host_order(self) -> PathReports:
        """The paths by (source, destination) in ``hosts``' order (a stable sort)."""
        order = np.lexsort((self.ints[:, 1], self.ints[:, 0]))
        if np.array_equal(order, np.arange(len(order))):
            return self
        lo, hi = self.bounds[:-1][order], self.bounds[1:][order]
        n_ports = hi - lo
        bounds = np.zeros(len(order) + 1, np.int64)
        np.cumsum(n_ports, out=bounds[1:])
        # each path's port rows, in the new order: lo of its path plus a count from 0
        rows = np.repeat(lo - bounds[:-1], n_ports) + np.arange(int(bounds[-1]))
        ports = PortColumns(self.ports.ints[rows], self.ports.floats[rows])
        return PathReports(self.hosts, self.ints[order], self.floats[order], bounds, ports)

    def column(self, name: str) -> F64:
        """One float figure of every path (``FLOATS``; NaN where the report has None)."""
        return self.floats[:, _AT[name]]

    def __len__(self) -> int:
        return len(self.ints)

    @overload
    def __getitem__(self, i: int) -> PathReport: ...

    @overload
    def __getitem__(self, i: slice) -> list[PathReport]: ...

    def __getitem__(self, i: int | slice) -> PathReport | list[PathReport]:
        return self.reports()[i]

    def __iter__(self) -> Iterator[PathReport]:
        return iter(self.reports())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PathReports | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return f"PathReports({len(self)} paths)"

    def reports(self) -> list[PathReport]:
        """The paths as ``PathReport`` objects (made on first use, then kept)."""
        if self._reports is None:
            with paused_gc():  # 200 000 reports at 10 000 hosts, and no cycles among them
                self._reports = self._made(0, len(self))
        return self._reports

    def _made(self, lo: int, hi: int) -> list[PathReport]:
        hosts, ports = self.hosts, self.ports
        return [
            PathReport(
                hosts[s], hosts[d], sent, received, owd_min, owd_p50, owd_p99, owd_max,
                jitter, PathPorts(ports, a, b), p50, loss,
            )
            for (s, d, sent, received), (owd_min, owd_p50, owd_p99, owd_max, jitter, p50, loss),
            a, b in zip(
                self.ints[lo:hi].tolist(), _nones(self.floats[lo:hi]),
                self.bounds[lo:hi].tolist(), self.bounds[lo + 1 : hi + 1].tolist(),
                strict=True,
            )
        ]  # fmt: skip

    def json_items(self, lo: int, hi: int) -> list[dict[str, Any]]:
        """``paths[lo:hi]`` as their ``to_json`` dicts: the reports' own, made for the
        chunk where the list is not (``json_text`` is the fast way to their JSON)."""
        made = self._reports[lo:hi] if self._reports is not None else self._made(lo, hi)
        return [p.to_json() for p in made]

    def json_text(self, lo: int, hi: int) -> bytes:
        """``paths[lo:hi]``' JSON objects joined by commas: the bytes orjson writes for
        ``json_items``, written from the columns (``pathtext``)."""
        floats = self.floats[lo:hi]
        if self._reports is not None or np.isinf(floats).any():
            return orjson.dumps(self.json_items(lo, hi))[1:-1]
        if self._host_texts is None:
            self._host_texts = [orjson.dumps(h) for h in self.hosts]
        bounds = self.bounds[lo : hi + 1].tolist()
        a, b = bounds[0], bounds[-1]
        return paths_text(
            self._host_texts, self.ints[lo:hi], floats, bounds,
            self.ports.ints[a:b], self.ports.floats[a:b],
        )  # fmt: skip


def _nones(floats: F64) -> list[list[float | None]]:
    """Rows of floats as lists, None for NaN."""
    rows = floats.tolist()
    if np.isnan(floats).any():
        return [[None if x != x else x for x in row] for row in rows]  # NaN != NaN
    return rows


def json_chunks(
    paths: Sequence[PathReport], size: int, *, text: bool = False
) -> Iterator[list[Any]]:
    """Every path's ``to_json`` dict, in order, ``size`` paths at a time: made from the
    columns where ``paths`` is a ``PathReports``; with ``text``, there, each chunk is one
    ``orjson.Fragment`` of the dicts' compact JSON instead (``json_text``)."""
    for lo in range(0, len(paths), size):
        hi = min(lo + size, len(paths))
        if isinstance(paths, PathReports):
            yield [orjson.Fragment(paths.json_text(lo, hi))] if text else paths.json_items(lo, hi)
        else:
            yield [p.to_json() for p in paths[lo:hi]]


def path_column(paths: Sequence[PathReport], name: str) -> F64:
    """One float figure (``FLOATS``) of every path, NaN where None: the columns' own
    where ``paths`` is a ``PathReports``, else read off each report."""
    if isinstance(paths, PathReports):
        return paths.column(name)
    if name not in _AT:
        raise KeyError(name)
    return np.array([getattr(p, name) for p in paths], np.float64).reshape(-1)
