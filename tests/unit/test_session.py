"""The scan session: the source is picked once from the request, every scan goes through
it (with the caller's progress), saved records are written, and closing the session
closes the source. A hand-made source stands in where a test wants to see the calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from cwctl.errors import InputError
from cwctl.scan.collection import Collection
from cwctl.scan.recordfile import read_collection
from cwctl.scan.request import PROGRESS_EVENTS, ProbeOverrides, Progress, ScanRequest, SimOptions
from cwctl.session import SOURCES, ScanSession, open_source
from cwctl.transport.local import LocalSource
from cwctl.transport.replay import ReplaySource
from cwctl.transport.sim import SimSource, simulate
from cwctl.transport.slurm import SlurmSource
from cwctl.transport.ssh import SSHSource

SMALL = SimOptions(hosts=8, hosts_per_leaf=4, spines=2, seed=3)


def test_the_request_names_its_source_and_the_session_builds_that_one(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.toml"
    inventory.write_text('[[host]]\nname = "a"\naddress = "10.0.0.1"\n')
    cases = [
        (ScanRequest(sim=SMALL), "sim", SimSource),
        (ScanRequest(sim=SMALL, inventory=inventory), "sim", SimSource),
        (ScanRequest(local=3), "local", LocalSource),
        (ScanRequest(inventory=inventory), "ssh", SSHSource),
        (ScanRequest(inventory=inventory, via="slurm"), "slurm", SlurmSource),
        (ScanRequest(replay=tmp_path / "r.jsonl"), "replay", ReplaySource),
    ]
    for request, name, kind in cases:
        assert request.source == name
        source = open_source(request)
        assert isinstance(source, kind) and source.name == name
    assert set(SOURCES) == {"sim", "ssh", "local", "slurm", "replay"}


def test_a_request_without_hosts_is_one_input_error() -> None:
    with pytest.raises(InputError, match="no hosts"):
        ScanSession(ScanRequest())


class Recording:
    """A source that hands out one simulated window per scan and records the calls."""

    name = "recording"

    def __init__(self) -> None:
        self.scans = 0
        self.closed = False

    async def scan(self, request: ScanRequest, progress: Progress | None = None) -> Collection:
        self.scans += 1
        if progress is not None:
            progress("done", {"ok": 8, "of": 8})
        return simulate(SMALL, 0.2)

    async def aclose(self) -> None:
        self.closed = True


async def test_scans_go_through_the_source_and_closing_closes_it(tmp_path: Path) -> None:
    events: list[str] = []
    source = Recording()
    saved = tmp_path / "records.jsonl.gz"
    request = ScanRequest(sim=SMALL, save_records=saved)
    async with ScanSession(
        request, source=source, progress=lambda e, f: events.append(e)
    ) as session:
        snapshot = await session.scan()
        assert [h.name for h in snapshot.hosts] == [f"gpu-{i:03d}" for i in range(1, 9)]
        await session.collect()
        assert source.scans == 2 and session.scans == 1 and not source.closed
    assert source.closed
    assert events == ["done", "solved", "done"]  # a scan is solved; a collection is not
    kept = read_collection(saved)  # the last scan's records, as --save-records writes them
    assert kept.host_names == [h.name for h in snapshot.hosts] and len(kept.table) > 0


async def test_the_sim_sources_model_is_the_state_kept_between_scans() -> None:
    request = ScanRequest(sim=SMALL, duration_s=0.2)
    session = ScanSession(request, sliding=True)
    assert session.simulated and session.label == "SIMULATED"
    first, second = await session.scan(), await session.scan()
    assert session.model is not None and session.model.windows == 2
    assert first.truth is not None and second.truth is not None
    assert second.truth["t_mid_ns"] > first.truth["t_mid_ns"]
    assert second.sync.get("warm")  # the sliding solver lives with the session
    other = ScanSession(request)
    await other.scan()
    assert other.model is not session.model and other.model.windows == 1


async def test_a_reference_outside_the_scan_is_an_input_error() -> None:
    session = ScanSession(ScanRequest(sim=SMALL, duration_s=0.2, reference="gpu-999"))
    with pytest.raises(InputError, match="gpu-999"):
        await session.scan()


async def test_sources_report_only_the_declared_progress_events() -> None:
    """PROGRESS_EVENTS is the one list of what a scan reports (the CLI's progress line
    reads it): the simulator and real agents on loopback say nothing else."""
    for request in (
        ScanRequest(sim=SMALL, duration_s=0.2),
        ScanRequest(local=2, duration_s=0.2, overrides=ProbeOverrides(peers=1, ports=1)),
    ):
        events: list[str] = []
        await ScanSession(request, progress=lambda e, _f, seen=events: seen.append(e)).collect()
        assert events and set(events) <= set(PROGRESS_EVENTS), events
        assert events[-1] == "done"


async def test_a_snapshots_repr_is_a_summary_not_every_path() -> None:
    # asyncio.run formats the scan task, and so its result, when it puts SIGINT back
    snapshot = await ScanSession(ScanRequest(sim=SMALL, duration_s=0.2)).scan()
    assert len(snapshot.paths) > 10
    text = repr(snapshot)
    assert f"hosts={len(snapshot.hosts)}" in text and f"paths={len(snapshot.paths)}" in text
    assert len(text) < 300
