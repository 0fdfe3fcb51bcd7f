"""The scan pipeline both shells call: collect records, solve clocks, build the snapshot.

``collect(request)`` reaches the hosts through one transport (ssh, local, sim) or reads
a saved record file (replay) and returns a ``Collection``; ``analyse(collection)``
turns it into a ``FabricSnapshot``. ``scan(request)`` is both in one call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cwctl import settings
from cwctl.collection import Collection
from cwctl.errors import InputError
from cwctl.snapshot import FabricSnapshot
from cwctl.sync import solve
from cwctl.telemetry import build_snapshot


@dataclass(frozen=True)
class SimOptions:
    """The simulator's knobs (DESIGN.md, Simulator)."""

    hosts: int = settings.SIM_HOSTS
    hosts_per_leaf: int = settings.SIM_HOSTS_PER_LEAF
    spines: int = settings.SIM_SPINES
    seed: int = settings.SIM_SEED
    faults: tuple[str, ...] = ()  # KIND:NAME[:MODE][@T]
    timestamps: str = settings.SIM_TIMESTAMPS  # hw | sw
    load: float = settings.SIM_LOAD


@dataclass(frozen=True)
class ScanRequest:
    """Where the hosts come from (exactly one of inventory, local, sim, replay) and how."""

    inventory: Path | None = None
    local: int | None = None
    sim: SimOptions | None = None
    replay: Path | None = None
    duration_s: float | None = None  # None: the inventory's [probe] duration, else the default
    save_records: Path | None = None
    reference: str | None = None
    concurrency: int | None = None
    accept_new_host_keys: bool = False
    via: str = "ssh"  # how inventory hosts are reached: ssh | slurm (one srun step)
    overrides: dict[str, Any] = field(default_factory=dict)  # probe settings from flags


# progress(event, fields): "connected", "records", ... for a progress bar on stderr.
Progress = Callable[[str, dict[str, Any]], None]


async def collect(request: ScanRequest, progress: Progress | None = None) -> Collection:
    """Run the probing (or read the replay file) and bring every record home."""
    if request.replay is not None:
        from cwctl.recordfile import read_collection

        collection = read_collection(request.replay)
    elif request.sim is not None:
        from cwctl.transport.sim import collect_sim

        collection = await collect_sim(request, progress)
    elif request.local is not None:
        from cwctl.transport.local import collect_local

        collection = await collect_local(request, progress)
    elif request.inventory is not None and request.via == "slurm":
        from cwctl.transport.slurm import collect_slurm

        collection = await collect_slurm(request, progress)
    elif request.inventory is not None:
        from cwctl.transport.ssh import collect_ssh

        collection = await collect_ssh(request, progress)
    else:
        raise InputError("no hosts: give -i/--inventory FILE, --local N, --sim or --replay FILE")
    if request.save_records is not None and request.replay is None:
        from cwctl.recordfile import write_collection

        write_collection(collection, request.save_records)
    return collection


def analyse(collection: Collection, *, reference: str | None = None) -> FabricSnapshot:
    """Solve the clocks, then measure the paths and localise faults: one scan's snapshot."""
    if reference is not None and reference not in collection.host_names:
        raise InputError(f"--reference {reference!r} is not one of the scanned hosts")
    solution = solve(collection.table, reference=reference)
    return build_snapshot(collection, solution)


async def scan(request: ScanRequest, progress: Progress | None = None) -> FabricSnapshot:
    collection = await collect(request, progress)
    return analyse(collection, reference=request.reference)
