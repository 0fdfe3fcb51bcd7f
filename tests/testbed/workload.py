"""Real TCP load on the testbed (iperf3 from Debian, and plain sockets) and the kernel's own
answer to "which spine does this tuple take", for judging host-side steering.

Nothing here shares code with cwctl's steering: which spine a tuple takes is asked of the
leaves themselves (``ip route get ... ipproto tcp sport S dport D``, the kernel's own
multipath hash), and what a connection carried is read off iperf3's report and the
links' counters.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from tests.testbed import layout as L
from tests.testbed.shell import TestbedError, run

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed

IPERF_PORT = 5201
# fib_multipath_hash_policy 3 hashes the fields named here: source and destination
# address, protocol, source and destination port (1 | 2 | 4 | 0x10 | 0x20)
_HEADER_FIELDS = "0x37"


@contextlib.contextmanager
def header_hashing(bed: Testbed) -> Iterator[None]:
    """The leaves hash each forwarded packet's 5-tuple, as a hardware switch does.

    Under the testbed's policy 1 a Linux leaf uses, when a packet carries one, the hash
    the sending socket put on it (``skb->l4_hash``: a TCP socket's random ``sk_txhash``,
    drawn again after a retransmission timeout), which survives the veth into the leaf's
    namespace: a TCP flow's spine is then random per connection, whatever its ports.
    Policy 3 with the five header fields hashes the header only (UDP is unaffected)."""
    old = {}
    for leaf in L.LEAVES:
        read = run(["cat", "/proc/sys/net/ipv4/fib_multipath_hash_policy"], ns=bed.ns(leaf))
        old[leaf] = read.stdout.strip()
        _sysctl(bed, leaf, f"net.ipv4.fib_multipath_hash_fields={_HEADER_FIELDS}")
        _sysctl(bed, leaf, "net.ipv4.fib_multipath_hash_policy=3")
    try:
        yield
    finally:
        for leaf, policy in old.items():
            _sysctl(bed, leaf, f"net.ipv4.fib_multipath_hash_policy={policy}")


@contextlib.contextmanager
def rto_capped(bed: Testbed, max_ms: int) -> Iterator[None]:
    """Every host caps TCP's retransmission backoff at ``max_ms`` (``tcp_rto_max_ms``)."""
    key = "net.ipv4.tcp_rto_max_ms"
    path = "/proc/sys/" + key.replace(".", "/")
    old = {h: run(["cat", path], ns=bed.ns(h)).stdout.strip() for h in L.HOSTS}
    for host in L.HOSTS:
        _sysctl(bed, host, f"{key}={max_ms}")
    try:
        yield
    finally:
        for host, value in old.items():
            _sysctl(bed, host, f"{key}={value}")


def _sysctl(bed: Testbed, node: str, setting: str) -> None:
    key, _, value = setting.partition("=")
    path = "/proc/sys/" + key.replace(".", "/")
    run(["sh", "-c", f"echo {value} > {path}"], ns=bed.ns(node))


