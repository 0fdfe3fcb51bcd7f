"""cwctl(1) is generated from the click tree (``make man``: build/man/cwctl.1, made from
the installed commands each time, so it cannot be stale), names every command and
option, and renders."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from cwctl.cli import app
from cwctl.cli.manpage import esc, manpage

ROOT = Path(__file__).resolve().parents[2]


def test_make_man_writes_it(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "cwctl.cli.manpage"], capture_output=True,
                          text=True, check=False, cwd=ROOT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == manpage()
    assert "cwctl.cli.manpage > build/man/cwctl.1" in (ROOT / "Makefile").read_text()


def test_every_command_and_option_is_in_it() -> None:
    text = manpage()
    root = typer.main.get_command(app)
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        assert f".SS {esc('cwctl ' + name)}" in text, name
        for param in command.params:
            if not param.hidden and param.param_type_name == "option":
                assert param.opts[-1].replace("-", "\\-") in text, (name, param.opts)
    assert ".SH EXIT STATUS" in text and "\\fB3\\fR" in text


@pytest.mark.skipif(shutil.which("man") is None, reason="no man(1) to render it")
def test_man_renders_it(tmp_path: Path) -> None:
    page = tmp_path / "cwctl.1"
    page.write_text(manpage())
    proc = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True,
                          env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    assert "cwctl scan" in proc.stdout and "EXIT STATUS" in proc.stdout
