"""Two jobs whose elephant flows collide on one spine, and ``cwctl watch`` spreading them.

The leaf-spine links get a real capacity (``capped``: a tbf of ``CAP_MBIT`` on each
direction of every leaf-spine link), the leaves hash headers as hardware does, and two
iperf3 "jobs" run from leaf1 to leaf2 (gpu-001 -> gpu-005, gpu-002 -> gpu-006) on client
ports that the leaves' own kernels send up spine2 (``ports_on``): a collision by
construction, spine1 idle. After ``BEFORE_S`` of it, ``cwctl watch`` starts with a policy
whose only action is ``[rebalance]``.

Judged by what no cwctl code reads or writes: each job's throughput from iperf3's own
intervals, each directed link's load from the leaves' and spines' interface counters
(``LinkSampler``), the moves from the cwctl tables on the hosts (``moves_on_hosts``: the
wire ports every cwctl map gives each socket port), a job's restart as iperf3 failing
(a reset connection ends the run with an error).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.testbed import layout as L
from tests.testbed.shell import run
from tests.testbed.watchtrial import WatchRun
from tests.testbed.workload import cwctl, iperf_client, iperf_server, ports_on

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed

CAP_MBIT = 200  # each leaf-spine link, each way
JOBS = (("gpu-001", "gpu-005"), ("gpu-002", "gpu-006"))
SPINE = "spine2"  # where both jobs' ports send their data
BEFORE_S = 8.0  # the collision alone, before the watch starts
BALANCED = 1.2  # max/mean of leaf1's uplinks, as the counters read it
SETTLE_S = 3.0  # after balanced, before "after" throughput is averaged
POLICY = """\
[rebalance]
target = 1.2
min_gain = 0.1
flow_hold_s = 600
every_s = {every_s}
interval_s = 2
"""


@contextlib.contextmanager
def capped(bed: Testbed, mbit: int = CAP_MBIT) -> Iterator[None]:
    """A tbf of ``mbit`` on both directions of every leaf-spine link (a ~10 ms queue)."""
    done = []
    queue = f"{max(mbit * 1000 // 8 * 10 // 1000, 32)}kb"  # ~10 ms at the rate
    try:
        for leaf in L.LEAVES:
            for spine in L.SPINES:
                for node, dev in ((leaf, spine), (spine, leaf)):
                    tbf = ["tbf", "rate", f"{mbit}mbit", "burst", "32kb", "limit", queue]
                    run(["tc", "qdisc", "replace", "dev", dev, "root", *tbf], ns=bed.ns(node))
                    done.append((node, dev))
        yield
    finally:
        for node, dev in done:
            run(["tc", "qdisc", "del", "dev", dev, "root"], ns=bed.ns(node), check=False)


def link_bytes(bed: Testbed) -> dict[str, int]:
    """Bytes each directed leaf-spine link carried so far (``leaf1>spine2``: leaf1's tx
    towards spine2), from the switches' interface counters."""
    out = {}
    for node in (*L.LEAVES, *L.SPINES):
        links = json.loads(run(["ip", "-j", "-s", "link", "show"], ns=bed.ns(node)).stdout)
        for link in links:
            peer = link.get("ifname")
            if peer in L.SPINES or peer in L.LEAVES:
                out[f"{node}>{peer}"] = int(link["stats64"]["tx"]["bytes"])
    return out


