"""Which jobs a fault hurts, on the real thing: a real Slurm whose slurmd runs in each
namespace testbed host, three ``sbatch --wrap 'sleep 600'`` jobs running, a link fault on
the kernel's ECMP fabric, and cwctl's scan, plans and ``job-env`` reading ``squeue``.

Jobs (the testbed: gpu-001..004 behind leaf1, gpu-005..008 behind leaf2, two spines):

- ``across``: gpu-001, gpu-002 (behind leaf1) and gpu-005, gpu-006: its node pairs
  between the leaves cross leaf1's uplinks;
- ``elsewhere``: gpu-007, gpu-008, behind leaf2 only;
- ``inleaf1``: gpu-003, gpu-004, behind leaf1 but never leaving it (no spine link).

One Slurm cluster and one testbed for the module; the scans go over SSH (every node is
taken by the jobs, so an ``srun`` step could not start).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from slurmbed import SlurmCluster, skip_without_slurm

from cwctl.jobs.slurm import expand_hostlist
from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import apply_fault

pytestmark = [pytest.mark.netns, pytest.mark.slurm]

JOBS = {
    "across": ("gpu-001", "gpu-002", "gpu-005", "gpu-006"),
    "elsewhere": ("gpu-007", "gpu-008"),
    "inleaf1": ("gpu-003", "gpu-004"),
}


@pytest.fixture(scope="module")
def cluster(testbed: Testbed) -> Iterator[SlurmCluster]:
    skip_without_slurm()
    attach = {host: (testbed.ns(host), testbed.mgmt(host)) for host in L.HOSTS}
    with SlurmCluster(attach=attach, controller_address=L.mgmt_gateway(testbed.slot)) as c:
        yield c


@pytest.fixture(scope="module")
def jobs(cluster: SlurmCluster) -> Iterator[dict[str, str]]:
    """The jobs' ids by name, once all are running."""
    ids: dict[str, str] = {}
    try:
        for name, nodes in JOBS.items():
            extra = ["--comment", "protected"] if name == "across" else []
            out = cluster.run(
                "sbatch", "--parsable", "-N", str(len(nodes)), "-w", ",".join(nodes),
                "-J", name, *extra, "--output", "/dev/null", "--wrap", "sleep 600",
            ).stdout  # fmt: skip
            ids[name] = out.strip().split(";")[0]
        deadline = time.monotonic() + 30
        while True:
            running = cluster.run("squeue", "-h", "-t", "RUNNING", "-o", "%i").stdout.split()
            if set(ids.values()) <= set(running):
                break
            assert time.monotonic() < deadline, f"jobs not running: {cluster.logs()}"
            time.sleep(0.2)
        yield ids
    finally:
        if ids:
            cluster.run("scancel", *ids.values(), check=False)


