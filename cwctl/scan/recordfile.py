"""Record files: a scan's records saved (``--save-records``) and read back (``--replay``).

JSON lines, gzip-compressed when the name ends in ``.gz``. The first line is a header,
``{"type": "header", "format": "cwctl.records/2", ...}``, naming the hosts, their
addresses, the topology (with the fabric addresses of switches and hosts), the probe
parameters, the peer assignment and every host's status; then one record per line
(``hello``, the probe rows as ``probes`` batches of up to ``BATCH_ROWS`` rows in table
order, their integer columns packed, the discovered ``path`` records, ``gpu``,
``summary``, and for simulated scans one ``truth``), in the ``cwctl.rec/1`` format of
``cwctl.records`` (``path``: ``cwctl.records.path``). A reader takes single ``probe``
records too (files written before batches, or with ``batch_rows=0``), list columns
(files written before issue 36), and ``cwctl.records/1`` files, which are the same
without path records. Lines are read by orjson (``records.lines.parse_fast``).
``docs/records.md`` documents both. The header counts the records, so a file cut at a
line boundary is caught as surely as one cut mid-line.

``read_collection(write_collection(c))`` gives a collection whose analysis is the live
one's, field for field (only ``source`` says ``replay:<original>``).
"""

from __future__ import annotations

import gzip
import json
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from cwctl.errors import InputError, RecordError
from cwctl.fabric.topology import Topology
from cwctl.records import PathTable, ProbeTableBuilder, decode_path, encode_line, parse_line
from cwctl.records.bounds import (
    HEADER_MAX_CHARS,
    ROWS_SLACK,
    check_values,
    line_max_chars,
    other_max_chars,
    printable,
    rows_max,
    wide_integer,
)
from cwctl.records.header import check_header, is_name
from cwctl.records.lines import parse_fast
from cwctl.runtime import atomic
from cwctl.scan.collection import Collection, HostInfo, HostStatus
from cwctl.scan.truthpaths import plain_truth

FILE_FORMAT: Final = "cwctl.records/2"
READ_FORMATS: Final = ("cwctl.records/1", FILE_FORMAT)  # /1: the same, no path records
BATCH_ROWS: Final = 4096  # probe rows per ``probes`` line of a record file


def _open_text(path: Path, mode: str) -> IO[str]:
    if path.name.endswith(".gz"):  # level 6: 1 % larger than 9, three times faster to write
        return gzip.open(path, mode + "t", compresslevel=6, encoding="utf-8")  # type: ignore[return-value]
    return path.open(mode, encoding="utf-8")


def header_of(collection: Collection, count: int) -> dict[str, Any]:
    topo = collection.topology
    return {
        "type": "header",
        "format": FILE_FORMAT,
        "created_ns": time.time_ns(),
        "source": collection.source,
        "duration_s": collection.duration_s,
        "hosts": [
            {"name": h.name, "address": h.address, "leaf": h.leaf, "nics": list(h.nics)}
            for h in collection.hosts
        ],
        "table_hosts": list(collection.table.hosts),
        "topology": None
        if topo is None
        else {
            "leaf_of": dict(topo.leaf_of),
            "uplinks": {leaf: list(ups) for leaf, ups in topo.uplinks.items()},
            "nics": {host: list(nics) for host, nics in topo.nics.items()},
            "switch_of_address": dict(topo.switch_of_address),
            "host_of_address": {a: list(hn) for a, hn in topo.host_of_address.items()},
        },
        "params": collection.params,
        "peers": collection.peers,
        "status": {
            name: {"status": s.status, "error": s.error} for name, s in collection.status.items()
        },
        "records": count,
    }


def _records(collection: Collection, batch_rows: int, packed: bool) -> Iterator[Mapping[str, Any]]:
    # a record's own keys win; "type" and "host" are filled in where a producer left them out
    for name, rec in collection.hello.items():
        yield {"type": "hello", "host": name, **rec}
    if batch_rows:
        yield from collection.table.iter_batches(batch_rows, packed=packed)
    else:
        yield from collection.table.iter_records()
    for path in collection.paths:
        yield path.to_json()
    for name, records in collection.gpu.items():
        for rec in records:
            yield {"type": "gpu", "host": name, **rec}
    for name, rec in collection.summaries.items():
        yield {"type": "summary", "host": name, **rec}
    if collection.truth is not None:
        yield {"type": "truth", "v": 1, **plain_truth(collection.truth)}


