"""``cwctl tui``: the scan pipeline, continuously, in the Textual app."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from cwctl import settings
from cwctl.cli.app import app, fail, run_guarded
from cwctl.cli.options import SCAN_FLAGS, SourceFlags, build_request, source_flags


@app.command()
@source_flags(*SCAN_FLAGS, "replay")
def tui(
    flags: SourceFlags,
    interval: Annotated[
        float, typer.Option("--interval", min=0.0, help="Seconds between scans.")
    ] = settings.TUI_INTERVAL_S,
    readonly: Annotated[bool, typer.Option("--readonly", help="Hide every action.")] = False,
) -> None:
    """The scan pipeline, continuously, in a live terminal UI (--replay FILE: review a
    saved scan). Needs a terminal on stdin and stdout."""

    def body() -> None:
        from cwctl.session import ScanSession
        from cwctl.tui.app import make_app

        request = build_request(flags)
        # the source is opened here: a broken inventory is one line, before the UI
        session = ScanSession(request, sliding=True)
        if not has_terminal():
            fail("tui needs a terminal on stdin and stdout (for a report: cwctl scan)")
        # saved records: one scan says it all, and there are no hosts to act on
        review = flags.replay is not None
        app_ = make_app(
            session,
            readonly=readonly or review,
            interval_s=interval,
            max_scans=1 if review else None,
        )
        app_.run()

    run_guarded(body)


def has_terminal() -> bool:
    """Are stdin and stdout both terminals? (Without one, Textual's driver spins.)"""
    return sys.stdin.isatty() and sys.stdout.isatty()
