"""From what the hosts see to the balancing core's input (``balance.py``).

A flow is what a socket table shows (``flowtable.Flow``: the connecting end's host and
port, the peer and its service port) with its measured rate each way. Its options are
its current port and candidate wire ports, each with the spine a trace read for each
direction (``steerports``: the sender traces the forward tuple, the peer the reply's);
a port whose spine is unknown either way is no option, since its load could land
anywhere. Nothing here knows a hash.

Candidate ports come from ``steerports.CANDIDATES`` (above Linux's ephemeral range),
a separate run of them for each connection of a (host, peer, service): two moved
connections of one pair never share a wire port, and none takes a port the kernel hands
out on its own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from cwctl.actions import steerports as sp
from cwctl.actions.balance import Elephant, directed
from cwctl.actions.flowtable import Flow
from cwctl.errors import InputError

Spines = tuple[str | None, str | None]  # (forward, reverse): what the traces read


def flow_id(flow: Flow) -> str:
    """``gpu-001:41234>gpu-005:29500`` (``/udp`` appended for UDP)."""
    tail = "" if flow.proto == "tcp" else f"/{flow.proto}"
    return f"{flow.host}:{flow.port}>{flow.peer}:{flow.peer_port}{tail}"


def candidate_ports(flows: Sequence[Flow], k: int) -> dict[Flow, list[int]]:
    """``k`` candidate wire ports per flow, disjoint within each (host, peer, service)."""
    by_key: dict[tuple[str, str, sp.Service], list[Flow]] = defaultdict(list)
    for f in sorted(set(flows)):
        by_key[(f.host, f.peer, f.service)].append(f)
    pool = list(sp.CANDIDATES)
    out = {}
    for (host, peer, service), group in by_key.items():
        if len(group) * k > len(pool):
            raise InputError(
                f"{host} -> {peer} {service}: {len(group)} connections x {k} candidate "
                f"ports is more than the {len(pool)} candidate ports"
            )
        for i, f in enumerate(group):
            out[f] = pool[i * k : (i + 1) * k]
    return out


def options(
    leaf_a: str, leaf_b: str, fwd_bps: float, rev_bps: float, traced: Mapping[int, Spines]
) -> dict[int, dict[str, float]]:
    """Per port whose spines are known both ways: the load each directed leaf-spine link
    would carry, forward ``leaf_a`` up to its spine and down to ``leaf_b``, back the other
    way."""
    out: dict[int, dict[str, float]] = {}
    for port, (fwd, rev) in traced.items():
        if fwd is None or rev is None:
            continue
        load: dict[str, float] = defaultdict(float)
        for el, bps in (
            (directed(leaf_a, fwd), fwd_bps),
            (directed(fwd, leaf_b), fwd_bps),
            (directed(leaf_b, rev), rev_bps),
            (directed(rev, leaf_a), rev_bps),
        ):
            load[el] += bps
        out[port] = dict(load)
    return out


def elephant(
    flow: Flow, leaf_of: Mapping[str, str], rate: tuple[float, float], traced: Mapping[int, Spines]
) -> Elephant | None:
    """The core's view of one flow (``rate``: bit/s forward, back), or None where its
    current port's path is unknown or it crosses no spine (both ends on one leaf)."""
    a, b = leaf_of.get(flow.host), leaf_of.get(flow.peer)
    if a is None or b is None or a == b:
        return None
    opts = options(a, b, rate[0], rate[1], traced)
    if flow.port not in opts:
        return None
    return Elephant(flow_id(flow), flow.port, opts)


def leaf_groups(uplinks: Mapping[str, Sequence[str]]) -> list[tuple[str, ...]]:
    """The parallel links that should carry equal load: each leaf's uplinks, then the
    links down into each leaf from its spines."""
    ups = [tuple(directed(leaf, s) for s in spines) for leaf, spines in sorted(uplinks.items())]
    downs = [tuple(directed(s, leaf) for s in spines) for leaf, spines in sorted(uplinks.items())]
    return [g for g in ups + downs if len(g) > 1]
