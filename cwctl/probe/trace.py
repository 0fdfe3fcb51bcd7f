"""Path discovery, Paris-traceroute style, unprivileged: the hops of each probe flow.

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).

For every flow the agent probes with, and every flow it answers, trace packets leave
from the very socket the flow uses (so source address and port, destination address
and port and protocol are the probes' own: ECMP hashes them onto the same path), with
the IP TTL set per packet. A router whose TTL expires answers ICMP time-exceeded; with
``IP_RECVERR`` the kernel queues that answer on the socket's error queue, with the
router's address (the offender) and the payload of our packet, which names the trace
(``seq``) and its TTL (``idx``). The agent at the far end recognises a trace packet by
its kind, counts it as nothing and acknowledges it (``KIND_TRACE_ACK``), which is how
the tracer learns that a TTL reached the destination: the path is then complete.

Routers rate-limit ICMP (Linux: one answer per second per destination, a burst of
six), so the operator's plan (the ``trace`` entry of the start message) says which
TTLs can reveal a choice (a leaf-spine fabric: only the spine's TTL) and how many
trace packets per second to send; trace packets are spread over the scan at that rate,
a TTL that gets no answer is tried again (up to ``tries`` times) and then recorded as
``null``. Nothing is guessed. Flows the operator already knows are not traced.
"""

import errno
import random
import socket
import struct

from cwctl.probe.stamps import EXTENDED_ERR, IP_RECVERR, SO_EE_ORIGIN_ICMP
from cwctl.probe.wire import (
    KIND_TRACE,
    KIND_TRACE_ACK,
    RECORD_VERSION,
    WIRE,
    decode,
    encode,
    now_ns,
)

SOCKADDR_IN = struct.Struct("!HH4s")  # family (native order, read as a pair), port, addr
ICMP_DEST_UNREACH = 3
ICMP_TIME_EXCEEDED = 11
MAX_TTL = 32
# errors a send or receive reports once after an ICMP answer arrived (IP_RECVERR sets them)
QUEUED_ERRORS = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH)


def enable_recverr(sock):
    """ICMP errors about this socket's packets go to its error queue (no root needed)."""
    try:
        sock.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        return True
    except OSError:
        return False


def icmp_error(ancdata):
    """(ICMP type, offender address) from an error-queue message, or None."""
    for level, kind, data in ancdata:
        if level != socket.IPPROTO_IP or kind != IP_RECVERR or len(data) < EXTENDED_ERR.size:
            continue
        _errno, origin, icmp_type, _code, _pad, _info, _data = EXTENDED_ERR.unpack(
            data[: EXTENDED_ERR.size]
        )
        if origin != SO_EE_ORIGIN_ICMP:
            return None
        rest = data[EXTENDED_ERR.size : EXTENDED_ERR.size + SOCKADDR_IN.size]
        if len(rest) < SOCKADDR_IN.size:
            return icmp_type, None
        family = struct.unpack("=H", rest[:2])[0]
        if family != socket.AF_INET:
            return icmp_type, None
        return icmp_type, socket.inet_ntoa(rest[4:8])
    return None


class TracedFlow:
    """One traced 5-tuple: the socket it leaves from, where it goes, what came back."""

    __slots__ = ("acked", "check", "dst", "hops", "peer", "role", "sent", "sock", "ttls")

    def __init__(self, role, peer, sock, dst, ttls, check):
        self.role = role
        self.peer = peer
        self.sock = sock
        self.dst = dst  # (address, port)
        self.ttls = ttls  # the TTLs to send, in order
        self.check = check  # the completion check's TTL (no router answers it), or None
        self.hops = {}  # ttl -> offender address, or None once given up
        self.acked = None  # the smallest TTL the destination acknowledged
        self.sent = 0


