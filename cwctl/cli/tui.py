"""``cwctl tui``: the scan pipeline, continuously, in the Textual app."""

from __future__ import annotations

from typing import Annotated

import typer

from cwctl import settings
from cwctl.cli.app import app, run_guarded
from cwctl.cli.options import SCAN_FLAGS, SourceFlags, build_request, source_flags


@app.command()
@source_flags(*SCAN_FLAGS)
def tui(
    flags: SourceFlags,
    interval: Annotated[
        float, typer.Option("--interval", min=0.0, help="Seconds between scans.")
    ] = settings.TUI_INTERVAL_S,
    readonly: Annotated[bool, typer.Option("--readonly", help="Hide every action.")] = False,
) -> None:
    """The scan pipeline, continuously, in a live terminal UI."""

    def body() -> None:
        from cwctl.tui.app import make_app
        from cwctl.tui.source import PipelineSource

        request = build_request(flags)
        if request.inventory is not None and request.sim is None:
            from cwctl.inventory import load_inventory

            load_inventory(request.inventory)  # a broken inventory: one line, before the UI
        make_app(PipelineSource(request), readonly=readonly, interval_s=interval).run()

    run_guarded(body)
