"""What a scan brings home, before any solving: the input of the analysis pipeline.

Every transport (ssh, local, sim) and ``--replay`` produce a ``Collection``; the solver
and telemetry read only this, never the transport, which is what makes the simulator
an honest test of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from cwctl.fabric.topology import Topology
from cwctl.records import PathTable, ProbeTable

HostStatusName = Literal["ok", "unreachable", "error"]


@dataclass(frozen=True)
class HostInfo:
    """A host taking part in a scan, as the inventory (or simulator) describes it."""

    name: str
    address: str
    leaf: str | None = None
    nics: tuple[str, ...] = ()


@dataclass
class HostStatus:
    """How reaching a host went: ``ok``, ``unreachable`` (no session) or ``error``."""

    status: HostStatusName = "ok"
    error: str | None = None


@dataclass(repr=False)
class Collection:
    source: str  # "ssh" | "local" | "sim" | "replay:<original source>"
    hosts: list[HostInfo]
    table: ProbeTable
    duration_s: float
    status: dict[str, HostStatus] = field(default_factory=dict)
    topology: Topology | None = None
    hello: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent's hello per host
    gpu: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # gpu records per host
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)  # agent summary per host
    peers: dict[str, list[str]] = field(default_factory=dict)  # the peer assignment probed
    truth: dict[str, Any] | None = None  # simulator only: the scan JSON's "truth" object
    params: dict[str, Any] = field(default_factory=dict)  # rate, gap, ports, seed, ...
    paths: PathTable = field(default_factory=PathTable)  # discovered paths (path records)
    # what telemetry/consistency.py found wrong in the records (to_json of each); None:
    # not checked yet
    consistency: list[dict[str, Any]] | None = None
    captured_ns: int | None = None  # a replay: when its record file was written

    @property
    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def __repr__(self) -> str:
        """A line, not the records: asyncio's runner formats the repr of its main
        task's result as it puts SIGINT back (CPython 3.11), and the whole repr of a
        10 000-host collection is 70 MB and 0.8 s, twice."""
        return (
            f"Collection(source={self.source!r}, hosts={len(self.hosts)}, "
            f"rows={len(self.table)}, paths={len(self.paths)}, duration_s={self.duration_s})"
        )
