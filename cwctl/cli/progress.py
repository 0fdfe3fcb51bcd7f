"""The live progress line on stderr: hosts connected, probes, seconds left.

Drawn in place (carriage return, erase to the end of the line) only when stderr is a
terminal, at most ten times a second; while the clocks are solved (after the probing,
seconds at a thousand hosts) it ticks once a second (``solving 12 s``), and it is erased
when the scan is solved, so the report that follows starts on a clean line. Off with
``--quiet`` and whenever stderr is not a terminal; ``--verbose`` instead logs one line
per event (for logs and CI).

Fed by the scan's ``progress(event, fields)`` callback, counted and worded by
``cwctl.report.progress.ScanProgress`` (the TUI's first frames say the same).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TextIO

from cwctl.report.progress import ScanProgress

CLEAR = "\r\x1b[K"
TICK_S = 1.0  # the solve's elapsed seconds, redrawn


class InPlaceLine:
    """A line on ``stream`` drawn over itself (carriage return, erase), and erased."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = False

    def show(self, text: str) -> None:
        self.stream.write(CLEAR + text)
        self.stream.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            self.stream.write(CLEAR)
            self.stream.flush()
            self.shown = False


class ProgressLine(InPlaceLine, ScanProgress):
    """One line, redrawn in place: ``cwctl: scan: 12/64 hosts · 48,000 probes · 1.4 s left``."""

    def __init__(
        self,
        stream: TextIO,
        *,
        label: str = "scan",
        clock: Callable[[], float] = time.monotonic,
        min_interval_s: float = 0.1,
    ) -> None:
        InPlaceLine.__init__(self, stream)
        ScanProgress.__init__(self, clock=clock)
        self.label = label
        self.min_interval_s = min_interval_s
        self._drawn_at = -1e9
        self._ticker: asyncio.TimerHandle | None = None

    def text(self) -> str:
        return f"cwctl: {self.label}: {self.words()}"

    def __call__(self, event: str, fields: dict[str, Any]) -> None:
        self.feed(event, fields)
        if event == "solved":
            self.clear()
            return
        self.draw(force=event in ("started", "done"))
        if event == "done":
            self._tick_later()

    def _tick_later(self) -> None:
        """Redraw in a second while solving, on the scan's event loop (free: the solve
        runs on a thread); called off a loop, the line waits for the next event."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._ticker = loop.call_later(TICK_S, self._tick)

    def _tick(self) -> None:
        self._ticker = None
        if self.shown and self.done and not self.solved:
            self.show(self.text())
            self._tick_later()

    def clear(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        super().clear()

    def draw(self, *, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._drawn_at < self.min_interval_s:
            return
        self._drawn_at = now
        self.show(self.text())


def event_logger(stream: TextIO) -> Callable[[str, dict[str, Any]], None]:
    """``--verbose``: one plain line per event."""

    def log(event: str, fields: dict[str, Any]) -> None:
        detail = " ".join(f"{k}={v}" for k, v in fields.items())
        stream.write(f"cwctl: {event} {detail}".rstrip() + "\n")
        stream.flush()

    return log


def progress_for(
    stream: TextIO, *, quiet: bool, verbose: bool, label: str = "scan"
) -> Callable[[str, dict[str, Any]], None] | None:
    """The progress callback a command should pass: a live line on a terminal, event
    lines with --verbose, nothing with --quiet or into a pipe or file."""
    if quiet:
        return None
    if verbose:
        return event_logger(stream)
    if stream.isatty():
        return ProgressLine(stream, label=label)
    return None


class StepLine(InPlaceLine):
    """An action's steps as they start, in place: ``cwctl: apply: step 2 on leaf2:
    running (ECMP weight of spine3 1 -> 0)``. ``clear()`` before the next message."""

    def __init__(self, stream: TextIO, *, width: int = 100) -> None:
        super().__init__(stream)
        self.width = width

    def __call__(self, index: int, step: Any, what: str) -> None:
        text = f"cwctl: apply: step {index + 1} on {step.host}: {what} ({step.description})"
        if len(text) > self.width:
            text = text[: self.width - 1] + "…"
        self.show(text)


def step_line_for(stream: TextIO, *, quiet: bool) -> StepLine | None:
    """The live step line when ``stream`` is a terminal and not --quiet; else None (the
    steps are listed when they are done either way)."""
    if quiet or not stream.isatty():
        return None
    return StepLine(stream)
