"""The probe record format (``cwctl.rec/1``) and the columnar store the solver reads.

One record format crosses every boundary: the probe agent prints it as JSON lines,
the simulator generates it, the solver and telemetry read it. ``docs/records.md``
documents every field; this module is the one place that encodes and decodes it.

Record types (the ``type`` key):

``hello``   an agent's host facts and bound ports, first line of every agent.
``probe``   one exchange of a coded pair: four timestamps (ns since the epoch, each
            in the clock of the host that took it) and the pair's identity.
``gpu``     a GPU sample of one host (see ``docs/records.md``).
``summary`` an agent's closing counts.
``error``   something an agent could not do; it goes on where it can.

A ``probe`` record, sent by ``src`` (A) to ``dst`` (B)::

    {"type": "probe", "v": 1, "src": "gpu-001", "dst": "gpu-002", "sport": 40001,
     "pair": 17, "idx": 0, "gap_ns": 20000, "ts": "sw",
     "t1": 1700000000000000000, "t2": 1700000000000012345,
     "t3": 1700000000000015000, "t4": 1700000000000027000}

``t1`` A sends the probe (A's clock), ``t2`` B receives it (B's clock), ``t3`` B sends
the reply (B's clock), ``t4`` A receives the reply (A's clock). With ``theta`` the
offset of B's clock from A's, ``t2 - t1 = d_fwd + theta`` and ``t4 - t3 = d_rev - theta``.
A lost exchange has ``t2``, ``t3`` and ``t4`` null (or only ``t3`` and ``t4``, when the
reply was lost after B stamped the probe). ``idx`` is 0 or 1: the two probes of coded
pair ``pair``, sent ``gap_ns`` apart. ``ts`` says which clock stamped: ``hw`` (NIC
hardware), ``sw`` (kernel software stamps) or ``user`` (``time.time_ns()`` fallback).
An optional ``nic`` names the interface the probe left from.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from cwctl.errors import RecordError

RECORD_VERSION: Final = 1
RECORD_TYPES: Final = frozenset({"hello", "probe", "gpu", "summary", "error", "truth"})

# Timestamp sources, best first; the codes are what ProbeTable.ts holds.
TS_SOURCES: Final = ("hw", "sw", "user")
TS_CODE: Final = {name: code for code, name in enumerate(TS_SOURCES)}

I64 = npt.NDArray[np.int64]
_TIMESTAMP_KEYS: Final = ("t1", "t2", "t3", "t4")
_MAX_NS: Final = 2**62  # far beyond any real clock; rejects garbage before it reaches int64


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require_int(rec: Mapping[str, Any], key: str, *, lo: int, hi: int, where: str) -> int:
    value = rec.get(key)
    if not _is_int(value) or not lo <= value <= hi:  # type: ignore[operator]
        raise RecordError(f"{where}: key {key!r} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)  # type: ignore[arg-type]


def _require_str(rec: Mapping[str, Any], key: str, *, where: str) -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value:
        raise RecordError(f"{where}: key {key!r} must be a non-empty string, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    """One decoded ``probe`` record. ``None`` timestamps mean not received."""

    src: str
    dst: str
    sport: int
    pair: int
    idx: int
    gap_ns: int
    ts: str
    t1: int
    t2: int | None
    t3: int | None
    t4: int | None
    nic: str | None = None

    def to_json(self) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "type": "probe",
            "v": RECORD_VERSION,
            "src": self.src,
            "dst": self.dst,
            "sport": self.sport,
            "pair": self.pair,
            "idx": self.idx,
            "gap_ns": self.gap_ns,
            "ts": self.ts,
            "t1": self.t1,
            "t2": self.t2,
            "t3": self.t3,
            "t4": self.t4,
        }
        if self.nic is not None:
            rec["nic"] = self.nic
        return rec


def decode_probe(rec: Mapping[str, Any], *, where: str = "record") -> ProbeRecord:
    """Validate a ``probe`` record (already parsed from JSON); raise ``RecordError``."""
    version = rec.get("v", RECORD_VERSION)
    if version != RECORD_VERSION:
        raise RecordError(f"{where}: unsupported probe record version {version!r}")
    src = _require_str(rec, "src", where=where)
    dst = _require_str(rec, "dst", where=where)
    if src == dst:
        raise RecordError(f"{where}: probe from {src!r} to itself")
    ts = rec.get("ts")
    if not isinstance(ts, str) or ts not in TS_CODE:
        raise RecordError(f"{where}: key 'ts' must be one of {', '.join(TS_SOURCES)}, got {ts!r}")
    stamps: dict[str, int | None] = {}
    for key in _TIMESTAMP_KEYS:
        value = rec.get(key)
        if value is None and key != "t1":
            stamps[key] = None
            continue
        stamps[key] = _require_int(rec, key, lo=1, hi=_MAX_NS, where=where)
    if stamps["t2"] is None and stamps["t3"] is not None:
        raise RecordError(f"{where}: 't3' is set but 't2' is not")
    if stamps["t3"] is None and stamps["t4"] is not None:
        raise RecordError(f"{where}: 't4' is set but 't3' is not")
    nic = rec.get("nic")
    if nic is not None and (not isinstance(nic, str) or not nic):
        raise RecordError(f"{where}: key 'nic' must be a non-empty string, got {nic!r}")
    return ProbeRecord(
        src=src,
        dst=dst,
        sport=_require_int(rec, "sport", lo=0, hi=65535, where=where),
        pair=_require_int(rec, "pair", lo=0, hi=2**62, where=where),
        idx=_require_int(rec, "idx", lo=0, hi=1, where=where),
        gap_ns=_require_int(rec, "gap_ns", lo=0, hi=10**9, where=where),
        ts=ts,
        t1=stamps["t1"],  # type: ignore[arg-type]
        t2=stamps["t2"],
        t3=stamps["t3"],
        t4=stamps["t4"],
        nic=nic,
    )


def parse_line(line: str | bytes, *, where: str = "line") -> dict[str, Any]:
    """Parse one JSON line into a record dict with a known ``type``; raise ``RecordError``."""
    try:
        rec = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError(f"{where}: not a JSON record ({exc.__class__.__name__})") from None
    if not isinstance(rec, dict):
        raise RecordError(f"{where}: a record must be a JSON object, got {type(rec).__name__}")
    kind = rec.get("type")
    if kind not in RECORD_TYPES:
        raise RecordError(f"{where}: unknown record type {kind!r}")
    return rec


def encode_line(rec: Mapping[str, Any]) -> str:
    """One record as one compact JSON line (no trailing newline)."""
    return json.dumps(rec, separators=(",", ":"), allow_nan=False)


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
        return ProbeTableBuilder(hosts).build()

    def host_index(self, name: str) -> int:
        return self.hosts.index(name)

    def select(self, mask: npt.NDArray[np.bool_] | npt.NDArray[np.intp]) -> ProbeTable:
        """The rows where ``mask`` holds (or at the given indices)."""
        return ProbeTable(
            hosts=self.hosts,
            nics=self.nics,
            **{name: getattr(self, name)[mask] for name in _COLUMNS},
        )

    def sorted_by_pair(self) -> ProbeTable:
        """Rows ordered by (src, dst, sport, pair, idx): the two probes of a pair adjacent."""
        order = np.lexsort((self.idx, self.pair, self.sport, self.dst, self.src))
        return self.select(order)

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """The rows as ``probe`` record dicts (for saving and for round-trip tests)."""
        cols = {name: getattr(self, name).tolist() for name in _COLUMNS}
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

    @classmethod
    def concat(cls, tables: Sequence[ProbeTable]) -> ProbeTable:
        """One table from several (host lists are merged; indices remapped)."""
        builder = ProbeTableBuilder()
        for table in tables:
            builder.extend_table(table)
        return builder.build()


_COLUMNS: Final = (
    "src", "dst", "sport", "pair", "idx", "gap_ns", "ts", "t1", "t2", "t3", "t4", "nic",
)  # fmt: skip
_DTYPES: Final = {
    "src": np.int32, "dst": np.int32, "sport": np.int32, "pair": np.int64, "idx": np.int8,
    "gap_ns": np.int64, "ts": np.int8, "t1": np.int64, "t2": np.int64, "t3": np.int64,
    "t4": np.int64, "nic": np.int16,
}  # fmt: skip


class ProbeTableBuilder:
    """Accumulates records as they stream in and builds a ``ProbeTable``.

    Rows go into Python lists of ints (cheap to append), converted to numpy once in
    ``build()``; whole tables (from the simulator) are appended as arrays.
    """

    def __init__(self, hosts: Iterable[str] = ()) -> None:
        self.hosts: list[str] = []
        self._host_code: dict[str, int] = {}
        self.nics: list[str] = []
        self._nic_code: dict[str, int] = {}
        self._rows: dict[str, list[int]] = {name: [] for name in _COLUMNS}
        self._chunks: list[dict[str, np.ndarray]] = []
        for name in hosts:
            self.host_code(name)

    def host_code(self, name: str) -> int:
        code = self._host_code.get(name)
        if code is None:
            code = self._host_code[name] = len(self.hosts)
            self.hosts.append(name)
        return code

    def _nic(self, name: str | None) -> int:
        if name is None:
            return -1
        code = self._nic_code.get(name)
        if code is None:
            code = self._nic_code[name] = len(self.nics)
            self.nics.append(name)
        return code

    def __len__(self) -> int:
        return len(self._rows["src"]) + sum(len(c["src"]) for c in self._chunks)

    def add(self, rec: ProbeRecord) -> None:
        rows = self._rows
        rows["src"].append(self.host_code(rec.src))
        rows["dst"].append(self.host_code(rec.dst))
        rows["sport"].append(rec.sport)
        rows["pair"].append(rec.pair)
        rows["idx"].append(rec.idx)
        rows["gap_ns"].append(rec.gap_ns)
        rows["ts"].append(TS_CODE[rec.ts])
        rows["t1"].append(rec.t1)
        rows["t2"].append(rec.t2 or 0)
        rows["t3"].append(rec.t3 or 0)
        rows["t4"].append(rec.t4 or 0)
        rows["nic"].append(self._nic(rec.nic))

    def add_record(self, rec: Mapping[str, Any], *, where: str = "record") -> None:
        """Decode a ``probe`` record dict and add it; raise ``RecordError`` if malformed."""
        self.add(decode_probe(rec, where=where))

    def extend_table(self, table: ProbeTable) -> None:
        host_map = np.array([self.host_code(h) for h in table.hosts], np.int32)
        nic_map = np.array([self._nic(n) for n in table.nics] + [-1], np.int16)
        chunk = {name: getattr(table, name) for name in _COLUMNS}
        if len(table):
            chunk["src"] = host_map[table.src]
            chunk["dst"] = host_map[table.dst]
            chunk["nic"] = nic_map[table.nic]  # -1 indexes the trailing -1
        self._chunks.append(chunk)

    def build(self) -> ProbeTable:
        columns: dict[str, np.ndarray] = {}
        for name in _COLUMNS:
            parts = [np.asarray(c[name], _DTYPES[name]) for c in self._chunks]
            parts.append(np.asarray(self._rows[name], _DTYPES[name]))
            columns[name] = np.concatenate(parts) if len(parts) > 1 else parts[0]
        return ProbeTable(hosts=list(self.hosts), nics=list(self.nics), **columns)
