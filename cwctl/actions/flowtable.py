"""The flows a host pair carries, read off the hosts' own socket tables.

Each host's ``ss -H -n -a -t -u`` (``SOCKETS_ARGV``) lists its TCP and UDP sockets. A
*flow* is a connected socket (TCP ``ESTAB``, a connected UDP socket) whose two ends are
fabric addresses of two inventory hosts. Both ends list a flow between two hosts that
were read; it is kept once.

Where both ends were read, a TCP flow is taken as its service end lists it: that end
sees the connecting end's port as the wire carries it, after any source NAT at the
connecting end (``--port`` steering's SYN rule, a masquerade), while the connecting
end's own table shows its socket's port, which no packet on the wire carries. A move
rewrites what the wire carries, so it needs the wire's port.

Of a flow's two ends, the one whose port is a listening socket on its host (a TCP
``LISTEN``, a bound, unconnected UDP socket) is the *service*; the other, the connecting
end, is the one whose port a move translates on the wire (``Flow.host``, ``Flow.port``).
Where neither or both ends listen (two ranks that connected to each other's ephemeral
ports, and a listener on the same port), the end named first (host, then port) is the
connecting one: the choice only has to be the same at both ends, and it is, since it is
made once here.

Nothing here trusts the text: a line that does not parse is skipped (a socket table is
the kernel's, but a host is not), ports are checked to be 1-65535, and an address must be
an inventory host's fabric address to count.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cwctl.actions.steerports import PROTOS, Service
from cwctl.errors import EXIT_PROBLEMS, CwctlError

# every TCP and UDP socket, numeric, no header: "tcp ESTAB 0 0 10.0.0.1:4500 10.0.0.2:5201"
SOCKETS_ARGV = ("ss", "-H", "-n", "-a", "-t", "-u")
# each IPv4 address and its interface: "3: eth1    inet 10.0.0.1/30 brd ... scope global eth1"
ADDRESSES_ARGV = ("ip", "-o", "-4", "addr", "show")
_CONNECTED = "ESTAB"
_LISTENING = {"tcp": "LISTEN", "udp": "UNCONN"}
_IFNAME = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")  # what nft's `device "..."` may be given
_V4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


@dataclass(frozen=True, order=True)
class Flow:
    """One connection between two hosts: ``host:port`` (the connecting end, whose port
    is translated) to ``peer:peer_port`` (the service)."""

    proto: str
    host: str
    port: int
    peer: str
    peer_port: int

    @property
    def service(self) -> Service:
        return Service(self.proto, self.peer_port)

    @property
    def key(self) -> tuple[str, str, Service]:
        return (self.host, self.peer, self.service)

    def __str__(self) -> str:
        return f"{self.proto} {self.host}:{self.port} -> {self.peer}:{self.peer_port}"


@dataclass(frozen=True)
class Socket:
    proto: str
    state: str
    local: tuple[str, int]
    peer: tuple[str, int] | None  # None: '*' (listening, unconnected)


def _endpoint(text: str) -> tuple[str, int] | None:
    """``10.0.0.1:80``, ``[::ffff:10.0.0.1]:80``, ``10.0.0.1%eth1:80``, ``*:80`` ->
    (IPv4 address or '*', port); None for IPv6 and for what does not parse."""
    addr, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        return None
    addr = addr.strip("[]").split("%", 1)[0]
    addr = addr.removeprefix("::ffff:")
    if addr in ("*", "0.0.0.0", "::"):
        return "*", int(port)
    return (addr, int(port)) if _V4.match(addr) else None


def parse_sockets(text: str) -> list[Socket]:
    """The sockets of ``SOCKETS_ARGV``'s output that name IPv4 (or wildcard) ends."""
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[0] not in PROTOS:
            continue
        local, peer = _endpoint(fields[4]), _endpoint(fields[5])
        if local is None:
            continue
        out.append(Socket(fields[0], fields[1], local, peer if peer and peer[0] != "*" else None))
    return out


def parse_devices(text: str) -> dict[str, str]:
    """``ADDRESSES_ARGV``'s output: each IPv4 address's interface."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] == "inet" and _IFNAME.match(fields[1].rstrip(":")):
            out[fields[3].split("/", 1)[0]] = fields[1].rstrip(":")
    return out


def listening(sockets: Iterable[Socket]) -> set[tuple[str, int]]:
    return {(s.proto, s.local[1]) for s in sockets if s.state == _LISTENING[s.proto]}


def find_flows(
    tables: Mapping[str, str],
    address: Mapping[str, str],
    pairs: Iterable[tuple[str, str]] | None = None,
) -> list[Flow]:
    """The flows between inventory hosts that the socket tables (host -> ``ss`` output)
    show, each once; with ``pairs``, only those whose (connecting end, service end) is
    one of them."""
    host_of = {addr: host for host, addr in address.items()}
    sockets = {host: parse_sockets(text) for host, text in tables.items()}
    listens = {host: listening(socks) for host, socks in sockets.items()}
    wanted = set(pairs) if pairs is not None else None
    served: set[Flow] = set()  # as the service end lists them
    connecting: set[Flow] = set()  # as the connecting end lists them
    for host, socks in sockets.items():
        for s in socks:
            if s.state != _CONNECTED or s.peer is None or s.local[0] != address.get(host):
                continue
            peer = host_of.get(s.peer[0])
            if peer is None or peer == host or not (s.local[1] and s.peer[1]):
                continue
            flow = _oriented(s.proto, (host, s.local[1]), (peer, s.peer[1]), listens)
            if wanted is None or (flow.host, flow.peer) in wanted:
                (served if host == flow.peer else connecting).add(flow)
    # a TCP service end holds a socket per connection: where it was read and lists no
    # such flow, the connecting end's port is not the wire's (a NAT): its view is left
    # out. A UDP service end's socket is usually unconnected: it lists nothing.
    kept = {f for f in connecting if f.proto == "udp" or f.peer not in tables or f in served}
    return sorted(served | kept)


def _oriented(
    proto: str,
    here: tuple[str, int],
    there: tuple[str, int],
    listens: Mapping[str, set[tuple[str, int]]],
) -> Flow:
    here_listens = (proto, here[1]) in listens.get(here[0], set())
    there_listens = (proto, there[1]) in listens.get(there[0], set())
    if here_listens != there_listens:
        client, service = (there, here) if here_listens else (here, there)
    else:
        client, service = min(here, there), max(here, there)
    return Flow(proto, client[0], client[1], service[0], service[1])


def fabric_devices(
    addresses: Mapping[str, str], fabric_address: Mapping[str, str], hosts: Iterable[str]
) -> dict[str, str]:
    """Each host's interface holding its fabric address, from its ``ip -o -4 addr show``
    (``addresses``); ``CwctlError`` (exit 3) naming a host where none does."""
    devices = {}
    for host in hosts:
        dev = parse_devices(addresses[host]).get(fabric_address[host])
        if dev is None:
            raise CwctlError(
                f"{host}: no interface holds its fabric address {fabric_address[host]} "
                "(ip -o -4 addr show)",
                exit_code=EXIT_PROBLEMS,
            )
        devices[host] = dev
    return devices
