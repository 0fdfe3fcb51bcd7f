"""The end-to-end scan of the namespace testbed, through srun: a real Slurm whose slurmd
runs in each testbed host's namespace, the agents started as one ``srun`` step and
probing over the kernel's ECMP fabric; healthy, then with a link down one way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from slurmbed import SlurmCluster, skip_without_slurm

from tests.testbed import layout as L
from tests.testbed.bed import Testbed
from tests.testbed.faults import apply_fault

pytestmark = [pytest.mark.netns, pytest.mark.slurm]


@pytest.fixture(scope="module")
def slurm_on_testbed(testbed: Testbed) -> Iterator[SlurmCluster]:
    skip_without_slurm()
    attach = {host: (testbed.ns(host), testbed.mgmt(host)) for host in L.HOSTS}
    gateway = L.mgmt_gateway(testbed.slot)
    with SlurmCluster(attach=attach, controller_address=gateway) as cluster:
        yield cluster


def scan(bed: Testbed, cluster: SlurmCluster) -> tuple[int, dict[str, Any], str]:
    env = {**cluster.env, "CWCTL_INVENTORY": str(bed.inventory)}
    # 3 s: the agents of one srun step start over a loaded machine's scheduling, and a
    # window too thin to have seen a fault is inconclusive (exit 3), never healthy
    argv = [sys.executable, "-m", "cwctl.cli", "scan", "--via", "slurm", "--duration", "3"]
    proc = subprocess.run(
        [*argv, "--format", "json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.stdout, f"no report (exit {proc.returncode}): {proc.stderr[-2000:]}"
    report = json.loads(proc.stdout)
    why = {k: report.get(k) for k in ("verdict", "reasons")}
    return proc.returncode, report, f"{proc.stderr[-1500:]} {json.dumps(why)[:1500]}"


def test_healthy_testbed_scans_clean_through_srun(
    fabric: Testbed, slurm_on_testbed: SlurmCluster
) -> None:
    rc, report, err = scan(fabric, slurm_on_testbed)
    assert report["source"] == "slurm"
    hosts = {h["name"]: h for h in report["hosts"]}
    assert sorted(hosts) == list(L.HOSTS)
    assert {h["status"] for h in hosts.values()} == {"ok"}, err
    worst = max(abs(h["offset_ns"]) for h in hosts.values())
    assert worst < 2000.0, {n: h["offset_ns"] for n, h in hosts.items()}  # one kernel clock
    assert report["suspects"] == []
    assert rc == 0, err
    assert os.environ.get("SLURM_CONF") is None  # the cluster's config stayed in its env


def test_a_link_down_one_way_is_found_through_srun(
    fabric: Testbed, slurm_on_testbed: SlurmCluster
) -> None:
    apply_fault(fabric, "leaf1>spine2", "down")
    rc, report, err = scan(fabric, slurm_on_testbed)
    assert rc == 3, err
    assert {h["status"] for h in report["hosts"]} == {"ok"}
    assert report["suspects"], err
    top = report["suspects"][0]
    # named, or among the honest candidates where the paths were not all discovered
    assert "leaf1-spine2" in [top["element"], *top.get("candidates", [])], top
    lossy = [p for p in report["paths"] if p["loss"] > 0.05]
    assert lossy and all(
        L.leaf_of(p["src"]) == "leaf1" != L.leaf_of(p["dst"])
        or L.leaf_of(p["dst"]) == "leaf1" != L.leaf_of(p["src"])
        for p in lossy
    )
