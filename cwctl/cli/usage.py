"""Usage errors in one line: the command group every cwctl command runs under.

Click (typer's) prints a usage error as four lines ("Usage: ...", "Try ...", a blank
line, "Error: ..."). cwctl prints one, on stderr, naming the command and the culprit
and saying where help is, then exits 2 (docs/cli.md):

    cwctl: scan: no such option: --fromat (cwctl scan -h for help)
"""

from __future__ import annotations

import copy
import re
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

# typer vendors click; its exception classes are reached through typer's public ones
UsageError: type[Exception] = typer.BadParameter.__mro__[1]
ClickException: type[Exception] = typer.BadParameter.__mro__[2]
assert UsageError.__name__ == "UsageError" and ClickException.__name__ == "ClickException"


# typer's checks speak pydantic ("Input should be greater than or equal to 2"): said
# as cwctl says everything else ("must be at least 2")
PLAIN_WORDS = [
    (re.compile(r"Value error, "), ""),
    (re.compile(r"Input should be greater than or equal to "), "must be at least "),
    (re.compile(r"Input should be less than or equal to "), "must be at most "),
    (re.compile(r"Input should be greater than "), "must be more than "),
    (re.compile(r"Input should be less than "), "must be less than "),
    (re.compile(r"Input should be a valid integer[^()]*"), "must be a whole number"),
    (re.compile(r"Input should be a finite number"), "must be a finite number"),
    (re.compile(r"Input should be a valid number[^()]*"), "must be a number"),
    (re.compile(r"Input should be "), "must be "),
]


def plain(message: str) -> str:
    for pattern, words in PLAIN_WORDS:
        message = pattern.sub(words, message)
    return message


def one_line(exc: Exception) -> str:
    """``cwctl: COMMAND: what went wrong (cwctl COMMAND -h for help)``."""
    message = plain(" ".join(exc.format_message().split()))  # type: ignore[attr-defined]
    if message[:1].isupper() and message[1:2].islower():
        message = message[0].lower() + message[1:]
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "cwctl"
    command = path.split(" ", 1)[1] + ": " if " " in path else ""
    hint = f" ({path} -h for help)" if isinstance(exc, UsageError) else ""
    return f"cwctl: {command}{message}{hint}"


GLOBAL_FLAGS = ("verbose", "quiet", "no_color")  # the root's flags every command takes too


def _late_global(root: Any, option: Any) -> Any:
    """``option`` of the root group, for a subcommand (``cwctl scan -v``): hidden in its
    help, and when given it runs the root's callback again with the flag set."""

    def given(ctx: Any, param: Any, value: Any) -> None:
        if value:
            top = ctx.find_root()
            top.params[option.name] = value
            root.callback(**top.params)

    late = copy.copy(option)
    late.expose_value = False
    late.hidden = True
    late.callback = given
    return late


def _walk(command: Any) -> Any:
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _walk(sub)


def _no_type(ctx: Any) -> None:
    return None


class OneLineGroup(TyperGroup):
    """cwctl's root group: click's usage errors become one line and exit 2. Its global
    flags (-v, -q, --no-color) are taken after any subcommand too, and an argument's help
    shows its metavar alone (``HOST``, not ``HOST <str>``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        globals_ = [p for p in self.params if p.name in GLOBAL_FLAGS]
        for command in _walk(self):
            if command is self:
                continue
            command.params.extend(_late_global(self, option) for option in globals_)
            for param in command.params:
                if param.param_type_name == "argument" and param.metavar:
                    param.display_type_rich = _no_type

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
