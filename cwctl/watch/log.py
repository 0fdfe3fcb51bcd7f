"""The watch's log: every entry at a level, as a JSON line or as a line of words.

Each entry is a dict with an ``event`` (``start``, ``round``, ``decision``, ``adopted``,
``error``, ``reload``, ``stop``). ``level_of`` gives it a syslog level: a healthy round
is ``info``, a round that found problems ``warning``, a failed scan, action or reload
``error``. ``--log-format json`` writes the entry as one JSON line with its ``time`` and
``level``; ``human`` as ``2026-12-06T10:00:00Z WARNING round 3: ...``. Under systemd
(stderr is the journal's stream: ``$JOURNAL_STREAM``) each line starts with the
``<N>`` prefix journald reads as the line's priority, so ``journalctl -p warning``
finds it, and without the time (the journal stamps it). ``auto``, the default, is human
on a terminal or the journal, JSON into a pipe or a file (a program reads it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

Log = Callable[[dict[str, Any]], None]
LOG_FORMATS = ("auto", "human", "json")
PRIORITY = {"error": 3, "warning": 4, "notice": 5, "info": 6}  # syslog's numbers
FAILED_VERBS = {"failed", "restore-failed"}
ACTING_VERBS = {"act", "acted", "restore", "restored"}
SHOWN = 5  # suspects, hosts not reached, jobs named per round line


def level_of(entry: dict[str, Any]) -> str:
    event = entry.get("event")
    if event == "error" or (event == "reload" and entry.get("ok") is False):
        return "error"
    if event == "round":
        return "info" if entry.get("healthy") else "warning"
    if event == "decision":
        verb = entry.get("verb")
        return "error" if verb in FAILED_VERBS else "notice" if verb in ACTING_VERBS else "info"
    return "info"


def human(entry: dict[str, Any]) -> str:
    """One entry in words (no time, no level: the writer adds them)."""
    event = str(entry.get("event", "?"))
    say = _SAY.get(event)
    if say is not None:
        return say(entry)
    rest = " ".join(f"{k}={v}" for k, v in entry.items() if k not in ("event", "time", "level"))
    return f"{event}: {rest}" if rest else event


def _start(e: dict[str, Any]) -> str:
    policy = e.get("policy")
    acts = (
        f"policy {policy}" + (" (dry run: decides, never acts)" if e.get("dry_run") else "")
        if policy
        else "no policy: it never acts"
    )
    listen = f"; /metrics on {e['listen']}" if e.get("listen") else ""
    return f"start: watching {e.get('source')} every {e.get('interval_s'):g} s; {acts}{listen}"


def _round(e: dict[str, Any]) -> str:
    head = (
        f"round {e.get('round')} ({e.get('duration_s', 0):.1f} s): {e.get('verdict', '?')}: "
        f"{e.get('reached')}/{e.get('hosts')} hosts reached"
    )
    parts = [head]
    if e.get("reasons"):
        parts.append("; ".join(e["reasons"]))
    suspects = e.get("suspects") or []
    if suspects:
        parts.append("suspects " + ", ".join(_suspect(s) for s in suspects[:SHOWN]))
    unreached = e.get("unreached") or []
    if unreached:
        more = len(unreached) - SHOWN
        said = ", ".join(_unreached(u) for u in unreached[:SHOWN])
        parts.append("not reached: " + said + (f" +{more} more" if more > 0 else ""))
    return " · ".join(parts)


def _unreached(u: dict[str, Any]) -> str:
    """``gpu-001 (ssh: refused)``; an error that names its host already stands alone."""
    host, error = str(u["host"]), str(u["error"])
    return error if error.startswith(host) else f"{host} ({error})"


def _suspect(s: dict[str, Any]) -> str:
    jobs = s.get("jobs")
    hurt = f", jobs hurt {' '.join(map(str, jobs[:SHOWN]))}" if jobs else ""
    return f"{s['element']} ({s.get('kind')}, score {s.get('score', 0):.2f}{hurt})"


def _decision(e: dict[str, Any]) -> str:
    what = f"{e.get('action')} " if e.get("action") else ""
    text = f"decision: {e.get('verb')} {what}{e.get('element')}"
    if e.get("why"):
        text += f": {e['why']}"
    if e.get("action_id"):
        text += f" (action {e['action_id']})"
    return text


def _reload(e: dict[str, Any]) -> str:
    what = f"{e.get('what')} {e['path']}" if e.get("path") else str(e.get("what"))
    if e.get("ok") is False:
        return f"reload {what}: failed: {e.get('error')}; kept {e.get('kept')}"
    if e.get("note"):
        return f"reload: {e['note']}"
    changed = (
        {True: ", changed", False: ", unchanged"}.get(bool(e["changed"]), "")
        if "changed" in e
        else ""
    )
    return f"reload {what}: ok{changed}"


def _error(e: dict[str, Any]) -> str:
    return f"error: {e.get('kind')}: {e.get('error')}"


def _stop(e: dict[str, Any]) -> str:
    why = " (signal)" if e.get("signal") else ""
    return f"stop after {e.get('rounds')} rounds{why}"


_SAY: dict[str, Callable[[dict[str, Any]], str]] = {
    "start": _start,
    "round": _round,
    "decision": _decision,
    "reload": _reload,
    "error": _error,
    "stop": _stop,
}


def under_journal(stream: TextIO) -> bool:
    """Is ``stream`` the journal's (systemd sets ``$JOURNAL_STREAM`` to its device:inode)?"""
    want = os.environ.get("JOURNAL_STREAM", "")
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return bool(want) and want == f"{st.st_dev}:{st.st_ino}"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def make_log(fmt: str = "auto", stream: TextIO | None = None) -> Log:
    """The writer of entries in ``fmt`` (one of ``LOG_FORMATS``) to ``stream`` (stderr)."""
    out = stream if stream is not None else sys.stderr
    journal = under_journal(out)
    if fmt == "auto":
        fmt = "human" if journal or _isatty(out) else "json"

    def write(entry: dict[str, Any]) -> None:
        level = level_of(entry)
        now = datetime.now(UTC)
        if fmt == "json":
            stamp = now.isoformat(timespec="milliseconds")
            text = json.dumps({"time": stamp, "level": level, **entry}, separators=(",", ":"))
        else:
            text = f"{level.upper()} {human(entry)}"
            if not journal:  # the journal stamps its own lines
                text = f"{now.strftime('%Y-%m-%dT%H:%M:%SZ')} {text}"
        prefix = f"<{PRIORITY[level]}>" if journal else ""
        print(prefix + text, file=out, flush=True)

    return write
