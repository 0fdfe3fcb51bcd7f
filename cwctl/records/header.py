"""A record file's header line, checked key by key before anything reads it.

Every key the reader uses is checked for its type (a header from anywhere may say
``"hosts": [1, 2]`` or ``"duration_s": "x"``), names for control characters (a name is
printed: an escape sequence or a line break in one would forge report lines), and the
numbers for their sane ranges. A problem is one ``RecordError`` naming the key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, TypeGuard

from cwctl import settings
from cwctl.errors import RecordError
from cwctl.records.bounds import has_control, printable

NAME_MAX: Final = 253  # a DNS name's length: room for any host, NIC or leaf name
STATUSES: Final = ("ok", "unreachable", "error")


def _problem(where: str, key: str, what: str) -> RecordError:
    return RecordError(f"{where}: header {key!r} {what}")


def is_name(value: Any) -> TypeGuard[str]:
    """A host, leaf or NIC name: a non-empty string of printable characters."""
    return isinstance(value, str) and 0 < len(value) <= NAME_MAX and not has_control(value)


def _names(value: Any, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(is_name(v) for v in value):
        raise _problem(where, key, "must be a list of names (printable, no control characters)")
    if len(set(value)) != len(value):
        odd = next(v for i, v in enumerate(value) if v in value[:i])
        raise _problem(where, key, f"names {printable(odd)!r} twice")
    return value


def _host(entry: Any, where: str) -> str:
    if not isinstance(entry, dict) or not is_name(entry.get("name")):
        shown = printable(repr(entry.get("name") if isinstance(entry, dict) else entry), 60)
        raise _problem(where, "hosts", f"entry {shown}: not a name (a printable string)")
    name = entry["name"]
    address = entry.get("address")
    if address is not None and not (isinstance(address, str) and not has_control(address)):
        raise _problem(where, "hosts", f"entry {name!r}: address must be a printable string")
    if entry.get("leaf") is not None and not is_name(entry["leaf"]):
        raise _problem(where, "hosts", f"entry {name!r}: leaf must be a name")
    nics = entry.get("nics")
    if nics is not None and not (isinstance(nics, list) and all(is_name(n) for n in nics)):
        raise _problem(where, "hosts", f"entry {name!r}: nics must be a list of names")
    return name


def _number(header: Mapping[str, Any], key: str, where: str, hi: float) -> None:
    value = header.get(key)
    if value is None:
        return
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or not 0 <= value <= hi:
        raise _problem(where, key, f"must be a number in [0, {hi:g}], got {printable(repr(value))}")


def _mapping(header: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = header.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _problem(where, key, f"must be an object, got {type(value).__name__}")
    return value


def check_header(header: Mapping[str, Any], where: str) -> None:
    """Refuse a header whose keys are of the wrong type or out of range."""
    for key, kind in (("hosts", list), ("records", int), ("source", str)):
        if not isinstance(header.get(key), kind) or isinstance(header.get(key), bool):
            raise _problem(where, key, f"missing or not a {kind.__name__}")
    if header["records"] < 0:
        raise _problem(where, "records", "must not be negative")
    if not header["hosts"]:
        raise _problem(where, "hosts", "lists no host: nothing was scanned")
    names = [_host(entry, where) for entry in header["hosts"]]
    _names(names, where, "hosts")
    if header.get("table_hosts") is not None:
        _names(header["table_hosts"], where, "table_hosts")
    _number(header, "duration_s", where, settings.PROBE_DURATION_MAX_S)
    params = _mapping(header, "params", where)
    _number(params, "rate", where + " params", settings.PROBE_RATE_MAX)
    for name, peers in _mapping(header, "peers", where).items():
        if not isinstance(peers, list) or not all(isinstance(p, str) for p in peers):
            raise _problem(where, "peers", f"of {printable(name)!r} must be a list of names")
    for name, entry in _mapping(header, "status", where).items():
        status = entry.get("status") if isinstance(entry, dict) else None
        if status not in STATUSES:
            raise _problem(where, "status", f"of {printable(name)!r} is {printable(repr(status))}")
        error = entry.get("error")
        if error is not None and not isinstance(error, str):
            raise _problem(where, "status", f"of {printable(name)!r}: error must be a string")
    if header.get("topology") is not None and not isinstance(header["topology"], dict):
        raise _problem(where, "topology", "is malformed")
