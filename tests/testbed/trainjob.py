"""The PyTorch job (``train_gloo.py``) on the namespace fabric, launched through a real
Slurm, and what its own step log says: healthy step time, recovery, a restart.

``TrainJob(bed, cluster, nodes, workdir).start()`` submits one ``srun`` step, one task
per node (ranks in node order: rank 0 on the first), Gloo over the hosts' fabric
interface; ``steps()`` reads every rank's step log. ``Timeline`` judges a fault from the
steps alone: the healthy step time before it, when steps came back within 10 % of it,
the longest stall after that, and rank-seconds lost (ranks x the time the job spent
beyond its healthy pace). ``job_uplinks`` asks the leaves themselves (``ip route get``,
the kernel's own hash) which spine each of the job's open connections takes upward from
a leaf: no cwctl code decides what the fault hits.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.testbed import layout as L
from tests.testbed.shell import TestbedError, run
from tests.testbed.workload import spines_of

if TYPE_CHECKING:
    from tests.testbed.bed import Testbed

SCRIPT = Path(__file__).with_name("train_gloo.py")
NODES = ("gpu-001", "gpu-002", "gpu-005", "gpu-006")  # two ranks behind each of two leaves
BACK_WITHIN = 1.10  # "back": a step within 10 % of the healthy step time


class TrainJob:
    def __init__(
        self, bed: Testbed, slurm: Any, workdir: Path, nodes: tuple[str, ...] = NODES
    ) -> None:
        self.bed, self.slurm, self.nodes = bed, slurm, nodes
        self.log = workdir / "steps"
        self.log.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen[str] | None = None

    def start(self, seconds: float = 900.0, port: int = 29500, compute_s: float = 0.0) -> None:
        argv = [
            "srun", "-N", str(len(self.nodes)), "-w", ",".join(self.nodes),
            "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--immediate=30",
            sys.executable, str(SCRIPT), "--master", L.probe_address(self.nodes[0]),
            "--port", str(port), "--ifname", L.HOST_NIC, "--log", str(self.log),
            "--seconds", str(seconds), "--compute-s", str(compute_s),
        ]  # fmt: skip
        self.proc = subprocess.Popen(
            argv, env=self.slurm.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def wait_steps(self, n: int, timeout_s: float = 180.0) -> None:
        """Until every rank has logged ``n`` steps (torch's import, the rendezvous)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            counts = Counter(s["rank"] for s in self.steps())
            if len(counts) == len(self.nodes) and min(counts.values()) >= n:
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise TestbedError(f"the job ended (exit {self.proc.returncode}): {self.output()}")
            time.sleep(0.5)
        raise TestbedError(f"the job logged {dict(Counter(s['rank'] for s in self.steps()))}")

    def steps(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.log.glob("rank-*.jsonl")):
            for line in path.read_text().splitlines():
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a line being written
        return out

    def stop(self, timeout_s: float = 60.0) -> int:
        """Ask the ranks to stop together; the srun step's exit code."""
        (self.log / "stop").touch()
        assert self.proc is not None
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode

    def output(self) -> str:
        if self.proc is None or self.proc.stdout is None or self.proc.poll() is None:
            return ""
        return self.proc.stdout.read()[-2000:]


def job_uplinks(bed: Testbed, leaf: str) -> Counter[str]:
    """How many of the open TCP connections from ``leaf``'s hosts to another leaf's hosts
    each spine carries upward (the leaf's kernel asked for each connection's tuple)."""
    spines: Counter[str] = Counter()
    here = set(L.hosts_of(leaf))
    address = {L.probe_address(h): h for h in L.HOSTS}
    for host in here:
        out = run(["ss", "-H", "-n", "-t", "state", "established"], ns=bed.ns(host)).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) < 4:
                continue
            (src, sport), (dst, dport) = (f.rsplit(":", 1) for f in fields[2:4])
            peer = address.get(dst)
            if src != L.probe_address(host) or peer is None or peer in here:
                continue
            spines.update(spines_of(bed, host, peer, [(int(sport), int(dport))]))
    return spines


@dataclass
class Timeline:
    """A fault's cost, read from the job's steps (rank 0's clock: one kernel here)."""

    healthy_s: float  # the median step time before the fault
    back_s: float | None  # fault -> the first of 5 steps in a row back within 10 %
    longest_stall_s: float  # after being back, the longest gap between two steps
    rank_seconds_lost: float  # ranks x (time taken - healthy pace), fault to its end
    restarted: bool  # a rank's pid changed, or its step index jumped or repeated
    steps: list[tuple[float, float]]  # (s from the fault, step seconds) of rank 0

    @classmethod
    def of(cls, steps: list[dict[str, Any]], fault_at: float, until: float) -> Timeline:
        ranks = sorted({s["rank"] for s in steps})
        mine = sorted((s for s in steps if s["rank"] == ranks[0]), key=lambda s: s["step"])
        before = [s["dt"] for s in mine if s["t"] < fault_at]
        healthy = statistics.median(before[-50:])
        after = [s for s in mine if s["t"] >= fault_at and s["t"] <= until]
        # steps in flight when the fault went on may still finish at pace: "back" is
        # counted from the first step the fault slowed (from the start if none was), and
        # only while the fault lasted
        since = [s for s in mine if s["t"] >= fault_at]
        hurt = next((i for i, s in enumerate(since) if s["dt"] > BACK_WITHIN * healthy), 0)
        back = None
        for i in range(hurt, len(since) - 4):
            if since[i]["t"] > until:
                break
            if all(s["dt"] <= BACK_WITHIN * healthy for s in since[i : i + 5]):
                back = since[i]["t"] - fault_at
                break
        stall = 0.0
        if back is not None:
            times = [s["t"] for s in after if s["t"] - fault_at >= back]
            stall = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
        done = len(after)
        lost = max(0.0, (until - fault_at) - done * healthy) * len(ranks)
        restarted = False
        for r in ranks:
            seq = sorted((s for s in steps if s["rank"] == r), key=lambda s: s["t"])
            restarted |= len({s["pid"] for s in seq}) != 1
            restarted |= [s["step"] for s in seq] != list(range(len(seq)))
        return cls(
            healthy_s=healthy,
            back_s=back,
            longest_stall_s=stall,
            rank_seconds_lost=lost,
            restarted=restarted,
            steps=[(s["t"] - fault_at, s["dt"]) for s in mine if s["t"] >= fault_at - 10],
        )
