"""cwctl probe agent: its main loop, run on each host through an SSH session.

It must run on any host's Python 3.8+, so: the standard library only, no ``match``, no
``X | Y`` unions evaluated at run time. The bootstrap (``cwctl/probe/bootstrap.py``)
ships this module and its siblings as one bundle, imports them from memory under their
real names and calls ``main()``; stdin stays open as the control channel and nothing is
written to disk. The parts: ``wire`` (the datagram), ``stamps`` (kernel timestamps),
``exchanges`` (the prober/answerer), ``batch`` (records out), ``channel`` (stdout and
stdin), ``gpu/`` (the GPU sampler), this module (the loop).

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
    params = control.wait_line(time.monotonic() + 60.0)
    if params is None or params.get("type") != "params":
        out.error("no params on the control channel", fatal=True)
        return 2
    born = time.monotonic()
    deadline = born + float(params.get("deadline_s", 60.0))
    host = out.host = str(params.get("host") or socket.gethostname())
    if params.get("mode") == "chrony":  # cwctl sync --apply: feed chronyd, no probing
        return feed(params, control, out)
    try:
        agent = Agent(params, out)
    except (OSError, ValueError, KeyError) as exc:
        out.error("cannot bind {}: {}".format(params.get("bind"), exc), fatal=True)
        return 2
    out.record(agent.hello())
    out.flush()
    sampler = make_sampler(host)

    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    for fd in agent.by_fd:
        poller.register(fd, select.POLLIN | select.POLLERR)
    os.set_blocking(1, False)
    out_registered = False
    reason = None
    last_flush = time.monotonic()
    starter = None
    if sampler is not None:  # NVML init or nvidia-smi can take a second: not on our loop
        starter = threading.Thread(target=sampler.start, name="cwctl-gpu-start", daemon=True)
        starter.start()

    def on_control(msg):
        """Act on one control message; a reason to stop, or None."""
        kind = msg.get("type")
        if kind == "start" and agent.start_ns is None:
            agent.start(msg)
        elif kind == "stop":
            return "stopped"
        elif kind != "start":
            agent.error(f"ignored control message {kind!r}")
        return None

    for msg in control.backlog:  # lines that came in the same read as the params
        reason = on_control(msg) or reason
    control.backlog = []
    probing = False  # the probing window's CPU is counted from its first due pair
    linger_ns = int(agent.linger_s * 1e9)
    woke = 0.0
    while reason is None:
        mono = time.monotonic()
        tick_s = agent.tick_ns / 1e9  # the loop's least period (exchanges.TICK_S)
        if mono - woke < tick_s:  # woken a moment ago: let more work gather first
            time.sleep(woke + tick_s - mono)
            mono = time.monotonic()
        now = now_ns()
        wait_s = deadline - mono
        if out.buf:  # records waiting in the buffer: out within 0.2 s
            wait_s = min(wait_s, last_flush + 0.2 - mono)
        for due_ns in (agent.next_due_ns(), agent.next_expiry_ns()):  # a pair, a timeout
            if due_ns is not None:
                wait_s = min(wait_s, (due_ns - now) / 1e9)
        batch_wait_s = agent.batch_wait_s(mono)
        if batch_wait_s is not None:
            wait_s = min(wait_s, batch_wait_s)
        finish_ns = None if agent.end_ns is None else agent.end_ns + linger_ns
        if finish_ns is not None:
            wait_s = min(wait_s, (finish_ns - now) / 1e9)
        wait_ms = max(0.0, wait_s) * 1000
        if out.waiting != out_registered:
            if out.waiting:
                poller.register(1, select.POLLOUT)
            else:
                poller.unregister(1)
            out_registered = out.waiting
        planned_ns = now + int(wait_ms * 1e6)  # when this loop means to run again
        events_now = poller.poll(wait_ms)
        woke = time.monotonic()
        now = now_ns()
        agent.cost.ran(planned_ns, now)  # later than planned: the host starved us
        for fd, events in events_now:
            if fd == 1:
                out.flush()
            elif fd == 0:
                for msg in control.read_lines():
                    reason = on_control(msg) or reason
                if control.eof:
                    reason = reason or "stdin closed"
                    poller.unregister(0)
            elif fd == wake_r:
                with contextlib.suppress(OSError):
                    os.read(wake_r, 64)
            else:
                sock = agent.by_fd[fd]
                if events & select.POLLERR:
                    agent.drain_errqueue(sock)
                if events & select.POLLIN:
                    agent.drain(sock)
        if events_now:
            now = now_ns()
        if agent.start_ns is not None and now >= agent.start_ns:
            if not probing:
                agent.cost.probing_started()
                probing = True
            if now >= agent.end_ns:
                agent.cost.probing_ended()
            agent.send_due(now)
        agent.drain_stamped()
        agent.expire(now)
        agent.expire_replies(now)
        mono = time.monotonic()
        batch_wait_s = agent.batch_wait_s(mono)
        if batch_wait_s is not None and batch_wait_s <= 0:
            agent.flush_batch()
            out.flush()
        if stop["reason"]:
            reason = stop["reason"]
        elif mono >= deadline:
            reason = "deadline"
        elif finish_ns is not None and now >= finish_ns:
            reason = "done"
        if mono - last_flush >= 0.2:
            out.flush()
            last_flush = mono
        if out.broken:
            reason = reason or "stdout closed"
    agent.expire(now_ns(), everything=True)
    agent.flush_batch()
    if sampler is not None:
        try:
            starter.join(10.0)
            for rec in sampler.stop() or []:
                rec.setdefault("type", "gpu")
                rec.setdefault("host", host)
                out.record(rec)
        except Exception as exc:
            agent.error(f"gpu sampler failed: {exc}")
    out.record(agent.summary(reason))
    out.finish()
    agent.close()
    return 0


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
