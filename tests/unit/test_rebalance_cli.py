"""``cwctl rebalance``'s bad input: one line naming the culprit, exit 2, before any host is
read (the example inventory's hosts do not exist: a read would fail with exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "inventory.example.toml")


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CWCTL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    return CliRunner()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["-i", EXAMPLE, "--avoid", "spine9"],
         "cwctl: --avoid spine9: no spine, leaf or leaf-spine link of this fabric"),
        (["-i", EXAMPLE, "--min-gain", "3"],
         "cwctl: --min-gain 3: must be from 0 to under the target"),
        (["-i", "nope.toml"],
         "cwctl: nope.toml: no such file (give -i FILE or set CWCTL_INVENTORY)"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(runner: CliRunner, args: list[str], line: str) -> None:
    result = runner.invoke(app, ["rebalance", *args])
    assert (result.exit_code, result.stderr.splitlines()[-1:], result.stdout) == (2, [line], "")


@pytest.mark.parametrize("args", [["--interval", "0"], ["--target", "0.5"], ["--sim"]])
def test_flags_out_of_range_are_usage_errors(runner: CliRunner, args: list[str]) -> None:
    result = runner.invoke(app, ["rebalance", "-i", EXAMPLE, *args])
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.stderr


def test_a_fabric_without_uplinks_has_nothing_to_balance(runner: CliRunner, tmp_path: Path) -> None:
    inv = tmp_path / "flat.toml"
    inv.write_text('[[host]]\nname = "a"\naddress = "10.0.0.1"\n')
    result = runner.invoke(app, ["rebalance", "-i", str(inv)])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "cwctl: no leaf in the inventory has two uplinks: nothing to balance (give each leaf "
        "switch its uplinks, and each [[host]] its leaf)"
    )
