"""Which source ports keep a host pair's flows off a suspect: the core of host-side steering.

ECMP picks a flow's spine by hashing its 5-tuple, in each direction separately (the
sender's leaf hashes the forward tuple, the far leaf the reply's). A connection from
``a:p`` to ``b:P`` crosses, forward, the spine ``a``'s leaf picks for (a, b, proto, p, P)
and, back, the spine ``b``'s leaf picks for (b, a, proto, P, p): both depend on ``p``, so
choosing ``p`` chooses both paths. The destination port and the protocol are hashed too:
a port mapped for one service says nothing about another (``Service``).

Nothing here guesses a hash: the spine of each direction is what a trace read
(``probe/hosttrace.py``); a port whose forward or reverse spine is unknown is never healthy.
``plan_pairs`` says which ordered host pairs a suspect affects, ``healthy`` which traced
ports avoid it, ``TracedPorts`` keeps what was traced per (sender, peer, service).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cwctl.errors import InputError

PROTOS = ("tcp", "udp")
ROCE_PORT = 4791  # RoCEv2: UDP destination port 4791, the source port from the queue pair
# candidate source ports: above Linux's default ephemeral range (32768-60999), so a port
# chosen here is rarely one the kernel hands out on its own
CANDIDATES = range(61000, 65536)
DEFAULT_POOL = 64  # healthy ports per (sender, peer, service): concurrent connections
# moving open flows, the spare healthy ports per (sender, peer, service) for its new
# connections: a job's services open few after the start, and every candidate is traced
# both ways while the moved connections wait in retransmission backoff
MOVE_POOL = 16
MIN_PORTS = 4  # fewer healthy ports than this for a pair: refused
SPINE_TTL = 2  # in a leaf-spine fabric the hop after the host's leaf is the spine


@dataclass(frozen=True, order=True)
class Service:
    """What the steered connections go to: a protocol and the peer's destination port."""

    proto: str
    port: int

    def __str__(self) -> str:
        return f"{self.proto}/{self.port}"


ROCE = Service("udp", ROCE_PORT)


@dataclass
class SteerOptions:
    services: tuple[Service, ...] = ()
    pool: int | None = None  # healthy ports per key; None: DEFAULT_POOL, MOVE_POOL moving
    roce: bool = False
    sudo: bool = False  # reads too (nft and raw sockets need root); steps: with_sudo


def parse_service(spec: str) -> Service:
    """``5201`` (TCP), ``tcp:5201`` or ``udp:9000``; ``InputError`` naming the spec."""
    proto, colon, port = spec.strip().rpartition(":")
    proto = proto.lower() if colon else "tcp"
    if proto not in PROTOS or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise InputError(f"--port {spec!r}: expected PORT or PROTO:PORT (5201, tcp:5201, udp:9000)")
    return Service(proto, int(port))


@dataclass(frozen=True)
class Avoided:
    """The spine to avoid; ``leaf`` set for a link ``leaf-spine`` (only pairs with an end
    on that leaf cross it)."""

    name: str
    spine: str
    leaf: str | None = None


def plan_pairs(
    leaf_of: Mapping[str, str | None], uplinks: Mapping[str, Iterable[str]], suspect: Avoided
) -> list[tuple[str, str]]:
    """The ordered pairs (sender, peer) whose flows may cross the suspect: hosts on two
    different leaves that both reach the spine (for a link, one of them on its leaf)."""
    ups = {leaf: set(s) for leaf, s in uplinks.items()}
    hosts = sorted(h for h, leaf in leaf_of.items() if leaf and suspect.spine in ups.get(leaf, ()))
    pairs = []
    for a in hosts:
        for b in hosts:
            la, lb = leaf_of[a], leaf_of[b]
            if la == lb:
                continue  # one leaf: the flow never goes up to a spine
            if suspect.leaf is not None and suspect.leaf not in (la, lb):
                continue
            pairs.append((a, b))
    return pairs


Key = tuple[str, str, Service]  # (sender, peer, service)


@dataclass
class TracedPorts:
    """Per (sender, peer, service), per candidate source port: the spine each direction
    was seen to cross (None: no answer, or an address of no spine)."""

    forward: dict[Key, dict[int, str | None]] = field(default_factory=dict)
    reverse: dict[Key, dict[int, str | None]] = field(default_factory=dict)

    def traced(self, key: Key) -> int:
        return len(self.forward.get(key, {}))

    def record(self, key: Key, port: int, forward: str | None, reverse: str | None) -> None:
        self.forward.setdefault(key, {})[port] = forward
        self.reverse.setdefault(key, {})[port] = reverse


def healthy(traced: TracedPorts, key: Key, suspect: Avoided, *, reply: bool = True) -> list[int]:
    """The traced ports whose forward (and, with ``reply``, reverse) spine is known and
    not the suspect's, in the order they were traced."""
    fwd = traced.forward.get(key, {})
    rev = traced.reverse.get(key, {})
    out = []
    for port, spine in fwd.items():
        if spine is None or spine == suspect.spine:
            continue
        if reply and (rev.get(port) is None or rev.get(port) == suspect.spine):
            continue
        out.append(port)
    return out


def next_candidates(traced: TracedPorts, key: Key, want: int) -> list[int]:
    """The next ``want`` candidate ports not traced yet for ``key``."""
    done = traced.forward.get(key, {})
    out = []
    for port in CANDIDATES:
        if port not in done:
            out.append(port)
            if len(out) == want:
                break
    return out


def to_trace(found: int, pool: int, traced: int) -> int:
    """How many more ports to trace for a pair that has ``found`` healthy of ``traced``:
    enough for the pool at the share seen so far (a quarter before any is seen: each
    direction avoids one of two spines half the time), and a margin."""
    if found >= pool:
        return 0
    share = found / traced if traced and found else 0.25
    return min(len(CANDIDATES) - traced, int((pool - found) / share * 1.25) + 8)


def spine_of(hop: str | None, switch_of_address: Mapping[str, str], spines: set[str]) -> str | None:
    name = switch_of_address.get(hop) if hop is not None else None
    return name if name in spines else None


def summary(sets: Mapping[Key, Sequence[int]]) -> list[str]:
    """One line per pair: how many ports, and the first few."""
    lines = []
    for (a, b, service), ports in sorted(sets.items()):
        shown = ", ".join(str(p) for p in list(ports)[:6]) + (", ..." if len(ports) > 6 else "")
        lines.append(f"{a} -> {b} {service}: {len(ports)} port(s) ({shown})")
    return lines
