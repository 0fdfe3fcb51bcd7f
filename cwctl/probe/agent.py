"""cwctl probe agent: its main loop, run on each host through an SSH session.

It must run on any host's Python 3.8+, so: the standard library only, no ``match``, no
``X | Y`` unions evaluated at run time. The bootstrap (``cwctl/probe/bootstrap.py``)
ships this module and its siblings as one bundle, imports them from memory under their
real names and calls ``main()``; stdin stays open as the control channel and nothing is
written to disk. The parts: ``wire`` (the datagram), ``stamps`` (kernel timestamps),
``exchanges`` (the prober/answerer), ``batch`` (records out), ``channel`` (stdout and
stdin), ``params`` (the params read once, with every default), ``gpu/`` (the GPU
sampler), this module (the loop: ``Loop``, one handler per kind of event).

Control protocol (JSON lines on stdin, in this order):

``{"type": "params", "host", "bind", "port", "ports", "rate", "gap_ns", "duration_s",
"deadline_s", "timeout_s", "linger_s", "batch", "batch_s", "pack"}``
    Bind one answer socket on ``bind:port`` (0 = any) and ``ports`` source sockets,
    then print a ``hello`` record with the host facts and the bound ports. Exchanges
    go out as ``probes`` batches of up to ``batch`` rows (default 512), at least every
    ``batch_s`` seconds (1.0), integer columns packed (base64 of little-endian int64)
    unless ``pack`` is false; ``batch`` 0 prints one ``probe`` record per exchange.
``{"type": "start", "peers": {name: [address, port]}, "probe": [names], "start_ns",
"start_in_s"}``
    The peer table and a common start time (ns since the epoch; ``start_in_s`` after
    receipt when the local clock is too far off for ``start_ns`` to make sense).
``{"type": "stop"}``
    Stop probing now and finish as at the deadline.

Params with ``"mode": "chrony"`` make it a chrony feeder instead (``cwctl sync
--apply``): ``chronysock.feed`` takes over the control channel, no probing.

The agent exits at its deadline (``deadline_s`` after it read ``params``), at the end
of probing plus ``linger_s``, on stdin EOF, on ``stop``, SIGTERM or SIGHUP; it prints
one ``summary`` record last. Records go to stdout as JSON lines (``docs/records.md``),
messages to stderr.

Timestamps come from the kernel: a probe's and a reply's receive time from the
``SO_TIMESTAMPNS`` control message of ``recvmsg``, their send time from the
``SO_TIMESTAMPING`` software TX stamp the kernel queues on the socket's error queue.
Two-step answers: B replies at once with ``t2`` (and a user-space ``t3`` as the
fallback), then sends a follow-up carrying the kernel's TX stamp of that reply, the
real ``t3``. Where the kernel gives no stamp, ``time.time_ns()`` stands in and the
record says ``"ts": "user"``.
"""

import contextlib
import os
import select
import signal
import socket
import sys
import threading
import time

from cwctl.probe.channel import Control, Output
from cwctl.probe.chronysock import feed
from cwctl.probe.exchanges import Agent
from cwctl.probe.gpu.sampler import GpuSampler
from cwctl.probe.params import AgentParams
from cwctl.probe.wire import now_ns


def make_sampler(host):
    """The GPU sampler for this window, or None if it cannot even be built."""
    try:
        return GpuSampler(host=host)
    except Exception as exc:  # the GPU part must never stop the probing
        sys.stderr.write(f"cwctl-agent {host}: no GPU sampling: {exc}\n")
        return None


