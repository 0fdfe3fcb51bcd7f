"""One feeder per fed host: the agent in ``chrony`` mode, kept running between scans.

A feeder is started through the same transport and bootstrap as a scan's agent (the
same bundle; ``cwctl/probe/chronysock.py`` does the work on the host). Each round it
gets the host's new estimate, or a ``withdraw`` when the host stops qualifying; in
between it writes one sample every ``period_s``. Its ``sample`` records come back and
are counted per round, so the report says what each host was really fed. Closing a
feeder closes its stdin: the agent exits, and chronyd notices its refclock went quiet.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cwctl import settings
from cwctl.chrony.rules import FeedDecision
from cwctl.probe.bootstrap import agent_payload
from cwctl.probe.chronysock import LEASE_SLACK_S
from cwctl.scan.collection import HostInfo
from cwctl.transport.hostrun import AgentSession, HostFailure, last_line
from cwctl.transport.plan import HELLO_TIMEOUT_S

# A feeder's hard lifetime from its start until its params arrive (cwctl gives up on it
# after HELLO_TIMEOUT_S); from then on its lease, re-armed by every control line
# (``chronysock.arm_lease``). Every feeder launcher passes it (``fleet.fleet_for``).
BOOT_LIFETIME_S = HELLO_TIMEOUT_S + LEASE_SLACK_S


@dataclass
class FeederSettings:
    period_s: float = settings.SYNC_SAMPLE_PERIOD_S  # one sample this often
    hold_s: float = 60.0  # an estimate is fed this long after its t_ref, no longer
    idle_exit_s: float = 120.0  # the agent exits when cwctl says nothing for this long

    def params(self, host: str, socket: str) -> dict[str, Any]:
        return {
            "mode": "chrony",
            "host": host,
            "socket": socket,
            "period_s": self.period_s,
            "hold_s": self.hold_s,
            "idle_exit_s": self.idle_exit_s,
        }


@dataclass
class RoundTally:
    samples: int = 0
    last_offset_s: float | None = None


@dataclass
class HostFeeder:
    """One host's feeder session and what it reported."""

    host: str
    session: AgentSession
    hello: dict[str, Any] | None = None
    tallies: dict[int, RoundTally] = field(default_factory=dict)
    failed: int = 0
    last_error: str | None = None
    summary: dict[str, Any] | None = None
    reader: asyncio.Task[None] | None = None
    _partial: bytes = b""
    _hello_seen: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def alive(self) -> bool:
        return self.reader is not None and not self.reader.done()

    async def send(self, msg: dict[str, Any]) -> None:
        await self.session.send(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    def _handle(self, line: bytes) -> None:
        try:
            rec = json.loads(line)
        except ValueError:
            self.last_error = f"unreadable line from the feeder: {line[:80]!r}"
            return
        kind = rec.get("type") if isinstance(rec, dict) else None
        if kind == "sample":
            tally = self.tallies.setdefault(int(rec.get("round") or 0), RoundTally())
            tally.samples += 1
            tally.last_offset_s = rec.get("offset_s")
        elif kind == "hello":
            self.hello = rec
            self._hello_seen.set()
        elif kind == "error":
            self.failed += 1
            self.last_error = str(rec.get("message"))
            if rec.get("fatal"):
                self._hello_seen.set()
        elif kind == "summary":
            self.summary = rec

    async def _read(self) -> None:
        try:
            while chunk := await self.session.read():
                *lines, self._partial = (self._partial + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        self._handle(line)
        except (OSError, ConnectionError) as exc:
            self.last_error = f"session lost: {exc}"
        finally:
            self._hello_seen.set()


Launcher = Callable[[HostInfo], Awaitable[AgentSession]]


async def open_feeder(
    launch: Launcher, info: HostInfo, params: dict[str, Any], timeout_s: float = HELLO_TIMEOUT_S
) -> HostFeeder:
    """Start the agent in chrony mode on ``info``; raises ``HostFailure`` with the reason."""
    session = await launch(info)
    feeder = HostFeeder(host=info.name, session=session)
    feeder.reader = asyncio.create_task(feeder._read())
    try:
        await session.send(agent_payload(params))
        await asyncio.wait_for(feeder._hello_seen.wait(), timeout_s)
    except TimeoutError:
        feeder.last_error = f"no hello from the feeder within {timeout_s:g} s"
    except (OSError, ConnectionError) as exc:
        feeder.last_error = f"session failed: {exc}"
    if feeder.hello is None:
        why = feeder.last_error
        await close_feeder(feeder)
        if why is None:
            with contextlib.suppress(Exception):
                _code, _sig, stderr = await asyncio.wait_for(session.finish(), 2.0)
                why = last_line(stderr) or None
        raise HostFailure("error", f"{info.name}: feeder: {why or 'ended before its hello'}")
    return feeder


async def close_feeder(feeder: HostFeeder) -> None:
    """Close stdin (the agent exits on EOF), then wait for its last records."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(feeder.session.close(), 5.0)
    if feeder.reader is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(feeder.reader, 5.0)


class Feeders:
    """The feeders of one ``cwctl sync --apply``: started when a host first qualifies,
    told each round's estimate (or to stop), closed at the end."""

    def __init__(
        self,
        launch: Launcher,
        hosts: Sequence[HostInfo],
        settings: FeederSettings,
    ) -> None:
        self.launch = launch
        self.info = {h.name: h for h in hosts}
        self.settings = settings
        self.live: dict[str, HostFeeder] = {}

    async def feed(self, decisions: Sequence[FeedDecision], round_no: int) -> None:
        """Send every fed host its estimate (starting feeders as needed); withdraw the
        estimate of a host that no longer qualifies. A feeder that cannot start turns
        its decision into ``failed``, with the reason."""

        async def one(d: FeedDecision) -> None:
            feeder = self.live.get(d.host)
            if d.action != "fed":
                if feeder is not None and feeder.alive:
                    with contextlib.suppress(OSError, ConnectionError):
                        await feeder.send({"type": "withdraw", "reason": d.reason})
                return
            if feeder is None or not feeder.alive:
                if feeder is not None:
                    await close_feeder(feeder)
                    del self.live[d.host]
                assert d.socket is not None
                try:
                    feeder = await open_feeder(
                        self.launch, self.info[d.host], self.settings.params(d.host, d.socket)
                    )
                except HostFailure as exc:
                    d.action, d.error = "failed", exc.reason
                    return
                self.live[d.host] = feeder
            try:
                await feeder.send(d.estimate(round_no))
            except (OSError, ConnectionError) as exc:
                d.action, d.error = "failed", f"{d.host}: cannot reach the feeder: {exc}"

        await asyncio.gather(*(one(d) for d in decisions))

    async def keepalive(self) -> None:
        """A line to every feeder, so none exits as idle while cwctl runs."""
        for feeder in list(self.live.values()):
            if feeder.alive:
                with contextlib.suppress(OSError, ConnectionError):
                    await feeder.send({"type": "keepalive"})

    def tally(self, decisions: Sequence[FeedDecision], round_no: int) -> None:
        """Fill in what each fed host's feeder sent for ``round_no``."""
        for d in decisions:
            feeder = self.live.get(d.host)
            if d.action != "fed" or feeder is None:
                continue
            t = feeder.tallies.get(round_no, RoundTally())
            d.samples, d.last_offset_s = t.samples, t.last_offset_s
            if feeder.last_error and t.samples == 0:
                d.action, d.error = "failed", f"{d.host}: {feeder.last_error}"
            elif feeder.last_error:
                d.error = feeder.last_error

    async def close(self) -> None:
        await asyncio.gather(*(close_feeder(f) for f in self.live.values()))
