"""A pair whose every leg one way met a standing queue is weighed by its floor's excess."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cwctl.records import ProbeTable
from cwctl.sim import FabricModel, SimParams
from cwctl.sync import solve
from cwctl.sync.floors import floor_excess_ns
from cwctl.sync.solve import fit_table
from tests.unit.test_sync_sim import truth_errors

QUEUE_NS = 2_000_000  # a standing 2 ms queue on one direction of one pair


def _queued(table: ProbeTable, a: int, b: int) -> ProbeTable:
    """Every datagram from ``a`` to ``b`` 2 ms later: both probes of a coded pair alike
    (the coded filter cannot see it), answers leave and arrive that much later too."""
    t2, t3, t4 = table.t2.copy(), table.t3.copy(), table.t4.copy()
    fwd = (table.src == a) & (table.dst == b)  # a probes b: the probe waits
    t2[fwd] += QUEUE_NS
    t3[fwd] += QUEUE_NS
    t4[fwd] += QUEUE_NS
    rev = (table.src == b) & (table.dst == a)  # b probes a: a's reply waits
    t4[rev] += QUEUE_NS
    return dataclasses.replace(table, t2=t2, t3=t3, t4=t4)


@pytest.fixture(scope="module")
def window():  # type: ignore[no-untyped-def]
    params = SimParams(timestamps="hw", load=0.3, rate=50.0)
    return FabricModel.leaf_spine(hosts=32, params=params, seed=3).probe(1.0)


def _busiest_pairs(table: ProbeTable, n: int) -> list[tuple[int, int]]:
    lo, hi = np.minimum(table.src, table.dst), np.maximum(table.src, table.dst)
    keys, counts = np.unique(lo.astype(np.int64) * 4096 + hi, return_counts=True)
    return [divmod(int(k), 4096) for k in keys[np.argsort(-counts, kind="stable")[:n]]]


def test_a_queued_direction_moves_no_clock(window) -> None:  # type: ignore[no-untyped-def]
    clean = truth_errors(solve(window.table), window.truth)
    for a, b in _busiest_pairs(window.table, 3):
        queued = _queued(window.table, a, b)
        errors = truth_errors(solve(queued), window.truth)
        # unweighed, such a pair moved hosts by 10 to 440 us (its bias is half the queue)
        assert errors.max() <= clean.max() + 5.0, (window.table.hosts[a], errors.max())


def test_only_the_queued_pair_has_an_excess(window) -> None:  # type: ignore[no-untyped-def]
    (a, b), *_ = _busiest_pairs(window.table, 1)
    _, fits, _ = fit_table(_queued(window.table, a, b))
    excess = floor_excess_ns(fits, len(window.table.hosts))
    mine = (fits.lo == min(a, b)) & (fits.hi == max(a, b))
    assert excess[mine][0] == pytest.approx(QUEUE_NS / 2, rel=0.01)
    assert not excess[~mine].any()
    _, clean_fits, _ = fit_table(window.table)
    assert not floor_excess_ns(clean_fits, len(window.table.hosts)).any()
