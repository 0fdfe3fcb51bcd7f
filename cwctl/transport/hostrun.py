"""One host's agent during a scan, and what the scan gathers from all of them.

``AgentSession`` is what a transport hands the orchestrator (``base.run_scan``) for one
host: bytes in, bytes out, an exit. ``HostRun`` follows one agent from launch to exit and
turns its stdout lines into records; ``Collector`` holds what every host's records add
up to (the probe table, path and GPU records, counts for the progress line).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from cwctl.errors import RecordError
from cwctl.records import PathTable, ProbeTableBuilder, decode_path, decode_probes, parse_line
from cwctl.scan.collection import HostInfo, HostStatus, HostStatusName
from cwctl.scan.request import Progress


class HostFailure(Exception):
    """Reaching or running the agent on one host failed; the scan goes on without it."""

    def __init__(self, status: HostStatusName, reason: str) -> None:
        super().__init__(reason)
        self.status: HostStatusName = status
        self.reason = reason


class AgentSession(Protocol):
    """A running bootstrap on one host: its stdin, stdout, stderr and exit."""

    async def send(self, data: bytes) -> None: ...

    async def read(self) -> bytes:
        """Some stdout bytes; ``b""`` at EOF."""
        ...

    async def finish(self) -> tuple[int | None, str | None, str]:
        """Wait for exit: (exit status, signal name, stderr tail)."""
        ...

    async def close(self) -> None:
        """End the session now: close stdin, stop the agent, release everything."""
        ...


Launcher = Callable[[HostInfo], Awaitable[AgentSession]]

EndStep = tuple[signal.Signals | None, float]
STDERR_KEEP = 4096  # bytes of an agent's stderr kept: its last words explain an exit


async def read_tail(
    read: Callable[[int], Awaitable[bytes]],
    *,
    keep: int = STDERR_KEEP,
    stop_on: tuple[type[BaseException], ...] = (),
) -> str:
    """Read a stream to its end (or to one of ``stop_on``), keeping the last ``keep``
    bytes, decoded."""
    tail = b""
    with contextlib.suppress(*stop_on):
        while chunk := await read(4096):
            tail = (tail + chunk)[-keep:]
    return tail.decode("utf-8", "replace")


async def end_process(proc: asyncio.subprocess.Process, steps: Sequence[EndStep]) -> None:
    """End a child process: close its stdin (an agent exits on EOF), then for each
    ``(signal, wait_s)`` step send the signal (``None``: send nothing) and wait up to
    ``wait_s`` for the exit; stops at the first step that finds it gone."""
    if proc.stdin is not None:
        with contextlib.suppress(Exception):
            proc.stdin.close()
    for sig, wait_s in steps:
        if proc.returncode is not None:
            break
        if sig is not None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), wait_s)


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


class HostRun:
    """One host's agent, from launch to exit: its session, line count and records."""

    def __init__(self, info: HostInfo, collector: Collector) -> None:
        self.info = info
        self.name = info.name
        self.collector = collector
        self.session: AgentSession | None = None
        self.hello: dict[str, Any] | None = None
        self.summary: dict[str, Any] | None = None
        self.status = HostStatus()
        self.line_no = 0
        self._partial = b""
        self.fatal: str | None = None

    def fail(self, status: HostStatusName, reason: str) -> None:
        """Mark the host failed; the first reason is the one kept."""
        if self.status.status == "ok":
            self.status = HostStatus(status, reason)

    async def read_lines(self) -> list[bytes] | None:
        """The next whole stdout lines (None at EOF, after any last partial line)."""
        assert self.session is not None
        while True:
            chunk = await self.session.read()
            self.collector.bytes += len(chunk)
            if not chunk:
                if self._partial:
                    last, self._partial = self._partial, b""
                    return [last]
                return None
            *lines, self._partial = (self._partial + chunk).split(b"\n")
            if lines:
                return lines

    def handle(self, line: bytes) -> None:
        self.line_no += 1
        if not line.strip():
            return
        where = f"{self.name} line {self.line_no}"
        try:
            rec = parse_line(line, where=where)
            kind = rec["type"]
            if kind == "probes":
                batch = decode_probes(rec, where=where)
                if batch.src_names - {self.name}:
                    others = sorted(batch.src_names - {self.name})
                    raise RecordError(f"{where}: probes from {others[0]!r}, not this host")
                self.collector.records += self.collector.builder.add_batch(batch)
            elif kind == "probe":
                if rec.get("src") != self.name:
                    raise RecordError(f"{where}: probe from {rec.get('src')!r}, not this host")
                self.collector.builder.add_record(rec, where=where)
                self.collector.records += 1
            elif kind == "path":
                path = decode_path(rec, where=where)
                if path.host != self.name:
                    raise RecordError(f"{where}: path traced by {path.host!r}, not this host")
                self.collector.paths.add(path)
            elif kind == "hello":
                self.hello = rec
            elif kind == "summary":
                self.summary = rec
            elif kind == "gpu":
                self.collector.gpu.setdefault(self.name, []).append(rec)
            elif kind == "error" and rec.get("fatal"):
                self.fatal = f"{self.name}: agent: {rec.get('message')}"
                self.fail("error", self.fatal)
        except RecordError as exc:
            self.fail("error", f"{exc} (record ignored)")


class Collector:
    """What the scan accumulates across hosts."""

    def __init__(self, hosts: Sequence[str], progress: Progress | None) -> None:
        self.builder = ProbeTableBuilder(hosts)
        self.gpu: dict[str, list[dict[str, Any]]] = {}
        self.paths = PathTable()
        self.records = 0
        self.bytes = 0  # agents' stdout, all hosts: what the transport carried home
        self.progress = progress
        self._last_report = 0.0

    def report(self, event: str, force: bool = False, **fields: Any) -> None:
        if self.progress is None:
            return
        if event == "records":
            now = time.monotonic()
            if not force and now - self._last_report < 0.5:
                return
            self._last_report = now
            fields = {"records": self.records, **fields}
        self.progress(event, fields)
