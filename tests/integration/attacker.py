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
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

from cwctl.probe.wire import KIND_FOLLOW, KIND_PROBE, KIND_REPLY, WIRE, decode, encode

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


@dataclass
class Attacker:
    skew_ns: int = 5_000_000
    # only this scan's signed datagrams (its nonce is public: it travels in the clear), so
    # other cwctl scans on the same machine are left alone; None: every cwctl datagram
    nonce: bytes | None = None
    sent: dict[str, int] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _mine: set[bytes] = field(default_factory=set)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Attacker:
        self.sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sniff.bind(("lo", 0))
        self.sniff.settimeout(0.05)
        self.raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        self._thread = threading.Thread(target=self._run, name="attacker", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(5)
        self.sniff.close()
        self.raw.close()

    def _send(self, what: str, src: tuple[str, int], dst: tuple[str, int], data: bytes) -> None:
        self._mine.add(data)
        udp = struct.pack("!HHHH", src[1], dst[1], 8 + len(data), 0)  # checksum 0: none
        ip = struct.pack(
            "!BBHHHBBH4s4s",
            0x45,
            0,
            20 + len(udp) + len(data),
            0,
            0,
            64,
            socket.IPPROTO_UDP,
            0,
            socket.inet_aton(src[0]),
            socket.inet_aton(dst[0]),
        )  # fmt: skip  (IPPROTO_RAW: our own IP header, so the source address is spoofed)
        try:
            self.raw.sendto(ip + udp + data, (dst[0], 0))
        except OSError:
            return
        self.sent[what] = self.sent.get(what, 0) + 1

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
            self._send("replay", src, dst, data)
            if kind == KIND_PROBE:  # a forged reply, as if from the answerer, skewed late
                late = time.time_ns() + self.skew_ns
                forged = encode(KIND_REPLY, seq, idx, 0, rid, late, late)
                self._send("forged_reply", dst, src, self._forge(data, forged))
            elif kind == KIND_REPLY:  # a forged follow-up moving t3
                flip = -flip
                forged = encode(KIND_FOLLOW, seq, a=b + flip * self.skew_ns)
                self._send("forged_follow", src, dst, self._forge(data, forged))
