"""The journal: one JSON object per line, appended, never rewritten.

``$CWCTL_STATE_DIR/journal.jsonl`` (``state.state_dir``). Each append takes an exclusive
``fcntl.flock`` on the file, writes one whole line and ``fsync``s it before the lock is
released, so concurrent cwctl processes never interleave and a crash loses at most the
line being written. Readers take a shared lock. A line that does not parse (a torn
write from a crash) is skipped and reported, never fatal.

Entry (schema ``cwctl.journal/1``)::

    {"schema": "cwctl.journal/1", "id": "<plan id>", "time": "...Z",
     "event": "apply" | "rollback", "status": "applied" | "failed",
     "plan": {...ActionPlan.to_json()...}, "steps": [{"index", "status", "rc", "detail"}],
     "rollback_of": "<id>" (rollback only), "verify": {...} (when --verify ran)}

``ActionLock`` serialises actions: one apply or rollback at a time per state directory
(so two rollbacks of the same entry cannot both run).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cwctl.actions.state import state_dir
from cwctl.errors import CwctlError, InputError

JOURNAL_SCHEMA = "cwctl.journal/1"
JOURNAL_FILE = "journal.jsonl"
LOCK_FILE = "action.lock"


@dataclass
class JournalRead:
    entries: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "journal.jsonl:LINE: why"


class Journal:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or state_dir()
        self.path = self.directory / JOURNAL_FILE

    def append(self, entry: dict[str, Any]) -> None:
        entry = {"schema": JOURNAL_SCHEMA, **entry}
        line = (json.dumps(entry, sort_keys=True, separators=(",", ":")) + "\n").encode()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise InputError(f"cannot open the journal {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)  # closing releases the lock

    def read(self) -> JournalRead:
        out = JournalRead()
        try:
            f = self.path.open("rb")
        except FileNotFoundError:
            return out
        except OSError as exc:
            raise InputError(f"cannot read the journal {self.path}: {exc.strerror}") from None
        with f:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)
            data = f.read()
        for n, raw in enumerate(data.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
                if not isinstance(entry, dict) or "id" not in entry or "event" not in entry:
                    raise ValueError("not a journal entry")
            except (ValueError, UnicodeDecodeError) as exc:
                out.skipped.append(f"{self.path}:{n}: skipped, unreadable ({exc})")
                continue
            out.entries.append(entry)
        return out

    # --- questions rollback asks ----------------------------------------------------
    def find(self, action_id: str | None) -> dict[str, Any]:
        """The apply entry ``action_id`` (the latest apply when None), refusing what cannot
        be rolled back: a rollback, a failed apply, one already rolled back."""
        entries = self.read().entries
        applies = [e for e in entries if e.get("event") == "apply"]
        if action_id is None:
            if not applies:
                raise InputError(f"nothing to roll back: the journal {self.path} has no actions")
            entry = applies[-1]
        else:
            matches = [
                e
                for e in entries
                if e.get("id") == action_id and e.get("event") in ("apply", "rollback")
            ]
            if not matches:
                raise InputError(f"no journal entry {action_id!r} in {self.path} (cwctl journal)")
            entry = matches[-1]
            if entry.get("event") == "rollback":
                raise InputError(
                    f"{action_id} is itself a rollback (of {entry.get('rollback_of')}); "
                    "to redo that action, plan it again"
                )
        eid = entry["id"]
        if entry.get("status") != "applied":
            raise InputError(
                f"{eid} did not apply (status {entry.get('status')}): the steps that ran "
                "were rolled back when it failed; nothing to undo (cwctl journal lists "
                "the others)"
            )
        done = [
            e
            for e in entries
            if e.get("event") == "rollback"
            and e.get("rollback_of") == eid
            and e.get("status") == "applied"
        ]
        if done:
            raise InputError(
                f"{eid} was already rolled back at {done[-1].get('time')} by {done[-1]['id']}; "
                "refusing to roll it back twice"
            )
        return entry


class ActionLock:
    """One action at a time per state directory (``flock`` on ``action.lock``)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.path = (directory or state_dir()) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> ActionLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise InputError(
                f"cannot take the action lock {self.path}: {exc.strerror} (set CWCTL_STATE_DIR)"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise CwctlError(
                f"another cwctl action is running (pid {holder}, lock {self.path}); "
                "wait for it to finish"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)
            self._fd = None


def iter_rows(entries: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One summary row per entry, for ``cwctl journal``; ``rolled_back_by`` filled in."""
    undone = {
        e.get("rollback_of"): e["id"]
        for e in entries
        if e.get("event") == "rollback" and e.get("status") == "applied"
    }
    verified = {e["id"]: e.get("status") for e in entries if e.get("event") == "verify"}
    for e in entries:
        if e.get("event") == "verify":
            continue
        plan = e.get("plan", {})
        steps = e.get("steps", [])
        yield {
            "id": e["id"],
            "time": e.get("time"),
            "event": e.get("event"),
            "kind": plan.get("kind"),
            "element": plan.get("element"),
            "status": e.get("status"),
            "steps_ok": sum(1 for s in steps if s.get("status") == "ok"),
            "steps": len(plan.get("steps", [])),
            "where": plan.get("context", {}).get("source"),
            "rollback_of": e.get("rollback_of"),
            "rolled_back_by": undone.get(e["id"]),
            "verify": verified.get(e["id"]),
        }
