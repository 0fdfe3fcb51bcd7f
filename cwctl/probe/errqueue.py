"""What an agent takes from its sockets' error queues: the kernel's TX stamps of its own
datagrams still in flight, and ICMP answers to its trace packets; nothing else.

It runs on the far host under any Python 3.8+: standard library only. Shipped in the
agent bundle (``bootstrap.py``).

Only the kernel writes an entry's origin (``ee_origin``): a TX stamp cannot come from
the wire. An ICMP error can (anyone on the path can forge one, quoting a datagram it
sniffed whole, MAC included): it is taken only as the answer to a trace packet waiting
for it (``trace.Tracer.on_error``), never as a timestamp. Everything else is counted
in the guard's ``dropped`` (``icmp_unasked``, ``stray_stamp``) and changes nothing.
"""

import errno

from cwctl.probe.stamps import (
    ERR_ANCILLARY,
    MSG_ERRQUEUE,
    SO_EE_ORIGIN_ICMP,
    SO_EE_ORIGIN_TIMESTAMPING,
    error_origin,
    kernel_stamp,
)
from cwctl.probe.wire import KIND_PROBE, KIND_REPLY, decode

ERR_BYTES = 512  # an error-queue message: the looped-back packet, or an ICMP quote


class ErrorQueue:
    """The error-queue half of the ``Agent`` (exchanges.py), whose state it reads:
    ``pending`` (seq -> Exchange), ``replies`` (rid -> entry), ``guard``, ``tracer``,
    ``tracing``, ``stamped`` (socket -> TX stamps asked for since its queue was read)."""

    def drain_errqueue(self, sock, expected=-1):
        """Read the socket's error queue until it is empty, or until ``expected``
        messages were read (the stamps just asked for: no read that finds it empty)."""
        while expected:
            expected -= 1
            try:
                data, anc, _flags, addr = sock.recvmsg(ERR_BYTES, ERR_ANCILLARY, MSG_ERRQUEUE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    return
                raise
            origin = error_origin(anc)
            if origin == SO_EE_ORIGIN_TIMESTAMPING:  # written by this kernel, never the wire
                self.on_tx_stamp(data, kernel_stamp(anc))
            elif origin != SO_EE_ORIGIN_ICMP:
                self.guard.auth.drop("stray_stamp")
            elif self.tracer is None or not self.traced("on_error", data, anc, sock, addr):
                self.guard.auth.drop("icmp_unasked")  # quoting a probe or reply: no stamp

    def on_tx_stamp(self, data, stamp):
        """The kernel's TX stamp of a datagram this agent sent: taken only if the looped
        bytes end with the very datagram (MAC included) of a probe or reply in flight;
        nothing waits for a follow-up's or a trace packet's."""
        fields = decode(data)
        if fields is None or not stamp:
            return self.guard.auth.drop("stray_stamp")
        kind, _flags, _idx, rid, seq, _a, _b = fields
        if kind == KIND_PROBE:
            ex = self.pending.get(seq)
            if ex is None or ex.t1k or not data.endswith(ex.wire):
                return self.guard.auth.drop("stray_stamp")
            ex.t1, ex.t1k = stamp, True
            self.maybe_done(seq, ex)
        elif kind == KIND_REPLY:
            entry = self.replies.get(rid)
            if entry is None or not data.endswith(entry[4]):
                return self.guard.auth.drop("stray_stamp")
            del self.replies[rid]
            self.send_follow(entry[0], entry[1], stamp, entry[3])
        return None

    def drain_stamped(self):
        """Read the TX stamps of what this wake-up sent, now: a software stamp is queued
        as the packet leaves, so this spares the poll wake-up it would cost later. Twice:
        a reply's stamp sends its follow-up, whose own stamp (where every datagram is
        stamped) is then there to take. ``stamped``: socket -> stamps asked for."""
        if not self.stamped:
            return
        if not self.tx_kernel:
            self.stamped.clear()
            return
        for _ in (0, 1):
            socks, self.stamped = self.stamped, {}
            for sock, expected in socks.items():
                # with IP_RECVERR (path tracing) ICMP errors queue there too, and each
                # one left sets the socket's error again (the next send fails): read all
                self.drain_errqueue(sock, -1 if self.tracing else expected)
            if not self.stamped:
                return
