"""Host-side steering judged by iperf3: throughput healthy, under a lossy link, steered.

The namespace testbed (tests/testbed/: 8 hosts, 2 leaves, 2 spines), its leaves hashing
each packet's 5-tuple as hardware does (``workload.header_hashing``). iperf3 from Debian
runs 4 parallel TCP streams gpu-001 -> gpu-005, paced at 500 Mbit/s each, from client
ports whose 5-tuples the leaves put on spine2 (asked of the kernel with ``ip route
get``; fresh ports each run). Each round measures
three runs of ``RUN_S`` seconds: healthy (no fault), under the fault (leaf1-spine2 lossy
5 %, both ways), and steered (the fault on, ``cwctl reroute leaf1-spine2 --at hosts
--port 5201 --apply`` over SSH, undone with ``cwctl rollback`` after the run). The
throughputs are medians over ``ROUNDS`` rounds, side by side, with their ratios: the
machine's other load moves all three alike. Needs root, ``ip``, ``tc``, ``sshd``,
``nft`` and ``iperf3``; says so otherwise. Then the move without ``--port``: 8 and 200
open connections from gpu-001 to its 4 peers, and the seconds ``reroute --at hosts
--apply`` and its rollback take. Run: ``.venv/bin/python -m bench steer``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 3
RUN_S = 3.0
STREAMS = 4
# paced: 4 x 500 Mbit/s offered, under what 2 shared cores move through the veths, so
# the machine's other load does not set the figure (unpaced runs varied 2.8-6.2 Gbit/s)
MBIT_PER_STREAM = 500
LINK = "leaf1-spine2"
SENDER, RECEIVER = "gpu-001", "gpu-005"


def _cwctl(state: Path, *args: str) -> str:
    env = {**os.environ, "CWCTL_STATE_DIR": str(state)}
    proc = subprocess.run(
        [sys.executable, "-m", "cwctl", *args], capture_output=True, text=True, env=env
    )
    if proc.returncode != 0:
        raise RuntimeError(f"cwctl {' '.join(args[:2])}: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def _rounds(bed: object, state: Path) -> dict[str, list[float]]:
    from tests.testbed.faults import apply_fault, clear
    from tests.testbed.workload import iperf_client, iperf_result, mbit_s, ports_on

    cports = iter(ports_on(bed, SENDER, RECEIVER, "spine2", STREAMS, 50000, count=3 * ROUNDS))  # type: ignore[arg-type]

    def measure() -> float:
        proc = iperf_client(
            bed,  # type: ignore[arg-type]
            SENDER,
            RECEIVER,
            cport=next(cports),
            streams=STREAMS,
            seconds=RUN_S,
            mbit_per_stream=MBIT_PER_STREAM,
        )
        return mbit_s(iperf_result(proc))

    out: dict[str, list[float]] = {"healthy": [], "lossy": [], "steered": []}
    inv = str(bed.inventory)  # type: ignore[attr-defined]
    for _ in range(ROUNDS):
        clear(bed)  # type: ignore[arg-type]
        out["healthy"].append(measure())
        apply_fault(bed, LINK, "lossy=0.05")  # type: ignore[arg-type]
        out["lossy"].append(measure())
        _cwctl(state, "reroute", LINK, "-i", inv, "--at", "hosts", "--port", "5201",
               "--pool", "16", "--apply", "--yes")  # fmt: skip
        out["steered"].append(measure())
        _cwctl(state, "rollback", "--apply", "--yes")
    clear(bed)  # type: ignore[arg-type]
    return out


def _move_timings(bed: object, state: Path) -> dict[int, tuple[float, float, int]]:
    """Per number of open connections from gpu-001 to its 4 peers: the seconds ``cwctl
    reroute LINK --at hosts --apply`` (no --port: plan, then the paired translation) and
    its rollback took, and how many flows the plan moved."""
    import json

    from tests.testbed import layout as L
    from tests.testbed.workload import hold_servers, many_connections

    peers = list(L.hosts_of("leaf2"))
    inv = str(bed.inventory)  # type: ignore[attr-defined]
    out = {}
    for n, port in ((8, 7101), (200, 7102)):
        servers = hold_servers(bed, peers, port)  # type: ignore[arg-type]
        client = many_connections(bed, SENDER, peers, port, n // len(peers))  # type: ignore[arg-type]
        try:
            assert client.stdout is not None
            client.stdout.readline()
            started = time.perf_counter()
            plan = _cwctl(state, "reroute", LINK, "-i", inv, "--at", "hosts", "--pool", "8",
                          "--apply", "--yes", "--format", "json")  # fmt: skip
            applied = time.perf_counter() - started
            started = time.perf_counter()
            _cwctl(state, "rollback", "--apply", "--yes")
            undone = time.perf_counter() - started
            out[n] = (applied, undone, len(json.loads(plan)["plan"]["steering"]["moves"]))
        finally:
            client.kill()
            for server in servers:
                server.kill()
    return out


def main(argv: list[str] | None = None) -> None:
    from tests.testbed.bed import Testbed
    from tests.testbed.shell import missing_prerequisite
    from tests.testbed.workload import header_hashing, iperf_server

    why = missing_prerequisite() or next(
        (f"no {b} (apt install nftables iperf3)" for b in ("nft", "iperf3") if not shutil.which(b)),
        None,
    )
    if why:
        print(f"skipped: {why}")
        return
    with tempfile.TemporaryDirectory(prefix="cwctl-bench-steer-") as tmp:
        bed = Testbed(f"bs{os.getpid() % 100000:x}"[:8], tmp)
        try:
            bed.up(icmp_ratelimit_ms=0)
            server = iperf_server(bed, RECEIVER)
            try:
                with header_hashing(bed):
                    time.sleep(0.3)
                    runs = _rounds(bed, Path(tmp) / "state")
                    moves = _move_timings(bed, Path(tmp) / "state")
            finally:
                server.kill()
                server.wait()
        finally:
            left = bed.down()
            if left:
                print(f"testbed left behind: {left}")
    med = {k: statistics.median(v) for k, v in runs.items()}
    print(
        f"iperf3, {STREAMS} TCP streams x {MBIT_PER_STREAM} Mbit/s offered, {SENDER} -> "
        f"{RECEIVER}, {RUN_S:g} s, from client ports the leaves hash onto spine2; {LINK} "
        f"lossy 5 % for the last two; medians of {ROUNDS}"
    )
    print(f"{'phase':>8} {'Mbit/s':>8} {'of healthy':>10}   runs")
    for phase, value in med.items():
        runs_text = " ".join(f"{x:.0f}" for x in runs[phase])
        print(f"{phase:>8} {value:>8.0f} {value / med['healthy']:>10.2f}   {runs_text}")
    print(f"\nopen connections {SENDER} -> its 4 peers moved off {LINK} (no --port): "
          "reroute --apply (plan + paired translation) and rollback, seconds")  # fmt: skip
    print(f"{'open':>6} {'moved':>6} {'apply s':>8} {'rollback s':>10}")
    for n, (applied, undone, moved) in moves.items():
        print(f"{n:>6} {moved:>6} {applied:>8.1f} {undone:>10.1f}")


if __name__ == "__main__":
    main()
