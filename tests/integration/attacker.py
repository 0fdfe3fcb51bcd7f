"""An attacker on the loopback "fabric", for tests: sniffs cwctl probe datagrams with an
AF_PACKET socket on ``lo`` (only one scan's, by its public nonce, when given) and, for
every genuine one, sends with the same 5-tuple (a raw IP socket: source address and port
are spoofed too):

- a replay of the datagram as it was (probe, reply, follow-up);
- a forged follow-up for each reply it sees, moving the answerer's send time ``t3`` by
  ``skew_ns`` (alternately later and earlier): accepted, it skews that pair's offset;
- a forged reply to each probe it sees, with ``t2``/``t3`` ``skew_ns`` late.

Forgeries keep a signed datagram's nonce and put random bytes where the MAC goes (the
attacker has no key); unsigned datagrams are forged unsigned. Needs root (raw sockets).

Two more attacks, each chosen by ``attacks`` (the three above are ``"forge"``):

- ``"icmp"``: an ICMP port-unreachable error to the sender of every probe and reply,
  as if from its destination, quoting the sniffed datagram whole (MAC included): an
  agent with ``IP_RECVERR`` on (path discovery) finds it on its socket's error queue,
  with the error's own arrival stamp;
- ``"port_replay"``: every probe sent again from the prober's address but another
  source port (answered, it would inflate the answerer's counts and draw a reply).
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from cwctl.probe.hosttrace import checksum
from cwctl.probe.wire import KIND_FOLLOW, KIND_PROBE, KIND_REPLY, WIRE, decode, encode

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


@dataclass
class Attacker:
    skew_ns: int = 5_000_000
    attacks: frozenset[str] = frozenset({"forge"})
    # only this scan's signed datagrams (its nonce is public: it travels in the clear), so
    # other cwctl scans on the same machine are left alone; None: every cwctl datagram
    nonce: bytes | None = None
    sent: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _mine: set[bytes] = field(default_factory=set)
    _thread: threading.Thread | None = None
    # as a forked process: fast enough on loopback to answer a probe still in flight
    process: bool = False

    def __post_init__(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self._stop_proc = ctx.Event()
        self._results_in, self._results = ctx.Pipe(duplex=False)

    def __enter__(self) -> Attacker:
        self.sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sniff.bind(("lo", 0))
        self.sniff.settimeout(0.05)
        self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        if self.process:  # its own interpreter: no GIL shared with the scan's reader
            self._proc = multiprocessing.get_context("fork").Process(target=self._child)
            self._proc.start()
        else:
            self._thread = threading.Thread(target=self._run, name="attacker", daemon=True)
            self._thread.start()
        return self

    def _child(self) -> None:
        self._stop = self._stop_proc  # type: ignore[assignment]
        self._run()
        self._results.send(self.sent)

    def __exit__(self, *exc: object) -> None:
        if self.process:
            self._stop_proc.set()
            if self._results_in.poll(10):
                self.sent = self._results_in.recv()
            self._proc.join(5)
        else:
            self._stop.set()
            assert self._thread is not None
            self._thread.join(5)
        self.sniff.close()
        self.raw.close()

    def _send(self, what: str, src: tuple[str, int], dst: tuple[str, int], data: bytes) -> None:
        self._mine.add(data)
        try:  # IPPROTO_RAW: our own IP header, so the source address is spoofed
            self.raw.sendto(udp_packet(src, dst, data), (dst[0], 0))
        except OSError:
            return
        self.sent[what] = self.sent.get(what, 0) + 1

    def _icmp(self, src: str, dst: str, quoted: bytes) -> None:
        try:
            self.raw.sendto(port_unreachable(src, dst, quoted), (dst, 0))
        except OSError:
            return
        self.sent["icmp"] = self.sent.get("icmp", 0) + 1

    def _forge(self, original: bytes, header: bytes) -> bytes:
        if len(original) > WIRE.size:  # signed: keep the nonce, guess the MAC
            return original[:8] + os.urandom(len(original) - WIRE.size - 8) + header
        return header

    def _run(self) -> None:
        flip = 1
        while not self._stop.is_set():
            try:
                frame, addr = self.sniff.recvfrom(2048)
            except TimeoutError:
                continue
            except OSError:
                return
            if addr[2] == PACKET_OUTGOING or len(frame) < 14 + 20 + 8:
                continue
            ip = frame[14:]
            if ip[0] >> 4 != 4 or ip[9] != socket.IPPROTO_UDP:
                continue
            ihl = (ip[0] & 0x0F) * 4
            src_ip, dst_ip = socket.inet_ntoa(ip[12:16]), socket.inet_ntoa(ip[16:20])
            sport, dport, length, _ = struct.unpack("!HHHH", ip[ihl : ihl + 8])
            data = bytes(ip[ihl + 8 : ihl + length])
            if data in self._mine:
                self._mine.discard(data)
                continue
            if self.nonce is not None and not data.startswith(self.nonce):
                continue
            fields = decode(data)
            if fields is None:
                continue
            kind, _flags, idx, rid, seq, _a, b = fields
            src, dst = (src_ip, sport), (dst_ip, dport)
            if "icmp" in self.attacks and kind in (KIND_PROBE, KIND_REPLY):
                self._icmp(dst_ip, src_ip, bytes(ip[: ihl + length]))
            if "port_replay" in self.attacks and kind == KIND_PROBE:
                other = (src_ip, 1024 + (sport * 7919) % 60000)  # not the prober's port
                self._send("port_replay", other, dst, data)
            if "forge" not in self.attacks:
                continue
            self._send("replay", src, dst, data)
            if kind == KIND_PROBE:  # a forged reply, as if from the answerer, skewed late
                late = time.time_ns() + self.skew_ns
                forged = encode(KIND_REPLY, seq, idx, 0, rid, late, late)
                self._send("forged_reply", dst, src, self._forge(data, forged))
            elif kind == KIND_REPLY:  # a forged follow-up moving t3
                flip = -flip
                forged = encode(KIND_FOLLOW, seq, a=b + flip * self.skew_ns)
                self._send("forged_follow", src, dst, self._forge(data, forged))


def ip_packet(proto: int, src: str, dst: str, payload: bytes) -> bytes:
    """An IPv4 packet from ``src`` (spoofed) to ``dst`` (the kernel fills the checksum)."""
    header = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 0, 0, 64, proto, 0,
        socket.inet_aton(src), socket.inet_aton(dst),
    )  # fmt: skip
    return header + payload


def udp_packet(src: tuple[str, int], dst: tuple[str, int], data: bytes) -> bytes:
    """A UDP datagram as an IPv4 packet (checksum 0: none)."""
    udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(data), 0)
    return ip_packet(socket.IPPROTO_UDP, src[0], dst[0], udp + data)


def port_unreachable(src: str, dst: str, quoted: bytes) -> bytes:
    """An ICMP destination-unreachable (port) from ``src`` to ``dst`` quoting ``quoted``
    (an IP packet ``dst`` sent), its checksum right so the kernel takes it."""
    body = struct.pack("!BBHI", 3, 3, 0, 0) + quoted
    icmp = body[:2] + struct.pack("!H", checksum(body)) + body[4:]
    return ip_packet(socket.IPPROTO_ICMP, src, dst, icmp)
