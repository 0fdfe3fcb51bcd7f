"""Fleet scale: a whole simulated scan per host as the fleet grows, and what an agent costs.

0. ``cwctl --help`` start-up (imports are lazy), beside a bare interpreter's.
1. ``cwctl scan --sim --hosts N --format json`` in a fresh process per size, at the
   default probe settings: wall and CPU seconds (user + system), peak RSS (``wait4``'s
   rusage of that child alone, forked from a fresh interpreter), per host and per probe
   row. ``net ms/host`` is the CPU beyond a 16-host scan's (interpreter, imports: the
   fixed cost, the cheapest of 3) per host beyond 16; ``vs first`` is that over the
   first size's, and must stay within 1.5x from 1 000 to 30 000 hosts if the scan is
   linear (issue 14). Sizes up to 1 000
   are scanned twice and the cheaper run kept: their CPU is a few seconds, so noise
   from the shared machine weighs most there.
2. Real agents on loopback (``cwctl scan --local 8 --format json``: 7 peers each, default
   settings): each agent's own figures (``hosts[].agent``) against issue 14's targets,
   under 1 % of a core and under 100 kbit/s sent while probing: its CPU share, kilobits
   per second sent and received, the packets it handled (probes, replies, follow-ups)
   and its CPU per 1 000 of them; then the worst agent, and what one at the default
   K = 10 peers would send (the wire cost is linear in the peers).

Default sizes: 256 and 1 000 hosts (quick). ``--big``: 1 000, 4 000, 10 000 and 30 000
(minutes; up to several GB at 30 000), one at a time; ``--no-agents`` skips part 2;
``--issue36`` prints issue 36's row alone (10 000 hosts healthy and with spine2
congested, each scan then its saved records replayed: wall, CPU, peak RSS):
``.venv/bin/python -m bench.bench_scale --big`` or ``.venv/bin/python -m bench.bench_scale 4000``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from cwctl import settings

CWCTL = str(Path(sys.executable).with_name("cwctl"))
SIZES = (256, 1000)
BIG = (1000, 4000, 10_000, 30_000)
BASE = 16  # the fixed cost's scan: interpreter, imports, a fabric of two leaves
FLAT = 1.5  # issue 14: per-host CPU within this factor from the first size to the last
QUICK = 1000  # sizes up to this are scanned twice and the cheaper run kept (less noise)


# The scan is forked from a fresh interpreter, not from this process: a child's peak RSS
# (``ru_maxrss``) counts the pages it shared with its parent before ``exec``, so a scan
# forked from a bench process that grew to a gigabyte reported a gigabyte.
_LAUNCH = """import os, sys
pid = os.fork()
if pid == 0:
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, ru = os.wait4(pid, 0)
sys.stderr.write(f"{os.waitstatus_to_exitcode(status)} {ru.ru_utime + ru.ru_stime} {ru.ru_maxrss}")
"""


def child_cost(argv: list[str]) -> tuple[int, float, int, bytes]:
    """ARGV run as a child of a fresh interpreter: its exit status, CPU seconds (user +
    system), peak RSS in KiB (its own, not a grown parent's) and its standard output."""
    done = subprocess.run([sys.executable, "-c", _LAUNCH, *argv], capture_output=True)
    status, cpu_s, maxrss_kb = done.stderr.decode().split()
    return int(status), float(cpu_s), int(maxrss_kb), done.stdout


def scan_cost(hosts: int) -> dict[str, float]:
    argv = [CWCTL, "scan", "--sim", "--hosts", str(hosts), "--format", "json"]
    started = time.perf_counter()
    status, cpu_s, maxrss_kb, out = child_cost(argv)
    wall = time.perf_counter() - started
    records = json.loads(out)["records"] if out else 0
    return {
        "hosts": hosts,
        "status": status,
        "wall_s": wall,
        "cpu_s": cpu_s,
        "rss_b": maxrss_kb * 1024,
        "records": records,
    }


AGENTS = 8  # issue 14 measures agent cost with 8 agents on the local transport
CPU_TARGET = 0.01  # a core
TX_TARGET_KBIT_S = 100.0


def agent_cost(agents: int = AGENTS) -> list[dict[str, float]]:
    argv = [CWCTL, "scan", "--local", str(agents), "--format", "json"]
    done = subprocess.run(argv, capture_output=True, timeout=180)
    report = json.loads(done.stdout)
    return [h["agent"] | {"name": h["name"]} for h in report["hosts"] if h.get("agent")]


def help_time(rounds: int = 5) -> tuple[float, float, float]:
    """``cwctl --help``: best wall seconds, mean CPU seconds (user + system, what a
    loaded machine cannot inflate much); and the best wall of ``python -c pass``."""
    import resource

    def run(argv: list[str]) -> tuple[float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        walls = []
        for _ in range(rounds):
            started = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return min(walls), cpu / rounds

    wall, cpu = run([CWCTL, "--help"])
    floor, _ = run([sys.executable, "-c", "pass"])
    return wall, cpu, floor


ISSUE36_HOSTS = 10_000
ISSUE36_FAULTS = ((), ("--fault", "switch:spine2:congested"))
ISSUE36_TARGET = (10.0, 1 << 30)  # issue 36: seconds and bytes of peak RSS, each scan


def issue36(hosts: int = ISSUE36_HOSTS) -> None:
    """Issue 36's row: ``cwctl scan --sim --hosts 10000`` healthy and with spine2
    congested (wall, CPU, peak RSS against 10 s and 1 GB), then the same scan's saved
    records (``--save-records``, not timed) replayed (``--replay``)."""
    import tempfile

    print(f"issue 36: {hosts} hosts, targets {ISSUE36_TARGET[0]:g} s and 1 GB each")
    print(f"{'scan':>24} {'exit':>4} {'wall s':>7} {'cpu s':>7} {'peak MB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for fault in ISSUE36_FAULTS:
            name = fault[1] if fault else "healthy"
            saved = str(Path(tmp) / "scan.jsonl")
            scan = [CWCTL, "scan", "--sim", "--hosts", str(hosts), *fault, "--format", "json"]
            for label, argv in (
                (name, scan),
                ("(saving records)", [*scan, "--save-records", saved]),
                ("replayed", [CWCTL, "scan", "--replay", saved, "--format", "json"]),
            ):
                started = time.perf_counter()
                status, cpu_s, maxrss_kb, _ = child_cost(argv)
                wall = time.perf_counter() - started
                print(
                    f"{label:>24} {status:>4} {wall:>7.1f} {cpu_s:>7.1f} {maxrss_kb / 1024:>8.0f}",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> None:
    args = argv or []
    if "--issue36" in args:
        issue36()
        return
    wall, cpu, floor = help_time()
    print(
        f"cwctl --help: {wall:.3f} s wall (best of 5), {cpu:.3f} s CPU"
        f" (python -c pass: {floor:.3f} s; the goal: under 0.3 s)\n"
    )
    sizes = tuple(int(a) for a in args if a.isdigit()) or (BIG if "--big" in args else SIZES)
    base = min((scan_cost(BASE) for _ in range(3)), key=lambda m: m["cpu_s"])
    print("whole scans, one process each: cwctl scan --sim --hosts N --format json")
    print(f"fixed cost ({BASE} hosts): {base['cpu_s']:.2f} s CPU, {base['rss_b'] / 2**20:.0f} MB")
    print(
        f"{'hosts':>6} {'rows':>11} {'wall s':>7} {'cpu s':>7} {'peak MB':>8}"
        f" {'cpu ms/host':>12} {'net ms/host':>12} {'vs first':>9} {'B/row':>6}"
    )
    first, worst = None, 0.0
    for n in sizes:
        runs = 2 if n <= QUICK else 1
        m = min((scan_cost(n) for _ in range(runs)), key=lambda m: m["cpu_s"])
        per_host = m["cpu_s"] / n * 1000
        net = (m["cpu_s"] - base["cpu_s"]) / max(1, n - BASE) * 1000
        first = first or net
        worst = max(worst, net / first)
        per_row = m["rss_b"] / m["records"] if m["records"] else float("nan")
        note = "" if m["status"] in (0, 3) else f"  (exit {m['status']})"
        print(
            f"{n:>6} {m['records']:>11,} {m['wall_s']:>7.1f} {m['cpu_s']:>7.1f}"
            f" {m['rss_b'] / 2**20:>8.0f} {per_host:>12.2f} {net:>12.2f} {net / first:>8.2f}x"
            f" {per_row:>6.0f}{note}",
            flush=True,
        )
    verdict = "flat" if worst <= FLAT else "NOT flat"
    print(f"net CPU per host {verdict} within {FLAT}x of the first size (worst {worst:.2f}x)")
    if "--no-agents" in args:
        return
    print(
        f"\nagents on loopback at default settings (cwctl scan --local {AGENTS}), as they"
        f" measure; targets: under {CPU_TARGET:.0%} of a core,"
        f" under {TX_TARGET_KBIT_S:g} kbit/s sent"
    )
    print(
        f"{'agent':>9} {'cpu share':>10} {'tx kbit/s':>10} {'rx kbit/s':>10} {'packets':>8}"
        f" {'cpu ms/1k pkts':>15}"
    )
    agents = agent_cost()
    for a in agents:
        handled = (a["tx_packets"] or 0) + (a["rx_packets"] or 0)
        share = a["cpu_share"] or 0.0
        # the probing window's CPU over every packet it sent or received
        per_k = (a["probe_cpu_s"] or 0.0) / handled * 1e6 if handled else float("nan")
        print(
            f"{a['name']:>9} {share * 100:>9.2f}% {a['tx_kbit_s']:>10.1f}"
            f" {a.get('rx_kbit_s') or 0.0:>10.1f} {handled:>8,} {per_k:>15.2f}"
        )
    if agents:
        worst_cpu = max(a["cpu_share"] or 0.0 for a in agents)
        worst_tx = max(a["tx_kbit_s"] or 0.0 for a in agents)
        k10 = worst_tx * settings.PROBE_PEERS / (AGENTS - 1)
        verdict = "under" if worst_cpu < CPU_TARGET and worst_tx < TX_TARGET_KBIT_S else "OVER"
        print(
            f"worst agent: {worst_cpu * 100:.2f}% of a core, {worst_tx:.1f} kbit/s sent:"
            f" {verdict} the targets; at K = {settings.PROBE_PEERS} peers it would send"
            f" about {k10:.0f} kbit/s"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
