"""Jobs in every answer: a simulated scan names, under its suspect, the jobs whose node
pairs cross it (and only those); the table, JSON and Prometheus show them; plans name the
jobs they touch; without a scheduler nothing changes."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.actions.jobs import job_reader
from cwctl.cli import app
from cwctl.jobs import Job, JobRead
from cwctl.report import render
from cwctl.scan.collection import Collection
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.session import ScanSession

LEAF1 = [f"gpu-{i:03d}" for i in range(1, 9)]  # the simulator's 8 hosts per leaf
LEAF2 = [f"gpu-{i:03d}" for i in range(9, 17)]
LEAF3 = [f"gpu-{i:03d}" for i in range(17, 25)]
JOBS = (
    Job("11", "alice", "across", (*LEAF1[:2], *LEAF2[:2]), (*LEAF1[:2], *LEAF2[:2])),
    Job("12", "bob", "inside-leaf1", tuple(LEAF1[4:8]), tuple(LEAF1[4:8])),
    Job("13", "chen", "leaf2-leaf3", (*LEAF2[4:6], *LEAF3[:2]), (*LEAF2[4:6], *LEAF3[:2])),
    Job("14", "dana", "single", (LEAF1[2],), (LEAF1[2],)),
)


async def _fixed(collection: Collection) -> JobRead:
    return JobRead("slurm", JOBS)


@pytest.fixture(scope="module")
def link_fault() -> FabricSnapshot:
    request = ScanRequest(
        sim=SimOptions(hosts=32, faults=("link:leaf1-spine2:down",)), duration_s=2.0
    )

    async def go() -> FabricSnapshot:
        async with ScanSession(request, jobs=_fixed) as session:
            return await session.scan()

    return asyncio.run(go())


def test_the_suspect_names_the_jobs_whose_pairs_cross_it(link_fault: FabricSnapshot) -> None:
    top = link_fault.suspects[0]
    assert "leaf1-spine2" in top.members
    hurt = {j["id"]: j for j in top.jobs or []}
    # 11 has pairs between leaf1 and leaf2: 2 x 2 of its 6 cross leaf1's uplinks; 12 sits
    # inside leaf1 (no spine), 13 never reaches leaf1, 14 has one node (no pairs)
    assert sorted(hurt) == ["11"]
    assert (hurt["11"]["paths_hit"], hurt["11"]["paths"], hurt["11"]["nodes"]) == (4, 6, 4)
    assert link_fault.jobs == {"scheduler": "slurm", "running": 4}
    out = link_fault.to_json()
    assert out["suspects"][0]["jobs"][0]["id"] == "11"
    assert out["jobs"] == {"scheduler": "slurm", "running": 4}


def test_the_table_and_prometheus_show_them(link_fault: FabricSnapshot) -> None:
    text = render(link_fault, "table", color=False)
    assert "jobs hurt: pairs hit" in text and "11 alice/across 4/6" in text
    assert "jobs: 4 running (slurm), 1 hurt by the suspects" in text
    prom = render(link_fault, "prom")
    element = link_fault.suspects[0].element
    assert f'cwctl_suspect_jobs{{element="{element}",kind="link"}} 1.0' in prom
    assert 'cwctl_jobs_running{scheduler="slurm"} 4.0' in prom
    assert 'job="' not in prom and "alice" not in prom  # no per-job series
    promtool = shutil.which("promtool")
    if promtool is not None:  # CI installs it (Debian's prometheus); its linter agrees
        lint = subprocess.run([promtool, "check", "metrics"], input=prom, capture_output=True,
                              text=True)  # fmt: skip
        assert lint.returncode == 0, lint.stdout + lint.stderr


def test_a_nic_suspect_names_the_job_on_its_host() -> None:
    request = ScanRequest(
        sim=SimOptions(hosts=32, faults=(f"nic:{LEAF1[2]}/mlx5_0:down",)), duration_s=2.0
    )

    async def go() -> FabricSnapshot:
        async with ScanSession(request, jobs=_fixed) as session:
            return await session.scan()

    snap = asyncio.run(go())
    hurt = [j for s in snap.suspects if LEAF1[2] in s.element for j in s.jobs or []]
    assert [(j["id"], j.get("on_node")) for j in hurt] == [("14", [LEAF1[2]])]


def test_without_a_scheduler_nothing_changes(tmp_path: Path) -> None:
    inv = tmp_path / "inv.toml"
    inv.write_text('[[host]]\nname = "h1"\naddress = "10.0.0.1"\n')
    assert job_reader(ScanRequest(inventory=inv)) is None  # no [scheduler]: nothing read
    inv.write_text('[scheduler]\nkind = "none"\n\n[[host]]\nname = "h1"\naddress = "10.0.0.1"\n')
    assert job_reader(ScanRequest(inventory=inv)) is None
    assert job_reader(ScanRequest(sim=SimOptions())) is None  # --sim without --jobs
    argv = ["scan", "--sim", "--hosts", "16", "--fault", "switch:spine2:down", "--duration", "1"]
    done = CliRunner().invoke(app, [*argv, "--format", "json"])
    report = json.loads(done.stdout)
    assert report["suspects"] and "jobs" not in report
    assert all("jobs" not in s for s in report["suspects"])
    table = CliRunner().invoke(app, argv).stdout
    assert "jobs" not in table
    prom = CliRunner().invoke(app, [*argv, "--format", "prom"]).stdout
    assert "cwctl_suspect_jobs" not in prom and "cwctl_jobs_running" not in prom
    plan = CliRunner().invoke(app, ["drain", "--sim", "--hosts", "16", "gpu-001"]).stdout
    assert "jobs" not in plan


def test_sim_jobs_reach_the_scan_and_the_plans() -> None:
    argv = ["--sim", "--hosts", "32", "--jobs", "6"]
    done = CliRunner().invoke(
        app, ["scan", *argv, "--fault", "switch:spine2:down", "--format", "json", "--duration", "1"]
    )
    report = json.loads(done.stdout)
    assert report["jobs"] == {"scheduler": "sim", "running": 6}
    assert all("jobs" in s for s in report["suspects"])
    from cwctl.fabric.names import sim_host_names
    from cwctl.jobs.simjobs import sim_jobs

    jobs = sim_jobs(sim_host_names(32, "gpu"), 6, 1).jobs
    host = jobs[0].hosts[0]
    plan = CliRunner().invoke(app, ["drain", *argv, host, "--format", "json"])
    touched = json.loads(plan.stdout)["plan"]["jobs"]
    assert [(j["id"], j["how"]) for j in touched] == [(jobs[0].id, f"loses node {host}")]
    assert touched[0]["marks"] == dict(jobs[0].marks)
    text = CliRunner().invoke(app, ["drain", *argv, host]).stdout
    assert f"{jobs[0].id} {jobs[0].user}/{jobs[0].name}" in text and "loses node" in text


def test_a_scheduler_that_does_not_answer_is_said_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real squeue (or none on PATH) with a config that names no controller: the
    scan's jobs are 'not known' with squeue's own words; a plan says so in a note. (A
    config that does not exist makes squeue retry for 60 s: READ_TIMEOUT_S cuts it.)"""
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=nowhere\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    inv = tmp_path / "inv.toml"
    inv.write_text('[scheduler]\nkind = "slurm"\n\n[[host]]\nname = "h1"\naddress = "10.0.0.1"\n')
    reader = job_reader(ScanRequest(inventory=inv))
    assert reader is not None
    read = asyncio.run(reader(Collection("ssh", [], None, 0.0)))  # type: ignore[arg-type]
    assert read is not None and read.jobs == () and read.error is not None
    assert read.error.startswith("squeue on local: ")
    snap = FabricSnapshot("ssh", None, 1.0, [], suspects=[])
    from cwctl.jobs.affected import attach

    attach(snap, read)
    assert snap.to_json()["jobs"]["error"] == read.error
    table = " ".join(render(snap, "table", color=False).split())  # (folded at 80 columns)
    assert f"jobs: not known ({read.error})" in table
    plan = CliRunner().invoke(app, ["drain", "-i", str(inv), "h1"])
    assert plan.exit_code == 0, plan.output
    assert "note: the running jobs are not known: squeue on local:" in plan.stdout


def test_a_scheduler_out_of_reach_leaves_the_dry_run_working(tmp_path: Path) -> None:
    """SSH settings that cannot work (an identity that does not exist): the plan is shown,
    its jobs 'not known' in a note; nothing was required of SSH to plan a drain."""
    inv = tmp_path / "remote.toml"
    inv.write_text(
        '[ssh]\nidentity = "no-such-key"\n\n[scheduler]\nkind = "slurm"\nhost = "ctl"\n\n'
        '[[host]]\nname = "gpu-001"\naddress = "10.0.1.1"\n'
    )
    done = CliRunner().invoke(app, ["drain", "gpu-001", "-i", str(inv)])
    assert done.exit_code == 0, done.output
    assert "[ctl] slurm: drain gpu-001" in done.stdout
    assert "note: the running jobs are not known: squeue on ctl: " in done.stdout
    assert "no-such-key" in done.stdout  # why, in the inventory's own words
