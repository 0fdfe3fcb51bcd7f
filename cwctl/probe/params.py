"""The agent's params, read once: each field typed, each default written here and
nowhere else in the agent.

The ``params`` control message is the first line cwctl sends an agent
(``transport/base.py``). ``AgentParams(msg)`` reads every field the prober, its rails and
its guard use; a value of the wrong type raises ``ValueError`` or ``TypeError`` and the
agent says so and exits 2 before binding anything. It runs on the far host under any
Python 3.8+: standard library only, no annotations evaluated at run time.
"""

import socket

from cwctl.probe.batch import BATCH_ROWS, BATCH_S

DEADLINE_S = 60.0  # the agent ends by itself this long after its params, whatever happens
RATE = 100.0  # coded pairs a second to each peer
GAP_NS = 20000  # between the two probes of a coded pair
DURATION_S = 2.0  # of probing
TIMEOUT_S = 0.5  # an exchange not answered by then is lost
LINGER_AFTER_TIMEOUT_S = 0.2  # after the last pair: the timeout and this, to answer peers
PORTS = 4  # source sockets per rail (ECMP entropy)


class AgentParams:
    """One agent's params. ``rails``: ``[(nic or None, address)]``, the one ``bind``
    address when no rails are given; ``port``: every rail's answering port (0: any);
    ``port_wish``: the port each rail would like (a list, one a rail); ``sports``: the
    source ports wished for, rail after rail; ``tos``: the IP TOS byte of every probe
    packet; ``auth``: ``{"key": hex, "nonce": hex}`` or None (no signing)."""

    __slots__ = (
        "auth",
        "batch_rows",
        "batch_s",
        "deadline_s",
        "duration_s",
        "gap_ns",
        "host",
        "linger_s",
        "mode",
        "pack",
        "port",
        "port_wish",
        "ports",
        "rails",
        "rate",
        "sports",
        "timeout_ns",
        "tos",
        "trace",
    )  # fmt: skip

    def __init__(self, msg):
        self.host = str(msg.get("host") or socket.gethostname())
        self.deadline_s = float(msg.get("deadline_s", DEADLINE_S))
        self.mode = msg.get("mode")  # "chrony": feed chronyd, no probing (chronysock.py)
        self.rate = float(msg.get("rate", RATE))
        self.gap_ns = int(msg.get("gap_ns", GAP_NS))
        self.duration_s = float(msg.get("duration_s", DURATION_S))
        self.timeout_ns = int(float(msg.get("timeout_s", TIMEOUT_S)) * 1e9)
        linger = msg.get("linger_s")
        self.linger_s = (
            self.timeout_ns / 1e9 + LINGER_AFTER_TIMEOUT_S if linger is None else float(linger)
        )
        self.batch_rows = max(0, int(msg.get("batch", BATCH_ROWS)))  # 0: probe records
        self.batch_s = float(msg.get("batch_s", BATCH_S))
        self.pack = bool(msg.get("pack", True))
        self.trace = bool(msg.get("trace"))
        binds = msg.get("rails") or [[None, str(msg.get("bind") or "0.0.0.0")]]
        self.rails = [(None if nic is None else str(nic), str(addr)) for nic, addr in binds]
        self.port = int(msg.get("port", 0))
        self.ports = max(1, int(msg.get("ports", PORTS)))
        self.sports = [int(p) for p in msg.get("sports") or []]
        wish = msg.get("port_wish")  # one port, or one per rail
        wishes = wish if isinstance(wish, list) else [wish] * len(self.rails)
        self.port_wish = [int(w) if w else 0 for w in wishes]
        self.tos = int(msg.get("tos", 0)) & 0xFF
        auth = msg.get("auth")
        self.auth = dict(auth) if auth else None
