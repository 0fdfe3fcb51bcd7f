"""``cwctl journal``'s table and its ``--since``: one row per action, with who acted
(``root/cli``, ``ops/watch``) and where (``sim``, ``ssh``), and the time a ``--since``
names, in the journal's own UTC format."""

from __future__ import annotations

import datetime as dt
from typing import Any

from cwctl.errors import InputError
from cwctl.units import parse_seconds

HEADER = ("ID", "TIME", "EVENT", "KIND", "ELEMENT", "STATUS", "STEPS", "BY", "WHERE", "NOTE")


def parse_since(text: str, now: dt.datetime | None = None) -> str:
    """``2h`` (back from now) or a UTC date or time, as the journal writes times."""
    now = now or dt.datetime.now(dt.UTC)
    try:
        when = now - dt.timedelta(seconds=parse_seconds(text))
    except ValueError:
        try:
            when = dt.datetime.fromisoformat(text.strip().removesuffix("Z"))
        except ValueError:
            raise InputError(
                f"--since {text!r}: give a duration back from now (2h, 30m) or a UTC time "
                "(2026-12-06, 2026-12-06T10:00)"
            ) from None
        when = when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _note(r: dict[str, Any]) -> str:
    note = ""
    if r["rollback_of"]:
        note = f"undoes {r['rollback_of']}"
    elif r["rolled_back_by"]:
        note = f"rolled back by {r['rolled_back_by']}"
    elif r["may_have_changed"]:
        changed = ",".join(str(i + 1) for i in r["may_have_changed"])
        note = f"step(s) {changed} may have changed: cwctl rollback {r['id']}"
    if r["verify"]:
        note = f"{note}; verify: {r['verify']}".lstrip("; ")
    return note


def _by(r: dict[str, Any]) -> str:
    if r.get("by") is None:
        return "-"  # written before the journal said who
    return f"{r.get('user') or '?'}/{r['by']}"


def journal_table(rows: list[dict[str, Any]]) -> str:
    """The rows as aligned columns, no trailing blanks."""
    table: list[tuple[str, ...]] = [HEADER]
    for r in rows:
        steps = f"{r['steps_ok']}/{r['steps']}"
        cells = (r["id"], r["time"], r["event"], r["kind"], r["element"], r["status"], steps,
                 _by(r), r.get("where") or "-", _note(r))  # fmt: skip
        table.append(tuple(str(x or "") for x in cells))
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    ]
    return "\n".join(lines)
