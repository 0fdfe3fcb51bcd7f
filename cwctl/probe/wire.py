"""The probe datagram: one fixed-size struct, shared by prober and answerer.

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).
"""

import struct
import time

# magic, kind, flags, idx, pad, rid (responder's reply id), seq (initiator's exchange
# id), a, b (timestamps). Fixed size, so a TX stamp's looped-back packet (which carries
# the link, IP and UDP headers in front) is parsed from its last WIRE.size bytes.
WIRE = struct.Struct("!4sBBBBIQQQ")
MAGIC = b"CWP1"
KIND_PROBE = 1  # A -> B: seq, idx
KIND_REPLY = 2  # B -> A: seq, a = t2, b = t3 in user time (fallback)
KIND_FOLLOW = 3  # B -> A: seq, a = t3 from the kernel's TX stamp of the reply
KIND_TRACE = 4  # path discovery, TTL-limited: seq = trace id, idx = TTL (trace.py)
KIND_TRACE_ACK = 5  # its far end's acknowledgement (the TTL reached it): seq, idx echoed
FLAG_T2_KERNEL = 1  # reply: t2 is a kernel stamp
FLAG_FOLLOW_UP = 2  # reply: a follow-up with the kernel t3 will come


RECORD_VERSION = 1  # the ``v`` of every record the agent prints (docs/records.md)


def now_ns():
    return time.time_ns()


def encode(kind, seq, idx=0, flags=0, rid=0, a=0, b=0):
    return WIRE.pack(MAGIC, kind, flags, idx, 0, rid, seq, a, b)


def decode(data):
    """The fields of our datagram at the end of ``data``, or None if it is not ours."""
    if len(data) < WIRE.size:
        return None
    magic, kind, flags, idx, _pad, rid, seq, a, b = WIRE.unpack(data[-WIRE.size :])
    if magic != MAGIC:
        return None
    return kind, flags, idx, rid, seq, a, b
