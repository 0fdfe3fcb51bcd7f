"""cwctl probe agent: one stdlib-only file, run on each host through an SSH session.

It must run on any host's Python 3.8+, so: the standard library only, no ``match``, no
``X | Y`` unions evaluated at run time. The bootstrap (``cwctl/probe/bootstrap.py``)
execs this file with ``__name__ == "__main__"`` and leaves stdin open as the control
channel; nothing is written to disk.

Control protocol (JSON lines on stdin, in this order):

``{"type": "params", "host", "bind", "port", "ports", "rate", "gap_ns", "duration_s",
"deadline_s", "timeout_s", "linger_s", "batch", "batch_s", "pack"}``
    Bind one answer socket on ``bind:port`` (0 = any) and ``ports`` source sockets,
    then print a ``hello`` record with the host facts and the bound ports. Exchanges
    go out as ``probes`` batches of up to ``batch`` rows (default 512), at least every
    ``batch_s`` seconds (0.1), integer columns packed (base64 of little-endian int64)
    unless ``pack`` is false; ``batch`` 0 prints one ``probe`` record per exchange.
``{"type": "start", "peers": {name: [address, port]}, "probe": [names], "start_ns",
"start_in_s"}``
    The peer table and a common start time (ns since the epoch; ``start_in_s`` after
    receipt when the local clock is too far off for ``start_ns`` to make sense).
``{"type": "stop"}``
    Stop probing now and finish as at the deadline.

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

import base64
import contextlib
import errno
import json
import os
import platform
import select
import signal
import socket
import struct
import sys
import threading
import time

# --- kernel constants the socket module lacks --------------------------------------
# include/uapi/asm-generic/socket.h
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # SCM_TIMESTAMPNS == SO_TIMESTAMPNS
SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)  # SCM_TIMESTAMPING == SO_TIMESTAMPING
# include/uapi/linux/net_tstamp.h (enum SOF_TIMESTAMPING_*)
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_TX_HARDWARE = 1 << 0
SOF_TIMESTAMPING_RX_HARDWARE = 1 << 2
# include/uapi/linux/sockios.h; include/uapi/linux/ethtool.h (struct ethtool_ts_info)
SIOCGIFADDR = 0x8915
SIOCGIFNETMASK = 0x891B
SIOCETHTOOL = 0x8946
ETHTOOL_GET_TS_INFO = 0x41
# include/uapi/linux/in.h
IP_RECVERR = getattr(socket, "IP_RECVERR", 11)
# include/uapi/linux/errqueue.h: struct sock_extended_err, SO_EE_ORIGIN_TIMESTAMPING
SO_EE_ORIGIN_TIMESTAMPING = 4
MSG_ERRQUEUE = getattr(socket, "MSG_ERRQUEUE", 0x2000)  # include/linux/socket.h

# --- the wire format: one fixed-size datagram ---------------------------------------
# magic, kind, flags, idx, pad, rid (responder's reply id), seq (initiator's exchange
# id), a, b (timestamps). Fixed size, so a TX stamp's looped-back packet (which carries
# the link, IP and UDP headers in front) is parsed from its last WIRE.size bytes.
WIRE = struct.Struct("!4sBBBBIQQQ")
MAGIC = b"CWP1"
KIND_PROBE = 1  # A -> B: seq, idx
KIND_REPLY = 2  # B -> A: seq, a = t2, b = t3 in user time (fallback)
KIND_FOLLOW = 3  # B -> A: seq, a = t3 from the kernel's TX stamp of the reply
FLAG_T2_KERNEL = 1  # reply: t2 is a kernel stamp
FLAG_FOLLOW_UP = 2  # reply: a follow-up with the kernel t3 will come
TIMESPEC = struct.Struct("@ll")  # struct timespec (64-bit: two longs)
TIMESPEC3 = struct.Struct("@llllll")  # struct scm_timestamping: software, legacy, hardware

RECORD_VERSION = 1
BATCH_ROWS = 512  # rows per ``probes`` record at most
BATCH_S = 0.1  # and a batch goes out at least this often
BATCH_COLUMNS = ("dst", "sport", "pair", "idx", "t1", "t2", "t3", "t4")


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


def kernel_stamp(ancdata):
    """The software timestamp in a message's control data, ns since the epoch, or 0."""
    for level, kind, data in ancdata:
        if level != socket.SOL_SOCKET:
            continue
        if kind == SO_TIMESTAMPNS and len(data) >= TIMESPEC.size:
            sec, nsec = TIMESPEC.unpack(data[: TIMESPEC.size])
            return sec * 1000000000 + nsec
        if kind == SO_TIMESTAMPING and len(data) >= TIMESPEC3.size:
            sec, nsec = TIMESPEC3.unpack(data[: TIMESPEC3.size])[:2]
            if sec or nsec:
                return sec * 1000000000 + nsec
    return 0


