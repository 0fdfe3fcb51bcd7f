"""SSH fan-out and agent overhead.

``python -m bench fanout`` (default, about a minute on 2 cores):

1. Fan-out: start agents on N in-process SSH hosts (asyncssh servers on 127.0.x.y, each
   running the real agent bundle as a subprocess) and collect 1 s of probing, side by
   side with a sequential loop that scans the same hosts one at a time. N = 16 and 64;
   the sequential loop is timed on 4 hosts and scaled to N (its cost is per host).
   ``CWCTL_BENCH_FULL=1`` adds N = 256 and times the sequential loop in full.
2. Agent overhead at the default rate (100 coded pairs/s per peer): 4 local agents, 3
   peers each, 2 s; CPU seconds and bytes per second per host (UDP payload sent, and
   the record stream the transport carries home), per peer and scaled to the default
   K = 10 peers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import sys
import time
from typing import Any

import asyncssh
import numpy as np

from cwctl.inventory import Host, Inventory, ProbeSettings, SSHDefaults
from cwctl.probe.wire import WIRE
from cwctl.scan.collection import Collection
from cwctl.scan.request import ProbeOverrides, ScanRequest
from cwctl.sync.coded import send_spacing_ns
from cwctl.transport.local import LocalSource
from cwctl.transport.ssh import scan_inventory

FULL = os.environ.get("CWCTL_BENCH_FULL") == "1"
FANOUT_SIZES = (16, 64, 256) if FULL else (16, 64)
SEQUENTIAL_SAMPLE = 4  # hosts timed one by one when not FULL
PROBE = ProbeSettings(duration=1.0, rate=10.0, peers=3, ports=2)  # light: N agents, 2 cores


def address(i: int) -> str:
    n = i + 2
    return f"127.0.{n // 250}.{n % 250 + 2}"


async def _run(process: asyncssh.SSHServerProcess[bytes]) -> None:
    """What sshd does with an exec request: run the command, pump the streams."""
    proc = await asyncio.create_subprocess_shell(
        f"exec {process.command}",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None

    async def pump_in() -> None:
        with contextlib.suppress(Exception):
            while data := await process.stdin.read(1 << 16):
                proc.stdin.write(data)
                await proc.stdin.drain()
        with contextlib.suppress(Exception):
            proc.stdin.close()

    feeder = asyncio.create_task(pump_in())
    try:
        while data := await proc.stdout.read(1 << 16):
            with contextlib.suppress(Exception):
                process.stdout.write(data)
        process.exit(max(0, await proc.wait()))
    finally:
        feeder.cancel()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


class Fleet:
    """N in-process SSH servers, one host key each, all trusted."""

    def __init__(self) -> None:
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.servers: list[asyncssh.SSHAcceptor] = []
        self.hosts: list[Host] = []
        self.known: list[str] = []

    async def grow(self, n: int) -> None:
        authorized = asyncssh.import_authorized_keys(
            self.client_key.export_public_key("openssh").decode()
        )
        while len(self.hosts) < n:
            i = len(self.hosts)
            key = asyncssh.generate_private_key("ssh-ed25519")
            server = await asyncssh.listen(
                address(i),
                0,
                server_host_keys=[key],
                authorized_client_keys=authorized,
                process_factory=_run,
                encoding=None,
            )
            port = server.sockets[0].getsockname()[1]
            self.servers.append(server)
            self.hosts.append(Host(name=f"bench-{i + 1:03d}", address=address(i), port=port))
            public = key.export_public_key("openssh").decode().strip()
            self.known.append(f"[{address(i)}]:{port} {public}\n")

    def inventory(self, hosts: list[Host], known_hosts: str) -> Inventory:
        ssh = SSHDefaults(known_hosts=known_hosts, python=sys.executable, connect_timeout=30.0)
        return Inventory(hosts=tuple(hosts), ssh=ssh, probe=PROBE)

    async def scan(self, hosts: list[Host], known_hosts: str) -> Collection:
        options = {"config": None, "agent_path": None, "client_keys": [self.client_key]}
        return await scan_inventory(
            self.inventory(hosts, known_hosts), ScanRequest(), None, client_options=options
        )

    async def close(self) -> None:
        for server in self.servers:
            server.close()


async def fanout(known_hosts: str) -> list[tuple[int, float, float, str, int]]:
    fleet = Fleet()
    rows = []
    per_host_s = None
    try:
        for n in FANOUT_SIZES:
            await fleet.grow(n)
            with open(known_hosts, "w") as f:
                f.writelines(fleet.known)
            hosts = fleet.hosts[:n]
            started = time.perf_counter()
            c = await fleet.scan(hosts, known_hosts)
            parallel_s = time.perf_counter() - started
            ok = sum(s.status == "ok" for s in c.status.values())
            if FULL or per_host_s is None:
                sample = hosts if FULL else hosts[:SEQUENTIAL_SAMPLE]
                started = time.perf_counter()
                for host in sample:
                    await fleet.scan([host], known_hosts)
                per_host_s = (time.perf_counter() - started) / len(sample)
                how = "measured" if FULL else f"{SEQUENTIAL_SAMPLE} hosts x N/{SEQUENTIAL_SAMPLE}"
            else:
                how = f"{SEQUENTIAL_SAMPLE} hosts x N/{SEQUENTIAL_SAMPLE}"
            rows.append((n, parallel_s, per_host_s * n, how, ok))
            print(
                f"{n:>6} {parallel_s:>10.2f} {per_host_s * n:>13.1f} "
                f"{per_host_s * n / parallel_s:>7.1f}x  {ok}/{n} ok   ({how})",
                flush=True,
            )
    finally:
        await fleet.close()
    return rows


def _local_scan(n: int, peers: int, duration_s: float) -> tuple[Collection, dict, float, float]:
    """A local scan at the default rate: (collection, progress events, agents' CPU s, ours)."""
    events: dict[str, Any] = {}
    request = ScanRequest(
        local=n, duration_s=duration_s, overrides=ProbeOverrides(peers=peers, rate=100.0, ports=4)
    )
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    before_self = resource.getrusage(resource.RUSAGE_SELF)
    c = asyncio.run(LocalSource(request).scan(request, lambda e, f: events.update({e: f})))
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    after_self = resource.getrusage(resource.RUSAGE_SELF)

    def cpu(after: Any, before: Any) -> float:
        return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime

    return c, events, cpu(after_children, before_children), cpu(after_self, before_self)


def overhead() -> None:
    n, peers, duration_s = 4, 3, 2.0
    _, _, fixed_cpu_s, _ = _local_scan(n, peers, 0.001)  # start-up, hello, linger, exit
    c, events, agents_cpu_s, ours_cpu_s = _local_scan(n, peers, duration_s)
    sent = sum(sum(s["sent"].values()) for s in c.summaries.values())
    answered = sum(sum(s["rx"].values()) for s in c.summaries.values())
    # a probe out; a reply and a follow-up back for each probe answered (UDP payload)
    udp_bytes = WIRE.size * (sent + 2 * answered)
    stream_bytes = events["done"]["bytes"]
    ok = sum(s.status == "ok" for s in c.status.values())
    cpu_per_host_s = (agents_cpu_s - fixed_cpu_s) / n / duration_s
    print(
        f"{n} local agents, {peers} peers each, rate 100 pairs/s/peer, {duration_s:g} s, "
        f"{ok}/{n} ok, {len(c.table)} records, {c.table.complete.mean():.1%} complete"
    )
    print(f"fixed cost per agent (start-up, hello, linger, exit): {fixed_cpu_s / n:.3f} CPU s")
    print(f"{'per host, while probing':<34} {'measured (K=3)':>15} {'per peer':>10} {'K=10':>10}")
    for label, value, fmt in (
        ("agent CPU (s per s)", cpu_per_host_s, "{:.3f}"),
        ("UDP payload sent (kB/s)", udp_bytes / n / duration_s / 1e3, "{:.1f}"),
        ("record stream home (kB/s)", stream_bytes / n / duration_s / 1e3, "{:.1f}"),
    ):
        per_peer = value / peers
        cells = [fmt.format(v) for v in (value, per_peer, per_peer * 10)]
        print(f"{label:<34} {cells[0]:>15} {cells[1]:>10} {cells[2]:>10}")
    done = c.table.select(c.table.complete)
    rtt_ns = (done.t4 - done.t1) - (done.t3 - done.t2)
    spacing = send_spacing_ns(c.table)
    gap_ns = int(c.table.gap_ns[0]) if len(c.table) else 1
    if len(spacing) and len(rtt_ns):
        ratio = spacing / gap_ns
        print(
            f"loopback RTT median {np.median(rtt_ns) / 1e3:.1f} us (min {rtt_ns.min() / 1e3:.1f});"
            f" coded-pair spacing / gap: median {np.median(ratio):.2f}, "
            f"p5 {np.percentile(ratio, 5):.2f}, p95 {np.percentile(ratio, 95):.2f}"
        )
    print(
        f"orchestrator: {ours_cpu_s:.2f} CPU s for {len(c.table)} records "
        f"({1e6 * ours_cpu_s / max(1, len(c.table)):.1f} us per record, incl. process management)"
    )


def main() -> None:
    import tempfile

    print(
        f"fan-out: start agents and collect {PROBE.duration:g} s of probing "
        f"(rate {PROBE.rate:g}, {PROBE.peers} peers) over in-process SSH"
    )
    print(f"{'hosts':>6} {'fan-out s':>10} {'sequential s':>13} {'ratio':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(fanout(os.path.join(tmp, "known_hosts")))
    print()
    print("agent overhead at the default rate")
    overhead()


if __name__ == "__main__":
    main()