class Tracer:
    """The trace plan of one scan, its packets in flight and the answers."""

    def __init__(self, agent, plan, start_ns, end_ns):
        self.agent = agent
        # trace packets a router may have to answer, per second, and how many at once
        self.interval_ns = int(1e9 / max(0.1, float(plan.get("rate", 2.0))))
        self.burst = max(1, int(plan.get("burst", 1)))
        self.timeout_ns = int(float(plan.get("timeout_s", 1.0)) * 1e9)
        self.tries = max(1, int(plan.get("tries", 3)))
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.flows = []
        self.queue = []  # (flow, ttl, try) in sending order
        self.pending = {}  # trace id -> (flow, ttl, try, sent_ns)
        self.next_id = 1
        self.sent = 0
        self.answers = 0
        self.done = 0
        self.emitted = set()
        self._plan(plan)
        # the burst at once, then one per interval; a crowd's plan (a burst of one: many
        # agents share each router, traceplan.py) starts at a random phase of its
        # interval instead, so agents that start together do not ask in step
        phase = int(random.random() * self.interval_ns) if self.burst == 1 else 0
        self.next_ns = start_ns - (self.burst - 1) * self.interval_ns + phase

    def _ttls(self, spec):
        """(TTLs, completion check). ``{"ttls": [2], "hops": 3}``: the TTLs that can reveal
        a choice, and a check at hops + 1 that only the destination answers (no ICMP);
        no hint: every TTL up to ``max_ttl`` (the destination acknowledges those past it)."""
        hops = spec.get("hops")
        if isinstance(hops, int) and 0 <= hops < MAX_TTL:
            want = sorted(set(int(t) for t in spec.get("ttls") or [] if 1 <= int(t) <= hops))
            return [*want, hops + 1], hops + 1
        return list(range(1, min(MAX_TTL, int(spec.get("max_ttl", 8))) + 1)), None

    def _flow(self, role, peer, sock, dst, spec):
        ttls, check = self._ttls(spec)
        self.flows.append(TracedFlow(role, peer, sock, dst, ttls, check))

    def _plan(self, plan):
        agent = self.agent
        known = set(tuple(k) for k in plan.get("known") or [])
        hints = plan.get("peers") or {}
        rails = agent.rails  # the probes' own sockets and destinations, rail by rail
        for peer in agent.targets:
            for sock in agent.sources:
                if ("probe", peer, sock.getsockname()[1]) not in known:
                    dst = rails.destination(peer, sock)
                    self._flow("probe", peer, sock, dst, hints.get(peer) or plan)
        for peer, sports in dict(plan.get("probed_by") or {}).items():
            if peer not in agent.peer_addr or peer == agent.host:
                continue
            for sport in sports:
                sock, address = rails.reply_socket(peer, int(sport))
                if sock is not None and ("reply", peer, int(sport)) not in known:
                    dst = (address, int(sport))
                    self._flow("reply", peer, sock, dst, hints.get(peer) or plan)
        # completion checks first (free), then TTL by TTL across flows, so the answers
        # one router tier owes are spread over the scan
        self.queue = [(f, f.check, 1) for f in self.flows if f.check is not None]
        depth = max((len(f.ttls) for f in self.flows), default=0)
        for i in range(depth):
            for flow in self.flows:
                if i < len(flow.ttls) and flow.ttls[i] != flow.check:
                    self.queue.append((flow, flow.ttls[i], 1))

    # --- sending ------------------------------------------------------------------

    def next_due_ns(self):
        if not self.queue:
            return None
        return max(self.next_ns, self.start_ns)

    def send_due(self, now):
        """Send what the pace allows: completion checks at once (only the destination
        answers them), the others ``rate`` per second after a first ``burst``."""
        floor = now - self.burst * self.interval_ns  # no credit piles up during a stall
        self.next_ns = max(self.next_ns, floor)
        while self.queue:
            flow, ttl, attempt = self.queue[0]
            free = ttl == flow.check
            if not free and now < self.next_ns:
                return
            self.queue.pop(0)
            if self._settled(flow, ttl):
                continue
            if not free:
                self.next_ns += self.interval_ns
            trace_id = self.next_id
            self.next_id += 1
            flow.sent += 1
            data = encode(KIND_TRACE, trace_id, idx=ttl)
            if self._send(flow.sock, data, flow.dst, ttl):
                self.sent += 1
                cost = getattr(self.agent, "cost", None)  # the agent's bytes on the wire
                if cost is not None:
                    cost.sent(len(data))
                self.pending[trace_id] = (flow, ttl, attempt, now)
            else:
                self._give_up(flow, ttl)

    def _send(self, sock, data, addr, ttl):
        """One packet with this TTL (a control message; setsockopt where that is refused)."""
        for attempt in (0, 1):
            try:
                cmsg = (socket.IPPROTO_IP, socket.IP_TTL, struct.pack("i", ttl))
                sock.sendmsg([data], [cmsg], 0, addr)
                return True
            except OSError as exc:
                if attempt == 0 and exc.errno in QUEUED_ERRORS:
                    continue
                if exc.errno == errno.EINVAL:  # no IP_TTL control message on this kernel
                    return self._send_setsockopt(sock, data, addr, ttl)
                return False
        return False

    def _send_setsockopt(self, sock, data, addr, ttl):
        old = sock.getsockopt(socket.IPPROTO_IP, socket.IP_TTL)
        try:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
            sock.sendto(data, addr)
            return True
        except OSError:
            return False
        finally:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, old)

    # --- answers ------------------------------------------------------------------

    def on_error(self, data, ancdata, sock=None, dst=None):
        """An ICMP error on the error queue: True if it answered a trace packet of ours
        still waiting for its answer (and was taken), False otherwise (the agent counts
        it as refused: an ICMP error never changes a probe's timestamps).

        The payload the router quoted names the trace and must be, byte for byte, the
        packet sent. A router that quotes only the UDP header (RFC 792's minimum) names
        none: then the answer is matched by its socket and destination (``dst``, the
        message's address) to the one trace packet of that 5-tuple that asks a router
        (TTLs go one at a time per flow where the plan says which hop to ask)."""
        got = icmp_error(ancdata)
        if got is None:
            return False
        fields = decode(data)
        if fields is not None:
            entry = self.pending.get(fields[4]) if fields[0] == KIND_TRACE else None
            if entry is None or data[-WIRE.size :] != encode(KIND_TRACE, fields[4], idx=entry[1]):
                return False
            del self.pending[fields[4]]
        else:
            entry = self._only_asking(sock, dst)
            if entry is None:
                return False
        flow, ttl, _attempt, _sent = entry
        icmp_type, offender = got
        self.answers += 1
        if icmp_type == ICMP_TIME_EXCEEDED and offender is not None:
            flow.hops[ttl] = offender
        elif icmp_type == ICMP_DEST_UNREACH and offender == flow.dst[0]:
            self._acked(flow, ttl)  # the destination itself answered
        else:
            flow.hops[ttl] = None
        self._maybe_finish(flow)
        return True

    def _only_asking(self, sock, dst):
        """The one pending trace packet of this socket and destination that a router can
        answer (not a completion check), taken out; None unless exactly one."""
        if sock is None or dst is None:
            return None
        dst = (dst[0], dst[1])
        asking = [
            i
            for i, (flow, ttl, _a, _s) in self.pending.items()
            if flow.sock is sock and flow.dst == dst and ttl != flow.check
        ]
        return self.pending.pop(asking[0]) if len(asking) == 1 else None

    def on_ack(self, fields):
        """A destination's acknowledgement of a trace packet: that TTL got through."""
        entry = self.pending.pop(fields[4], None)
        if entry is None:
            return
        flow, ttl = entry[0], entry[1]
        self._acked(flow, ttl)
        self._maybe_finish(flow)

    def _acked(self, flow, ttl):
        if flow.acked is None or ttl < flow.acked:
            flow.acked = ttl

    def expire(self, now, everything=False):
        """Trace packets unanswered past the timeout: try again later, or give up."""
        late = [i for i, e in self.pending.items() if everything or now - e[3] > self.timeout_ns]
        for trace_id in late:
            flow, ttl, attempt, _sent = self.pending.pop(trace_id)
            if attempt < self.tries and not everything:
                self.queue.append((flow, ttl, attempt + 1))
            else:
                self._give_up(flow, ttl)

    def _give_up(self, flow, ttl):
        flow.hops.setdefault(ttl, None)
        self._maybe_finish(flow)

    def _settled(self, flow, ttl):
        return ttl in flow.hops or (flow.acked is not None and ttl >= flow.acked)

    def _maybe_finish(self, flow):
        if id(flow) in self.emitted:
            return
        if not all(self._settled(flow, ttl) for ttl in flow.ttls):
            return
        self.emitted.add(id(flow))
        self.done += 1
        self.agent.out.record(self.record(flow))

    def record(self, flow):
        """The ``path`` record of a flow (docs/records.md): hops per TTL, null unknown."""
        last = (flow.acked - 1) if flow.acked is not None else max(flow.ttls)
        if flow.acked is None:  # unfinished: up to the last TTL that named a router
            answered = [t for t, a in flow.hops.items() if a is not None]
            last = max(answered) if answered else 0
        hops = [flow.hops.get(t) for t in range(1, last + 1)]
        rec = {
            "type": "path",
            "v": RECORD_VERSION,
            "host": self.agent.host,
            "peer": flow.peer,
            "role": flow.role,
            "src": flow.sock.getsockname()[0],
            "sport": flow.sock.getsockname()[1],
            "dst": flow.dst[0],
            "dport": flow.dst[1],
            "proto": "udp",
            "hops": hops,
            "complete": flow.acked is not None,
            "t_ns": now_ns(),
            "cached": False,
        }
        nic = self.agent.rails.nic_of(flow.sock)
        if nic is not None:  # the NIC the packets left from (multi-rail hosts)
            rec["nic"] = nic
        return rec

    def finish(self):
        """At the end of the scan: what is still in flight is unknown; a flow that was
        traced at all is reported, one never reached stays unknown (no record)."""
        self.expire(0, everything=True)
        self.queue = []
        for flow in self.flows:
            if flow.sent == 0:
                continue
            for ttl in flow.ttls:
                if not self._settled(flow, ttl):
                    flow.hops[ttl] = None
            self._maybe_finish(flow)

    def counts(self):
        """For the summary: flows planned and reported, packets sent, ICMP answers."""
        return {
            "flows": len(self.flows),
            "paths": self.done,
            "sent": self.sent,
            "answers": self.answers,
        }


def answer_trace(sock, fields, addr):
    """The far end of a trace: acknowledge it on the socket it came to; count nothing."""
    _kind, _flags, idx, _rid, seq, _a, _b = fields
    for attempt in (0, 1):
        try:
            sock.sendto(encode(KIND_TRACE_ACK, seq, idx=idx), addr)
            return
        except OSError as exc:
            if attempt == 0 and exc.errno in QUEUED_ERRORS:
                continue
            return
