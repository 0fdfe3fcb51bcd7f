"""The load each directed leaf uplink and spine downlink carries, from what the hosts see.

A flow's rate comes from its own socket: each host's ``ss -ti`` read twice, ``interval``
seconds apart, in one SSH session (``read_together``); the delta of ``bytes_acked``
(what this end sent) and ``bytes_received`` (what it got) over the interval measured by
the host's own clock between the two reads. A flow's path comes from the port its wire
5-tuple carries (its socket's port, or the one a cwctl translation table on the host
rewrites it to: ``nft list ruleset``), traced both ways as steering traces any port
(``steer.trace_answered``): the sender's leaf picks the spine of the data, the peer's
leaf the spine of the replies. Nothing here guesses a hash.

Directed elements are named ``leaf1>spine2`` (leaf1's uplink to spine2, up) and
``spine2>leaf2`` (spine2's downlink to leaf2). A flow ``a -> b`` whose data goes up
``spine`` and whose replies come back over ``back`` puts its forward rate on
``leaf(a)>spine`` and ``spine>leaf(b)``, its reverse rate on ``leaf(b)>back`` and
``back>leaf(a)``. The *groups* whose members should carry near-equal load are each
leaf's uplinks and each leaf's downlinks (the spines' links into it).

Beside the load, each link's queueing as the flows through it see it: the median over
those flows of their socket's smoothed RTT minus its minimum RTT (``rtt`` and ``minrtt``
in ``ss -ti``). A flow's own packets queue where it is slow, so this is what the
collision costs it, measured without a probe.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cwctl.actions import elephants, steer
from cwctl.actions.balance import group_loads
from cwctl.actions.flowtable import (
    ADDRESSES_ARGV,
    Flow,
    fabric_devices,
    find_flows,
    parse_sockets,
)
from cwctl.actions.runners import ReadFailed, Runner, read_together
from cwctl.errors import InputError

# every TCP and UDP socket with TCP's counters on the line after each
SOCKETS_INFO_ARGV = ("ss", "-H", "-n", "-a", "-t", "-u", "-i")
CLOCK_ARGV = ("date", "+%s.%N")  # the host's own clock around the interval
RULESET_ARGV = ("nft", "list", "ruleset")  # the translations in place (cwctl's tables)
INTERVAL_S = 2.0  # seconds between the two socket reads (the rates' window)
MAX_INTERVAL_S = 60.0
ELEPHANT_BPS = 1e6  # a flow this fast (either way) is an elephant; slower ones are mice
_COUNTER = re.compile(r"\b(bytes_acked|bytes_received|minrtt):([0-9.]+)")
_RTT = re.compile(r"\brtt:([0-9.]+)/")
_TABLE = re.compile(r"^table netdev (cwctl_steer_\w+_out) \{$")
_MAP = re.compile(r"^\s*map sport_(tcp|udp) \{$")
_ELEMENT = re.compile(r"(\d{1,3}(?:\.\d{1,3}){3}) \. (\d+) \. (\d+) : (\d+)")

Endpoint = tuple[str, int]


@dataclass(frozen=True)
class Counters:
    """One TCP socket's counters: bytes it sent (acked) and received, RTTs in ms."""

    acked: int
    received: int
    rtt_ms: float | None = None
    minrtt_ms: float | None = None


def parse_counters(text: str) -> dict[tuple[Endpoint, Endpoint], Counters]:
    """``SOCKETS_INFO_ARGV``'s output: each connected TCP socket's counters, by (local
    end, peer end). An info line belongs to the socket line just above it."""
    out: dict[tuple[Endpoint, Endpoint], Counters] = {}
    ends: tuple[Endpoint, Endpoint] | None = None
    for line in text.splitlines():
        if line[:1] not in (" ", "\t"):
            socks = parse_sockets(line)
            s = socks[0] if socks else None
            ends = (s.local, s.peer) if s and s.proto == "tcp" and s.peer else None
            continue
        if ends is None:
            continue
        found = dict(_COUNTER.findall(line))
        rtt = _RTT.search(line)
        out[ends] = Counters(
            acked=int(float(found.get("bytes_acked", 0))),
            received=int(float(found.get("bytes_received", 0))),
            rtt_ms=float(rtt.group(1)) if rtt else None,
            minrtt_ms=float(found["minrtt"]) if "minrtt" in found else None,
        )
        ends = None
    return out