class LinkSampler:
    """``link_bytes`` every ``period_s`` on a thread: rates per directed link over time."""

    def __init__(self, bed: Testbed, period_s: float = 1.0) -> None:
        self.bed, self.period_s = bed, period_s
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), link_bytes(self.bed)))
            self._stop.wait(self.period_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def rates(self, start: float, end: float) -> dict[str, float]:
        """Mbit/s per directed link between the samples nearest ``start`` and ``end``."""
        inside = [s for s in self.samples if start <= s[0] <= end]
        if len(inside) < 2:
            return {}
        (t0, b0), (t1, b1) = inside[0], inside[-1]
        return {k: (b1[k] - b0[k]) * 8 / (t1 - t0) / 1e6 for k in b1 if k in b0}

    def balanced_at(self, after: float, leaf: str = "leaf1", window_s: float = 2.0) -> float | None:
        """The first time after ``after`` from which leaf's uplinks read within
        ``BALANCED`` for two windows in a row."""
        times = [t for t, _ in self.samples if t >= after]
        streak = 0
        for t in times:
            ratio = max_over_mean(self.rates(t - window_s, t), leaf)
            streak = streak + 1 if ratio is not None and ratio <= BALANCED else 0
            if streak == 2:
                return t - window_s
        return None


def max_over_mean(rates: dict[str, float], leaf: str = "leaf1") -> float | None:
    ups = [rates.get(f"{leaf}>{s}") for s in L.SPINES]
    if any(u is None for u in ups):
        return None
    values = [float(u or 0.0) for u in ups]
    mean = sum(values) / len(values)
    return max(values) / mean if mean > 1.0 else None


def moves_on_hosts(bed: Testbed) -> Counter[str]:
    """How many wire ports cwctl's rewriting maps give each (host, socket port, peer,
    port): a flow moved twice would be in two maps."""
    out: Counter[str] = Counter()
    for host in L.HOSTS:
        text = run(["nft", "list", "ruleset"], ns=bed.ns(host)).stdout
        in_map = rewriting = False
        for line in text.splitlines():
            if line.startswith("table "):
                rewriting = line.startswith("table netdev cwctl_steer_") and "_out {" in line
            elif rewriting and "map sport_" in line:
                in_map = True
            elif line.strip() == "}":
                in_map = False
            elif in_map:
                for entry in line.replace("elements = {", "").replace("}", "").split(","):
                    parts = entry.split()
                    if len(parts) == 7:  # addr . sport . dport : wire
                        out[f"{host}:{parts[2]}>{parts[0]}:{parts[4]}"] += 1
    return out


@dataclass
class Outcome:
    before_mbit: list[float]  # per job, the collision alone
    after_mbit: list[float]  # per job, once balanced
    ratio_before: float | None  # leaf1's uplinks, max/mean, by the counters
    ratio_after: float | None
    balanced_s: float | None  # collision start -> balanced (counters)
    watch_to_balanced_s: float | None
    rebalances: int  # "acted" decisions
    steady_rebalances: int  # rebalances begun after the balanced state plus a settle
    moves: Counter[str]  # per flow, the maps it is in
    jobs_ok: bool  # every iperf3 run ended without an error, its connection whole
    decisions: list[dict[str, Any]]
    watch_cpu_s: float = 0.0  # the watch process's user + system CPU seconds
    watch_rss_kb: int = 0  # its peak resident memory
    suspects: list[str] = field(default_factory=list)  # named by its scans, collision on

    @property
    def gain(self) -> float:
        """The colliding jobs' throughput together, after over before (TCP shares one
        link unfairly: one job may have had 40 Mbit/s of 200, the other 150)."""
        return sum(self.after_mbit) / max(sum(self.before_mbit), 1e-9)

    @property
    def least_gain(self) -> float:
        """The job that gained least: after over before."""
        return min(a / max(b, 1e-9) for a, b in zip(self.after_mbit, self.before_mbit,
                                                    strict=True))  # fmt: skip


def iperf_intervals(report: dict[str, Any]) -> list[tuple[float, float]]:
    return [(i["sum"]["end"], i["sum"]["bits_per_second"] / 1e6) for i in report["intervals"]]


def mean_between(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    inside = [r for t, r in spans if lo < t <= hi]
    return statistics.fmean(inside) if inside else 0.0


def process_cost(pid: int) -> tuple[float, int]:
    """A running process's user + system CPU seconds and peak RSS (KB), from /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0, 0
    ticks = os.sysconf("SC_CLK_TCK")
    rss = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmHWM:")), 0)
    return (int(stat[11]) + int(stat[12])) / ticks, rss


def interrupted(proc: subprocess.Popen[str]) -> dict[str, Any] | None:
    """iperf3's JSON report, the run ended by SIGINT (iperf3 then reports what it ran);
    None when the run had failed before (a reset connection: the job restarted)."""
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    try:
        report = json.loads(out)
    except ValueError:
        return None
    error = str(report.get("error", "interrupt"))
    return report if error.startswith("interrupt") and report.get("intervals") else None


def trial(bed: Testbed, workdir: Path, steady_s: float, every_s: float = 5.0) -> Outcome:
    """The collision, the watch, the balance, ``steady_s`` of steady load after it."""
    run_s = BEFORE_S + 60 + steady_s + 60  # ended by SIGINT once the steady part is over
    cports = [ports_on(bed, a, b, SPINE, 1, 50000 + 1000 * i)[0] for i, (a, b) in
              enumerate(JOBS)]  # fmt: skip
    servers = [iperf_server(bed, b) for _, b in JOBS]
    sampler = LinkSampler(bed)
    watch: WatchRun | None = None
    clients = []
    try:
        time.sleep(0.5)
        start = time.monotonic()
        clients = [
            iperf_client(bed, a, b, cport=p, streams=1, seconds=run_s)
            for (a, b), p in zip(JOBS, cports, strict=True)
        ]
        time.sleep(BEFORE_S)
        watch_at = time.monotonic()
        watch = WatchRun(bed, workdir, hold_s=600, interval_s=2.0,
                         policy_text=POLICY.format(every_s=every_s),
                         state=workdir / "state")  # fmt: skip
        balanced = sampler.balanced_at(watch_at)
        deadline = watch_at + 60
        while balanced is None and time.monotonic() < deadline:
            time.sleep(1.0)
            balanced = sampler.balanced_at(watch_at)
        steady_from = (balanced or deadline) + SETTLE_S
        time.sleep(max(0.0, steady_from + steady_s - time.monotonic()))
        reports = [interrupted(c) for c in clients]
        jobs_ok = all(r is not None for r in reports)
        moves = moves_on_hosts(bed)
        cpu_s, rss_kb = process_cost(watch.proc.pid)
    finally:
        if watch is not None:
            watch.stop()
            for _, e in watch.decisions():  # the fabric as before: every rebalance undone
                if e.get("verb") == "acted" and e.get("action_id"):
                    cwctl(workdir / "state", "rollback", e["action_id"], "--apply", "--yes")
        for p in (*clients, *servers):
            if p.poll() is None:
                p.kill()
                p.wait()
        sampler.stop()
    spans = [iperf_intervals(r or {"intervals": []}) for r in reports]
    decided = watch.decisions() if watch else []
    acted = [t for t, e in decided if e.get("verb") == "acted"]
    started = [t for t, e in decided if e.get("verb") == "act"]
    return Outcome(
        before_mbit=[mean_between(s, 2.0, BEFORE_S) for s in spans],
        after_mbit=[
            mean_between(s, steady_from - start, steady_from - start + steady_s) for s in spans
        ],
        ratio_before=max_over_mean(sampler.rates(start + 2.0, watch_at)),
        ratio_after=max_over_mean(sampler.rates(steady_from, steady_from + steady_s)),
        balanced_s=None if balanced is None else balanced - start,
        watch_to_balanced_s=None if balanced is None else balanced - watch_at,
        rebalances=len(acted),
        steady_rebalances=sum(1 for t in started if t >= steady_from),
        moves=moves,
        jobs_ok=jobs_ok,
        decisions=[e for _, e in decided],
        watch_cpu_s=cpu_s,
        watch_rss_kb=rss_kb,
        suspects=sorted(
            {
                str(x.get("element"))
                for t, e in (watch.lines if watch else [])
                if e.get("event") == "round" and t <= (balanced or deadline)
                for x in e.get("suspects") or []
            }
        ),
    )
