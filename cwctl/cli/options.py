"""Options shared by several commands, and the ScanRequest they add up to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cwctl.cli.app import Format, Timestamps, fail

InventoryOpt = Annotated[
    Path | None,
    typer.Option(
        "-i",
        "--inventory",
        envvar="CWCTL_INVENTORY",
        help="Inventory file (default $CWCTL_INVENTORY, else ./inventory.toml).",
    ),
]
LocalOpt = Annotated[
    int | None,
    typer.Option("--local", min=2, max=250, help="N agents on this machine's loopback."),
]
SimOpt = Annotated[bool, typer.Option("--sim", help="Use the built-in simulated fabric.")]
HostsOpt = Annotated[int, typer.Option("--hosts", min=2, help="Simulated hosts.")]
HostsPerLeafOpt = Annotated[int, typer.Option("--hosts-per-leaf", min=1, help="Hosts per leaf.")]
SpinesOpt = Annotated[int, typer.Option("--spines", min=1, help="Simulated spines.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Simulator seed.")]
FaultOpt = Annotated[
    list[str] | None,
    typer.Option("--fault", help="Inject a fault: KIND:NAME[:MODE][@T] (repeatable)."),
]
TimestampsOpt = Annotated[
    Timestamps, typer.Option("--timestamps", help="Simulated timestamping: hw or sw.")
]
LoadOpt = Annotated[float, typer.Option("--load", min=0.0, max=1.0, help="Simulated load 0..1.")]
DurationOpt = Annotated[
    float | None, typer.Option("--duration", min=0.1, help="Seconds of probing.")
]
FormatOpt = Annotated[Format, typer.Option("--format", help="table, json or prom.")]
PrettyOpt = Annotated[
    bool, typer.Option("--pretty", help="Indent --format json for people (default compact).")
]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Write the report here (atomic).")]
SaveOpt = Annotated[
    Path | None, typer.Option("--save-records", help="Keep every probe record (.gz ok).")
]
HeatmapOpt = Annotated[
    Path | None, typer.Option("--heatmap", help="Also write the host x host heatmap (PNG).")
]
ReplayOpt = Annotated[
    Path | None, typer.Option("--replay", help="Analyse saved records instead of probing.")
]
ReferenceOpt = Annotated[
    str | None, typer.Option("--reference", help="Host whose clock is the reference.")
]
ConcurrencyOpt = Annotated[
    int | None, typer.Option("--concurrency", min=1, help="SSH sessions at once (default 128).")
]
AcceptKeysOpt = Annotated[
    bool,
    typer.Option(
        "--accept-new-host-keys",
        help="Trust and record unknown SSH host keys (changed keys are still refused).",
    ),
]


def build_request(
    *,
    inventory: Path | None,
    local: int | None,
    sim: bool,
    replay: Path | None,
    hosts: int,
    hosts_per_leaf: int,
    spines: int,
    seed: int,
    faults: list[str] | None,
    timestamps: Timestamps,
    load: float,
    duration: float | None,
    save_records: Path | None,
    reference: str | None,
    concurrency: int | None,
    accept_new_host_keys: bool,
) -> Any:
    """A ScanRequest from the flags; exactly one source of hosts."""
    from cwctl.atomic import expand
    from cwctl.pipeline import ScanRequest, SimOptions

    # ~ expanded in every path option (typer passes "--replay=~/x" through as it is)
    inventory = expand(inventory, "--inventory") if inventory is not None else None
    replay = expand(replay, "--replay") if replay is not None else None
    save_records = expand(save_records, "--save-records") if save_records is not None else None
    given = [name for name, on in (("--local", local), ("--sim", sim), ("--replay", replay)) if on]
    if len(given) > 1:
        fail(f"give one source of hosts, not {' and '.join(given)}")
    if faults and not sim:
        fail("--fault needs --sim")
    sim_options = None
    if sim:
        sim_options = SimOptions(
            hosts=hosts,
            hosts_per_leaf=hosts_per_leaf,
            spines=spines,
            seed=seed,
            faults=tuple(faults or ()),
            timestamps=timestamps.value,
            load=load,
        )
    if not given:
        inventory = inventory or Path("inventory.toml")
    return ScanRequest(
        inventory=inventory if (not given or sim) else None,
        local=local,
        sim=sim_options,
        replay=replay,
        duration_s=duration,
        save_records=save_records,
        reference=reference,
        concurrency=concurrency,
        accept_new_host_keys=accept_new_host_keys,
    )
