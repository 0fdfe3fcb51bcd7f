"""The sending half of the ``Agent`` (exchanges.py), whose state it reads and writes:
coded pairs on their schedule, each probe sealed, sent with its TX stamp asked for, and
entered as an exchange in flight.

It runs on the far host under any Python 3.8+: standard library only. Shipped in the
agent bundle (``bootstrap.py``).
"""

import errno
import time

from cwctl.probe.inflight import Exchange
from cwctl.probe.stamps import TX_STAMP_REQUEST, enable_timestamps
from cwctl.probe.trace import QUEUED_ERRORS
from cwctl.probe.wire import KIND_PROBE, encode

SEND_TRIES = 4  # a send that reports an earlier ICMP error is tried again, this often
FAR_BEHIND_NS = 200000000  # a pair due longer ago than this (a stall) is skipped


class Sender:
    """Coded pairs out: the schedule (``slot`` after ``slot``, targets staggered), the
    pair's spacing, and the probe's exchange in ``pending``."""

    def due_ns(self, i, pair):
        """When pair ``pair`` to target ``i`` is due: evenly spaced, targets staggered."""
        return self._slot_due_ns(pair * len(self.targets) + i)

    def _slot_due_ns(self, slot):
        """When slot ``slot`` is due, or None past the end of probing."""
        if not self.targets:
            return None
        due = self.start_ns + int(slot * self.slot_ns)
        return due if due < self.end_ns else None

    def next_due_ns(self):
        if self.start_ns is None:
            return None
        best = self.next_pair_ns  # kept by send_due: not recomputed on every wake-up
        if self.tracer is not None:
            traced = self.tracer.next_due_ns()
            if traced is not None and (best is None or traced < best):
                best = traced
        return best

    def send_due(self, now):
        if self.tracer is not None:
            self.traced("send_due", now)
        due = self.next_pair_ns
        targets = self.targets
        pairs = []
        while due is not None and due <= now:
            slot = self.slot
            self.slot = slot + 1
            if now - due <= FAR_BEHIND_NS:  # far behind (a stall): skip, do not burst
                pairs.append((targets[slot % len(targets)], slot // len(targets)))
            due = self.next_pair_ns = self._slot_due_ns(slot + 1)
        if pairs:
            self.send_pairs(pairs)

    def send_pair(self, name, pair):
        self.send_pairs([(name, pair)])

    def send_pairs(self, pairs):
        """Send coded pairs ``[(peer, pair number)]``: each pair's second probe leaves
        ``gap_ns`` after its first (or just after), the first probes of the next pairs
        going out meanwhile: a wake-up with several pairs due spins little."""
        clock, gap_ns, seal, pending = time.time_ns, self.gap_ns, self.guard.seal, self.pending
        seconds = []  # (when due, pair's send state) of second probes, oldest first
        for name, pair in pairs:
            i = pair % len(self.sources)
            sock = self.sources[i]
            state = (name, pair, sock, self.sports[i], self.rails.destination(name, sock))
            self._send_one(state, 0, clock, seal, pending)
            seconds.append((clock() + gap_ns, state))
            while seconds and clock() >= seconds[0][0]:
                self._send_one(seconds.pop(0)[1], 1, clock, seal, pending)
        for due, state in seconds:
            while clock() < due:  # the coded pair's spacing: a short spin (microseconds)
                pass
            self._send_one(state, 1, clock, seal, pending)

    def _send_one(self, state, idx, clock, seal, pending):
        name, pair, sock, sport, addr = state
        seq = self.next_seq
        self.next_seq = seq + 1
        t1 = clock()  # user time until the kernel's TX stamp replaces it
        probe = seal(encode(KIND_PROBE, seq, idx=idx))
        sent = self.send_probe(sock, probe, addr, name)
        self.sent[name] += 1
        # a probe that could not leave is an exchange lost at once, not a silent gap
        ex = Exchange(name, sport, pair, idx, t1, t1 + self.timeout_ns if sent else t1)
        ex.dst, ex.nic, ex.wire = addr, self.rails.nic_of(sock), probe
        pending[seq] = ex
        if self.next_expiry is None or ex.expires < self.next_expiry:
            self.next_expiry = ex.expires

    def send_stamped(self, sock, data, addr):
        """Send a datagram whose TX stamp we need, and count the stamp to read."""
        if self.per_packet:
            try:
                sock.sendmsg([data], TX_STAMP_REQUEST, 0, addr)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self.per_packet = False  # the kernel refuses the control message
                for each in self.by_fd.values():
                    enable_timestamps(each, False)
                sock.sendto(data, addr)
        else:
            sock.sendto(data, addr)
        self.cost.sent(len(data))
        self.stamped[sock] = self.stamped.get(sock, 0) + 1

    def send_probe(self, sock, data, addr, name):
        """Send one probe; an error left by an earlier ICMP message is retried (each ICMP
        error arriving meanwhile leaves one more: ``SEND_TRIES`` in all)."""
        for attempt in range(SEND_TRIES):
            try:
                self.send_stamped(sock, data, addr)
                return True
            except OSError as exc:
                if attempt < SEND_TRIES - 1 and exc.errno in QUEUED_ERRORS:
                    continue
                self.send_errors[name] = self.send_errors.get(name, 0) + 1
                if self.send_errors[name] == 1:  # one record per peer, the summary counts
                    self.error(f"send to {name} {addr[0]}:{addr[1]} failed: {exc}")
        return False
