"""Discovered paths kept between scans, keyed by 5-tuple, so agents trace only what changed.

A path holds as long as its 5-tuple and the routing do. So that tuples survive from one
scan to the next, each agent is asked to bind the ports it had last time (its answering
port and source ports; where one is taken it binds another, whose flows are new). A
known path is not traced again unless it is stale:

- older than ``max_age_s``;
- not whole: a hop the plan asked about is unknown, or the destination never answered;
- its flow's delay signature changed: the lowest round trip of the flow's probes moved
  by more than ``rtt_change`` (a share) and ``rtt_floor_ns``, which a new path does;
- picked for revalidation: the oldest ``revalidate`` share of known flows each scan, so
  a change of TTL-expiry address shows even where delays did not move.

Paths not traced again come back in the scan's collection as they were, marked
``cached``. A source keeps one cache for all its scans (the TUI's, a session's).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from cwctl import settings
from cwctl.records import PathRecord, PathTable
from cwctl.scan.collection import Collection

Flow = tuple[str, str, int]  # (prober, answerer, probe source port)


@dataclass
class PathCache:
    max_age_s: float = settings.PATH_MAX_AGE_S
    revalidate: float = 0.1  # share of known flows traced again each scan, oldest first
    rtt_change: float = 0.2
    rtt_floor_ns: int = 20_000
    paths: PathTable = field(default_factory=PathTable)
    ports: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> port, sports
    rtt_ns: dict[Flow, int] = field(default_factory=dict)  # each flow's lowest round trip
    _stale: set[Flow] = field(default_factory=set)

    def forget(self) -> None:
        """Drop every known path and delay signature (the fabric changed); ports stay."""
        self.paths = PathTable()
        self.rtt_ns = {}
        self._stale = set()

    def requested_ports(self, host: str) -> dict[str, Any]:
        """The ports to ask ``host``'s agent for: what it had last time (may be empty)."""
        return dict(self.ports.get(host, {}))

    def known(
        self,
        now_ns: int,
        addresses: dict[str, list[Rail]],
        *,
        revalidate: bool = True,
    ) -> set[Trace]:
        """Traces (role, tracing host, peer, flow port) whose paths are known, whole,
        fresh and still the same tuples: the agents need not trace them again (less the
        oldest share, traced again to revalidate, unless ``revalidate`` is false)."""
        fresh: dict[Trace, int] = {}
        for path in self.paths:
            flow = _flow(path)
            if flow in self._stale or not _whole(path):
                continue
            if now_ns - path.t_ns > self.max_age_s * 1e9:
                continue
            answering = path.role == "reply"  # the tracer answers; else it probes
            mine = _bound(addresses.get(path.host), path.src, path.sport, answering)
            theirs = _bound(addresses.get(path.peer), path.dst, path.dport, not answering)
            if not (mine and theirs):
                continue
            fresh[_trace(path)] = path.t_ns
        n_again = int(len(fresh) * self.revalidate) if revalidate else 0
        again = sorted(fresh, key=lambda f: fresh[f])[:n_again]
        return set(fresh) - set(again)

    def fill(self, collection: Collection, known: set[Trace]) -> None:
        """Put the known paths into ``collection`` where this scan did not trace them, or
        traced them with less to show and nothing that contradicts them (as cached)."""
        for role, host, peer, port in known:
            path = self._get(role, host, peer, port)
            if path is None:
                continue
            now = self._get(role, host, peer, port, collection.paths)
            if now is None or (_agrees(now, path) and now.known < path.known):
                collection.paths.add(replace(path, cached=True, t_ns=max(path.t_ns, _t(now))))

    def _get(
        self, role: str, host: str, peer: str, port: int, table: PathTable | None = None
    ) -> PathRecord | None:
        table = self.paths if table is None else table
        if role == "probe":
            return table.forward(host, peer, port)
        return table.reverse(peer, host, port)

    def remember(self, collection: Collection) -> None:
        """Keep this scan's ports, new paths and delay signatures; mark changed flows.
        A new trace replaces a known path unless it shows less without contradicting
        it (a rate-limited answer is no news; a different router is)."""
        for host, hello in collection.hello.items():
            port, sports = hello.get("port"), hello.get("sports")
            if isinstance(port, int) and isinstance(sports, list):
                rails = hello.get("rails") or [{"port": port}]
                self.ports[host] = {"port": [r.get("port") for r in rails], "sports": list(sports)}
        for path in collection.paths:
            if path.cached:
                continue
            old = self._get(path.role, path.host, path.peer, path.flow_port)
            if old is None or not _agrees(path, old) or path.known >= old.known:
                self.paths.replace(path)
        self._stale = set()
        for flow, rtt in _flow_rtts(collection).items():
            before = self.rtt_ns.get(flow)
            if before is not None and abs(rtt - before) > max(
                self.rtt_floor_ns, self.rtt_change * before
            ):
                self._stale.add(flow)  # the delay signature moved: trace it again
            self.rtt_ns[flow] = rtt


Trace = tuple[str, str, str, int]  # (role, tracing host, peer, flow port)
Rail = tuple[str, int, list[int]]  # a host's probe address, answering port, source ports


def _bound(rails: list[Rail] | None, address: str, port: int, answering: bool) -> bool:
    """Whether a host still has ``address:port`` bound, as its answering port or as one
    of its source ports: the tuple of an earlier scan is this scan's too."""
    return any(
        a == address and (port == answer if answering else port in sports)
        for a, answer, sports in rails or ()
    )


def _trace(path: PathRecord) -> Trace:
    return (path.role, path.host, path.peer, path.flow_port)


def _flow(path: PathRecord) -> Flow:
    """The probe flow a trace belongs to: (prober, answerer, probe source port)."""
    if path.role == "probe":
        return (path.host, path.peer, path.sport)
    return (path.peer, path.host, path.dport)


def _t(path: PathRecord | None) -> int:
    return 0 if path is None else path.t_ns


def _agrees(a: PathRecord, b: PathRecord) -> bool:
    """No hop both know differs, and neither is longer where both ended complete."""
    if a.complete and b.complete and len(a.hops) != len(b.hops):
        return False
    return all(x is None or y is None or x == y for x, y in zip(a.hops, b.hops, strict=False))


def _whole(path: PathRecord) -> bool:
    """Complete, and every hop it has a slot for is either asked-and-answered or a
    TTL the plan left out (a leaf-spine trace asks only the middle hop)."""
    if not path.complete:
        return False
    if len(path.hops) <= 1:  # within a leaf: no router asked, the check answered
        return True
    if len(path.hops) == 3:  # a leaf-spine path: the spine is the one that matters
        return path.hops[1] is not None
    return all(h is not None for h in path.hops)


def _flow_rtts(collection: Collection) -> dict[Flow, int]:
    """Each probe flow's lowest round trip in this scan (ns), from its complete probes."""
    t = collection.table
    done = t.complete
    if not done.any():
        return {}
    rtt = (t.t4 - t.t1 - (t.t3 - t.t2))[done]
    keys = np.stack([t.src[done], t.dst[done], t.sport[done]], axis=1)
    order = np.lexsort((rtt, keys[:, 2], keys[:, 1], keys[:, 0]))
    keys, rtt = keys[order], rtt[order]
    first = np.ones(len(keys), bool)
    first[1:] = (keys[1:] != keys[:-1]).any(axis=1)
    return {
        (t.hosts[int(s)], t.hosts[int(d)], int(p)): int(r)
        for (s, d, p), r in zip(keys[first], rtt[first], strict=True)
    }
