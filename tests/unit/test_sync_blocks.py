"""The fit a block of pairs at a time: every pair whole in one block, rows in order, and
the same clocks as one pass over the table (to nanoseconds), as accurate against truth."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cwctl.scan.request import ProbeOverrides, ScanRequest, SimOptions
from cwctl.sync import solve
from cwctl.sync.blocks import pair_blocks
from cwctl.transport.sim import simulate
from tests.tables import edge_table

RATE_100 = ProbeOverrides(rate=100.0)


@settings(max_examples=50, deadline=None)
@given(
    rows=st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), min_size=1, max_size=300),
    block_rows=st.integers(1, 100),
)
def test_pair_blocks_partition_rows_by_unordered_pair(
    rows: list[tuple[int, int]], block_rows: int
) -> None:
    table = edge_table([a for a, _ in rows], [b for _, b in rows])
    blocks = pair_blocks(table, block_rows)
    everything = np.concatenate(blocks)
    assert sorted(everything.tolist()) == list(range(len(rows)))
    home: dict[tuple[int, int], int] = {}
    for b, idx in enumerate(blocks):
        assert (np.diff(idx) > 0).all()  # rows keep their order inside a block
        for i in idx.tolist():
            key = (min(rows[i]), max(rows[i]))
            assert home.setdefault(key, b) == b  # both directions of a pair together


def test_blocks_give_the_clocks_of_one_pass() -> None:
    options = SimOptions(hosts=48, hosts_per_leaf=8, seed=11)
    # rate 100: a second of probing with rows enough for five blocks
    collection = simulate(duration_s=1.0, request=ScanRequest(sim=options, overrides=RATE_100))
    table = collection.table
    whole = solve(table)
    blocks = solve(table, block_rows=len(table) // 5)
    assert blocks.quality["fit_blocks"] >= 5
    assert blocks.quality["pairs"] == whole.quality["pairs"]
    assert blocks.reference == whole.reference
    assert np.nanmax(np.abs(blocks.offset_ns - whole.offset_ns)) < 20.0
    truth = collection.truth["offset_ns"]  # type: ignore[index]
    true = np.array([truth[h] - truth[whole.reference] for h in whole.hosts])
    err_whole = np.nanpercentile(np.abs(whole.offset_ns - true), 99)
    err_blocks = np.nanpercentile(np.abs(blocks.offset_ns - true), 99)
    assert err_blocks <= 1.2 * err_whole + 5.0