def parse_translations(text: str) -> dict[tuple[str, str, int, int], int]:
    """The wire ports cwctl's rewriting tables (``moveflows``' ``<table>_out``) put on
    this host's connecting ends: (proto, peer address, socket port, peer port) -> wire."""
    out: dict[tuple[str, str, int, int], int] = {}
    in_table, proto = False, None
    for line in text.splitlines():
        if line.startswith("table "):
            in_table, proto = bool(_TABLE.match(line.rstrip())), None
            continue
        if not in_table:
            continue
        m = _MAP.match(line)
        if m:
            proto = m.group(1)
        elif line.strip() == "}":
            proto = None
        elif proto is not None:
            for addr, sport, dport, wire in _ELEMENT.findall(line):
                out[(proto, addr, int(sport), int(dport))] = int(wire)
    return out


def parse_clock(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


@dataclass(frozen=True)
class FlowRate:
    """A flow, the port its wire carries now, and its rates over the interval."""

    flow: Flow
    wire: int
    forward_bps: float  # flow.host -> flow.peer
    reverse_bps: float
    queueing_us: float | None  # its socket's smoothed RTT minus its minimum
    translated: bool  # a cwctl table rewrites its port now

    @property
    def id(self) -> str:
        return elephants.flow_id(self.flow)

    @property
    def bps(self) -> float:
        return max(self.forward_bps, self.reverse_bps)


@dataclass
class Observed:
    """What one read of the hosts saw."""

    flows: list[FlowRate]
    devices: dict[str, str]  # host -> its fabric interface
    used: dict[str, set[int]]  # host -> local ports its sockets hold (and wire ports)
    tables: dict[str, str]  # host -> ``nft list tables`` (a plan's prior)
    interval_s: float


def _reads(interval_s: float) -> dict[str, tuple[str, ...]]:
    return {
        steer.NFT_TABLES: steer.LIST_ARGV,
        "addresses": ADDRESSES_ARGV,
        "translations": RULESET_ARGV,
        "clock before": CLOCK_ARGV,
        "socket counters before": SOCKETS_INFO_ARGV,
        "interval": ("sleep", f"{interval_s:g}"),
        "clock after": CLOCK_ARGV,
        "socket counters after": SOCKETS_INFO_ARGV,
    }


async def observe(
    runner: Runner,
    fabric: steer.HostFabric,
    hosts: Sequence[str],
    interval_s: float = INTERVAL_S,
    sudo: bool = False,
) -> Observed:
    """Every host read at once, one session each: the flows between them and their
    rates over ``interval_s``, each flow's wire port, the hosts' interfaces."""
    if not 0 < interval_s <= MAX_INTERVAL_S:
        raise InputError(f"--interval {interval_s:g}: must be above 0 and at most 60 seconds")

    def wrap(argv: Sequence[str]) -> tuple[str, ...]:
        return steer.reads(argv, sudo) if argv[0] == "nft" else tuple(argv)

    try:
        seen = await read_together(runner, list(hosts), _reads(interval_s), wrap)
    except ReadFailed as exc:
        raise steer.cannot_steer(exc) if exc.what == steer.NFT_TABLES else exc from None
    devices = fabric_devices(seen["addresses"], fabric.address, hosts)
    after = seen["socket counters after"]
    flows = find_flows(after, fabric.address)
    rates = _rates(flows, fabric, seen)
    used = {h: {s.local[1] for s in parse_sockets(after[h])} for h in hosts}
    for r in rates:
        used[r.flow.host].update((r.flow.port, r.wire))
    spans = [_span(seen, h) for h in hosts]
    interval = statistics.median([s for s in spans if s is not None] or [interval_s])
    return Observed(rates, devices, used, dict(seen[steer.NFT_TABLES]), interval)


def _span(seen: Mapping[str, Mapping[str, str]], host: str) -> float | None:
    t0, t1 = parse_clock(seen["clock before"][host]), parse_clock(seen["clock after"][host])
    return t1 - t0 if t0 is not None and t1 is not None and t1 > t0 else None


def _rates(
    flows: list[Flow], fabric: steer.HostFabric, seen: Mapping[str, Mapping[str, str]]
) -> list[FlowRate]:
    """Each TCP flow's rates, from whichever end was read in both reads (the service end
    first: its socket names the connecting end by the port the wire brought it)."""
    before = {h: parse_counters(t) for h, t in seen["socket counters before"].items()}
    after = {h: parse_counters(t) for h, t in seen["socket counters after"].items()}
    wire = {h: parse_translations(t) for h, t in seen["translations"].items()}
    out = []
    for f in flows:
        a, b = fabric.address[f.host], fabric.address[f.peer]
        ends = [(f.peer, ((b, f.peer_port), (a, f.port)), True),
                (f.host, ((a, f.port), (b, f.peer_port)), False)]  # fmt: skip
        read = []  # (sent, received, the end's queueing, is the service end) per end read
        for host, key, service in ends:
            c0, c1, span = before.get(host, {}).get(key), after[host].get(key), _span(seen, host)
            if c0 is None or c1 is None or span is None:
                continue
            queueing = (
                (c1.rtt_ms - c1.minrtt_ms) * 1000
                if c1.rtt_ms is not None and c1.minrtt_ms is not None
                else None
            )
            sent, got = (c1.acked - c0.acked) * 8 / span, (c1.received - c0.received) * 8 / span
            read.append((sent, got, queueing, service))
        if not read:
            continue
        sent, got, _, service = read[0]  # the rates: the service end's view where read
        fwd, rev = (got, sent) if service else (sent, got)
        # the queueing: the sending end's RTT (a receiver's own samples are few)
        queueing = max(read, key=lambda e: e[0])[2]
        w = wire.get(f.host, {}).get((f.proto, b, f.port, f.peer_port))
        out.append(FlowRate(f, w or f.port, max(fwd, 0.0), max(rev, 0.0), queueing, w is not None))
    return out


# --- paths and loads ----------------------------------------------------------------------


def crossing(fabric: steer.HostFabric, flow: Flow) -> bool:
    """Whether the flow goes up to a spine at all (its ends on two known leaves)."""
    la, lb = fabric.leaf_of.get(flow.host), fabric.leaf_of.get(flow.peer)
    return la is not None and lb is not None and la != lb


def path_load(fabric: steer.HostFabric, r: FlowRate, spine: str, back: str) -> dict[str, float]:
    """What ``r`` puts on each directed element, its data over ``spine``, its replies
    over ``back`` (``elephants.options``, the balancing core's own reading)."""
    la, lb = fabric.leaf_of[r.flow.host], fabric.leaf_of[r.flow.peer]
    assert la is not None and lb is not None
    return elephants.options(la, lb, r.forward_bps, r.reverse_bps, {0: (spine, back)})[0]


def groups(fabric: steer.HostFabric) -> dict[str, tuple[str, ...]]:
    """The sets that should carry near-equal load (``elephants.leaf_groups``), named:
    each leaf's uplinks (``leaf1 up``) and the spines' downlinks into it (``leaf1 down``)."""
    named = {}
    for group in elephants.leaf_groups(fabric.uplinks):
        a, _, b = group[0].partition(">")
        named[f"{a} up" if a in fabric.uplinks else f"{b} down"] = group
    return named


def group_ratios(load: Mapping[str, float], sets: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Per group, its busiest member's load over the group's mean (1.0: even, or idle)."""
    names = list(sets)
    found = group_loads(load, [tuple(sets[n]) for n in names])
    return {n: g.ratio for n, g in zip(names, found, strict=True)}


@dataclass
class LinkLoad:
    """One directed link: the load the hosts' flows put on it, and their queueing."""

    link: str
    group: str
    bps: float = 0.0
    flows: int = 0
    elephants: int = 0
    queueing: list[float] | None = None

    @property
    def queueing_p50_us(self) -> float | None:
        return statistics.median(self.queueing) if self.queueing else None

    def to_json(self) -> dict[str, Any]:
        q = self.queueing_p50_us
        return {"link": self.link, "group": self.group, "load_bps": round(self.bps),
                "flows": self.flows, "elephants": self.elephants,
                "queueing_p50_us": None if q is None else round(q, 1)}  # fmt: skip


def link_loads(
    fabric: steer.HostFabric,
    placed: Iterable[tuple[FlowRate, str, str]],
    elephant_bps: float = ELEPHANT_BPS,
) -> list[LinkLoad]:
    """Every directed link of every group, with the flows ``placed`` on it ((flow, data
    spine, reply spine) each)."""
    sets = groups(fabric)
    rows = {m: LinkLoad(m, g, queueing=[]) for g, ms in sets.items() for m in ms}
    for r, spine, back in placed:
        for link, bps in path_load(fabric, r, spine, back).items():
            row = rows.get(link)
            if row is None or bps <= 0:
                continue
            row.bps += bps
            row.flows += 1
            row.elephants += bps >= elephant_bps  # an elephant here, not only somewhere
            if r.queueing_us is not None and row.queueing is not None:
                row.queueing.append(r.queueing_us)
    return list(rows.values())


def _rate_text(bps: float) -> str:
    return f"{bps / 1e9:.1f} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.0f} Mbit/s"


def findings(rows: Sequence[LinkLoad], target: float) -> list[str]:
    """An imbalance as its own finding, one line per group over ``target`` (max/mean),
    the worst first (by max/mean, then by load):
    "leaf1's uplink to spine2 carries 2 elephants (190 Mbit/s, queueing p50 40 us), its
    uplink to spine1 none"."""
    by_group: dict[str, list[LinkLoad]] = defaultdict(list)
    for row in rows:
        by_group[row.group].append(row)
    out = []
    ratio = {
        g: group_ratios({m.link: m.bps for m in ms}, {g: [m.link for m in ms]})[g]
        for g, ms in by_group.items()
    }
    worst_first = sorted(by_group, key=lambda g: (-ratio[g], -max(m.bps for m in by_group[g]), g))
    for group in worst_first:
        members = by_group[group]
        if ratio[group] <= target:
            continue
        leaf, direction = group.split()
        hot = max(members, key=lambda m: m.bps)
        q = hot.queueing_p50_us
        queue = f", queueing p50 {q:.0f} us" if q is not None else ""
        what = f"{hot.elephants} elephant{'s' * (hot.elephants != 1)}"
        head = f"{leaf}'s {_link_words(hot.link, direction)} carries {what} " + (
            f"({_rate_text(hot.bps)}{queue})"
        )
        rest = [
            f"its {_link_words(m.link, direction)} "
            + (f"{_rate_text(m.bps)}" if m.elephants else "none")
            for m in sorted(members, key=lambda m: m.link)
            if m is not hot
        ]
        out.append(", ".join([head, *rest]) + f" (max/mean {ratio[group]:.2f})")
    return out


def _link_words(link: str, direction: str) -> str:
    a, _, b = link.partition(">")
    return f"uplink to {b}" if direction == "up" else f"downlink from {a}"
