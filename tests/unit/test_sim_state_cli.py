"""Simulator state left by actions is visible: the report and the TUI header say so,
`cwctl sim status` lists it, `cwctl sim reset` clears it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.scan.snapshot import FabricSnapshot, HostReport
from cwctl.sim.applied import applied_changes
from cwctl.sim.model import ModelState
from cwctl.tui.widgets.statusbar import status_text

SHAPE = ["--sim", "--hosts", "16", "--hosts-per-leaf", "4"]


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path / "state"))
    return CliRunner()


def _scan_json(runner: CliRunner) -> dict[str, object]:
    result = runner.invoke(app, ["scan", *SHAPE, "--duration", "0.3", "--format", "json"])
    assert result.exit_code in (0, 3), result.output
    return json.loads(result.stdout)


def test_applied_actions_show_until_reset(runner: CliRunner) -> None:
    fresh = runner.invoke(app, ["sim", "status"])
    assert fresh.exit_code == 0 and "no simulated fabric carries applied actions" in fresh.stdout
    assert _scan_json(runner)["truth"]["applied"] == []  # type: ignore[index]

    applied = runner.invoke(app, ["reroute", *SHAPE, "spine3", "--apply", "--yes"])
    assert applied.exit_code == 0, applied.output

    truth = _scan_json(runner)["truth"]
    assert truth["applied"] == [f"leaf{i}: ECMP weight of spine3 0" for i in range(1, 5)]  # type: ignore[index]
    table = runner.invoke(app, ["--no-color", "scan", *SHAPE, "--duration", "0.3"])
    assert "the simulated fabric carries 4 applied action change(s)" in table.stdout
    prom = runner.invoke(app, ["scan", *SHAPE, "--duration", "0.3", "--format", "prom"])
    assert "\ncwctl_sim_applied_changes 4.0\n" in prom.stdout
    status = runner.invoke(app, ["sim", "status"])
    assert status.exit_code == 0
    assert "--sim --hosts 16 --hosts-per-leaf 4 --spines 4: 4 change(s)" in status.stdout
    assert "leaf2: ECMP weight of spine3 0" in status.stdout

    reset = runner.invoke(app, ["sim", "reset"])
    assert reset.exit_code == 0 and "4 change(s) dropped" in reset.stdout
    assert _scan_json(runner)["truth"]["applied"] == []  # type: ignore[index]
    table = runner.invoke(app, ["--no-color", "scan", *SHAPE, "--duration", "0.3"])
    assert "applied action" not in table.stdout
    again = runner.invoke(app, ["sim", "reset"])
    assert again.exit_code == 0 and "nothing to reset" in again.stdout


def test_applied_changes_ignore_what_is_back_to_normal() -> None:
    state = ModelState(
        ecmp_weight={("leaf1", "spine2"): 0, ("leaf2", "spine2"): 1},  # 1: rolled back
        excluded_nics={"gpu-003/mlx5_1"},
        drained_hosts={"gpu-007"},
    )
    assert applied_changes(state) == [
        "leaf1: ECMP weight of spine2 0",
        "NIC gpu-003/mlx5_1 excluded",
        "gpu-007 drained",
    ]
    assert applied_changes(ModelState()) == []


def test_tui_header_says_actions_are_applied() -> None:
    snap = FabricSnapshot("sim", "gpu-001", 1.0, [HostReport("gpu-001")],
                          truth={"applied": ["gpu-007 drained"]})  # fmt: skip
    text = status_text("SIMULATED", scans=1, snapshot=snap, elapsed_s=None,
                       finished_at=None, scanning=False)  # fmt: skip
    assert text.startswith("SIMULATED · ACTIONS APPLIED (1: cwctl sim status)")
    snap.truth = {"applied": []}
    plain = status_text("SIMULATED", scans=1, snapshot=snap, elapsed_s=None,
                        finished_at=None, scanning=False)  # fmt: skip
    assert "ACTIONS" not in plain
