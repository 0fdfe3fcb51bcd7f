"""Checks that match what runs, and the small CLI conventions (issue 35, items 10 and
13): --gateway on an unknown spine or on the simulator is refused; `inventory check`
refuses the identity file a scan would refuse; -y and -o; JSON with a schema name for
`inventory check`, `sim status` and `job-env`; an empty JOBID said so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_gateway_on_the_simulator_is_refused_not_ignored() -> None:
    code, out, err = run("reroute", "spine2", "--sim", "--gateway", "spine9=1.2.3.4")
    assert code == 2 and out == ""
    assert err.startswith("cwctl: --gateway: in the simulated fabric the leaves choose")


def test_gateway_to_a_spine_the_inventory_lacks_is_refused(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.toml"
    example = (ROOT / "inventory.example.toml").read_text()
    inventory.write_text(example.replace('identity = "~/.ssh/id_ed25519"', 'identity = "id"'))
    (tmp_path / "id").write_text("")
    code, _, err = run("reroute", "spine2", "-i", str(inventory), "--prefix", "10.0.0.0/8",
                       "--gateway", "spine9=1.2.3.4")  # fmt: skip
    assert code == 2
    assert err == "cwctl: --gateway spine9=...: spine9 is not a spine (spines: spine1, spine2)\n"


def test_inventory_check_refuses_the_identity_scan_refuses(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.toml"
    inventory.write_text('[ssh]\nidentity = "no-such-key"\n\n'
                         '[[host]]\nname = "a"\naddress = "10.0.0.1"\n')  # fmt: skip
    code, out, err = run("inventory", "check", "-i", str(inventory))
    assert code == 2 and out == ""
    assert f"[ssh] identity '{tmp_path}/no-such-key' cannot be read" in err
    scan = run("scan", "-i", str(inventory))
    assert scan[0] == 2 and scan[2] == err  # the same refusal, in the same words
    (tmp_path / "no-such-key").write_text("")
    assert run("inventory", "check", "-i", str(inventory))[0] == 0


def test_inventory_check_as_json(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.toml"
    switch = '[[switch]]\nname = "leaf1"\nrole = "leaf"\n\n'
    inventory.write_text(switch + '[[host]]\nname = "a"\naddress = "10.0.0.1"\nleaf = "leaf1"\n')
    code, out, _ = run("inventory", "check", "-i", str(inventory), "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert data["schema"] == "cwctl.inventory/1" and data["hosts"][0]["leaf"] == "leaf1"
    assert data["ssh"]["port"] == 22 and data["scheduler"]["kind"] == "none"


def test_sim_status_as_json() -> None:
    code, out, _ = run("sim", "status", "-o", "json")
    assert code == 0
    assert json.loads(out)["schema"] == "cwctl.sim-status/1"


def test_job_env_json_names_its_schema_and_an_empty_jobid_is_said() -> None:
    code, out, _ = run("job-env", "--sim", "--hosts", "8", "--nodes", "gpu-001", "-o", "json")
    assert code == 0 and json.loads(out)["schema"] == "cwctl.job-env/1"
    code, out, err = run("job-env", "")
    assert code == 2 and out == ""
    assert err == "cwctl: JOBID is empty (is $SLURM_JOB_ID set?)\n"


@pytest.mark.parametrize(
    "args",
    [
        ["scan", "--sim", "--hosts", "4", "--duration", "300ms", "-o", "json"],
        ["reroute", "--sim", "--hosts", "16", "--hosts-per-leaf", "4", "spine3", "-o", "json"],
        ["journal", "-o", "json"],
    ],
)
def test_o_is_format(args: list[str]) -> None:
    code, out, err = run(*args)
    assert code in (0, 3), err
    json.loads(out)


def test_y_is_yes() -> None:
    code, _, err = run("reroute", "--sim", "--hosts", "16", "--hosts-per-leaf", "4", "spine3",
                       "--apply", "-y")  # fmt: skip
    assert code == 0, err
    assert run("rollback", "--apply", "-y")[0] == 0
