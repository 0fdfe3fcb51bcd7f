"""``probes`` records (many exchanges, column by column): the vectorised decoder."""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from itertools import chain
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from cwctl.errors import RecordError
from cwctl.records.schema import (
    BATCH_ROWS_MAX,
    MAX_NS,
    RECORD_VERSION,
    TS_CODE,
    TS_SOURCES,
    is_int,
)
from cwctl.records.table import ProbeBatch
from cwctl.runtime.arrays import I64

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
    ("gap_ns", 0, 10**9, False), ("t1", 1, MAX_NS, False), ("t2", 0, MAX_NS, True),
    ("t3", 0, MAX_NS, True), ("t4", 0, MAX_NS, True),
)  # fmt: skip
_ColumnSpec = tuple[str, int, int, bool]


def _column_error(where: str, key: str, message: str) -> RecordError:
    return RecordError(f"{where}: probes column {key!r}: {message}")


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
        elif is_int(value) or (zero_ok and value is None):
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
