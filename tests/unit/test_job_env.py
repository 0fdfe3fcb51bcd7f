"""``cwctl job-env``: the NCCL/Gloo environment of a job's hosts, from the journal of
applied NIC and steering actions (on the simulated fabric of an inventory with NICs)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app

INVENTORY = (
    """
[[switch]]
name = "spine1"
role = "spine"

[[switch]]
name = "spine2"
role = "spine"
"""
    + "".join(
        f'\n[[switch]]\nname = "leaf{i}"\nrole = "leaf"\nuplinks = ["spine1", "spine2"]\n'
        for i in (1, 2)
    )
    + "".join(
        f'\n[[host]]\nname = "{h}"\naddress = "10.0.{i}.1"\nleaf = "leaf{i}"\n'
        'nics = ["mlx5_0", "mlx5_1", "eth0", "eth1"]\n'
        for i, h in ((1, "a1"), (2, "b1"))
    )
)


def run(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.toml"
    path.write_text(INVENTORY)
    return path


def test_nothing_applied_nothing_to_set(inv: Path) -> None:
    done = run("job-env", "--sim", "-i", str(inv), "--nodes", "a1,b1")
    assert done.exit_code == 0, done.output  # type: ignore[attr-defined]
    assert "export" not in done.stdout  # type: ignore[attr-defined]


def test_exclusions_of_applied_actions_not_rolled_back(inv: Path) -> None:
    sim = ["--sim", "-i", str(inv)]
    ids = {}
    for element in ("a1/mlx5_1", "a1/eth1", "spine2"):
        done = run("reroute", *sim, element, "--apply", "--yes", "--format", "json")
        assert done.exit_code == 0, done.output  # type: ignore[attr-defined]
        ids[element] = json.loads(done.stdout)["plan"]["id"]  # type: ignore[attr-defined]
    out = run("job-env", *sim, "--nodes", "a1,b1").stdout  # type: ignore[attr-defined]
    assert "export NCCL_IB_HCA='^=mlx5_1'" in out
    assert "export NCCL_SOCKET_IFNAME==eth0" in out  # the interfaces left, as NCCL names them
    assert "export GLOO_SOCKET_IFNAME=eth0" in out  # Gloo has no exclusion syntax
    assert "steered around spine2" in out
    env = subprocess.run(  # what a job's shell makes of it
        ["sh", "-c", "eval \"$1\"; echo $NCCL_IB_HCA $NCCL_SOCKET_IFNAME", "sh", out],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert env == ["^=mlx5_1", "=eth0"]
    # b1 alone: nothing of its own excluded
    alone = json.loads(run("job-env", *sim, "--nodes", "b[1]", "--format", "json").stdout)  # type: ignore[attr-defined]
    assert alone["env"] == {} and alone["hosts"] == ["b1"]
    # rolled back, the exclusion is gone from the environment
    done = run("rollback", ids["a1/mlx5_1"], "--apply", "--yes")
    assert done.exit_code == 0, done.output  # type: ignore[attr-defined]
    out = run("job-env", *sim, "--nodes", "a1").stdout  # type: ignore[attr-defined]
    assert "export NCCL_IB_HCA" not in out and "export NCCL_SOCKET_IFNAME==eth0" in out


def test_a_job_by_id_and_bad_names(inv: Path) -> None:
    sim = ["--sim", "-i", str(inv), "--jobs", "2"]
    done = run("job-env", *sim, "4100")
    assert done.exit_code == 0 and "# cwctl job-env for job 4100" in done.stdout  # type: ignore[attr-defined]
    for argv, words in (
        (["4999"], "no running job '4999' (sim lists: 4100"),
        (["--nodes", "zz9"], "no host 'zz9'"),
        ([], "give a JOBID or --nodes LIST"),
        (["4100", "--nodes", "a1"], "give a JOBID or --nodes LIST"),
    ):
        bad = run("job-env", *sim, *argv)
        assert bad.exit_code == 2 and words in bad.output, bad.output  # type: ignore[attr-defined]
    nojobs = run("job-env", "--sim", "-i", str(inv), "4100")
    assert nojobs.exit_code == 2 and "no scheduler" in nojobs.output  # type: ignore[attr-defined]
