"""The local transport: 8 real agents on loopback, real UDP, real kernel timestamps."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cwctl.scan.collection import Collection
from cwctl.scan.recordfile import read_collection, write_collection
from cwctl.scan.request import ProbeOverrides, Progress, ScanRequest
from cwctl.session import analyse
from cwctl.sync.coded import send_spacing_ns
from cwctl.transport.local import LocalSource
from tests.integration.sshfleet import wait_gone
from tests.unit.test_recordfile import comparable_snapshot

N_AGENTS = 8
OVERRIDES = ProbeOverrides(peers=3, rate=50.0, ports=2)


def collect_local(request: ScanRequest, progress: Progress | None = None) -> Any:
    """One scan of the local source (the coroutine)."""
    return LocalSource(request).scan(request, progress)


@pytest.fixture(scope="module")
def local_scan() -> Iterator[Collection]:
    """One scan shared by the module's tests; afterwards no agent may be left running."""
    events: list[str] = []
    c = asyncio.run(
        collect_local(
            ScanRequest(local=N_AGENTS, duration_s=1.0, overrides=OVERRIDES),
            lambda event, fields: events.append(event),
        )
    )
    assert events[-1] == "done" and "started" in events
    yield c
    pids = [h["pid"] for h in c.hello.values()]
    assert asyncio.run(wait_gone(pids, 5.0)) == []


def test_every_agent_ok_on_its_own_loopback_address(local_scan: Collection) -> None:
    c = local_scan
    names = [f"local-{i:02d}" for i in range(1, N_AGENTS + 1)]
    assert c.host_names == names
    assert {n: s.status for n, s in c.status.items()} == dict.fromkeys(names, "ok")
    assert [c.hello[n]["address"] for n in names] == [f"127.0.0.{i + 2}" for i in range(N_AGENTS)]
    assert all(len(c.hello[n]["sports"]) == OVERRIDES.ports for n in names)
    assert len({c.hello[n]["pid"] for n in names}) == N_AGENTS


def test_every_assigned_pair_exchanges_probes(local_scan: Collection) -> None:
    c = local_scan
    t = c.table
    assert all(len(peers) == OVERRIDES.peers for peers in c.peers.values())
    for src, dsts in c.peers.items():
        for dst in dsts:
            rows = (t.src == t.host_index(src)) & (t.dst == t.host_index(dst))
            summary = c.summaries[src]
            assert int(rows.sum()) == summary["sent"][dst] > 0, (src, dst)
            assert int((rows & t.complete).sum()) == summary["complete"][dst]
            # ~rate * duration pairs, two probes each, over every source port (pairs overdue
            # by a stall of a busy machine are skipped, hence the margin)
            assert (rows & t.complete).sum() >= 0.7 * 2 * OVERRIDES.rate
            assert set(t.sport[rows].tolist()) == set(c.hello[src]["sports"])
    assert t.complete.mean() > 0.98


def test_kernel_timestamps_used(local_scan: Collection) -> None:
    c = local_scan
    if not sys.platform.startswith("linux"):
        pytest.skip("kernel software timestamps are Linux's")
    assert all(h["ts_caps"]["rx_sw"] and h["ts_caps"]["tx_sw"] for h in c.hello.values())
    assert c.table.timestamp_source == "sw"
    assert all(h["clocksource"] for h in c.hello.values())


def test_rtts_and_coded_pairs_are_sane(local_scan: Collection) -> None:
    """Properties a loaded machine cannot break: positive round trips, causality on one
    clock, the two probes of a pair in order and spaced by about the gap (not sent back
    to back). How close the spacing is to the gap, and the RTT figures, are timings:
    ``python -m bench fanout`` prints them."""
    t = local_scan.table.select(local_scan.table.complete)
    assert len(t) > 0
    rtt_ns = (t.t4 - t.t1) - (t.t3 - t.t2)
    assert (rtt_ns > 0).all()
    assert ((t.t1 < t.t2) & (t.t2 <= t.t3) & (t.t3 < t.t4)).all()  # same clock: causality
    spacing_ns = send_spacing_ns(local_scan.table)
    assert len(spacing_ns) > 0
    assert (spacing_ns > 0).all()  # the second probe of a pair always leaves after the first
    gap_ns = int(local_scan.table.gap_ns[0])
    assert np.median(spacing_ns) > gap_ns / 2  # paced by the gap, not back to back


def test_offsets_are_zero_within_two_microseconds(local_scan: Collection) -> None:
    """Every agent reads the same clock: the true offsets are zero."""
    snapshot = analyse(local_scan)
    offsets = np.array([h.offset_ns for h in snapshot.hosts], dtype=float)
    assert np.isfinite(offsets).all(), "the solver returned no offsets"
    assert np.percentile(np.abs(offsets), 99) <= 2_000


def test_saved_records_replay_to_the_same_snapshot(local_scan: Collection, tmp_path: Path) -> None:
    path = tmp_path / "local.jsonl.gz"
    write_collection(local_scan, path)
    replayed = read_collection(path)
    assert replayed.source == "replay:local"
    live = comparable_snapshot(analyse(local_scan).to_json())
    assert comparable_snapshot(analyse(replayed).to_json()) == live


def test_cli_scan_local(tmp_path: Path) -> None:
    out = tmp_path / "scan.json"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "cwctl"), "scan", "--local", "3", "--duration", "0.5",
         "--format", "json", "--out", str(out), "--save-records", str(tmp_path / "r.jsonl")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    doc = json.loads(out.read_text())
    assert [h["status"] for h in doc["hosts"]] == ["ok", "ok", "ok"]
    assert doc["paths"]
    assert read_collection(tmp_path / "r.jsonl").source == "replay:local"


def test_cancelled_local_scan_leaves_no_agent() -> None:
    pids: list[int] = []

    async def run() -> None:
        started = asyncio.Event()

        def progress(event: str, fields: dict) -> None:
            if event == "connected":
                pids.append(fields["pid"])
            elif event == "started":
                started.set()

        request = ScanRequest(local=3, duration_s=30.0, overrides=OVERRIDES)
        task = asyncio.create_task(collect_local(request, progress))
        await asyncio.wait_for(started.wait(), 30.0)
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = time.monotonic()
    asyncio.run(run())
    assert len(pids) == 3
    assert asyncio.run(wait_gone(pids, 5.0)) == []
    assert time.monotonic() - started < 20.0  # not the 30 s window


def test_open_files_limit_is_raised_for_large_scans() -> None:
    import resource

    from cwctl.transport.base import raise_fd_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 5000:
        pytest.skip(f"hard open-files limit {hard} is too low to test")
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        raise_fd_limit(1000)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 4 * 1000
        raise_fd_limit(10)  # never lowered
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 4 * 1000
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
