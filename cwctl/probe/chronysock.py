"""The agent's chrony feeder: writes cwctl's clock estimate to chronyd's SOCK refclock.

It runs on the far host under any Python 3.8+: standard library only, no ``match``, no
annotations evaluated at run time. Shipped in the agent bundle (``bootstrap.py``); the
agent hands over to ``feed()`` when its params say ``"mode": "chrony"``.

chronyd (``refclock SOCK PATH``) binds a Unix datagram socket at PATH and reads one
``struct sock_sample`` per datagram (chrony's ``refclock_sock.c``)::

    struct timeval tv;   /* the instant of the measurement, in system (host) time */
    double offset;       /* true time minus system time at tv, in seconds */
    int pulse;           /* 0: a full time sample, not a PPS pulse */
    int leap;            /* 0: no leap second pending */
    int _pad;
    int magic;           /* 0x534f434b, "SOCK" */

in the host's native layout (``@``: C longs for the timeval, 40 bytes in all on a 64-bit
Linux; chronyd on a 32-bit one also takes the other ``time_t`` size). chronyd drops a
sample whose ``tv`` lies in its future or is older than about two polls, so every
sample is stamped *now* and carries the offset at that very instant.

cwctl's ``offset_ns`` is the host's clock minus the reference's, so chrony's offset
(true minus system) is its negation. The estimate holds at ``t_ref_ns`` (reference
time) and moves with the drift: at host time ``t`` the offset ``x`` is
``offset_ns + drift_ppb * 1e-9 * (t - x - t_ref_ns)``, where ``t - x`` is that instant
on the reference's clock; solved for ``x``.

Control lines on stdin (after ``params``: ``socket``, ``period_s``, ``hold_s``,
``idle_exit_s``):

``{"type": "estimate", "round", "offset_ns", "drift_ppb", "t_ref_ns", "duration_s"}``
    Feed this from now on, one sample every ``period_s``, until ``hold_s`` after
    ``t_ref_ns`` (a stale estimate is not fed) or the next estimate. Each sample also
    carries what chronyd (or anything) did to the clock since ``t_ref_ns`` beyond the
    rate it ran at during the scan (``clockwatch.py``), when the feeder was already
    watching the clock then: else chronyd would correct the same error on every poll.
``{"type": "withdraw", "reason"}``
    Stop feeding (the host no longer qualifies); chronyd sees the source go quiet.
``{"type": "keepalive"}``
    Nothing, but cwctl is still there.

It prints ``hello`` (after checking the socket), one ``sample`` record per datagram
sent (``round``, ``tv_ns``, ``offset_s``, ``steered_ns``), ``error`` records (a send
that failed), and a ``summary`` last. It exits on stdin EOF, on SIGTERM/SIGHUP, or
after ``idle_exit_s`` without any control line: when cwctl stops, nothing stays behind
on the host. Its hard lifetime is a lease (``arm_lease``): ``signal.alarm`` re-armed by
every control line, so a feeder stuck in anything dies soon after cwctl falls silent.
"""

import math
import os
import select
import signal
import socket
import stat
import struct
import time

from cwctl.probe.clockwatch import ClockWatch, read_gap

SOCK_MAGIC = 0x534F434B
# timeval (time_t and suseconds_t are C longs on Linux), offset, pulse, leap, pad, magic
SOCK_SAMPLE = struct.Struct("@lldiiii")
RECORD_VERSION = 1


