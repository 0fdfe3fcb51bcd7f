"""``cwctl tui``: the scan pipeline, continuously, in the Textual app."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from cwctl import settings
from cwctl.cli.app import app, fail, run_guarded
from cwctl.cli.durations import METAVAR as DURATION
from cwctl.cli.durations import Duration
from cwctl.cli.options import SCAN_FLAGS, SourceFlags, build_request, source_flags
from cwctl.scan.budgets import COMMAND_BUDGETS


@app.command()
@source_flags(*SCAN_FLAGS, "jobs", "replay")
def tui(
    flags: SourceFlags,
    interval: Annotated[
        float,
        typer.Option(
            "--interval", parser=Duration(low=0.0), metavar=DURATION, help="Time between scans."
        ),
    ] = settings.TUI_INTERVAL_S,
    readonly: Annotated[bool, typer.Option("--readonly", help="Hide every action.")] = False,
    steer_port: Annotated[
        list[str] | None,
        typer.Option(
            "--steer-port",
            metavar="[PROTO:]PORT",
            help="R (steer at the hosts): steer new connections to this destination port "
            "(5201, udp:9000; repeatable) instead of moving the flows open now.",
        ),
    ] = None,
    job_log: Annotated[
        str | None,
        typer.Option(
            "--job-log",
            metavar="GLOB",
            help="r/R/d: the job's step logs on the hosts (cwctl.jobs.stephook); after an "
            "action applies, its notice says when the job's own steps came back.",
        ),
    ] = None,
) -> None:
    """The scan pipeline, continuously, in a live terminal UI (--replay FILE: review a
    saved scan). Needs a terminal on stdin and stdout.

    Example: cwctl tui --sim --fault link:leaf1-spine2:lossy=0.05@10
    """

    def body() -> None:
        request = build_request(flags, COMMAND_BUDGETS["tui"])
        from cwctl.actions.steer import SteerOptions
        from cwctl.actions.steerports import parse_service

        steer = SteerOptions(services=tuple(sorted({parse_service(p) for p in steer_port or ()})))
        from cwctl.actions.jobs import job_reader
        from cwctl.session import ScanSession  # after every check: numpy, asyncssh, ...

        # the source is opened here: a broken inventory is one line, before the UI
        jobs = job_reader(request, accept_new_host_keys=request.accept_new_host_keys)
        session = ScanSession(request, sliding=True, jobs=jobs)
        if not has_terminal():
            fail("tui needs a terminal on stdin and stdout (for a report: cwctl scan)")
        from cwctl.tui.app import make_app  # after every check: textual, ...

        # saved records: one scan says it all, and there are no hosts to act on
        review = flags.replay is not None
        app_ = make_app(
            session,
            readonly=readonly or review,
            interval_s=interval,
            max_scans=1 if review else None,
            steer=steer,
            job_log=job_log,
        )
        app_.run()
        from cwctl.runtime.offthread import exit_now_if_busy

        exit_now_if_busy(app_.executor, 0)  # a solve still running: quit now, not after it

    run_guarded(body)


def has_terminal() -> bool:
    """Are stdin and stdout both terminals? (Without one, Textual's driver spins.)"""
    return sys.stdin.isatty() and sys.stdout.isatty()
