"""Authenticated probe datagrams: a per-scan key and nonce, a truncated keyed MAC.

It runs on the far host under any Python 3.8+: standard library only. Shipped in the
agent bundle (``bootstrap.py``).

The controller draws a fresh random key (32 bytes) and nonce (8 bytes) for every scan
and sends them to each agent inside its params line, over the agent's stdin (the SSH
channel), never on a command line. Every probe, reply and follow-up then travels as::

    nonce (8) | mac (8) | header (wire.WIRE, 36: kind, flags, idx, rid, seq, a, b)

``mac`` = keyed BLAKE2b (``hashlib.blake2b(key=KEY, digest_size=8)``) over ``nonce |
header``, so it covers the kind, the sequence numbers and both timestamps. The header
stays last, so a TX stamp's looped-back packet and an ICMP error's quoted payload are
still parsed from their last ``WIRE.size`` bytes (``wire.decode``).

``Auth.open`` says why a datagram is dropped (``DROP_REASONS``): not ours (size or
magic), another scan's nonce, a MAC that does not verify. Path-tracing packets (kinds
``FIRST_UNSIGNED`` and up) carry no timestamps the solver uses and pass unsigned.
Without a key (an agent started by hand, an older controller) nothing is signed or
checked, as before.
"""

import hashlib
import hmac

from cwctl.probe.wire import MAGIC, WIRE, decode

NONCE_SIZE = 8
MAC_SIZE = 8
SEALED_SIZE = NONCE_SIZE + MAC_SIZE + WIRE.size
HEADER_AT = NONCE_SIZE + MAC_SIZE  # where the header starts in a sealed datagram
FIRST_UNSIGNED = 4  # kinds from here on (path tracing) are not timestamp carriers

# why an agent dropped a datagram (the summary's "dropped" counts, by reason)
DROP_REASONS = (
    "malformed",  # not a cwctl datagram (size, magic), or unsigned where signing is on
    "other_scan",  # signed with another scan's nonce
    "bad_mac",  # the MAC does not verify: forged or altered
    "unknown_peer",  # from an address that is not one of this scan's peers
    "replay",  # a copy of a probe already answered, or an answer already taken
    "unexpected",  # an answer to no probe of ours, or from the wrong peer or port
    # the error queue (exchanges.py): only the kernel's TX stamp of a datagram still in
    # flight, or an ICMP answer to a trace packet in flight, is taken from it
    "icmp_unasked",  # an ICMP error answering no trace in flight (quoting a probe, a reply)
    "stray_stamp",  # a TX stamp quoting no datagram in flight, byte for byte
)