def pack_sample(tv_ns, offset_s, leap=0):
    """One ``sock_sample`` datagram: ``tv_ns`` (truncated to microseconds), ``offset_s``."""
    sec, rem = divmod(int(tv_ns), 1_000_000_000)
    return SOCK_SAMPLE.pack(sec, rem // 1000, float(offset_s), 0, int(leap), 0, SOCK_MAGIC)


def host_offset_ns(estimate, t_host_ns):
    """cwctl's offset (host minus reference, ns) at the host's clock reading ``t_host_ns``."""
    off = float(estimate["offset_ns"])
    rate = float(estimate.get("drift_ppb") or 0.0) * 1e-9
    elapsed_ns = int(t_host_ns) - int(estimate["t_ref_ns"])  # ints: no float rounding here
    # x = off + rate * (elapsed - x), solved for x
    return (off + rate * elapsed_ns) / (1.0 + rate)


def sample_now(estimate, now_ns=None, steered_ns=0.0):
    """(tv_ns, offset_s, datagram) for a sample taken now: chrony's offset is the negation
    of cwctl's, plus ``steered_ns``, what was done to the clock since (``clockwatch``)."""
    now = time.time_ns() if now_ns is None else int(now_ns)
    tv_ns = now - now % 1000  # what the timeval can say
    offset_s = -(host_offset_ns(estimate, tv_ns) + steered_ns) * 1e-9
    return tv_ns, offset_s, pack_sample(tv_ns, offset_s)


def check_socket(path):
    """Why ``path`` cannot take samples, or None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"no socket at {path}: is chronyd running with 'refclock SOCK {path}'?"
    except OSError as exc:
        return f"cannot reach {path}: {exc.strerror}"
    if not stat.S_ISSOCK(st.st_mode):
        return f"{path} is not a socket"
    if not os.access(path, os.W_OK):
        return (
            f"{path} is not writable by uid {os.getuid()} (run the agent as chronyd's user or root)"
        )
    return None


class SockFeeder:
    """The current estimate and the samples it gave."""

    def __init__(self, params, out):
        self.out = out
        self.path = str(params["socket"])
        self.period_s = max(0.01, float(params.get("period_s", 1.0)))
        self.hold_ns = int(float(params.get("hold_s", 60.0)) * 1e9)
        self.estimate = None
        self.sent = 0
        self.failed = 0
        self.last_error = None
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.watch = ClockWatch()  # how the clock is steered, reading by reading

    def on_control(self, msg):
        kind = msg.get("type")
        if kind == "estimate":
            self.estimate = msg
        elif kind == "withdraw":
            self.estimate = None
        elif kind != "keepalive":
            self.out.error(f"ignored control message {kind!r}")

    def tick(self):
        """Send one sample if the estimate is fresh; False when there was none to send."""
        reading = read_gap()
        self.watch.add(reading)
        est = self.estimate
        if est is None:
            return False
        now = reading[0] if reading is not None else time.time_ns()
        if now - int(est["t_ref_ns"]) > self.hold_ns:
            self.estimate = None  # stale: chronyd is better off without it
            return False
        t_ref_host = int(est["t_ref_ns"]) + int(est["offset_ns"])  # the host's clock then
        half_ns = float(est.get("duration_s") or 0.0) * 5e8
        steered = self.watch.steered_ns(t_ref_host, reading, half_ns)
        tv_ns, offset_s, data = sample_now(est, now, steered or 0.0)
        try:
            self.sock.sendto(data, self.path)
        except OSError as exc:
            self.failed += 1
            why = f"cannot send to {self.path}: {exc.strerror or exc}"
            if why != self.last_error:  # once per cause, not once per sample
                self.out.error(why)
            self.last_error = why
            return True
        self.last_error = None
        self.sent += 1
        rec = {"type": "sample", "v": RECORD_VERSION, "host": self.out.host}
        rec.update(round=est.get("round"), tv_ns=tv_ns, offset_s=offset_s, steered_ns=steered)
        self.out.record(rec)
        return True


LEASE_SLACK_S = 10  # the hard lifetime's margin past idle_exit_s


def arm_lease(idle_s):
    """The feeder's hard lifetime, renewed by every word from cwctl: SIGALRM (its default
    action ends the process) ``LEASE_SLACK_S`` after the soft idle exit would have."""
    signal.alarm(math.ceil(min(idle_s, 1e7)) + LEASE_SLACK_S)


def feed(params, control, out):
    """The feeder's life: check the socket, hello, samples until EOF or idle; summary."""
    stop = {"reason": None}
    idle_s = float(params.get("idle_exit_s", 120.0))
    arm_lease(idle_s)  # a feeder lives between scans: a lease, not the scan's lifetime

    def on_signal(signum, _frame):
        stop["reason"] = f"signal {signum}"

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)
    path = str(params.get("socket") or "")
    problem = check_socket(path) if path else "no socket path in the params"
    if problem is not None:
        out.error(problem, fatal=True)
        out.finish()
        return 2
    feeder = SockFeeder(params, out)
    hello = {"type": "hello", "v": RECORD_VERSION, "host": out.host, "pid": os.getpid()}
    hello.update(mode="chrony", socket=path, sample_size=SOCK_SAMPLE.size)
    out.record(hello)
    out.finish()
    os.set_blocking(0, False)
    for msg in control.backlog:
        feeder.on_control(msg)
    control.backlog = []
    poller = select.poll()
    poller.register(0, select.POLLIN)
    last_heard = time.monotonic()
    next_tick = time.monotonic()
    reason = None
    while reason is None:
        wait_s = max(0.0, next_tick - time.monotonic())
        if poller.poll(wait_s * 1000):
            msgs = control.read_lines()
            if msgs:
                last_heard = time.monotonic()
                arm_lease(idle_s)
            for msg in msgs:
                had = feeder.estimate is not None
                feeder.on_control(msg)
                if not had and feeder.estimate is not None:
                    next_tick = time.monotonic()  # a first estimate: feed it at once
            if control.eof:
                reason = "stdin closed"
        now = time.monotonic()
        if reason is None and now >= next_tick:
            feeder.tick()
            next_tick = max(next_tick + feeder.period_s, now)
            out.flush()
        if stop["reason"]:
            reason = stop["reason"]
        elif time.monotonic() - last_heard > idle_s:
            reason = "no word from cwctl"
        if out.broken:
            reason = reason or "stdout closed"
    feeder.sock.close()
    summary = {"type": "summary", "v": RECORD_VERSION, "host": out.host, "mode": "chrony"}
    summary.update(reason=reason, sent=feeder.sent, failed=feeder.failed)
    out.record(summary)
    out.finish()
    return 0
