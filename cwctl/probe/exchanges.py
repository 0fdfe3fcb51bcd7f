"""The prober and answerer: coded pairs on a schedule, answers, follow-ups, records
(its sending half in sender.py, its error-queue half in errqueue.py).

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``).
"""

import os
import platform
import socket

from cwctl.probe.auth import Guard
from cwctl.probe.batch import Batch, probe_record
from cwctl.probe.cost import Cost
from cwctl.probe.errqueue import ErrorQueue
from cwctl.probe.hostfacts import guess_vm, read_text
from cwctl.probe.rails import Rails
from cwctl.probe.sender import SEND_TRIES, Sender
from cwctl.probe.stamps import (
    RX_ANCILLARY,
    SO_TIMESTAMPNS,
    TIMESPEC,
    enable_timestamps,
    interface_of,
    kernel_stamp,
    nic_timestamping,
    per_packet_stamps,
)
from cwctl.probe.trace import QUEUED_ERRORS, Tracer, answer_trace, enable_recverr
from cwctl.probe.wire import (
    FLAG_FOLLOW_UP,
    FLAG_T2_KERNEL,
    KIND_FOLLOW,
    KIND_PROBE,
    KIND_REPLY,
    KIND_TRACE,
    KIND_TRACE_ACK,
    RECORD_VERSION,
    encode,
    now_ns,
)

SOL_SOCKET = socket.SOL_SOCKET
RX_BYTES = 256  # our datagrams are 52 bytes; anything longer is not ours
# The loop (agent.py) runs at most once per tick: what arrives or falls due within it
# (probes to answer, stamps, replies, pairs to send) is handled in one wake-up, not one
# each. The stamps are the kernel's, so waiting changes none of them; a pair leaves at
# most a tick late (the schedule is kept, not the phase). The tick is TICK_S, or where
# this agent's own pairs are sparser the gap between them, at most a TICKS_PER_TIMEOUT-th
# of the exchange's timeout (a reply, its follow-up and their reading each wait a tick
# at most). At the watch budget (2 pairs/s to 7 peers: 71 ms) an agent's CPU on
# `cwctl scan --local 8 --budget watch` fell from 0.80-0.99 % to 0.48-0.82 % of a core.
TICK_S = 0.02
TICKS_PER_TIMEOUT = 6


