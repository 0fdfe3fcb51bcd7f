"""The CLI shell: global options, usage errors, one-line errors with documented exit codes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cwctl import __version__
from cwctl.cli import app

ROOT = Path(__file__).resolve().parents[2]
NO_INVENTORY_ENV = {"CWCTL_INVENTORY": None}


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A runner in an empty directory, with no inventory in the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CWCTL_INVENTORY", raising=False)
    return CliRunner(env=NO_INVENTORY_ENV)


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith(f"cwctl {__version__} (commit ")  # and which commit


def test_help_lists_every_command(runner: CliRunner) -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("scan", "tui", "reroute", "drain", "resume", "rollback", "journal"):
        assert command in result.stdout
    assert "inventory" in result.stdout and "--version" in result.stdout


def test_inventory_help_lists_check(runner: CliRunner) -> None:
    result = runner.invoke(app, ["inventory", "--help"])
    assert result.exit_code == 0 and "check" in result.stdout


def test_unknown_command_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["frobnicate"])
    assert result.exit_code == 2
    assert result.stderr == "cwctl: no such command 'frobnicate'. (cwctl -h for help)\n"
    assert result.stdout == ""


def test_unknown_option_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scan", "--bogus"])
    assert result.exit_code == 2 and "--bogus" in result.stderr


@pytest.mark.parametrize(
    "args",
    [["tui"], ["drain", "gpu-001"], ["resume", "gpu-001"], ["reroute", "spine2"]],
    ids=lambda a: a[0],
)
def test_commands_needing_hosts_refuse_a_missing_inventory_in_one_line(
    runner: CliRunner, args: list[str], tmp_path: Path
) -> None:
    missing = tmp_path / "none.toml"
    result = runner.invoke(app, [*args, "-i", str(missing)])
    assert result.exit_code == 2
    hint = "(give -i FILE or set CWCTL_INVENTORY)"
    assert result.stderr == f"cwctl: {missing}: no such file {hint}\n"
    assert result.stdout == ""


def test_two_host_sources_are_refused(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scan", "--sim", "--local", "3"])
    assert result.exit_code == 2
    assert result.stderr == "cwctl: give one source of hosts, not --local and --sim\n"


def test_sim_and_replay_are_refused(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["scan", "--sim", "--replay", str(tmp_path / "r.jsonl")])
    assert result.exit_code == 2
    assert "give one source of hosts" in result.stderr


def test_fault_needs_sim(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scan", "--local", "3", "--fault", "switch:spine1:down"])
    assert result.exit_code == 2 and result.stderr == "cwctl: --fault needs --sim\n"


def test_out_of_range_flag_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scan", "--local", "1"])
    assert result.exit_code == 2 and "--local" in result.stderr


def test_missing_default_inventory_is_one_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["inventory", "check"])
    assert result.exit_code == 2
    assert result.stderr == (
        "cwctl: inventory.toml: no such file (give -i FILE or set CWCTL_INVENTORY)\n"
    )
    assert result.stdout == ""


def test_scan_with_missing_default_inventory_is_one_line(runner: CliRunner) -> None:
    result = runner.invoke(app, ["scan"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "inventory.toml" in lines[0], lines
    assert "Traceback" not in result.output


def readable_example(directory: Path) -> Path:
    """The example inventory, its [ssh] identity a file this test can read (inventory
    check reads it, as a scan would)."""
    (directory / "id_test").write_text("")
    text = (ROOT / "inventory.example.toml").read_text()
    example = directory / "inventory.example.toml"
    example.write_text(text.replace('"~/.ssh/id_ed25519"', f'"{directory}/id_test"'))
    return example


def test_inventory_option_beats_the_environment(runner: CliRunner, tmp_path: Path) -> None:
    example = readable_example(tmp_path)
    result = runner.invoke(
        app,
        ["inventory", "check", "-i", str(example)],
        env={"CWCTL_INVENTORY": "/nonexistent/inventory.toml"},
    )
    assert result.exit_code == 0, result.output
    assert str(example) in result.stdout


def test_global_options_are_accepted(runner: CliRunner, tmp_path: Path) -> None:
    example = readable_example(tmp_path)
    result = runner.invoke(app, ["-v", "--no-color", "inventory", "check", "-i", str(example)])
    assert result.exit_code == 0, result.output
    assert "\x1b[" not in result.stdout


def test_console_entry_point_without_inventory_has_no_traceback(tmp_path: Path) -> None:
    """The real process: stderr is one line, exit code 2, nothing on stdout."""
    env = {k: v for k, v in os.environ.items() if k != "CWCTL_INVENTORY"}
    proc = subprocess.run(
        [sys.executable, "-m", "cwctl.cli", "inventory", "check"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "cwctl: inventory.toml: no such file (give -i FILE or set CWCTL_INVENTORY)"
    ]


def _commands(command, path=()):  # type: ignore[no-untyped-def]
    """Every (command path, click command) of the app, groups included."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_command_and_option_is_in_docs_cli() -> None:
    import typer.main

    doc = (ROOT / "docs" / "cli.md").read_text()
    missing = []
    for path, command in _commands(typer.main.get_command(app)):
        if path and f"cwctl {' '.join(path)}" not in doc:
            missing.append(f"command 'cwctl {' '.join(path)}'")
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("-") and f"`{opt}" not in doc:
                    missing.append(f"option {opt} of 'cwctl {' '.join(path)}'")
    assert not missing, f"docs/cli.md does not mention: {', '.join(missing)}"