def enable_timestamps(sock):
    """Ask for kernel RX (SO_TIMESTAMPNS) and software TX stamps; say which took."""
    rx = tx = False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        rx = True
    except OSError:
        pass
    try:
        flags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, flags)
        tx = True
    except OSError:
        pass
    return rx, tx


# --- host facts ---------------------------------------------------------------------


def _ifreq_ipv4(sock, request, name):
    """An interface's IPv4 address or netmask (SIOCGIFADDR/SIOCGIFNETMASK) as an int."""
    import fcntl

    out = fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))
    return struct.unpack("!I", out[20:24])[0]


def interface_of(address):
    """The interface whose IPv4 subnet holds ``address`` (longest netmask wins), or None."""
    try:
        want = struct.unpack("!I", socket.inet_aton(address))[0]
    except OSError:
        return None
    best, best_mask = None, -1
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _index, name in socket.if_nameindex():
            try:
                addr = _ifreq_ipv4(sock, SIOCGIFADDR, name)
                mask = _ifreq_ipv4(sock, SIOCGIFNETMASK, name)
            except OSError:
                continue
            if addr & mask == want & mask and mask > best_mask:
                best, best_mask = name, mask
    finally:
        sock.close()
    return best


def nic_timestamping(name):
    """What the interface can stamp (ETHTOOL_GET_TS_INFO): a dict, or {} if unknown."""
    import ctypes
    import fcntl

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        info = ctypes.create_string_buffer(struct.pack("I", ETHTOOL_GET_TS_INFO), 48)
        ifreq = struct.pack("16sP", name.encode()[:15], ctypes.addressof(info)).ljust(40, b"\0")
        fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
        _cmd, caps, phc, _tx_types = struct.unpack_from("IIiI", info.raw)
    except (OSError, ValueError, ImportError):
        return {}
    finally:
        sock.close()
    hw = SOF_TIMESTAMPING_TX_HARDWARE | SOF_TIMESTAMPING_RX_HARDWARE
    return {"iface": name, "hw": caps & hw == hw, "phc": phc, "so_timestamping": caps}


def read_text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def guess_vm():
    """True when this looks like a virtual machine (hypervisor CPU flag or DMI vendor)."""
    cpuinfo = read_text("/proc/cpuinfo") or ""
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and " hypervisor" in line:
            return True
    vendor = " ".join(
        v
        for v in (
            read_text("/sys/class/dmi/id/sys_vendor"),
            read_text("/sys/class/dmi/id/product_name"),
        )
        if v
    ).lower()
    for word in ("kvm", "qemu", "vmware", "virtualbox", "xen", "amazon ec2", "google", "microsoft"):
        if word in vendor:
            return True
    return False


# --- the agent ----------------------------------------------------------------------