def run(control, out):
    """The agent's life: params, bind, hello, start, probe and answer, summary."""
    stop = {"reason": None}
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)

    def on_signal(signum, _frame):
        stop["reason"] = f"signal {signum}"

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_signal)

    os.set_blocking(0, False)
    msg = control.wait_line(time.monotonic() + 60.0)
    if msg is None or msg.get("type") != "params":
        out.error("no params on the control channel", fatal=True)
        return 2
    born = time.monotonic()
    if msg.get("mode") == "chrony":  # cwctl sync --apply: feed chronyd, no probing
        out.host = str(msg.get("host") or socket.gethostname())
        return feed(msg, control, out)
    try:
        params = AgentParams(msg)
    except (ValueError, TypeError) as exc:
        out.error(f"bad params: {exc}", fatal=True)
        return 2
    out.host = params.host
    try:
        agent = Agent(params, out)
    except (OSError, ValueError, KeyError) as exc:
        out.error("cannot bind {}: {}".format(msg.get("bind"), exc), fatal=True)
        return 2
    out.record(agent.hello())
    out.flush()
    loop = Loop(agent, control, out, wake_r, born + params.deadline_s, stop)
    reason = loop.run()
    agent.expire(now_ns(), everything=True)
    agent.flush_batch()
    loop.stop_sampler()
    out.record(agent.summary(reason))
    out.finish()
    agent.close()
    return 0


