"""``cwctl tui``: flags reach the app; bad input is one line before any UI starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import cwctl.cli.tui as tui_cli
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
    monkeypatch.setattr(tui_cli, "has_terminal", lambda: True)
    args = ["tui", "--sim", "--hosts", "12", "--seed", "5", "--fault", "switch:spine1:down"]
    result = runner.invoke(app, [*args, "--duration", "0.5", "--interval", "3", "--readonly"])
    assert result.exit_code == 0, result.output
    (tui,) = started
    request = tui.source.request  # type: ignore[attr-defined]
    assert tui.source.label == "SIMULATED" and tui.readonly and tui.interval_s == 3.0
    assert request.sim.hosts == 12 and request.sim.seed == 5 and request.duration_s == 0.5
    assert request.sim.faults == ("switch:spine1:down",)


def test_without_a_terminal_it_refuses_in_one_line(tmp_path: Path) -> None:
    """Was: ran forever at 61 % of a core with stdout into a pipe."""
    proc = subprocess.run(
        [sys.executable, "-m", "cwctl.cli", "tui", "--sim", "--hosts", "8"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "cwctl: tui needs a terminal on stdin and stdout (for a report: cwctl scan)\n"
    )
    assert proc.stdout == ""


def test_replay_reviews_a_saved_scan(runner: CliRunner, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    records = tmp_path / "scan.jsonl.gz"
    saved = runner.invoke(app, ["scan", "--sim", "--hosts", "8", "--duration", "0.3",
                                "--format", "json", "--save-records", str(records)])  # fmt: skip
    assert saved.exit_code in (0, 3), saved.output
    started: list[CwctlApp] = []
    monkeypatch.setattr(CwctlApp, "run", lambda self, *a, **k: started.append(self))
    monkeypatch.setattr(tui_cli, "has_terminal", lambda: True)
    result = runner.invoke(app, ["tui", "--replay", str(records)])
    assert result.exit_code == 0, result.output
    (tui,) = started
    assert tui.source.request.replay == records  # type: ignore[attr-defined]
    assert tui.max_scans == 1 and tui.readonly  # one scan; no hosts to act on
    assert tui.source.label == f"replay {records}"
