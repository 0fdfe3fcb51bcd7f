"""Trace many 5-tuples at once, from a host, to the hop at one TTL: which spine a tuple's
ECMP hash picks. Stdlib only: its source is sent to the host as ``python3 -c SOURCE JSON``
(``trace_argv``) and runs there as root.

Each tuple (proto, destination, source port, destination port) is sent once as a crafted
IPv4 packet with the given TTL from a raw socket (``IPPROTO_RAW``), and the ICMP
time-exceeded that comes back (read on a raw ICMP socket) quotes the packet's header:
its source address is the hop that answered. Paris-traceroute's rule holds: every field
ECMP hashes is the one the real flow will carry, so the hop seen is the real flow's hop.

- TCP tuples are sent as bare RST segments: conntrack makes no entry for a RST it does
  not know (so nothing is left in the table, and no NAT rule applies to it), and a RST
  whose TTL runs out never reaches a socket. The source port may be one in use.
- UDP tuples are 8-byte datagrams; conntrack keeps an unreplied entry for 30 s.

The JSON in: ``{"src": ADDRESS, "ttl": 2, "rate": PPS, "wait_s": S, "tries": N,
"jobs": [[proto, dst, sport, dport], ...]}``. Out, one line: ``{"hops": [ADDRESS or
null, ...]}`` in the jobs' order. Without privilege for raw sockets it prints one line to
stderr and exits 77.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import sys
import time

NO_PRIVILEGE = 77
_PROTO = {"tcp": socket.IPPROTO_TCP, "udp": socket.IPPROTO_UDP}
_TIME_EXCEEDED = 11


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071)."""
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def packet(proto: str, src: str, dst: str, sport: int, dport: int, ttl: int, ident: int) -> bytes:
    """The IPv4 packet for one tuple (the kernel fills the IP checksum and length)."""
    s, d = socket.inet_aton(src), socket.inet_aton(dst)
    if proto == "tcp":
        seq = int.from_bytes(os.urandom(4), "big")
        head = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x04, 0, 0, 0)
        pseudo = s + d + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(head))
        body = head[:16] + struct.pack("!H", checksum(pseudo + head)) + head[18:]
    else:
        body = struct.pack("!HHHH", sport, dport, 8, 0)  # UDP checksum 0: none
    total = 20 + len(body)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, ident, 0, ttl, _PROTO[proto], 0, s, d)
    return ip + body


def quoted(data: bytes) -> tuple[str, tuple[int, str, str, int, int]] | None:
    """From an ICMP time-exceeded (IP header first, as a raw socket reads it): the hop
    that sent it and the quoted tuple (proto number, src, dst, sport, dport)."""
    if len(data) < 20:
        return None
    ihl = (data[0] & 0x0F) * 4
    icmp = data[ihl:]
    if len(icmp) < 8 + 20 + 4 or icmp[0] != _TIME_EXCEEDED:
        return None
    inner = icmp[8:]
    inner_ihl = (inner[0] & 0x0F) * 4
    if len(inner) < inner_ihl + 4:
        return None
    proto = inner[9]
    src, dst = socket.inet_ntoa(inner[12:16]), socket.inet_ntoa(inner[16:20])
    sport, dport = struct.unpack("!HH", inner[inner_ihl : inner_ihl + 4])
    hop = socket.inet_ntoa(data[12:16])
    return hop, (proto, src, dst, sport, dport)


def trace(spec: dict) -> list[str | None]:
    src, ttl = spec["src"], int(spec["ttl"])
    gap = 1.0 / float(spec.get("rate", 500))
    wait_s = float(spec.get("wait_s", 0.5))
    jobs = [(str(p), str(d), int(s), int(t)) for p, d, s, t in spec["jobs"]]
    index: dict[tuple[int, str, str, int, int], list[int]] = {}
    for i, (p, d, s, t) in enumerate(jobs):  # a tuple asked twice gets both answered
        index.setdefault((_PROTO[p], src, d, s, t), []).append(i)
    hops: list[str | None] = [None] * len(jobs)
    send = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    listen = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    listen.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    listen.setblocking(False)

    missing = set(range(len(jobs)))

    def drain(until: float) -> None:
        """Read answers until ``until``, or until every tuple has one."""
        while missing:
            left = until - time.monotonic()
            ready, _, _ = select.select([listen], [], [], max(0.0, left))
            if not ready:
                return
            while True:
                try:
                    data = listen.recv(2048)
                except BlockingIOError:
                    break
                found = quoted(data)
                if found is None:
                    continue
                for i in index.get(found[1], ()):
                    hops[i] = found[0]
                    missing.discard(i)

    for _ in range(int(spec.get("tries", 2))):
        todo = sorted(missing)
        if not todo:
            break
        start = time.monotonic()
        for n, i in enumerate(todo):
            p, d, s, t = jobs[i]
            send.sendto(packet(p, src, d, s, t, ttl, (i % 0xFFFF) + 1), (d, 0))
            drain(start + (n + 1) * gap)
        drain(time.monotonic() + wait_s)
    return hops


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    try:
        hops = trace(spec)
    except PermissionError:
        print("tracing needs raw sockets: run as root (or with CAP_NET_RAW)", file=sys.stderr)
        return NO_PRIVILEGE
    print(json.dumps({"hops": hops}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