class Loop:
    """The agent's one thread, from its hello to its summary: wait (``poll``) until the
    next thing falls due, then handle what woke it, one handler per kind of event."""

    def __init__(self, agent, control, out, wake_r, deadline, stop):
        self.agent, self.control, self.out = agent, control, out
        self.wake_r = wake_r
        self.deadline = deadline  # monotonic
        self.stop = stop  # {"reason": set by a signal handler}
        self.poller = select.poll()
        self.poller.register(0, select.POLLIN)
        self.poller.register(wake_r, select.POLLIN)
        for fd in agent.by_fd:
            self.poller.register(fd, select.POLLIN | select.POLLERR)
        os.set_blocking(1, False)
        self.out_registered = False
        self.last_flush = time.monotonic()
        self.probing = False  # the probing window's CPU is counted from its first due pair
        self.linger_ns = int(agent.linger_s * 1e9)
        self.sampler = make_sampler(agent.host)
        self.starter = None
        if self.sampler is not None:  # NVML init or nvidia-smi can take a second: not here
            self.starter = threading.Thread(
                target=self.sampler.start, name="cwctl-gpu-start", daemon=True
            )
            self.starter.start()

    def run(self):
        """Until a reason to stop: the summary's ``reason``."""
        reason = None
        for msg in self.control.backlog:  # lines that came in the same read as the params
            reason = self.on_control(msg) or reason
        self.control.backlog = []
        woke = 0.0
        while reason is None:
            mono = time.monotonic()
            tick_s = self.agent.tick_ns / 1e9  # the loop's least period (exchanges.TICK_S)
            if mono - woke < tick_s:  # woken a moment ago: let more work gather first
                time.sleep(woke + tick_s - mono)
                mono = time.monotonic()
            now = now_ns()
            finish_ns = None if self.agent.end_ns is None else self.agent.end_ns + self.linger_ns
            wait_ms = self.wait_ms(mono, now, finish_ns)
            self.watch_stdout()
            planned_ns = now + int(wait_ms * 1e6)  # when this loop means to run again
            events = self.poller.poll(wait_ms)
            woke = time.monotonic()
            now = now_ns()
            self.agent.cost.ran(planned_ns, now)  # later than planned: the host starved us
            for fd, mask in events:
                reason = self.on_event(fd, mask) or reason
            if events:
                now = now_ns()
            self.on_time(now)
            reason = reason or self.reason_to_stop(now, finish_ns)
        return reason

    def wait_ms(self, mono, now, finish_ns):
        """How long ``poll`` may sleep: until the deadline, a record's flush, the next
        due pair or timeout, a batch, or the end of the linger."""
        agent = self.agent
        wait_s = self.deadline - mono
        if self.out.buf:  # records waiting in the buffer: out within 0.2 s
            wait_s = min(wait_s, self.last_flush + 0.2 - mono)
        for due_ns in (agent.next_due_ns(), agent.next_expiry_ns()):  # a pair, a timeout
            if due_ns is not None:
                wait_s = min(wait_s, (due_ns - now) / 1e9)
        batch_wait_s = agent.batch_wait_s(mono)
        if batch_wait_s is not None:
            wait_s = min(wait_s, batch_wait_s)
        if finish_ns is not None:
            wait_s = min(wait_s, (finish_ns - now) / 1e9)
        return max(0.0, wait_s) * 1000

    def watch_stdout(self):
        """Poll stdout for room only while records wait for it."""
        if self.out.waiting != self.out_registered:
            if self.out.waiting:
                self.poller.register(1, select.POLLOUT)
            else:
                self.poller.unregister(1)
            self.out_registered = self.out.waiting

    def on_event(self, fd, mask):
        """One ready descriptor: stdout has room, control lines, a signal, a socket."""
        if fd == 1:
            self.out.flush()
        elif fd == 0:
            return self.on_stdin()
        elif fd == self.wake_r:
            with contextlib.suppress(OSError):
                os.read(self.wake_r, 64)
        else:
            sock = self.agent.by_fd[fd]
            if mask & select.POLLERR:
                self.agent.drain_errqueue(sock)
            if mask & select.POLLIN:
                self.agent.drain(sock)
        return None

    def on_stdin(self):
        reason = None
        for msg in self.control.read_lines():
            reason = self.on_control(msg) or reason
        if self.control.eof:
            reason = reason or "stdin closed"
            self.poller.unregister(0)
        return reason

    def on_control(self, msg):
        """Act on one control message; a reason to stop, or None."""
        kind = msg.get("type")
        if kind == "start" and self.agent.start_ns is None:
            self.agent.start(msg)
        elif kind == "stop":
            return "stopped"
        elif kind != "start":
            self.agent.error(f"ignored control message {kind!r}")
        return None

    def on_time(self, now):
        """What falls due by ``now``: pairs to send, stamps, timeouts, a batch, a flush."""
        agent = self.agent
        if agent.start_ns is not None and now >= agent.start_ns:
            if not self.probing:
                agent.cost.probing_started()
                self.probing = True
            if now >= agent.end_ns:
                agent.cost.probing_ended()
            agent.send_due(now)
        agent.drain_stamped()
        agent.expire(now)
        agent.expire_replies(now)
        batch_wait_s = agent.batch_wait_s(time.monotonic())
        if batch_wait_s is not None and batch_wait_s <= 0:
            agent.flush_batch()
            self.out.flush()

    def reason_to_stop(self, now, finish_ns):
        """A signal, the deadline, the end of the linger, a closed stdout; else None."""
        mono = time.monotonic()
        reason = None
        if self.stop["reason"]:
            reason = self.stop["reason"]
        elif mono >= self.deadline:
            reason = "deadline"
        elif finish_ns is not None and now >= finish_ns:
            reason = "done"
        if mono - self.last_flush >= 0.2:
            self.out.flush()
            self.last_flush = mono
        if self.out.broken:
            reason = reason or "stdout closed"
        return reason

    def stop_sampler(self):
        """The GPU sampler's records, once it has stopped."""
        if self.sampler is None:
            return
        try:
            self.starter.join(10.0)
            for rec in self.sampler.stop() or []:
                rec.setdefault("type", "gpu")
                rec.setdefault("host", self.agent.host)
                self.out.record(rec)
        except Exception as exc:
            self.agent.error(f"gpu sampler failed: {exc}")


def main():
    out = Output()
    try:
        code = run(Control(), out)
    except Exception as exc:  # a crash still says what happened, as a record and on stderr
        out.error(f"agent crashed: {type(exc).__name__}: {exc}", fatal=True)
        out.finish()
        raise
    out.finish()
    sys.exit(code)


if __name__ == "__main__":
    main()
