"""SSH vs srun: how long until every agent has said hello, for the same hosts.

A real Slurm in namespaces (``tests/integration/slurmbed.py``), each node also running
an sshd on its own address: the same inventory is scanned ``--via ssh`` (one SSH session
per host) and ``--via slurm`` (one ``srun`` step), alternately, best of ``ROUNDS``.
``launch s`` is from the command's start to its ``started`` progress line (every hello
in, the start time sent); ``scan s`` is the whole command (0.5 s of probing). Needs root,
slurmctld, slurmd, munged, srun and sshd (``.ci/run`` installs them); says so otherwise.
Run: ``.venv/bin/python -m bench launch`` (or ``bench.bench_launch 4 16``).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

CWCTL = str(Path(sys.executable).with_name("cwctl"))
SIZES = (8,)
ROUNDS = 2


def timed_scan(inventory: Path, via: str, env: dict[str, str]) -> tuple[float, float, int]:
    argv = [CWCTL, "--verbose", "scan", "-i", str(inventory), "--via", via, "--format", "json"]
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True
    )
    launch = float("nan")
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("cwctl: started") and launch != launch:
            launch = time.perf_counter() - started
    code = proc.wait()
    return launch, time.perf_counter() - started, code


def main(argv: list[str] | None = None) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
    from slurmbed import SlurmCluster, missing_parts

    missing = missing_parts() + ([] if shutil.which("sshd") else ["sshd"])
    if missing:
        print(f"skipped: needs {', '.join(missing)}")
        return
    sizes = tuple(int(a) for a in (argv or []) if a.isdigit()) or SIZES
    print(f"same hosts, 0.5 s of probing, best of {ROUNDS}")
    print(f"{'hosts':>6} {'ssh launch s':>13} {'srun launch s':>14} {'ssh/srun':>9}"
          f" {'ssh scan s':>11} {'srun scan s':>12}")  # fmt: skip
    for n in sizes:
        with SlurmCluster(n, sshd=True) as cluster:
            inventory = cluster.dir / "inventory.toml"
            inventory.write_text(cluster.inventory_text(duration_s=0.5))
            best: dict[str, tuple[float, float]] = {}
            for _ in range(ROUNDS):
                for via in ("ssh", "slurm"):
                    launch, total, code = timed_scan(inventory, via, cluster.env)
                    if code not in (0, 3):
                        print(f"{n:>6} --via {via} failed (exit {code}): {cluster.logs()[-300:]}")
                        return
                    prev = best.get(via, (float("inf"), float("inf")))
                    best[via] = (min(prev[0], launch), min(prev[1], total))
            (ssh_l, ssh_t), (srun_l, srun_t) = best["ssh"], best["slurm"]
            print(f"{n:>6} {ssh_l:>13.2f} {srun_l:>14.2f} {ssh_l / srun_l:>8.2f}x"
                  f" {ssh_t:>11.2f} {srun_t:>12.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
