"""A scan's progress in words: ``12/64 hosts · 48,000 probes · 1.4 s left``.

Fed by the scan's ``progress(event, fields)`` callback (``cwctl.scan.request.PROGRESS_EVENTS``):
``connected`` (one per host), ``started`` (hosts, of, start_in_s, duration_s),
``records`` (records so far), ``done`` (ok, of), ``solved`` (s). Between ``done`` and
``solved`` the words say how long the solve has run (``solving 12 s``). The CLI's live
line on stderr (``cwctl.cli.progress``) and the TUI's first frames say the same words.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class ScanProgress:
    """What a scan has done so far, from its progress events."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.connected = 0
        self.hosts: int | None = None
        self.records = 0
        self.ends_at: float | None = None
        self.done = False
        self.solving_since: float | None = None
        self.solved = False

    def feed(self, event: str, fields: dict[str, Any]) -> None:
        if event == "connected":
            self.connected += 1
        elif event == "started":
            self.hosts = int(fields.get("of", fields.get("hosts", 0)))
            self.connected = int(fields.get("hosts", self.connected))
            duration = fields.get("duration_s")
            if isinstance(duration, int | float):
                self.ends_at = self.clock() + float(fields.get("start_in_s", 0.0)) + duration
        elif event == "records":
            self.records = int(fields.get("records", self.records))
        elif event == "done":
            self.done = True
            self.solving_since = self.clock()
        elif event == "solved":
            self.solved = True

    def words(self) -> str:
        parts = []
        if self.hosts is not None:
            parts.append(f"{self.connected}/{self.hosts} hosts")
        elif self.connected:
            parts.append(f"{self.connected} hosts connected")
        else:
            parts.append("connecting")
        if self.records:
            parts.append(f"{self.records:,} probes")
        if self.done and self.solving_since is not None:
            parts.append(f"solving {self.clock() - self.solving_since:.0f} s")
        elif self.done:
            parts.append("solving")
        elif self.ends_at is not None:
            left = self.ends_at - self.clock()
            parts.append(f"{left:.1f} s left" if left > 0 else "collecting")
        return " · ".join(parts)
