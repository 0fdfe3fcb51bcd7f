"""``cwctl watch``: the fabric watched around the clock (the loop lives in cwctl.watch)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from cwctl import settings
from cwctl.cli.app import app, run_guarded
from cwctl.cli.durations import METAVAR as DURATION
from cwctl.cli.durations import Duration
from cwctl.cli.options import SCAN_FLAGS, SourceFlags, build_request, source_flags
from cwctl.scan.budgets import COMMAND_BUDGETS


class LogFormat(StrEnum):
    auto = "auto"
    human = "human"
    json = "json"


@app.command()
@source_flags(*SCAN_FLAGS, "jobs", "via")
def watch(
    flags: SourceFlags,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            parser=Duration(low=0.0),
            metavar=DURATION,
            help="From one round's start to the next.",
        ),
    ] = settings.WATCH_INTERVAL_S,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            metavar="FILE",
            help="Act on suspects as this policy allows (docs/watch.md); without it, never act.",
        ),
    ] = None,
    listen: Annotated[
        str | None,
        typer.Option(
            "--listen",
            metavar="ADDR:PORT",
            help="Serve Prometheus /metrics here (:PORT is loopback; 0.0.0.0:PORT every address).",
        ),
    ] = None,
    textfile: Annotated[
        Path | None,
        typer.Option(
            "--textfile",
            metavar="FILE.prom",
            help="Write the metrics here after each round (atomic), for node_exporter.",
        ),
    ] = None,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="One round at the quick budget (an answer now, as scan's), then exit: "
            "0 healthy, 3 problems (cron).",
        ),
    ] = False,
    rounds: Annotated[
        int | None,
        typer.Option(
            "--rounds",
            min=1,
            metavar="N",
            help="Stop after N rounds: exit 3 when the last found problems (unreachable "
            "hosts, suspects) or failed, else 0.",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat,
        typer.Option(
            "--log-format",
            metavar="auto|human|json",
            help="The log on stderr: words with a level (human), JSON lines (json); auto: "
            "human on a terminal or the systemd journal, json into a pipe or a file.",
        ),
    ] = LogFormat.auto,
) -> None:
    """Scan every --interval at the watch budget, export /metrics, and (only with
    --policy) reroute or drain round persistent suspects, restoring them when clean.
    Rounds and decisions go to stderr at a level (--log-format). SIGHUP reloads the
    inventory and the policy.

    Example: cwctl watch --sim --listen :19108 --policy docs/watch-policy.example.toml
    """

    def body() -> int:
        from cwctl.runtime.atomic import check_output

        # one round answers alone (quick, as scan); the loop watches (watch)
        request = build_request(flags, COMMAND_BUDGETS["watch-once" if once else "watch"])
        out = check_output(textfile, "--textfile") if textfile is not None else None
        from cwctl.watch.httpd import parse_listen
        from cwctl.watch.policy import load_policy

        if listen is not None:
            parse_listen(listen)
        loaded = load_policy(policy) if policy is not None else None  # every line checked
        from cwctl.watch.log import make_log
        from cwctl.watch.service import WatchOptions, run_watch

        options = WatchOptions(
            interval_s=interval, once=once, rounds=rounds, listen=listen, textfile=out
        )
        return run_watch(request, options, loaded, log=make_log(log_format.value))

    raise typer.Exit(run_guarded(body))
