"""A probe in flight: one exchange of a coded pair, from its send to its answer's end.

It runs on the far host under any Python 3.8+: standard library only. Shipped in the
agent bundle (``bootstrap.py``).
"""


class Exchange:
    """One probe of a coded pair, from send to the end of its answer."""

    __slots__ = (
        "dst",
        "expires",
        "follow",
        "idx",
        "nic",
        "pair",
        "peer",
        "sport",
        "t1",
        "t1k",
        "t2",
        "t2k",
        "t3",
        "t3k",
        "t4",
        "wire",
    )  # fmt: skip

    def __init__(self, peer, sport, pair, idx, t1, expires):
        self.peer = peer
        self.sport = sport
        self.pair = pair
        self.idx = idx
        self.t1 = t1  # user time until the kernel's TX stamp replaces it
        self.t1k = False
        self.t2 = None
        self.t2k = False
        self.t3 = None
        self.t3k = False
        self.t4 = None
        self.follow = False  # a follow-up with the kernel t3 is still to come
        self.expires = expires
        self.dst = None  # (address, port) probed: where its answers must come from
        self.nic = None  # the NIC (rail) it left from, on a multi-rail host
        self.wire = b""  # the datagram sent, MAC included: its TX stamp must quote it
