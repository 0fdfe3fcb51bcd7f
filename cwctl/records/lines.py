"""Records as JSON lines: one line in (with a known ``type``), one line out."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cwctl.errors import RecordError
from cwctl.records.schema import RECORD_TYPES


def parse_line(line: str | bytes, *, where: str = "line") -> dict[str, Any]:
    """Parse one JSON line into a record dict with a known ``type``; raise ``RecordError``."""
    try:
        rec = json.loads(line)
    except RecursionError:
        raise RecordError(f"{where}: not a JSON record (nested too deep)") from None
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