class Auth:
    """Seal and open datagrams with one scan's key and nonce (both None: no signing)."""

    def __init__(self, key=None, nonce=None):
        if (key is None) != (nonce is None):
            raise ValueError("auth needs both a key and a nonce")
        if nonce is not None and len(nonce) != NONCE_SIZE:
            raise ValueError(f"auth nonce must be {NONCE_SIZE} bytes")
        self.key = key
        self.nonce = nonce
        self.dropped = {}
        # the keyed state, made once: copying it is cheaper than keying for every datagram
        self._keyed = None if key is None else hashlib.blake2b(key=key, digest_size=MAC_SIZE)

    @classmethod
    def from_params(cls, auth):
        """From the params' ``"auth"``: ``{"key": hex, "nonce": hex}`` (None: no signing)."""
        if not auth:
            return cls()
        return cls(bytes.fromhex(str(auth["key"])), bytes.fromhex(str(auth["nonce"])))

    @property
    def on(self):
        return self.key is not None

    def mac(self, nonce, header):
        h = self._keyed.copy()
        h.update(nonce)
        h.update(header)
        return h.digest()

    def seal(self, header):
        """The datagram to send for ``header`` (``wire.encode``'s bytes)."""
        if self.key is None:
            return header
        h = self._keyed.copy()  # mac(), inline: once for every datagram sent
        h.update(self.nonce)
        h.update(header)
        return self.nonce + h.digest() + header

    def drop(self, reason):
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def open(self, data):
        """The header's fields if ``data`` (bytes, or a memoryview of a receive buffer)
        is a datagram of this scan, else None (and the reason counted)."""
        if self.key is None:
            fields = decode(data)
            if fields is None:
                self.drop("malformed")
            return fields
        size = len(data)
        if size == WIRE.size:  # unsigned: only path tracing may be
            fields = decode(data)
            if fields is None or fields[0] < FIRST_UNSIGNED:
                self.drop("malformed")
                return None
            return fields
        if size != SEALED_SIZE:
            self.drop("malformed")
            return None
        magic, kind, flags, idx, _pad, rid, seq, a, b = WIRE.unpack_from(data, HEADER_AT)
        if magic != MAGIC:
            self.drop("malformed")
            return None
        nonce = data[:NONCE_SIZE]
        if nonce != self.nonce:
            self.drop("other_scan")
            return None
        h = self._keyed.copy()
        h.update(nonce)
        h.update(data[HEADER_AT:])
        if not hmac.compare_digest(h.digest(), data[NONCE_SIZE:HEADER_AT]):
            self.drop("bad_mac")
            return None
        return kind, flags, idx, rid, seq, a, b


class Guard:
    """What an agent lets in: datagrams of this scan (``Auth``), probes from this scan's
    peers that it has not answered before, answers to its own pending probes from the
    peer and port it probed. Every refusal is counted by reason (``dropped``)."""

    def __init__(self, auth=None, limit=1 << 16):
        self.auth = Auth.from_params(auth)  # ``AgentParams.auth``
        self.peer_ips = set()
        self.name_of = {}  # address -> peer name: every rail of a peer is one prober
        self.seen = {}  # (peer, seq) of probes answered, oldest first
        self.floor = {}  # peer -> the highest seq forgotten (older ones are replays)
        self.limit = limit

    @property
    def dropped(self):
        return self.auth.dropped

    def seal(self, header):
        return self.auth.seal(header)

    def open(self, data):
        return self.auth.open(data)

    def set_peers(self, peer_addr, name_of=None):
        """The peer table: name -> (address, port), and every rail's address -> name."""
        self.name_of = {addr[0]: name for name, addr in peer_addr.items()}
        self.name_of.update(name_of or {})
        self.peer_ips = set(self.name_of)

    def accept_probe(self, addr, seq):
        """Answer this probe? Only a peer's, and only once: a peer numbers its probes
        across all its ports and rails, so (peer, seq) names one whatever port it came
        from. Before the peer table came (a slow start message), a probe that opened with
        this scan's key is a peer's."""
        if (self.peer_ips or not self.auth.on) and addr[0] not in self.peer_ips:
            self.auth.drop("unknown_peer")
            return False
        peer = self.name_of.get(addr[0], addr[0])
        key = (peer, seq)
        if key in self.seen or seq <= self.floor.get(peer, -1):
            self.auth.drop("replay")
            return False
        self.seen[key] = True
        if len(self.seen) > self.limit:  # forget the oldest; its seq and older are replays
            old_peer, old_seq = next(iter(self.seen))
            del self.seen[(old_peer, old_seq)]
            self.floor[old_peer] = max(self.floor.get(old_peer, -1), old_seq)
        return True

    def accept_answer(self, exchange, addr, expected, idx, taken):
        """Take this reply or follow-up for ``exchange`` (None: no such probe pending)?
        It must come from the peer's answer address and port, for the probe's idx, and
        not be a second copy (``taken``)."""
        if exchange is None or tuple(addr[:2]) != tuple(expected) or idx != exchange.idx:
            self.auth.drop("unexpected")
            return False
        if taken:
            self.auth.drop("replay")
            return False
        return True
