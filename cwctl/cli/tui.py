"""``cwctl tui``: the scan pipeline, continuously, in the Textual app."""

from __future__ import annotations

from typing import Annotated

import typer

from cwctl.cli.app import Timestamps, app, run_guarded
from cwctl.cli.options import (
    AcceptKeysOpt,
    ConcurrencyOpt,
    DurationOpt,
    FaultOpt,
    HostsOpt,
    HostsPerLeafOpt,
    InventoryOpt,
    LoadOpt,
    LocalOpt,
    ReferenceOpt,
    SeedOpt,
    SimOpt,
    SpinesOpt,
    TimestampsOpt,
    build_request,
)


@app.command()
def tui(
    inventory: InventoryOpt = None,
    local: LocalOpt = None,
    sim: SimOpt = False,
    hosts: HostsOpt = 64,
    hosts_per_leaf: HostsPerLeafOpt = 8,
    spines: SpinesOpt = 4,
    seed: SeedOpt = 1,
    fault: FaultOpt = None,
    timestamps: TimestampsOpt = Timestamps.hw,
    load: LoadOpt = 0.2,
    duration: DurationOpt = None,
    reference: ReferenceOpt = None,
    concurrency: ConcurrencyOpt = None,
    accept_new_host_keys: AcceptKeysOpt = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.0, help="Seconds between scans.")
    ] = 1.0,
    readonly: Annotated[bool, typer.Option("--readonly", help="Hide every action.")] = False,
) -> None:
    """The scan pipeline, continuously, in a live terminal UI."""

    def body() -> None:
        from cwctl.tui.app import make_app
        from cwctl.tui.source import PipelineSource

        request = build_request(
            inventory=inventory,
            local=local,
            sim=sim,
            replay=None,
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=fault,
            timestamps=timestamps,
            load=load,
            duration=duration,
            save_records=None,
            reference=reference,
            concurrency=concurrency,
            accept_new_host_keys=accept_new_host_keys,
        )
        if request.inventory is not None and request.sim is None:
            from cwctl.inventory import load_inventory

            load_inventory(request.inventory)  # a broken inventory: one line, before the UI
        make_app(PipelineSource(request), readonly=readonly, interval_s=interval).run()

    run_guarded(body)
