"""The columnar store of a scan's exchanges (``ProbeTable``) and one decoded batch."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from cwctl.records.probe import ProbeRecord
from cwctl.records.schema import RECORD_VERSION, TIMESTAMP_KEYS, TS_SOURCES
from cwctl.runtime.arrays import I64

COLUMNS: Final = (
    "src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4", "nic",
)  # fmt: skip
DTYPES: Final = {
    "src": np.int32, "dst": np.int32, "sport": np.int32, "pair": np.int64, "idx": np.int8,
    "gap_ns": np.int64, "ts": np.int8, "t1": np.int64, "t2": np.int64, "t3": np.int64,
    "t4": np.int64, "nic": np.int16,
}  # fmt: skip


@dataclass
class ProbeTable:
    """Every probe exchange of a scan, column by column (numpy arrays, one row each).

    Host names are interned in ``hosts``; ``src``/``dst`` index into it. Missing
    timestamps are 0 and ``complete`` is False for them. Rows are in arrival order;
    ``sorted_by_pair()`` gives the order the solver wants.
    """

    hosts: list[str]
    src: npt.NDArray[np.int32]
    dst: npt.NDArray[np.int32]
    sport: npt.NDArray[np.int32]
    pair: I64
    idx: npt.NDArray[np.int8]
    gap_ns: I64
    ts: npt.NDArray[np.int8]
    t1: I64
    t2: I64
    t3: I64
    t4: I64
    nic: npt.NDArray[np.int16] = field(default_factory=lambda: np.zeros(0, np.int16))
    nics: list[str] = field(default_factory=list)  # nic codes; -1 in ``nic`` = unnamed

    def __post_init__(self) -> None:
        n = len(self.src)
        if len(self.nic) != n:
            self.nic = np.full(n, -1, np.int16)
        for name in ("dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"ProbeTable column {name!r} has the wrong length")

    def __len__(self) -> int:
        return len(self.src)

    @property
    def received(self) -> npt.NDArray[np.bool_]:
        """The probe reached its destination (``t2`` known)."""
        return self.t2 != 0

    @property
    def complete(self) -> npt.NDArray[np.bool_]:
        """All four timestamps are known."""
        return (self.t2 != 0) & (self.t3 != 0) & (self.t4 != 0)

    @property
    def timestamp_source(self) -> str:
        """The worst timestamp source any record used (``hw`` only if all were hw)."""
        if len(self.ts) == 0:
            return "none"
        return TS_SOURCES[int(self.ts.max())]

    @classmethod
    def empty(cls, hosts: Sequence[str] = ()) -> ProbeTable:
        return cls(hosts=list(dict.fromkeys(hosts)), nics=[], **concat_chunks([]))

    def host_index(self, name: str) -> int:
        return self.hosts.index(name)

    def select(self, mask: npt.NDArray[np.bool_] | npt.NDArray[np.intp]) -> ProbeTable:
        """The rows where ``mask`` holds (or at the given indices). A constant column
        kept as a broadcast view (the simulator's ``gap_ns`` and ``ts``) stays one."""
        n = int(np.count_nonzero(mask)) if mask.dtype == np.bool_ else len(mask)
        return ProbeTable(
            hosts=self.hosts,
            nics=self.nics,
            **{name: _pick(getattr(self, name), mask, n) for name in COLUMNS},
        )

    def sorted_by_pair(self) -> ProbeTable:
        """Rows ordered by (src, dst, sport, pair, idx): the two probes of a pair adjacent."""
        order = np.lexsort((self.idx, self.pair, self.sport, self.dst, self.src))
        return self.select(order)

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """The rows as ``probe`` record dicts (for saving and for round-trip tests)."""
        cols = {name: getattr(self, name).tolist() for name in COLUMNS}
        for i in range(len(self)):
            t2, t3, t4 = cols["t2"][i], cols["t3"][i], cols["t4"][i]
            nic = cols["nic"][i]
            yield ProbeRecord(
                src=self.hosts[cols["src"][i]],
                dst=self.hosts[cols["dst"][i]],
                sport=cols["sport"][i],
                pair=cols["pair"][i],
                idx=cols["idx"][i],
                gap_ns=cols["gap_ns"][i],
                ts=TS_SOURCES[cols["ts"][i]],
                t1=cols["t1"][i],
                t2=t2 or None,
                t3=t3 or None,
                t4=t4 or None,
                nic=self.nics[nic] if nic >= 0 else None,
            ).to_json()

    def iter_batches(self, rows: int = 4096, *, packed: bool = False) -> Iterator[dict[str, Any]]:
        """The rows as ``probes`` record dicts of up to ``rows`` rows each, in order;
        ``packed``: integer columns that vary as packed strings (``pack_column``)."""
        for start in range(0, len(self), rows):
            part = self.select(np.arange(start, min(start + rows, len(self))))
            yield part._batch_record(packed)

    def _batch_record(self, packed: bool = False) -> dict[str, Any]:
        n = len(self)
        used, inverse = np.unique(np.concatenate([self.src, self.dst]), return_inverse=True)
        rec: dict[str, Any] = {"type": "probes", "v": RECORD_VERSION, "n": n}
        rec["hosts"] = [self.hosts[i] for i in used.tolist()]
        if n and (self.src == self.src[0]).all():
            rec["src"] = self.hosts[int(self.src[0])]
        else:
            rec["src"] = inverse[:n].tolist()
        column = pack_column if packed else _as_list
        rec["dst"] = column(inverse[n:])
        for name in ("sport", "pair", "idx", "gap_ns"):
            one = _one_or_all(getattr(self, name))
            rec[name] = one if isinstance(one, int) else column(getattr(self, name))
        ts = _one_or_all(self.ts)
        rec["ts"] = TS_SOURCES[ts] if isinstance(ts, int) else [TS_SOURCES[c] for c in ts]
        for name in TIMESTAMP_KEYS:
            rec[name] = column(getattr(self, name))
        if (self.nic >= 0).any():
            rec["nics"] = list(self.nics)
            rec["nic"] = column(self.nic)
        return rec


@dataclass
class ProbeBatch(ProbeTable):
    """One decoded ``probes`` record: ``n`` exchanges as numpy columns.

    ``src`` and ``dst`` index ``hosts``; ``nic`` indexes ``nics`` (-1: unnamed); ``ts``
    holds ``TS_CODE`` codes; missing timestamps are 0.
    """

    sender: str | None = None  # the one sender, when ``src`` named it (an agent's batch)

    @property
    def src_names(self) -> set[str]:
        """The names of every sender in the batch (one, for an agent's batch)."""
        if self.sender is not None:
            return {self.sender} if len(self) else set()
        return {self.hosts[i] for i in np.unique(self.src).tolist()}


def _pick(column: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    """``column[mask]``; a broadcast constant (stride 0) as a broadcast view of ``n`` rows."""
    if column.ndim == 1 and column.strides == (0,) and len(column):
        return np.broadcast_to(column[:1], (n,))
    return column[mask]


def _one_or_all(column: np.ndarray) -> int | list[int]:
    """One value when the whole column holds it (a scalar column), else the list."""
    if len(column) and (column == column[0]).all():
        return int(column[0])
    return _as_list(column)


def _as_list(column: np.ndarray) -> list[int]:
    return column.tolist()  # type: ignore[no-any-return]


def pack_column(values: Sequence[int] | np.ndarray) -> str:
    """A packed integer column: base64 of little-endian int64 (what ``decode_probes`` reads)."""
    return base64.b64encode(np.asarray(values, "<i8").tobytes()).decode("ascii")


def concat_chunks(chunks: Sequence[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The chunks' columns joined; the chunks give them up. Column by column, each
    column's chunk parts are dropped as soon as they are joined, so the peak is about
    the joined columns plus one column, not twice the rows."""
    columns: dict[str, np.ndarray] = {}
    for name in COLUMNS:
        parts = [np.asarray(c.pop(name), DTYPES[name]) for c in chunks]
        columns[name] = np.concatenate(parts) if parts else np.zeros(0, DTYPES[name])
        del parts
    return columns
