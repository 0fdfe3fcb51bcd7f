"""The probe agent's CPU per 1 000 probes: today's agent against a baseline, in one run.

``python -m bench agent`` (about 30 s): ``AGENTS`` agents on loopback probe each other
(signed, kernel stamps, ``RATE`` coded pairs/s per peer for ``DURATION_S``), each run
alone and driven the way a scan drives them (params, hello, start, summary on stdout).
Each agent's own figures (its summary's ``cost``: CPU over its probing window, packets)
are summed; CPU per 1 000 probes is that CPU over the probes the agents sent, so it
holds both ends of every exchange (probe, reply, follow-up, their stamps).

The baseline is the agent as it was before it was made cheaper (``BASELINE``, taken from
git into a temporary directory and run the same way), alternated with today's agent,
``ROUNDS`` times each, medians compared: the ratio is what the change bought on this
machine now. Without git or that commit (a tarball), today's figure alone is printed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "02a9106"  # main before the agent's hot path was reworked (issue 27)
AGENTS = 4
RATE = 100.0
DURATION_S = 2.0
ROUNDS = 3
AGENT_MAIN = "from cwctl.probe import agent\nagent.main()"


def baseline_tree(into: Path) -> Path | None:
    """The baseline's ``cwctl/probe`` checked out under ``into``, or None."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BASELINE, "cwctl/__init__.py", "cwctl/probe"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return into


def run_agents(root: Path) -> tuple[float, int, int]:
    """One scan's worth of agents from ``root``: (probe CPU s, probes sent, packets)."""
    code = f"import sys; sys.path.insert(0, {str(root)!r})\n" + AGENT_MAIN
    key, nonce = os.urandom(32).hex(), os.urandom(8).hex()
    procs = []
    for i in range(AGENTS):
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        params = {
            "type": "params", "host": f"h{i}", "bind": f"127.0.0.{2 + i}", "port": 0, "ports": 4,
            "rate": RATE, "gap_ns": 20000, "duration_s": DURATION_S, "timeout_s": 0.5,
            "linger_s": 0.7, "auth": {"key": key, "nonce": nonce},
            "deadline_s": DURATION_S + 30,
        }  # fmt: skip
        send(proc, params)
        procs.append(proc)
    hellos = [json.loads(read(proc)) for proc in procs]
    peers = {h["host"]: [h["address"], h["port"]] for h in hellos}
    start = {"type": "start", "peers": peers, "probe": list(peers)}
    for proc in procs:
        send(proc, {**start, "start_ns": time.time_ns() + 300_000_000})
    cpu_s, sent, packets = 0.0, 0, 0
    for proc in procs:
        assert proc.stdout is not None and proc.stdin is not None
        for line in proc.stdout:
            rec = json.loads(line)
            if rec["type"] == "summary":
                cpu_s += rec["cost"]["probe_cpu_s"]
                sent += sum(rec["sent"].values())
                packets += rec["cost"]["tx_packets"] + rec["cost"]["rx_packets"]
        proc.stdin.close()
        proc.wait()
    return cpu_s, sent, packets


def send(proc: subprocess.Popen[bytes], msg: dict[str, object]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(msg).encode() + b"\n")
    proc.stdin.flush()


def read(proc: subprocess.Popen[bytes]) -> bytes:
    assert proc.stdout is not None
    return proc.stdout.readline()


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cwctl-bench-agent-") as tmp:
        trees = {"today": ROOT}
        base = baseline_tree(Path(tmp))
        if base is not None:
            trees = {f"baseline {BASELINE}": base, **trees}
        else:
            print(f"(no baseline: git archive {BASELINE} failed; today's agent alone)")
        per_k: dict[str, list[float]] = {name: [] for name in trees}
        per_probe_packets: dict[str, float] = {}
        for _ in range(ROUNDS):
            for name, root in trees.items():
                cpu_s, sent, packets = run_agents(root)
                per_k[name].append(cpu_s / max(1, sent) * 1e6)  # ms per 1 000 probes
                per_probe_packets[name] = packets / max(1, sent)
    print(
        f"{AGENTS} agents on loopback, {RATE:g} pairs/s per peer, {DURATION_S:g} s, signed,"
        f" median of {ROUNDS}; a probe's CPU holds both its ends"
    )
    print(f"{'agent':22}{'ms CPU/1000 probes':>20}{'packets/probe':>15}{'x baseline':>12}")
    first = statistics.median(next(iter(per_k.values())))
    for name, values in per_k.items():
        ms = statistics.median(values)
        print(f"{name:22}{ms:20.1f}{per_probe_packets[name]:15.2f}{ms / first:12.2f}")


if __name__ == "__main__":
    main()
