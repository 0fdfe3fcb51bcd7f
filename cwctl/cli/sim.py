"""``cwctl sim status`` and ``cwctl sim reset``: the simulated fabrics' saved action state.

``cwctl reroute/drain --sim --apply`` saves what it changed (``cwctl.actions.simulated``),
so later ``--sim`` scans of a fabric of the same shape run on the changed fabric (and say
so). ``status`` lists every saved fabric and its changes; ``reset`` forgets them all, or
the one fabric the shape flags name.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from cwctl.cli.app import app, run_guarded
from cwctl.errors import EXIT_OK

sim_app = typer.Typer(
    help="The simulated fabric's state that actions left behind: status, reset.",
    no_args_is_help=True,
)
app.add_typer(sim_app, name="sim")


def _saved() -> list[tuple[Path, dict[str, Any], list[str]]]:
    """(file, shape, changes) for every saved simulated fabric, by file name."""
    from cwctl.sim.applied import applied_changes
    from cwctl.sim.state import sim_dir, state_from_json

    found = []
    for path in sorted(sim_dir().glob("*.json")):
        try:
            data = json.loads(path.read_text())
            shape = dict(data["shape"])
            changes = applied_changes(state_from_json(data["state"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            shape, changes = {"unreadable": str(exc)}, []
        found.append((path, shape, changes))
    return found


def _shape_text(shape: dict[str, Any]) -> str:
    if "inventory" in shape:
        return f"--sim -i {shape['inventory']}"
    if "unreadable" in shape:
        return f"unreadable ({shape['unreadable']})"
    return (
        f"--sim --hosts {shape.get('hosts')} --hosts-per-leaf {shape.get('hosts_per_leaf')} "
        f"--spines {shape.get('spines')}"
    )


class StatusFormat(StrEnum):
    table = "table"
    json = "json"


SIM_STATUS_SCHEMA = "cwctl.sim-status/1"


@sim_app.command("status")
def sim_status(
    fmt: Annotated[
        StatusFormat,
        typer.Option(
            "--format", "-o", metavar="table|json", help=f"table, or json ({SIM_STATUS_SCHEMA})."
        ),
    ] = StatusFormat.table,
) -> None:
    """List the simulated fabrics that carry applied actions, and the changes.

    Example: cwctl sim status
    """

    def body() -> None:
        saved = [s for s in _saved() if s[2] or "unreadable" in s[1]]
        if fmt is StatusFormat.json:
            fabrics = [
                {"shape": shape, "flags": _shape_text(shape), "changes": changes}
                for _, shape, changes in saved
            ]
            typer.echo(json.dumps({"schema": SIM_STATUS_SCHEMA, "fabrics": fabrics}, indent=1))
            return
        if not saved:
            typer.echo("no simulated fabric carries applied actions: --sim scans a fresh fabric")
            return
        for _, shape, changes in saved:
            typer.echo(f"{_shape_text(shape)}: {len(changes)} change(s)")
            for line in changes:
                typer.echo(f"  {line}")
        typer.echo("cwctl sim reset clears them (cwctl rollback PLAN undoes one plan)")

    run_guarded(body)


@sim_app.command("reset")
def sim_reset(
    hosts: Annotated[
        int | None,
        typer.Option("--hosts", min=2, metavar="N", help="Only the fabric of this many hosts."),
    ] = None,
) -> None:
    """Forget every change actions applied to simulated fabrics (or to the fabrics of
    --hosts N): the next --sim scan runs on a fresh fabric.

    Example: cwctl sim reset
    """

    def body() -> int:
        removed = 0
        for path, shape, changes in _saved():
            if hosts is not None and shape.get("hosts") != hosts:
                continue
            path.unlink(missing_ok=True)  # a fabric with no change left: forgotten quietly
            if changes or "unreadable" in shape:
                removed += 1
                typer.echo(f"reset {_shape_text(shape)} ({len(changes)} change(s) dropped)")
        if not removed:
            typer.echo("nothing to reset: no simulated fabric carries applied actions")
        return EXIT_OK

    raise typer.Exit(run_guarded(body))
