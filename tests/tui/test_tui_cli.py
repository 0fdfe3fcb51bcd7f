"""``cwctl tui``: flags reach the app; bad input is one line before any UI starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from cwctl.cli import app
from cwctl.tui.app import CwctlApp


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    return CliRunner(env={"CWCTL_INVENTORY": None})


def test_missing_inventory_is_one_line_and_no_ui(runner: CliRunner) -> None:
    result = runner.invoke(app, ["tui"])
    assert result.exit_code == 2
    assert result.stderr == (
        "cwctl: inventory.toml: no such file (give -i FILE or set CWCTL_INVENTORY)\n"
    )


def test_fault_needs_sim(runner: CliRunner) -> None:
    result = runner.invoke(app, ["tui", "--local", "3", "--fault", "switch:spine1:down"])
    assert result.exit_code == 2 and result.stderr == "cwctl: --fault needs --sim\n"


def test_flags_reach_the_app(runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[CwctlApp] = []

    def run(self: CwctlApp, *args: Any, **kwargs: Any) -> None:
        started.append(self)  # the terminal is not ours in a test: record, do not run

    monkeypatch.setattr(CwctlApp, "run", run)
    args = ["tui", "--sim", "--hosts", "12", "--seed", "5", "--fault", "switch:spine1:down"]
    result = runner.invoke(app, [*args, "--duration", "0.5", "--interval", "3", "--readonly"])
    assert result.exit_code == 0, result.output
    (tui,) = started
    request = tui.source.request  # type: ignore[attr-defined]
    assert tui.source.label == "SIMULATED" and tui.readonly and tui.interval_s == 3.0
    assert request.sim.hosts == 12 and request.sim.seed == 5 and request.duration_s == 0.5
    assert request.sim.faults == ("switch:spine1:down",)
