"""The scan session: one request, its source picked once, scans out, state kept.

    async with ScanSession(request, progress=print_progress) as session:
        snapshot = await session.scan()          # collect + solve + telemetry
        collection = await session.collect()     # or just the records

The CLI runs one scan (``scan(request)``); the TUI scans again and again with
``sliding=True`` (the clock solve warm-starts from the previous window); an action's
``--verify`` rescans through a session on the same source, so a simulated change shows.
Which source answers (sim, ssh, local, slurm, replay; ``SOURCES`` lists them) is decided once,
from the request, by ``open_source``; every source answers ``cwctl.scan.request.Source``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from cwctl.errors import InputError
from cwctl.jobs import JobRead
from cwctl.jobs.affected import attach
from cwctl.jobs.simjobs import sim_jobs
from cwctl.runtime.gcpause import paused_gc
from cwctl.scan.collection import Collection
from cwctl.scan.request import Progress, ScanRequest, Source
from cwctl.scan.snapshot import FabricSnapshot
from cwctl.sync.incremental import SlidingSolver, history_for
from cwctl.sync.spinepaths import solve_on_spines, wants_legs
from cwctl.telemetry import build_snapshot
from cwctl.telemetry.consistency import checked
from cwctl.telemetry.routes import spine_legs


def _sim(request: ScanRequest) -> Source:
    from cwctl.transport.sim import SimSource

    return SimSource(request)


def _ssh(request: ScanRequest) -> Source:
    from cwctl.transport.ssh import SSHSource

    return SSHSource(request)


def _local(request: ScanRequest) -> Source:
    from cwctl.transport.local import LocalSource

    return LocalSource(request)


def _slurm(request: ScanRequest) -> Source:
    from cwctl.transport.slurm import SlurmSource

    return SlurmSource(request)


def _replay(request: ScanRequest) -> Source:
    from cwctl.transport.replay import ReplaySource

    return ReplaySource(request)


# request.source -> how to build that source (imported on use: asyncssh is slow to load).
SOURCES: dict[str, Callable[[ScanRequest], Source]] = {
    "sim": _sim,
    "ssh": _ssh,
    "local": _local,
    "slurm": _slurm,
    "replay": _replay,
}


def open_source(request: ScanRequest) -> Source:
    """The source ``request`` asks for, built once."""
    make = SOURCES.get(request.source)
    if make is None:
        raise InputError("no hosts: give -i/--inventory FILE, --local N, --sim or --replay FILE")
    return make(request)


# What a scan's jobs come from: given the scan's collection (its hosts), the scheduler's
# running jobs, read once per scan; None when there is no scheduler to ask.
JobReader = Callable[[Collection], Awaitable[JobRead | None]]


def default_jobs(request: ScanRequest) -> JobReader | None:
    """The jobs a session reads when its caller names no reader: the simulated job set
    of ``--sim --jobs N``; none otherwise (a scheduler is read through a runner,
    ``cwctl.actions.jobs.job_reader``, which the shells hand in)."""
    sim = request.sim
    if sim is None or sim.jobs <= 0:
        return None
    n, seed = sim.jobs, sim.seed

    async def read(collection: Collection) -> JobRead | None:
        return sim_jobs(collection.host_names, n, seed)

    return read


def analyse(
    collection: Collection, *, reference: str | None = None, release: bool = False
) -> FabricSnapshot:
    """Solve the clocks, then measure the paths and localise faults: one scan's snapshot.
    ``release``: the collection is the analysis's to consume (``build_snapshot``).

    The cycle collector is paused throughout: the analysis makes no reference cycles (a
    collection after it finds none; ``tests/unit/test_session_gc.py``), and at 10 000
    hosts its full collections walked the collection's and the reports' millions of
    objects for nothing (0.3-0.5 s a scan)."""
    _check_reference(collection, reference)
    with paused_gc():
        checked(collection)
        table = collection.table
        legs = (
            spine_legs(table, collection.topology, collection.paths) if wants_legs(table) else None
        )
        solution = solve_on_spines(table, legs, reference=reference)
        del table, legs  # with ``release`` the rows go once the paths are measured
        return _truth_at_t_ref(build_snapshot(collection, solution, release=release))


def _truth_at_t_ref(snapshot: FabricSnapshot) -> FabricSnapshot:
    """A simulated scan's truth restated at the report's own instant and reference, so
    ``hosts[].offset_ns`` compares with ``truth.offset_ns`` directly (issue 27)."""
    if snapshot.truth and snapshot.reference is not None and snapshot.t_ref_ns is not None:
        from cwctl.sim.truth import truth_at

        snapshot.truth = truth_at(snapshot.truth, snapshot.reference, snapshot.t_ref_ns)
    return snapshot


def _check_reference(collection: Collection, reference: str | None) -> None:
    if reference is not None and reference not in collection.host_names:
        raise InputError(f"--reference {reference!r} is not one of the scanned hosts")


class ScanSession:
    """Scans of one request through one source, for whoever asked (CLI, TUI, verify)."""

    def __init__(
        self,
        request: ScanRequest,
        *,
        source: Source | None = None,
        progress: Progress | None = None,
        sliding: bool = False,
        jobs: JobReader | None = None,
    ) -> None:
        self.request = request
        self.source = source if source is not None else open_source(request)
        self.jobs = jobs if jobs is not None else default_jobs(request)
        self.progress = progress
        self.sliding = sliding and request.replay is None
        self._solver: SlidingSolver | None = None
        self.scans = 0

    @property
    def label(self) -> str:
        return self.request.label

    @property
    def simulated(self) -> bool:
        return self.source.name == "sim"

    @property
    def model(self) -> Any:
        """The simulator's model the scans probe (``None`` for any other source)."""
        return getattr(self.source, "model", None) if self.simulated else None

    def fabric_changed(self) -> None:
        """An action changed the fabric (a reroute, a drain): the paths the source learnt
        no longer hold, so the next scans trace afresh (``cwctl.scan.pathcache``)."""
        paths = getattr(self.source, "paths", None)
        if paths is not None:
            paths.forget()

    async def collect(self) -> Collection:
        """One scan's records (kept in ``request.save_records`` when asked)."""
        collection = await self.source.scan(self.request, self.progress)
        if self.request.save_records is not None and self.request.replay is None:
            from cwctl.scan.recordfile import write_collection

            write_collection(collection, self.request.save_records)
        return collection

    async def scan(self) -> FabricSnapshot:
        """One scan, solved and measured. The numpy work runs in a thread; ``progress``
        hears ``solved`` when it is done (a progress line says "solving" until then)."""
        collection = await self.collect()
        began = time.monotonic()
        if self.jobs is None:
            snapshot = await asyncio.to_thread(self._analyse, collection)
        else:  # the scheduler is asked while the numpy work runs
            snapshot, read = await asyncio.gather(
                asyncio.to_thread(self._analyse, collection), self.jobs(collection)
            )
            await asyncio.to_thread(attach, snapshot, read)  # numpy per job and suspect
        self.scans += 1
        if self.progress is not None:
            self.progress("solved", {"s": round(time.monotonic() - began, 3)})
        return snapshot

    next_snapshot = scan  # what the TUI awaits (cwctl.tui.source.ScanSource)

    def _analyse(self, collection: Collection) -> FabricSnapshot:
        reference = self.request.reference
        # the collection is this scan's alone: its rows go once the paths are measured
        if not self.sliding:
            return analyse(collection, reference=reference, release=True)
        _check_reference(collection, reference)
        if self._solver is None:
            # The window carries the clock model: the last scans' probes, as many as
            # history_for says for this rate (one scan at quick, 60 s at watch); offsets
            # are reported at its middle; the graph, the Huber weights and the offsets
            # stay warm.
            rate = collection.params.get("rate")
            history_s = history_for(
                float(rate) if isinstance(rate, (int, float)) else None, collection.duration_s
            )
            self._solver = SlidingSolver(
                window_s=history_s, reference=reference, scan_s=collection.duration_s
            )
        with paused_gc():  # as in ``analyse``
            checked(collection)
            solution = self._solver.update(collection.table)
            return _truth_at_t_ref(build_snapshot(collection, solution, release=True))

    async def aclose(self) -> None:
        await self.source.aclose()

    async def __aenter__(self) -> ScanSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


async def scan(
    request: ScanRequest, progress: Progress | None = None, jobs: JobReader | None = None
) -> FabricSnapshot:
    """One scan of ``request``: a session opened, scanned once, closed."""
    async with ScanSession(request, progress=progress, jobs=jobs) as session:
        return await session.scan()
