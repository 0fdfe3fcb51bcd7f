"""Record format constants and the field validators every decoder uses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cwctl.errors import RecordError

RECORD_VERSION: Final = 1
RECORD_TYPES: Final = frozenset(
    {"hello", "probe", "probes", "gpu", "summary", "error", "truth", "path"}
)
BATCH_ROWS_MAX: Final = 1 << 20  # rows one ``probes`` record may hold

# Timestamp sources, best first; the codes are what ProbeTable.ts holds.
TS_SOURCES: Final = ("hw", "sw", "user")
TS_CODE: Final = {name: code for code, name in enumerate(TS_SOURCES)}

TIMESTAMP_KEYS: Final = ("t1", "t2", "t3", "t4")
MAX_NS: Final = 2**62  # far beyond any real clock; rejects garbage before it reaches int64


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def require_int(rec: Mapping[str, Any], key: str, *, lo: int, hi: int, where: str) -> int:
    value = rec.get(key)
    if not is_int(value) or not lo <= value <= hi:  # type: ignore[operator]
        raise RecordError(f"{where}: key {key!r} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)  # type: ignore[arg-type]


def require_str(rec: Mapping[str, Any], key: str, *, where: str) -> str:
    value = rec.get(key)
    if not isinstance(value, str) or not value:
        raise RecordError(f"{where}: key {key!r} must be a non-empty string, got {value!r}")
    return value
