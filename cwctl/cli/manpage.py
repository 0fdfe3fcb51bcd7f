"""cwctl(1), the manual page, generated from the click tree the CLI itself is.

``python -m cwctl.cli.manpage`` (``make man``: build/man/cwctl.1) writes it: every
command with its usage, help and options (metavar, help, default), the global options,
exit codes and environment, so the page is right whenever it is made. A test
checks every command and option is in it and renders it with ``man``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

from cwctl import __version__

EXIT_CODES = (
    (
        "0",
        "it ran and the fabric is healthy (or: the file is valid, the plan was shown or applied)",
    ),
    ("2", "bad input or usage; nothing was done"),
    ("3", "it ran but found problems: unreachable hosts, suspects, unlocalised loss or delay"),
    ("130", "interrupted (Ctrl-C)"),
    ("1", "a bug in cwctl (internal error; -v shows where)"),
)


def esc(text: str) -> str:
    """Text safe in a roff line: backslashes, leading dots and quotes, hyphens in flags."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text.startswith((".", "'")) else text


def _commands(group: Any, path: str) -> Iterator[tuple[str, Any]]:
    for name, command in sorted(group.commands.items()):
        if getattr(command, "hidden", False):
            continue
        full = f"{path} {name}"
        yield full, command
        if getattr(command, "commands", None):
            yield from _commands(command, full)


def _option(param: Any, ctx: Any) -> list[str]:
    """An option as ``--help`` shows it (its names, metavar, help, default), in roff."""
    record = param.get_help_record(ctx)
    if record is None:
        return []
    names, help_text = record
    return [".TP", f"\\fB{esc(names)}\\fR", esc(" ".join(help_text.split()))]


def _lines(root: Any) -> Iterator[str]:
    import typer

    ctx = typer.Context(root, info_name="cwctl")
    yield f'.TH CWCTL 1 "" "cwctl {__version__}" "User Commands"'
    yield ".SH NAME"
    yield "cwctl \\- " + esc(root.help.split("\n")[0].rstrip("."))
    yield ".SH SYNOPSIS"
    yield "\\fBcwctl\\fR [\\fIGLOBAL OPTIONS\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]"
    yield ".SH DESCRIPTION"
    yield esc(
        "cwctl reaches an inventory of GPU hosts over SSH (or this machine's loopback, or a "
        "simulated fabric), starts short-lived probe agents, solves every host's clock, "
        "measures each path's one-way delay, queueing and loss, names the suspect switches, "
        "links, NICs or hosts, and plans (and with --apply carries out, journalled and "
        "reversible) reroutes and drains around them."
    )
    yield ".SH GLOBAL OPTIONS"
    yield esc("Also accepted after the command (cwctl scan -v is cwctl -v scan).")
    for param in root.params:
        if param.help and not param.hidden:
            yield from _option(param, ctx)
    yield ".SH DURATIONS"
    yield esc(
        "Every flag that takes a time reads one grammar: a number with a unit, ns, us, ms, "
        "s, m or h (500ms, 5s, 2m, 100us), or a bare number of seconds."
    )
    yield ".SH COMMANDS"
    for path, command in _commands(root, "cwctl"):
        sub = typer.Context(command, info_name=path.split(" ", 1)[1], parent=ctx)
        yield f".SS {esc(path)}"
        usage = " ".join(command.collect_usage_pieces(sub))
        yield f"\\fB{esc(path)}\\fR {esc(usage)}"
        yield ".PP"
        for para in (command.help or "").strip().split("\n\n"):
            yield esc(" ".join(para.split()))
            yield ".PP"
        for param in command.params:
            if param.hidden or param.param_type_name == "argument":
                continue
            yield from _option(param, sub)
    yield ".SH EXIT STATUS"
    for code, what in EXIT_CODES:
        yield ".TP"
        yield f"\\fB{code}\\fR"
        yield esc(what)
    yield ".SH ENVIRONMENT"
    for name, what in (
        ("CWCTL_INVENTORY", "the inventory file when -i is not given (else ./inventory.toml)"),
        ("CWCTL_STATE_DIR", "where the journal and the simulator's state live"),
        ("NO_COLOR", "no colour in output"),
        ("COLUMNS", "the report's width (else the terminal's)"),
    ):
        yield ".TP"
        yield f"\\fB{name}\\fR"
        yield esc(what)
    yield ".SH SEE ALSO"
    yield esc("docs/cli.md and docs/commands/ in cwctl's source; ssh(1), chronyd(8), scontrol(1)")


def manpage() -> str:
    import typer.main

    from cwctl.cli import app

    return "\n".join(_lines(typer.main.get_command(app))) + "\n"


def main() -> int:
    sys.stdout.write(manpage())
    return 0


if __name__ == "__main__":
    sys.exit(main())