def _count(collection: Collection, batch_rows: int) -> int:
    rows = len(collection.table)
    return (
        len(collection.hello)
        + (-(-rows // batch_rows) if batch_rows else rows)
        + len(collection.paths)
        + sum(len(r) for r in collection.gpu.values())
        + len(collection.summaries)
        + (collection.truth is not None)
    )


def write_collection(
    collection: Collection, path: str | Path, *, batch_rows: int = BATCH_ROWS, packed: bool = True
) -> None:
    """Save every record of ``collection`` to ``path`` (``cwctl.runtime.atomic``: new files 0600).

    Probe rows go as ``probes`` batches of ``batch_rows`` rows (0: one ``probe`` line each),
    their varying integer columns packed (``packed=False``: JSON lists, as before issue 36).
    """
    path = Path(path)
    suffix = ".gz" if path.name.endswith(".gz") else ""
    try:
        replacing = atomic.replacing(
            path, suffix=suffix, mode=atomic.PRIVATE_MODE, option="--save-records"
        )
        with replacing as tmp, _open_text(tmp, "w") as f:
            f.write(encode_line(header_of(collection, _count(collection, batch_rows))) + "\n")
            for rec in _records(collection, batch_rows, packed):
                f.write(encode_line(rec) + "\n")
    except (OSError, ValueError, TypeError) as exc:  # TypeError: a value JSON cannot hold
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise InputError(f"cannot write records to {path}: {why}") from None


def _lines(path: Path, limits: list[int]) -> Iterator[tuple[int, str]]:
    """(line number, text), each line read up to ``limits[0]`` characters and no further
    (the list is the reader's to change once the header told how many hosts there are),
    turning I/O and gzip damage into ``RecordError``."""
    n = 0
    try:
        with _open_text(path, "r") as f:
            while True:
                line = f.readline(limits[0] + 1)
                if not line:
                    return
                n += 1
                if len(line) > limits[0]:
                    raise RecordError(
                        f"{path} line {n}: longer than {limits[0]:,} characters, the bound "
                        'for this file (docs/records.md, "Bounds")'
                    )
                yield n, line
    except FileNotFoundError:
        raise InputError(f"{path}: no such record file") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise RecordError(f"{path} line {n + 1}: truncated or corrupt gzip ({exc})") from None
    except UnicodeDecodeError:
        raise RecordError(f"{path} line {n + 1}: not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _header(path: Path, text: str) -> dict[str, Any]:
    where = f"{path} line 1"
    try:
        header = json.loads(text)
    except RecursionError:
        raise RecordError(f"{where}: not a cwctl record file (nested too deep)") from None
    except ValueError:
        raise RecordError(f"{where}: not a cwctl record file (no JSON header)") from None
    if not isinstance(header, dict) or header.get("type") != "header":
        raise RecordError(f"{where}: not a cwctl record file (first line is not a header)")
    if header.get("format") not in READ_FORMATS:
        raise RecordError(
            f"{where}: unsupported record file format {printable(repr(header.get('format')))}, "
            f"expected one of {', '.join(READ_FORMATS)}"
        )
    check_values(header, where)
    check_header(header, where)
    return header


def _hosts(header: Mapping[str, Any]) -> list[HostInfo]:
    return [
        HostInfo(
            name=entry["name"],
            address=str(entry.get("address") or ""),
            leaf=entry.get("leaf"),
            nics=tuple(entry.get("nics") or ()),
        )
        for entry in header["hosts"]
    ]


def _topology(raw: Any, where: str) -> Topology | None:
    if raw is None:
        return None
    try:
        host_of = {}
        for address, (host, nic) in (raw.get("host_of_address") or {}).items():
            if not is_name(host) or not (nic is None or is_name(nic)):
                raise TypeError(address)
            host_of[str(address)] = (host, nic)
        names = [
            *raw["leaf_of"].items(),
            *raw["uplinks"],
            *(s for ups in raw["uplinks"].values() for s in ups),
            *(raw.get("switch_of_address") or {}).items(),
        ]
        flat = [n for item in names for n in (item if isinstance(item, tuple) else (item,))]
        if not all(is_name(n) for n in flat):  # names reach the report: none with a control
            raise TypeError("a name")
        return Topology(
            leaf_of=dict(raw["leaf_of"]),
            uplinks={leaf: tuple(ups) for leaf, ups in raw["uplinks"].items()},
            nics={host: tuple(nics) for host, nics in (raw.get("nics") or {}).items()},
            switch_of_address={
                str(a): str(s) for a, s in (raw.get("switch_of_address") or {}).items()
            },
            host_of_address=host_of,
        )
    except (KeyError, TypeError, AttributeError, ValueError):
        raise RecordError(f"{where}: header 'topology' is malformed") from None


def _status(raw: Any) -> dict[str, HostStatus]:
    """Each host's status (checked by ``check_header``), its error text made printable."""
    out = {}
    for name, entry in dict(raw or {}).items():
        error = entry.get("error")
        out[name] = HostStatus(entry["status"], None if error is None else printable(error, 500))
    return out


# the keys of a truth record the report may show (the simulator's, sim/truth.py): nothing
# else a file holds is echoed into a report
TRUTH_KEYS: Final = frozenset(
    {
        "reference", "t_ref_ns", "t_mid_ns", "offset_ns", "drift_ppb", "clock_error_ns",
        "clock_drift_ppb", "faults", "fault_specs", "paths", "state", "applied",
    }
)  # fmt: skip


class _Limits:
    """What a file of this header may hold (``cwctl.records.bounds``), and what it held."""

    def __init__(self, header: Mapping[str, Any], path: Path) -> None:
        hosts = len(header["hosts"])
        params = header.get("params") or {}
        peers = header.get("peers") or {}
        duration = float(header.get("duration_s") or 0.0)
        self.path = path
        self.rows_max = rows_max(hosts, peers, params.get("rate"), duration)
        self.records_max = self.rows_max + 64 * hosts + ROWS_SLACK
        self.rows = 0
        self.other_max = other_max_chars(hosts)
        self.other = 0
        if header["records"] > self.records_max:
            raise RecordError(
                f"{path} line 1: the header announces {header['records']:,} records, more than"
                f" a scan of its hosts, peers, rate and duration can have ({self.records_max:,})"
            )

    def add_rows(self, n: Any, at: str) -> None:
        n = n if isinstance(n, int) and not isinstance(n, bool) else 0
        self.rows += max(0, n)
        if self.rows > self.rows_max:
            raise RecordError(
                f"{at}: more probe rows ({self.rows:,} so far) than a scan of the header's "
                f"hosts, peers, rate and duration can have sent ({self.rows_max:,}, a margin in)"
            )

    def add_other(self, chars: int, at: str) -> None:
        self.other += chars
        if self.other > self.other_max:
            raise RecordError(
                f"{at}: more than {self.other_max:,} characters of records other than probe "
                'rows, the bound for the header\'s hosts (docs/records.md, "Bounds")'
            )


@dataclass
class _Kept:
    """A record file's records other than probes, as they are read."""

    with_paths: bool  # cwctl.records/1 files hold no path records
    hello: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpu: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    truth: dict[str, Any] | None = None
    paths: PathTable = field(default_factory=PathTable)

    def add(self, kind: str, rec: dict[str, Any], at: str) -> None:
        """Keep one record (``at`` names its line in errors)."""
        if kind == "truth":
            self.truth = {k: v for k, v in rec.items() if k in TRUTH_KEYS}
            return
        if kind == "path":
            if not self.with_paths:
                raise RecordError(f"{at}: a path record in a cwctl.records/1 file")
            self.paths.add(decode_path(rec, where=at))
            return
        host = rec.get("host")
        if not is_name(host):
            raise RecordError(f"{at}: {kind} record without a 'host' (a printable name)")
        if kind == "hello":
            self.hello[host] = rec
        elif kind == "gpu":
            self.gpu.setdefault(host, []).append(rec)
        elif kind == "summary":
            self.summaries[host] = rec


def read_collection(path: str | Path) -> Collection:
    """Read a record file back into a ``Collection``; raise ``RecordError`` naming the line.

    Read within bounds (``cwctl.records.bounds``): a line's length, its nesting and
    numbers, the probe rows and records in all; past one, a ``RecordError``."""
    path = Path(path)
    line_max = [HEADER_MAX_CHARS]
    lines = _lines(path, line_max)
    first = next(lines, None)
    if first is None:
        raise RecordError(f"{path} line 1: empty file, no header")
    header = _header(path, first[1])
    hosts = _hosts(header)
    line_max[0] = line_max_chars(len(hosts))
    limits = _Limits(header, path)
    builder = ProbeTableBuilder(header.get("table_hosts") or [h.name for h in hosts])
    kept = _Kept(with_paths=header["format"] != "cwctl.records/1")
    count = 0
    last = 1
    for n, text in lines:
        last = n
        if not text.strip():
            continue
        at = f"{path} line {n}"
        if not text.endswith("\n"):
            raise RecordError(f"{at}: truncated (the last line has no end)")
        rec = _parsed(text, at)
        count += 1
        if count > limits.records_max:
            raise RecordError(f"{at}: more records than the header's scan can have")
        kind = rec["type"]
        if kind not in ("probes", "probe"):
            limits.add_other(len(text), at)
        else:
            limits.add_rows(rec.get("n") if kind == "probes" else 1, at)
            _add_probes(builder, rec, text, at)
            continue
        kept.add(kind, rec, at)
    if count != header["records"]:
        raise RecordError(
            f"{path} line {last + 1}: truncated: the header announces {header['records']} "
            f"records, the file holds {count}"
        )
    source = printable(header["source"])
    where = f"{path} line 1"
    return Collection(
        source=source if source.startswith("replay:") else f"replay:{source}",
        hosts=hosts,
        table=builder.build(),
        duration_s=float(header.get("duration_s") or 0.0),
        status=_status(header.get("status")),
        topology=_topology(header.get("topology"), where),
        hello=kept.hello,
        gpu=kept.gpu,
        summaries=kept.summaries,
        peers={k: list(v) for k, v in dict(header.get("peers") or {}).items()},
        truth=kept.truth,
        params=dict(header.get("params") or {}),
        paths=kept.paths,
        captured_ns=_captured_ns(header),
    )


def _parsed(text: str, at: str) -> dict[str, Any]:
    """One line's record, within the bounds (``check_values``). orjson refuses what is not
    finite, so only a line json read (``parse_fast``) or one showing a wide integer can
    hold a number out of bounds: those records are walked, a wide one as json reads it.
    Probe columns are their decoder's to range-check (the depth alone here)."""
    rec, fast = parse_fast(text, where=at)
    numbers = rec["type"] not in ("probes", "probe")
    suspect = numbers and (not fast or wide_integer(text))
    if suspect and fast:
        rec = parse_line(text, where=at)
    check_values(rec, at, text, numbers=numbers, suspect=suspect)
    return rec


def _add_probes(builder: ProbeTableBuilder, rec: dict[str, Any], text: str, at: str) -> None:
    """A ``probes`` or ``probe`` record's rows added. A record its decoder refuses is read
    again by json, so that the refusal is worded as ever (orjson reads an integer beyond
    int64 as a float, which the decoder refuses as "not an integer"): nothing is added."""
    add = builder.add_batch if rec["type"] == "probes" else builder.add_record
    try:
        add(rec, where=at)
    except RecordError:
        add(parse_line(text, where=at), where=at)


def _captured_ns(header: Mapping[str, Any]) -> int | None:
    """When the records were captured: the header's ``created_ns`` (a replay says so)."""
    created = header.get("created_ns")
    ok = isinstance(created, int) and not isinstance(created, bool) and created > 0
    return created if ok else None


def read_host_names(path: str | Path) -> list[str]:
    """The host names a record file's header lists (reads the header line only)."""
    path = Path(path)
    for _, text in _lines(path, [HEADER_MAX_CHARS]):
        return [h.name for h in _hosts(_header(path, text))]
    raise RecordError(f"{path}: empty, not a cwctl record file")
