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
``probes``  many exchanges in one line, column by column (the agent's normal output):
            the same rows as ``probe`` records, decoded with numpy (``decode_probes``).

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

import base64
import binascii
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from cwctl.errors import RecordError

RECORD_VERSION: Final = 1
RECORD_TYPES: Final = frozenset({"hello", "probe", "probes", "gpu", "summary", "error", "truth"})
BATCH_ROWS_MAX: Final = 1 << 20  # rows one ``probes`` record may hold

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
    if not isinstance(kind, str) or kind not in RECORD_TYPES:  # a list would not hash
        raise RecordError(f"{where}: unknown record type {kind!r}")
    return rec


def encode_line(rec: Mapping[str, Any]) -> str:
    """One record as one compact JSON line (no trailing newline)."""
    return json.dumps(rec, separators=(",", ":"), allow_nan=False)


# --- ``probes``: many exchanges in one record, column by column ----------------------
#
# {"type": "probes", "v": 1, "n": 3, "src": "gpu-001", "hosts": ["gpu-002", "gpu-003"],
#  "dst": [0, 1, 0], "sport": [40001, 40002, 40001], "pair": [17, 17, 18],
#  "idx": [0, 0, 0], "gap_ns": 20000, "ts": "sw", "t1": [...], "t2": [...], ...}
#
# An integer column is a list of ``n`` integers, one integer that holds for every row,
# or a packed string (base64 of ``n`` little-endian int64: what the agent sends, no
# number parsing). ``dst`` (and ``src`` when it is not a name) index ``hosts``; a
# missing timestamp is 0 (null is accepted in lists). ``nic`` (optional) is one name,
# or indices into ``nics`` (-1: unnamed). docs/records.md is the reference.

_NULL: Final = type(None)
# key, lo, hi, whether null stands for 0 (t2..t4, where 0 means "missing")
_BATCH_COLUMNS: Final = (
    ("sport", 0, 65535, False), ("pair", 0, 2**62, False), ("idx", 0, 1, False),
    ("gap_ns", 0, 10**9, False), ("t1", 1, _MAX_NS, False), ("t2", 0, _MAX_NS, True),
    ("t3", 0, _MAX_NS, True), ("t4", 0, _MAX_NS, True),
)  # fmt: skip
_ColumnSpec = tuple[str, int, int, bool]


def _column_error(where: str, key: str, message: str) -> RecordError:
    return RecordError(f"{where}: probes column {key!r}: {message}")


def pack_column(values: Sequence[int] | np.ndarray) -> str:
    """A packed integer column: base64 of little-endian int64 (what ``decode_probes`` reads)."""
    return base64.b64encode(np.asarray(values, "<i8").tobytes()).decode("ascii")


def _unpack(value: str, n: int, key: str, where: str) -> bytes:
    """A packed column's bytes: ``n`` little-endian int64."""
    try:
        raw = binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        raise _column_error(where, key, "a packed column that is not base64") from None
    if len(raw) != 8 * n:
        raise _column_error(where, key, f"packs {len(raw) / 8:g} values, but 'n' is {n}")
    return raw


def _list_block(lists: list[list[Any]], specs: list[_ColumnSpec], where: str) -> I64:
    """List columns as one (columns, n) int64 block: one type pass, one conversion."""
    types = set(map(type, chain.from_iterable(lists)))
    if not types <= {int}:  # the slow path: nulls to zeros, or find the culprit
        for i, ((key, _lo, _hi, zero_ok), values) in enumerate(zip(specs, lists, strict=True)):
            allowed = {int, _NULL} if zero_ok else {int}
            odd = next((v for v in values if type(v) not in allowed), _NULL)
            if odd is not _NULL:
                raise _column_error(where, key, f"must hold integers, got {odd!r}")
            if zero_ok:
                lists[i] = [0 if v is None else v for v in values]
    try:
        return np.array(lists, np.int64)
    except OverflowError:
        for (key, *_), values in zip(specs, lists, strict=True):
            try:
                np.array(values, np.int64)
            except OverflowError:
                raise _column_error(where, key, "an integer beyond 64 bits") from None
        raise  # not reached: one column overflowed


def _int_columns(
    rec: Mapping[str, Any], specs: list[_ColumnSpec], n: int, where: str
) -> dict[str, I64]:
    """The integer columns named by ``specs``, checked against their ranges at once.

    They fill one (columns, n) int64 block: packed bytes and scalars go straight in,
    list columns in one conversion; one comparison of the block checks every range.
    """
    block = np.empty((len(specs), n), np.int64)
    lists: list[list[Any]] = []
    list_rows: list[int] = []
    for i, (key, lo, hi, zero_ok) in enumerate(specs):
        value = rec.get(key)
        if isinstance(value, list):
            if len(value) != n:
                raise _column_error(where, key, f"{len(value)} values, but 'n' is {n}")
            lists.append(value)
            list_rows.append(i)
        elif isinstance(value, str):
            block[i] = np.frombuffer(_unpack(value, n, key, where), "<i8")
        elif _is_int(value) or (zero_ok and value is None):
            if not lo <= (value or 0) <= hi:
                raise _column_error(where, key, f"{value!r} is not in [{lo}, {hi}]")
            block[i] = value or 0
        else:
            raise _column_error(
                where, key, f"must be a list of {n} integers, one integer or packed, got {value!r}"
            )
    if lists:
        block[list_rows] = _list_block(lists, [specs[i] for i in list_rows], where)
    lows = np.array([spec[1] for spec in specs], np.int64)[:, None]
    highs = np.array([spec[2] for spec in specs], np.int64)[:, None]
    bad = (block < lows) | (block > highs)
    if bad.any():
        i, row = (int(x) for x in np.argwhere(bad)[0])
        key, lo_i, hi_i, _ = specs[i]
        raise _column_error(where, key, f"row {row}: {block[i, row]} is not in [{lo_i}, {hi_i}]")
    return {key: block[i] for i, (key, *_) in enumerate(specs)}


def _names(rec: Mapping[str, Any], key: str, *, where: str) -> list[str]:
    value = rec.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _column_error(where, key, f"must be a list of non-empty names, got {value!r}")
    if len(set(value)) != len(value):
        raise _column_error(where, key, "holds a name twice")
    return value


def _ts_column(rec: Mapping[str, Any], n: int, *, where: str) -> npt.NDArray[np.int8]:
    value = rec.get("ts")
    if isinstance(value, str) and value in TS_CODE:
        return np.full(n, TS_CODE[value], np.int8)
    if isinstance(value, list):
        if len(value) != n:
            raise _column_error(where, "ts", f"{len(value)} values, but 'n' is {n}")
        try:
            codes = list(map(TS_CODE.get, value))
        except TypeError:  # an unhashable value
            codes = [None]
        if None in codes:
            odd = next((v for v in value if not isinstance(v, str) or v not in TS_CODE), None)
            raise _column_error(where, "ts", f"must be {', '.join(TS_SOURCES)}, got {odd!r}")
        return np.array(codes, np.int8) if n else np.zeros(0, np.int8)
    raise _column_error(where, "ts", f"must be {', '.join(TS_SOURCES)} or a list, got {value!r}")


def decode_probes(rec: Mapping[str, Any], *, where: str = "record") -> ProbeBatch:
    """Validate a ``probes`` record (parsed from JSON) with vectorised checks.

    Raise ``RecordError`` naming ``where``, the column and the first bad row.
    """
    version = rec.get("v", RECORD_VERSION)
    if version != RECORD_VERSION:
        raise RecordError(f"{where}: unsupported probes record version {version!r}")
    n = rec.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= BATCH_ROWS_MAX:
        raise RecordError(
            f"{where}: key 'n' must be an integer in [0, {BATCH_ROWS_MAX}], got {n!r}"
        )
    hosts = list(_names(rec, "hosts", where=where))
    specs: list[_ColumnSpec] = [*_BATCH_COLUMNS]
    src_name = rec.get("src")
    if isinstance(src_name, str) and src_name:
        if src_name not in hosts:
            hosts.append(src_name)
    elif isinstance(src_name, list):  # a string is a name, so this column is never packed
        specs.append(("src", 0, len(hosts) - 1, False))
        src_name = None
    else:
        raise _column_error(where, "src", f"must be a host name or indices, got {src_name!r}")
    specs.append(("dst", 0, len(hosts) - 1, False))
    nics: list[str] = []
    nic_value = rec.get("nic")
    if isinstance(nic_value, str) and nic_value and "nics" not in rec:
        nics, nic_value = [nic_value], None
    elif nic_value is not None:
        nics = _names(rec, "nics", where=where)
        specs.append(("nic", -1, min(len(nics), 2**15) - 1, False))
    cols = _int_columns(rec, specs, n, where)
    src = (
        np.full(n, hosts.index(src_name), np.int32)
        if src_name is not None
        else cols["src"].astype(np.int32)
    )
    dst = cols["dst"].astype(np.int32)
    t2, t3, t4 = cols["t2"], cols["t3"], cols["t4"]
    for key, bad, what in (
        ("dst", dst == src, "is the sender itself"),
        ("t3", (t3 != 0) & (t2 == 0), "is set but 't2' is not"),
        ("t4", (t4 != 0) & (t3 == 0), "is set but 't3' is not"),
    ):
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise _column_error(where, key, f"row {row}: {cols[key][row]} {what}")
    named = cols["nic"].astype(np.int16) if "nic" in cols else None
    nic = named if named is not None else np.full(n, 0 if nics else -1, np.int16)
    return ProbeBatch(
        hosts=hosts,
        src=src,
        dst=dst,
        sport=cols["sport"].astype(np.int32),
        pair=cols["pair"],
        idx=cols["idx"].astype(np.int8),
        gap_ns=cols["gap_ns"],
        ts=_ts_column(rec, n, where=where),
        t1=cols["t1"],
        t2=t2,
        t3=t3,
        t4=t4,
        nic=nic,
        nics=nics,
        sender=src_name,
    )


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

    def iter_batches(self, rows: int = 4096) -> Iterator[dict[str, Any]]:
        """The rows as ``probes`` record dicts of up to ``rows`` rows each, in order."""
        for start in range(0, len(self), rows):
            part = self.select(np.arange(start, min(start + rows, len(self))))
            yield part._batch_record()

    def _batch_record(self) -> dict[str, Any]:
        n = len(self)
        used, inverse = np.unique(np.concatenate([self.src, self.dst]), return_inverse=True)
        rec: dict[str, Any] = {"type": "probes", "v": RECORD_VERSION, "n": n}
        rec["hosts"] = [self.hosts[i] for i in used.tolist()]
        if n and (self.src == self.src[0]).all():
            rec["src"] = self.hosts[int(self.src[0])]
        else:
            rec["src"] = inverse[:n].tolist()
        rec["dst"] = inverse[n:].tolist()
        for name in ("sport", "pair", "idx", "gap_ns"):
            rec[name] = _one_or_all(getattr(self, name))
        ts = _one_or_all(self.ts)
        rec["ts"] = TS_SOURCES[ts] if isinstance(ts, int) else [TS_SOURCES[c] for c in ts]
        for name in _TIMESTAMP_KEYS:
            rec[name] = getattr(self, name).tolist()
        if (self.nic >= 0).any():
            rec["nics"] = list(self.nics)
            rec["nic"] = self.nic.tolist()
        return rec

    @classmethod
    def concat(cls, tables: Sequence[ProbeTable]) -> ProbeTable:
        """One table from several (host lists are merged; indices remapped)."""
        builder = ProbeTableBuilder()
        for table in tables:
            builder.extend_table(table)
        return builder.build()


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


def _one_or_all(column: np.ndarray) -> int | list[int]:
    """One value when the whole column holds it (a scalar column), else the list."""
    if len(column) and (column == column[0]).all():
        return int(column[0])
    return column.tolist()  # type: ignore[no-any-return]


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

    Single rows (``add``) go into Python lists of ints (cheap to append); ``probes``
    batches (``add_batch``) and whole tables (``extend_table``) are appended as numpy
    chunks. Rows keep their arrival order whichever way they came.
    """

    _MERGE_CHUNKS: Final = 256  # small chunks merged into one past this many

    def __init__(self, hosts: Iterable[str] = ()) -> None:
        self.hosts: list[str] = []
        self._host_code: dict[str, int] = {}
        self.nics: list[str] = []
        self._nic_code: dict[str, int] = {}
        self._rows: dict[str, list[int]] = {name: [] for name in _COLUMNS}
        self._chunks: list[dict[str, np.ndarray]] = []  # sealed, large
        self._recent: list[dict[str, np.ndarray]] = []  # small, merged now and then
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
        chunks = [*self._chunks, *self._recent]
        return len(self._rows["src"]) + sum(len(c["src"]) for c in chunks)

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

    def add_batch(self, rec: Mapping[str, Any] | ProbeBatch, *, where: str = "record") -> int:
        """Add a ``probes`` record (a dict, or already decoded); the rows added.

        A malformed batch raises ``RecordError`` and adds nothing.
        """
        batch = rec if isinstance(rec, ProbeBatch) else decode_probes(rec, where=where)
        self.extend_table(batch)
        return len(batch)

    def extend_table(self, table: ProbeTable) -> None:
        host_map = np.array([self.host_code(h) for h in table.hosts], np.int32)
        nic_map = np.array([self._nic(n) for n in table.nics] + [-1], np.int16)
        chunk = {name: getattr(table, name) for name in _COLUMNS}
        if len(table):
            chunk["src"] = host_map[table.src]
            chunk["dst"] = host_map[table.dst]
            chunk["nic"] = nic_map[table.nic]  # -1 indexes the trailing -1
        self._append_chunk(chunk)

    def _seal_rows(self) -> None:
        """Single rows so far become a chunk, so that later chunks stay after them."""
        if self._rows["src"]:
            rows = {name: np.asarray(self._rows[name], _DTYPES[name]) for name in _COLUMNS}
            self._recent.append(rows)
            self._rows = {name: [] for name in _COLUMNS}

    def _append_chunk(self, chunk: dict[str, np.ndarray]) -> None:
        self._seal_rows()
        self._recent.append(chunk)
        if len(self._recent) >= self._MERGE_CHUNKS:  # a long scan: thousands of batches
            self._chunks.append(_concat_chunks(self._recent))
            self._recent = []

    def build(self) -> ProbeTable:
        self._seal_rows()
        columns = _concat_chunks([*self._chunks, *self._recent])
        return ProbeTable(hosts=list(self.hosts), nics=list(self.nics), **columns)


def _concat_chunks(chunks: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    columns: dict[str, np.ndarray] = {}
    for name in _COLUMNS:
        parts = [np.asarray(c[name], _DTYPES[name]) for c in chunks]
        columns[name] = np.concatenate(parts) if parts else np.zeros(0, _DTYPES[name])
    return columns