class Exchange:
    """One probe of a coded pair, from send to the end of its answer."""

    __slots__ = (
        "expires",
        "follow",
        "idx",
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


class Batch:
    """Exchanges on their way out as one ``probes`` record (docs/records.md): one list
    per column, ``dst`` as an index into this agent's targets, 0 for a missing stamp."""

    def __init__(self, host, targets, gap_ns, pack):
        self.host = host
        self.hosts = list(targets)
        self.index = {name: i for i, name in enumerate(self.hosts)}
        self.gap_ns = gap_ns
        self.pack = pack
        self.columns = [[] for _ in BATCH_COLUMNS]
        self.ts = []
        self.since = 0.0  # monotonic time of the oldest row

    def __len__(self):
        return len(self.ts)

    def add(self, peer, sport, pair, idx, ts, t1, t2, t3, t4):
        if not self.ts:
            self.since = time.monotonic()
        row = (self.index[peer], sport, pair, idx, t1, t2, t3, t4)
        for column, value in zip(self.columns, row):  # noqa: B905 (3.8: no strict)
            column.append(value)
        self.ts.append(ts)

    def take(self):
        """The rows so far as one record; the batch starts empty again."""
        n = len(self.ts)
        rec = {"type": "probes", "v": RECORD_VERSION, "n": n, "src": self.host}
        rec["hosts"] = self.hosts
        rec["gap_ns"] = self.gap_ns
        rec["ts"] = self.ts[0] if self.ts.count(self.ts[0]) == n else self.ts
        for key, column in zip(BATCH_COLUMNS, self.columns):  # noqa: B905 (3.8)
            if self.pack:  # base64 of little-endian int64: no number parsing at home
                column = base64.b64encode(struct.pack(f"<{n}q", *column)).decode("ascii")
            rec[key] = column
        self.columns = [[] for _ in BATCH_COLUMNS]
        self.ts = []
        return rec


class Agent:
    def __init__(self, params, out):
        self.out = out
        self.host = str(params["host"])
        self.bind = str(params.get("bind") or "0.0.0.0")
        self.rate = float(params.get("rate", 100.0))
        self.gap_ns = int(params.get("gap_ns", 20000))
        self.duration_s = float(params.get("duration_s", 2.0))
        self.timeout_ns = int(float(params.get("timeout_s", 0.5)) * 1e9)
        self.linger_s = float(params.get("linger_s", self.timeout_ns / 1e9 + 0.2))
        self.batch_rows = max(0, int(params.get("batch", BATCH_ROWS)))  # 0: probe records
        self.batch_s = float(params.get("batch_s", BATCH_S))
        self.pack = bool(params.get("pack", True))
        self.batch = None  # a Batch once the targets are known
        self.answer = self.make_socket(int(params.get("port", 0)))
        self.sources = [self.make_socket(0) for _ in range(max(1, int(params.get("ports", 4))))]
        self.rx_kernel, self.tx_kernel = True, True
        for sock in [self.answer, *self.sources]:
            rx, tx = enable_timestamps(sock)
            self.rx_kernel = self.rx_kernel and rx
            self.tx_kernel = self.tx_kernel and tx
        self.by_fd = {s.fileno(): s for s in [self.answer, *self.sources]}
        self.sports = [s.getsockname()[1] for s in self.sources]
        self.peer_addr = {}  # name -> (address, port)
        self.name_of = {}  # address -> name (for the summary's rx counts)
        self.targets = []  # peers this agent probes
        self.pending = {}  # seq -> Exchange
        self.replies = {}  # rid -> (address, seq, sent_ns) awaiting their TX stamp
        self.next_seq = 1
        self.next_rid = 1
        self.sent = {}
        self.complete = {}
        self.lost = {}
        self.rx = {}
        self.send_errors = {}
        self.start_ns = None
        self.end_ns = None
        self.schedule = []  # per target: next pair number

    def make_socket(self, port):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
        sock.bind((self.bind, port))
        sock.setblocking(False)
        return sock

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
            "address": self.answer.getsockname()[0],
            "port": self.answer.getsockname()[1],
            "sports": [s.getsockname()[1] for s in self.sources],
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
            addr = (str(entry[0]), int(entry[1]))
            self.peer_addr[str(name)] = addr
            self.name_of[addr[0]] = str(name)
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
        self.schedule = [0] * len(self.targets)
        if self.batch_rows:
            self.batch = Batch(self.host, self.targets, self.gap_ns, self.pack)

    # --- sending ------------------------------------------------------------------

    def due_ns(self, i, pair):
        """When pair ``pair`` to target ``i`` is due: evenly spaced, targets staggered."""
        period_ns = 1e9 / self.rate
        offset = (i / max(1, len(self.targets))) * period_ns
        return self.start_ns + int(pair * period_ns + offset)

    def next_due_ns(self):
        if self.start_ns is None or not self.targets:
            return None
        best = None
        for i, pair in enumerate(self.schedule):
            due = self.due_ns(i, pair)
            if due < self.end_ns and (best is None or due < best):
                best = due
        return best

    def send_due(self, now):
        for i, name in enumerate(self.targets):
            while True:
                pair = self.schedule[i]
                due = self.due_ns(i, pair)
                if due > now or due >= self.end_ns:
                    break
                self.schedule[i] = pair + 1
                if now - due > 200000000:  # far behind (a stall): skip, do not burst
                    continue
                self.send_pair(name, pair)

    def send_pair(self, name, pair):
        addr = self.peer_addr[name]
        i = pair % len(self.sources)
        sock, sport = self.sources[i], self.sports[i]
        first = 0
        for idx in (0, 1):
            if idx == 1:  # the coded pair's spacing: a short spin, gap_ns is microseconds
                while now_ns() - first < self.gap_ns:
                    pass
            seq = self.next_seq
            self.next_seq += 1
            t1 = now_ns()
            if idx == 0:
                first = t1
            sent = self.send_probe(sock, encode(KIND_PROBE, seq, idx=idx), addr, name)
            self.sent[name] += 1
            # a probe that could not leave is an exchange lost at once, not a silent gap
            self.pending[seq] = Exchange(
                name, sport, pair, idx, t1, t1 + self.timeout_ns if sent else t1
            )

    def send_probe(self, sock, data, addr, name):
        """Send one probe; an error left by an earlier ICMP message gets one retry."""
        for attempt in (0, 1):
            try:
                sock.sendto(data, addr)
                return True
            except OSError as exc:
                if attempt == 0 and exc.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH):
                    continue
                self.send_errors[name] = self.send_errors.get(name, 0) + 1
                if self.send_errors[name] == 1:  # one record per peer, the summary counts
                    self.error(f"send to {name} {addr[0]}:{addr[1]} failed: {exc}")
        return False

    # --- receiving ----------------------------------------------------------------

    def drain(self, sock):
        while True:
            try:
                data, anc, _flags, addr = sock.recvmsg(256, 256)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. ECONNREFUSED from an earlier ICMP error
                if exc.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
                    continue
                raise
            fields = decode(data)
            if fields is None:
                continue
            stamp = kernel_stamp(anc)
            self.on_datagram(sock, fields, stamp, addr)

    def drain_errqueue(self, sock):
        while True:
            try:
                data, anc, _flags, _addr = sock.recvmsg(512, 512, MSG_ERRQUEUE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    return
                raise
            fields = decode(data)
            stamp = kernel_stamp(anc)
            if fields is None or not stamp:
                continue
            kind, _flags, _idx, rid, seq, _a, _b = fields
            if kind == KIND_PROBE:
                ex = self.pending.get(seq)
                if ex is not None:
                    ex.t1, ex.t1k = stamp, True
                    self.maybe_done(seq, ex)
            elif kind == KIND_REPLY:
                entry = self.replies.pop(rid, None)
                if entry is not None:
                    self.send_follow(entry[0], entry[1], stamp)

    def on_datagram(self, sock, fields, stamp, addr):
        kind, flags, idx, rid, seq, a, b = fields
        if kind == KIND_PROBE and sock is self.answer:
            t2k = bool(stamp)
            t2 = stamp or now_ns()
            self.rx[addr[0]] = self.rx.get(addr[0], 0) + 1
            rid = self.next_rid
            self.next_rid = (self.next_rid + 1) & 0xFFFFFFFF or 1
            follow = self.tx_kernel
            reply_flags = (FLAG_T2_KERNEL if t2k else 0) | (FLAG_FOLLOW_UP if follow else 0)
            t3 = now_ns()
            try:
                sock.sendto(encode(KIND_REPLY, seq, idx, reply_flags, rid, t2, t3), addr)
            except OSError:
                return
            if follow:
                self.replies[rid] = (addr, seq, t3)
        elif kind == KIND_REPLY:
            ex = self.pending.get(seq)
            if ex is None or ex.t4 is not None:
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
            if ex is None:
                return
            ex.t3, ex.t3k, ex.follow = a, True, False
            self.maybe_done(seq, ex)

    def send_follow(self, addr, seq, t3):
        with contextlib.suppress(OSError):
            self.answer.sendto(encode(KIND_FOLLOW, seq, a=t3), addr)

    def expire_replies(self, now):
        """Replies whose TX stamp never came: their initiators keep the user-time t3."""
        if not self.replies:
            return
        for rid in [r for r, e in self.replies.items() if now - e[2] > self.timeout_ns]:
            del self.replies[rid]

    # --- records ------------------------------------------------------------------

    def maybe_done(self, seq, ex):
        if ex.t4 is not None and (ex.t1k or not self.tx_kernel) and not ex.follow:
            del self.pending[seq]
            self.emit(ex)

    def expire(self, now, everything=False):
        for seq in [s for s, ex in self.pending.items() if everything or ex.expires <= now]:
            self.emit(self.pending.pop(seq))

    def emit(self, ex):
        answered = ex.t4 is not None
        kernel = ex.t1k and (not answered or (ex.t2k and ex.t3k))
        if answered:
            self.complete[ex.peer] += 1
        else:
            self.lost[ex.peer] += 1
        if self.batch is not None:
            ts = "sw" if kernel else "user"
            if answered:
                self.batch.add(ex.peer, ex.sport, ex.pair, ex.idx, ts, ex.t1, ex.t2, ex.t3, ex.t4)
            else:
                self.batch.add(ex.peer, ex.sport, ex.pair, ex.idx, ts, ex.t1, 0, 0, 0)
            if len(self.batch) >= self.batch_rows:
                self.flush_batch()
            return
        self.out.record(
            {
                "type": "probe",
                "v": RECORD_VERSION,
                "src": self.host,
                "dst": ex.peer,
                "sport": ex.sport,
                "pair": ex.pair,
                "idx": ex.idx,
                "gap_ns": self.gap_ns,
                "ts": "sw" if kernel else "user",
                "t1": ex.t1,
                "t2": ex.t2 if answered else None,
                "t3": ex.t3 if answered else None,
                "t4": ex.t4 if answered else None,
            }
        )

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
        }

    def error(self, message, fatal=False):
        self.out.error(message, fatal)

    def close(self):
        for sock in self.by_fd.values():
            sock.close()


