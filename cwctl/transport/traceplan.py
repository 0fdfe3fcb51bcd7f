"""The operator's side of path discovery: what each agent traces, and how fast.

An agent traces every flow it probes with and every flow it answers (``cwctl/probe/
trace.py``), unless the flow's path is already known. Routers answer TTL expiry at a
limited rate (Linux: ``net.ipv4.icmp_ratelimit`` = 1000 ms per destination, a burst of
six), so the plan asks for as few answers as the topology allows:

- two hosts on one leaf: no choice on the way; only the completion check (a trace
  packet with TTL 2 that the far agent acknowledges: no router is asked anything);
- two hosts on different leaves of a leaf-spine fabric: only TTL 2 (the spine, the one
  choice) and the completion check at TTL 4;
- without a topology: every TTL up to ``max_ttl`` (the far agent acknowledges the TTLs
  that reach it, so routers are asked only for the hops that exist).

The pace: the routers that can answer at the choice TTL (the leaf's uplinks) each
answer ``rate_per_router`` per second after a first burst, so that is what one agent
asks for; when many agents trace at once, each asks for its share of a router's
switch-wide rate and burst, and starts at a random phase of its interval. A fabric
with the limit off (``icmp_ratelimit = 0``) can be traced as fast as
``rate_per_router`` is set.
"""

from __future__ import annotations

from collections.abc import Collection as Sized
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cwctl.fabric.topology import Topology


@dataclass(frozen=True)
class TraceSettings:
    rate_per_router: float = 1.0  # ICMP answers a router gives one destination per second
    burst: int = 6  # answers it gives at once first (the kernel's XRLIM_BURST_FACTOR)
    timeout_s: float = 1.0  # a trace packet unanswered this long is tried again
    tries: int = 3  # then its hop is recorded as unknown (null)
    max_ttl: int = 8  # TTLs tried where the topology says nothing
    router_per_s: float = 1000.0  # ICMP a router sends in all (net.ipv4.icmp_msgs_per_sec)
    router_burst: int = 50  # and at once (net.ipv4.icmp_msgs_burst)

    @classmethod
    def for_ratelimit(cls, icmp_ratelimit_ms: int) -> TraceSettings:
        """The pace a switch with this ``net.ipv4.icmp_ratelimit`` allows (0: no limit,
        then a gentle 500 a second, 50 at once)."""
        if icmp_ratelimit_ms <= 0:
            return cls(rate_per_router=UNLIMITED_RATE, burst=50)
        return cls(rate_per_router=1000.0 / icmp_ratelimit_ms)


UNLIMITED_RATE = 500.0  # trace packets per second per router where switches do not limit


def peer_hint(topology: Topology | None, host: str, peer: str) -> dict[str, Any] | None:
    """The TTLs worth asking about between two hosts (None: trace every TTL)."""
    if topology is None:
        return None
    a, b = topology.leaf_of.get(host), topology.leaf_of.get(peer)
    if a is None or b is None:
        return None
    if a == b:
        return {"hops": 1, "ttls": []}
    if topology.uplinks.get(a) and topology.uplinks.get(b):
        return {"hops": 3, "ttls": [2]}
    return None


def trace_plan(
    host: str,
    targets: Iterable[str],
    probed_by: Mapping[str, Sized[int]],
    topology: Topology | None,
    settings: TraceSettings,
    known: Iterable[tuple[str, str, int]] = (),
    tracers: int = 1,
) -> dict[str, Any]:
    """The ``trace`` entry of one agent's start message (docs/paths.md).

    ``probed_by`` maps each host that probes ``host`` to its source ports (the reply
    tuples ``host`` traces); ``known`` lists (role, peer, port) flows not to trace again.
    ``tracers`` hosts trace at once: a router's answers to all of them together are
    capped too (``router_per_s``), so each gets its share when that is the tighter limit.
    """
    peers = sorted(set(targets) | set(probed_by))
    hints = {p: h for p in peers if (h := peer_hint(topology, host, p)) is not None}
    leaf = topology.leaf_of.get(host) if topology is not None else None
    routers = max(1, len(topology.uplinks.get(leaf, ()))) if topology and leaf else 1
    per_router = min(settings.rate_per_router, settings.router_per_s / max(1, tracers))
    # the first burst too is a share of what a router answers at once: thousands of
    # agents starting together would otherwise spend every router's bucket in the
    # first milliseconds and be refused for the rest (each agent then starts its paced
    # traces at a random phase of its interval, probe/trace.py)
    per_router_burst = min(settings.burst, settings.router_burst // max(1, tracers))
    return {
        "rate": per_router * routers,
        "burst": max(1, per_router_burst * routers),
        "timeout_s": settings.timeout_s,
        "tries": settings.tries,
        "max_ttl": settings.max_ttl,
        "peers": hints,
        "probed_by": {p: sorted(ports) for p, ports in probed_by.items()},
        "known": [list(k) for k in known],
    }


def probers_of(peers: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Who probes each host, from a peer assignment (who probes whom)."""
    out: dict[str, list[str]] = {}
    for src, dsts in peers.items():
        for dst in dsts:
            out.setdefault(dst, []).append(src)
    return out
