"""One ``probe`` record: the decoded type and its validating decoder."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cwctl.errors import RecordError
from cwctl.records.schema import (
    MAX_NS,
    RECORD_VERSION,
    TIMESTAMP_KEYS,
    TS_CODE,
    TS_SOURCES,
    require_int,
    require_str,
)


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
    src = require_str(rec, "src", where=where)
    dst = require_str(rec, "dst", where=where)
    if src == dst:
        raise RecordError(f"{where}: probe from {src!r} to itself")
    ts = rec.get("ts")
    if not isinstance(ts, str) or ts not in TS_CODE:
        raise RecordError(f"{where}: key 'ts' must be one of {', '.join(TS_SOURCES)}, got {ts!r}")
    stamps: dict[str, int | None] = {}
    for key in TIMESTAMP_KEYS:
        value = rec.get(key)
        if value is None and key != "t1":
            stamps[key] = None
            continue
        stamps[key] = require_int(rec, key, lo=1, hi=MAX_NS, where=where)
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
        sport=require_int(rec, "sport", lo=0, hi=65535, where=where),
        pair=require_int(rec, "pair", lo=0, hi=2**62, where=where),
        idx=require_int(rec, "idx", lo=0, hi=1, where=where),
        gap_ns=require_int(rec, "gap_ns", lo=0, hi=10**9, where=where),
        ts=ts,
        t1=stamps["t1"],  # type: ignore[arg-type]
        t2=stamps["t2"],
        t3=stamps["t3"],
        t4=stamps["t4"],
        nic=nic,
    )