class Output:
    """Records to stdout, buffered, written without blocking while probing.

    A slow reader (a busy SSH channel) must not stall the probe loop: fd 1 is made
    non-blocking and what does not fit stays queued until poll says it can go.
    """

    def __init__(self):
        self.buf = []
        self.size = 0
        self.pending = b""  # encoded, not yet accepted by the pipe
        self.broken = False
        self.host = "?"  # until the params name it

    def record(self, rec):
        line = json.dumps(rec, separators=(",", ":")) + "\n"
        self.buf.append(line)
        self.size += len(line)
        if self.size > 1 << 16:
            self.flush()

    def error(self, message, fatal=False):
        sys.stderr.write(f"cwctl-agent {self.host}: {message}\n")
        sys.stderr.flush()
        rec = {"type": "error", "v": RECORD_VERSION, "host": self.host, "message": message}
        rec["fatal"] = fatal
        self.record(rec)
        self.flush()

    @property
    def waiting(self):
        return bool(self.pending)

    def flush(self):
        """Write what the pipe takes now; the rest waits for ``waiting`` and POLLOUT."""
        if self.buf:
            self.pending += "".join(self.buf).encode()
            self.buf, self.size = [], 0
        while self.pending and not self.broken:
            try:
                written = os.write(1, self.pending)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.broken = True  # nobody listens any more: finish quietly
                return
            self.pending = self.pending[written:]

    def finish(self):
        """Everything out, blocking: the last records before exit."""
        with contextlib.suppress(OSError):
            os.set_blocking(1, True)
        self.flush()


