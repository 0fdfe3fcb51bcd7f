"""The typer app itself, its global options, and how errors and output leave it.

Data goes to stdout, messages and progress to stderr. Every ``CwctlError`` becomes one
line on stderr and its exit code (docs/cli.md); a traceback only with ``--verbose``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer

from cwctl import settings
from cwctl.cli.usage import OneLineGroup
from cwctl.errors import EXIT_OK, EXIT_USAGE, CwctlError
from cwctl.runtime import atomic

app = typer.Typer(
    name="cwctl",
    cls=OneLineGroup,
    help="Clock sync, fabric telemetry and control for GPU clusters.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
inventory_app = typer.Typer(help="Inspect and validate an inventory file.", no_args_is_help=True)
app.add_typer(inventory_app, name="inventory")


class _State:
    verbose: bool = False
    quiet: bool = False
    color: bool = True


STATE = _State()
T = TypeVar("T")


class Format(StrEnum):
    table = "table"
    json = "json"
    prom = "prom"


class BudgetName(StrEnum):
    quick = settings.BUDGET_QUICK
    watch = settings.BUDGET_WATCH


class Timestamps(StrEnum):
    hw = "hw"
    sw = "sw"


class Ecmp(StrEnum):
    hidden = "hidden"
    documented = "documented"


class Via(StrEnum):
    ssh = "ssh"
    slurm = "slurm"


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    typer.echo(f"cwctl: {message}", err=True)
    raise typer.Exit(code)


def run_guarded(fn: Callable[[], T]) -> T:
    """Run a command body; domain errors become one line on stderr and their exit code."""
    try:
        return fn()
    except CwctlError as exc:
        if STATE.verbose:
            import traceback

            traceback.print_exc()
        lines = str(exc).splitlines() or [exc.__class__.__name__]
        for line in lines:
            typer.echo(f"cwctl: {line}", err=True)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("cwctl: interrupted", err=True)
        raise typer.Exit(130) from None
    except (typer.Exit, SystemExit):
        raise
    except Exception as exc:  # a bug: say so in one line, keep the traceback for -v
        if STATE.verbose:
            raise
        typer.echo(
            f"cwctl: internal error: {exc.__class__.__name__}: {exc} (a bug; -v shows where)",
            err=True,
        )
        raise typer.Exit(1) from None


def _version(value: bool) -> None:
    if value:
        from cwctl.cli.version import version_text

        typer.echo(version_text())
        raise typer.Exit(EXIT_OK)


@app.callback()
def main_options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print version.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="More detail; tracebacks on errors.")
    ] = False,
    no_color: Annotated[bool, typer.Option("--no-color", help="No colour in output.")] = False,
    quiet: Annotated[
        bool,
        typer.Option("-q", "--quiet", help="No progress line on stderr (errors still show)."),
    ] = False,
) -> None:
    """cwctl: measure the fabric, then steer it."""
    STATE.verbose = verbose
    STATE.quiet = quiet
    STATE.color = not no_color and "NO_COLOR" not in os.environ and sys.stdout.isatty()


def report_width(out: Path | None, default: int = 80) -> int:
    """Columns for a report: the terminal's (or $COLUMNS) when it goes to stdout, else
    ``default`` (a file, a pipe)."""
    if out is not None:
        return default
    return max(40, shutil.get_terminal_size((default, 24)).columns)


def write_output(text: str | Iterable[bytes], out: Path | None) -> None:
    """To stdout, or safely to ``out`` (``cwctl.runtime.atomic``: new files 0644). ``text`` may
    be pieces of UTF-8 (a large report), written as they come."""
    if out is None:
        try:
            if isinstance(text, str):
                sys.stdout.write(text)
            else:
                sys.stdout.flush()
                binary = getattr(sys.stdout, "buffer", None)
                for piece in text:
                    if binary is not None:
                        binary.write(piece)
                    else:  # a text-only stream; each piece is whole UTF-8 (cut at ASCII)
                        sys.stdout.write(piece.decode())
            sys.stdout.flush()
        except BrokenPipeError:  # the reader left (`| head`): the rest is not wanted
            devnull = os.open(os.devnull, os.O_WRONLY)  # nor an error at exit's flush
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        return
    try:
        if isinstance(text, str):
            atomic.write_text(out, text, option="--out")
        else:
            atomic.write_chunks(out, text, option="--out")
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror}")