def spines_of(
    bed: Testbed, sender: str, receiver: str, tuples: list[tuple[int, int]], proto: str = "tcp"
) -> list[str]:
    """The spine the sender's leaf picks for each (sport, dport) towards ``receiver``."""
    leaf = L.leaf_of(sender)
    src, dst = L.probe_address(sender), L.probe_address(receiver)
    lines = [
        f"route get {dst} from {src} iif {sender} ipproto {proto} sport {s} dport {d}"
        for s, d in tuples
    ]
    out = subprocess.run(
        ["ip", "-n", bed.ns(leaf), "-o", "-batch", "-"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = [next((s for s in L.SPINES if f" dev {s} " in line), "?") for line in out.splitlines()]
    if len(found) != len(tuples):
        raise TestbedError(f"ip route get answered {len(found)} of {len(tuples)} tuples")
    return found


def ports_on(
    bed: Testbed, sender: str, receiver: str, spine: str, n: int, start: int, count: int = 1
) -> list[int]:
    """``count`` first ports from ``start`` (their runs apart) such that ``n`` consecutive
    client ports to iperf3 on ``receiver`` all take ``spine`` (iperf3 ``--cport P -P n``
    uses P..P+n-1). A run never reuses another's ports: a port the last run left in
    TIME_WAIT cannot be bound again ("Address already in use")."""
    ports = list(range(start, start + 4000))
    found = spines_of(bed, sender, receiver, [(p, IPERF_PORT) for p in ports])
    picks = dict(zip(ports, found, strict=True))
    out: list[int] = []
    p = start
    while p < ports[-n] and len(out) < count:
        if all(picks[p + i] == spine for i in range(n)):
            out.append(p)
            p += n
        else:
            p += 1
    if len(out) < count:
        raise TestbedError(f"only {len(out)} runs of {n} ports from {start} take {spine}")
    return out


def iperf_server(bed: Testbed, host: str) -> subprocess.Popen[str]:
    argv = ["iperf3", "-s", "-B", L.probe_address(host), "-p", str(IPERF_PORT)]
    return subprocess.Popen(
        ["ip", "netns", "exec", bed.ns(host), *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def iperf_client(
    bed: Testbed,
    sender: str,
    receiver: str,
    *,
    cport: int,
    streams: int,
    seconds: float,
    mbit_per_stream: int = 0,
) -> subprocess.Popen[str]:
    """iperf3 TCP, ``streams`` in parallel from client ports ``cport``...; paced at
    ``mbit_per_stream`` each when given (0: as fast as the machine goes)."""
    argv = ["iperf3", "-c", L.probe_address(receiver), "-B", L.probe_address(sender)]
    argv += ["-b", f"{mbit_per_stream}M"] if mbit_per_stream else []
    argv += ["-p", str(IPERF_PORT), "--cport", str(cport), "-P", str(streams)]
    argv += ["-t", f"{seconds:g}", "-J", "--connect-timeout", "3000"]
    return subprocess.Popen(
        ["ip", "netns", "exec", bed.ns(sender), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def iperf_result(proc: subprocess.Popen[str], timeout: float = 60.0) -> dict:
    """iperf3's JSON report; ``TestbedError`` when the run failed."""
    out, err = proc.communicate(timeout=timeout)
    try:
        report = json.loads(out)
    except ValueError:
        raise TestbedError(f"iperf3 printed no report: {err.strip()[-200:]}") from None
    if proc.returncode != 0 or "error" in report:
        raise TestbedError(f"iperf3 failed: {report.get('error', err.strip()[-200:])}")
    return report


def mbit_s(report: dict) -> float:
    return float(report["end"]["sum_received"]["bits_per_second"]) / 1e6


def cwctl(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``cwctl ARGS`` as the operator runs it, with its journal in ``state``."""
    env = {**os.environ, "CWCTL_STATE_DIR": str(state)}
    argv = [sys.executable, "-m", "cwctl", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=240)


def ruleset(bed: Testbed, host: str) -> str:
    return run(["nft", "list", "ruleset"], ns=bed.ns(host)).stdout


_HOLD_SERVER = """
import json, select, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(4096)
print("ready", flush=True)
conns, held = [], []
while True:
    r, _, _ = select.select([s, sys.stdin], [], [])
    if sys.stdin in r:
        break
    c, peer = s.accept(); conns.append(peer); held.append(c)  # held open, not collected
print(json.dumps(conns), flush=True)
"""

_MANY_CLIENT = """
import json, select, socket, sys, time
src = sys.argv[1]; port = int(sys.argv[2]); per = int(sys.argv[3]); dsts = sys.argv[4:]
socks = []
for d in dsts:
    for _ in range(per):
        c = socket.socket(); c.setblocking(False); c.bind((src, 0))
        c.connect_ex((d, port)); socks.append(c)
deadline = time.monotonic() + 20
waiting = set(socks)
while waiting and time.monotonic() < deadline:
    _, w, _ = select.select([], list(waiting), [], 0.5)
    for c in w:
        waiting.discard(c)
err = socket.SO_ERROR
ok = sum(1 for c in socks if c not in waiting and c.getsockopt(socket.SOL_SOCKET, err) == 0)
print(json.dumps({"opened": len(socks), "connected": ok}), flush=True)
sys.stdin.readline()
"""


def hold_servers(bed: Testbed, hosts: list[str], port: int) -> list[subprocess.Popen[str]]:
    procs = []
    for host in hosts:
        p = subprocess.Popen(
            ["ip", "netns", "exec", bed.ns(host), sys.executable, "-c", _HOLD_SERVER,
             L.probe_address(host), str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        procs.append(p)
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise TestbedError("a holding server did not start")
    return procs


def many_connections(
    bed: Testbed, sender: str, peers: list[str], port: int, per_peer: int
) -> subprocess.Popen[str]:
    """Open ``per_peer`` TCP connections to each peer at once (held until stdin gets a
    line); its first line of output says how many connected."""
    return subprocess.Popen(
        ["ip", "netns", "exec", bed.ns(sender), sys.executable, "-c", _MANY_CLIENT,
         L.probe_address(sender), str(port), str(per_peer),
         *(L.probe_address(p) for p in peers)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


_ECHO_ONE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
print("ready", flush=True)
c, peer = s.accept(); s.close()
print(peer[1], flush=True)
total = 0
while data := c.recv(65536):
    c.sendall(data); total += len(data)
print(total, flush=True)
"""

_HELD_CLIENT = """
import socket, sys
c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
c.bind((sys.argv[1], int(sys.argv[2]))); c.connect((sys.argv[3], int(sys.argv[4])))
print("connected", flush=True)
for line in sys.stdin:
    try:
        for _ in range(int(line)):
            c.sendall(b"x" * 65536); got = 0
            while got < 65536:
                data = c.recv(65536 - got)
                if not data:
                    raise ConnectionError("closed by the peer")
                got += len(data)
        print("ok", flush=True)
    except OSError as e:
        print(f"error: {e}", flush=True)
"""


class HeldConnection:
    """One TCP connection from ``sender:cport`` to an echo server on ``receiver:port``,
    held open until ``close``: ``exchange`` sends 64 KiB blocks and reads each back.
    The listening socket closes once the connection is accepted, so another server (an
    iperf3) may listen on the same port beside it."""

    def __init__(self, bed: Testbed, sender: str, receiver: str, port: int, cport: int) -> None:
        src, dst = L.probe_address(sender), L.probe_address(receiver)
        self.server = subprocess.Popen(
            ["ip", "netns", "exec", bed.ns(receiver), sys.executable, "-c", _ECHO_ONE,
             dst, str(port)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.server.stdout is not None
        if self.server.stdout.readline().strip() != "ready":
            raise TestbedError("the echo server did not start")
        self.client = subprocess.Popen(
            ["ip", "netns", "exec", bed.ns(sender), sys.executable, "-c", _HELD_CLIENT,
             src, str(cport), dst, str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.client.stdout is not None
        if self.client.stdout.readline().strip() != "connected":
            raise TestbedError("the held connection did not connect")
        self.peer_port = int(self.server.stdout.readline())  # the client port seen there

    def exchange(self, blocks: int) -> str:
        """'ok', or 'error: ...' as the client's socket raised it."""
        assert self.client.stdin is not None and self.client.stdout is not None
        self.client.stdin.write(f"{blocks}\n")
        self.client.stdin.flush()
        return self.client.stdout.readline().strip()

    def close(self) -> int:
        """Close the client's end; the bytes the server echoed in all."""
        assert self.server.stdout is not None
        self.client.communicate(timeout=30)
        total = self.server.stdout.readline().strip()
        self.server.wait(timeout=30)
        return int(total) if total else -1

    def kill(self) -> None:
        for p in (self.client, self.server):
            if p.poll() is None:
                p.kill()
                p.wait()
