"""The sliding solve's history: columns allocated once for the whole window, never grown
while the rounds keep their size; a long window fitted a block of pairs at a time."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from cwctl.records import ProbeTable
from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.sync import solve
from cwctl.sync.history import ProbeHistory
from cwctl.sync.incremental import SlidingSolver
from cwctl.watch.rounds import Watch
from tests.unit.sync_helpers import errors, make


def later(table: ProbeTable, s: float) -> ProbeTable:
    out = table.select(np.ones(len(table), np.bool_))
    for column in ("t1", "t2", "t3", "t4"):
        setattr(out, column, getattr(out, column) + int(s * 1e9))
    return out


def test_the_history_forgets_in_place_and_keeps_the_rows_in_order() -> None:
    table, _, _ = make(8, 3, seed=3, pairs_per_edge=10, duration_s=1.0)
    history = ProbeHistory(updates=3)
    history.append(table, None)
    columns = {k: v.ctypes.data for k, v in history.columns.items()}
    capacity = history.capacity
    assert capacity >= 3 * len(table)
    for k in range(1, 8):
        cutoff = int(later(table, k - 1.0).t1.min())  # the window: the last two updates
        kept = history.append(later(table, k), cutoff)
        assert len(kept) == 2 * len(table)
        assert np.array_equal(kept.t1[len(table) :], later(table, k).t1)  # newest last
        assert np.array_equal(kept.t1[: len(table)], later(table, k - 1).t1)
        assert np.array_equal(kept.src, np.concatenate([table.src, table.src]))
    assert {k: v.ctypes.data for k, v in history.columns.items()} == columns
    assert history.capacity == capacity and history.grown == 0


def test_an_update_larger_than_foreseen_grows_the_columns_and_says_so() -> None:
    table, _, _ = make(8, 3, seed=3, pairs_per_edge=10, duration_s=1.0)
    history = ProbeHistory(updates=1)
    history.append(table, None)
    both = history.append(later(table, 1.0), None)
    assert history.grown == 1 and len(both) == 2 * len(table)
    assert np.array_equal(both.t1, np.concatenate([table.t1, later(table, 1.0).t1]))


def test_a_window_fitted_in_blocks_agrees_with_one_pass() -> None:
    table, clocks, _ = make(40, 6, seed=8, noise_ns=10.0, pairs_per_edge=40, duration_s=4.0)
    whole = SlidingSolver(window_s=10.0).update(table)
    blocks = SlidingSolver(window_s=10.0, block_rows=len(table) // 5)
    blocked = blocks.update(table)
    assert blocked.quality["fit_blocks"] >= 5
    assert np.allclose(blocked.offset_ns, whole.offset_ns, atol=1.0)
    assert np.max(np.abs(errors(blocked, clocks)[0])) < 20.0
    assert np.allclose(blocked.offset_ns, solve(table).offset_ns, atol=1.0)


def test_a_watchs_history_is_allocated_at_its_first_round_and_never_grows() -> None:
    """64 simulated hosts, rounds of 10 coded pairs a peer: the window (120 pairs a peer)
    is full after 12 rounds; its columns are the same arrays from round 1 to round 30."""
    request = ScanRequest(
        sim=SimOptions(hosts=64), duration_s=0.5, overrides=ProbeOverrides(rate=20.0)
    )
    seen: list[dict[str, Any]] = []

    async def rounds() -> None:
        watch = Watch(request)
        try:
            for _ in range(30):
                assert await watch.round() is not None
                history = watch.session._solver.history  # type: ignore[union-attr]
                assert history is not None
                seen.append(
                    {
                        "arrays": {k: v.ctypes.data for k, v in history.columns.items()},
                        "nbytes": history.nbytes,
                        "capacity": history.capacity,
                        "rows": history.rows,
                        "grown": history.grown,
                    }
                )
        finally:
            await watch.aclose()

    asyncio.run(rounds())
    first = seen[0]
    per_round = first["rows"]
    assert all(s["arrays"] == first["arrays"] for s in seen)  # never reallocated
    assert all(s["nbytes"] == first["nbytes"] for s in seen)
    assert all(s["grown"] == 0 for s in seen)
    assert first["capacity"] >= 12 * per_round  # sized for the full window from round 1
    full = [s["rows"] for s in seen[12:]]
    assert max(full) == min(full) == 12 * per_round  # full, and no longer
