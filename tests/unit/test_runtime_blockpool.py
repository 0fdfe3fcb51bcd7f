"""Blocks of a scan's analysis on two threads (``runtime.blockpool``): the same report
to the byte as one after another, the blocks' order kept, a block's error raised, and
``$CWCTL_THREADS`` read as documented (docs/cli.md); the simulator's chunks stamped
beside the drawing of the next (``pipeline``): the same records to the bit."""

from __future__ import annotations

import asyncio
import importlib
import json
import threading
import time

import numpy as np
import pytest

import cwctl.sim.exchanges
import cwctl.telemetry.blockwise
from cwctl.report import render_bytes
from cwctl.runtime.blockpool import MAX_THREADS, THREADS_ENV, block_threads, map_blocks, pipeline
from cwctl.scan.request import ScanRequest, SimOptions
from cwctl.session import scan
from cwctl.sim import FabricModel, SimParams


def _report(threads: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv(THREADS_ENV, threads)
    request = ScanRequest(sim=SimOptions(hosts=64, faults=("switch:spine2:congested",)))
    snapshot = asyncio.run(scan(request))
    report = json.loads(b"".join(render_bytes(snapshot, "json")))
    for timing in ("fit_s", "solve_s"):
        report["sync"].pop(timing, None)
    return report


def test_two_threads_give_the_report_one_gives(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks small enough that a 64-host window is cut into many, in the clock fit and in
    both passes of the path statistics."""
    solve_module = importlib.import_module("cwctl.sync.solve")  # the package names a function so
    monkeypatch.setattr(solve_module, "ONE_PASS_ROWS", 40_000)
    monkeypatch.setattr(solve_module, "BLOCK_ROWS", 40_000)
    monkeypatch.setattr(cwctl.telemetry.blockwise, "BLOCK_ROWS", 40_000)
    one, two = _report("1", monkeypatch), _report("2", monkeypatch)
    assert one["sync"]["fit_blocks"] > 2
    assert one == two
    assert [s["element"] for s in two["suspects"]][:1] == ["spine2"]


def test_the_blocks_order_is_kept_whichever_finishes_first() -> None:
    def work(i: int) -> int:
        time.sleep(0.02 * (5 - i))  # the first blocks finish last
        return i * i

    assert map_blocks(work, range(5)) == [0, 1, 4, 9, 16]


def test_a_block_s_error_is_raised() -> None:
    def work(i: int) -> int:
        if i == 3:
            raise ValueError("block 3")
        return i

    with pytest.raises(ValueError, match="block 3"):
        map_blocks(work, range(6))


def test_threads_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: set[int] = set()

    def work(_: int) -> None:
        seen.add(threading.get_ident())
        time.sleep(0.01)

    monkeypatch.setenv(THREADS_ENV, "1")
    assert block_threads() == 1
    map_blocks(work, range(4))
    assert seen == {threading.get_ident()}  # one after another, here
    monkeypatch.setenv(THREADS_ENV, "3")
    assert block_threads() == 3
    for junk in ("0", "-2", "two", ""):
        monkeypatch.setenv(THREADS_ENV, junk)
        assert 1 <= block_threads() <= MAX_THREADS  # the cores, at most MAX_THREADS


def test_pipeline_works_every_item_in_order_beside_the_making_of_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(THREADS_ENV, "2")
    made: list[tuple[str, int, int]] = []
    worked: list[tuple[int, int]] = []

    def items():
        for i in range(5):
            made.append(("made", i, threading.get_ident()))
            yield i

    def work(i: int) -> None:
        time.sleep(0.01)
        worked.append((i, threading.get_ident()))

    pipeline(items(), work)
    assert [i for i, _ in worked] == list(range(5))
    assert {t for _, t in worked} != {threading.get_ident()}  # on the second thread
    assert all(t == threading.get_ident() for _, _, t in made)  # made here, in order


@pytest.mark.parametrize("threads", ["1", "2"])
def test_pipeline_raises_the_work_s_error(monkeypatch: pytest.MonkeyPatch, threads: str) -> None:
    monkeypatch.setenv(THREADS_ENV, threads)

    def work(i: int) -> None:
        if i == 2:
            raise ValueError("item 2")

    with pytest.raises(ValueError, match="item 2"):
        pipeline(iter(range(6)), work)


def test_the_simulator_s_chunks_pipelined_give_the_same_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every column of every record, and the truth's delays, the same to the bit, drawn
    and stamped one after another or side by side, in chunks of about 10 edges."""
    monkeypatch.setattr(cwctl.sim.exchanges, "CHUNK_ROWS", 1000)
    windows = []
    for threads in ("1", "2"):
        monkeypatch.setenv(THREADS_ENV, threads)
        model = FabricModel.leaf_spine(
            48, 8, 4, params=SimParams(rate=100.0), seed=5, faults=["switch:spine2:congested"]
        )
        windows.append(model.probe(0.5))
    one, two = windows
    for column in ("src", "dst", "sport", "pair", "idx", "t1", "t2", "t3", "t4"):
        assert np.array_equal(getattr(one.table, column), getattr(two.table, column)), column
    assert one.truth["paths"] == two.truth["paths"]
