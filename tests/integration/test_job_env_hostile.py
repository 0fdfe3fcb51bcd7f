"""``cwctl job-env`` where its output is used: a real bash ``eval``, and a real Slurm
TaskProlog whose task then holds the exclusion, without quotes.

- A journal whose action id holds a newline and a command: under ``eval`` the command
  does not run (the comment line is printed with ``?`` for the line break).
- ``--format taskprolog``: Slurm's slurmstepd takes the text after ``=`` literally; the
  task's environment holds ``^=mlx5_1`` exactly.
- The journal of another user (the operator), read only by the job's user: read when only
  its owner can write it, refused when group or others can.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.integration.slurmbed import SlurmCluster, skip_without_slurm

REPO = Path(__file__).resolve().parents[2]
INVENTORY = (
    "".join(f'[[switch]]\nname = "spine{i}"\nrole = "spine"\n' for i in (1, 2))
    + "".join(
        f'[[switch]]\nname = "leaf{i}"\nrole = "leaf"\nuplinks = ["spine1", "spine2"]\n'
        for i in (1, 2)
    )
    + "".join(
        f'[[host]]\nname = "{h}"\naddress = "10.0.{i}.1"\nleaf = "leaf{i}"\n'
        'nics = ["mlx5_0", "mlx5_1", "eth0"]\n'
        for i, h in ((1, "a1"), (2, "b1"))
    )
)
CWCTL = f"{sys.executable} -m cwctl"


def cwctl(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cwctl", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CWCTL_STATE_DIR": str(state)},
    )


@pytest.fixture
def excluded(tmp_path: Path) -> tuple[Path, Path, str]:
    """(inventory, state dir, action id): a1's mlx5_1 excluded by an applied reroute."""
    inv = tmp_path / "inv.toml"
    inv.write_text(INVENTORY)
    state = tmp_path / "state"
    done = cwctl(state, "reroute", "--sim", "-i", str(inv), "a1/mlx5_1", "--apply", "--yes",
                 "--format", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return inv, state, json.loads(done.stdout)["plan"]["id"]


def test_a_newline_in_a_journalled_id_runs_nothing_under_eval(
    excluded: tuple[Path, Path, str], tmp_path: Path
) -> None:
    inv, state, action_id = excluded
    journal = state / "journal.jsonl"
    pwned = tmp_path / "PWNED"
    hostile = f"{action_id}\ntouch {pwned}\n#"
    journal.write_text(journal.read_text().replace(action_id, json.dumps(hostile)[1:-1]))
    script = f'eval "$({CWCTL} job-env --sim -i {inv} --nodes a1,b1)"; echo "[$NCCL_IB_HCA]"'
    run = subprocess.run(
        ["bash", "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CWCTL_STATE_DIR": str(state)},
    )
    assert run.returncode == 0, run.stderr
    assert not pwned.exists()
    assert run.stdout.strip().splitlines()[-1] == "[^=mlx5_1]"
    shown = cwctl(state, "job-env", "--sim", "-i", str(inv), "--nodes", "a1").stdout
    assert f"excluded by {action_id}?touch {pwned}?#" in shown


def test_taskprolog_lines_are_export_lines_with_bare_values(
    excluded: tuple[Path, Path, str],
) -> None:
    inv, state, _ = excluded
    done = cwctl(state, "job-env", "--sim", "-i", str(inv), "--nodes", "a1", "--format",
                 "taskprolog")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "export NCCL_IB_HCA=^=mlx5_1\n"


def test_another_users_journal_is_read_only_when_only_its_owner_writes_it(
    excluded: tuple[Path, Path, str],
) -> None:
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    inv, state, _ = excluded
    journal = state / "journal.jsonl"
    for path in (state, journal):
        os.chown(path, 12345, 12345)  # the operator's, not this user's
    state.chmod(0o711)
    journal.chmod(0o644)
    args = ("job-env", "--sim", "-i", str(inv), "--nodes", "a1", "--format", "taskprolog")
    done = cwctl(state, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "export NCCL_IB_HCA=^=mlx5_1\n"
    refused = cwctl(state, "rollback", "--apply", "--yes")  # it runs commands: refused
    assert refused.returncode == 2 and "owned by uid 12345" in refused.stderr, refused.stderr
    journal.chmod(0o666)
    spoilt = cwctl(state, *args)
    assert spoilt.returncode == 2
    assert spoilt.stderr.strip().endswith("writable by group or others (mode 0666)")


@pytest.mark.slurm
def test_a_real_slurm_taskprolog_puts_the_exclusion_in_the_tasks_environment(
    excluded: tuple[Path, Path, str], tmp_path: Path
) -> None:
    skip_without_slurm()
    inv, state, _ = excluded
    prolog = tmp_path / "taskprolog.sh"
    prolog.write_text(
        "#!/bin/sh\n"
        f"cd {REPO} && CWCTL_STATE_DIR={state} exec {CWCTL} job-env --format taskprolog "
        f"--sim -i {inv} --nodes a1\n"
    )
    prolog.chmod(0o755)
    with SlurmCluster(1, extra_conf=f"TaskProlog={prolog}\n") as cluster:
        out = cluster.run("srun", "-N1", "printenv", "NCCL_IB_HCA").stdout
    assert out == "^=mlx5_1\n"


def test_a_host_list_of_1e8_names_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    """Under a 2 GB address-space limit (the old expansion reached MemoryError at 2.9 GB)."""
    limit = 2 << 30
    done = subprocess.run(
        [sys.executable, "-m", "cwctl", "job-env", "--sim", "--nodes", "x[0-999][0-999][0-99]"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CWCTL_STATE_DIR": str(tmp_path / "state")},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "cwctl: host list 'x[0-999][0-999][0-99]' names more than 1000000 hosts\n"
    )


@pytest.mark.slurm
def test_hostile_job_names_on_a_real_slurm_break_no_read_and_forge_no_job(tmp_path: Path) -> None:
    """Job 1's name holds U+2028, CR, VT, FS and NEL; job 2's a newline and a forged row
    for a job 101 of mallory's on job 1's node. job-env for job 1 answers; 101 is no job."""
    skip_without_slurm()
    with SlurmCluster(2) as cluster:
        n1, n2 = cluster.nodes
        names = ("eval\u2028run\rx\x0bv\x1cs\x85n", f"x\n101\x1fmallory\x1f(null)\x1f{n1}\x1f\x1ff")
        ids = []
        for node, name in zip((n1, n2), names, strict=True):
            out = cluster.run("sbatch", "--parsable", "-N1", "-w", node, "-J", name,
                              "--output", "/dev/null", "--wrap", "sleep 300").stdout  # fmt: skip
            ids.append(out.strip().split(";")[0])
        try:
            _wait_running(cluster, ids)
            inv = tmp_path / "inv.toml"
            inv.write_text(
                '[scheduler]\nkind = "slurm"\n'
                + "".join(
                    f'[[host]]\nname = "{n}"\naddress = "{cluster.addresses[n]}"\n'
                    'nics = ["mlx5_0", "mlx5_1"]\n'
                    for n in cluster.nodes
                )
            )
            env = {**cluster.env, "CWCTL_STATE_DIR": str(tmp_path / "state")}

            def job_env(job: str) -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [sys.executable, "-m", "cwctl", "job-env", job, "-i", str(inv)],
                    cwd=REPO, capture_output=True, text=True, timeout=120, env=env,
                )  # fmt: skip

            first = job_env(ids[0])
            assert first.returncode == 0, first.stderr
            assert f"# cwctl job-env for job {ids[0]} (root/eval?run?x?v?s?n, 1 node): {n1}" in (
                first.stdout
            )
            forged = job_env("101")
            assert forged.returncode == 2
            assert forged.stderr.startswith("cwctl: no running job '101' (slurm lists: ")
        finally:
            cluster.run("scancel", *ids, check=False)


def _wait_running(cluster: SlurmCluster, ids: list[str]) -> None:
    for _ in range(600):  # a hang guard: 30 s
        running = cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%i").stdout.split()
        if set(ids) <= set(running):
            return
        threading.Event().wait(0.05)
    raise AssertionError(f"jobs not running: {cluster.logs()}")
