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

import numpy as np

from cwctl.collection import Collection
from cwctl.errors import InputError
from cwctl.snapshot import FabricSnapshot, HostReport, PathReport
from cwctl.sync import ClockSolution, one_way_delays, solve


@dataclass(frozen=True)
class SimOptions:
    """The simulator's knobs (DESIGN.md, Simulator)."""

    hosts: int = 64
    hosts_per_leaf: int = 8
    spines: int = 4
    seed: int = 1
    faults: tuple[str, ...] = ()  # KIND:NAME[:MODE][@T]
    timestamps: str = "hw"  # hw | sw
    load: float = 0.2


@dataclass(frozen=True)
class ScanRequest:
    """Where the hosts come from (exactly one of inventory, local, sim, replay) and how."""

    inventory: Path | None = None
    local: int | None = None
    sim: SimOptions | None = None
    replay: Path | None = None
    duration_s: float | None = None  # None: the inventory's [probe] duration, else 2.0
    save_records: Path | None = None
    reference: str | None = None
    concurrency: int | None = None
    accept_new_host_keys: bool = False
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
    """Solve the clocks, measure the paths, localise faults: the snapshot of one scan."""
    table = collection.table
    if reference is not None and reference not in collection.host_names:
        raise InputError(f"--reference {reference!r} is not one of the scanned hosts")
    solution = solve(table, reference=reference)
    hosts = _host_reports(collection, solution)
    paths = _path_reports(collection, solution)
    return FabricSnapshot(
        source=collection.source,
        reference=solution.reference,
        duration_s=collection.duration_s,
        hosts=hosts,
        paths=paths,
        suspects=[],
        timestamp_source=table.timestamp_source,
        sync=dict(solution.quality),
        truth=collection.truth,
        records=len(table),
    )


async def scan(request: ScanRequest, progress: Progress | None = None) -> FabricSnapshot:
    collection = await collect(request, progress)
    return analyse(collection, reference=request.reference)


def _host_reports(collection: Collection, solution: ClockSolution) -> list[HostReport]:
    index = {name: i for i, name in enumerate(solution.hosts)}
    reports = []
    for info in collection.hosts:
        status = collection.status.get(info.name)
        report = HostReport(
            name=info.name,
            status=status.status if status else "ok",
            error=status.error if status else None,
        )
        i = index.get(info.name)
        if i is not None:
            report.offset_ns = float(solution.offset_ns[i])
            report.drift_ppb = float(solution.drift_ppb[i])
            report.uncertainty_ns = float(solution.uncertainty_ns[i])
        reports.append(report)
    return reports


def _path_reports(collection: Collection, solution: ClockSolution) -> list[PathReport]:
    """Per directed path: counts and one-way delay quantiles (both directions of each probe)."""
    table = collection.table
    if len(table) == 0:
        return []
    fwd, rev = one_way_delays(table, solution)
    reports = []
    for (s, d), (delays, sent) in _group_directed(table, fwd, rev).items():
        got = delays[~np.isnan(delays)]
        q = np.percentile(got, [0, 50, 99, 100]) if len(got) else [None] * 4
        reports.append(
            PathReport(
                src=table.hosts[s],
                dst=table.hosts[d],
                sent=sent,
                received=len(got),
                owd_min_ns=_f(q[0]),
                owd_p50_ns=_f(q[1]),
                owd_p99_ns=_f(q[2]),
                owd_max_ns=_f(q[3]),
            )
        )
    return reports


def _group_directed(table, fwd, rev):  # type: ignore[no-untyped-def]
    out: dict[tuple[int, int], tuple[np.ndarray, int]] = {}
    for s, d, delays in ((table.src, table.dst, fwd), (table.dst, table.src, rev)):
        key = s.astype(np.int64) * len(table.hosts) + d
        order = np.argsort(key, kind="stable")
        uniq, starts = np.unique(key[order], return_index=True)
        for k, chunk in zip(uniq, np.split(order, starts[1:]), strict=True):
            pair = (int(k // len(table.hosts)), int(k % len(table.hosts)))
            prev, sent = out.get(pair, (np.empty(0), 0))
            out[pair] = (np.concatenate([prev, delays[chunk]]), sent + len(chunk))
    return out


def _f(x: float | None) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)