class Agent(Sender, ErrorQueue):
    def __init__(self, params, out):
        """``params``: ``AgentParams`` (params.py, the defaults)."""
        self.out = out
        self.host = params.host
        self.rate = params.rate
        self.gap_ns = params.gap_ns
        self.duration_s = params.duration_s
        self.timeout_ns = params.timeout_ns
        self.linger_s = params.linger_s
        self.batch_rows = params.batch_rows  # 0: probe records
        self.batch_s = params.batch_s
        self.pack = params.pack
        self.batch = None  # a Batch once the targets are known
        self.rails = Rails(params)  # one socket set per probe address (rails.py)
        self.answer = self.rails.answers[0]
        self.answers = set(self.rails.answers)
        self.sources = self.rails.sources
        self.rx_kernel, self.tx_kernel = True, True
        # each probe and reply asks for its own TX stamp; follow-ups and traces do not
        self.per_packet = per_packet_stamps(platform.release())
        for sock in self.rails.all_sockets():
            rx, tx = enable_timestamps(sock, self.per_packet)
            self.rx_kernel = self.rx_kernel and rx
            self.tx_kernel = self.tx_kernel and tx
        self.by_fd = {s.fileno(): s for s in self.rails.all_sockets()}
        # user-time stamps: every wait would show in them, so no tick (TICK_S)
        self.tick_ns = int(TICK_S * 1e9) if self.rx_kernel and self.tx_kernel else 0
        # path discovery (trace.py): ICMP answers to our sockets' packets, no root needed
        self.tracing = params.trace and all(map(enable_recverr, self.by_fd.values()))
        self.tracer = None
        self.sports = [s.getsockname()[1] for s in self.sources]
        self.peer_addr = {}  # name -> (address, port) of its first rail
        self.name_of = {}  # address -> name (for the summary's rx counts)
        self.targets = []  # peers this agent probes
        self.pending = {}  # seq -> Exchange
        self.replies = {}  # rid -> (address, seq, t3, socket, datagram) awaiting its TX stamp
        self.next_seq = 1
        self.next_rid = 1
        self.sent = {}
        self.complete = {}
        self.lost = {}
        self.rx = {}
        self.send_errors = {}
        self.start_ns = None
        self.end_ns = None
        # the schedule is one sequence of slots: slot k is pair k // T to target k % T
        self.slot = 0
        self.slot_ns = 0.0  # ns between slots: the period over the targets
        self.next_pair_ns = None  # when the next slot is due (None: none is)
        self.stamped = {}  # socket -> TX stamps asked for since its error queue was read
        self.next_expiry = None  # no pending exchange expires before this (lower bound)
        # receive buffers made once; each datagram is read into them (recvmsg_into)
        self.rx_buf = bytearray(RX_BYTES)
        self.rx_bufs = [self.rx_buf]
        self.rx_view = memoryview(self.rx_buf)
        self.cost = Cost()  # CPU, bytes on the wire, lateness: the summary's "cost"
        self.guard = Guard(params.auth)  # signs what it sends, drops what is not this scan's

    def hello(self):
        uname = platform.uname()
        return {
            "type": "hello",
            "v": RECORD_VERSION,
            "host": self.host,
            "hostname": socket.gethostname(),
            "kernel": uname.release,
            "os": uname.system,
            "machine": uname.machine,
            "python": platform.python_version(),
            "pid": os.getpid(),
            "clocksource": read_text(
                "/sys/devices/system/clocksource/clocksource0/current_clocksource"
            ),
            "vm": guess_vm(),
            "ts_caps": self.ts_caps(),
            **self.rails.hello(),
            "time_ns": now_ns(),
        }

    def ts_caps(self):
        """Kernel stamps the sockets took, and what the interface could do in hardware."""
        caps = {"rx_sw": self.rx_kernel, "tx_sw": self.tx_kernel, "hw": False, "hw_used": False}
        try:
            iface = interface_of(self.answer.getsockname()[0])
            if iface is not None:
                caps.update({"iface": iface, **nic_timestamping(iface)})
        except Exception:  # a host fact, never a reason to fail
            pass
        return caps

    def start(self, msg):
        for name, entry in dict(msg.get("peers") or {}).items():
            self.peer_addr[str(name)] = (str(entry[0]), int(entry[1]))
            for address in self.rails.learn_peer(str(name), entry):
                self.name_of[address] = str(name)
        self.guard.set_peers(self.peer_addr, self.name_of)  # every rail of every peer
        self.targets = [str(p) for p in msg.get("probe") or [] if str(p) in self.peer_addr]
        self.targets = [p for p in self.targets if p != self.host]
        start_ns = int(msg.get("start_ns") or 0)
        local = now_ns()
        if abs(start_ns - local) > 5 * 1000000000:  # this clock is far off: start relative
            start_ns = local + int(float(msg.get("start_in_s", 0.5)) * 1e9)
        self.start_ns = start_ns
        self.end_ns = start_ns + int(self.duration_s * 1e9)
        for name in self.targets:
            self.sent[name] = self.complete[name] = self.lost[name] = 0
        self.slot = 0
        self.slot_ns = 1e9 / self.rate / max(1, len(self.targets))
        if self.tick_ns:  # kernel stamps: the gap between pairs, within the tick's bounds
            sparse = min(self.slot_ns, self.timeout_ns / TICKS_PER_TIMEOUT)
            self.tick_ns = int(max(TICK_S * 1e9, sparse))
        self.next_pair_ns = self._slot_due_ns(0)
        if self.batch_rows:
            self.batch = Batch(self.host, self.targets, self.gap_ns, self.pack)
        if self.tracing and msg.get("trace"):
            self.tracer = Tracer(self, msg["trace"], self.start_ns, self.end_ns)

    # --- receiving ----------------------------------------------------------------

    def drain(self, sock):
        recv, bufs, view, ancillary = sock.recvmsg_into, self.rx_bufs, self.rx_view, RX_ANCILLARY
        open_, received, on_datagram = self.guard.open, self.cost.received, self.on_datagram
        while True:
            try:
                size, anc, _flags, addr = recv(bufs, ancillary)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. ECONNREFUSED from an earlier ICMP error
                if exc.errno in QUEUED_ERRORS:
                    continue
                raise
            received(size)
            fields = open_(view[:size])
            if fields is None:
                continue
            stamp = 0
            if anc:  # the usual receive: one SO_TIMESTAMPNS (kernel_stamp for the rest)
                level, kind, data = anc[0]
                if kind == SO_TIMESTAMPNS and level == SOL_SOCKET and len(anc) == 1:
                    sec, nsec = TIMESPEC.unpack_from(data)
                    stamp = sec * 1000000000 + nsec
                else:
                    stamp = kernel_stamp(anc)
            on_datagram(sock, fields, stamp, addr)

    def on_datagram(self, sock, fields, stamp, addr):
        kind, flags, idx, rid, seq, a, b = fields
        if kind == KIND_TRACE:  # a peer's path discovery: acknowledged, counted as nothing
            if addr[0] in self.guard.peer_ips:  # unsigned (no timestamps): peers only
                answer_trace(sock, fields, addr)
            else:
                self.guard.auth.drop("unknown_peer")
        elif kind == KIND_TRACE_ACK:
            if self.tracer is not None:
                self.traced("on_ack", fields)
        elif kind == KIND_PROBE and sock in self.answers:
            if not self.guard.accept_probe(addr, seq):
                return
            t2k = bool(stamp)
            t2 = stamp or now_ns()
            self.rx[addr[0]] = self.rx.get(addr[0], 0) + 1
            rid = self.next_rid
            self.next_rid = (self.next_rid + 1) & 0xFFFFFFFF or 1
            follow = self.tx_kernel
            reply_flags = (FLAG_T2_KERNEL if t2k else 0) | (FLAG_FOLLOW_UP if follow else 0)
            t3 = now_ns()
            if t2k:  # answered this long after the kernel had it: was the agent starved?
                self.cost.ran(t2 + self.tick_ns, t3)  # (a tick's wait is by design)
            reply = self.guard.seal(encode(KIND_REPLY, seq, idx, reply_flags, rid, t2, t3))
            if not self.send_reply(sock, reply, addr):
                return
            if follow:
                self.replies[rid] = (addr, seq, t3, sock, reply)
        elif kind == KIND_REPLY:
            ex = self.pending.get(seq)
            expected = ex.dst if ex is not None else None
            if not self.guard.accept_answer(ex, addr, expected, idx, ex and ex.t4 is not None):
                return
            ex.t4 = stamp or now_ns()
            ex.t2, ex.t2k = a, bool(flags & FLAG_T2_KERNEL) and bool(stamp)
            if not ex.t3k:  # the follow-up may overtake its reply
                ex.t3 = b
                ex.follow = bool(flags & FLAG_FOLLOW_UP)
            if ex.follow:  # answered: give the follow-up its own timeout, not the probe's rest
                ex.expires = max(ex.expires, now_ns() + self.timeout_ns)
            self.maybe_done(seq, ex)
        elif kind == KIND_FOLLOW:
            ex = self.pending.get(seq)
            expected = ex.dst if ex is not None else None
            idx = ex.idx if ex is not None else idx  # follow-ups carry no idx
            if not self.guard.accept_answer(ex, addr, expected, idx, ex and ex.t3k):
                return
            ex.t3, ex.t3k, ex.follow = a, True, False
            self.maybe_done(seq, ex)

    def send_reply(self, sock, data, addr, stamped=True):
        """Send a reply (``stamped``: its TX stamp is the real t3) or a follow-up; an
        error left by an earlier ICMP answer (a path trace's, with IP_RECVERR) is
        reported by the next send: tried again (``SEND_TRIES``)."""
        for attempt in range(SEND_TRIES):
            try:
                if stamped or not self.per_packet:  # socket-wide stamps: every send has one
                    self.send_stamped(sock, data, addr)
                else:
                    sock.sendto(data, addr)
                    self.cost.sent(len(data))
                return True
            except OSError as exc:
                if attempt < SEND_TRIES - 1 and exc.errno in QUEUED_ERRORS:
                    continue
                return False
        return False

    def send_follow(self, addr, seq, t3, sock):
        self.send_reply(sock, self.guard.seal(encode(KIND_FOLLOW, seq, a=t3)), addr, False)

    def expire_replies(self, now):
        """Replies whose TX stamp never came: their initiators keep the user-time t3.
        They were sent in order, so the oldest are first."""
        replies = self.replies
        while replies:
            rid = next(iter(replies))
            if now - replies[rid][2] <= self.timeout_ns:
                return
            del replies[rid]

    # --- records ------------------------------------------------------------------

    def maybe_done(self, seq, ex):
        if ex.t4 is not None and (ex.t1k or not self.tx_kernel) and not ex.follow:
            del self.pending[seq]
            self.emit(ex)

    def next_expiry_ns(self):
        """When the first pending exchange may time out (None: none is pending): a lower
        bound, kept as exchanges are sent and made exact by ``expire``."""
        if not self.pending:
            self.next_expiry = None
        return self.next_expiry

    def expire(self, now, everything=False):
        if everything or (self.next_expiry is not None and self.next_expiry <= now):
            pending = self.pending
            for seq in [s for s, ex in pending.items() if everything or ex.expires <= now]:
                self.emit(pending.pop(seq))
            self.next_expiry = min([ex.expires for ex in pending.values()], default=None)
        if self.tracer is not None:
            self.traced("finish") if everything else self.traced("expire", now)

    def traced(self, method, *args):
        """Call the tracer; path discovery failing must never stop the probing."""
        try:
            return getattr(self.tracer, method)(*args)
        except Exception as exc:
            self.error(f"path discovery stopped: {type(exc).__name__}: {exc}")
            self.tracer = None
            return False

    def emit(self, ex):
        answered = ex.t4 is not None
        kernel = ex.t1k and (not answered or (ex.t2k and ex.t3k))
        if answered:
            self.complete[ex.peer] += 1
        else:
            self.lost[ex.peer] += 1
        ts = "sw" if kernel else "user"
        if self.batch is not None:
            stamps = (ex.t2, ex.t3, ex.t4) if answered else (0, 0, 0)
            self.batch.add(ex.peer, ex.sport, ex.pair, ex.idx, ts, ex.t1, *stamps, nic=ex.nic)
            if len(self.batch) >= self.batch_rows:
                self.flush_batch()
            return
        self.out.record(probe_record(self.host, self.gap_ns, ex, ts))

    def batch_wait_s(self, mono):
        """Seconds until the open batch is due out (None when it is empty)."""
        if not self.batch:
            return None
        return self.batch.since + self.batch_s - mono

    def flush_batch(self):
        if self.batch:
            self.out.record(self.batch.take())

    def summary(self, reason):
        rx = {}
        for address, count in self.rx.items():
            name = self.name_of.get(address, address)
            rx[name] = rx.get(name, 0) + count
        return {
            "type": "summary",
            "v": RECORD_VERSION,
            "host": self.host,
            "reason": reason,
            "sent": dict(self.sent),
            "complete": dict(self.complete),
            "lost": dict(self.lost),
            "rx": rx,
            "send_errors": dict(self.send_errors),
            "cost": self.cost.summary(),
            "trace": self.tracer.counts() if self.tracer is not None else None,
            "dropped": dict(self.guard.dropped),
        }

    def error(self, message, fatal=False):
        self.out.error(message, fatal)

    def close(self):
        for sock in self.by_fd.values():
            sock.close()
