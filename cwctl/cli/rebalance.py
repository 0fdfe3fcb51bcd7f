"""``cwctl rebalance``: colliding elephant flows spread over the spines, on demand."""

from __future__ import annotations

from typing import Annotated

import typer

from cwctl.actions.rebalance import MIN_GAIN, TARGET
from cwctl.actions.uplinkload import INTERVAL_S, MAX_INTERVAL_S
from cwctl.cli.actions import ActionFlags, action_flags, carry_out
from cwctl.cli.app import app, run_guarded
from cwctl.cli.complete import complete_element
from cwctl.cli.durations import METAVAR as DURATION
from cwctl.cli.durations import Duration
from cwctl.cli.options import SourceFlags, build_request, source_flags


@app.command()
@source_flags("inventory")
@action_flags("apply", "yes", "fmt", "sudo", "verify")
def rebalance(
    flags: SourceFlags,
    act: ActionFlags,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            parser=Duration(low=0.1, high=MAX_INTERVAL_S),
            metavar=DURATION,
            help="Between the two reads of each host's socket counters (the rates' window).",
        ),
    ] = INTERVAL_S,
    target: Annotated[
        float,
        typer.Option(
            "--target",
            metavar="RATIO",
            min=1.0,
            help="Balanced: each leaf's busiest uplink (and downlink) within RATIO of its "
            "links' mean load.",
        ),
    ] = TARGET,
    min_gain: Annotated[
        float,
        typer.Option(
            "--min-gain",
            metavar="RATIO",
            min=0.0,
            help="Move nothing unless max/mean falls by at least this much.",
        ),
    ] = MIN_GAIN,
    avoid: Annotated[
        list[str] | None,
        typer.Option(
            "--avoid",
            metavar="ELEMENT",
            autocompletion=complete_element,
            help="Never move a flow onto this spine or link (a suspect; repeatable).",
        ),
    ] = None,
) -> None:
    """Measure each leaf uplink's load from the hosts' sockets and move elephant flows
    (established ones too) so that each leaf's uplinks carry near-equal load.

    Example: cwctl rebalance -i inventory.toml --apply --verify
    """

    def body() -> int:
        from cwctl.actions.rebalance import RebalanceOptions
        from cwctl.actions.session import Ask

        options = RebalanceOptions(
            interval_s=interval, target=target, min_gain=min_gain, avoid=frozenset(avoid or ())
        )
        ask = Ask("rebalance", "uplinks", sudo=act.sudo, balance=options)
        return carry_out(build_request(flags), ask, act)

    raise typer.Exit(run_guarded(body))
