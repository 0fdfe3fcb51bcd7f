"""The action commands end to end through typer's CliRunner: the simulator (apply, verify,
a later scan sees the change, rollback) and a Slurm drain run by the real executor
against a stand-in ``scontrol`` (a tmp-dir script that logs its argv; NOT Slurm)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app

# 5 s at the default 2 pairs/s: the 10 pairs per peer a --verify rescan needs to tell
# (telemetry/window.py); simulated seconds, not waited
SIM = ["--sim", "--hosts", "16", "--hosts-per-leaf", "4", "--duration", "5"]
FAULT = ["--fault", "switch:spine2:down"]
HOSTILE = "'; rm -rf / #"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "state"
    monkeypatch.setenv("CWCTL_STATE_DIR", str(directory))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    return directory


def run(*args: str, input: str | None = None) -> object:
    return CliRunner().invoke(app, list(args), input=input)


def scan_json(*extra: str) -> dict:
    # rate 20: the probes it takes to name spine2 (or to see it gone)
    result = run("scan", *SIM, *FAULT, "--rate", "20", "--format", "json", *extra)
    return json.loads(result.stdout)  # type: ignore[attr-defined]


def test_dry_run_changes_nothing(state: Path) -> None:
    result = run("reroute", "spine2", *SIM)
    assert result.exit_code == 0, result.output
    assert "ECMP weight of spine2 1 -> 0" in result.stdout
    assert "dry run" in result.stderr
    assert not state.exists()  # no journal, no saved simulator state


def test_reroute_in_the_sim_removes_the_fault_and_a_later_scan_sees_it(state: Path) -> None:
    before = scan_json()
    assert [s["element"] for s in before["suspects"]][:1] == ["spine2"]
    assert any(p["loss"] > 0 for p in before["paths"])
    result = run("reroute", "spine2", *SIM, *FAULT, "--apply", "--yes", "--verify")
    assert result.exit_code == 0, result.output
    assert "spine2 is no longer a suspect" in result.stderr
    after = scan_json()  # a new process would see the same: the state is saved
    assert after["suspects"] == []
    assert all(p["loss"] == 0 for p in after["paths"])
    undo = run("rollback", "--apply", "--yes")
    assert undo.exit_code == 0, undo.output
    assert [s["element"] for s in scan_json()["suspects"]][:1] == ["spine2"]
    twice = run("rollback", "--apply", "--yes")
    assert twice.exit_code == 2 and "refusing to roll it back twice" in twice.stderr


def test_declined_confirmation_applies_nothing(state: Path) -> None:
    no = run("reroute", "spine2", *SIM, "--apply", input="n\n")
    assert no.exit_code == 2 and "not applied" in no.stderr
    assert not (state / "journal.jsonl").exists()
    yes = run("reroute", "spine2", *SIM, "--apply", input="y\n")
    assert yes.exit_code == 0, yes.output
    listed = run("journal", "--format", "json")
    (row,) = json.loads(listed.stdout)["entries"]
    assert (row["kind"], row["element"], row["status"], row["where"]) == (
        "reroute",
        "spine2",
        "applied",
        "sim",
    )


def test_verify_that_still_finds_the_suspect_exits_3(state: Path) -> None:
    result = run(
        "drain", "gpu-003", *SIM, "--fault", "host:gpu-003:lossy=0.3", "--apply", "--yes",
        "--verify",
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "gpu-003 is still a suspect" in result.stderr


def slurm_inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inv.toml"
    path.write_text(
        '[scheduler]\nkind = "slurm"\n\n'
        '[[host]]\nname = "gpu-001"\naddress = "10.0.1.1"\n\n'
        '[[host]]\nname = "gpu-002"\naddress = "10.0.1.2"\n'
    )
    return path


def stand_in_scontrol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int) -> Path:
    """A stand-in ``scontrol`` (NOT Slurm) first on PATH: logs its argv, exits ``code``."""
    bindir = tmp_path / "stand-in-bin"
    bindir.mkdir(exist_ok=True)
    log = tmp_path / "scontrol.log"
    script = bindir / "scontrol"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\nsys.exit({code})\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return log


def test_drain_runs_scontrol_with_the_reason_as_one_argument(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = stand_in_scontrol(tmp_path, monkeypatch, 0)
    inv = str(slurm_inventory(tmp_path))
    plan = run("drain", "gpu-002", "-i", inv, "--reason", HOSTILE)
    assert plan.exit_code == 0 and not log.exists()
    assert "scontrol update NodeName=gpu-002 State=DRAIN 'Reason='\"'\"';" in plan.stdout
    result = run("drain", "gpu-002", "-i", inv, "--reason", HOSTILE, "--apply", "--yes")
    assert result.exit_code == 0, result.output
    undo = run("rollback", "--apply", "--yes")
    assert undo.exit_code == 0, undo.output
    assert [json.loads(line) for line in log.read_text().splitlines()] == [
        ["update", "NodeName=gpu-002", "State=DRAIN", f"Reason={HOSTILE}"],
        ["update", "NodeName=gpu-002", "State=RESUME"],
    ]


def test_a_failed_step_exits_3_and_says_which(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in_scontrol(tmp_path, monkeypatch, 1)
    inv = str(slurm_inventory(tmp_path))
    result = run("drain", "gpu-001", "-i", inv, "--apply", "--yes")
    assert result.exit_code == 3, result.output
    assert "step 1 failed on local" in result.stderr
    nothing = run("rollback")
    assert nothing.exit_code == 2 and "did not apply" in nothing.stderr


def test_tcp_reroute_without_route_data_exits_2_naming_it(state: Path, tmp_path: Path) -> None:
    path = tmp_path / "inv.toml"
    path.write_text(
        '[[switch]]\nname = "spine1"\nrole = "spine"\n\n'
        '[[switch]]\nname = "leaf1"\nrole = "leaf"\nuplinks = ["spine1"]\n\n'
        '[[host]]\nname = "gpu-001"\naddress = "10.0.1.1"\nleaf = "leaf1"\n'
    )
    result = run("reroute", "spine1", "-i", str(path))
    assert result.exit_code == 2
    assert "--prefix" in result.stderr and "--gateway spine1=ADDRESS" in result.stderr
    unknown = run("reroute", "spine7", "-i", str(path))
    assert unknown.exit_code == 2 and "no element 'spine7'" in unknown.stderr


def two_nic_inventory(tmp_path: Path) -> Path:
    lines = [
        '[[switch]]\nname = "spine1"\nrole = "spine"\n',
        '[[switch]]\nname = "spine2"\nrole = "spine"\n',
    ]
    for leaf in (1, 2):
        lines.append(
            f'[[switch]]\nname = "leaf{leaf}"\nrole = "leaf"\nuplinks = ["spine1", "spine2"]\n'
        )
    for i in range(1, 9):
        leaf = 1 + (i - 1) // 4
        lines.append(
            f'[[host]]\nname = "gpu-00{i}"\naddress = "10.0.{leaf}.{i}"\nleaf = "leaf{leaf}"\n'
            'nics = ["mlx5_0", "mlx5_1"]\n'
        )
    path = tmp_path / "two-nics.toml"
    path.write_text("\n".join(lines))
    return path


@pytest.mark.parametrize(
    ("element", "fault"),
    [
        ("gpu-001/mlx5_1", "nic:gpu-001/mlx5_1:lossy=0.3"),
        ("leaf1-spine2", "link:leaf1-spine2:down"),
    ],
)
def test_nic_and_link_reroutes_in_the_sim_verify(
    state: Path, tmp_path: Path, element: str, fault: str
) -> None:
    # two NICs a host: 20 s for each NIC to be crossed by enough exchanges to tell
    sim = ["--sim", "-i", str(two_nic_inventory(tmp_path)), "--duration", "20"]
    result = run("reroute", element, *sim, "--fault", fault, "--apply", "--yes", "--verify")
    assert result.exit_code == 0, result.output
    assert f"{element} is no longer a suspect" in result.stderr


def test_format_json_is_one_action_object(state: Path) -> None:
    planned = run("reroute", "spine2", *SIM, "--format", "json")
    assert planned.exit_code == 0, planned.output
    data = json.loads(planned.stdout)
    assert (data["schema"], data["status"]) == ("cwctl.action/1", "planned")
    assert data["plan"]["steps"][0]["change"] == {
        "op": "ecmp_weight",
        "leaf": "leaf1",
        "spine": "spine2",
        "weight": 0,
    }
    done = run(
        "reroute", "spine2", *SIM, *FAULT, "--format", "json", "--apply", "--yes", "--verify"
    )
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    assert data["status"] == "applied" and data["verify"]["gone"] is True
    assert [s["status"] for s in data["steps"]] == ["ok"] * 4


def test_drain_then_resume_in_the_sim(state: Path) -> None:
    nothing = run("resume", "gpu-002", *SIM[:-2], "--apply", "--yes")
    assert nothing.exit_code == 0 and "nothing to apply" in nothing.stderr
    drained = run("drain", "gpu-002", *SIM[:-2], "--apply", "--yes")
    assert drained.exit_code == 0, drained.output
    resumed = run("resume", "gpu-002", *SIM[:-2], "--apply", "--yes")
    assert resumed.exit_code == 0, resumed.output
    assert "resume gpu-002 in the simulated scheduler" in resumed.stdout
    rows = json.loads(run("journal", "--format", "json").stdout)["entries"]
    assert [(r["kind"], r["status"]) for r in rows] == [("drain", "applied"), ("resume", "applied")]


def test_a_dry_run_that_reads_nothing_needs_no_ssh(state: Path, tmp_path: Path) -> None:
    path = tmp_path / "remote.toml"
    path.write_text(
        '[ssh]\nidentity = "no-such-key"\n\n[scheduler]\nkind = "k8s"\nhost = "k8s-ctl"\n\n'
        '[[host]]\nname = "gpu-001"\naddress = "10.0.1.1"\n'
    )
    result = run("drain", "gpu-001", "-i", str(path), "--evict", "--sudo")
    assert result.exit_code == 0, result.output
    assert "[k8s-ctl] kubernetes: cordon gpu-001" in result.stdout
    assert "run:  sudo -n -- kubectl drain gpu-001 --ignore-daemonsets" in result.stdout
    assert "undo: (cannot be undone)" in result.stdout
