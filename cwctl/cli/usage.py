"""Usage errors in one line: the command group every cwctl command runs under.

Click (typer's) prints a usage error as four lines ("Usage: ...", "Try ...", a blank
line, "Error: ..."). cwctl prints one, on stderr, naming the command and the culprit
and saying where help is, then exits 2 (docs/cli.md):

    cwctl: scan: no such option: --fromat (cwctl scan -h for help)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

# typer vendors click; its exception classes are reached through typer's public ones
UsageError: type[Exception] = typer.BadParameter.__mro__[1]
ClickException: type[Exception] = typer.BadParameter.__mro__[2]
assert UsageError.__name__ == "UsageError" and ClickException.__name__ == "ClickException"


def one_line(exc: Exception) -> str:
    """``cwctl: COMMAND: what went wrong (cwctl COMMAND -h for help)``."""
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    if message[:1].isupper() and message[1:2].islower():
        message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "cwctl"
    command = path.split(" ", 1)[1] + ": " if " " in path else ""
    hint = f" ({path} -h for help)" if isinstance(exc, UsageError) else ""
    return f"cwctl: {command}{message}{hint}"


class OneLineGroup(TyperGroup):
    """cwctl's root group: click's usage errors become one line and exit 2."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as exc:
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # "cwctl inventory": its help
                typer.echo(exc.format_message(), err=True)  # type: ignore[attr-defined]
                sys.exit(exc.exit_code)  # type: ignore[attr-defined]
            typer.echo(one_line(exc), err=True)
            sys.exit(exc.exit_code)  # type: ignore[attr-defined]
        except typer.Abort:
            if not standalone_mode:
                raise
            typer.echo("cwctl: aborted", err=True)
            sys.exit(1)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)
