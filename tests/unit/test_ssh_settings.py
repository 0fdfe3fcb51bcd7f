"""SSH settings that cannot work are refused before any connection, naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from cwctl.cli import app


def test_unreadable_identity_is_one_line_naming_the_key(tmp_path: Path) -> None:
    inventory = tmp_path / "inv.toml"
    inventory.write_text(
        '[ssh]\nidentity = "/nonexistent/id_ed25519"\n\n'
        '[[host]]\nname = "a"\naddress = "127.0.0.1"\n'
    )
    result = CliRunner().invoke(app, ["scan", "-i", str(inventory), "--duration", "0.2"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1
    assert "[ssh] identity" in lines[0] and "/nonexistent/id_ed25519" in lines[0]
    assert "Traceback" not in result.output


def test_reaching_for_ssh_prints_nothing_of_the_libraries_own() -> None:
    """cryptography 48+ warns ten lines of DSA's removal when asyncssh is imported: they
    were on the stderr of every cwctl command that reaches a host (an integration test
    expecting one line of error caught them). Shown with every warning turned on."""
    code = "import cwctl.transport.ssh, cwctl.actions.runners"
    out = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stderr == ""