class Control:
    """Line reader on stdin (fd 0) that never blocks: the bootstrap left it unbuffered."""

    def __init__(self):
        self.buf = b""
        self.eof = False
        self.backlog = []  # messages read along with an earlier one, not yet handled

    def read_lines(self):
        out, self.backlog = self.backlog, []
        try:
            chunk = os.read(0, 65536)
        except (BlockingIOError, InterruptedError):
            return out
        if not chunk:
            self.eof = True
            return out
        self.buf += chunk
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            line = line.strip()
            if line:
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = {"type": "garbage", "line": line[:80].decode("utf-8", "replace")}
                out.append(msg if isinstance(msg, dict) else {"type": "garbage"})
        return out

    def wait_line(self, deadline):
        """Block (poll) until one whole control line, EOF or the monotonic deadline."""
        poller = select.poll()
        poller.register(0, select.POLLIN)
        pending = []
        while not pending and not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if poller.poll(left * 1000):
                pending = self.read_lines()
        if not pending:
            return None
        self.backlog = pending[1:]
        return pending[0]


def make_sampler(host):
    """A GpuSampler when the bundle carries one (cwctl/probe/gpu.py), else None."""
    cls = globals().get("GpuSampler")
    if cls is None:
        return None
    try:
        try:
            return cls(host=host)
        except TypeError:
            return cls()
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
    while reason is None:
        finish_ns = None if agent.end_ns is None else agent.end_ns + int(agent.linger_s * 1e9)
        now = now_ns()
        mono = time.monotonic()
        timeouts = [deadline - mono, last_flush + 0.2 - mono]
        due = agent.next_due_ns()
        if due is not None:
            timeouts.append((due - now) / 1e9)
        if agent.pending:
            timeouts.append(0.05)
        batch_wait_s = agent.batch_wait_s(mono)
        if batch_wait_s is not None:
            timeouts.append(batch_wait_s)
        if finish_ns is not None:
            timeouts.append((finish_ns - now) / 1e9)
        wait_ms = max(0.0, min(timeouts)) * 1000
        if out.waiting != out_registered:
            if out.waiting:
                poller.register(1, select.POLLOUT)
            else:
                poller.unregister(1)
            out_registered = out.waiting
        for fd, events in poller.poll(wait_ms):
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
        now = now_ns()
        if agent.start_ns is not None and now >= agent.start_ns:
            agent.send_due(now)
        agent.expire(now)
        agent.expire_replies(now)
        batch_wait_s = agent.batch_wait_s(time.monotonic())
        if batch_wait_s is not None and batch_wait_s <= 0:
            agent.flush_batch()
            out.flush()
        if stop["reason"]:
            reason = stop["reason"]
        elif time.monotonic() >= deadline:
            reason = "deadline"
        elif finish_ns is not None and now >= finish_ns:
            reason = "done"
        if time.monotonic() - last_flush >= 0.2:
            out.flush()
            last_flush = time.monotonic()
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


if __name__ in ("__main__", "__cwctl_agent__"):  # the bootstrap execs us as the latter
    main()
