"""``cwctl sync`` and ``cwctl sync check`` reports: a table, or JSON.

A sync round in JSON is the round's ``cwctl.scan/1`` object with additions only
(docs/sync.md, "Feeding chronyd"): a top-level ``feed`` object (round, mode, reference
and why, the rules) and a ``feed`` object in every ``hosts[]`` entry (what was fed, or
why not). One object per round, one per line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from cwctl.units import fmt_ns, fmt_ppb

CHECK_SCHEMA = "cwctl.sync-check/1"
_WORDS = {"fed": "fed", "feed": "would feed", "skip": "skip", "failed": "FAILED"}


def _host_feed(d: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "action": d.action,
        "reason": d.reason or None,
        "socket": d.socket,
        "step": d.step,
    }
    if d.action in ("fed", "feed", "failed") and d.offset_ns is not None:
        out["offset_s"] = -d.offset_ns * 1e-9  # chrony's sign: true time minus host time
        out["t_ref_ns"] = d.t_ref_ns
    if d.action in ("fed", "failed"):
        out["samples"] = d.samples
        out["last_offset_s"] = d.last_offset_s
        out["error"] = d.error
    return out


def round_json(rnd: Any) -> dict[str, Any]:
    out = rnd.snapshot.to_json()
    by_host = {d.host: d for d in rnd.decisions}
    for h in out["hosts"]:
        d = by_host.get(h["name"])
        if d is not None:
            h["feed"] = _host_feed(d)
    out["feed"] = {
        "round": rnd.number,
        "time": rnd.time,
        "mode": "apply" if rnd.apply else "dry-run",
        "reference": rnd.reference,
        "reference_why": rnd.reference_why,
        "fed": sum(d.action == ("fed" if rnd.apply else "feed") for d in rnd.decisions),
        "skipped": sum(d.action == "skip" for d in rnd.decisions),
        "failed": sum(d.action == "failed" for d in rnd.decisions),
        **rnd.rules,
    }
    return out


def render_round_json(rnd: Any) -> str:
    return json.dumps(round_json(rnd), separators=(",", ":")) + "\n"


def _detail(d: Any) -> str:
    if d.action == "fed":
        last = (
            ""
            if d.last_offset_s is None
            else f", last {fmt_ns(d.last_offset_s * 1e9, signed=True)}"
        )
        note = f" ({d.error})" if d.error else ""
        step = " [--step]" if d.step else ""
        return f"{d.samples} samples to {d.socket}{last}{step}{note}"
    if d.action == "feed":
        offset = -(d.offset_ns or 0.0)
        step = " [--step]" if d.step else ""
        return f"chrony offset {fmt_ns(offset, signed=True)} to {d.socket}{step}"
    if d.action == "failed":
        return d.error or "failed"
    return d.reason


def render_round_table(rnd: Any) -> str:
    mode = "apply" if rnd.apply else "dry run: nothing fed"
    head = (
        f"cwctl sync round {rnd.number} ({mode}), {rnd.time}\n"
        f"reference {rnd.reference}: {rnd.reference_why}\n"
    )
    rows = [("HOST", "OFFSET", "±ERROR", "DRIFT", "ACTION", "DETAIL")]
    for d in rnd.decisions:
        action = "-" if d.host == rnd.reference else _WORDS[d.action]
        rows.append(
            (
                d.host,
                fmt_ns(d.offset_ns, signed=True),
                fmt_ns(d.uncertainty_ns),
                fmt_ppb(d.drift_ppb),
                action,
                _detail(d),
            )
        )
    return head + _columns(rows) + "\n"


def _columns(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
    return "\n".join(lines)


def render_check_table(checks: Sequence[Any], reference: tuple[str, str] | None) -> str:
    rows = [("HOST", "CHRONYD", "REFCLOCK", "SOURCE", "DETAIL")]
    for c in checks:
        source = "-"
        if c.source is not None:
            s = c.source
            source = f"{s.state_word}, reach {s.reach:o}"
            if c.stats is not None:
                source += f", {c.stats.samples} samples, offset {c.stats.offset_s * 1e9:+.1f} ns"
        rows.append(
            (
                c.host,
                "running" if c.running else "not running",
                "configured" if c.source is not None else "missing",
                source,
                "; ".join(c.problems)
                if c.problems
                else ("ready: the reference, needs no refclock" if c.reference else "ready"),
            )
        )
    text = _columns(rows) + "\n"
    if reference is not None:
        text += f"\nreference: {reference[0]} ({reference[1]})\n"
    # it always ends with the refclock line (docs/sync.md): what to add where it is
    # missing, what chronyd must be started with where it is not running
    missing = [c for c in checks if c.running and c.source is None and not c.reference]
    stopped = [c for c in checks if not c.running and not c.reference]
    groups = [
        ("add to chrony.conf on {}:", missing),
        ("start chronyd on {}, its chrony.conf holding:", stopped),
    ]
    if not missing and not stopped:
        fed = [c for c in checks if not c.reference] or list(checks)
        groups = [("cwctl's refclock in chrony.conf ({}):", fed)]
    for head, hosts in groups:
        if hosts:
            text += "\n" + head.format(", ".join(c.host for c in hosts)) + "\n"
            text += "".join(f"  {line}\n" for line in dict.fromkeys(c.line for c in hosts))
    return text


def render_check_json(checks: Sequence[Any], reference: tuple[str, str] | None) -> str:
    out: dict[str, Any] = {
        "schema": CHECK_SCHEMA,
        "ready": all(c.ready for c in checks),
        "hosts": [c.to_json() for c in checks],
        "reference": reference[0] if reference else None,
        "reference_why": reference[1] if reference else None,
    }
    return json.dumps(out, separators=(",", ":")) + "\n"