@pytest.fixture(scope="module")
def inventory(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The testbed's inventory with the scheduler on this machine (squeue, scontrol)."""
    path = tmp_path_factory.mktemp("jobs") / "inventory.toml"
    path.write_text('[scheduler]\nkind = "slurm"\n\n' + testbed.inventory.read_text())
    return path


def cwctl(cluster: SlurmCluster, *args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**cluster.env, "CWCTL_STATE_DIR": str(state)}
    env.pop("CWCTL_INVENTORY", None)
    return subprocess.run(
        [sys.executable, "-m", "cwctl.cli", *args],
        capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip


def test_host_lists_expand_as_scontrol_show_hostnames_does(cluster: SlurmCluster) -> None:
    for text in ("gpu-[001-003,007],login-1", "r[1-2]n[08-10]", "gpu-005", "a[9-11]"):
        real = cluster.run("scontrol", "show", "hostnames", text).stdout.split()
        assert expand_hostlist(text) == real, text


def test_a_link_fault_names_the_job_whose_pairs_cross_it(
    fabric: Testbed,
    cluster: SlurmCluster,
    jobs: dict[str, str],
    inventory: Path,
    tmp_path: Path,
) -> None:
    apply_fault(fabric, "leaf1-spine2", "down")
    done = cwctl(cluster, "scan", "-i", str(inventory), "--duration", "2", "--format", "json",
                 state=tmp_path)  # fmt: skip
    assert done.stdout, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == 3, done.stderr[-2000:]
    assert report["jobs"] == {"scheduler": "slurm", "running": 3}
    top = report["suspects"][0]
    assert "leaf1-spine2" in [top["element"], *top.get("candidates", [])], top
    hurt = {j["id"]: j for j in top["jobs"]}
    assert list(hurt) == [jobs["across"]], top["jobs"]  # not elsewhere, not inside leaf1
    across = hurt[jobs["across"]]
    assert (across["name"], across["user"], across["nodes"]) == ("across", "root", 4)
    # 2 x 2 of its 6 pairs are between the leaves, the only ones a spine link carries;
    # which of those cross it is the kernel's hash of the probes' ports (random per run),
    # seen as loss: the link is down, so a pair with a probed flow across it lost probes.
    # Each of those is hit; a pair whose path discovery missed (a loaded machine) counts
    # by its equal-cost routes, one of which is the link, lost probes or not
    nodes = set(JOBS["across"])
    crossed = {
        frozenset((p["src"], p["dst"]))
        for p in report["paths"]
        if p["loss"] > 0 and {p["src"], p["dst"]} <= nodes
    }
    assert crossed and all(L.leaf_of(a) != L.leaf_of(b) for a, b in map(sorted, crossed))
    assert across["paths"] == 6
    assert len(crossed) <= across["paths_hit"] <= 4, sorted(map(sorted, crossed))
    hosts = {h["name"]: h.get("jobs") for h in report["hosts"]}
    assert hosts["gpu-007"] == [jobs["elsewhere"]] and hosts["gpu-001"] == [jobs["across"]]


def test_plans_name_the_jobs_they_touch(
    cluster: SlurmCluster, jobs: dict[str, str], inventory: Path, tmp_path: Path
) -> None:
    drain = cwctl(cluster, "drain", "gpu-002", "-i", str(inventory), state=tmp_path)
    assert drain.returncode == 0, drain.stderr
    assert f"{jobs['across']} root/across (4 nodes): loses node gpu-002" in drain.stdout
    assert "elsewhere" not in drain.stdout and "inleaf1" not in drain.stdout
    plan = cwctl(cluster, "drain", "gpu-002", "-i", str(inventory), "--format", "json",
                 state=tmp_path)  # fmt: skip
    touched = json.loads(plan.stdout)["plan"]["jobs"]
    assert [(j["id"], j["marks"]) for j in touched] == [
        (jobs["across"], {"comment": "protected"})
    ]  # the mark a watch policy may protect
    assert cluster.show_node("gpu-002")["State"] == "ALLOCATED"  # a dry run


def test_job_env_prints_the_exclusions_for_the_jobs_hosts(
    testbed: Testbed,
    cluster: SlurmCluster,
    jobs: dict[str, str],
    inventory: Path,
    tmp_path: Path,
) -> None:
    # the same fabric, its hosts with two RDMA devices beside eth1 (the NCCL file is
    # written for real, over SSH, on gpu-005; it does not check that the device exists)
    nics = tmp_path / "inventory.toml"
    nics.write_text(
        inventory.read_text().replace('nics = ["eth1"]', 'nics = ["eth1", "mlx5_0", "mlx5_1"]')
    )
    conf = tmp_path / "nccl.conf"
    state = tmp_path / "state"
    reroute = cwctl(cluster, "reroute", "gpu-005/mlx5_1", "-i", str(nics), "--nccl-conf",
                    str(conf), "--apply", "--yes", state=state)  # fmt: skip
    assert reroute.returncode == 0, reroute.stderr
    assert f"{jobs['across']} root/across" in reroute.stdout  # the plan said whose it is
    assert "NCCL_IB_HCA=^=mlx5_1" in conf.read_text()
    env = cwctl(cluster, "job-env", jobs["across"], "-i", str(nics), state=state)
    assert env.returncode == 0, env.stderr
    assert "export NCCL_IB_HCA='^=mlx5_1'" in env.stdout
    assert "gpu-005: mlx5_1 excluded by" in env.stdout
    other = cwctl(cluster, "job-env", jobs["elsewhere"], "-i", str(nics), state=state)
    assert other.returncode == 0 and "export" not in other.stdout  # not its hosts
    gone = cwctl(cluster, "job-env", "999999", "-i", str(nics), state=state)
    assert gone.returncode == 2 and "no running job '999999'" in gone.stderr
