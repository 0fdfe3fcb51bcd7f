"""Drain reasons everywhere: Slurm's Reason and Kubernetes' annotations and taint carry
the reason and the suspect that caused it; every Kubernetes step is undone by rollback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from cwctl.actions import k8s, slurm
from cwctl.actions.drainreason import suspect_reason, with_suspect
from cwctl.actions.inventorytarget import InventoryTarget
from cwctl.actions.planner import plan_drain
from cwctl.cli import app
from cwctl.inventory import Host, Inventory, Scheduler

_LABEL = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")  # k8s label value


def _inventory(kind: str) -> Inventory:
    return Inventory(
        hosts=(Host("gpu-007", "10.0.1.7", leaf="leaf1", nics=("mlx5_0", "mlx5_1")),),
        scheduler=Scheduler(kind=kind, host="ctl"),
    )


def test_slurm_reason_names_the_suspect() -> None:
    plan = plan_drain("gpu-007", InventoryTarget(_inventory("slurm")), reason="NIC flaps",
                      suspect="gpu-007/mlx5_1")  # fmt: skip
    assert plan.steps[0].argv[-1] == "Reason=NIC flaps (suspect gpu-007/mlx5_1)"
    assert list(plan.steps[0].argv[:3]) == ["scontrol", "update", "NodeName=gpu-007"]
    same = plan_drain("gpu-007", InventoryTarget(_inventory("slurm")),
                      reason="cwctl: suspect leaf1", suspect="leaf1")  # fmt: skip
    assert same.steps[0].argv[-1] == "Reason=cwctl: suspect leaf1"  # said once


def test_kubernetes_annotation_and_taint_carry_reason_and_suspect() -> None:
    plan = plan_drain("gpu-007", InventoryTarget(_inventory("k8s")), reason="NIC flaps",
                      suspect="gpu-007/mlx5_1")  # fmt: skip
    argvs = [list(s.argv) for s in plan.steps]
    assert argvs[0] == ["kubectl", "cordon", "gpu-007"]
    assert argvs[1] == ["kubectl", "annotate", "node", "gpu-007",
                        "cwctl.io/drain-reason=NIC flaps (suspect gpu-007/mlx5_1)",
                        "cwctl.io/suspect=gpu-007/mlx5_1", "--overwrite"]  # fmt: skip
    assert argvs[2] == ["kubectl", "taint", "node", "gpu-007",
                        "cwctl.io/drained=gpu-007_mlx5_1:NoSchedule", "--overwrite"]  # fmt: skip
    undo = [list(s.undo_argv or ()) for s in plan.steps]
    assert undo[1] == ["kubectl", "annotate", "node", "gpu-007",
                       "cwctl.io/drain-reason-", "cwctl.io/suspect-"]  # fmt: skip
    assert undo[2] == ["kubectl", "taint", "node", "gpu-007", "cwctl.io/drained:NoSchedule-"]
    assert all(s.reversible for s in plan.steps)
    assert all(s.host == "ctl" for s in plan.steps)


def test_resume_removes_what_drain_added() -> None:
    drain = k8s.drain_steps("ctl", "gpu-007", "why", suspect="leaf1")
    resume = k8s.resume_steps("ctl", "gpu-007", "why")
    added = {tuple(s.undo_argv or ()) for s in drain}
    assert {tuple(s.argv) for s in resume} == added  # resuming runs exactly drain's undos


@given(st.text(max_size=120))
def test_taint_values_are_valid_label_values(text: str) -> None:
    value = k8s.label_value(text)
    assert _LABEL.match(value), value
    assert len(value) <= 63


def test_with_suspect() -> None:
    assert with_suspect("NIC flaps", None) == "NIC flaps"
    assert with_suspect("NIC flaps", "gpu-007") == "NIC flaps (suspect gpu-007)"
    assert with_suspect("cwctl: suspect spine2", "spine2") == "cwctl: suspect spine2"


@pytest.mark.parametrize("kind", ["slurm", "k8s"])
def test_both_schedulers_cite_the_reason_alike_and_never_raw(kind: str) -> None:
    hostile = "NIC flaps\x1b[2J\nrm -rf /"
    plan = plan_drain("gpu-007", InventoryTarget(_inventory(kind)), reason=hostile)
    texts = [t for s in plan.steps for t in (s.description, s.undo_description or "")]
    assert all("\x1b" not in t and "\n" not in t for t in texts), texts
    cites = [t for t in texts if "reason 'NIC flaps\\x1b[2J\\nrm -rf /'" in t]
    assert len(cites) == 1, texts
    assert (
        cites[0]
        == {
            "slurm": "slurm: drain gpu-007 (reason 'NIC flaps\\x1b[2J\\nrm -rf /')",
            "k8s": "kubernetes: cordon gpu-007 (reason 'NIC flaps\\x1b[2J\\nrm -rf /')",
        }[kind]
    )
    resume = (k8s.resume_steps if kind == "k8s" else slurm.resume_steps)("ctl", "gpu-007", hostile)
    undo = [s.undo_description or "" for s in resume]
    assert any(t.endswith("(reason 'NIC flaps\\x1b[2J\\nrm -rf /')") for t in undo), undo


def test_a_reroute_that_can_only_drain_names_its_suspect_once() -> None:
    assert suspect_reason("gpu-007/mlx5_1") == "cwctl: suspect gpu-007/mlx5_1"
    assert with_suspect(suspect_reason("gpu-007"), "gpu-007") == "cwctl: suspect gpu-007"


@pytest.mark.parametrize("kind", ["slurm", "k8s"])
def test_cli_dry_run_shows_the_reason_and_suspect(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path / "state"))
    inv = tmp_path / "inventory.toml"
    inv.write_text(f'[scheduler]\nkind = "{kind}"\nhost = "ctl"\n\n'
                   '[[host]]\nname = "gpu-007"\naddress = "10.0.1.7"\n')  # fmt: skip
    args = ["drain", "gpu-007", "-i", str(inv), "--reason", "NIC flaps",
            "--suspect", "gpu-007/mlx5_1", "--format", "json"]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "NIC flaps (suspect gpu-007/mlx5_1)" in result.stdout
    if kind == "k8s":
        assert "cwctl.io/drained=gpu-007_mlx5_1:NoSchedule" in result.stdout


def test_without_a_reason_drain_and_resume_say_cwctl(tmp_path: Path) -> None:
    """The default reason, one constant for the CLI flag, the front door's Ask and the
    planner: what Slurm records, and what re-draining after a resume would record."""
    inv = tmp_path / "inventory.toml"
    inv.write_text('[scheduler]\nkind = "slurm"\nhost = "ctl"\n\n'
                   '[[host]]\nname = "gpu-007"\naddress = "10.0.1.7"\n')  # fmt: skip
    env = {"CWCTL_STATE_DIR": str(tmp_path / "state")}
    drained = CliRunner().invoke(app, ["drain", "gpu-007", "-i", str(inv)], env=env)
    assert drained.exit_code == 0, drained.output
    assert "State=DRAIN Reason=cwctl\n" in drained.stdout
    resumed = CliRunner().invoke(app, ["resume", "gpu-007", "-i", str(inv)], env=env)
    assert resumed.exit_code == 0, resumed.output
    assert "undo: scontrol update NodeName=gpu-007 State=DRAIN Reason=cwctl\n" in resumed.stdout
