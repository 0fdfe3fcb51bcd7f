"""``cwctl sync check``: is each host's chronyd ready to take cwctl's samples?

Per host, over the scan's transport (SSH, or this machine for ``--local``), argument
lists only: ``chronyc -c -n tracking`` (is chronyd running, what is its time source),
``sources`` and ``sourcestats`` (is the ``CWC`` refclock configured, what does chronyd
think of it), ``test -S`` / ``test -w`` on the socket path (is it there, may the
agent's user write to it). A host is ``ready`` when all of that holds; otherwise the
problems say what to do, including the exact ``refclock SOCK ...`` line to add.

The best time source (``choose_reference``) is read from the same ``tracking``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cwctl.chrony.chronyc import (
    REFID,
    ChronycError,
    ChronySource,
    SourceStats,
    Tracking,
    chronyc_argv,
    parse_sources,
    parse_sourcestats,
    parse_tracking,
    refclock_line,
)
from cwctl.chrony.rules import socket_path
from cwctl.errors import InputError


@dataclass
class HostCheck:
    host: str
    socket: str
    line: str  # the refclock line for this host's socket
    running: bool = False
    tracking: Tracking | None = None
    source: ChronySource | None = None  # the CWC refclock as chronyd lists it
    stats: SourceStats | None = None
    socket_ok: bool = False
    problems: list[str] = field(default_factory=list)
    reference: bool = False  # the reference host: never fed, needs no refclock

    @property
    def ready(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "host": self.host,
            "ready": self.ready,
            "chronyd": "running" if self.running else "not running",
            "refclock": self.source is not None,
            "socket": self.socket,
            "socket_ok": self.socket_ok,
            "refclock_line": self.line,
            "problems": self.problems,
            "reference": self.reference,
        }
        if self.tracking is not None:
            out["tracking"] = _attributes(self.tracking, _TRACKING_KEYS)
        if self.source is not None:
            s = self.source
            out["source"] = {
                "state": s.state_word,
                "selected": s.state == "*",
                "reach": f"{s.reach:o}",
                "poll": s.poll,
                "last_rx_s": s.last_rx_s,
                "offset_s": s.offset_s,
                "measured_offset_s": s.measured_offset_s,
                "error_s": s.error_s,
            }
        if self.stats is not None:
            out["sourcestats"] = _attributes(self.stats, _SOURCESTATS_KEYS)
        return out


# chronyc's tracking and sourcestats fields, as the JSON names them (the attribute names)
_TRACKING_KEYS = (
    "refid",
    "ref_name",
    "stratum",
    "leap",
    "system_time_s",
    "root_distance_s",
    "synchronised",
)
_SOURCESTATS_KEYS = ("samples", "span_s", "offset_s", "std_dev_s", "frequency_ppm")


def _attributes(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in names}


async def check_host(
    runner: Any, host: str, *, socket: str, chronyc_socket: str | None, poll: int
) -> HostCheck:
    """One host's answers (module docstring); never raises for what the host says."""
    out = HostCheck(host=host, socket=socket, line=refclock_line(socket, poll))
    tracking = await runner.run(host, chronyc_argv("tracking", chronyc_socket))
    if not tracking.ok:
        why = tracking.detail() or f"exit status {tracking.rc}"
        out.problems.append(f"chronyd not running or not answering chronyc: {why}")
    else:
        out.running = True
        try:
            out.tracking = parse_tracking(tracking.stdout)
            sources = await runner.run(host, chronyc_argv("sources", chronyc_socket))
            stats = await runner.run(host, chronyc_argv("sourcestats", chronyc_socket))
            out.source = next((s for s in parse_sources(sources.stdout) if s.name == REFID), None)
            out.stats = next((s for s in parse_sourcestats(stats.stdout) if s.name == REFID), None)
        except ChronycError as exc:
            out.problems.append(str(exc))
        if out.source is None and not out.problems:
            out.problems.append(f"no refclock {REFID} in chronyd's sources: add '{out.line}'")
    exists = await runner.run(host, ["test", "-S", socket])
    if not exists.ok:
        if out.source is not None:
            out.problems.append(
                f"chronyd has a {REFID} refclock but no socket at {socket}: "
                f"is its path {socket}? ('{out.line}')"
            )
        elif out.running and not out.problems:
            pass  # the missing refclock already says what to add
        elif not out.running:
            out.problems.append(f"no socket at {socket}")
    else:
        writable = await runner.run(host, ["test", "-w", socket])
        out.socket_ok = writable.ok
        if not writable.ok:
            out.problems.append(
                f"{socket} is not writable by the SSH user: run the agent as root or chronyd's user"
            )
    return out


async def check_hosts(
    runner: Any,
    hosts: Sequence[str],
    *,
    socket_template: str,
    chronyc_socket: str | None,
    poll: int,
) -> list[HostCheck]:
    """Every host at once (the runner bounds SSH handshakes)."""
    return list(
        await asyncio.gather(
            *(
                check_host(
                    runner,
                    h,
                    socket=socket_path(socket_template, h),
                    chronyc_socket=socket_path(chronyc_socket, h) if chronyc_socket else None,
                    poll=poll,
                )
                for h in hosts
            )
        )
    )


def choose_reference(checks: Sequence[HostCheck]) -> tuple[str, str]:
    """The host with the best time source, and why: a synchronised chronyd (stratum
    1-15, leap status not "Not synchronised") that does not follow cwctl's own refclock,
    with the smallest root distance (half the root delay plus the root dispersion: the
    bound chrony itself puts on how far off true time it may be); then the lower
    stratum, then the name."""
    usable = [
        c
        for c in checks
        if c.tracking is not None and c.tracking.synchronised and c.tracking.ref_name != REFID
    ]
    if not usable:
        raise InputError(
            "no host has a synchronised chronyd to serve as the reference "
            "(cwctl sync check shows each one); name one with --reference"
        )
    best = min(
        usable,
        key=lambda c: (c.tracking.root_distance_s, c.tracking.stratum, c.host),  # type: ignore[union-attr]
    )
    t = best.tracking
    assert t is not None
    why = (
        f"best time source: stratum {t.stratum} via {t.ref_name or t.refid}, root distance "
        f"{t.root_distance_s * 1e6:.1f} µs ({len(usable)} of {len(checks)} hosts synchronised)"
    )
    return best.host, why


def mark_reference(checks: Sequence[HostCheck], name: str) -> None:
    """The reference is never fed: what it lacks for cwctl's refclock is no problem."""
    for c in checks:
        if c.host == name:
            c.reference = True
            c.problems = []
